"""The sweep's orchestrator: models x batch sizes x (frameworks + IOS schedules) x devices.

Every task runs in its own worker process (:mod:`ios_bench.worker`, started by
:func:`ios_bench.launch.run_worker` through an executor); the parent never imports a framework.

1. **Probe**: which adapters and IOS kernel providers run where.
2. **References**: per (model, batch) one worker computes the oracle output once (``refs/``); a
   failure there fails only that batch size's cells.
3. **Schedules**: each IOS cell's schedule is optimized in a worker of its own (``optimize``) and
   only ever timed in fresh ones. Two IOS cells of a group whose schedules are identical (the same
   schedule hash, e.g. IOS-Both where validation kept the sequential schedule) are one measurement.
4. **Rounds** (:mod:`ios_bench.rounds`): each cell is measured in ``plan.rounds`` fresh workers;
   within a (model, batch, device) group the cells of one round run in an order shuffled from
   ``plan.round_seed``; each round records what else used the machine and a canary
   (``ios_core.interference``); disturbed rounds are measured again (at most ``plan.max_reruns``
   times per cell), kept in the record and never pooled. ``rounds="auto"`` adds rounds until
   every cell's interval is under ``plan.target_ci`` percent, or ``plan.time_budget`` is spent.
5. The cell's record (``ios_bench.record``) carries its figure over rounds, every round, and is
   appended to the store (``ios_bench.results``); ``--resume`` reuses finished cells and the
   rounds already measured (``rounds/``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import time
from pathlib import Path

from ios_core.atomic import atomic_write_json
from ios_core.threads import ENV_VARS, spin_env, spin_policy, thread_env, usable_cores

from . import envinfo, estimate
from .cells import Cell, CellSpec, describe, label, node_env_path, ref_file, safe_name, schedule_key, util_file
from .clocks import STATE_FILE as CLOCK_STATE_FILE
from .clocks import ClockLock
from .errors import InputError
from .escape import term
from .executors import Executor, LocalExecutor, Task, device_kind
from .locks import FileLock
from .plan import (
    DEFAULT_IOS_PROVIDER,
    DEFAULT_SCHEDULES,
    IOS_ADAPTER,
    PRIVATE_PROFILE_DB,
    SLOW_FRAMEWORKS,
    Plan,
    adapter_options,
    ios_options_problem,
    ios_options_tag,
    optimized_for,
)
from .record import SCHEMA, round_fields
from .results import Store, check_record
from .rounds import (
    AUTO,
    MAX_AUTO_ROUNDS,
    MIN_AUTO_ROUNDS,
    MIN_ROUNDS_FOR_VERDICT,
    judge_rounds,
    needs_more,
    round_order,
    summarize,
    usual_canary,
)
from .runfolder import RunFolder, check_writable, npy_ok, read_json
from .scenarios import LATENCY
from .scenarios import cells as scenario_cells
from .scenarios import summary as scenario_summary


class MaxTimeReached(Exception):
    """``--max-time`` was spent: no further worker starts; what finished is kept for --resume."""


def schedule_hash(path: Path) -> str | None:
    """A schedule file's identity: the SHA-1 of its blocks' stages (what the runtime executes), or
    None where the file cannot be read."""
    try:
        data = json.loads(path.read_bytes())
        stages = [b.get("stages") for b in data.get("blocks", [])]
    except (OSError, ValueError, AttributeError):
        return None
    return hashlib.sha1(json.dumps(stages, sort_keys=True).encode()).hexdigest()[:16]


def merge_probes(probes: list[tuple[str, dict]]) -> dict:
    """One probe for a device from its nodes' probes: an adapter is available when one node runs
    it (``nodes``: those node ids; ``reason``: the first node's reason when none does)."""
    merged = {"status": "failed", "adapters": {}, "optimize": False, "optimize_nodes": []}
    reasons = []
    for nid, p in probes:
        if p.get("status") != "ok":
            reasons.append(p.get("reason"))
            continue
        merged["status"] = "ok"
        if p.get("optimize"):
            merged["optimize"] = True
            merged["optimize_nodes"].append(nid)
        for name, reason in (p.get("providers") or {}).items():  # a provider is available where one node runs it
            providers = merged.setdefault("providers", {})
            if reason is None or name not in providers:
                providers[name] = reason
        for name, info in (p.get("adapters") or {}).items():
            m = merged["adapters"].setdefault(name, {**info, "nodes": []})
            if not info.get("reason"):
                if m.get("reason"):
                    m.update({**info, "nodes": m["nodes"]})
                m["nodes"].append(nid)
    if merged["status"] != "ok":
        merged["reason"] = "; ".join(str(r) for r in reasons)
    return merged


# ---- the sweep --------------------------------------------------------------------------------

class Sweep:
    def __init__(self, plan: Plan, folder: str | os.PathLike, console=None, resume: bool = False,
                 progress: bool = True, executor: Executor | None = None, retry_failed: bool = False,
                 max_time: float | None = None):
        from rich.console import Console

        problem = ios_options_problem(plan.ios_options)
        if problem:
            raise InputError(problem)
        if plan.rounds != AUTO and plan.time_budget is not None:
            need = estimate.min_round_seconds(plan.repeat, plan.min_sample_ms)
            if plan.time_budget < need:
                raise InputError(f"--time-budget {plan.time_budget:g} s cannot fit one round of one cell "
                                 f"(at least {need:.1f} s: a worker's start and {plan.repeat} samples of "
                                 f"{plan.min_sample_ms or 0:g} ms)")
        self.plan = plan
        self.folder = Path(folder)
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.resume = resume or retry_failed
        self.retry_failed = retry_failed
        self.show_progress = progress
        self.store = Store(self.folder)
        self.run_folder = RunFolder(self.folder)
        self.notes: list[str] = []
        self.executor = executor or LocalExecutor()
        self.placement: dict[str, dict] = {}  # device -> nodes offering it, and why the others do not
        self._fresh = False
        self._prepared = False  # set once prepare_folder has written the store and the plan
        self.max_time = max_time  # seconds after which no worker starts (--max-time); None: no limit
        self._t_start = time.monotonic()

    # -- setup ----------------------------------------------------------------------------------
    def prepare_folder(self) -> None:
        check_writable(self.folder)
        if not self.resume and self.store.path.exists() and self.store.path.stat().st_size:
            raise InputError(f"{self.folder} already holds results; use --resume to continue it or another --out")
        self.run_folder.make_subfolders()
        msg = self.store.repair()
        if msg:
            self.say(f"[yellow]warning:[/] {term(msg)}")
        self.store.path.touch()  # an empty store is a valid run (and reportable)
        atomic_write_json(self.run_folder.plan_file, self.plan.to_dict())
        self._prepared = True  # a run folder now (an empty store is a valid run): kept from here on

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def _warn_ignored(self, message: str) -> None:
        self.say(f"[yellow]warning:[/] {message}; its earlier sessions are not kept")

    def probe(self) -> dict:
        """Which adapters run where (and their versions), asked in a worker on every node that offers
        each device, so that the driver imports no framework. Only the named frameworks are probed
        when the plan names them. Returns {device: merged probe}: an adapter is available for a
        device when one of its nodes runs it (``nodes`` lists those node ids)."""
        names = None
        if self.plan.frameworks is not None:
            names = list(self.plan.frameworks) + [IOS_ADAPTER]
        timeout = max(self.plan.timeout, 120)
        per_node: dict[tuple[str, str], dict] = {}  # (node id, kind) -> probe
        wanted: dict[str, list] = {}
        for device in self.plan.devices:
            nodes, why = self.executor.match(device)
            wanted[device] = nodes
            self.placement[device] = {"nodes": [n.name for n in nodes], "not": why}
            for n in nodes:
                per_node.setdefault((n.id, device_kind(device)), {})
        tasks = [self._probe_task(nid, kind, names, timeout) for nid, kind in per_node]
        for t, res in zip(tasks, self.executor.probe(tasks)):
            if res.get("status") != "ok":
                # frameworks imported together can clash (one crash takes all down): ask one by one
                self.say(f"[yellow]warning:[/] probing all frameworks at once failed on {term(res.get('node'))} "
                         f"({term(res.get('reason'))}); probing them one by one")
                import adapters

                nid, kind = t.payload
                res = {**res, "status": "ok", "adapters": {}, "optimize": False}
                ones = [self._probe_task(nid, kind, [name], timeout) for name in names or adapters.names()]
                for one_task, one in zip(ones, self.executor.probe(ones)):
                    name = one_task.spec["names"][0]
                    if one.get("status") == "ok":
                        res["adapters"].update(one.get("adapters") or {})
                        res["optimize"] = res["optimize"] or bool(one.get("optimize"))
                    else:
                        res["adapters"][name] = {"reason": f"probe failed: {one.get('reason')}", "version": None}
            per_node[t.payload] = res
        probes = {}
        for device in self.plan.devices:
            nodes = wanted[device]
            if not nodes:
                why = "; ".join(f"{k} {v}" for k, v in self.placement[device]["not"].items()) or "no nodes"
                probes[device] = {"status": "ok", "no_node": f"no node offers {device} ({why})", "adapters": {},
                                  "optimize": False}
                continue
            probes[device] = merge_probes([(n.id, per_node[(n.id, device_kind(device))]) for n in nodes])
        return probes

    def _probe_task(self, node_id: str, kind: str, names: list[str] | None, timeout: float):
        stem = safe_name(f"probe-{kind}" + (f"-{node_id[:12]}" if self.executor.name != "local" else "")
                         + (f"-{names[0]}" if names and len(names) == 1 else ""))
        spec = {"task": "probe", "spin_policy": self.plan.spin_policy, "device": kind, "names": names,
                "result_path": f"work/{stem}.json"}
        return Task(stem, spec, f"logs/{stem}.log", timeout, kind, self.plan.threads, nodes=[node_id],
                    payload=(node_id, kind))

    def plan_cells(self, probes: dict, graphs: dict) -> list[Cell]:
        import adapters

        plan = self.plan
        cells: list[Cell] = []
        noted = set()
        for device in plan.devices:
            probe = probes.get(device) or {}
            avail = probe.get("adapters") or {}
            no_node = probe.get("no_node")
            if probe.get("status") != "ok":
                self.say(f"[red]probe failed on {term(device)}:[/] {term(probe.get('reason'))}")
            peers = [n for n in adapters.names() if n != IOS_ADAPTER]
            if no_node:  # every cell of this device is skipped, and shown as such before anything runs
                fws = plan.frameworks if plan.frameworks is not None else [n for n in peers
                                                                          if n not in SLOW_FRAMEWORKS]
                fw_cells = [(n, no_node) for n in fws]
            elif plan.frameworks is None:
                fws = []
                for n in peers:
                    reason = (avail.get(n) or {}).get("reason", "not probed")
                    if device_kind(device) not in (avail.get(n) or {}).get("devices", [device_kind(device)]):
                        continue  # a GPU-only adapter in a CPU sweep (or the reverse): not a finding
                    if n in SLOW_FRAMEWORKS:
                        note = f"{n}: left out of the default sweep ({SLOW_FRAMEWORKS[n]}; name it with --frameworks)"
                    elif reason:
                        note = f"{n} unavailable on {device}: {reason}"
                    else:
                        fws.append(n)
                        continue
                    if note not in noted:
                        noted.add(note)
                        self.notes.append(note)
                fw_cells = [(n, None) for n in fws]
            else:
                fw_cells = [(n, (avail.get(n) or {}).get("reason", "not probed")) for n in plan.frameworks]
            ios_reason = None
            if no_node:
                ios_reason = no_node
            elif not probe.get("optimize"):
                ios_reason = "the IOS optimizer (ios_core.optimize with ios_core.cost) is not installed"
            elif (avail.get(IOS_ADAPTER) or {"reason": f"adapter {IOS_ADAPTER!r} is not installed"}).get("reason"):
                ios_reason = (avail.get(IOS_ADAPTER) or {}).get("reason") or f"adapter {IOS_ADAPTER!r} is not installed"
            if plan.schedules is None and not no_node:
                scheds = [] if ios_reason else list(DEFAULT_SCHEDULES)
                if ios_reason:
                    self.notes.append(f"IOS schedules left out on {device}: {ios_reason}")
                sched_cells = [(s, None) for s in scheds]
            else:
                scheds = plan.schedules if plan.schedules is not None else list(DEFAULT_SCHEDULES)
                sched_cells = [(s, ios_reason) for s in scheds]
            ios_nodes = [n for n in (avail.get(IOS_ADAPTER) or {}).get("nodes") or []
                         if n in (probe.get("optimize_nodes") or [])]
            for spec in plan.models:
                g = graphs[spec]
                for bs in plan.batch_sizes:  # each cell's weight (the progress ETA) is set by _estimate
                    for fw, reason in fw_cells:
                        cells.append(Cell(g.name, spec, bs, fw, device, None, fw, 1.0, reason,
                                          (avail.get(fw) or {}).get("nodes")))
                    for s, reason in sched_cells:
                        for prov in self._providers(probe, device):
                            cells.append(Cell(g.name, spec, bs, schedule_key(s, prov), device, s, IOS_ADAPTER,
                                              1.0, reason, ios_nodes, provider=prov))
        if plan.scenario != LATENCY:  # one cell per instance/thread configuration (ios_bench.scenarios)
            cells, notes, self._scenario_refusals = scenario_cells.expand(
                cells, plan, {d: (probes.get(d) or {}).get("adapters") or {} for d in plan.devices})
            self.notes += [n for n in notes if n not in self.notes]
        return cells

    def show_placement(self, cells: list[Cell]) -> None:
        """Which nodes can run which cells (printed before anything runs; kept in env.json)."""
        names = {n.id: n.name for n in self.executor.nodes}
        for device in self.plan.devices:
            mine = [c for c in cells if c.device == device and not c.skip_reason]
            counts = {names[nid]: sum(1 for c in mine if c.nodes is None or nid in c.nodes)
                      for nid in names if names[nid] in self.placement.get(device, {}).get("nodes", [])}
            self.placement.setdefault(device, {})["cells"] = counts
            if self.executor.name == "local" and len(self.executor.nodes) == 1:
                continue
            where = ", ".join(f"{n} ({k} cells)" for n, k in counts.items()) or "no node"
            self.say(term(f"plan: {device} -> {where}"))
            for n, why in self.placement.get(device, {}).get("not", {}).items():
                self.say(f"[dim]{term(f'      not on {n}: {why}')}[/]")

    def _estimate(self, cells: list[Cell], graphs: dict, cpu: dict) -> dict:
        """Print (and return, for env.json) the sweep's estimated duration (``ios_bench.estimate``):
        earlier runs on this machine where they measured a cell, else the stated model."""
        plan = self.plan
        hist = estimate.learn(estimate.earlier_runs(self.folder), cpu)
        named = {g.name: g for g in graphs.values()}
        model = estimate.Model(hist, {n: g.macs() for n, g in named.items()},
                               {n: g.num_operators() for n, g in named.items()}, warmup=plan.warmup,
                               repeat=plan.repeat * plan.number, min_sample_ms=plan.min_sample_ms or 0.0)
        if plan.scenario != LATENCY:  # a LoadGen round lasts its tests (ios_bench.scenarios.cells)
            model = scenario_cells.RoundEstimate(model, plan)
        rounds = plan.rounds if plan.rounds != AUTO else MIN_AUTO_ROUNDS
        refs = {(c.model, c.batch_size) for c in cells if not npy_ok(self.folder / ref_file(c.model, c.batch_size))}
        searches = {(c.model, c.batch_size, c.provider or DEFAULT_IOS_PROVIDER) for c in cells
                    if c.schedule and not (self.folder / self._schedule_path(c)).exists()}
        left = {c.key: max(0, rounds - sum(1 for r in self.run_folder.rounds(c.key)
                                            if r.get("status") == "ok" and not r.get("disturbed"))) for c in cells}
        est = estimate.sweep_seconds(model, cells, left, refs, searches)
        for c in cells:  # the progress bar's ETA follows the same model
            c.weight = model.round_s(c.model, c.batch_size, c.framework)
        if not cells:
            return {"seconds": 0.0, "cells": 0}
        where = ", ".join(f"{src} for {n}" for src, n in est["from"].items())
        more = " (at least: --rounds auto may add rounds)" if plan.rounds == AUTO else ""
        self.say(f"estimated duration: about {estimate.human(est['seconds'])}{more} for {len(cells)} cells x "
                 f"{rounds} rounds, {len(refs)} reference outputs and {len(searches)} schedule searches "
                 f"(an estimate: latencies from {where}; docs/harness.md)")
        if self.max_time is not None and est["seconds"] > self.max_time:
            self.say(f"[yellow]--max-time {estimate.human(self.max_time)} is less than the estimate:[/] the sweep "
                     "stops when it is spent and can be continued with --resume")
        return {"seconds": round(est["seconds"], 1), "cells": len(cells), "rounds": rounds, "from": est["from"],
                "earlier_runs": hist.runs, "model": "ios_bench.estimate (stated model, earlier runs' figures)"}

    def check_time(self, what: str) -> None:
        """Raise :class:`MaxTimeReached` once ``--max-time`` is spent (before ``what`` starts)."""
        if self.max_time is not None and time.monotonic() - self._t_start >= self.max_time:
            raise MaxTimeReached(f"--max-time {estimate.human(self.max_time)} spent before {what}")

    def _memory_skips(self, cells: list[Cell], refs: dict) -> dict[str, str]:
        """{cell key: why it cannot start} for the cells whose estimated memory exceeds what is
        available now (local executor: a fleet's nodes are not this machine)."""
        if self.executor.name != "local":
            return {}
        hist = getattr(self, "_history", None)
        if hist is None:
            hist = self._history = estimate.History()
            for rec in self.store.records(on_problem=lambda m: None):
                hist.add(rec)
        acts = {m: ref.get("activation_mib") for (m, _), ref in refs.items() if ref.get("activation_mib") is not None}
        weights = {m: ref.get("weights_mib") for (m, _), ref in refs.items() if ref.get("weights_mib") is not None}
        avail = estimate.available_mib()
        out = {}
        for c in cells:
            if c.model not in acts or c.model not in weights:
                continue
            need = estimate.cell_memory_mib(c.framework, weights[c.model], acts[c.model], c.batch_size, hist,
                                            acts, weights)
            why = estimate.too_big(need, avail)
            if why:
                out[c.key] = why
        return out

    # -- run ------------------------------------------------------------------------------------
    def run(self) -> dict:
        from .loading import load_graph, unique_names
        from .worker import load_plugins

        self._t_start = time.monotonic()
        load_plugins()
        graphs = {spec: load_graph(spec) for spec in self.plan.models}
        unique_names(graphs)
        for g in graphs.values():  # refused here, not as an out-of-memory crash in a worker
            g.check_fits(max(self.plan.batch_sizes))
        self._fresh = not self.folder.exists()
        # what a refused sweep removes: its folder, and the parents it had to create (runs/)
        self._made = next((p for p in reversed([self.folder, *self.folder.parents][:-1]) if not p.exists()),
                          self.folder)
        self._prepared = False
        check_writable(self.folder)
        # one sweep per run folder at a time: a second `run`/`--resume` on it is refused
        with FileLock(self.run_folder.lock_file, f"ios-bench run on {self.folder}"):
            try:
                clocks = ClockLock(self.plan.lock_clocks, [device_kind(d) for d in self.plan.devices],
                                   self.plan.gpu_clock_mhz, echo=lambda s: self.say(f"[yellow]{s}[/]"),
                                   state_path=self.folder / CLOCK_STATE_FILE)
                clocks.reserve()  # one sweep with locked clocks per machine: refused before anything is written
                try:
                    return self._run_locked(graphs, clocks)
                finally:
                    clocks.release()
            except BaseException:
                if self._fresh and not self._prepared:
                    # refused up front (clocks, executor, folder checks): the folder made for the lock
                    # holds no record, so nothing is left behind. Removed while the lock is held; a
                    # FileLock taken on the unlinked lock file notices and retries on a new one.
                    import shutil

                    shutil.rmtree(self.folder, ignore_errors=True)
                raise

    def _run_locked(self, graphs: dict, clock_lock: ClockLock) -> dict:
        fresh = self._fresh
        try:
            nodes = self.executor.open(self.folder, self.say)  # before writing anything: a bad cluster
        except BaseException:
            self.executor.close()
            raise
        try:
            self.prepare_folder()
        except BaseException:
            self.executor.close()
            raise
        self.run_folder.keep_model_files(self.plan.models)
        env = envinfo.collect(device_kind(self.plan.devices[0]), frameworks=False)
        env["run"] = self.folder.name
        env["plan"] = self.plan.to_dict()
        # what every worker runs under (the parent's own environment is not the cells')
        env["spin_policy"] = spin_policy(self.plan.spin_policy)
        budget = thread_env(self.plan.threads) if self.plan.threads else {}
        cell_env = spin_env(self.plan.spin_policy, {**os.environ, **budget})
        env["thread_env"] = {k: cell_env[k] for k in ENV_VARS if k in cell_env}
        env["executor"] = self.executor.name
        previous = read_json(self.run_folder.env_file, self._warn_ignored) if self.resume else None
        env["warnings"] = busy_warnings()
        stats = {"planned": 0, "ran": 0, "ok": 0, "wrong": 0, "failed": 0, "skipped": 0, "missing": 0}
        try:
            env["nodes"] = [n.to_dict() for n in nodes]
            probes = self.probe()
            self._write_node_envs()
            env["frameworks"] = {d: p.get("adapters") for d, p in probes.items()}
            cells = self.plan_cells(probes, graphs)
            if getattr(self, "_scenario_refusals", None) and not self.resume:
                if fresh:  # bad input: the framework named cannot run the scenario; nothing is kept
                    import shutil

                    shutil.rmtree(self._made, ignore_errors=True)
                raise InputError("; ".join(self._scenario_refusals))
            gpus = [d for d in self.plan.devices if device_kind(d) != "cpu"]
            if gpus and not self.resume and all(c.skip_reason for c in cells):
                # nothing at all would run (a GPU sweep without what it needs): say what is missing
                # instead of writing an all-skipped run
                reasons = list(dict.fromkeys([f"{c.framework}: {c.skip_reason}" for c in cells]
                                             + [n for n in self.notes if any(f" on {d}" in n for d in gpus)]))
                if fresh:
                    import shutil

                    shutil.rmtree(self.folder, ignore_errors=True)
                raise InputError(f"nothing can run on {', '.join(gpus)}: " + "; ".join(reasons[:4])
                                 + (f"; ... ({len(reasons) - 4} more)" if len(reasons) > 4 else "")
                                 + " (`ios-bench doctor` lists what runs here)")
            self.say(f"run folder: {term(self.folder)}")  # said once nothing is refused any more
            for w in env["warnings"]:
                self.say(f"[yellow]warning:[/] {term(w)}")
            for note in self.notes:
                self.say(f"[dim]note:[/] {term(note)}")
            self.show_placement(cells)
            env["placement"] = self.placement
            latest = self.store.latest(on_problem=lambda m: self.say(f"[yellow]warning:[/] {term(m)}"))
            done = {k for k, r in latest.items() if not (self.retry_failed and r["status"] == "failed")}
            self._attempts = {k: int(r.get("attempt") or 1) for k, r in latest.items()}
            todo = [c for c in cells if c.key not in done]
            self._cell_keys = {c.key for c in cells}
            if self.resume and done:
                self.say(f"resuming: {len(cells) - len(todo)} of {len(cells)} cells already finished")
            retried = [c for c in todo if c.key in latest]
            if retried:
                self.say(f"retrying {len(retried)} failed cell(s)")
            if cells:
                variants = list(dict.fromkeys(label(c.framework) for c in cells))  # term() escapes markup
                threads = self.plan.threads or "all the node's"
                self.say(f"{len(todo)} cells to run: {len(self.plan.models)} model(s) x batch "
                         f"{self.plan.batch_sizes} x {len(variants)} ({term(', '.join(variants))}) x "
                         f"{term(', '.join(self.plan.devices))}; {threads} threads per cell")
            if not cells:
                self.say("[yellow]nothing to run:[/] no framework or IOS schedule is available for this sweep "
                         "(see `ios-bench list frameworks`)")
            env["estimate"] = self._estimate([c for c in todo if not c.skip_reason], graphs, env.get("cpu") or {})
            env["cells_planned"] = stats["planned"] = len(cells)
            env["notes"] = self.notes
            with clock_lock as clocks:
                env["clocks"] = clocks.state.get("clocks")
                env["clock_settings"] = clocks.state
                self.run_folder.write_env(env, previous)
                try:
                    self._run_cells(todo, stats, len(cells) - len(todo), len(cells), observe=clocks.observe)
                except MaxTimeReached as e:
                    stats["stopped"] = env["stopped"] = str(e)
                    left = len(todo) - stats["ran"]
                    self.say(f"[yellow]stopped:[/] {e}; {stats['ran']} cells stored, {left} left; continue with: "
                             f"ios-bench run --resume --out {term(self.folder)}")
                except BaseException as e:
                    env["interrupted"] = f"{type(e).__name__} after {stats['ran']} cells (resume with --resume)"
                    self.say(f"[yellow]interrupted[/] ({type(e).__name__}): {stats['ran']} cells stored in "
                             f"{term(self.store.path)}; continue with: ios-bench run --resume --out "
                             f"{term(self.folder)}")
                    raise
                finally:
                    clocks.restore()
                    clocks.state["after"] = clocks.snapshot()
                    env["clock_settings"] = clocks.state
                    env["finished"] = _now()
                    env["stats"] = stats
                    env["duration_s"] = round(time.monotonic() - self._t_start, 1)
                    self.run_folder.write_env(env, previous)
        finally:
            self.executor.close()
        return stats

    def _model_inputs(self, spec: dict, model_spec: str) -> list[str]:
        rel = RunFolder.model_file(model_spec)
        if rel is None:
            return []
        spec["model_path"] = rel
        npz = str(Path(rel).with_suffix(".npz"))
        return [rel] + ([npz] if (self.folder / npz).exists() else [])

    def _write_node_envs(self) -> None:
        """Each node's environment, ``nodes/<node>/env.json`` (the local executor's is env.json)."""
        for node in self.executor.nodes:
            env = self.executor.node_env(node)
            if env is None:
                continue
            path = self.folder / node_env_path(node.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {**env, "node": node.to_dict()})

    # -- what runs ------------------------------------------------------------------------------
    def _providers(self, probe: dict, device: str) -> list[str]:
        """The IOS kernel providers of a device's IOS cells: the plan's, or every one available
        there (the CPU's; a CUDA device runs its own kernels, labelled as the default)."""
        if self.plan.ios_providers is not None:
            return list(self.plan.ios_providers)
        if device_kind(device) != "cpu":
            return [DEFAULT_IOS_PROVIDER]
        avail = probe.get("providers") or {}
        got = [p for p, reason in avail.items() if reason is None]
        for p, reason in avail.items():
            note = f"IOS provider {p} unavailable on {device}: {reason}"
            if reason is not None and note not in self.notes:
                self.notes.append(note)
        return got or [DEFAULT_IOS_PROVIDER]

    def _references(self, wanted: dict[tuple[str, int], str]) -> dict[tuple[str, int], dict]:
        """Oracle outputs, one worker per (model, batch size), so a failure at one batch size fails
        only that batch size's cells. ``wanted``: {(graph name, batch): model spec}. Computed once
        per run (``refs/``; reused on --resume)."""
        out: dict[tuple[str, int], dict] = {}
        tasks = []
        for (model, bs), model_spec in wanted.items():
            meta = read_json(self.folder / ref_file(model, bs, "json"),
                             lambda m: self.say(f"[yellow]warning:[/] {m}; computing it again"))
            qsl = scenario_cells.qsl_file(model, bs) if self.plan.scenario != LATENCY else None
            if (meta and meta.get("status") == "ok" and npy_ok(self.folder / ref_file(model, bs))
                    and npy_ok(self.folder / ref_file(model, bs, "input.npy"))
                    and (qsl is None or (meta.get("qsl") or {}).get("size") == self._qsl_size()
                         and (self.folder / qsl).is_file())):
                out[(model, bs)] = meta
                continue
            stem = safe_name(f"{model}-b{bs}")
            spec = {"task": "reference", "spin_policy": self.plan.spin_policy, "model_spec": model_spec,
                    "batch_sizes": [bs], "ref_paths": [ref_file(model, bs)],
                    "input_paths": [ref_file(model, bs, "input.npy")],
                    "seed": self.plan.seed, "input_seed": self.plan.input_seed,
                    "result_path": f"work/{stem}.ref-result.json"}
            if qsl is not None:  # a LoadGen scenario's query sample library (seeded inputs, oracle outputs)
                spec.update(qsl_size=self._qsl_size(), qsl_paths=[qsl])
            inputs = self._model_inputs(spec, model_spec)
            tasks.append(Task(f"reference:{model}:b{bs}", spec, f"logs/{stem}.reference.log", self.plan.timeout,
                              "cpu", self.plan.threads, inputs=inputs,
                              outputs=spec["ref_paths"] + spec["input_paths"] + [ref_file(model, bs, "source.npy")]
                              + spec.get("qsl_paths", []),
                              payload=(model, bs)))
        for task, res in zip(tasks, self.executor.probe(tasks) if tasks else []):
            model, bs = task.payload
            if res.get("status") == "ok":
                meta = {"status": "ok", **res["batches"][str(bs)],
                        **{k: res[k] for k in ("activation_mib", "weights_mib") if k in res}}
                if meta.get("source") and wanted[(model, bs)].lower().endswith(".onnx"):
                    # the worker read the run folder's copy of the user's file: both are named
                    meta["source_copy"] = meta["source"]
                    meta["source"] = wanted[(model, bs)]
                atomic_write_json(self.folder / ref_file(model, bs, "json"), meta)
            else:
                meta = {"status": "failed", "reason": res.get("reason"), "stderr_tail": res.get("stderr_tail", ""),
                        "peak_rss_mib": res.get("peak_rss_mib")}
            out[(model, bs)] = meta
        return out

    def _qsl_size(self) -> int:
        return int(scenario_cells.settings_of(self.plan, self.plan.scenario)["qsl_size"])

    def _schedule_path(self, cell: Cell) -> str:
        opts = self.plan.ios_options or {}
        provider = cell.provider or DEFAULT_IOS_PROVIDER
        suffix = ("" if provider == DEFAULT_IOS_PROVIDER else f"-{provider}") + ios_options_tag(opts)
        # one schedule per batch size it is optimized for: with optimize_batch, every cell of the run
        # executes the same schedule (optimized by the first, reused by the others)
        opt_bs = opts.get("optimize_batch", cell.batch_size)
        return "schedules/" + safe_name(f"{cell.model}-b{opt_bs}-{cell.device}-{cell.schedule}{suffix}") + ".json"

    def _schedules(self, cells: list[Cell]) -> dict[str, dict]:
        """Each IOS cell's schedule, optimized where the run has none yet: one worker per (model,
        batch, device, provider) searches its schedules with one cost model, and never times them.
        Returns {cell key: {"path", "hash", "figures", "optimize_seconds", "reused"} or {"failed":
        reason, ...}}."""
        plan = self.plan
        out: dict[str, dict] = {}
        wanted: dict[tuple, list[tuple[Cell, str]]] = {}
        for cell in cells:
            path = self._schedule_path(cell)
            if not (self.folder / path).exists():
                key = (cell.model_spec, cell.batch_size, cell.device, cell.provider or DEFAULT_IOS_PROVIDER)
                if path not in [p for _, p in wanted.get(key, [])]:
                    wanted.setdefault(key, []).append((cell, path))
        tasks = []
        for (model_spec, bs, device, provider), items in wanted.items():
            first = items[0][0]
            stem = safe_name(f"{first.model}-b{bs}-{device}-{provider}")
            spec = {"task": "optimize", "spin_policy": plan.spin_policy, "model_spec": model_spec, "batch_size": bs,
                    "device": device_kind(device), "schedules": [c.schedule for c, _ in items],
                    "schedule_paths": [p for _, p in items], "provider": provider, "threads": plan.threads,
                    "seed": plan.seed, "cost_model": plan.cost_model, "result_path": f"work/{stem}.optimize.json"}
            if plan.ios_options:
                spec["ios_options"] = dict(plan.ios_options)
                if plan.ios_options.get("cost_cache") == "private":
                    spec["profile_db_path"] = PRIVATE_PROFILE_DB
            inputs = self._model_inputs(spec, model_spec)
            outputs = [p[: -len(".json")] + ext for _, p in items for ext in (".json", ".npz", ".stats")]
            tasks.append(Task(f"optimize:{stem}", spec, f"logs/{stem}.optimize.log",
                              plan.timeout + plan.optimize_timeout * len(items), device, plan.threads, inputs,
                              outputs, first.nodes, payload=items))
        if tasks:
            self.say(f"optimizing {sum(len(t.payload) for t in tasks)} IOS schedule(s) in {len(tasks)} worker(s) "
                     "of their own (never the ones that time them)")
        results: dict[str, dict] = {}
        for task, res in zip(tasks, self.executor.probe(tasks) if tasks else []):
            done = res.get("schedules") if res.get("status") == "ok" and isinstance(res.get("schedules"), list) else []
            for i, (_, path) in enumerate(task.payload):
                one = done[i] if i < len(done) and isinstance(done[i], dict) else None
                results[path] = one or {"status": "failed", "reason": res.get("reason") or "no result",
                                        "stderr_tail": res.get("stderr_tail", "")}
        for cell in cells:
            path = self._schedule_path(cell)
            res = results.get(path)
            if res is not None and res.get("status") != "ok":
                out[cell.key] = {"failed": f"optimize: {res.get('reason')}", "stderr_tail": res.get("stderr_tail", "")}
                continue
            if not (self.folder / path).exists():
                out[cell.key] = {"failed": "optimize: no schedule was written"}
                continue
            figures = read_json(self.folder / (path[: -len(".json")] + ".stats")) or {}
            out[cell.key] = {"path": path, "hash": schedule_hash(self.folder / path), "figures": figures,
                             "optimize_seconds": res.get("optimize_seconds") if res else None,
                             "reused": res is None}
        return out

    # -- rounds ---------------------------------------------------------------------------------
    def _run_cells(self, todo: list[Cell], stats: dict, already: int, total: int, observe=None) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[cells]}"),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
                            disable=not self.show_progress, transient=True,
                            refresh_per_second=1)  # the parent stays quiet while a cell is timed
        count = [already]
        self._all_rounds: list[dict] = []  # every round of this session (the usual canary is their median)
        self._missing: list[Cell] = []
        target = self.plan.rounds if self.plan.rounds != AUTO else MIN_AUTO_ROUNDS

        def store(cell: Cell, record: dict) -> None:
            problem = check_record(record)
            if problem:  # never lose a cell (nor crash the sweep) over a malformed worker result
                record = {k: record[k] for k in ("cell", "model", "batch_size", "framework", "device", "label",
                                                 "started", "log", "node", "attempt") if k in record}
                record.update(status="failed", reason=f"invalid result from the worker: {problem}", finished=_now())
            self.store.append(record)
            self.run_folder.clear_rounds(cell.key)
            stats["ran"] += 1
            stats[record["status"]] = stats.get(record["status"], 0) + 1
            if record.get("unstable") and record["status"] in ("ok", "wrong"):
                stats["unstable"] = stats.get("unstable", 0) + 1
            count[0] += 1
            progress.update(bar, cells=f"{count[0]}/{total} cells")
            self.say(f"[{count[0]}/{total}] {describe(record)}")

        with progress:
            bar = progress.add_task("sweep", total=sum(c.weight for c in todo) * target or 1,
                                    cells=f"{already}/{total} cells")
            self._bar = (progress, bar)
            # cells no node can run are reported (and stored) before anything runs
            for cell in [c for c in todo if c.skip_reason]:
                store(cell, {**self._record(cell), "status": "skipped", "reason": cell.skip_reason,
                             "finished": _now()})
            runnable = [c for c in todo if not c.skip_reason]
            refs = {}
            if runnable:
                progress.update(bar, description="reference outputs")
                self.check_time("the reference outputs")
                refs = self._references({(c.model, c.batch_size): c.model_spec for c in runnable})
            groups: dict[str, list[Cell]] = {}
            for cell in runnable:
                ref = refs[(cell.model, cell.batch_size)]
                if ref.get("status") != "ok":
                    store(cell, {**self._record(cell), "status": "failed",
                                 "reason": f"reference output failed: {ref.get('reason')}",
                                 "stderr_tail": ref.get("stderr_tail", ""), "finished": _now()})
                else:
                    groups.setdefault(self._group(cell), []).append(cell)
            # one group at a time per node (a fleet measures as many groups at once as it has nodes)
            width = 1 if self.executor.name == "local" else max(1, len(self.executor.nodes))
            names = list(groups)
            self._t_measure = time.monotonic()
            self._bounds: dict = {}  # a Server sweep's latency bounds, from its single-stream cells (resumed ones too)
            if scenario_cells.needs_bound_cells(self.plan):
                self._bounds = scenario_cells.bounds_from(self.store.latest(on_problem=lambda m: None), self.plan)
            for i in range(0, len(names), width):
                wave = {g: groups[g] for g in names[i:i + width]}
                self.check_time(f"{', '.join(wave)}".replace("|", " "))
                too_big = self._memory_skips([c for cs in wave.values() for c in cs], refs)
                for cell in [c for cs in wave.values() for c in cs if c.key in too_big]:
                    store(cell, {**self._record(cell), "status": "skipped", "reason": too_big[cell.key],
                                 "finished": _now()})
                wave = {g: [c for c in cs if c.key not in too_big] for g, cs in wave.items()}
                for phase in self._phases({g: cs for g, cs in wave.items() if cs}):
                    for cell, record in self._measure(phase, refs, observe):
                        store(cell, record)
                        if record.get("scenario") == "single-stream":
                            self._bounds.update(scenario_cells.bounds_from({cell.key: record}, self.plan))
            stats["missing"] = len(self._missing)
            if self._missing:
                self.say(f"[yellow]{len(self._missing)} cells not run[/] (their nodes were lost and no other node can "
                         f"run them): continue with: ios-bench run --resume --out {term(self.folder)}")

    def _phases(self, wave: dict[str, list[Cell]]) -> list[dict[str, list[Cell]]]:
        """The cells of a wave in the order they must run: a Server sweep's single-stream cells
        (whose p90 bounds the server cells' latency) first, then the rest; otherwise one phase."""
        if not scenario_cells.needs_bound_cells(self.plan):
            return [wave]
        first = {g: [c for c in cs if c.scenario == "single-stream"] for g, cs in wave.items()}
        rest = {g: [c for c in cs if c.scenario != "single-stream"] for g, cs in wave.items()}
        return [{g: cs for g, cs in phase.items() if cs} for phase in (first, rest)]

    @staticmethod
    def _group(cell: Cell) -> str:
        return f"{cell.model}|b{cell.batch_size}|{cell.device}"

    def _budget_left(self) -> bool:
        budget = self.plan.time_budget
        return budget is None or time.monotonic() - self._t_measure < budget

    def _measure(self, groups: dict[str, list[Cell]], refs: dict, observe) -> list[tuple[Cell, dict]]:
        """Every round of the cells of ``groups``; returns each cell's finished record."""
        plan = self.plan
        cells = [c for cs in groups.values() for c in cs]
        done: list[tuple[Cell, dict]] = []
        scheds = self._schedules([c for c in cells if c.schedule])
        for cell in [c for c in cells if c.schedule and "failed" in scheds[c.key]]:
            info = scheds[cell.key]
            done.append((cell, {**self._record(cell), "status": "failed", "reason": info["failed"],
                                "stderr_tail": info.get("stderr_tail", ""), "finished": _now()}))
        cells = [c for c in cells if not (c.schedule and "failed" in scheds[c.key])]
        for cell in [c for c in cells if c.scenario == "server" and scenario_cells.needs_bound_cells(plan)]:
            bound = self._bounds.get(scenario_cells.bound_key(cell), "no single-stream cell was measured")
            if isinstance(bound, str):
                done.append((cell, {**self._record(cell), "status": "failed", "reason": bound, "finished": _now()}))
        cells = [c for c in cells if not (c.scenario == "server" and scenario_cells.needs_bound_cells(plan)
                                          and isinstance(self._bounds.get(scenario_cells.bound_key(c), ""), str))]
        same = self._same_schedules(cells, scheds)
        measured = [c for c in cells if c.key not in same]
        rounds = {c.key: self.run_folder.rounds(c.key) for c in measured}
        resumed = sum(len(r) for r in rounds.values())
        if resumed:
            self.say(f"resuming: {resumed} round(s) of {len(rounds)} cell(s) already measured")
        stopped: dict[str, dict] = {}  # cell key -> the round that ended it (failed, skipped, wrong output)
        for key, rs in rounds.items():
            last = next((r for r in reversed(rs) if r.get("status") != "ok"), None)
            if last is not None:
                stopped[key] = last
        by_key = {c.key: c for c in measured}
        started: dict[str, str] = {}
        self._pass = getattr(self, "_pass", 0)

        def wanted(cell: Cell) -> bool:
            if cell.key in stopped:
                return False
            rs = rounds[cell.key]
            good = [r for r in rs if r.get("status") == "ok" and not r.get("disturbed")]
            if plan.rounds != AUTO:
                if len(good) >= plan.rounds or len(rs) >= plan.rounds + plan.max_reruns:
                    return False
                return bool(good) is False or self._budget_left()
            if len(rs) >= MAX_AUTO_ROUNDS + plan.max_reruns or len(good) >= MAX_AUTO_ROUNDS:
                return False
            if len(good) < MIN_AUTO_ROUNDS:
                return not good or self._budget_left()
            return self._budget_left() and needs_more(summarize(rs), plan.target_ci)

        while True:
            todo = {g: [c.key for c in cs if c.key in by_key and wanted(by_key[c.key])] for g, cs in groups.items()}
            todo = {g: ks for g, ks in todo.items() if ks}
            if not todo:
                break
            tasks = []
            for group, keys in todo.items():
                for pos, key in enumerate(round_order(keys, self._pass, plan.round_seed, group)):
                    cell = by_key[key]
                    tasks.append(self._round_task(cell, refs[(cell.model, cell.batch_size)], scheds.get(key),
                                                  len(rounds[key]), pos))
            self._pass += 1

            def finished(task: Task, res: dict) -> None:
                cell, index, pos = task.payload
                rnd = self._round_record(task, res, index, pos, started.get(task.key))
                rounds[cell.key].append(rnd)
                self.run_folder.add_round(cell.key, rnd)
                self._all_rounds.append(rnd)
                if rnd["status"] != "ok":
                    stopped[cell.key] = rnd
                progress, bar = self._bar
                progress.advance(bar, cell.weight)

            def starting(task: Task) -> None:
                cell, index, _ = task.payload
                self.check_time(f"{cell.model} b{cell.batch_size} {label(cell.framework)} round {index + 1}")
                started[task.key] = _now()
                self._bar[0].update(self._bar[1], description=term(
                    f"{cell.model} b{cell.batch_size} {label(cell.framework)} round {index + 1}", newlines=False))

            missing = self.executor.run(tasks, finished, starting=starting, observe=observe)
            if missing:  # nodes lost: those cells wait for --resume
                for t in missing:
                    stopped[t.payload[0].key] = {"status": "missing"}
            ref_canary = usual_canary(self._all_rounds)
            for key in {t.payload[0].key for t in tasks}:
                before = {id(r) for r in rounds[key] if r.get("disturbed")}
                judge_rounds(rounds[key], ref_canary)
                for r in rounds[key]:
                    if r.get("disturbed") and id(r) not in before:
                        self.say(f"[dim]{term(label(by_key[key].framework))} round {r['round'] + 1} "
                                 f"({term(by_key[key].model, False)} b{by_key[key].batch_size}) disturbed: "
                                 f"{term(r['disturbed'], False)}[/]")
        ref_canary = usual_canary(self._all_rounds)
        records = {}
        for cell in measured:
            if stopped.get(cell.key, {}).get("status") == "missing":
                self._missing.append(cell)
                continue
            judge_rounds(rounds[cell.key], ref_canary)
            records[cell.key] = self._cell_record(cell, rounds[cell.key], scheds.get(cell.key),
                                                  stopped.get(cell.key))
        for key, canonical in same.items():
            cell = next(c for c in cells if c.key == key)
            if canonical in records:
                records[key] = self._same_record(cell, records[canonical], scheds[key])
        self._sequential_figures(records)
        done += [(c, records[c.key]) for c in cells if c.key in records]
        return done

    def _same_schedules(self, cells: list[Cell], scheds: dict) -> dict[str, str]:
        """IOS cells whose schedule is identical to another's of the same group and provider: {cell
        key: the key of the cell measured for both} (the sequential cell where it is one of them)."""
        same: dict[str, str] = {}
        by_id: dict[tuple, list[Cell]] = {}
        for c in cells:
            h = (scheds.get(c.key) or {}).get("hash") if c.schedule else None
            if h:
                by_id.setdefault((self._group(c), c.provider, h, c.variant), []).append(c)
        for members in by_id.values():
            if len(members) < 2:
                continue
            first = next((c for c in members if c.schedule == "sequential"), members[0])
            for c in members:
                if c is not first:
                    same[c.key] = first.key
        return same

    def _round_task(self, cell: Cell, ref: dict, sched: dict | None, index: int, position: int) -> Task:
        plan = self.plan
        stem = cell.file_stem
        spec = CellSpec(model_spec=cell.model_spec, batch_size=cell.batch_size, device=device_kind(cell.device),
                        adapter=cell.adapter, threads=plan.threads, seed=plan.seed, input_seed=plan.input_seed,
                        ref_path=ref_file(cell.model, cell.batch_size),
                        input_path=ref_file(cell.model, cell.batch_size, "input.npy"),
                        result_path=f"work/{stem}.r{index}.result.json", warmup=plan.warmup, number=plan.number,
                        repeat=plan.repeat, min_sample_ms=plan.min_sample_ms, precision=plan.precision,
                        spin_policy=plan.spin_policy, input_sha1=ref.get("input_sha1"), round=index,
                        options=adapter_options(plan, cell.framework, cell.adapter))
        spec = spec.to_dict()
        inputs = [spec["ref_path"], spec["input_path"]] + self._model_inputs(spec, cell.model_spec)
        source_ref = ref_file(cell.model, cell.batch_size, "source.npy")
        if (self.folder / source_ref).exists():  # an imported model: onnxruntime on the original file
            spec["source_ref_path"] = source_ref
            inputs.append(source_ref)
        elif ref.get("source_error"):  # ... which could not run it: the record says so (independent_check)
            spec["source_error"] = ref["source_error"]
        elif ref.get("source_error"):  # ... which could not run it: the record says so (independent_check)
            spec["source_error"] = ref["source_error"]
        outputs = []
        if plan.sample_utilization:
            spec["util_path"] = util_file(cell)
            outputs.append(spec["util_path"])
        if cell.schedule:
            spec.update(schedule=cell.schedule, provider=cell.provider or DEFAULT_IOS_PROVIDER,
                        schedule_path=sched["path"])
            base = sched["path"][: -len(".json")]
            inputs += [p for p in (sched["path"], base + ".npz") if (self.folder / p).exists()]
            if cell.schedule != "sequential" and not self._has_sequential_cell(cell) and not cell.scenario:
                spec["sequential_baseline"] = True
        if cell.scenario:  # a LoadGen scenario's round (ios_bench.scenarios.round)
            extra = scenario_cells.round_spec(cell, plan, index, getattr(self, "_bounds", {}).get(
                scenario_cells.bound_key(cell)) if cell.scenario == "server" else None)
            spec.update(scenario=extra["scenario"], loadgen_path=extra["loadgen_path"],
                        qsl_path=scenario_cells.qsl_file(cell.model, cell.batch_size))
            inputs.append(spec["qsl_path"])
            outputs += extra["outputs"]
        CellSpec.from_dict(spec)  # the spec stays one the worker reads
        return Task(f"{cell.key}#r{index}", spec, f"logs/{stem}.r{index}.log", plan.timeout, cell.device,
                    plan.threads, inputs, outputs, cell.nodes, group=self._group(cell),
                    payload=(cell, index, position))

    def _has_sequential_cell(self, cell: Cell) -> bool:
        key = cell.key.replace(cell.framework, schedule_key("sequential", cell.provider or DEFAULT_IOS_PROVIDER))
        return key in self._cell_keys

    def _round_record(self, task: Task, res: dict, index: int, position: int, started: str | None) -> dict:
        """One round as kept in the record: its samples, what else used the machine, and the
        worker's own figures (check, build info) the cell's record takes from its last round."""
        rnd = {"round": index, "pass": self._pass - 1, "position": position, "started": started, "finished": _now(),
               "status": res.get("status", "failed"), "log": task.log}
        for key in round_fields():
            if key in res and key not in rnd:
                rnd[key] = res[key]
        if rnd["status"] == "ok" and not (rnd.get("check") or {}).get("passed", False):
            rnd["status"] = "wrong"
        if isinstance(rnd.get("utilization"), dict) and task.spec.get("util_path"):
            rnd["utilization"]["trace"] = task.spec["util_path"]
        return rnd

    def _record(self, cell: Cell) -> dict:
        plan = self.plan
        return {"schema": SCHEMA, "cell": cell.key, "model": cell.model, "batch_size": cell.batch_size,
                "framework": cell.framework, "label": label(cell.framework),
                "kind": "ios" if cell.schedule else "framework",
                "schedule": cell.schedule, "device": cell.device, "adapter": cell.adapter,
                **({"provider": cell.provider or DEFAULT_IOS_PROVIDER} if cell.schedule else {}),
                **({"optimized_for": optimized_for(plan.ios_options, cell.batch_size, plan.threads)}
                   if cell.schedule and plan.ios_options else {}),
                "threads": plan.threads, "seed": plan.seed, "input_seed": plan.input_seed, "started": _now(),
                "round_seed": plan.round_seed,
                **({"options": o} if (o := adapter_options(plan, cell.framework, cell.adapter)) else {}),
                **({"attempt": self._attempts[cell.key] + 1} if cell.key in getattr(self, "_attempts", {}) else {}),
                **scenario_cells.record_fields(cell, plan)}

    def _cell_record(self, cell: Cell, rounds: list[dict], sched: dict | None, stopped: dict | None) -> dict:
        """A cell's record from its rounds: the figure over the undisturbed ones, every round kept."""
        record = self._record(cell)
        if rounds and rounds[0].get("started"):
            record["started"] = rounds[0]["started"]
        record["rounds"] = rounds
        if sched:
            record.update(_schedule_fields(sched))
        measured = [r for r in rounds if r.get("status") in ("ok", "wrong")]
        last = measured[-1] if measured else (rounds[-1] if rounds else {})
        for key in ("info", "build_seconds", "precision", "precision_requested", "framework_version", "clock",
                    "stages", "torch_threads", "node", "node_id", "node_env", "clocks", "utilization", "affinity",
                    "independent_check"):
            if key in last:
                record[key] = last[key]
        if record.get("node") is not None and not record.get("node_env"):
            record["node_env"] = node_env_path(record["node"]) if self.executor.name != "local" else "env.json"
        peaks = [r["peak_rss_mib"] for r in rounds if isinstance(r.get("peak_rss_mib"), (int, float))]
        if peaks:
            record["peak_rss_mib"] = max(peaks)
        record["log"] = last.get("log")
        record["finished"] = _now()
        if stopped is not None and stopped.get("status") in ("failed", "skipped"):
            record.update(status=stopped["status"], reason=stopped.get("reason") or "",
                          stderr_tail=stopped.get("stderr_tail", ""))
            return record
        if not measured:
            record.update(status="failed", reason="no round was measured")
            return record
        # a round whose output was wrong was still timed: its samples count (the record is "wrong")
        timed = [{**r, "status": "ok"} if r.get("status") == "wrong" else r for r in rounds]
        summary = summarize(timed, seed=self.plan.round_seed)
        if not summary.get("rounds_used"):  # every round disturbed: said so, never silently pooled
            pooled = summarize([{**r, "status": "ok", "disturbed": None} for r in measured], seed=self.plan.round_seed)
            summary = {**pooled, "rounds_used": 0, "rounds_disturbed": summary["rounds_disturbed"],
                       "unstable": f"every round was disturbed ({len(measured)}): the figure is over disturbed "
                                   "rounds"}
        record.update(summary)
        record.update(repeat=last.get("repeat"), number=last.get("number"), warmup=last.get("warmup"),
                      percentiles_over="samples")
        checks = [r.get("check") or {} for r in measured]
        bad = next((c for c in checks if not c.get("passed")), None)
        record["check"] = bad or last.get("check") or {}
        if "sequential_ms" in last:  # timed beside the schedule in each round (no sequential cell in the sweep)
            seq = [r["sequential_ms"] for r in measured if isinstance(r.get("sequential_ms"), (int, float))]
            record["sequential_ms"] = float(sorted(seq)[len(seq) // 2])
            record["sequential_from"] = "timed in the same workers, after the schedule"
        bs = cell.batch_size
        if cell.scenario:  # LoadGen's figures over rounds; its verdict kept (ios_bench.scenarios.summary)
            for key in ("concurrency",):
                if key in last:
                    record[key] = last[key]
            record["percentiles_over"] = "the SUT's per-sample latencies (IssueQuery to completion)"
            record.update(scenario_summary.scenario_fields(cell.scenario, rounds, bs))
            # unstable: LoadGen's figures differ between rounds, or too few undisturbed rounds to say
            record["unstable"] = scenario_summary.unstable_reason(record) or (
                record.get("unstable") if (record.get("rounds_used") or 0) < MIN_ROUNDS_FOR_VERDICT else None)
        else:
            record["throughput"] = bs * 1000.0 / record["median_ms"]
            record["throughput_p10"] = bs * 1000.0 / record["p90_ms"]  # slow samples -> low throughput
            record["throughput_p90"] = bs * 1000.0 / record["p10_ms"]
        record["status"] = "ok" if record["check"].get("passed") else "wrong"
        return record

    def _same_record(self, cell: Cell, canonical: dict, sched: dict) -> dict:
        """A cell whose schedule is the same as another's: that cell's measurement, said so."""
        record = self._record(cell)
        keep = set(record)
        record.update({k: v for k, v in canonical.items() if k not in keep})
        record.update(_schedule_fields(sched), same_schedule_as=canonical["label"],
                      same_schedule_cell=canonical["cell"])
        return record

    def _sequential_figures(self, records: dict[str, dict]) -> None:
        """IOS cells: ``sequential_ms`` (the sequential schedule on the same provider, measured in the
        same interleaved rounds), the speedup over it, and the estimate's error."""
        for rec in records.values():
            if rec.get("kind") != "ios" or rec.get("status") not in ("ok", "wrong") or rec.get("scenario"):
                continue
            seq_key = rec["cell"].replace(rec["framework"], schedule_key("sequential", rec["provider"]))
            seq = records.get(seq_key)
            if seq is not None and seq.get("status") == "ok":
                rec["sequential_ms"] = seq["median_ms"]
                rec["sequential_from"] = "the sequential cell's rounds (interleaved with this one's)"
                if seq.get("ci_low_ms") is not None:
                    rec["sequential_ci_ms"] = [seq["ci_low_ms"], seq["ci_high_ms"]]
            if rec.get("sequential_ms"):
                rec["speedup_over_sequential"] = rec["sequential_ms"] / rec["median_ms"]
            target = rec.get("optimized_for") or {}
            elsewhere = (target.get("batch_size", rec["batch_size"]) != rec["batch_size"]
                         or target.get("threads", rec.get("threads")) != rec.get("threads"))
            if rec.get("predicted_ms") and not elsewhere:  # an estimate for another batch/budget: no error
                rec["prediction_error"] = (rec["predicted_ms"] - rec["median_ms"]) / rec["median_ms"]


def _schedule_fields(sched: dict) -> dict:
    """What an IOS cell's record says of its schedule: the optimizer's figures and the file."""
    return {**(sched.get("figures") or {}), "schedule_file": sched["path"], "schedule_hash": sched.get("hash"),
            "optimize_seconds": sched.get("optimize_seconds"), "schedule_reused": sched.get("reused")}


def busy_warnings() -> list[str]:
    """What makes timings noisy before the sweep starts (pyperf checks the same)."""
    out = []
    cores = usable_cores()
    try:
        load1 = os.getloadavg()[0]
        if load1 >= 0.75 * cores:
            out.append(f"the machine is busy (load average {load1:.1f} on {cores} cores): timings will be noisy")
    except OSError:
        pass
    return out


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
