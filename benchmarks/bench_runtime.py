"""The IOS runtime side by side with the oracle path, and the schedules the optimizer makes.

For each model, at one batch size, in one run:

* ``oracle``: torch eager running the graph op by op (``ios_core.reference.run``);
* ``sequential``: the runtime on the sequential schedule;
* ``greedy`` and ``both``: the runtime on the greedy and IOS-Both schedules (when
  ``ios_core.optimize`` is available), optimized with the chosen cost model;
* the runtime's dispatch overhead per operator: per sample of a sequential run with a clock
  read around every operator's closure, (sample time - sum of the operators' own times) /
  operators, median over samples (the kernels' own torch dispatch is inside the operator
  times; this is the runtime's loop, stage and release work).

Every figure is a median of ``--repeat`` samples from ``ios_core.measurement.measure.measure``. Ratios are
from this one run. Usage:

    PYTHONPATH=. python benchmarks/bench_runtime.py --models squeezenet --repeat 5
    GOMP_SPINCOUNT=20000 PYTHONPATH=. python benchmarks/bench_runtime.py   # see docs/runtime.md
    PYTHONPATH=. python benchmarks/bench_runtime.py --cost measured --cost-mode composed --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from ios_core import models  # noqa: E402
from ios_core.check import compare  # noqa: E402
from ios_core.measurement.measure import measure  # noqa: E402
from ios_core.measurement.stats import geomean  # noqa: E402
from ios_core.reference import random_input  # noqa: E402
from ios_core.reference import run as oracle  # noqa: E402
from ios_core.runtime import Runtime  # noqa: E402

DEFAULT_MODELS = ["inception_v3", "randwire", "nasnet", "squeezenet"]


def _optimize(graph, strategy, args):
    try:
        from ios_core import optimize
        from ios_core.cost import make_cost_model
    except ImportError as e:
        return None, f"optimizer unavailable ({e})"
    options = {}
    if args.cost == "measured":
        options = dict(mode=args.cost_mode, threads=args.threads)
    try:
        cm = make_cost_model(args.cost, **options)
        t0 = time.perf_counter()
        sched = optimize(graph, strategy, cm, batch_size=args.batch)
        info = {"optimize_s": round(time.perf_counter() - t0, 2)}
        if hasattr(cm, "stats"):
            info.update({k: v for k, v in cm.stats().items() if k in ("measured", "hits", "misses")})
        return sched, info
    except Exception as e:  # noqa: BLE001 - reported in the table
        return None, f"{type(e).__name__}: {e}"


def bench_model(name: str, args) -> dict:
    graph = models.get(name).init_weights(0)
    x = random_input(graph, args.batch)
    ref = oracle(graph, x)
    proto = dict(warmup=args.warmup, number=args.number, repeat=args.repeat)
    row: dict = {"model": name, "batch": args.batch, "threads": args.threads, "operators": len(list(graph.operators()))}

    with torch.inference_mode():
        row["oracle_ms"] = measure(lambda: oracle(graph, x), **proto).median

    rt = Runtime(graph, args.batch, threads=args.threads)
    assert compare(rt.run(x), ref).passed
    m = rt.measure(x=x, **proto)
    row["sequential_ms"] = m.median
    row["peak_activation_mb"] = rt.stats["peak_activation_bytes"] / 2**20
    mo, names, op_ms = rt.measure_operators(x=x, **proto)
    row["kernel_sum_ms"] = sum(op_ms)
    row["dispatch_us_per_op"] = mo.meta["overhead_us_per_op"]
    row["seq_vs_oracle"] = row["oracle_ms"] / m.median

    for strategy in args.strategies:
        sched, info = _optimize(graph, strategy, args)
        if sched is None:
            row[f"{strategy}_ms"] = None
            row[f"{strategy}_note"] = info
            continue
        srt = Runtime(sched, args.batch, threads=args.threads)
        check = compare(srt.run(x), ref)
        row[f"{strategy}_ms"] = srt.measure(x=x, **proto).median
        row[f"{strategy}_speedup"] = row["sequential_ms"] / row[f"{strategy}_ms"]
        row[f"{strategy}_check"] = check.passed
        row[f"{strategy}_stages"] = srt.stats["stages"]
        row[f"{strategy}_parallel_stages"] = srt.stats["parallel_stages"]
        row[f"{strategy}_info"] = info
    return row


def _fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=None, help="thread budget (default: torch's)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--number", type=int, default=1)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--strategies", default="greedy,both")
    p.add_argument("--cost", default="synthetic", help="cost model for the optimizer: synthetic | measured")
    p.add_argument("--cost-mode", default="composed", help="measured cost model mode: stage | composed")
    p.add_argument("--json", default=None, help="also write the rows here")
    args = p.parse_args(argv)
    args.threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(args.threads)  # the oracle path runs on this thread with the same budget
    args.strategies = [s for s in args.strategies.split(",") if s]
    names = [m for m in args.models.split(",") if m]
    known = models.names()
    rows = []
    for name in names:
        if name not in known:
            print(f"# {name}: not in the zoo, skipped", flush=True)
            continue
        t0 = time.perf_counter()
        rows.append(bench_model(name, args))
        print(f"# {name} done in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)

    print(f"\nbatch {args.batch}, {args.threads} threads, median of {args.repeat}x{args.number} "
          f"(cost model for schedules: {args.cost}{'/' + args.cost_mode if args.cost == 'measured' else ''})")
    head = ["model", "ops", "oracle ms", "seq ms", "oracle/seq", "disp us/op", "peak MB"]
    for s in args.strategies:
        head += [f"{s} ms", f"seq/{s}"]
    print(" | ".join(f"{h:>12}" for h in head))
    for r in rows:
        cells = [r["model"], str(r["operators"]), _fmt(r["oracle_ms"]), _fmt(r["sequential_ms"]),
                 _fmt(r["seq_vs_oracle"], ".3f"), _fmt(r["dispatch_us_per_op"], ".1f"),
                 _fmt(r["peak_activation_mb"], ".1f")]
        for s in args.strategies:
            cells += [_fmt(r.get(f"{s}_ms")), _fmt(r.get(f"{s}_speedup"), ".3f")]
        print(" | ".join(f"{c:>12}" for c in cells))
    for s in args.strategies:
        sp = [r[f"{s}_speedup"] for r in rows if r.get(f"{s}_speedup")]
        if sp:
            gm = geomean(sp)
            print(f"geometric mean speedup of {s} over sequential: {gm:.3f} ({len(sp)} models)")
        notes = [f"{r['model']}: {r[f'{s}_note']}" for r in rows if r.get(f"{s}_note")]
        for n in notes:
            print(f"  {s} not run for {n}")
    bad = [(r["model"], s) for r in rows for s in args.strategies if r.get(f"{s}_check") is False]
    if bad:
        print(f"OUTPUT MISMATCH vs oracle: {bad}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
