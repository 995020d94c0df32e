"""A worker's ``optimize`` task (``ios_bench.running.worker``): an IOS cell's schedules searched with one cost
model and saved with their figures (``schedules/``); never timed in this process."""

from __future__ import annotations

import json
import os
import time

from ios_bench.records.record import jsonable
from ios_bench.running.task_setup import _load_graph


def _make_cost_model(kind: str, device: str, threads: int | None, provider: str = "torch", cache=True,
                     precision: str = "fp32"):
    """``ios_core.cost.make_cost_model``: the measured model times stages on this device with the
    cell's thread budget and kernel provider (and its persistent profile cache - ``cache``: True
    for the shared one, False for none, or a database file; its default mode, ``calibrated``);
    the synthetic one needs nothing. ``precision``: the cell's; the measured model times each stage
    compiled at it (its own database key: fp32 figures are never reused for int8); the learned one
    predicts for the cell's provider and thread budget (a model fitted without them refuses, one line)
    and refines its picks on the cell's device, and it is fitted at fp32 and refuses another
    (``ios_core.cost.learned.precision_reason``: the schedule fails with it, where the sweep has not
    already skipped the cell)."""
    from ios_core.cost import make_cost_model

    extra = {"precision": precision} if precision != "fp32" else {}
    if kind == "measured":
        return make_cost_model("measured", device=device, threads=threads, provider=provider, cache=cache, **extra)
    if kind == "learned":
        return make_cost_model(kind, device=device, threads=threads, provider=provider, cache=cache, **extra)
    return make_cost_model(kind)


# what a schedule's .stats file keeps (a cell that reuses the schedule reports them too)
_SAVED_KEYS = ("predicted_ms", "cost_model", "optimize_stats", "validation", "optimized_for", "optimize_figures",
               "cost_model_stats", "schedule_search_seconds")


# the search's figures kept in the record (OptimizeStats fields)
_SEARCH_FIGURES = ("states", "transitions", "stages_costed", "search_seconds", "num_stages", "merged",
                   "blocks_reused", "rounds", "search_budget_s", "budget_greedy_blocks")


def optimize_target(spec: dict) -> dict:
    """What an IOS cell's schedule is optimized for: its own batch size and thread budget, pruning
    r=3, s=8 and the shared profile database, unless the sweep's IOS options
    (``spec["ios_options"]``, see ``ios_bench.planning.plan.IOS_OPTIONS``) say otherwise."""
    opts = spec.get("ios_options") or {}
    return {"batch_size": int(opts.get("optimize_batch", spec["batch_size"])),
            "threads": opts.get("optimize_threads", spec.get("threads")),
            "max_group_size": int(opts.get("max_group_size", 3)),
            "max_num_groups": int(opts.get("max_num_groups", 8)),
            "cost_cache": opts.get("cost_cache", "default"),
            **({"search_seconds": int(opts["search_seconds"])} if "search_seconds" in opts else {})}


def _schedule(graph, spec: dict, result: dict, cost=None):
    """The IOS schedule for this (model, batch, device): optimized now, or loaded from the run.

    The schedule is persisted only through ``Graph.save``/``Graph.load`` (the JSON in the
    reference layout and its weights as ``.npz`` beside it; the optimizer's figures - estimate,
    cost model, stats, validation - in a ``.stats`` file written before them, so a reused cell
    reports them too), so a model's own weights - and those the optimizer derived for merged
    operators - are kept exactly; nothing is re-seeded. A
    schedule whose weights are missing (a run killed between the two files) is searched again.
    """
    from ios_core.ir import Graph

    path = spec["schedule_path"]
    if os.path.exists(path):
        sched = Graph.load(path)
        if sched.has_weights:
            result["optimize_seconds"] = None
            result["schedule_reused"] = True
            saved = _read_json(path[: -len(".json")] + ".stats") or {}
            for key in _SAVED_KEYS:
                if key in saved:
                    result[key] = saved[key]
            return sched
    if not spec.get("optimize"):  # a round never searches: its schedule was optimized in a worker of its own
        raise RuntimeError(f"no schedule at {path} (it is optimized by an optimize task before any round)")
    from ios_core.optimizer import schedule

    target = optimize_target(spec)
    if cost is None:
        cost = _cost_model_for(spec, target)
    t0 = time.perf_counter()
    optimized = schedule(graph, spec["schedule"], cost, batch_size=target["batch_size"],
                         max_group_size=target["max_group_size"], max_num_groups=target["max_num_groups"],
                         search_seconds=target.get("search_seconds"))
    sched = optimized.graph
    result["optimize_seconds"] = time.perf_counter() - t0
    result["schedule_search_seconds"] = result["optimize_seconds"]  # kept with the schedule (.stats)
    result["optimized_for"] = target
    result["cost_model"] = spec["cost_model"]
    if callable(getattr(cost, "stats", None)):
        result["cost_model_stats"] = {k: v for k, v in cost.stats().items() if jsonable(v)}
    stats = optimized.stats
    result["predicted_ms"] = stats.cost_ms  # the DP's estimate of the schedule handed over (an estimate)
    if stats.validation:
        result["validation"] = {k: v for k, v in stats.validation.items() if jsonable(v)}
    result["optimize_stats"] = stats.summary()
    result["optimize_figures"] = {k: getattr(stats, k) for k in _SEARCH_FIGURES}
    if not sched.has_weights:
        raise RuntimeError(f"the optimizer returned {spec['schedule']!r} schedule without weights")
    from ios_core.atomic import atomic_write_text

    saved = {k: result[k] for k in _SAVED_KEYS if k in result}
    atomic_write_text(path[: -len(".json")] + ".stats", json.dumps(saved, indent=1, default=str))
    sched.save(path)  # the schedule and its weights (Graph.save), after its figures
    return sched


def _cost_model_for(spec: dict, target: dict):
    """The cost model an IOS schedule is searched with: the sweep's kind, on the cell's provider, with
    the thread budget and profile database it is optimized for (``optimize_target``)."""
    cache = {"default": True, "off": False}.get(target["cost_cache"], spec.get("profile_db_path"))
    precision = spec.get("precision") or "fp32"  # the cell's: its stages timed at it
    return _make_cost_model(spec["cost_model"], spec["device"], target["threads"], spec.get("provider", "torch"),
                            cache=cache, **({"precision": precision} if precision != "fp32" else {}))


def task_optimize(spec: dict) -> dict:
    """The schedules of one (model, batch, device, provider): each searched, validated by the
    optimizer and saved with its figures (``schedules/``), sharing one cost model (its stage
    costs measured once for all of them). The process that searched them never times them: rounds
    run in fresh ones. A schedule that fails is reported alone (``schedules[i]``, in the spec's order)."""
    graph = _load_graph(spec)
    out: list[dict] = []
    cost = None
    target = optimize_target(spec)
    for strategy, path in zip(spec["schedules"], spec["schedule_paths"]):
        result: dict = {}
        one = {**spec, "schedule": strategy, "schedule_path": path, "optimize": True}
        try:
            if cost is None:
                cost = _cost_model_for(spec, target)
            _schedule(graph, one, result, cost)
            out.append({"status": "ok", **{k: v for k, v in result.items() if jsonable(v)}})
        except Exception as e:  # this schedule fails; the others may still be searched
            import traceback

            traceback.print_exc()
            msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
            out.append({"status": "failed", "reason": f"{type(e).__name__}" + (f": {msg}" if msg else "")})
    return {"status": "ok", "schedules": out}


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
