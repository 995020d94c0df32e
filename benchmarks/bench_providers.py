"""Kernel providers of the IOS runtime, side by side with the libraries running the whole graph.

In one run, for each model at one batch size:

* ``<lib>``: the library's own adapter running the whole exported graph (``adapters``:
  onnxruntime, openvino), the peer an IOS provider must match;
* ``IOS-Sequential[<provider>]``: the runtime on the sequential schedule with that provider
  (torch, onnxruntime, openvino); for onnxruntime/openvino the sequential schedule is one
  piece, so the gap to the library is the runtime's own overhead;
* with ``--both``: ``IOS-Both[<provider>]`` on an IOS-Both schedule (optimized once with the
  synthetic cost model, labelled so: the schedule is not tuned to the provider);
* ratios: IOS-Sequential[P] / P (1.00 = no overhead) and Both / Sequential per provider.

Then the per-call overhead of one piece (a tiny 1x1 convolution on a 4x4 map, so the
kernel's own work is negligible): ONNX Runtime ``run_with_iobinding`` over bound buffers
(what the runtime calls) against ``InferenceSession.run`` with a feeds dictionary, OpenVINO's
bound synchronous infer, and the torch closure.

Every figure is a median over rounds; each round measures every configuration once
(``ios_core.measurement.measure.measure``, median of ``--repeat`` samples), interleaved, so all configurations
see the same machine load. Usage:

    PYTHONPATH=. python benchmarks/bench_providers.py                      # inception_v3, squeezenet, bs 1
    PYTHONPATH=. python benchmarks/bench_providers.py --models squeezenet --rounds 5 --both
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import adapters  # noqa: E402
from ios_core import models  # noqa: E402
from ios_core.check import compare  # noqa: E402
from ios_core.ir import GraphBuilder  # noqa: E402
from ios_core.measurement.measure import measure  # noqa: E402
from ios_core.measurement.stats import median  # noqa: E402 - the one median
from ios_core.reference import random_input  # noqa: E402
from ios_core.reference import run as oracle  # noqa: E402
from ios_core.runtime import Runtime, providers  # noqa: E402

LIBRARIES = ("onnxruntime", "openvino")


def _runners(graph, batch, threads, both):
    """label -> (callable timed, check output callable)."""
    x = random_input(graph, batch)
    ref = oracle(graph, x)
    out = {}
    for lib in LIBRARIES:
        if providers.get(lib).available() is not None:
            continue
        c = adapters.get(lib).build(graph, batch, threads=threads)
        p = c.prepare(x)
        assert compare(c.finish(c.execute(p)), ref).passed, lib
        out[lib] = lambda c=c, p=p: c.execute(p)
    scheds = {"Sequential": graph}
    if both:
        from ios_core import optimize
        from ios_core.cost import make_cost_model

        scheds["Both"] = optimize(graph, "both", make_cost_model("synthetic"), batch_size=batch)
    for label, sched in scheds.items():
        for prov in providers.names():
            if providers.get(prov).available() is not None:
                continue
            t0 = time.perf_counter()
            rt = Runtime(sched, batch, provider=prov, threads=threads)
            build = time.perf_counter() - t0
            t = rt.prepare(x)
            assert compare(rt.finish(rt.execute(t)), ref).passed, (label, prov)
            out[f"IOS-{label}[{prov}]"] = lambda rt=rt, t=t: rt.execute(t)
            print(f"  built IOS-{label}[{prov}]: {rt.stats.get('pieces', rt.stats['stages'])} "
                  f"{'pieces' if prov != 'torch' else 'stages'}, {build:.1f} s", flush=True)
    return out


def _interleaved(fns: dict, rounds: int, repeat: int, warmup: int) -> dict[str, float]:
    per: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            per[k].append(measure(fn, warmup=warmup, number=1, repeat=repeat).median)
    return {k: median(v) for k, v in per.items()}


def bench_models(args) -> dict:
    results = {}
    for name in args.models:
        graph = models.get(name).init_weights(0)
        print(f"{name} (batch {args.batch}, {args.threads} threads):", flush=True)
        ms = _interleaved(_runners(graph, args.batch, args.threads, args.both), args.rounds, args.repeat,
                          args.warmup)
        results[name] = ms
        for k, v in ms.items():
            print(f"  {k:<28} {v:9.2f} ms")
        for lib in LIBRARIES:
            seq = ms.get(f"IOS-Sequential[{lib}]")
            if seq and lib in ms:
                print(f"  IOS-Sequential[{lib}] / {lib}: {seq / ms[lib]:.3f}x")
        for prov in providers.names():
            seq, both = ms.get(f"IOS-Sequential[{prov}]"), ms.get(f"IOS-Both[{prov}]")
            if seq and both:
                print(f"  IOS-Both[{prov}] speedup over IOS-Sequential[{prov}]: {seq / both:.3f}x")
    return results


def bench_overhead(args) -> dict:
    """Per-call overhead of a piece whose work is negligible: a 1x1 conv on 8x4x4."""
    b = GraphBuilder("tiny", (8, 4, 4))
    b.end_block(b.conv(b.input, 8, 1))
    g = b.finish().init_weights(0)
    piece = providers.make_piece("tiny", list(g.blocks[0].nodes))
    x = random_input(g, 1)
    y = np.empty((1, 8, 4, 4), np.float32)
    fns = {}
    for prov in providers.names():
        if providers.get(prov).available() is not None:
            continue
        k = providers.get(prov).compile(piece, 1, threads=1)
        fns[f"{prov}: bound call"] = k.bind([x], [y])
        if prov == "onnxruntime":
            fns["onnxruntime: InferenceSession.run(feeds)"] = lambda k=k: k.run_plain([x])
            io = k.session.io_binding()
            io.bind_input(piece.inputs[0].name, "cpu", 0, np.float32, list(x.shape), x.ctypes.data)
            io.bind_output(piece.outputs[0].name, "cpu", 0, np.float32, list(y.shape), y.ctypes.data)
            fns["onnxruntime: session.run_with_iobinding (public API)"] = \
                lambda k=k, io=io: k.session.run_with_iobinding(io)
    n = 200
    calls = {k: (lambda f=f: [f() for _ in range(n)]) for k, f in fns.items()}
    ms = _interleaved(calls, args.rounds, args.repeat, 1)
    us = {k: v * 1e3 / n for k, v in ms.items()}
    print("per-call time of a piece with negligible work (1x1 conv, 8x4x4), microseconds:")
    for k, v in us.items():
        print(f"  {k:<52} {v:8.1f} us")
    bound, plain = us.get("onnxruntime: bound call"), us.get("onnxruntime: InferenceSession.run(feeds)")
    if bound and plain:
        print(f"  run(feeds) / run_with_iobinding: {plain / bound:.2f}x")
    return us


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=lambda s: s.split(","), default=["inception_v3", "squeezenet"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() and min(2, os.cpu_count()))
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median over rounds)")
    ap.add_argument("--repeat", type=int, default=10, help="samples per measurement")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--both", action="store_true", help="also IOS-Both (synthetic-cost schedule) per provider")
    ap.add_argument("--no-overhead", action="store_true", help="skip the per-call overhead measurement")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args(argv)
    print(f"load average at start: {os.getloadavg()[0]:.1f} (figures taken under load are noisy)")
    out = {"models": bench_models(args)}
    if not args.no_overhead:
        out["overhead_us"] = bench_overhead(args)
    out["load_average_end"] = os.getloadavg()[0]
    print(f"load average at end: {out['load_average_end']:.1f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
