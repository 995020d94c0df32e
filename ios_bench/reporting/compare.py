"""Compare two runs cell by cell on their rounds (``ios-bench compare runs/A runs/B``).

A cell's figure is the median of its undisturbed rounds' medians (``ios_bench.running.rounds``); a LoadGen
scenario cell's, the median of its rounds' LoadGen figures, throughput taken as its inverse (ms per
sample or query) so that larger is worse everywhere. For each cell present in both runs:

- the change ``figure(B) / figure(A) - 1``;
- its interval (95 % by default) over rounds (``ios_bench.running.rounds.ratio_interval``): a two-sample t
  interval on the log round medians, whose spread is the cell's own between-round spread (robust,
  pooled over the two runs) moderated by the run's typical spread with :data:`PRIOR_DF` degrees of
  freedom (limma's moderated t), so between-process noise is in the interval and three rounds a
  side are enough to see a 10 % change where the rounds agree;
- the **noise threshold**: by default :data:`THRESHOLD_FACTOR` x the typical difference of two
  single rounds, one of each run (``sqrt(2) s``, ``s`` the same typical spread the interval is
  lent), at least 1 %; or ``threshold`` given. It holds back changes too small to matter against the
  process-to-process noise, and drift between sweeps that no interval over one sweep's rounds sees.

Verdicts: ``regression`` / ``improvement`` when the interval excludes zero and the change exceeds
the threshold; ``within noise`` otherwise; ``unstable`` when either side has fewer than two
undisturbed rounds (a schema-1 run has one round per cell: measured in one process), or when its
re-runs of disturbed rounds ran out before a cell had the rounds its plan asked for, or
:data:`ENOUGH_ROUNDS` if it asked for more (without a plan: more disturbed rounds than
undisturbed). Status changes (a cell that now fails, or whose output became wrong) are
regressions too.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from ios_bench.records.runfolder import PLAN_FILE
from ios_bench.results import load_run
from ios_bench.running.rounds import (
    AUTO,
    MIN_AUTO_ROUNDS,
    figure_over_rounds,
    good_rounds,
    pooled_scale,
    ratio_interval,
)
from ios_bench.scenarios.summary import HIGHER_IS_BETTER, round_figure
from ios_core.measurement import stats

MIN_THRESHOLD = 0.01
# degrees of freedom the runs' typical between-round spread lends each cell's interval (twice a
# cell's own at 3 rounds a side); chosen on the A/A and A/B sweeps of
# benchmarks/bench_repeatability.py (docs/harness.md, "Compare")
PRIOR_DF = 8
# the noise threshold over the typical difference of two single rounds; chosen on the same sweeps
THRESHOLD_FACTOR = 1.5
# undisturbed rounds a side that a verdict needs when its plan asked for more and the re-runs of
# disturbed rounds ran out (the default --rounds)
ENOUGH_ROUNDS = 3
VERDICTS = ("regression", "improvement", "within noise", "unstable")


@dataclass
class Change:
    cell: str
    model: str
    batch_size: int
    framework: str
    device: str
    median_a: float | None
    median_b: float | None
    change: float | None  # figure(B) / figure(A) - 1
    ci_low: float | None  # interval of the change
    ci_high: float | None
    rounds_a: int
    rounds_b: int
    verdict: str
    why: str = ""
    # ab only (paired verdicts): the practical floor (--min-change), the smallest change the run
    # could have flagged (from the paired spread and the number of pairs), and what stopped the pairs
    floor: float | None = None
    detectable: float | None = None
    stopped_by: str | None = None
    precision: str = "fp32"  # the precision both cells asked for (part of the key: paired by precision)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Comparison:
    changes: list[Change]
    threshold: float  # the noise threshold used (a fraction)
    threshold_source: str  # "measured" or "given"
    typical_spread: float | None  # the runs' typical between-round spread (log scale) lent to each cell's interval
    notes: list[str]
    problems: list[str]
    # what ``threshold`` is: compare's measured noise threshold, or ab's practical floor (--min-change)
    threshold_name: str = "noise threshold"

    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in VERDICTS}
        for c in self.changes:
            key = next((v for v in VERDICTS if c.verdict.startswith(v)), c.verdict)
            out[key] = out.get(key, 0) + 1
        return out


def _scenario(r) -> str | None:
    scenario = r.get("scenario") if hasattr(r, "get") else None
    return scenario if isinstance(scenario, str) and scenario in HIGHER_IS_BETTER else None


def _rounds(r) -> list[list[float]]:
    """Per undisturbed round, the values its figure is the median of: a latency cell's timing
    samples; a LoadGen cell's one scenario figure per round, throughput as its inverse (ms per
    sample or query), so that a larger value is worse for every cell."""
    rounds = r.get("rounds") if hasattr(r, "get") else None
    if not isinstance(rounds, list):
        return []
    scenario = _scenario(r)
    if scenario is None:
        return [[float(v) for v in g["samples_ms"] if v > 0] for g in good_rounds(rounds)]
    out = []
    for g in good_rounds(rounds):
        f = round_figure(scenario, g)
        if isinstance(f, (int, float)) and f > 0:
            out.append([1000.0 / f if HIGHER_IS_BETTER[scenario] else float(f)])
    return out


def _disturbed(r) -> int:
    rounds = r.get("rounds") if hasattr(r, "get") else None
    return sum(1 for g in rounds or [] if isinstance(g, dict) and g.get("disturbed"))


def _rounds_asked(run) -> int | None:
    """The undisturbed rounds per cell the run asked for (its plan's ``rounds``; ``auto``: the
    rounds it starts with), or None where the run folder keeps no plan."""
    try:
        plan = json.loads((Path(run) / PLAN_FILE).read_text())
    except (OSError, ValueError, TypeError):
        return None
    rounds = plan.get("rounds") if isinstance(plan, dict) else None
    if rounds == AUTO:
        return MIN_AUTO_ROUNDS
    return rounds if isinstance(rounds, int) and not isinstance(rounds, bool) and rounds > 0 else None


def _too_disturbed(side: str, used: int, disturbed: int, asked: int | None) -> str | None:
    """Why one side's disturbed rounds make its figure untrustworthy, or None. With the run's plan:
    its re-runs ran out before the cell had the rounds it asked for, or :data:`ENOUGH_ROUNDS` if
    it asked for more (disturbed rounds are measured again, so a cell that got them is judged on
    them alone). Without one: more disturbed rounds than undisturbed."""
    if not disturbed:
        return None
    if asked is not None:
        if used < min(asked, ENOUGH_ROUNDS):
            return (f"{side} has {used} undisturbed round{'s' * (used != 1)} of the {asked} asked for "
                    f"({disturbed} disturbed: the machine was busy)")
        return None
    if disturbed > used:
        return f"{side} has more disturbed rounds ({disturbed}) than undisturbed ({used})"
    return None


def _good(r) -> bool:
    return r is not None and r["status"] == "ok" and bool(r["check_passed"])


def _state(r) -> str:
    return "wrong output" if r["status"] in ("ok", "wrong") else r["status"]


def typical_spread(cells: list[tuple[list[list[float]], list[list[float]]]]) -> float | None:
    """The median over cells (each with 2+ rounds on both sides) of their between-round spread
    pooled over the two runs (``ios_bench.running.rounds.pooled_scale``), or None without such a cell."""
    scales = [pooled_scale(ga, gb)[0] for ga, gb in cells if len(ga) >= 2 and len(gb) >= 2]
    return stats.median_or_none(scales)


def noise_threshold(spread: float | None) -> float:
    """``THRESHOLD_FACTOR`` x the typical difference of two single rounds, one of each run
    (``sqrt(2)`` x the typical spread, :func:`typical_spread`), at least 1 %."""
    return max(MIN_THRESHOLD, THRESHOLD_FACTOR * math.sqrt(2) * (spread or 0.0))


def judge_change(change: float, low: float, high: float, threshold: float,
                 name: str = "the noise threshold") -> tuple[str, str]:
    """The one verdict rule (``compare`` and ``ab``): a regression or an improvement when the
    interval [low, high] excludes zero and the change is at least ``threshold`` (``compare``: its
    noise threshold; ``ab``: the practical floor, ``--min-change``, named by ``name``); else within
    noise, with why."""
    if low > 0 and change >= threshold:
        return "regression", ""
    if high < 0 and change <= -threshold:
        return "improvement", ""
    return "within noise", ("interval includes zero" if low <= 0 <= high else
                            f"|change| under {name} {threshold:.1%}")


def compare_runs(a, b, threshold: float | None = None, confidence: float = 0.95) -> Comparison:
    """Cell-by-cell verdicts from run folder ``a`` to ``b``; ``threshold`` (a fraction) replaces
    the measured noise threshold."""
    run_a, run_b = load_run(a), load_run(b)
    da, pa = run_a.frame(), run_a.problems
    db, pb = run_b.frame(), run_b.problems
    ra = {r["cell"]: r for _, r in da.iterrows()}
    rb = {r["cell"]: r for _, r in db.iterrows()}
    notes = []
    for name, df in (("A", da), ("B", db)):
        old = int((df["migrated_from"].notna()).sum()) if "migrated_from" in df.columns else 0
        if old:
            notes.append(f"run {name} is an older run (schema 1): each of its cells was measured in one process, "
                         "one round, so between-process noise is unknown there and its cells' verdicts are "
                         "'unstable'; measure it again with rounds to compare")
    wa, wb = _rounds_asked(a), _rounds_asked(b)
    if any(_scenario(r) for r in [*ra.values(), *rb.values()]):
        notes.append("LoadGen scenario cells are compared on their LoadGen figure per round: latency percentiles "
                     "as they are, throughput (offline samples/s, server QPS) as its inverse (ms per sample or "
                     "query), so a regression is always the slower side")
    both = [k for k in ra if k in rb and _good(ra[k]) and _good(rb[k])]
    spread = typical_spread([(_rounds(ra[k]), _rounds(rb[k])) for k in both])
    prior = (spread, PRIOR_DF) if spread is not None else None
    source = "given"
    if threshold is None:
        threshold = noise_threshold(spread)
        source = "measured"
    out = []
    for key in list(dict.fromkeys(list(ra) + list(rb))):
        x, y = ra.get(key), rb.get(key)
        base = x if x is not None else y
        ga = _rounds(x) if _good(x) else []
        gb = _rounds(y) if _good(y) else []
        ma = figure_over_rounds(ga) if ga else None
        mb = figure_over_rounds(gb) if gb else None
        change = low = high = None
        why = ""
        if x is None:
            verdict = "only in B"
        elif y is None:
            verdict = "only in A"
        elif _good(x) and not _good(y):
            verdict = f"regression (now {_state(y)})"
        elif not _good(x) and _good(y):
            verdict = f"fixed (was {_state(x)})"
        elif not _good(x) and not _good(y):
            verdict = f"not comparable ({_state(x)} / {_state(y)})"
        elif not ga or not gb:
            verdict = "unstable"
            why = "no undisturbed round with timing samples on one side"
        else:
            change, low, high = ratio_interval(ga, gb, confidence, prior)
            few = [f"{n} has {len(g)} undisturbed round{'s' * (len(g) != 1)}" for n, g in (("A", ga), ("B", gb))
                   if len(g) < 2]
            noisy = [why for n, g, d, want in (("A", ga, _disturbed(x), wa), ("B", gb, _disturbed(y), wb))
                     if (why := _too_disturbed(n, len(g), d, want))]
            if few or noisy:
                verdict, why = "unstable", "; ".join(few + noisy)
            else:
                verdict, why = judge_change(change, low, high, threshold)
            la, lb = _load(x), _load(y)
            if la != lb:  # one side measured under a steady load, the other not (or another): said on the verdict
                why += (f"; A {la or 'quiet'}, B {lb or 'quiet'}: the change includes the difference in load")
        out.append(Change(key, base["model"], int(base["batch_size"]), base["framework"], base["device"], ma, mb,
                          change, low, high, len(ga), len(gb), verdict, why,
                          precision=base.get("precision") if isinstance(base.get("precision"), str) else "fp32"))
    loads = {name: sorted({_load(r) or "quiet" for r in rs.values() if _good(r)})
             for name, rs in (("A", ra), ("B", rb))}
    if loads["A"] != loads["B"] and any(v != ["quiet"] for v in loads.values()):
        notes.append(f"the runs were measured under different loads (A: {', '.join(loads['A']) or '-'}; B: "
                     f"{', '.join(loads['B']) or '-'}): a change between them includes that difference, not only "
                     "the change between the runs")
    return Comparison(out, threshold, source, spread, notes, pa + pb)


def _load(r) -> str | None:
    """The steady load a cell's figure was measured under (its record's ``load``, the round count left
    out), or None: quiet."""
    v = r.get("load") if r is not None else None
    return v.split(" (")[0] if isinstance(v, str) and v else None
