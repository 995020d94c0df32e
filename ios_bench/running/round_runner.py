"""The interleaved round protocol (the statistics over rounds are :mod:`ios_bench.running.rounds`): the
cells of a (model, batch, device) group are measured in rounds, each a fresh worker, in an order
shuffled per round from ``plan.round_seed``; disturbed rounds are measured again (at most
``plan.max_reruns`` times per cell) and never pooled; ``rounds="auto"`` adds rounds until every
cell's interval is under ``plan.target_ci`` percent or ``plan.time_budget`` is spent. Each round
is kept in ``rounds/`` as it finishes (``--resume`` reuses it); a cell's record is built from its
rounds (:mod:`ios_bench.records.cell_records`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ios_bench.planning.cells import Cell, CellSpec, build_options, label, ref_file, schedule_key, util_file
from ios_bench.planning.plan import DEFAULT_IOS_PROVIDER
from ios_bench.records.cell_records import CellRecords, now, round_record, sequential_figures
from ios_bench.records.record import CellResult
from ios_bench.reporting.escape import term
from ios_bench.running.context import SweepContext
from ios_bench.running.executors import Task, device_kind
from ios_bench.running.references import model_inputs
from ios_bench.running.rounds import (
    AUTO,
    MAX_AUTO_ROUNDS,
    MIN_AUTO_ROUNDS,
    judge_rounds,
    needs_more,
    planned_rounds,
    round_order,
    run_load,
    summarize,
    unstable_reason,
    usual_canary,
)
from ios_bench.running.schedules import optimize_schedules, same_schedules
from ios_bench.scenarios import cells as scenario_cells
from ios_core.check import check_batches
from ios_core.measurement import stats
from ios_core.measurement.interference import load_label

# an extra round (RoundRunner.extra_round) only for a cell whose round the estimate puts at most this long
EXTRA_ROUND_MAX_S = 30.0


def cell_protocol(plan, cell: Cell) -> dict:
    """A round's time budgets: the plan's, or its ``ab`` side's protocol (``Cell.protocol``): "fixed" (none:
    the fixed counts) or "time" (the plan's budgets where it has them, else the defaults)."""
    if cell.protocol == "fixed":
        return {"warmup_s": None, "sample_s": None, "min_repeat": None}
    if cell.protocol == "time" and plan.sample_s is None:
        from ios_bench.planning.plan import DEFAULT_MIN_REPEAT, DEFAULT_SAMPLE_S, DEFAULT_WARMUP_S

        return {"warmup_s": DEFAULT_WARMUP_S, "sample_s": DEFAULT_SAMPLE_S, "min_repeat": DEFAULT_MIN_REPEAT}
    return {"warmup_s": plan.warmup_s, "sample_s": plan.sample_s, "min_repeat": plan.min_repeat}


def _good(rs: list[dict]) -> list[dict]:
    return [r for r in rs if r.get("status") == "ok" and not r.get("disturbed")
            and isinstance(r.get("median_ms"), (int, float))]


def cap_decisions(cells: list[Cell], rounds: dict[str, list[dict]], factor: float | None,
                  decided: set[str]) -> dict[str, dict]:
    """The framework cells to measure no further (docs/harness.md "Capped cells"): a cell whose first
    undisturbed round's median is more than ``factor`` x the best correct peer's (the median of that
    peer's undisturbed rounds so far) among the framework cells of its group at its precision. Judged once
    per cell, right after its first undisturbed round (``decided`` holds the cells already judged and is
    updated); IOS schedule cells and scenario cells are never capped, nor is the best peer. Returns
    ``{cell key: {"factor", "ms", "best", "best_ms", "ratio"}}`` for the cells capped now."""
    if factor is None:
        return {}
    peers = [c for c in cells if not c.schedule and not c.scenario]
    out = {}
    for cell in peers:
        good = _good(rounds.get(cell.key, []))
        if cell.key in decided or len(good) != 1:
            continue
        decided.add(cell.key)
        figures = {c.key: stats.median([r["median_ms"] for r in _good(rounds.get(c.key, []))]) for c in peers
                   if c.precision == cell.precision and c.key != cell.key and _good(rounds.get(c.key, []))}
        if not figures:
            continue
        best = min(figures, key=figures.get)
        ms = good[0]["median_ms"]
        if ms > factor * figures[best]:
            name = next(c.framework for c in peers if c.key == best)
            out[cell.key] = {"factor": factor, "ms": ms, "best": name, "best_ms": figures[best],
                             "ratio": ms / figures[best]}
    return out


class RoundRunner:
    """Measures groups of cells in interleaved rounds within one sweep session.

    ``cell_keys``: every cell of the sweep (an IOS cell without a sequential cell times the
    sequential schedule beside its own); ``check_time`` raises once ``--max-time`` is spent;
    ``advance(weight)`` and ``show(text)`` move the progress bar, ``drop(weight)`` takes work off
    it that will not run (an IOS cell measured as another's identical schedule); ``bounds``: a Server sweep's
    latency bounds by :func:`ios_bench.scenarios.cells.bound_key` (updated by the caller as its
    single-stream cells finish). ``all_rounds`` holds every round of the session (the usual canary
    is their median), ``missing`` the cells whose nodes were lost."""

    def __init__(self, ctx: SweepContext, records: CellRecords, cell_keys: set[str],
                 check_time: Callable[..., None], advance: Callable[[float], None],
                 show: Callable[[str], None], bounds: dict, first_pass: int = 0,
                 drop: Callable[[float], None] | None = None):
        self.ctx = ctx
        self.records = records
        self.cell_keys = cell_keys
        self.check_time = check_time
        self.advance = advance
        self.show = show
        self.drop = drop or (lambda weight: None)  # work the progress bar and the ETA no longer wait for
        self.bounds = bounds
        self.passes = first_pass  # rounds started so far, over every group (each round's "pass")
        self.all_rounds: list[dict] = []
        self.cell_rounds: dict[str, list[dict]] = {}  # the same rounds by cell (the steady load is judged per cell)
        self.load: list[dict] = []  # the steady co-tenants of the session's rounds so far (rounds.run_load)
        self.missing: list[Cell] = []
        self.capped: dict[str, dict] = {}  # cells measured no further (cap_decisions), by key
        self.cap_judged: set[str] = set()
        self.t_measure = time.monotonic()  # --time-budget counts from here

    def phases(self, wave: dict[str, list[Cell]]) -> list[dict[str, list[Cell]]]:
        """The cells of a wave in the order they must run: a Server sweep's single-stream cells
        (whose p90 bounds the server cells' latency) first, then the rest; otherwise one phase."""
        if not scenario_cells.needs_bound_cells(self.ctx.plan):
            return [wave]
        first = {g: [c for c in cs if c.scenario == "single-stream"] for g, cs in wave.items()}
        rest = {g: [c for c in cs if c.scenario != "single-stream"] for g, cs in wave.items()}
        return [{g: cs for g, cs in phase.items() if cs} for phase in (first, rest)]

    def budget_left(self) -> bool:
        budget = self.ctx.plan.time_budget
        return budget is None or time.monotonic() - self.t_measure < budget

    def order(self, keys: list[str], group: str) -> list[str]:
        """The order the cells ``keys`` of ``group`` run in this pass (shuffled from the seed)."""
        return round_order(keys, self.passes, self.ctx.plan.round_seed, group)

    def wanted(self, cell: Cell, rounds: dict[str, list[dict]], stopped: dict[str, dict]) -> bool:
        """Whether ``cell`` gets a round in this pass (``rounds``: each measured cell's rounds so
        far; ``stopped``: the cells a failed round ended)."""
        plan = self.ctx.plan
        if cell.key in stopped or cell.key in self.capped:
            return False
        rs = rounds[cell.key]
        good = [r for r in rs if r.get("status") == "ok" and not r.get("disturbed")]
        if plan.rounds != AUTO:
            if len(good) >= plan.rounds:
                return self.extra_round(cell, rs, len(good))
            if len(rs) >= plan.rounds + plan.max_reruns:
                return False
            return bool(good) is False or self.budget_left()
        if len(rs) >= MAX_AUTO_ROUNDS + plan.max_reruns or len(good) >= MAX_AUTO_ROUNDS:
            return False
        if len(good) < MIN_AUTO_ROUNDS:
            return not good or self.budget_left()
        return self.budget_left() and needs_more(summarize(rs), plan.target_ci)

    def extra_round(self, cell: Cell, rs: list[dict], good: int) -> bool:
        """Whether ``cell``, with its planned rounds measured (``good`` undisturbed of ``rs``), gets one more:
        its figure is unstable (``unstable_reason``: its interval too wide) and it has had fewer than
        ``plan.extra_rounds`` extra ones, a round of it is cheap (estimated at most
        :data:`EXTRA_ROUND_MAX_S`), and the time budget allows. Not for a one-round plan, an ``ab`` side
        (its pairs have their own rule) or a LoadGen scenario cell."""
        plan = self.ctx.plan
        extra = getattr(plan, "extra_rounds", 0) or 0
        if not extra or plan.rounds < 2 or cell.side or cell.scenario or good >= plan.rounds + extra:
            return False
        if len(rs) >= plan.rounds + extra + plan.max_reruns or cell.weight > EXTRA_ROUND_MAX_S:
            return False
        return self.budget_left() and unstable_reason(summarize(rs)) is not None

    def measure(self, groups: dict[str, list[Cell]], refs: dict, observe) -> list[tuple[Cell, dict]]:
        """Every round of the cells of ``groups``; returns each cell's finished record."""
        ctx, plan = self.ctx, self.ctx.plan
        cells = [c for cs in groups.values() for c in cs]
        done: list[tuple[Cell, dict]] = []
        scheds = optimize_schedules(ctx, [c for c in cells if c.schedule])
        for cell in [c for c in cells if c.schedule and "failed" in scheds[c.key]]:
            info = scheds[cell.key]
            done.append((cell, self.records.unmeasured(cell, "failed", info["failed"],
                                                       stderr_tail=info.get("stderr_tail", ""))))
        cells = [c for c in cells if not (c.schedule and "failed" in scheds[c.key])]
        for cell in [c for c in cells if c.scenario == "server" and scenario_cells.needs_bound_cells(plan)]:
            bound = self.bounds.get(scenario_cells.bound_key(cell), "no single-stream cell was measured")
            if isinstance(bound, str):
                done.append((cell, self.records.unmeasured(cell, "failed", bound)))
        cells = [c for c in cells if not (c.scenario == "server" and scenario_cells.needs_bound_cells(plan)
                                          and isinstance(self.bounds.get(scenario_cells.bound_key(c), ""), str))]
        same = same_schedules(cells, scheds)
        if same:  # measured once, as the cell it shares its schedule with: its rounds never run
            self.drop(sum(c.weight for c in cells if c.key in same) * planned_rounds(plan.rounds))
        measured = [c for c in cells if c.key not in same]
        rounds = {c.key: ctx.run_folder.rounds(c.key) for c in measured}
        resumed = sum(len(r) for r in rounds.values())
        if resumed:
            ctx.say(f"resuming: {resumed} round(s) of {len(rounds)} cell(s) already measured")
        stopped: dict[str, dict] = {}  # cell key -> the round that ended it (failed, skipped, wrong output)
        for key, rs in rounds.items():
            last = next((r for r in reversed(rs) if r.get("status") != "ok"), None)
            if last is not None:
                stopped[key] = last
        by_key = {c.key: c for c in measured}
        started: dict[str, str] = {}

        while True:
            todo = {g: [c.key for c in cs if c.key in by_key and self.wanted(by_key[c.key], rounds, stopped)]
                    for g, cs in groups.items()}
            todo = {g: ks for g, ks in todo.items() if ks}
            if not todo:
                break
            tasks = []
            for group, keys in todo.items():
                for pos, key in enumerate(self.order(keys, group)):
                    cell = by_key[key]
                    tasks.append(self.round_task(cell, refs[(cell.model, cell.batch_size)], scheds.get(key),
                                                 len(rounds[key]), pos))
            self.passes += 1

            def finished(task: Task, res: dict) -> None:
                cell, index, pos = task.payload
                rnd = round_record(task, res, index, pos, started.get(task.key), self.passes - 1)
                rounds[cell.key].append(rnd)
                ctx.run_folder.add_round(cell.key, rnd)
                self.all_rounds.append(rnd)
                self.cell_rounds.setdefault(cell.key, []).append(rnd)
                if rnd["status"] != "ok":
                    stopped[cell.key] = rnd
                self.advance(cell.weight)

            def starting(task: Task) -> None:
                cell, index, _ = task.payload
                self.check_time(f"{cell.model} b{cell.batch_size} {label(cell.framework)} round {index + 1}",
                                cell.weight)
                started[task.key] = now()
                self.show(term(f"{cell.model} b{cell.batch_size} {label(cell.framework)} round {index + 1}",
                               newlines=False))

            missing = ctx.executor.run(tasks, finished, starting=starting, observe=observe)
            if missing:  # nodes lost: those cells wait for --resume
                for t in missing:
                    stopped[t.payload[0].key] = {"status": "missing"}
            ref_canary = usual_canary(self.all_rounds)
            self.update_load()
            for key in {t.payload[0].key for t in tasks}:
                before = {id(r) for r in rounds[key] if r.get("disturbed")}
                judge_rounds(rounds[key], ref_canary, self.load, key)
                for r in rounds[key]:
                    if r.get("disturbed") and id(r) not in before:
                        ctx.say(f"[dim]{term(label(by_key[key].framework))} round {r['round'] + 1} "
                                f"({term(by_key[key].model, False)} b{by_key[key].batch_size}) disturbed: "
                                f"{term(r['disturbed'], False)}[/]")
            self.cap(groups, rounds, by_key)
        ref_canary = usual_canary(self.all_rounds)
        self.update_load()
        records = {}
        for cell in measured:
            if stopped.get(cell.key, {}).get("status") == "missing":
                self.missing.append(cell)
                continue
            judge_rounds(rounds[cell.key], ref_canary, self.load, cell.key)
            records[cell.key] = self.records.from_rounds(cell, rounds[cell.key], scheds.get(cell.key),
                                                         stopped.get(cell.key))
            if cell.key in self.capped and records[cell.key]["status"] == "ok":
                records[cell.key] = CellResult.capped(records[cell.key], self.capped[cell.key])
        for key, canonical in same.items():
            cell = next(c for c in cells if c.key == key)
            if canonical in records:
                records[key] = self.records.same_as(cell, records[canonical], scheds[key])
        sequential_figures(records)
        done += [(c, records[c.key]) for c in cells if c.key in records]
        return done

    def cap(self, groups: dict[str, list[Cell]], rounds: dict[str, list[dict]], by_key: dict[str, Cell]) -> None:
        """After a pass: the framework cells that can no longer change the answer get no more rounds
        (:func:`cap_decisions`; ``plan.cap_factor``, None: never). Not in an ``ab`` sweep (its two sides
        are the answer) nor with one round per cell (nothing to save)."""
        plan = self.ctx.plan
        if plan.cap_factor is None or plan.ab or plan.rounds == 1:
            return
        for cells in groups.values():
            now = cap_decisions([c for c in cells if c.key in by_key], rounds, plan.cap_factor, self.cap_judged)
            for key, why in now.items():
                self.capped[key] = why
                cell = by_key[key]
                left = max(0, planned_rounds(plan.rounds) - len(_good(rounds[key])))
                self.drop(cell.weight * left)
                self.ctx.say(f"[dim]{term(label(cell.framework))} ({term(cell.model, False)} b{cell.batch_size}) "
                             f"capped: {why['ms']:.3f} ms is {why['ratio']:.1f}x {term(label(why['best']), False)}'s "
                             f"{why['best_ms']:.3f} ms (over --cap-factor {why['factor']:g}): no more rounds[/]")

    def update_load(self) -> None:
        """The steady load over every round of the session so far (:func:`run_load`), said when it
        appears, changes or goes."""
        load = run_load(self.cell_rounds)
        if [(c["name"], c["pid"]) for c in load] != [(c["name"], c["pid"]) for c in self.load]:
            if load:
                c = load[0]
                self.ctx.say(f"[yellow]steady load[/] ({term(load_label(load), False)}, in {c['windows']} of "
                             f"{c['of']} rounds): rounds under it are measured under that condition, and their "
                             "figures say so")
            else:
                self.ctx.say("steady load: none any more (the co-tenant came and went): its rounds are disturbed")
        self.load = load

    def round_task(self, cell: Cell, ref: dict, sched: dict | None, index: int, position: int) -> Task:
        """The worker task of one round of a cell (``index``: the cell's round; ``position``: its
        place in the round's shuffled order)."""
        plan, folder = self.ctx.plan, self.ctx.folder
        stem = cell.file_stem
        spec = CellSpec(model_spec=cell.model_spec, batch_size=cell.batch_size, device=device_kind(cell.device),
                        adapter=cell.adapter, threads=plan.threads, seed=plan.seed, input_seed=plan.input_seed,
                        ref_path=ref_file(cell.model, cell.batch_size),
                        input_path=ref_file(cell.model, cell.batch_size, "input.npy"),
                        result_path=f"work/{stem}.r{index}.result.json", warmup=plan.warmup, number=plan.number,
                        repeat=plan.repeat, min_sample_ms=plan.min_sample_ms, **cell_protocol(plan, cell),
                        precision=cell.precision,
                        spin_policy=plan.spin_policy, input_sha1=ref.get("input_sha1"), round=index,
                        options=build_options(plan, cell))
        spec = spec.to_dict()
        inputs = [spec["ref_path"], spec["input_path"]] + model_inputs(folder, spec, cell.model_spec)
        source_ref = ref_file(cell.model, cell.batch_size, "source.npy")
        if (folder / source_ref).exists():  # an imported model: onnxruntime on the original file
            spec["source_ref_path"] = source_ref
            inputs.append(source_ref)
        elif ref.get("source_error"):  # ... which could not run it: the record says so (independent_check)
            spec["source_error"] = ref["source_error"]
        checks = ref_file(cell.model, cell.batch_size, "check.npz")
        if ref.get("check") and check_batches(cell.batch_size, cell.precision or "fp32") > 1 and not cell.scenario:
            spec["check_path"] = checks  # int8: the arg-max share over further seeded batches (task_cell)
            inputs.append(checks)
        if cell.precision == "int8" and ref.get("int8_simulated") and not cell.scenario:
            spec["int8_sim_path"] = ref_file(cell.model, cell.batch_size, "int8sim.npy")  # its RMS bound (task_cell)
            inputs.append(spec["int8_sim_path"])
        outputs = []
        if plan.sample_utilization:
            spec["util_path"] = util_file(cell)
            outputs.append(spec["util_path"])
        if cell.schedule:
            spec.update(schedule=cell.schedule, provider=cell.provider or DEFAULT_IOS_PROVIDER,
                        schedule_path=sched["path"])
            base = sched["path"][: -len(".json")]
            inputs += [p for p in (sched["path"], base + ".npz") if (folder / p).exists()]
            if cell.schedule != "sequential" and not self.has_sequential_cell(cell) and not cell.scenario:
                spec["sequential_baseline"] = True
        if cell.scenario:  # a LoadGen scenario's round (ios_bench.scenarios.round)
            extra = scenario_cells.round_spec(cell, plan, index, self.bounds.get(
                scenario_cells.bound_key(cell)) if cell.scenario == "server" else None)
            spec.update(scenario=extra["scenario"], loadgen_path=extra["loadgen_path"],
                        qsl_path=scenario_cells.qsl_file(cell.model, cell.batch_size))
            inputs.append(spec["qsl_path"])
            outputs += extra["outputs"]
        CellSpec.from_dict(spec)  # the spec stays one the worker reads
        return Task(f"{cell.key}#r{index}", spec, f"logs/{stem}.r{index}.log", plan.timeout, cell.device,
                    plan.threads, inputs, outputs, cell.nodes, group=cell.group,
                    payload=(cell, index, position))

    def has_sequential_cell(self, cell: Cell) -> bool:
        key = cell.key.replace(cell.framework, schedule_key("sequential", cell.provider or DEFAULT_IOS_PROVIDER))
        return key in self.cell_keys
