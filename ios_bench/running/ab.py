"""Paired, interleaved A/B sweeps (``ios-bench ab A B``; docs/harness.md, "A/B in one sweep").

Two sweeps run one after the other are compared across whatever the machine did between them;
``ab`` measures both sides in one sweep instead. Its sides are two models (A and B, e.g. before and
after a change) or one model under two configurations (``--a-option`` / ``--b-option``: adapter
build options, or IOS schedules). Every cell is tagged with its side (``A`` / ``B``, the cell key's
variant, so ``report`` and ``compare`` read the run like any other) and belongs to a **pair**: the
same framework (or IOS provider, when the sides differ by schedule) at the same batch size and
device on the other side. In each round (a "pass" of the sweep) the pairs run in an order
shuffled from the recorded ``round_seed``, and the two cells of a pair back to back, which side
first drawn per round from the same seed (:func:`pair_order`), each in a fresh worker process; the
order is kept in every round's ``position``. A disturbed round is measured again together with its
partner, so that rounds pair by their ``pass``.

The verdict (:func:`paired_comparison`) uses the **paired** log-ratios ``d = log(B / A)`` of the
two rounds of each pass: a change common to both rounds of a pass (the machine's drift) cancels.
The change is ``exp(median d) - 1`` with a Student t interval on the ``d`` (:func:`paired_interval`),
its spread moderated by the run's typical paired spread as ``compare`` does
(``ios_bench.reporting.compare.PRIOR_DF``). A change is a regression or an improvement when its
interval excludes zero and it is at least a practical floor (``--min-change``, :data:`MIN_CHANGE`);
``compare``'s noise threshold (made for two separate runs, and not narrowing with pairs) does not
apply. A "within noise" verdict states the smallest change the run could have flagged
(:func:`detectable_change`). A side that failed (or whose output check failed) is reported as
``failed``, never given a verdict. ``--rounds auto`` (ab's default) adds pairs while the interval's
half-width is over ``--target-ci`` or the detectable change is over the floor, until
``--time-budget`` is spent or :data:`MAX_AUTO_PAIRS`; what stopped each pair is kept in
:data:`STOPS_FILE`.

As a by-product the run measures how far this machine drifts between rounds that are not paired
(:func:`drift_figures`, kept in ``ab-drift.json``): ``compare`` uses it to mark verdicts between two
separate runs that drift alone could explain.
"""

from __future__ import annotations

import dataclasses
import json
import math
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ios_bench.errors import InputError
from ios_bench.planning import probing
from ios_bench.planning.cells import Cell, label
from ios_bench.planning.plan import adapter_options
from ios_bench.records.record import now
from ios_bench.records.runfolder import PLAN_FILE
from ios_bench.reporting.compare import (
    ENOUGH_ROUNDS,
    PRIOR_DF,
    Change,
    Comparison,
    judge_change,
)
from ios_bench.reporting.drift import DRIFT_FILE
from ios_bench.results import load_run
from ios_bench.running.round_runner import RoundRunner
from ios_bench.running.rounds import (  # noqa: F401 - the paired statistics, re-exported
    AUTO,
    MIN_AUTO_ROUNDS,
    MIN_CHANGE,
    detectable_change,
    figure_over_rounds,
    log_ratios,
    paired_half_width,
    paired_interval,
    paired_rounds,
    paired_spread,
    round_median,
    round_order,
    typical_paired_spread,
    who_disturbed,
)
from ios_bench.running.sweep import Sweep
from ios_core.atomic import atomic_write_json
from ios_core.measurement import stats

SIDES = ("A", "B")
MAX_AUTO_PAIRS = 10  # --rounds auto adds pairs up to this many: twice the 5 pairs of a fixed run
STOPS_FILE = "ab-pairs.json"  # what stopped each pair's rounds (PairedRoundRunner.stops)
STOP_REASONS = {
    "target-ci": "the interval's half-width under --target-ci and the detectable change at most --min-change",
    "time-budget": "--time-budget spent",
    "max-pairs": f"{MAX_AUTO_PAIRS} pairs (--rounds auto's most)",
    "rounds": "the pairs --rounds asked for",
    "reruns": "re-runs of disturbed rounds ran out",
    "failed": "a side failed",
}


# ---- sides ------------------------------------------------------------------------------------------


