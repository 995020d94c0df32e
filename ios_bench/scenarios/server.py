"""Server: the highest offered QPS whose latency percentile (p99 by default) meets the bound.

Two searches, every LoadGen run recorded as a try (its QPS, LoadGen's verdict and why, the
percentiles, its logs' folder):

- ``bisect`` (default): a bounded search over LoadGen runs in PerformanceOnly mode. It starts at
  half the estimated capacity (instances x 1000 / one request's ms), doubles (or halves) until it
  has a valid and an invalid QPS, then bisects between them; it stops after ``server_tries`` runs or
  once the two are within 5 % of each other. The answer is the highest QPS LoadGen judged VALID.
  While no try was VALID it halves its load, and stops early (:func:`bisect`'s ``stopped``):

  - at a **plateau**: halving the load lowered the judged latency percentile by less than
    :data:`PLATEAU` (5 %) while it stayed above the bound: the threads park between sparse
    queries and a lower load does not help;
  - at the **floor**, the lowest offered load worth serving (``server_floor_qps``; by default a
    fifth of the capacity measured in the round): the load is never halved below it, and an
    invalid try at the floor ends the search.

  The answer is then "none valid above X QPS" (X: the lowest load tried, every try judged INVALID).
- ``loadgen-peak``: LoadGen's own FindPeakPerformance mode (its binary search, to whole QPS), then
  one PerformanceOnly run at the QPS it found, whose verdict is the answer's. FindPeakPerformance
  judges its tries on the latency constraint alone (not on early stopping, duration or query
  count), has no bound on the number of tries, and logs only the QPS it tried: those are recorded
  as tries without percentiles.
"""

from __future__ import annotations

import re
from pathlib import Path

from ios_bench.scenarios import logs

CLOSE = 0.05  # stop bisecting once the valid and invalid QPS are this close (relative)


def try_record(qps: float, res: dict, folder: str) -> dict:
    lgr = res["loadgen"]
    return {"qps": qps, "valid": lgr.get("valid"), "reason": lgr.get("invalid_reason"),
            "completed_qps": lgr.get("completed_qps"), "p50_ms": lgr.get("p50_ms"), "p90_ms": lgr.get("p90_ms"),
            "p99_ms": lgr.get("p99_ms"), "max_ms": lgr.get("max_ms"), "query_count": lgr.get("query_count"),
            "duration_s": lgr.get("duration_s"), "logs": folder}


PLATEAU = 0.05  # halving the load lowered the judged latency by less than this (relative): a plateau
# the default floor: this share of the capacity measured in the round (a tenth until issue 42: a
# fifth ends a search that finds nothing valid one halving sooner, its longest tries spared)
FLOOR_SHARE = 0.2


def judged_key(percentile: float) -> str:
    """The try's field holding the latency the bound judges: ``p99_ms`` from a 0.99 percentile up,
    ``p90_ms`` from 0.9, else ``p50_ms`` (the percentiles a try records)."""
    pct = float(percentile)
    return "p99_ms" if pct >= 0.99 else "p90_ms" if pct >= 0.9 else "p50_ms"


def verdict(none_above: float | None) -> str | None:
    """The words of a search that found no VALID load (``none valid above X QPS``), or None."""
    from ios_bench.reporting.numbers import fmt

    return None if none_above is None else f"none valid above {fmt(none_above)} QPS"


def floor_of(settings: dict, capacity_qps: float) -> tuple[float, str]:
    """The lowest offered load a round's search tries, and where it came from: the
    ``server_floor_qps`` setting, else :data:`FLOOR_SHARE` of the capacity measured in the round."""
    from ios_bench.reporting.numbers import fmt

    if settings.get("server_floor_qps") is not None:
        return float(settings["server_floor_qps"]), "the server_floor_qps setting"
    return FLOOR_SHARE * capacity_qps, (f"a fifth of the capacity measured in the round ({fmt(capacity_qps)} QPS: "
                                        "instances x 1000 / one request's ms)")


def plateau(higher_load: dict, lower_load: dict, key: str, bound_ms: float | None) -> bool:
    """Halving the offered load (``higher_load``'s try, then ``lower_load``'s, both INVALID) no
    longer lowers the judged latency: it fell by less than :data:`PLATEAU` and is still above the
    bound (an INVALID try whose latency meets the bound failed on something else, which a lower
    load may cure: too short a run, too few queries)."""
    a, b = higher_load.get(key), lower_load.get(key)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return False
    if bound_ms is not None and b <= bound_ms:
        return False
    return b > a * (1 - PLATEAU)


def bisect(run, capacity_qps: float, tries: int, floor_qps: float | None = None, key: str = "p99_ms",
           bound_ms: float | None = None) -> tuple[dict | None, list[dict], dict, dict]:
    """``run(qps, name) -> (try record, test result)``; returns (the best valid try or None, every
    try, the test result of the best try, or of the last one when none was valid, how it ended:
    ``stopped`` (``close``, ``tries``, ``plateau`` or ``floor``) and ``none_valid_above_qps`` (the
    lowest load tried when no try was VALID, else None)). ``key``: the tries' judged latency
    (:func:`judged_key`); ``bound_ms``: its bound; ``floor_qps``: the lowest load offered."""
    lo = hi = None
    qps = max(0.1, capacity_qps / 2)
    if floor_qps is not None:
        qps = max(qps, floor_qps)
    out: list[dict] = []
    results: dict[int, dict] = {}
    stopped = "tries"
    halving: dict | None = None  # the last INVALID try while none was VALID
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
                stopped = "close"
                break
            qps = (lo + hi) / 2
        elif lo is not None:
            qps = lo * 2
        else:
            if halving is not None and plateau(halving, rec, key, bound_ms):
                stopped = "plateau"
                break
            halving = rec
            if floor_qps is not None and hi <= floor_qps * (1 + 1e-9):
                stopped = "floor"
                break
            qps = hi / 2 if floor_qps is None else max(hi / 2, floor_qps)
    valid = [i for i, r in enumerate(out) if r["valid"]]
    best = max(valid, key=lambda i: out[i]["qps"]) if valid else None
    ending = {"stopped": stopped, "none_valid_above_qps": None if valid or not out else min(r["qps"] for r in out)}
    return (out[best] if best is not None else None), out, results[best if best is not None else len(out) - 1], ending


_TESTING = re.compile(r"Testing the mid value of bounds \[([\d.]+), ([\d.]+)\): ([\d.]+)")
_FOUND = re.compile(r"Found peak performance field: ([\d.]+)")
_BOUNDS = re.compile(r"Found boundaries: \[([\d.]+), ([\d.]+)\)")


def loadgen_peak(run, capacity_qps: float) -> tuple[dict | None, list[dict], dict, dict]:
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
        return None, tries, res, {"stopped": "loadgen-peak", "none_valid_above_qps": None}
    confirm, res = run(found, "confirm")
    confirm["reason"] = confirm.get("reason") or "FindPeakPerformance's peak, confirmed by a PerformanceOnly run"
    tries.append(confirm)
    # no plateau nor floor: LoadGen's own search; an INVALID confirmation says nothing of lower loads
    ending = {"stopped": "loadgen-peak", "none_valid_above_qps": None}
    return (confirm if confirm["valid"] else None), tries, res, ending
