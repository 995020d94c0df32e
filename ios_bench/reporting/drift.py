"""What ``compare`` cannot know about two separate runs, said (docs/harness.md, "A/B in one sweep").

Within a sweep, rounds are interleaved so that drift hits every cell alike; between two sweeps
nothing protects a comparison from what the machine did in between. :func:`between_runs` adds to a
:class:`~ios_bench.reporting.compare.Comparison`: the time between the two runs and each run's canary (the
median of its rounds' canary times), and, where an ``ios-bench ab`` run measured this machine's
between-run drift (``ab-drift.json``: in either run folder, else the newest beside them from the
same host), marks each regression or improvement whose change is within :data:`DRIFT_Z` x that
spread as ``drift possible`` and suggests ``ab`` for a decision.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path

from ios_bench.reporting.escape import term
from ios_bench.results import load_run
from ios_bench.running.rounds import usual_canary

DRIFT_FILE = "ab-drift.json"  # written by ios_bench.running.ab.write_drift
DRIFT_Z = 2.0  # a change within this many between-run spreads of zero: drift alone could give it
DRIFT_MARK = "drift possible"


def _when(text) -> _dt.datetime | None:
    try:
        t = _dt.datetime.fromisoformat(str(text))
    except (TypeError, ValueError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def span(records: list[dict]) -> tuple[_dt.datetime | None, _dt.datetime | None]:
    """When a run's measuring started and finished: its rounds' (or records') earliest start and
    latest finish."""
    starts, ends = [], []
    for r in records:
        rounds = r.get("rounds") if isinstance(r.get("rounds"), list) else []
        for g in rounds or [r]:
            if isinstance(g, dict):
                starts.append(_when(g.get("started")))
                ends.append(_when(g.get("finished")))
    starts, ends = [t for t in starts if t], [t for t in ends if t]
    return (min(starts) if starts else None), (max(ends) if ends else None)


def canary(records: list[dict]) -> float | None:
    """A run's usual canary time (ms): the median over its rounds' canaries."""
    rounds = [g for r in records for g in (r.get("rounds") or []) if isinstance(g, dict)]
    return usual_canary(rounds)


def find_drift(a, b) -> tuple[dict, Path] | None:
    """The between-run drift an ``ab`` run measured for this machine: ``ab-drift.json`` in run
    ``a`` or ``b``, else the newest one in a run folder beside them whose host is theirs."""
    def read(path: Path) -> dict | None:
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        ok = isinstance(d, dict) and isinstance(d.get("between_run_spread"), (int, float))
        return d if ok and math.isfinite(d["between_run_spread"]) else None

    for folder in (Path(a), Path(b)):
        d = read(folder / DRIFT_FILE)
        if d:
            return d, folder / DRIFT_FILE
    hosts = set()
    for folder in (Path(a), Path(b)):
        try:
            env = json.loads((folder / "env.json").read_text())
            hosts.add(env.get("hostname") or (env.get("os") or {}).get("hostname"))
        except (OSError, ValueError, AttributeError):
            pass
    found = []
    for parent in {Path(a).resolve().parent, Path(b).resolve().parent}:
        for path in parent.glob(f"*/{DRIFT_FILE}"):
            d = read(path)
            if d and (not hosts or d.get("hostname") in hosts):
                found.append((str(d.get("measured", "")), d, path))
    if not found:
        return None
    _, d, path = max(found, key=lambda t: t[0])
    return d, path


def between_runs(result, a, b) -> None:
    """Say in ``result.notes`` what two separate runs cannot tell, and mark the verdicts drift
    alone could explain (in place; see the module's docstring)."""
    ra, rb = load_run(a).records, load_run(b).records
    (sa, ea), (sb, eb) = span(ra), span(rb)
    if ea and sb:
        first_end, second_start = (ea, sb) if ea <= sb else (eb, sa)
        gap = abs((second_start - first_end).total_seconds()) if first_end and second_start else None
        if gap is not None:
            order = "A then B" if ea <= sb else "B then A"
            result.notes.append(f"the runs were measured {_human(gap)} apart ({order}); what the machine did in "
                                "between is in every change")
    ca, cb = canary(ra), canary(rb)
    if ca and cb:
        result.notes.append(f"canary: A {ca:.3f} ms, B {cb:.3f} ms ({cb / ca - 1:+.1%}); on this kind of VM the "
                            "canary does not follow all of the machine's drift")
    found = find_drift(a, b)
    if found is None:
        result.notes.append("this machine's between-run drift is unknown (no `ios-bench ab` run beside these runs); "
                            "to decide whether B is faster, measure both in one sweep: ios-bench ab A B")
        return
    drift, path = found
    band = math.expm1(DRIFT_Z * float(drift["between_run_spread"]))
    marked = 0
    for c in result.changes:
        if c.change is None or not c.verdict.startswith(("regression", "improvement")) or "(" in c.verdict:
            continue
        if abs(math.log1p(c.change)) <= math.log1p(band):
            c.verdict = f"{c.verdict} ({DRIFT_MARK})"
            marked += 1
    result.notes.append(f"between separate runs this machine drifts by up to ±{band:.1%} ({DRIFT_Z:g} x the spread "
                        f"measured by `ios-bench ab` in {term(path.parent.name)}, {drift.get('measured', '?')}); "
                        f"{marked} verdict(s) within it are marked '{DRIFT_MARK}': for a decision, measure both "
                        "sides in one sweep: ios-bench ab A B")


def _human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
