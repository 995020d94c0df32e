"""What the end-to-end candidates add to one IOS search on the CPU (issue 40 item 3).

    python benchmarks/bench_cpu_candidates.py [--model squeezenet] [--pairs 2]

Alternates cold IOS-Both searches (each on a fresh profile database, the measured cost model's
defaults) that end by timing the DP's schedule and sequential only (``candidates=schedule,sequential``)
and every candidate (the default), and prints per search the whole call's wall time, the search's,
and the candidates' timing; then the medians and what every candidate adds to the end of a search
(the whole call less the DP's search: the other schedules searched and every timing), against the
median search (the search's own time varies most on a loaded machine: a disturbed stage is measured
again). Each figure is measured
on this machine as it is: print ``date`` and the load average beside it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ios_core import models
from ios_core.cost.measured import MeasuredCostModel
from ios_core.measurement.stats import median
from ios_core.optimizer import schedule
from ios_core.optimizer.optimize import validation_text


def one(graph, candidates: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cm = MeasuredCostModel(cache=Path(tmp) / "profiles.sqlite", candidates=candidates)
        t0 = time.perf_counter()
        res = schedule(graph, "both", cm, batch_size=1)
        total = time.perf_counter() - t0
    v = res.stats.validation or {}
    return {"total": total, "search": res.stats.search_seconds, "timing": v.get("seconds", 0.0),
            "text": validation_text(v)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--pairs", type=int, default=2)
    a = ap.parse_args(argv)
    g = models.get(a.model).init_weights(0)
    out: dict[str, list[dict]] = {"schedule,sequential": [], "every candidate": []}
    for _ in range(a.pairs):
        for label, cands in (("schedule,sequential", "schedule,sequential"), ("every candidate", None)):
            r = one(g, cands)
            out[label].append(r)
            print(f"{a.model} IOS-Both, {label}: whole call {r['total']:.1f} s, search {r['search']:.1f} s, "
                  f"candidates timed in {r['timing']:.1f} s; {r['text']}", flush=True)
    two, every = (median([r["timing"] for r in out[k]]) for k in out)
    search = median([r["search"] for k in out for r in out[k]])
    added = (median([r["total"] - r["search"] for r in out["every candidate"]])
             - median([r["total"] - r["search"] for r in out["schedule,sequential"]]))
    print(f"median candidates' timing: {two:.1f} s (schedule and sequential) -> {every:.1f} s (every candidate); "
          f"the search's end (everything after the DP: other schedules, timing) adds {added:+.1f} s to a median "
          f"search of {search:.1f} s ({100 * added / search:+.0f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
