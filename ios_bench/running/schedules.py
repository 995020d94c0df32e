"""IOS schedules: each IOS cell's schedule is optimized in a worker of its own (``optimize``) and
only ever timed in fresh ones; two IOS cells of a group whose schedules are identical (the same
:func:`schedule_hash`) are one measurement (:func:`same_schedules`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ios_bench.planning.cells import Cell, safe_name
from ios_bench.planning.plan import DEFAULT_IOS_PROVIDER, PRIVATE_PROFILE_DB, Plan, ios_options_tag, optimized_for
from ios_bench.records.runfolder import read_json
from ios_bench.running.context import SweepContext
from ios_bench.running.executors import Task, device_kind
from ios_bench.running.references import model_inputs


def schedule_hash(path: Path) -> str | None:
    """A schedule file's identity: the SHA-1 of its blocks' stages (what the runtime executes), or
    None where the file cannot be read."""
    try:
        data = json.loads(path.read_bytes())
        stages = [b.get("stages") for b in data.get("blocks", [])]
    except (OSError, ValueError, AttributeError):
        return None
    return hashlib.sha1(json.dumps(stages, sort_keys=True).encode()).hexdigest()[:16]


def schedule_path(plan: Plan, cell: Cell) -> str:
    """Where an IOS cell's schedule is kept in the run folder (``schedules/...json``)."""
    opts = plan.ios_options or {}
    provider = cell.provider or DEFAULT_IOS_PROVIDER
    suffix = ("" if provider == DEFAULT_IOS_PROVIDER else f"-{provider}") + ios_options_tag(opts)
    # a schedule searched at a reduced precision is its own (its stage costs measured at it): an fp32
    # schedule is never assumed best at int8; an fp32 cell keeps the path it always had
    precision = getattr(cell, "precision", None) or "fp32"
    suffix += "" if precision == "fp32" else f"-{precision}"
    # one schedule per batch size it is optimized for (search_key's): with optimize_batch, every cell of
    # the run executes the same schedule (optimized by the first, reused by the others)
    opt_bs = search_key(cell, opts)[1]
    return "schedules/" + safe_name(f"{cell.model}-b{opt_bs}-{cell.device}-{cell.schedule}{suffix}") + ".json"


def search_key(cell, ios_options: dict | None = None) -> tuple:
    """The search worker an IOS cell's schedule is searched in: (model spec, the batch it is searched
    at, kernel provider, precision, device), one worker each (:func:`optimize_schedules`; the sweep's
    estimate counts its searches by the same key, :func:`search_workers`). The batch is the one the
    schedule is optimized for (``ios_options``, the plan's: ``optimize_batch`` where given, else the
    cell's own; ``ios_bench.planning.plan.optimized_for``), as in :func:`schedule_path`, which takes
    its batch from here: cells of two batch sizes that share one schedule file share one worker."""
    batch = optimized_for(ios_options or {}, cell.batch_size, None)["batch_size"]
    return (cell.model_spec, batch, cell.provider or DEFAULT_IOS_PROVIDER,
            getattr(cell, "precision", None) or "fp32", cell.device)


def search_workers(plan: Plan, folder: Path, cells: list) -> dict[tuple, list[tuple]]:
    """The schedule searches still to make for ``cells`` (IOS cells whose schedule file the run folder
    lacks): {:func:`search_key`: [(the first cell of each schedule file, its path), ...]}."""
    wanted: dict[tuple, list[tuple]] = {}
    for cell in cells:
        if not cell.schedule:
            continue
        path = schedule_path(plan, cell)
        if not (Path(folder) / path).exists():
            key = search_key(cell, plan.ios_options)
            if path not in [p for _, p in wanted.get(key, [])]:
                wanted.setdefault(key, []).append((cell, path))
    return wanted


