"""Compare two runs cell by cell (``ios-bench compare runs/A runs/B``).

For each cell present in either run, over the stored timing samples (``samples_ms``) of A and B:

- the change of the median, ``median(B) / median(A) - 1``;
- its confidence interval (95 % by default), a bootstrap over both sets of samples
  (``scipy.stats.bootstrap``, percentile method, resampling each run's samples independently);
- a Mann-Whitney U test (``scipy.stats.mannwhitneyu``, two-sided) of "A and B come from the same
  distribution".

A change is flagged only when the test rejects (p < ``alpha``), the whole interval lies on one
side of zero, and the change is at least ``min_change`` (default 5 %): slower is a
``regression``, faster an ``improvement``; anything else is ``within noise``. With too few
samples no test can reject (two samples each: p >= 0.33), and the verdict says so. Status
changes (a cell that now fails, or whose output became wrong) are regressions too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .report import load_run


@dataclass
class Change:
    cell: str
    model: str
    batch_size: int
    framework: str
    device: str
    median_a: float | None
    median_b: float | None
    change: float | None  # median(B) / median(A) - 1
    ci_low: float | None  # confidence interval of the change
    ci_high: float | None
    p_value: float | None  # Mann-Whitney U, two-sided
    verdict: str


@dataclass
class Test:
    change: float
    ci_low: float
    ci_high: float
    p_value: float


def significance(a, b, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> Test:
    """Median change from samples ``a`` to ``b`` with its bootstrap interval and the U test's p."""
    from scipy import stats

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    change = float(np.median(b) / np.median(a) - 1.0)
    p = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)

    def ratio(x, y, axis=-1):
        return np.median(y, axis=axis) / np.median(x, axis=axis) - 1.0

    if np.ptp(a) == 0 and np.ptp(b) == 0:  # no spread at all: the interval is the point
        low = high = change
    else:
        res = stats.bootstrap((a, b), ratio, vectorized=True, paired=False, confidence_level=confidence,
                              n_resamples=n_resamples, method="percentile", rng=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Test(change, low, high, p)


def _samples(r) -> list[float]:
    s = r.get("samples_ms") if hasattr(r, "get") else None
    if isinstance(s, (list, tuple, np.ndarray)) and len(s) and all(isinstance(v, (int, float)) for v in s):
        return [float(v) for v in s if v > 0]
    return []


def _good(r) -> bool:
    return r is not None and r["status"] == "ok" and bool(r["check_passed"])


def _state(r) -> str:
    return "wrong output" if r["status"] in ("ok", "wrong") else r["status"]


def compare_runs(a, b, min_change: float = 0.05, alpha: float = 0.05,
                 confidence: float = 0.95) -> tuple[list[Change], list[str]]:
    """Cell-by-cell changes from run folder ``a`` to ``b`` (and any load problems)."""
    da, _, pa = load_run(a)
    db, _, pb = load_run(b)
    ra = {r["cell"]: r for _, r in da.iterrows()}
    rb = {r["cell"]: r for _, r in db.iterrows()}
    out = []
    for key in list(dict.fromkeys(list(ra) + list(rb))):
        x, y = ra.get(key), rb.get(key)
        base = x if x is not None else y
        sa = _samples(x) if _good(x) else []
        sb = _samples(y) if _good(y) else []
        ma = float(np.median(sa)) if sa else None
        mb = float(np.median(sb)) if sb else None
        change = low = high = p = None
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
        elif not sa or not sb:
            verdict = "not comparable (no timing samples stored)"
        else:
            t = significance(sa, sb, confidence)
            change, low, high, p = t.change, t.ci_low, t.ci_high, t.p_value
            if p < alpha and low > 0 and change >= min_change:
                verdict = "regression"
            elif p < alpha and high < 0 and change <= -min_change:
                verdict = "improvement"
            elif min(len(sa), len(sb)) < 4:
                verdict = f"within noise (too few samples to test: {len(sa)} and {len(sb)})"
            else:
                verdict = "within noise"
        out.append(Change(key, base["model"], int(base["batch_size"]), base["framework"], base["device"], ma, mb,
                          change, low, high, p, verdict))
    return out, pa + pb
