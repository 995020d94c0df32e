"""Latency of the same networks (same weights, same input) under every available framework adapter.

    PYTHONPATH=. python benchmarks/bench_adapters.py                       # inception_v3, squeezenet, batch 1
    PYTHONPATH=. python benchmarks/bench_adapters.py --models squeezenet --frameworks torch,onnxruntime \\
        --warmup 2 --repeat 5 --json runs/bench_adapters.json

Each (model, framework) cell runs in its own process (thread settings are per process, and one
framework's thread pools must not disturb another's), builds the program untimed, checks its
output against the oracle, and is timed by the one measurement function,
``ios_core.measurement.measure.measure``, on ``compiled.execute(prepared)`` with ``prepared =
compiled.prepare(x)`` made beforehand (layout conversion and tensor creation are untimed).
When the ``ios`` adapter exists it also runs the graph under a sequential schedule (one
operator per stage, IOS's own runtime without inter-operator parallelism). The tables give
each framework's median latency with its spread and the ratio to the fastest in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load_model(name: str):
    from ios_core import models

    return models.get(name)


def run_cell(model: str, framework: str, batch: int, threads: int, warmup: int, repeat: int, number: int,
             min_sample_ms: float | None, seed: int) -> dict:
    """Build, check and time one cell in this process; returns a JSON-able row."""
    import adapters
    from ios_core import reference
    from ios_core.check import compare
    from ios_core.measurement.measure import measure

    graph = load_model(model)
    graph.init_weights(seed)
    adapter_name = framework
    if framework == "ios-sequential":
        adapter_name = "ios"
        for block in graph.blocks:  # the sequential schedule: one operator per stage
            block.stages = block.sequential_stages()
    adapter = adapters.get(adapter_name)
    reason = adapter.available()
    if reason is not None:
        return {"model": model, "framework": framework, "status": "unavailable", "reason": reason}
    x = reference.random_input(graph, batch, seed=seed)
    ref = reference.run(graph, x)
    t0 = time.perf_counter()
    compiled = adapter.build(graph, batch_size=batch, device="cpu", threads=threads)
    build_s = time.perf_counter() - t0
    check = compare(compiled.run(x), ref, compiled.info.get("tolerance", adapter.tolerance))
    prepared = compiled.prepare(x)
    m = measure(lambda: compiled.execute(prepared), warmup=warmup, number=number, repeat=repeat,
                min_sample_ms=min_sample_ms, sync=compiled.sync)
    info = {k: v for k, v in compiled.info.items() if isinstance(v, (str, int, float, bool, type(None)))}
    return {"model": model, "framework": framework, "status": "ok", "batch": batch, "threads": threads,
            "build_seconds": build_s, "check": check.to_dict(), "measurement": m.to_dict(),
            "summary": m.summary(), "info": info}


def run_isolated(args, model: str, framework: str) -> dict:
    cmd = [sys.executable, __file__, "--cell", model, framework, "--batch", str(args.batch), "--threads",
           str(args.threads), "--warmup", str(args.warmup), "--repeat", str(args.repeat), "--number",
           str(args.number), "--seed", str(args.seed)]
    if args.min_sample_ms:
        cmd += ["--min-sample-ms", str(args.min_sample_ms)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.cell_timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"model": model, "framework": framework, "status": "failed",
                "reason": f"timed out after {args.cell_timeout} s"}
    for line in reversed(out.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return {"model": model, "framework": framework, "status": "failed", "reason": f"exit {out.returncode}: {tail}"}


def format_table(model: str, rows: list[dict], args) -> str:
    ok = [r for r in rows if r["status"] == "ok"]
    best = min((r["summary"]["median_ms"] for r in ok), default=None)
    lines = [f"\n{model}, batch {args.batch}, {args.threads} threads "
             f"(warmup {args.warmup}, {args.repeat} samples x {args.number} runs; ratio = median / fastest median)",
             f"{'framework':<22}{'median ms':>11}{'mean ± std ms':>18}{'min ms':>9}{'ratio':>8}{'build s':>9}"
             f"  {'check (max rel err)':<22}precision"]
    for r in sorted(ok, key=lambda r: r["summary"]["median_ms"]):
        s, c = r["summary"], r["check"]
        check = f"{'ok' if c['passed'] else 'FAIL'} {c['max_rel_err']:.1e}"
        lines.append(f"{r['framework']:<22}{s['median_ms']:>11.3f}{s['mean_ms']:>11.3f} ± {s['std_ms']:<5.3f}"
                     f"{s['min_ms']:>9.3f}{s['median_ms'] / best:>7.2f}x{r['build_seconds']:>9.1f}  {check:<22}"
                     f"{r['info'].get('precision', '?')}")
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"{r['framework']:<22}{r['status']}: {r['reason']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="inception_v3,squeezenet")
    p.add_argument("--frameworks", default="all", help="comma list of adapter names, or all")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=None, help="intra-op threads for every framework (default: cores)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--number", type=int, default=1)
    p.add_argument("--min-sample-ms", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cell-timeout", type=int, default=1800, help="seconds per (model, framework) process")
    p.add_argument("--json", default=None, help="write every row (all samples, build info) to this file")
    p.add_argument("--cell", nargs=2, metavar=("MODEL", "FRAMEWORK"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    from ios_core.measurement.threads import resolve_threads

    args.threads = resolve_threads(args.threads)
    if args.cell:
        row = run_cell(*args.cell, args.batch, args.threads, args.warmup, args.repeat, args.number,
                       args.min_sample_ms, args.seed)
        print(json.dumps(row))
        return 0

    import adapters

    names = [n for n in adapters.names() if n != "ios"]
    if "ios" in adapters.names():
        names.append("ios-sequential")
    if args.frameworks != "all":
        wanted = args.frameworks.split(",")
        unknown = [w for w in wanted if w not in names]
        if unknown:
            p.error(f"unknown frameworks {unknown}; choose from {names}")
        names = wanted
    results = []
    for model in args.models.split(","):
        rows = []
        for fw in names:
            print(f"  {model} / {fw} ...", file=sys.stderr, flush=True)
            rows.append(run_isolated(args, model, fw))
        results += rows
        print(format_table(model, rows, args), flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
