"""int8 output error of every int8 framework against the fp32 oracle, beside the oracle's own int8 simulation
of the same network (``ios_core.reference.int8_simulation``): what the int8 check's bounds rest on
(``ios_core.check``: max error 1e-1, arg-max agreement, and the RMS error at most a factor of the
simulation's, docs/precision.md).

Each cell is checked as a sweep checks it (``ios_bench.running.task_cell``): the framework's int8 build of
the zoo model (seeded weights, seed 0), calibrated on ``ios_core.quantize.calibration_feeds``, run on the
seeded input and, below batch 16, on further seeded batches (``ios_core.check.check_batches``), then
``ios_core.check.check_precision`` with the simulation's outputs of the same batches. A build whose
engine reads back another precision than int8 is a failed row
(``ios_bench.running.task_cell.precision_problem``). No timing: the errors
do not depend on the machine's load.

    python benchmarks/bench_int8_error.py                                   # the default models, batch 1 and 16
    python benchmarks/bench_int8_error.py --models squeezenet --batch 1 --frameworks onnxruntime,ios:openvino

Prints one row per cell: the max error (the cell's own batch, relative to the oracle's largest magnitude), the
RMS error over every checked sample (relative to the oracle's RMS), the simulation's RMS error over the same
samples, their ratio, the RMS bound it gives, the arg-max agreement and the verdict; then the largest ratio.
Bad input is one line (exit 2).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

DEFAULT_MODELS = "squeezenet,resnet18,resnet50,inception_v3,vgg11,vit_tiny,convnext_tiny"
DEFAULT_FRAMEWORKS = "onnxruntime,openvino,torch,tflite,ios:onnxruntime,ios:openvino"


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of whole numbers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be whole numbers >= 1: {text!r}")
    return values


def _build(name: str, graph, batch: int, threads: int):
    """The framework's int8 program: ``ios:<provider>`` is IOS on that kernel provider, on the graph's level
    schedule (every operator of a level in one stage: no search), each piece quantized by the provider."""
    import adapters

    if name.startswith("ios:"):
        from ios_core.models.coverage import level_schedule

        return adapters.get("ios").build(level_schedule(graph), batch, threads=threads,
                                         provider=name.split(":", 1)[1], precision="int8", cache_dir="off")
    return adapters.get(name).build(graph, batch, threads=threads, precision="int8", cache_dir="off")


def _reason(name: str) -> str | None:
    import adapters

    adapter = adapters.get("ios" if name.startswith("ios:") else name)
    on = {"provider": name.split(":", 1)[1]} if name.startswith("ios:") else {}
    return adapter.available() or adapter.precision_reason("int8", "cpu", **on)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"zoo models [{DEFAULT_MODELS}]")
    parser.add_argument("--batch", type=_ints, default=[1, 16], help="batch sizes [1,16]")
    parser.add_argument("--frameworks", default=DEFAULT_FRAMEWORKS,
                        help=f"int8 frameworks, ios:<provider> for IOS [{DEFAULT_FRAMEWORKS}]")
    parser.add_argument("--threads", type=int, default=2, help="threads per framework [2]")
    parser.add_argument("--input-seed", type=int, default=0, help="the sweep's --seed for inputs [0]")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)

    import numpy as np

    import adapters
    from ios_bench.running.task_cell import precision_problem
    from ios_core import models, reference
    from ios_core.check import check_batches, check_precision
    from ios_core.inputs import random_input
    from ios_core.quantize import calibration_feeds

    names = [m for m in args.models.split(",") if m]
    frameworks = [f for f in args.frameworks.split(",") if f]
    unknown = [m for m in names if m not in models.names()] + [
        f for f in frameworks if (f.split(":", 1)[0] if f.startswith("ios:") else f) not in adapters.names()]
    if unknown or args.threads < 1:
        print(f"error: unknown {'models or frameworks ' + ', '.join(unknown) if unknown else 'threads'}",
              file=sys.stderr)
        return 2
    header = (f"{'model':14s} {'batch':>5s} {'framework':18s} {'max':>7s} {'rms':>7s} {'sim rms':>7s} "
              f"{'ratio':>6s} {'bound':>6s} {'arg-max':>7s}  verdict")
    print(header)
    worst = (0.0, "")
    for model in names:
        for bs in args.batch:
            g = models.get(model)
            g.init_weights(0)
            xs = [random_input(g, bs, seed=args.input_seed + i) for i in range(check_batches(bs, "int8"))]
            refs = [reference.run(g, x) for x in xs]
            simulate = reference.int8_simulation(g, calibration_feeds(g, bs)[0])
            sims = [simulate(x) for x in xs]
            for fw in frameworks:
                why = _reason(fw)
                if why:
                    print(f"{model:14s} {bs:5d} {fw:18s} skipped: {why[:100]}", flush=True)
                    continue
                t0 = time.perf_counter()
                try:
                    c = _build(fw, g, bs, args.threads)
                    problem = precision_problem(adapters.get(fw.split(":", 1)[0]), c.info, "int8")
                    if problem:  # what the engine built, read back (as a sweep's cell fails on it)
                        raise RuntimeError(problem)
                    outs = [np.asarray(c.finish(c.execute(c.prepare(x)))) for x in xs]
                except Exception as e:  # a framework that cannot build this model at int8: said, not hidden
                    print(f"{model:14s} {bs:5d} {fw:18s} failed: {type(e).__name__}: {str(e).splitlines()[0][:100]}",
                          flush=True)
                    continue
                res = check_precision(outs[0], refs[0], "int8", more=(outs[1:], refs[1:]) if len(xs) > 1 else None,
                                      simulated=sims)
                ratio = res.rms_rel_err / res.simulated_rms_rel_err if res.simulated_rms_rel_err else float("inf")
                if ratio > worst[0]:
                    worst = (ratio, f"{model} b{bs} {fw}")
                print(f"{model:14s} {bs:5d} {fw:18s} {res.max_rel_err:7.4f} {res.rms_rel_err:7.4f} "
                      f"{res.simulated_rms_rel_err:7.4f} {ratio:6.2f} {res.rms_bound:6.3f} "
                      f"{res.argmax_agreement:7.0%}  {'ok' if res.passed else 'refused: ' + res.reason}"
                      f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    if worst[1]:
        print(f"largest ratio of a cell's RMS error to the simulation's: {worst[0]:.2f} ({worst[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
