"""Rounds: each cell measured in several fresh worker processes, interleaved, judged, and summed
up with statistics over rounds (docs/harness.md, "Rounds").

- :func:`round_order`: the order of a group's cells in one round, shuffled from a recorded seed.
- :func:`judge_rounds`: marks each round ``disturbed`` (``ios_core.measurement.interference.judge``) against
  the run's usual canary time, and ``load`` (the label of the steady load it ran under) where the
  run has one (:func:`run_load`: a co-tenant at about the same share through the run's windows).
- :func:`summarize`: a cell's figure (the median of its undisturbed rounds' medians), its
  hierarchical-bootstrap interval, the between-round spread and the ``unstable`` verdict.
- :func:`hierarchical_bootstrap`: resample rounds, then samples within each round (numpy).
- :func:`ratio_interval`: the change between two runs' figures and its interval over rounds
  (``ios-bench compare``).
- :func:`paired_interval` (with :func:`paired_rounds`, :func:`paired_spread`,
  :func:`detectable_change`): the change between two cells measured in the same passes, on the
  pairs' log-ratios (``ios-bench ab``; the report's IOS-against-sequential and IOS-against-peer
  verdicts).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np

from ios_core.measurement import stats
from ios_core.measurement.interference import (
    THRESHOLDS,
    canary_ms,
    judge,
    load_by,
    load_label,
    steady_load,
    under_load,
)
from ios_core.measurement.stats import robust_spread

AUTO = "auto"
MIN_AUTO_ROUNDS = 3  # --rounds auto starts with this many rounds per cell
MAX_AUTO_ROUNDS = 12  # and adds at most up to this many
UNSTABLE_CV = 0.05  # between-round coefficient of variation above which a LoadGen cell is flagged unstable
# a latency cell is unstable when its interval's half-width is over this (percent of its figure): the report
# cannot compare it with another figure closer than that (unstable_reason)
UNSTABLE_CI_PCT = 5.0
MIN_ROUNDS_FOR_VERDICT = 2  # fewer undisturbed rounds: the cell's figure is marked unstable
N_BOOTSTRAP = 2000
# the practical floor of a paired verdict (a fraction): `ab --min-change`'s default, and the report's
# IOS-against-sequential and IOS-against-peer verdicts
MIN_CHANGE = 0.02


def planned_rounds(rounds) -> int:
    """The rounds per cell a plan counts on (the estimate, the progress bar): its number, or with
    ``auto`` its minimum."""
    return MIN_AUTO_ROUNDS if rounds == AUTO else int(rounds)


def round_order(keys: Sequence[str], round_index: int, seed: int, group: str) -> list[str]:
    """The order the cells ``keys`` of ``group`` run in round ``round_index``: a permutation drawn
    from (seed, group, round), so a run can be replayed and every round is ordered differently."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(group.encode()), round_index])
    return [keys[i] for i in rng.permutation(len(keys))]


def usual_canary(rounds: Sequence[dict]) -> float | None:
    """The run's usual canary time: the median over every round's canary."""
    return stats.median_or_none(canary_ms(r.get("interference") or {}) for r in rounds)


MIN_LOAD_REFERENCE = 3  # a cell's own usual canary under a steady load needs this many of its rounds under it


def run_load(rounds) -> list[dict]:
    """The steady co-tenants of a run (``ios_core.measurement.interference.steady_load``) over its
    measured rounds' windows, in the order they ran. ``rounds``: {cell key: its rounds}, each cell's
    share of a co-tenant judged against that cell's usual share (what runs beside the co-tenant
    changes its share), or a plain sequence of rounds judged as one group."""
    grouped = isinstance(rounds, dict)
    items = [(k, r) for k, rs in rounds.items() for r in rs] if grouped else [(None, r) for r in rounds]
    items = [(k, r) for k, r in items if r.get("status") in ("ok", "wrong") and isinstance(r.get("interference"), dict)]
    items.sort(key=lambda kr: kr[1]["interference"].get("start_unix") or 0)
    return steady_load([r["interference"] for _, r in items], groups=[k for k, _ in items] if grouped else None)


