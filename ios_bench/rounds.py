"""Rounds: each cell measured in several fresh worker processes, interleaved, judged, and summed
up with statistics over rounds (docs/harness.md, "Rounds").

- :func:`round_order`: the order of a group's cells in one round, shuffled from a recorded seed.
- :func:`judge_rounds`: marks each round ``disturbed`` (``ios_core.interference.judge``) against
  the run's usual canary time.
- :func:`summarize`: a cell's figure (the median of its undisturbed rounds' medians), its
  hierarchical-bootstrap interval, the between-round spread and the ``unstable`` verdict.
- :func:`hierarchical_bootstrap`: resample rounds, then samples within each round (numpy).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np

from ios_core.interference import THRESHOLDS, canary_ms, judge

AUTO = "auto"
MIN_AUTO_ROUNDS = 3  # --rounds auto starts with this many rounds per cell
MAX_AUTO_ROUNDS = 12  # and adds at most up to this many
UNSTABLE_CV = 0.05  # between-round coefficient of variation above which a cell is flagged unstable
MIN_ROUNDS_FOR_VERDICT = 2  # fewer undisturbed rounds: the cell's figure is marked unstable
N_BOOTSTRAP = 2000


def round_order(keys: Sequence[str], round_index: int, seed: int, group: str) -> list[str]:
    """The order the cells ``keys`` of ``group`` run in round ``round_index``: a permutation drawn
    from (seed, group, round), so a run can be replayed and every round is ordered differently."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(group.encode()), round_index])
    return [keys[i] for i in rng.permutation(len(keys))]


def usual_canary(rounds: Sequence[dict]) -> float | None:
    """The run's usual canary time: the median over every round's canary."""
    vals = [c for r in rounds if (c := canary_ms(r.get("interference") or {})) is not None]
    return float(np.median(vals)) if vals else None


def judge_rounds(rounds: Sequence[dict], canary_ref: float | None) -> None:
    """Set ``disturbed`` (the reason, or None) on each measured round, in place."""
    for r in rounds:
        if r.get("status") == "ok":
            r["disturbed"] = judge(r.get("interference") or {}, canary_ref)


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
    """A cell's figures over its rounds (fields of the record; see ``ios_bench.record``)."""
    good = good_rounds(rounds)
    out: dict = {"rounds_measured": sum(1 for r in rounds if r.get("status") == "ok"),
                 "rounds_used": len(good),
                 "rounds_disturbed": sum(1 for r in rounds if r.get("status") == "ok" and r.get("disturbed"))}
    if not good:
        return out
    meds = np.array([float(np.median(r["samples_ms"])) for r in good])
    figure = float(np.median(meds))
    out["median_ms"] = figure
    calls = np.concatenate([np.asarray(r.get("call_ms") or r["samples_ms"], dtype=np.float64) for r in good])
    samples = np.concatenate([np.asarray(r["samples_ms"], dtype=np.float64) for r in good])
    p10, p90, p99 = (float(v) for v in np.percentile(calls, [10, 90, 99]))
    out.update(mean_ms=float(np.mean(calls)), std_ms=float(np.std(samples, ddof=1)) if samples.size > 1 else 0.0,
               min_ms=float(np.min(calls)), max_ms=float(np.max(calls)), p10_ms=p10, p90_ms=p90, p99_ms=p99,
               samples_ms=[float(v) for v in samples])
    cv = float(np.std(meds, ddof=1) / figure) if len(meds) > 1 and figure > 0 else None
    out["round_medians_ms"] = [float(v) for v in meds]
    out["between_round_cv"] = cv
    if len(good) >= 2:
        lo, hi = interval(hierarchical_bootstrap([r["samples_ms"] for r in good], seed=seed), confidence)
        out.update(ci_low_ms=lo, ci_high_ms=hi, ci_half_pct=(hi - lo) / 2 / figure * 100 if figure else None)
    why = unstable_reason(out)
    out["unstable"] = why
    return out


def unstable_reason(summary: dict) -> str | None:
    """Why a cell's figure should not be trusted as it stands (pyperf's warning), or None."""
    used, disturbed = summary.get("rounds_used", 0), summary.get("rounds_disturbed", 0)
    if used < MIN_ROUNDS_FOR_VERDICT:
        return f"{used} undisturbed round{'s' * (used != 1)}" + (f" ({disturbed} disturbed)" if disturbed else "")
    cv = summary.get("between_round_cv")
    if cv is not None and cv > UNSTABLE_CV:
        return f"rounds differ by {cv:.1%} (coefficient of variation of the round medians; threshold {UNSTABLE_CV:.0%})"
    return None


def needs_more(summary: dict, target_ci_pct: float) -> bool:
    """``--rounds auto``: the cell's interval is still wider than the target (or has none yet)."""
    half = summary.get("ci_half_pct")
    return half is None or not math.isfinite(half) or half > target_ci_pct


def ratio_interval(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], confidence: float = 0.95,
                   n: int = N_BOOTSTRAP, seed: int = 0) -> tuple[float, float, float]:
    """The change ``figure(B) / figure(A) - 1`` and its interval, each run's figure bootstrapped
    hierarchically and independently (``a``, ``b``: one sample list per round)."""
    fa = float(np.median([np.median(r) for r in a]))
    fb = float(np.median([np.median(r) for r in b]))
    ra = hierarchical_bootstrap(a, n, seed)
    rb = hierarchical_bootstrap(b, n, seed + 1)
    lo, hi = interval(rb / ra - 1.0, confidence)
    return fb / fa - 1.0, lo, hi


__all__ = ["AUTO", "THRESHOLDS", "good_rounds", "hierarchical_bootstrap", "interval", "judge_rounds",
           "needs_more", "ratio_interval", "round_order", "summarize", "unstable_reason", "usual_canary"]
