"""Does isolation change what is measured, and what does it cost per cell?

    PYTHONPATH=. python benchmarks/bench_harness.py                       # squeezenet, first available peer
    PYTHONPATH=. python benchmarks/bench_harness.py --model sample --framework torch --repeat 30

For one (model, batch, framework) cell, side by side in one run:
  in-process   build + check + ios_core.measurement.measure.measure in this Python process
  worker       the same cell through ios_bench's worker process (what `ios-bench run` does)
It prints both medians with their p10-p90 and the ratio worker/in-process (expected ~1.00 on
a quiet machine), and the harness overhead per cell: worker wall time minus the build and the
timed runs (process start, imports, loading the graph, the output check).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import adapters  # noqa: E402
from ios_bench.planning.plan import Plan  # noqa: E402
from ios_bench.running.sweep import Sweep  # noqa: E402
from ios_core import models, reference  # noqa: E402
from ios_core.check import compare  # noqa: E402
from ios_core.measurement.measure import measure  # noqa: E402
from ios_core.measurement.threads import usable_cores  # noqa: E402


def in_process(model: str, batch: int, framework: str, threads: int, args) -> dict:
    graph = models.get(model).init_weights(0)
    x = reference.random_input(graph, batch, seed=0)
    ref = reference.run(graph, x)
    t0 = time.perf_counter()
    compiled = adapters.get(framework).build(graph, batch, "cpu", threads)
    build = time.perf_counter() - t0
    prepared = compiled.prepare(x)
    ok = compare(compiled.finish(compiled.execute(prepared)), ref, compiled.info["tolerance"]).passed
    m = measure(lambda: compiled.execute(prepared), warmup=args.warmup, number=1, repeat=args.repeat,
                min_sample_ms=args.min_sample_ms, sync=compiled.sync)
    return {"median": m.median, "p10": m.percentile(10), "p90": m.percentile(90), "build": build, "ok": ok}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--framework", default=None, help="default: onnxruntime, else torch, else the first available")
    ap.add_argument("--threads", type=int, default=usable_cores())
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--min-sample-ms", type=float, default=10.0)
    args = ap.parse_args()
    fw = args.framework
    if fw is None:
        avail = [n for n in adapters.names() if n != "ios" and adapters.get(n).available() is None]
        fw = next((n for n in ("onnxruntime", "torch") if n in avail), avail[0] if avail else None)
        if fw is None:
            sys.exit("no framework adapter is available")

    with tempfile.TemporaryDirectory() as tmp:
        plan = Plan(models=[args.model], batch_sizes=[args.batch], frameworks=[fw], schedules=[],
                    warmup=args.warmup, repeat=args.repeat, min_sample_ms=args.min_sample_ms, threads=args.threads,
                    rounds=1)  # one worker process: its overhead is what this measures
        t0 = time.perf_counter()
        Sweep(plan, Path(tmp) / "run", progress=False).run()
        sweep_wall = time.perf_counter() - t0
        from ios_bench.results import read_records

        (rec,) = read_records(Path(tmp) / "run")
    local = in_process(args.model, args.batch, fw, args.threads, args)
    timed_s = rec["median_ms"] * rec["number"] * (rec["repeat"] + 1) / 1000  # samples + calibration, roughly
    overhead = rec["rounds"][0]["wall_seconds"] - (rec.get("build_seconds") or 0) - timed_s
    print(f"\n{args.model} batch {args.batch}, {fw}, {args.threads} threads, {args.repeat} samples")
    print(f"{'':14}{'median ms':>11}{'p10-p90 ms':>20}{'build s':>9}{'output':>8}")
    print(f"{'in-process':14}{local['median']:>11.3f}{local['p10']:>10.3f}-{local['p90']:<9.3f}"
          f"{local['build']:>9.2f}{'ok' if local['ok'] else 'WRONG':>8}")
    print(f"{'worker':14}{rec['median_ms']:>11.3f}{rec['p10_ms']:>10.3f}-{rec['p90_ms']:<9.3f}"
          f"{rec.get('build_seconds') or 0:>9.2f}{'ok' if rec['check']['passed'] else 'WRONG':>8}")
    print(f"ratio worker / in-process median: {rec['median_ms'] / local['median']:.3f}")
    print(f"worker wall {rec['rounds'][0]['wall_seconds']:.2f} s; harness overhead per cell ~{overhead:.2f} s "
          f"(process start, imports, graph, check); whole sweep incl. probe + reference: {sweep_wall:.1f} s")


if __name__ == "__main__":
    main()
