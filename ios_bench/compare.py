"""Compare two runs cell by cell (``ios-bench compare runs/A runs/B``).

For each cell present in either run: the median latency in A and B and the relative change.
A change counts only beyond the noise: the threshold is the larger of ``min_change`` (default
5 %) and the combined relative spread of the two cells, sqrt(sa^2 + sb^2) with
s = (p90 - p10) / 2 / median of that cell's timing samples. Slower beyond it: ``regression``;
faster: ``improvement``; otherwise ``within noise``. Status changes (a cell that now fails, or
whose output became wrong) are regressions too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    change: float | None  # B / A - 1
    noise: float | None  # the threshold used (relative)
    verdict: str


def _spread(r) -> float:
    try:
        return max(0.0, (r["p90_ms"] - r["p10_ms"]) / 2 / r["median_ms"])
    except (TypeError, ZeroDivisionError, KeyError):
        return 0.0


def _good(r) -> bool:
    return r is not None and r["status"] == "ok" and bool(r["check_passed"])


def compare_runs(a, b, min_change: float = 0.05) -> tuple[list[Change], list[str]]:
    """Cell-by-cell changes from run folder ``a`` to ``b`` (and any load problems)."""
    da, _, pa = load_run(a)
    db, _, pb = load_run(b)
    ra = {r["cell"]: r for _, r in da.iterrows()}
    rb = {r["cell"]: r for _, r in db.iterrows()}
    out = []
    for key in list(dict.fromkeys(list(ra) + list(rb))):
        x, y = ra.get(key), rb.get(key)
        base = x if x is not None else y
        ma = x["median_ms"] if _good(x) else None
        mb = y["median_ms"] if _good(y) else None
        change = noise = None
        if x is None:
            verdict = "only in B"
        elif y is None:
            verdict = "only in A"
        elif _good(x) and not _good(y):
            verdict = "regression (now " + ("wrong output" if y["status"] == "ok" else y["status"]) + ")"
        elif not _good(x) and _good(y):
            verdict = "fixed (was " + ("wrong output" if x["status"] == "ok" else x["status"]) + ")"
        elif not _good(x) and not _good(y):
            st = lambda r: "wrong output" if r["status"] == "ok" else r["status"]
            verdict = f"not comparable ({st(x)} / {st(y)})"
        else:
            change = mb / ma - 1.0
            noise = max(min_change, math.hypot(_spread(x), _spread(y)))
            verdict = "regression" if change > noise else "improvement" if change < -noise else "within noise"
        out.append(Change(key, base["model"], int(base["batch_size"]), base["framework"], base["device"], ma, mb,
                          change, noise, verdict))
    return out, pa + pb