def judge_rounds(rounds: Sequence[dict], canary_ref: float | None, load: list[dict] | None = None,
                 group=None) -> None:
    """Set ``disturbed`` (the reason, or None) on each measured round of one cell (``group``: its
    key in the run's steady ``load``, :func:`run_load`), in place; with a steady load also ``load``,
    its label, and ``load_by``, who it is, on each round that ran under it (and was not disturbed
    otherwise): such a round is measured under that condition. Rounds under the load judge their
    canary and their slowed samples against the cell's own usual figures under it (with at least
    :data:`MIN_LOAD_REFERENCE` such rounds): where the co-tenant's core is shared with the cell's
    process, the canary is slower in every one of its windows, and that is the condition, not a
    disturbance."""
    label, by = load_label(load, group), load_by(load)
    loaded = {id(r) for r in rounds if r.get("status") == "ok" and load
              and under_load(r.get("interference") or {}, load, group)}
    mine = [r.get("interference") or {} for r in rounds if id(r) in loaded]
    canary_load = slow_load = None
    if len(mine) >= MIN_LOAD_REFERENCE:
        canary_load = stats.median_or_none(canary_ms(f) for f in mine)
        slow_load = stats.median_or_none(f.get("slow_samples") for f in mine
                                         if isinstance(f.get("slow_samples"), (int, float)))
    for r in rounds:
        if r.get("status") == "ok":
            figures = r.get("interference") or {}
            under = id(r) in loaded
            r["disturbed"] = judge(figures, (canary_load or canary_ref) if under else canary_ref, load=load,
                                   group=group, slow_ref=slow_load if under else None)
            if label and not r["disturbed"] and under:
                r["load"], r["load_by"] = label, by
            else:
                r.pop("load", None)
                r.pop("load_by", None)


def who_disturbed(rounds: Sequence[dict]) -> str:
    """What disturbed a cell's rounds, over its disturbed rounds: each named other process with its
    range of shares and the rounds it was in (``python3 pid 1234 35-41% in 6 rounds``), then the
    rounds no process explains (steal, a slow canary, slowed samples, short-lived processes)."""
    bad = [r for r in rounds if r.get("status") == "ok" and r.get("disturbed")]
    seen: dict[tuple, list[float]] = {}
    unnamed = 0
    for r in bad:
        others = [o for o in (r.get("interference") or {}).get("others") or [] if isinstance(o, dict)]
        for o in others:
            seen.setdefault((o.get("name"), o.get("pid")), []).append(float(o.get("share") or 0.0))
        unnamed += not others
    parts = []
    for (name, pid), shares in seen.items():
        lo, hi = min(shares), max(shares)
        span = f"{lo:.0%}" if round(lo * 100) == round(hi * 100) else f"{lo * 100:.0f}-{hi:.0%}"
        parts.append(f"{name} pid {pid} {span} in {len(shares)} round{'s' * (len(shares) != 1)}")
    if unnamed:
        parts.append(f"{unnamed} round{'s' * (unnamed != 1)} with no other process named (steal, the canary, "
                     "slowed samples or short-lived processes: see the Rounds table)")
    return "; ".join(parts)


def round_median(samples_ms: Sequence[float]) -> float:
    """One round's figure: the median of its samples (a cell's figure is the median of these)."""
    return stats.median(samples_ms)


def figure_over_rounds(groups: Sequence[Sequence[float]]) -> float:
    """A cell's figure from its rounds' samples: the median of the round medians."""
    return stats.median(round_median(g) for g in groups if len(g))


def good_rounds(rounds: Sequence[dict]) -> list[dict]:
    """The rounds a cell's figure is computed from: measured, output correct, not disturbed."""
    return [r for r in rounds if r.get("status") == "ok" and not r.get("disturbed") and r.get("samples_ms")]