def option_problem(framework: str, options: dict) -> str | None:
    """Why ``options`` are not build options of ``framework``'s adapter (its ``_build``'s named
    parameters; an adapter that takes ``**options`` accepts any), or None. Asks the adapter's class
    only: the framework itself is not imported."""
    import inspect

    import adapters

    name = "ios" if framework == "ios" or framework.startswith("ios-") else framework
    if name not in adapters.names():
        return f"unknown framework {framework!r} (choose from: {', '.join(adapters.names())})"
    params = inspect.signature(type(adapters.get(name))._build).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    named = [n for n in params if n not in ("self", "graph", "batch_size", "device", "threads")]
    unknown = sorted(set(options) - set(named))
    if unknown:
        return (f"{framework} has no build option {', '.join(unknown)}"
                + (f" (its options: {', '.join(named)})" if named else " (it takes none)"))
    return None


def side_build_options(side: dict, cell: Cell) -> dict:
    """The build options a side gives one of its cells (``run --adapter-option``'s rule)."""
    return adapter_options(SimpleNamespace(adapter_options=side.get("options") or {}), cell.framework, cell.adapter)


def pair_id(framework: str, schedule: str | None, provider: str | None, batch_size: int, device: str,
            ab: dict, precision: str | None = None) -> str:
    """The pair a cell (or record) belongs to: its framework at its batch size, device and precision
    (``|int8`` where not fp32: A's int8 cell pairs with B's int8 cell only); an IOS cell's provider
    when the sides differ by schedule (A's schedule against B's)."""
    by_schedule = any((ab.get(s.lower()) or {}).get("schedule") for s in SIDES)
    slot = f"ios[{provider or 'torch'}]" if schedule and by_schedule else framework
    return f"{slot}|b{batch_size}|{device}" + (f"|{precision}" if precision and precision != "fp32" else "")


def record_pair(rec: dict, ab: dict) -> str:
    return pair_id(rec["framework"], rec.get("schedule"), rec.get("provider"), int(rec["batch_size"]),
                   rec["device"], ab, rec.get("precision"))


# ---- the order of a round ---------------------------------------------------------------------------


