"""The sweep's orchestrator: models x batch sizes x (frameworks + IOS schedules) x devices.

Every task runs in its own worker process (:mod:`ios_bench.running.worker`, started by
:func:`ios_bench.running.launch.run_worker` through an executor); the parent never imports a framework.
:class:`Sweep` plans the cells, checks the estimate and ``--max-time``, holds the run folder's lock
and the clocks, and hands each step a :class:`~ios_bench.running.context.SweepContext`:

1. **Probe** (:mod:`ios_bench.planning.probing`): which adapters and IOS kernel providers run where.
2. **References** (:mod:`ios_bench.running.references`): per (model, batch) one worker computes the oracle
   output once (``refs/``); a failure there fails only that batch size's cells.
3. **Schedules** (:mod:`ios_bench.running.schedules`): each IOS cell's schedule is optimized in a worker of
   its own and only ever timed in fresh ones. Two IOS cells of a group whose schedules are
   identical (e.g. IOS-Both where validation kept the sequential schedule) are one measurement.
4. **Rounds** (:mod:`ios_bench.running.round_runner`; statistics in :mod:`ios_bench.running.rounds`): each cell is
   measured in ``plan.rounds`` fresh workers, interleaved with the other cells of its (model,
   batch, device) group in an order shuffled from ``plan.round_seed``; disturbed rounds are
   measured again and never pooled; ``rounds="auto"`` adds rounds until every cell's interval is
   under ``plan.target_ci`` percent, or ``plan.time_budget`` is spent.
5. The cell's record (built in :mod:`ios_bench.records.cell_records`, declared in :mod:`ios_bench.records.record`)
   carries its figure over rounds and every round, and is appended to the store
   (:mod:`ios_bench.results`); ``--resume`` reuses finished cells and the rounds already measured.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ios_bench.errors import InputError
from ios_bench.machine import envinfo
from ios_bench.machine.clocks import STATE_FILE as CLOCK_STATE_FILE
from ios_bench.machine.clocks import ClockLock
from ios_bench.planning import estimate, probing
from ios_bench.planning.cells import Cell, describe, label, node_env_path, ref_file, schedule_key
from ios_bench.planning.estimate_breakdown import capped_rounds, predicted_caps
from ios_bench.planning.plan import (
    DEFAULT_SCHEDULES,
    IOS_ADAPTER,
    OPT_IN_FRAMEWORKS,
    Plan,
    ios_options_problem,
)
from ios_bench.planning.probing import merge_probes  # noqa: F401 - re-exported (ios_bench.running.sweep.merge_probes)
from ios_bench.records.cell_records import CellRecords, now
from ios_bench.records.record import CellResult
from ios_bench.records.runfolder import RunFolder, check_writable, npy_ok, read_json
from ios_bench.reporting.escape import term
from ios_bench.results import Store, check_record
from ios_bench.running.context import SweepContext
from ios_bench.running.executors import Executor, LocalExecutor, device_kind
from ios_bench.running.locks import FileLock
from ios_bench.running.references import references
from ios_bench.running.round_runner import RoundRunner
from ios_bench.running.rounds import AUTO, planned_rounds
from ios_bench.running.schedules import (  # noqa: F401 - schedule_hash, schedule_path re-exported
    predicted_same,
    schedule_hash,
    schedule_path,
    search_workers,
)
from ios_bench.scenarios import LATENCY
from ios_bench.scenarios import cells as scenario_cells
from ios_core.atomic import atomic_write_json
from ios_core.measurement.protocol import protocol_fields
from ios_core.measurement.threads import ENV_VARS, spin_env, spin_policy, thread_env, usable_cores


class MaxTimeReached(Exception):
    """``--max-time`` was spent: no further worker starts; what finished is kept for --resume."""


class Sweep:
    runner_class = RoundRunner  # the round protocol (ios_bench.running.ab's pairs its cells)

    def __init__(self, plan: Plan, folder: str | os.PathLike, console=None, resume: bool = False,
                 progress: bool = True, executor: Executor | None = None, retry_failed: bool = False,
                 max_time: float | None = None, session_s: float | None = None):
        from rich.console import Console

        problem = ios_options_problem(plan.ios_options)
        if problem:
            raise InputError(problem)
        if plan.rounds != AUTO and plan.time_budget is not None:
            fewest = plan.repeat if plan.sample_s is None else min(plan.min_repeat, plan.repeat)  # the least samples
            need = estimate.min_round_seconds(fewest, plan.min_sample_ms)
            if plan.time_budget < need:
                raise InputError(f"--time-budget {plan.time_budget:g} s cannot fit one round of one cell "
                                 f"(at least {need:.1f} s: a worker's start and {fewest} samples of "
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
        # what a fresh session of this sweep would have (check_time): max_time, unless the sweep is handed
        # the rest of a longer deadline (an experiment's --deadline: its next session starts with all of it)
        self.session_s = session_s
        self._t_start = time.monotonic()
        self._passes = 0  # rounds started by this sweep's sessions (each round's "pass")
        self.ctx = SweepContext(plan, self.run_folder, self.executor, self.say)

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

    def name_graphs(self, graphs: dict) -> None:
        """Cells, reference outputs and schedules are keyed by a graph's name: two graphs of one
        sweep with the same name are refused (``ios_bench.running.ab`` tells its two sides apart instead)."""
        from ios_bench.planning.loading import unique_names

        unique_names(graphs)

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def _warn_ignored(self, message: str) -> None:
        self.say(f"[yellow]warning:[/] {message}; its earlier sessions are not kept")

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
                                                                          if n not in OPT_IN_FRAMEWORKS]
                fw_cells = [(n, no_node) for n in fws]
            elif plan.frameworks is None:
                fws = []
                for n in peers:
                    reason = (avail.get(n) or {}).get("reason", "not probed")
                    if device_kind(device) not in (avail.get(n) or {}).get("devices", [device_kind(device)]):
                        continue  # a GPU-only adapter in a CPU sweep (or the reverse): not a finding
                    if n in OPT_IN_FRAMEWORKS:
                        note = f"{n}: left out of the default sweep ({OPT_IN_FRAMEWORKS[n]}; name it with --frameworks)"
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
                    for p in plan.precisions:  # one cell per precision; one an adapter cannot give: skipped
                        for fw, reason in fw_cells:
                            cells.append(Cell(g.name, spec, bs, fw, device, None, fw, 1.0,
                                              reason or probing.precision_reason(avail, fw, p, device),
                                              (avail.get(fw) or {}).get("nodes"), precision=p))
                        for s, reason in sched_cells:
                            for prov in probing.ios_providers(plan, probe, device, self.notes):
                                why = (reason or probing.precision_reason(avail, IOS_ADAPTER, p, device)
                                       or probing.provider_precision_reason(probe, prov, p, device)
                                       or probing.search_precision_reason(plan.cost_model, p))
                                cells.append(Cell(g.name, spec, bs, schedule_key(s, prov), device, s, IOS_ADAPTER,
                                                  1.0, why, ios_nodes, provider=prov, precision=p))
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

    def costs(self, cells: list[Cell], graphs: dict, cpu: dict, probe_speed: bool = True) -> dict:
        """What the estimate of measuring ``cells`` rests on (nothing written): {"model" (its cost model),
        "history", "rounds" (planned per cell), "left" (rounds left per cell, a cell predicted capped one at
        most), "caps" (``estimate_breakdown.predicted_caps``), "refs", "searches", "fresh"}. ``probe_speed``
        False: the figures at the speed they were measured at (no speed probe)."""
        plan = self.plan
        # earlier runs at this plan's threads, of the same networks (a file named like a zoo model is another)
        hist = estimate.learn(estimate.earlier_runs(self.folder), cpu, plan.threads,
                              {g.name: spec == g.name for spec, g in graphs.items()})
        named = {g.name: g for g in graphs.values()}
        macs = {n: g.macs() for n, g in named.items()}
        searched = {c.model for c in cells if c.schedule and not c.skip_reason}  # the DP's states cost its searches
        # (operators, parameters) of these networks and of those earlier runs measured: a round's fixed part of a
        # network no run measured is fitted to them (estimate.Model.size_fit)
        sizes = {**estimate.history_sizes(hist, named),
                 **{n: (g.num_operators(), g.params()) for n, g in named.items()}}
        model = estimate.Model(hist, {**estimate.history_macs(hist, macs), **macs},
                               {n: v[0] for n, v in sizes.items()},
                               {n: estimate.search_states(g) for n, g in named.items() if n in searched},
                               warmup=plan.warmup, repeat=plan.repeat * plan.number,
                               min_sample_ms=plan.min_sample_ms or 0.0, protocol=protocol_fields(plan),
                               params={n: v[1] for n, v in sizes.items()})
        # a fresh worker's start, measured now for the frameworks (at their precision) no earlier run measured
        model.calibrated = estimate.calibrate([estimate.series(c.framework, c.precision) for c in cells
                                               if not c.skip_reason], hist,
                                              probe=estimate.probed_starts(getattr(self, "probes", None) or {}))
        # this machine's speed now: what was not measured now is scaled by it (estimate.speed_probe)
        model.probe_ms = estimate.speed_probe() if cells and probe_speed else None
        model.isa = cpu.get("isa_flags")  # the canary scales the stated figures on their kind of host only
        model.max_reruns = plan.max_reruns  # re-runs expected as often as earlier runs here were disturbed
        if plan.scenario != LATENCY:  # a LoadGen round lasts its tests (ios_bench.scenarios.cells)
            model = scenario_cells.RoundEstimate(model, plan)
        rounds = planned_rounds(plan.rounds)
        refs = {(c.model, c.batch_size) for c in cells if not npy_ok(self.folder / ref_file(c.model, c.batch_size))}
        # one search worker per search_key (model, batch, provider, precision, device), as optimize_schedules
        # starts them: (graph name, batch, provider, precision, device) -> the schedule files it searches
        workers = search_workers(plan, self.folder, cells)
        searches = {(items[0][0].model, *key[1:]): len(items) for key, items in workers.items()}
        # what each step needs before it starts (check_time: a step that cannot finish before --max-time
        # is not started): the reference outputs, and each group's schedule searches
        self._need_refs = sum(model.reference_s(m, b) for m, b in refs)
        self._need_search = {}
        for key, items in workers.items():  # each search costed as the estimate costs it (one rule)
            one = estimate.sweep_seconds(model, [], {}, set(), {(items[0][0].model, *key[1:]): len(items)})
            group = items[0][0].group
            self._need_search[group] = self._need_search.get(group, 0.0) + one["seconds"]
        done = {c.key: list(self.run_folder.rounds(c.key)) for c in cells}
        # capping (a latency sweep's peers: estimate_breakdown.predicted_caps), predicted from the estimate's latencies
        caps = predicted_caps(model, cells, protocol_fields(plan)["cap_factor"]) if plan.scenario == LATENCY else {}
        left = capped_rounds({c.key: max(0, rounds - sum(1 for r in done[c.key]
                                                          if r.get("status") == "ok" and not r.get("disturbed")))
                              for c in cells}, caps, rounds)
        # IOS cells whose schedule is certainly another's (a chain graph's: predicted_same): measured once, as
        # the sweep measures them (same_schedules), so their rounds cost nothing
        same = predicted_same(cells, named, composed=plan.cost_model == "measured")
        left.update(dict.fromkeys(same, 0))
        return {"model": model, "history": hist, "rounds": rounds, "left": left, "caps": caps, "same": same,
                "refs": refs, "searches": searches, "fresh": {k for k, rs in done.items() if not rs}}

    def _estimate(self, cells: list[Cell], graphs: dict, cpu: dict) -> dict:
        """Print (and return, for env.json) the sweep's estimated duration (``ios_bench.planning.estimate``):
        earlier runs on this machine where they measured a cell, else the stated model."""
        plan = self.plan
        got = self.costs(cells, graphs, cpu)
        model, hist, rounds, refs, searches = got["model"], got["history"], got["rounds"], got["refs"], got["searches"]
        est = estimate.sweep_seconds(model, cells, got["left"], refs, searches, fresh=got["fresh"])
        for c in cells:  # the progress bar's ETA follows the same model
            c.weight = model.cell_s(c)
        if not cells:
            return {"seconds": 0.0, "cells": 0}
        where = ", ".join(f"{src} for {n}" for src, n in est["from"].items())
        if model.calibrated:
            where += f"; workers' start measured now for {len(model.calibrated)} frameworks"
        if model.speed_note():
            where += f"; {model.speed_note()}"
        more = " (at least: --rounds auto may add rounds)" if plan.rounds == AUTO else ""
        if plan.rounds != AUTO and getattr(plan, "extra_rounds", 0) and plan.rounds > 1:
            more += f" (at least: an unstable cell may get up to {plan.extra_rounds} more rounds where they are cheap)"
        if plan.scenario == "server":
            more += " (at most for Server: its search counted as halving its load after every try)"
        if got["caps"]:
            more += f" ({len(got['caps'])} cells predicted capped at one round)"
        share = model.disturbed_share() if model.max_reruns else None
        if share:
            more += f" (with re-runs: {share:.0%} of earlier runs' rounds here were disturbed and measured again)"
        if got["same"]:
            more += f" ({len(got['same'])} IOS cells of chain graphs run the sequential schedule: measured once)"
        self.say(f"estimated duration: about {estimate.human(est['seconds'])}{more} for {len(cells)} cells x "
                 f"{rounds} rounds, {len(refs)} reference outputs and {len(searches)} schedule searches "
                 f"(an estimate: latencies from {where}; docs/harness.md)")
        if self.max_time is not None and est["seconds"] > self.max_time:
            self.say(f"[yellow]--max-time {estimate.human(self.max_time)} is less than the estimate:[/] the sweep "
                     "stops when it is spent and can be continued with --resume")
        return {"seconds": round(est["seconds"], 1), "cells": len(cells), "rounds": rounds, "from": est["from"],
                "earlier_runs": hist.runs, "model": "ios_bench.planning.estimate (stated model, earlier runs' figures)",
                # a fresh worker's start per framework, measured in the sweep's first seconds (calibrate)
                "workers_start_s": {k: round(v, 3) for k, v in model.calibrated.items()},
                # the speed probe now (what a later run's estimate compares its own with) and the scales it gave
                "canary_ms": round(model.probe_ms, 4) if model.probe_ms else None,
                "speed_factor": {"stated": round(model.speed(False), 3), "earlier_runs": round(model.speed(True), 3)}}

    def check_time(self, what: str, need_s: float = 0.0) -> None:
        """Raise :class:`MaxTimeReached` once ``--max-time`` is spent (before ``what`` starts), or when
        ``what`` (estimated to take ``need_s`` seconds) would not finish before it: started, it would
        run past the limit and be lost (a lent GPU's window). A step estimated longer than what a session
        has after its setup still starts while time is left (it could never fit: refusing it would stall
        the sweep on every --resume). A session is ``max_time`` long, or ``session_s`` where the sweep was
        handed what is left of a longer deadline (an experiment's): a step that fits the next session waits
        for it rather than starting with seconds left."""
        if self.max_time is None:
            return
        spent = time.monotonic() - self._t_start
        if spent >= self.max_time:
            raise MaxTimeReached(f"--max-time {estimate.human(self.max_time)} spent before {what}")
        # what a session has for its steps: the limit less its own setup (the time before its first step),
        # which a resumed session spends again; a step needing more could never fit one and still starts, so
        # that every session makes progress
        setup = getattr(self, "_setup_s", None)
        if setup is None:
            setup = self._setup_s = spent
        session = getattr(self, "session_s", None) or self.max_time
        if 0 < need_s <= max(self.max_time, session) - setup and spent + need_s > self.max_time:
            raise MaxTimeReached(f"--max-time {estimate.human(self.max_time)}: {estimate.human(self.max_time - spent)} "
                                 f"left, {what} needs about {estimate.human(need_s)} (an estimate)")

    def _memory_skips(self, cells: list[Cell], refs: dict) -> dict[str, str]:
        """{cell key: why it cannot start} for the cells whose estimated memory exceeds what is
        available now (local executor: a fleet's nodes are not this machine)."""
        if not self.ctx.local:
            return {}
        hist = getattr(self, "_history", None)
        if hist is None:
            hist = self._history = estimate.History()
            for rec in self.store.records(on_problem=lambda m: None):
                hist.add(rec)
        return estimate.memory_skips(cells, refs, hist)

    # -- run ------------------------------------------------------------------------------------
    def run(self) -> dict:
        from ios_bench.planning.loading import load_graph
        from ios_bench.running.worker import load_plugins

        self._t_start = time.monotonic()
        load_plugins()
        graphs = {spec: load_graph(spec) for spec in self.plan.models}
        self.name_graphs(graphs)
        for g in graphs.values():  # refused here, not as an out-of-memory crash in a worker
            g.check_fits(max(self.plan.batch_sizes))
        if self.plan.calibration_data and "int8" in self.plan.precisions:  # refused before anything is written
            from ios_core.quantize import CalibrationDataError, read_calibration_data

            for g in graphs.values():
                try:
                    read_calibration_data(self.plan.calibration_data, g.input_shape)
                except CalibrationDataError as e:
                    raise InputError(f"{e} (model {g.name})") from None
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
            probes = self.probes = probing.probe(self.ctx, self.placement)
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
                    env["finished"] = now()
                    env["stats"] = stats
                    env["duration_s"] = round(time.monotonic() - self._t_start, 1)
                    self.run_folder.write_env(env, previous)
        finally:
            self.executor.close()
        return stats

    def _write_node_envs(self) -> None:
        """Each node's environment, ``nodes/<node>/env.json`` (the local executor's is env.json)."""
        for node in self.executor.nodes:
            env = self.executor.node_env(node)
            if env is None:
                continue
            path = self.folder / node_env_path(node.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {**env, "node": node.to_dict()})

    # -- rounds ---------------------------------------------------------------------------------
    def _run_cells(self, todo: list[Cell], stats: dict, already: int, total: int, observe=None) -> None:
        from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
        from rich.text import Text

        target = planned_rounds(self.plan.rounds)
        # the ETA: the estimate, corrected from the rounds that finished (estimate.Eta; restarted
        # once the reference outputs are made, so that their time is not read as the rounds')
        rounds_s = sum(c.weight for c in todo if not c.skip_reason) * target
        eta = [estimate.Eta(rounds_s)]

        class EtaColumn(ProgressColumn):
            def render(self, task) -> Text:
                return Text(estimate.human(eta[0].remaining()))

        progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[cells]}"),
                            TimeElapsedColumn(), TextColumn("ETA"), EtaColumn(), console=self.console,
                            disable=not self.show_progress, transient=True,
                            refresh_per_second=1)  # the parent stays quiet while a cell is timed
        count = [already]
        records = CellRecords(self.plan, self.ctx.local, getattr(self, "_attempts", {}))

        def store(cell: Cell, record: dict) -> None:
            problem = check_record(record)
            if problem:  # never lose a cell (nor crash the sweep) over a malformed worker result
                record = CellResult.invalid(record, problem)
            self.store.append(record)
            self.run_folder.clear_rounds(cell.key)
            stats["ran"] += 1
            stats[record["status"]] = stats.get(record["status"], 0) + 1
            if record.get("unstable") and record["status"] in ("ok", "wrong"):
                stats["unstable"] = stats.get("unstable", 0) + 1
            count[0] += 1
            progress.update(bar, cells=f"{count[0]}/{total} cells")
            self.say(f"[{count[0]}/{total}] {describe(record)}")

        def unmeasured(cell: Cell, status: str, reason: str, **more) -> None:
            store(cell, records.unmeasured(cell, status, reason, **more))

        with progress:
            bar = progress.add_task("sweep", total=sum(c.weight for c in todo) * target or 1,
                                    cells=f"{already}/{total} cells")
            # cells no node can run are reported (and stored) before anything runs
            for cell in [c for c in todo if c.skip_reason]:
                unmeasured(cell, "skipped", cell.skip_reason)
            runnable = [c for c in todo if not c.skip_reason]
            refs = {}
            if runnable:
                progress.update(bar, description="reference outputs")
                self.check_time("the reference outputs", getattr(self, "_need_refs", 0.0))
                refs = references(self.ctx, {(c.model, c.batch_size): c.model_spec for c in runnable})
            eta[0] = estimate.Eta(rounds_s)
            groups: dict[str, list[Cell]] = {}
            for cell in runnable:
                ref = refs[(cell.model, cell.batch_size)]
                if ref.get("status") != "ok":
                    unmeasured(cell, "failed", f"reference output failed: {ref.get('reason')}",
                               stderr_tail=ref.get("stderr_tail", ""))
                else:
                    groups.setdefault(cell.group, []).append(cell)
            # one group at a time per node (a fleet measures as many groups at once as it has nodes)
            width = 1 if self.ctx.local else max(1, len(self.executor.nodes))
            names = list(groups)
            runner = self.runner_class(self.ctx, records, getattr(self, "_cell_keys", set()), self.check_time,
                                 advance=lambda weight: (eta[0].finished(weight), progress.advance(bar, weight)),
                                 show=lambda text: progress.update(bar, description=text), bounds={},
                                 first_pass=self._passes,
                                 drop=lambda weight: (eta[0].drop(weight), progress.update(
                                     bar, total=max(progress.tasks[bar].total - weight, 1e-9))))
            bounds = runner.bounds  # a Server sweep's latency bounds, from its single-stream cells (resumed too)
            if scenario_cells.needs_bound_cells(self.plan):
                bounds.update(scenario_cells.bounds_from(self.store.latest(on_problem=lambda m: None), self.plan))
            try:
                for i in range(0, len(names), width):
                    wave = {g: groups[g] for g in names[i:i + width]}
                    # its searches and the quickest of its cells' first rounds must fit in what is left
                    need = sum(getattr(self, "_need_search", {}).get(g, 0.0) for g in wave) + min(
                        (c.weight for cs in wave.values() for c in cs), default=0.0)
                    self.check_time(f"{', '.join(wave)}".replace("|", " "), need)
                    too_big = self._memory_skips([c for cs in wave.values() for c in cs], refs)
                    for cell in [c for cs in wave.values() for c in cs if c.key in too_big]:
                        unmeasured(cell, "skipped", too_big[cell.key])
                    wave = {g: [c for c in cs if c.key not in too_big] for g, cs in wave.items()}
                    for phase in runner.phases({g: cs for g, cs in wave.items() if cs}):
                        for cell, record in runner.measure(phase, refs, observe):
                            store(cell, record)
                            if record.get("scenario") == "single-stream":
                                bounds.update(scenario_cells.bounds_from({cell.key: record}, self.plan))
            finally:
                self._passes = runner.passes
            stats["missing"] = len(runner.missing)
            if runner.missing:
                self.say(f"[yellow]{len(runner.missing)} cells not run[/] (their nodes were lost and no other node "
                         f"can run them): continue with: ios-bench run --resume --out {term(self.folder)}")


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
