"""The statistics every figure is computed with, written once: one median, one standard deviation
(``n - 1``), one coefficient of variation (that standard deviation over the median), one robust
spread, one geometric mean, one summary of a list of timings. ``ios_core.measurement.measure``,
``ios_core.measurement.interference`` and the harness (rounds, records, reports, experiments) all
use these, so a figure and the baseline it is divided by are always the same statistic (a median
of an even count averages the two middle values; ``sorted(x)[n // 2]`` is not a median and is not
used anywhere)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

# Croux & Rousseeuw's (1992) small-sample factors for the MAD of n = 2..9 values (as in R's
# robustbase): with 3 values the MAD is the smaller of two deviations and reads ~1.5x too low
MAD_SMALL_SAMPLE = {2: 1.196, 3: 1.495, 4: 1.363, 5: 1.206, 6: 1.200, 7: 1.140, 8: 1.129, 9: 1.107}
PERCENTILES = (10, 50, 90, 99)


def median(values: Iterable[float]) -> float:
    """The median of ``values`` (the mean of the two middle ones for an even count). Raises
    ``ValueError`` on an empty sequence rather than returning NaN."""
    a = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64)
    if a.size == 0:
        raise ValueError("median of no values")
    return float(np.median(a))


def median_or_none(values: Iterable[float]) -> float | None:
    """:func:`median` of the finite numbers among ``values``, or None when there are none."""
    xs = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    return median(xs) if xs else None


def robust_spread(values: Sequence[float] | np.ndarray) -> float:
    """The standard deviation of ``values`` estimated robustly: 1.4826 x their median absolute
    deviation, with the small-sample factor (``n / (n - 0.8)`` beyond 9 values)."""
    a = np.asarray(values, dtype=np.float64)
    n = a.size
    if n < 2:
        return 0.0
    factor = MAD_SMALL_SAMPLE.get(n, n / (n - 0.8))
    return factor * 1.4826 * float(np.median(np.abs(a - np.median(a))))


def geomean(values: Iterable[float | None]) -> float | None:
    """The geometric mean of the positive finite numbers among ``values``; None when there are none.
    Callers that need every value present check that themselves (a missing cell is not a 1.0)."""
    xs = [float(v) for v in values if v is not None and isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def std(values: Sequence[float] | np.ndarray) -> float:
    """The standard deviation, the one used for every spread figure: the sample one (divided by
    ``n - 1``, not ``n``), 0 for fewer than two values. Timings, rounds and runs are samples of
    what the next one would be: ``n - 1`` makes the variance an unbiased estimate of theirs, where
    dividing by ``n`` reads low by ``sqrt((n - 1) / n)`` - 18 % at 3 rounds, the default - and
    would hide the spread a verdict is there to show."""
    a = np.asarray(values, dtype=np.float64)
    return float(np.std(a, ddof=1)) if a.size > 1 else 0.0


def cv(values: Sequence[float] | np.ndarray) -> float | None:
    """The coefficient of variation, the one used for every "differ by x %" figure (a cell's
    between-round variation, a scenario's between-round spread, the round-noise diagnostic):
    :func:`std` (``n - 1``) over :func:`median`. Over the median because that is the figure the
    spread is quoted beside (a cell's figure is the median of its round medians), so "±5 %" is 5 %
    of the number the reader sees. None for fewer than two values or a median that is not positive
    (no figure to be relative to)."""
    a = np.asarray(values, dtype=np.float64)
    if a.size < 2:
        return None
    mid = median(a)
    return std(a) / mid if mid > 0 else None


def summary(values: Sequence[float] | np.ndarray, spread_of: Sequence[float] | np.ndarray | None = None) -> dict:
    """The one summary of a list of timings (ms): mean, median, std, min, max and the 10th, 90th
    and 99th percentiles (linear interpolation), with ``calls`` (how many values). ``spread_of``:
    take the standard deviation over these values instead (a figure whose percentiles are over
    single calls and whose spread is over samples)."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return {}
    p10, p50, p90, p99 = (float(v) for v in np.percentile(a, PERCENTILES))
    return {"mean_ms": float(np.mean(a)), "median_ms": p50,
            "std_ms": std(a if spread_of is None else spread_of),
            "min_ms": float(np.min(a)), "max_ms": float(np.max(a)),
            "p10_ms": p10, "p90_ms": p90, "p99_ms": p99, "calls": int(a.size)}


__all__ = ["MAD_SMALL_SAMPLE", "cv", "geomean", "median", "median_or_none", "robust_spread", "std", "summary"]