def optimize_schedules(ctx: SweepContext, cells: list[Cell]) -> dict[str, dict]:
    """Each IOS cell's schedule, optimized where the run has none yet: one worker per (model,
    batch, provider, precision, device) searches its schedules with one cost model (its stages timed at
    that precision), and never times them (:func:`search_workers`).
    Returns {cell key: {"path", "hash", "figures", "optimize_seconds", "reused"} or {"failed":
    reason, ...}}."""
    plan, folder = ctx.plan, ctx.folder
    out: dict[str, dict] = {}
    wanted = search_workers(plan, folder, cells)
    tasks = []
    for (model_spec, bs, provider, precision, device), items in wanted.items():
        first = items[0][0]
        stem = safe_name(f"{first.model}-b{bs}-{device}-{provider}" + ("" if precision == "fp32" else f"-{precision}"))
        spec = {"task": "optimize", "spin_policy": plan.spin_policy, "model_spec": model_spec, "batch_size": bs,
                "device": device_kind(device), "schedules": [c.schedule for c, _ in items],
                "schedule_paths": [p for _, p in items], "provider": provider, "threads": plan.threads,
                "seed": plan.seed, "cost_model": plan.cost_model, "result_path": f"work/{stem}.optimize.json",
                "precision": precision}
        if plan.ios_options:
            spec["ios_options"] = dict(plan.ios_options)
            if plan.ios_options.get("cost_cache") == "private":
                spec["profile_db_path"] = PRIVATE_PROFILE_DB
        inputs = model_inputs(folder, spec, model_spec)
        outputs = [p[: -len(".json")] + ext for _, p in items for ext in (".json", ".npz", ".stats")]
        tasks.append(Task(f"optimize:{stem}", spec, f"logs/{stem}.optimize.log",
                          plan.timeout + plan.optimize_timeout * len(items), device, plan.threads, inputs,
                          outputs, first.nodes, payload=items))
    if tasks:
        ctx.say(f"optimizing {sum(len(t.payload) for t in tasks)} IOS schedule(s) in {len(tasks)} worker(s) "
                "of their own (never the ones that time them)")
    results: dict[str, dict] = {}
    for task, res in zip(tasks, ctx.executor.probe(tasks) if tasks else []):
        done = res.get("schedules") if res.get("status") == "ok" and isinstance(res.get("schedules"), list) else []
        for i, (_, path) in enumerate(task.payload):
            one = done[i] if i < len(done) and isinstance(done[i], dict) else None
            results[path] = one or {"status": "failed", "reason": res.get("reason") or "no result",
                                    "stderr_tail": res.get("stderr_tail", "")}
    for cell in cells:
        path = schedule_path(plan, cell)
        res = results.get(path)
        if res is not None and res.get("status") != "ok":
            out[cell.key] = {"failed": f"optimize: {res.get('reason')}", "stderr_tail": res.get("stderr_tail", "")}
            continue
        if not (folder / path).exists():
            out[cell.key] = {"failed": "optimize: no schedule was written"}
            continue
        figures = read_json(folder / (path[: -len(".json")] + ".stats")) or {}
        out[cell.key] = {"path": path, "hash": schedule_hash(folder / path), "figures": figures,
                         "optimize_seconds": res.get("optimize_seconds") if res else None,
                         "reused": res is None}
    return out


def same_schedules(cells: list[Cell], scheds: dict) -> dict[str, str]:
    """IOS cells whose schedule is identical to another's of the same group, provider and precision: {cell
    key: the key of the cell measured for both} (the sequential cell where it is one of them)."""
    same: dict[str, str] = {}
    by_id: dict[tuple, list[Cell]] = {}
    for c in cells:
        h = (scheds.get(c.key) or {}).get("hash") if c.schedule else None
        if h:
            # one precision's cells only: the same stages at int8 are another measurement than at fp32
            by_id.setdefault((c.group, c.provider, h, c.variant, c.precision), []).append(c)
    for members in by_id.values():
        if len(members) < 2:
            continue
        first = next((c for c in members if c.schedule == "sequential"), members[0])
        for c in members:
            if c is not first:
                same[c.key] = first.key
    return same


def predicted_same(cells: list[Cell], graphs: dict, composed: bool = False) -> dict[str, str]:
    """What :func:`same_schedules` will find before any search runs, where it is certain: the IOS cells of
    a graph with one execution order (``ios_core.optimizer.optimize.only_sequential``: every block a chain,
    as in alexnet and the vggs) run its sequential schedule, {cell key: the sequential cell's key} for
    each group, provider and precision with a sequential cell. Greedy always does; the DP's strategies
    do where the cost model prices a group of the chain as its operators one by one (``composed``: the
    measured cost model on the CPU, whose stages are composed from their operators: ``schedule`` then
    breaks the tie towards the sequential schedule), else they may group the chain (another schedule).
    ``graphs``: {graph name: Graph}. Other graphs' twins are found by the schedules' hashes after the
    searches."""
    from ios_core.optimizer.optimize import only_sequential

    chain = {name: only_sequential(g) for name, g in graphs.items()}
    by_id: dict[tuple, dict[str, Cell]] = {}
    for c in cells:
        certain = c.schedule == "greedy" or composed and str(c.device).startswith("cpu")
        if c.schedule and chain.get(c.model) and (c.schedule == "sequential" or certain):
            by_id.setdefault((c.group, c.provider, c.variant, c.precision), {})[c.schedule] = c
    return {c.key: m["sequential"].key for m in by_id.values() if "sequential" in m
            for s, c in m.items() if s != "sequential"}


def schedule_fields(sched: dict) -> dict:
    """What an IOS cell's record says of its schedule: the optimizer's figures and the file."""
    return {**(sched.get("figures") or {}), "schedule_file": sched["path"], "schedule_hash": sched.get("hash"),
            "optimize_seconds": sched.get("optimize_seconds"), "schedule_reused": sched.get("reused")}