def hierarchical_bootstrap(groups: Sequence[Sequence[float]], n: int = N_BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """``n`` bootstrap replicates of the median of round medians: draw rounds with replacement,
    then each drawn round's samples with replacement, take each drawn round's median and the
    median of those. ``groups``: one sequence of samples per round."""
    rng = np.random.default_rng(seed)
    rounds = [np.asarray(g, dtype=np.float64) for g in groups if len(g)]
    k = len(rounds)
    if k == 0:
        return np.empty(0)
    pick = rng.integers(0, k, size=(n, k))  # which rounds each replicate draws
    medians = np.empty((n, k))
    for i, r in enumerate(rounds):  # every replicate's resampled median of round i
        idx = rng.integers(0, r.size, size=(n, r.size))
        meds = np.median(r[idx], axis=1)
        medians[:, i] = meds
    drawn = np.take_along_axis(medians, pick, axis=1)
    return np.median(drawn, axis=1)


def interval(replicates: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    a = (1 - confidence) / 2
    lo, hi = np.quantile(replicates, [a, 1 - a])
    return float(lo), float(hi)


def summarize(rounds: Sequence[dict], confidence: float = 0.95, seed: int = 0) -> dict:
    """A cell's figures over its rounds (fields of the record; see ``ios_bench.records.record``)."""
    good = good_rounds(rounds)
    out: dict = {"rounds_measured": sum(1 for r in rounds if r.get("status") == "ok"),
                 "rounds_used": len(good),
                 "rounds_disturbed": sum(1 for r in rounds if r.get("status") == "ok" and r.get("disturbed"))}
    if not good:
        return out
    meds = np.array([round_median(r["samples_ms"]) for r in good])
    figure = stats.median(meds)
    calls = np.concatenate([np.asarray(r.get("call_ms") or r["samples_ms"], dtype=np.float64) for r in good])
    samples = np.concatenate([np.asarray(r["samples_ms"], dtype=np.float64) for r in good])
    pooled = stats.summary(calls, spread_of=samples)  # percentiles over single calls, spread over samples
    pooled.pop("calls")
    out.update(pooled, median_ms=figure, samples_ms=[float(v) for v in samples])
    out["round_medians_ms"] = [float(v) for v in meds]
    out["between_round_cv"] = stats.cv(meds)  # the one coefficient of variation: std (n - 1) over the figure
    if len(good) >= 2:
        lo, hi = interval(hierarchical_bootstrap([r["samples_ms"] for r in good], seed=seed), confidence)
        out.update(ci_low_ms=lo, ci_high_ms=hi, ci_half_pct=(hi - lo) / 2 / figure * 100 if figure else None)
    why = unstable_reason(out)
    out["unstable"] = why
    loads = [r["load"] for r in good if r.get("load")]
    if loads:  # measured under a steady load: said on the figure, never passed off as a quiet one
        out["load"] = loads[0] + (f" ({len(loads)} of {len(good)} rounds)" if len(loads) < len(good) else "")
    return out


def unstable_reason(summary: dict) -> str | None:
    """Why a cell's figure should not be trusted as it stands, or None: one rule (the console, the report
    and ``compare`` read the record's ``unstable``): fewer than :data:`MIN_ROUNDS_FOR_VERDICT` undisturbed
    rounds, or an interval wider than :data:`UNSTABLE_CI_PCT` percent of the figure either side, so that
    it cannot be compared with a figure closer than that (more rounds narrow it: a sweep's extra rounds)."""
    used, disturbed = summary.get("rounds_used", 0), summary.get("rounds_disturbed", 0)
    if used < MIN_ROUNDS_FOR_VERDICT:
        return f"{used} undisturbed round{'s' * (used != 1)}" + (f" ({disturbed} disturbed)" if disturbed else "")
    half = summary.get("ci_half_pct")
    if half is not None and (not math.isfinite(half) or half > UNSTABLE_CI_PCT):
        cv = summary.get("between_round_cv")
        return (f"interval +/-{half:.1f}% over {used} rounds, wider than +/-{UNSTABLE_CI_PCT:g}%: not comparable "
                f"closer than that" + (f" (rounds' coefficient of variation {cv:.1%})" if cv is not None else ""))
    return None


def needs_more(summary: dict, target_ci_pct: float) -> bool:
    """``--rounds auto``: the cell's interval is still wider than the target (or has none yet)."""
    half = summary.get("ci_half_pct")
    return half is None or not math.isfinite(half) or half > target_ci_pct


def _robust_scale(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The spread of one run's round medians of a cell on a log scale, and the number of rounds.
    Robust (:func:`robust_spread`), like the figure, so one slow round moves neither; at least the
    standard error of a round's median from its own samples (the median over rounds of 1.2533 x
    their robust spread / sqrt(n)), so rounds that happen to agree exactly do not promise a
    zero-width interval."""
    rounds = [np.asarray(g, dtype=np.float64) for g in groups if len(g)]
    scale = robust_spread(np.log([round_median(r) for r in rounds]))
    within = [1.2533 * robust_spread(np.log(r)) / math.sqrt(r.size) for r in rounds if r.size > 1]
    return max(scale, stats.median(within) if within else 0.0), len(rounds)


def pooled_scale(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> tuple[float, int]:
    """A cell's between-round spread (log scale) pooled over two runs, and its degrees of freedom
    (``kA + kB - 2``): both runs measure the same cell's process-to-process noise on one machine."""
    sa, ka = _robust_scale(a)
    sb, kb = _robust_scale(b)
    df = ka + kb - 2
    if df < 1:
        return max(sa, sb), 0
    return math.sqrt(((ka - 1) * sa * sa + (kb - 1) * sb * sb) / df), df


def ratio_interval(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], confidence: float = 0.95,
                   prior: tuple[float, int] | None = None) -> tuple[float, float, float]:
    """The change ``figure(B) / figure(A) - 1`` and its interval over rounds (``a``, ``b``: one
    sample list per round; a figure is the median of the round medians).

    Rounds are the independent units, so the interval is built from the spread of the round
    medians, not by resampling the samples inside rounds again (that counts the within-round noise
    twice; and with a few rounds a bootstrap of their median spans the range of the rounds, one
    slow round wide). A two-sample t interval on a log scale: the difference of the two figures
    ± Student's t x 1.2533 (a median's standard error over a mean's) x the spread x
    ``sqrt(1/kA + 1/kB)``. The spread is the cell's own (:func:`pooled_scale`), moderated by
    ``prior`` = (spread, degrees of freedom) where given: ``s^2 = (d s_cell^2 + d0 s0^2) / (d + d0)``
    on ``d + d0`` degrees of freedom (limma's moderated t, Smyth 2004: with 3 rounds a side, a
    cell's own spread rests on 4 degrees of freedom; ``ios_bench.reporting.compare`` lends it the run's
    typical spread)."""
    from scipy import stats

    ka, kb = sum(1 for g in a if len(g)), sum(1 for g in b if len(g))
    scale, df = pooled_scale(a, b)
    if prior is not None and prior[1] > 0:
        s0, d0 = prior
        scale, df = math.sqrt((df * scale * scale + d0 * s0 * s0) / (df + d0)), df + d0
    fa = figure_over_rounds(a)
    fb = figure_over_rounds(b)
    half = float(stats.t.ppf(0.5 + confidence / 2, max(df, 1))) * 1.2533 * scale * math.sqrt(1 / ka + 1 / kb)
    centre = math.log(fb / fa)
    return fb / fa - 1.0, math.expm1(centre - half), math.expm1(centre + half)


# ---- paired statistics: two cells measured in the same passes (ios-bench ab; IOS against sequential)


def paired_rounds(rounds_a: Sequence[dict], rounds_b: Sequence[dict]) -> tuple[list[list[float]], list[list[float]]]:
    """The samples of the rounds that pair: A's and B's undisturbed rounds of the same pass that ran
    under the same load (both quiet, or both under the run's steady load, the same co-tenants:
    ``load_by``; each side's share of it may differ, as the cells beside it differ)."""
    ga = {r.get("pass"): r for r in good_rounds(rounds_a)}
    gb = {r.get("pass"): r for r in good_rounds(rounds_b)}
    both = [p for p in ga if p in gb and p is not None and _under(ga[p]) == _under(gb[p])]
    return [ga[p]["samples_ms"] for p in both], [gb[p]["samples_ms"] for p in both]


def _under(r: dict):
    """Who the round's steady load was (None: a quiet round); a round kept before ``load_by`` has its label."""
    return r.get("load_by") or r.get("load")


def log_ratios(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> np.ndarray:
    """``log(median(B round) / median(A round))`` per pair."""
    return np.array([math.log(round_median(y) / round_median(x)) for x, y in zip(a, b)])


def _within(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    """The standard error of one paired log-ratio from the rounds' own samples (the median over
    pairs of ``1.2533 x sqrt(se_A^2 + se_B^2)``, each side's robust spread / sqrt(n)): a floor, so
    that pairs that happen to agree exactly do not promise a zero-width interval."""
    out = []
    for x, y in zip(a, b):
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if x.size > 1 and y.size > 1:
            se = [1.2533 * stats.robust_spread(np.log(v)) / math.sqrt(v.size) for v in (x, y)]
            out.append(math.hypot(*se))
    return stats.median(out) if out else 0.0


def paired_spread(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The spread of a cell's paired log-ratios (robust, as compare's between-round spread is: one
    slow pair moves it little; at least :func:`_within`) and its degrees of freedom (pairs - 1)."""
    d = log_ratios(a, b)
    if d.size < 2:
        return _within(a, b), 0
    return max(stats.robust_spread(d), _within(a, b)), int(d.size - 1)


def paired_half_width(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], confidence: float = 0.95,
                      prior: tuple[float, int] | None = None) -> tuple[float, float, int]:
    """The half-width of the paired interval on the log scale (``t x 1.2533 s / sqrt(n)``, see
    :func:`paired_interval`), the spread ``s`` it used (moderated by ``prior``) and ``n``, the pairs."""
    from scipy import stats as sps

    n = len(a)
    if n == 0:
        raise ValueError("no paired rounds")
    scale, df = paired_spread(a, b)
    if prior is not None and prior[1] > 0:
        s0, d0 = prior
        scale, df = math.sqrt((df * scale * scale + d0 * s0 * s0) / (df + d0)), df + d0
    half = float(sps.t.ppf(0.5 + confidence / 2, max(df, 1))) * 1.2533 * scale / math.sqrt(n)
    return half, scale, n


def paired_interval(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], confidence: float = 0.95,
                    prior: tuple[float, int] | None = None) -> tuple[float, float, float]:
    """The change ``exp(median d) - 1`` over the pairs' log-ratios ``d`` (``a``, ``b``: the samples of
    paired rounds, pair i = ``a[i]``, ``b[i]``) and its Student t interval
    ``median d ± t x 1.2533 s / sqrt(n)`` (a median's standard error, as compare's interval);
    ``s`` is the cell's own spread (:func:`paired_spread`) moderated by ``prior`` = (spread, degrees
    of freedom) as ``ios_bench.running.rounds.ratio_interval`` does (limma's moderated t). A change common
    to the two rounds of a pair (drift) is not in ``d``: it neither moves the change nor widens it."""
    d = log_ratios(a, b)
    half, _, _ = paired_half_width(a, b, confidence, prior)
    centre = stats.median(d)  # robust, as every figure is: one slow pair (a cold first pass) moves it little
    return math.expm1(centre), math.expm1(centre - half), math.expm1(centre + half)


def detectable_change(half: float, floor: float) -> float:
    """The smallest change a run could have flagged (a fraction), from its paired interval's
    half-width ``half`` (log scale): a change is flagged when its interval, ``log(1 + change) ± half``,
    excludes zero and it is at least the floor, so nothing under ``max(exp(half) - 1, floor)`` can be."""
    return max(math.expm1(half), floor)


def typical_paired_spread(data) -> float | None:
    """The run's typical paired spread: the median over pairs with two or more paired rounds
    (``data``: ``(a, b)`` per pair) of :func:`paired_spread`; lent to each pair's interval."""
    return stats.median_or_none(paired_spread(a, b)[0] for a, b in data if len(a) >= 2)


__all__ = ["AUTO", "MIN_CHANGE", "THRESHOLDS", "detectable_change", "figure_over_rounds", "good_rounds",
           "hierarchical_bootstrap", "interval", "judge_rounds", "log_ratios", "needs_more", "paired_half_width",
           "paired_interval", "paired_rounds", "paired_spread", "pooled_scale", "ratio_interval", "robust_spread",
           "round_median", "round_order", "run_load", "summarize", "typical_paired_spread",
           "unstable_reason", "usual_canary", "who_disturbed"]
