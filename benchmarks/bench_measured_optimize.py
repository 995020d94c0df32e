"""Optimizing with the measured cost model: wall time, stages measured, cache effect, and how
much schedule quality the fast ``composed`` mode gives up against ``stage`` mode.

For each model and mode: optimize twice (the second run reads the profile database the
first one filled), report wall times, measurements and hits; then time the resulting
schedules on the runtime side by side with the sequential schedule.

    PYTHONPATH=. python benchmarks/bench_measured_optimize.py --models inception_v3 --modes stage,composed
    IOS_BENCH_CACHE=/tmp/ios-cache PYTHONPATH=. python benchmarks/bench_measured_optimize.py --models nasnet \\
        --modes composed

Use a fresh ``IOS_BENCH_CACHE`` (or ``--cache``) to see a cold first run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from ios_core import models  # noqa: E402
from ios_core.check import compare  # noqa: E402
from ios_core.reference import random_input  # noqa: E402
from ios_core.reference import run as oracle  # noqa: E402
from ios_core.runtime import Runtime  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="inception_v3")
    p.add_argument("--modes", default="stage,composed")
    p.add_argument("--strategy", default="both")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--cache", default=None, help="profile database path (default: IOS_BENCH_CACHE or user cache)")
    p.add_argument("--repeat", type=int, default=10, help="samples when timing the schedules")
    p.add_argument("--stage-warmup", type=int, default=2, help="measured cost model: warmup runs per stage")
    p.add_argument("--stage-repeat", type=int, default=5, help="measured cost model: samples per stage")
    p.add_argument("--once", action="store_true", help="optimize once per mode (skip the cached re-run)")
    args = p.parse_args(argv)
    from ios_core import optimize
    from ios_core.cost import make_cost_model

    threads = args.threads or torch.get_num_threads()
    for name in [m for m in args.models.split(",") if m]:
        graph = models.get(name).init_weights(0)
        x = random_input(graph, args.batch)
        ref = oracle(graph, x)
        schedules = {"sequential": graph}
        for mode in [m for m in args.modes.split(",") if m]:
            for attempt in (1,) if args.once else (1, 2):
                options = dict(mode=mode, threads=threads, warmup=args.stage_warmup, repeat=args.stage_repeat)
                if args.cache:
                    options["cache"] = args.cache
                cm = make_cost_model("measured", **options)
                t0 = time.perf_counter()
                sched = optimize(graph, args.strategy, cm, batch_size=args.batch)
                wall = time.perf_counter() - t0
                st = cm.stats()
                print(f"{name} {args.strategy} mode={mode} run {attempt}: {wall:.1f} s wall, {st['calls']} stage "
                      f"costs asked, {st['measured']} measured ({st['measure_seconds']:.1f} s), "
                      f"{st['hits']} cache hits, {st['misses']} misses", flush=True)
                schedules[f"{args.strategy}/{mode}"] = sched
        base = None
        for label, sched in schedules.items():
            rt = Runtime(sched, args.batch, threads=threads)
            ok = compare(rt.run(x), ref).passed
            ms = rt.measure(warmup=3, repeat=args.repeat, x=x).median
            base = base or ms
            print(f"  {label:>20}: {ms:9.3f} ms  speedup over sequential {base / ms:.3f}  stages "
                  f"{rt.stats['stages']} ({rt.stats['parallel_stages']} parallel)  oracle check "
                  f"{'ok' if ok else 'FAILED'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
