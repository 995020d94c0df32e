"""Server: the highest offered QPS whose latency percentile (p99 by default) meets the bound.

Two searches, every LoadGen run recorded as a try (its QPS, LoadGen's verdict and why, the
percentiles, its logs' folder):

- ``bisect`` (default): a bounded search over LoadGen runs in PerformanceOnly mode. It starts at
  half the estimated capacity (instances x 1000 / one request's ms), doubles (or halves) until it
  has a valid and an invalid QPS, then bisects between them; it stops after ``server_tries`` runs or
  once the two are within 5 % of each other. The answer is the highest QPS LoadGen judged VALID.
- ``loadgen-peak``: LoadGen's own FindPeakPerformance mode (its binary search, to whole QPS), then
  one PerformanceOnly run at the QPS it found, whose verdict is the answer's. FindPeakPerformance
  judges its tries on the latency constraint alone (not on early stopping, duration or query
  count), has no bound on the number of tries, and logs only the QPS it tried: those are recorded
  as tries without percentiles.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import logs

CLOSE = 0.05  # stop bisecting once the valid and invalid QPS are this close (relative)


def try_record(qps: float, res: dict, folder: str) -> dict:
    lgr = res["loadgen"]
    return {"qps": qps, "valid": lgr.get("valid"), "reason": lgr.get("invalid_reason"),
            "completed_qps": lgr.get("completed_qps"), "p50_ms": lgr.get("p50_ms"), "p90_ms": lgr.get("p90_ms"),
            "p99_ms": lgr.get("p99_ms"), "max_ms": lgr.get("max_ms"), "query_count": lgr.get("query_count"),
            "duration_s": lgr.get("duration_s"), "logs": folder}


def bisect(run, capacity_qps: float, tries: int) -> tuple[dict | None, list[dict], dict]:
    """``run(qps, name) -> (try record, test result)``; returns (the best valid try or None, every
    try, the test result of the best try, or of the last one when none was valid)."""
    lo = hi = None
    qps = max(0.1, capacity_qps / 2)
    out: list[dict] = []
    results: dict[int, dict] = {}
    for i in range(tries):
        rec, res = run(qps, f"try{i + 1}")
        out.append(rec)
        results[i] = res
        if rec["valid"]:
            lo = qps if lo is None else max(lo, qps)
        else:
            hi = qps if hi is None else min(hi, qps)
        if lo is not None and hi is not None:
            if (hi - lo) / hi <= CLOSE:
                break
            qps = (lo + hi) / 2
        elif lo is not None:
            qps = lo * 2
        else:
            qps = hi / 2
    valid = [i for i, r in enumerate(out) if r["valid"]]
    best = max(valid, key=lambda i: out[i]["qps"]) if valid else None
    return (out[best] if best is not None else None), out, results[best if best is not None else len(out) - 1]


_TESTING = re.compile(r"Testing the mid value of bounds \[([\d.]+), ([\d.]+)\): ([\d.]+)")
_FOUND = re.compile(r"Found peak performance field: ([\d.]+)")
_BOUNDS = re.compile(r"Found boundaries: \[([\d.]+), ([\d.]+)\)")


def loadgen_peak(run, capacity_qps: float) -> tuple[dict | None, list[dict], dict]:
    """LoadGen's FindPeakPerformance from a quarter of the estimated capacity, then one confirming
    PerformanceOnly run at the QPS it found."""
    start = max(0.1, capacity_qps / 4)
    rec, res = run(start, "peak", peak=True)
    folder = Path(rec["logs_abs"])
    messages = logs.read_detail(folder / logs.DETAIL)["_messages"]
    tries = [{"qps": start, "valid": None, "reason": "FindPeakPerformance's lower bound (its verdict: the "
              "latency constraint only)", "logs": rec["logs"]}]
    found = None
    for m in messages:
        if not isinstance(m, str):
            continue
        if (t := _TESTING.search(m)) is not None:
            tries.append({"qps": float(t.group(3)), "valid": None, "logs": rec["logs"],
                          "reason": f"FindPeakPerformance tried it between {t.group(1)} and {t.group(2)} QPS "
                                    "(judged on the latency constraint only)"})
        elif (b := _BOUNDS.search(m)) is not None:
            tries.append({"qps": float(b.group(2)), "valid": None, "logs": rec["logs"],
                          "reason": f"FindPeakPerformance's upper boundary (lower {b.group(1)})"})
        elif (f := _FOUND.search(m)) is not None:
            found = float(f.group(1))
    if found is None:
        return None, tries, res
    confirm, res = run(found, "confirm")
    confirm["reason"] = confirm.get("reason") or "FindPeakPerformance's peak, confirmed by a PerformanceOnly run"
    tries.append(confirm)
    return (confirm if confirm["valid"] else None), tries, res