def pair_order(pairs: dict[str, dict[str, str]], round_index: int, seed: int, group: str) -> list[str]:
    """The cell keys of one round of ``group``: the pairs (``{pair: {side: key}}``) in an order
    shuffled per round (``ios_bench.running.rounds.round_order``), each pair's two cells back to back, which
    side first drawn per round from (seed, group, round) too; a pair with one side left runs alone."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(f"ab:{group}".encode()), round_index])
    out = []
    for pid in round_order(sorted(pairs), round_index, seed, group):
        first = int(rng.integers(0, 2))
        sides = (SIDES[first], SIDES[1 - first])
        out += [pairs[pid][s] for s in sides if s in pairs[pid]]
    return out


# ---- paired statistics (ios_bench.running.rounds: the report judges IOS against sequential with them too)


def unpaired_interval(a, b, confidence: float = 0.95) -> tuple[float, float, float]:
    """The same rounds compared as two separate runs would be (``ios_bench.running.rounds.ratio_interval``):
    drift between rounds is then in the interval (benchmarks and tests set the two side by side)."""
    from ios_bench.running.rounds import ratio_interval

    return ratio_interval(a, b, confidence)


# ---- the verdicts -----------------------------------------------------------------------------------


def read_ab(folder) -> dict:
    """The ``ab`` section of a run folder's plan (``InputError`` when the run is not an ab run)."""
    try:
        plan = json.loads((Path(folder) / PLAN_FILE).read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{folder}: no readable {PLAN_FILE} ({e})") from None
    ab = plan.get("ab") if isinstance(plan, dict) else None
    if not isinstance(ab, dict):
        raise InputError(f"{folder}: not an `ios-bench ab` run (its plan has no sides)")
    return {**ab, "rounds": plan.get("rounds")}


def _good(r: dict | None) -> bool:
    return r is not None and r.get("status") == "ok" and bool((r.get("check") or {}).get("passed"))


def _state(r: dict) -> str:
    return "wrong output" if r.get("status") in ("ok", "wrong") else str(r.get("status"))


def _pairs(records: list[dict], ab: dict) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in records:
        side = r.get("variant")
        if side in SIDES:
            out.setdefault(record_pair(r, ab), {})[side] = r
    return out


def read_stops(folder) -> dict[str, dict]:
    """What stopped each pair's rounds (:data:`STOPS_FILE`, written by the sweep), ``{}`` without it."""
    try:
        stops = json.loads((Path(folder) / STOPS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return stops if isinstance(stops, dict) else {}


def paired_comparison(folder, min_change: float = MIN_CHANGE, confidence: float = 0.95) -> Comparison:
    """One verdict per pair of an ab run folder (``compare``'s :class:`~ios_bench.reporting.compare.Change`,
    ``rounds_a`` = ``rounds_b`` = the pairs used): a regression or an improvement when the paired
    interval excludes zero and the change is at least ``min_change`` (the practical floor, a
    fraction); compare's noise threshold does not apply (pairing removes the drift it guards
    against). Each change carries the floor, the smallest change the run could have flagged
    (:func:`detectable_change`) and what stopped its pairs (:data:`STOP_REASONS`)."""
    ab = read_ab(folder)
    run = load_run(folder)
    stops = read_stops(folder)
    pairs = _pairs(run.records, ab)
    data = {pid: paired_rounds(p["A"]["rounds"], p["B"]["rounds"]) for pid, p in pairs.items()
            if _good(p.get("A")) and _good(p.get("B"))}
    typical = typical_paired_spread(data.values())
    prior = (typical, PRIOR_DF) if typical is not None else None
    asked = ab.get("rounds")
    asked = MIN_AUTO_ROUNDS if asked == AUTO else asked if isinstance(asked, int) else None
    out = []
    for pid, p in pairs.items():
        x, y = p.get("A"), p.get("B")
        base = x or y
        if ab["mode"] == "options":  # one model under two configurations (named NAME@A / NAME@B)
            model = str(base["model"]).rsplit("@", 1)[0]
        else:
            model = f"{x['model']} -> {y['model']}" if x and y and x["model"] != y["model"] else base["model"]
        framework = base["framework"] if not (x and y and x["framework"] != y["framework"]) else \
            f"{label(x['framework'])} -> {label(y['framework'])}"
        change = low = high = ma = mb = detectable = None
        n, why = 0, ""
        if x is None or y is None:
            verdict = f"only in {'A' if y is None else 'B'}"
        elif not (_good(x) and _good(y)):
            bad = [f"{s}: {_state(r)}" for s, r in (("A", x), ("B", y)) if not _good(r)]
            verdict, why = "failed", "; ".join(bad) + " (" + "; ".join(
                str(r.get("reason") or (r.get("check") or {}).get("reason") or "")[:120] for r in (x, y)
                if not _good(r)) + ")"
        else:
            a, b = data[pid]
            n = len(a)
            if a:
                ma, mb = figure_over_rounds(a), figure_over_rounds(b)
                change, low, high = paired_interval(a, b, confidence, prior)
                half, spread, _ = paired_half_width(a, b, confidence, prior)
                detectable = detectable_change(half, min_change)
            who = who_disturbed(list(x.get("rounds") or []) + list(y.get("rounds") or []))
            who = f"; disturbed by {who}" if who else ""
            if n < 2:
                verdict, why = "unstable", (f"{n} paired round{'s' * (n != 1)} (both sides undisturbed and under the "
                                            f"same load in the same pass){who}")
            elif asked is not None and n < min(asked, ENOUGH_ROUNDS):
                verdict, why = "unstable", f"{n} paired rounds of the {asked} asked for (the machine was busy){who}"
            else:
                verdict, why = judge_change(change, low, high, min_change, "the floor (--min-change)")
                if verdict == "within noise":  # what the run could and could not see
                    why += (f"; this run could not have flagged a change under ±{detectable:.1%} ({n} pairs, "
                            f"paired spread {math.expm1(spread):.1%})")
                else:
                    why = f"interval clear of zero and |change| at least the floor {min_change:.1%}"
            loads = list(dict.fromkeys(r["load"] for r in (x, y) if r.get("load")))
            if loads and n:  # the pairs ran under a steady co-tenant: the verdict holds under that condition
                why += "; " + "; ".join(loads)
        stop = stops.get(pid) or {}
        out.append(Change(pid, model, int(base["batch_size"]), framework, base["device"], ma, mb, change, low, high,
                          n, n, verdict, why, floor=min_change, detectable=detectable,
                          stopped_by=stop.get("stopped_by"), precision=base.get("precision") or "fp32"))
    notes = [f"paired: each change is exp(median log(B/A)) - 1 over the rounds of A and B measured back to back in "
             f"the same pass ({confidence:.0%} t interval); drift common to a pair cancels. A change is flagged when "
             f"its interval excludes zero and it is at least the floor {min_change:.1%} (--min-change)"]
    loads = list(dict.fromkeys(str(r["load"]).split(" (")[0] for r in run.records if r.get("load")))
    if loads:
        notes.append(f"measured {'; '.join(loads)}: a co-tenant used about that share through the run; each pair's two "
                     "rounds ran under it, so its verdict holds under that condition (not on a quiet machine)")
    stopped = {}
    for c in out:
        if c.stopped_by:
            stopped[c.stopped_by] = stopped.get(c.stopped_by, 0) + 1
    if stopped:
        notes.append("pairs stopped by: " + ", ".join(f"{STOP_REASONS.get(k, k)} ({v} cell{'s' * (v != 1)})"
                                                      for k, v in stopped.items()))
    return Comparison(out, min_change, "--min-change", typical, notes, run.problems, threshold_name="floor")


# ---- the drift the run saw (compare's "drift possible") ---------------------------------------------


def drift_figures(folder) -> dict | None:
    """What the run's pairs say about this machine's drift (log scale, medians over the pairs with
    three or more paired rounds): ``paired_spread`` (sd of one paired log-ratio), ``round_spread``
    (sd of one side's round medians over the run: what unpaired rounds spread over its span see),
    ``drift_spread`` (sd of the part common to both rounds of a pass: ``var(pair mean) - var(d)/4``),
    and ``between_run_spread``: the spread of the log ratio of two separate runs' figures of one cell
    (``sqrt(2) x drift_spread``, with the rounds' own noise at the run's rounds per side). None
    without such a pair."""
    ab = read_ab(folder)
    run = load_run(folder)
    pairs = _pairs(run.records, ab)
    paired, rounds, drift, between, n_pairs = [], [], [], [], []
    for p in pairs.values():
        if not (_good(p.get("A")) and _good(p.get("B"))):
            continue
        a, b = paired_rounds(p["A"]["rounds"], p["B"]["rounds"])
        if len(a) < 3:
            continue
        la = np.log([round_median(g) for g in a])
        lb = np.log([round_median(g) for g in b])
        d, m = lb - la, (la + lb) / 2
        s_d = stats.std(d)
        s_round = math.sqrt((stats.std(la) ** 2 + stats.std(lb) ** 2) / 2)
        s_drift = math.sqrt(max(0.0, stats.std(m) ** 2 - s_d ** 2 / 4))
        noise = s_d / math.sqrt(2)  # one round's own (undrifted) spread
        paired.append(s_d)
        rounds.append(s_round)
        drift.append(s_drift)
        between.append(math.sqrt(2 * s_drift ** 2 + 2 * noise ** 2 / len(a)))
        n_pairs.append(len(a))
    if not paired:
        return None
    env = run.env or {}
    return {"run": Path(folder).name, "measured": now(), "cells": len(paired), "pairs": int(stats.median(n_pairs)),
            "hostname": env.get("hostname") or (env.get("os") or {}).get("hostname"),
            "cpu": (env.get("cpu") or {}).get("model"),
            "paired_spread": stats.median(paired), "round_spread": stats.median(rounds),
            "drift_spread": stats.median(drift), "between_run_spread": stats.median(between),
            "doc": "log-scale spreads (ios_bench.running.ab.drift_figures); between_run_spread: the spread of the log "
                   "ratio of two separate runs' figures of one cell that drift and round noise alone give"}


def write_drift(folder) -> dict | None:
    """:func:`drift_figures` kept in the run folder (``ab-drift.json``, written atomically)."""
    figures = drift_figures(folder)
    if figures is not None:
        atomic_write_json(Path(folder) / DRIFT_FILE, figures)
    return figures


# ---- the sweep ----------------------------------------------------------------------------------------


class PairedRoundRunner(RoundRunner):
    """The round protocol with pairs: the two cells of a pair run back to back in each pass
    (:func:`pair_order`), both wanted while the pair wants paired rounds (``plan.rounds`` of them;
    with ``auto`` at least 3, then more while the paired interval's half-width is over
    ``plan.target_ci`` percent or the smallest change it could flag is over the floor,
    ``plan.ab["min_change"]``, until ``plan.time_budget`` is spent or :data:`MAX_AUTO_PAIRS`).
    What stopped each pair is kept in ``stops`` and in the run folder (:data:`STOPS_FILE`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cells: dict[str, Cell] = {}
        self.partner: dict[str, str] = {}
        self.stops: dict[str, dict] = {}

    def measure(self, groups, refs, observe):
        cells = [c for cs in groups.values() for c in cs]
        self.cells.update({c.key: c for c in cells})
        by_pair: dict[str, dict[str, str]] = {}
        for c in cells:
            by_pair.setdefault(c.pair or c.key, {})[c.side or "A"] = c.key
        for members in by_pair.values():
            if len(members) == 2:
                self.partner[members["A"]] = members["B"]
                self.partner[members["B"]] = members["A"]
        try:
            return super().measure(groups, refs, observe)
        finally:
            if self.stops:
                atomic_write_json(Path(self.ctx.folder) / STOPS_FILE, self.stops)

    def order(self, keys: list[str], group: str) -> list[str]:
        pairs: dict[str, dict[str, str]] = {}
        for k in keys:
            c = self.cells[k]
            pairs.setdefault(c.pair or k, {})[c.side or "A"] = k
        return pair_order(pairs, self.passes, self.ctx.plan.round_seed, group)

    def _prior(self, rounds: dict) -> tuple[float, int] | None:
        """The typical paired spread over the pairs measured so far (as the verdict's)."""
        seen, data = set(), []
        for key, other in self.partner.items():
            if key in rounds and other in rounds and frozenset((key, other)) not in seen:
                seen.add(frozenset((key, other)))
                data.append(paired_rounds(rounds[key], rounds[other]))
        typical = typical_paired_spread(data)
        return (typical, PRIOR_DF) if typical is not None else None

    def _stop(self, cell: Cell, reason: str, pairs: int, half: float | None = None) -> bool:
        pid = getattr(self.cells.get(cell.key), "pair", None) or getattr(cell, "pair", None) or cell.key
        self.stops[pid] = {"stopped_by": reason, "pairs": pairs,
                           "half_width_pct": half * 100 if half is not None else None,
                           "why": STOP_REASONS[reason]}
        return False

    def wanted(self, cell: Cell, rounds: dict, stopped: dict) -> bool:
        plan = self.ctx.plan
        other = self.partner.get(cell.key)
        if other is None or other not in rounds:
            return super().wanted(cell, rounds, stopped)
        mine, theirs = rounds[cell.key], rounds[other]
        a, b = paired_rounds(mine, theirs)
        if cell.key in stopped or other in stopped:
            return self._stop(cell, "failed", len(a))
        tries = max(len(mine), len(theirs))
        if plan.rounds != AUTO:
            if len(a) >= plan.rounds:
                return self._stop(cell, "rounds", len(a))
            if tries >= plan.rounds + plan.max_reruns:
                return self._stop(cell, "reruns", len(a))
            return not a or self.budget_left() or self._stop(cell, "time-budget", len(a))
        if len(a) >= MAX_AUTO_PAIRS:
            return self._stop(cell, "max-pairs", len(a))
        if tries >= MAX_AUTO_PAIRS + plan.max_reruns:
            return self._stop(cell, "reruns", len(a))
        if len(a) < MIN_AUTO_ROUNDS:
            return not a or self.budget_left() or self._stop(cell, "time-budget", len(a))
        half, _, _ = paired_half_width(a, b, prior=self._prior(rounds))
        floor = float((getattr(plan, "ab", None) or {}).get("min_change", MIN_CHANGE))
        if half * 100 <= plan.target_ci and detectable_change(half, floor) <= floor:
            return self._stop(cell, "target-ci", len(a), half)
        return self.budget_left() or self._stop(cell, "time-budget", len(a), half)


def leave_out_unoffered(cells: list[Cell], probes: dict) -> tuple[list[Cell], str]:
    """``cells`` less those skipped only because their precision is not offered (:func:`_precision_skip`),
    and those cells' reasons, once each, in one line ("" when none was left out)."""
    unoffered = [c for c in cells if _precision_skip(c, probes)]
    return [c for c in cells if c not in unoffered], "; ".join(dict.fromkeys(c.skip_reason for c in unoffered))


def _precision_skip(cell: Cell, probes: dict) -> bool:
    """Whether ``cell`` is skipped only because its framework (or, for an IOS cell, IOS or its kernel
    provider) does not offer its precision on its device (not because it cannot run here)."""
    if cell.precision == "fp32" or not cell.skip_reason:
        return False
    probe = probes.get(cell.device) or {}
    avail = probe.get("adapters") or {}
    if cell.schedule:
        why = (probing.precision_reason(avail, cell.adapter, cell.precision, cell.device)
               or probing.provider_precision_reason(probe, cell.provider, cell.precision, cell.device))
    else:
        why = probing.precision_reason(avail, cell.framework, cell.precision, cell.device)
    return why is not None and why == cell.skip_reason


class ABSweep(Sweep):
    """A sweep whose cells are the two sides of ``plan.ab`` (models mode: ``plan.models`` = [A, B];
    options mode: one model, each cell on both sides with its side's options or schedule, the
    model named ``NAME@A`` / ``NAME@B`` on each side so that the report shows both),
    measured with :class:`PairedRoundRunner`. A cell no node can run is refused (one line, nothing
    written): a pair needs both sides."""

    runner_class = PairedRoundRunner

    def name_graphs(self, graphs: dict) -> None:
        """Two models of the same name (before and after a change, saved under one name) are told
        apart as ``NAME@A`` and ``NAME@B`` (the cells', reference outputs' and schedules' name; the
        files are the user's)."""
        ab = self.plan.ab
        if ab["mode"] == "models":
            ga, gb = graphs[ab["a"]["model"]], graphs[ab["b"]["model"]]
            if ga.name == gb.name:
                ga.name, gb.name = f"{ga.name}@A", f"{gb.name}@B"
        super().name_graphs(graphs)

    def plan_cells(self, probes: dict, graphs: dict) -> list[Cell]:
        ab = self.plan.ab
        cells = super().plan_cells(probes, graphs)
        # a pair at a precision its framework (or IOS's kernel provider) does not offer has no side
        # to measure: left out, said once in the notes; an ab left with no pair at all is refused
        cells, why = leave_out_unoffered(cells, probes)
        if why:
            if not cells and not self.resume:
                self._scenario_refusals = [f"--precision {','.join(self.plan.precisions)}: no pair of this ab can be "
                                           f"given at it ({why})"]
                return []
            self.notes.append(f"pairs left out, their precision not offered: {why}")
        out = []
        for c in cells:
            for side in SIDES:
                conf = ab[side.lower()]
                if ab["mode"] == "models" and c.model_spec != conf["model"]:
                    continue
                if c.schedule and conf.get("schedule") and c.schedule != conf["schedule"]:
                    continue
                copy = dataclasses.replace(c, side=side)
                if ab["mode"] == "options":  # one model: its two sides are two rows of the report
                    copy.model = f"{c.model}@{side}"
                copy.side_options = side_build_options(conf, copy) or None
                copy.protocol = conf.get("protocol")
                copy.pair = pair_id(c.framework, c.schedule, c.provider, c.batch_size, c.device, ab, c.precision)
                out.append(copy)
        refusals = list(dict.fromkeys(f"{c.framework} cannot run here: {c.skip_reason}" for c in out if c.skip_reason))
        pairs: dict[str, set] = {}
        for c in out:
            pairs.setdefault(c.pair, set()).add(c.side)
        refusals += [f"{pid.replace('|', ' ')} has no {next(s for s in SIDES if s not in sides)} side"
                     for pid, sides in pairs.items() if len(sides) < 2]
        if refusals and not self.resume:
            self._scenario_refusals = refusals  # the sweep's refusal: one line, the run folder removed
        return out

    def _run_locked(self, graphs, clock_lock):
        out = super()._run_locked(graphs, clock_lock)
        try:
            write_drift(self.folder)
        except (InputError, ValueError, OSError) as e:
            self.say(f"[yellow]warning:[/] the drift figures were not written: {e}")
        return out
