"""ios-bench's reduced-precision cells against each framework's own recipe (issue 57, "against the
frameworks' own tools"): the same exported ONNX, the same threads, timed side by side, and why they
differ.

* ONNX Runtime int8: ios-bench's cell (``adapters.onnxruntime``, ``ios_core.quantize.ort_quantize``)
  against ONNX Runtime's documented recipe: ``quant_pre_process`` (symbolic shape inference and the
  ONNX optimizer), then ``quantize_static`` with per-channel weights and its defaults otherwise (QDQ,
  MinMax, activations and weights s8), and the same with u8 activations (ios-bench's setting, what
  ONNX Runtime's documentation advises on x86), all calibrated on the same inputs. Each runs in an
  ``InferenceSession`` with the cell's own session options (``session.get_session_options()``),
  timed by the one function a cell is timed with (``ios_bench.running.task_cell.time_compiled``) in
  interleaved blocks, the blocks' order alternating round by round; each ratio comes with the paired
  interval (``ios_bench.running.rounds.paired_interval``). Then what each quantized model holds (its
  Q/DQ pairs, the operators they wrap) and what ONNX Runtime's optimized graph runs.
* OpenVINO: ios-bench's cell at fp32 (and at bf16 where this CPU offers it) against
  ``benchmark_app -m model.onnx -d CPU -hint none -nstreams 1 -nthreads N -infer_precision P -api sync``
  (OpenVINO's own tool, its median latency), runs alternating with the cell's blocks.

    python benchmarks/bench_own_tools.py                          # squeezenet, resnet50; 2 threads
    python benchmarks/bench_own_tools.py --models squeezenet --rounds 3 --what ort

Figures are measured where printed; nothing is estimated. Bad input is one line (exit 2).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._cli import script_parser  # noqa: E402


def ort_recipe(model, feeds: list, per_channel: bool = True, u8_activations: bool = False):
    """``model`` quantized as ONNX Runtime's documentation says: ``quant_pre_process`` then
    ``quantize_static`` (QDQ, per-channel weights, MinMax; its default types s8 activations and
    weights, or u8 activations), calibrated on ``feeds``; the quantized ModelProto."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    names = [i.name for i in model.graph.input]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({names[0]: x} for x in feeds)

        def get_next(self):
            return next(self.it, None)

    with tempfile.TemporaryDirectory(prefix="ios-bench-own-ort-") as tmp:
        src, pre, dst = (Path(tmp) / n for n in ("fp32.onnx", "pre.onnx", "int8.onnx"))
        onnx.save(model, str(src))
        quant_pre_process(str(src), str(pre))
        types = {"activation_type": QuantType.QUInt8} if u8_activations else {}
        quantize_static(str(pre), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel, **types)
        return onnx.load(str(dst))


def qdq_summary(model) -> dict:
    """What a QDQ model quantizes: its QuantizeLinear and DequantizeLinear nodes and, per operator
    type, how many of its nodes read a dequantized input."""
    dq_out = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    ops = Counter(n.op_type for n in model.graph.node)
    wrapped = Counter(n.op_type for n in model.graph.node
                      if n.op_type not in ("QuantizeLinear", "DequantizeLinear") and set(n.input) & dq_out)
    return {"Q": ops["QuantizeLinear"], "DQ": ops["DequantizeLinear"], "wrapped": dict(wrapped)}


def optimized_ops(session_bytes: bytes, options) -> Counter:
    """The operator types of the graph ONNX Runtime runs for this model with these session options
    (its optimized model, written once and read back)."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="ios-bench-own-opt-") as tmp:
        path = Path(tmp) / "optimized.onnx"
        options.optimized_model_filepath = str(path)
        options.log_severity_level = 3
        ort.InferenceSession(session_bytes, options, providers=["CPUExecutionProvider"])
        options.optimized_model_filepath = ""
        return Counter(n.op_type for n in onnx.load(str(path)).graph.node)


def interleaved(cells: dict, x, rounds: int, warmup: int, repeat: int) -> dict[str, list[list[float]]]:
    """Each cell (name -> a built program) timed in ``rounds`` rounds of one block each, the blocks'
    order reversed every other round; per cell, each round's samples (ms)."""
    from ios_bench.running.task_cell import time_compiled

    samples: dict[str, list[list[float]]] = {k: [] for k in cells}
    prepared = {k: c.prepare(x) for k, c in cells.items()}
    order = list(cells)
    for i in range(rounds):
        for k in (order if i % 2 == 0 else order[::-1]):
            m = time_compiled(cells[k], prepared[k], "cpu", warmup=warmup, number=1, repeat=repeat)
            samples[k].append(list(m.samples_ms))
    return samples


def figure(rounds_ms: list[list[float]]) -> float:
    from ios_bench.running.rounds import figure_over_rounds

    return figure_over_rounds(rounds_ms)


def ratio_line(a_name, a, b_name, b) -> str:
    from ios_bench.running.rounds import paired_interval

    change, lo, hi = paired_interval(a, b)
    return (f"{b_name} / {a_name}: {1 + change:.3f}x [{1 + lo:.3f}-{1 + hi:.3f}] "
            f"({figure(b):.3f} ms against {figure(a):.3f} ms, {len(a)} paired rounds)")


def compare_ort(graph, threads: int, rounds: int, warmup: int, repeat: int, say=print) -> None:
    import numpy as np
    import onnxruntime as ort

    import adapters
    from adapters.onnxruntime import ORTCompiled, quantize
    from ios_core.inputs import random_input
    from ios_core.lowering.onnx import export
    from ios_core.quantize import calibration_feeds

    x = random_input(graph, 1)
    ours = adapters.get("onnxruntime").build(graph, 1, "cpu", threads, precision="int8")
    options = ours.session.get_session_options()
    feeds, _, _ = calibration_feeds(graph, 1)
    options.optimized_model_filepath = ""
    quantized = {"ios-bench": quantize(export(graph, 1), graph, 1)[0],  # the cell's quantizer (its cache aside)
                 "ORT recipe": ort_recipe(export(graph, 1), list(feeds)),
                 "ORT recipe u8": ort_recipe(export(graph, 1), list(feeds), u8_activations=True)}
    cells = {"ios-bench": ours, **{k: ORTCompiled(ort.InferenceSession(m.SerializeToString(), options,
                                                                       providers=["CPUExecutionProvider"]), {})
                                   for k, m in quantized.items() if k != "ios-bench"}}
    ref = ours.run(x)
    say(f"{graph.name}: ONNX Runtime int8, {threads} threads")
    samples = interleaved(cells, x, rounds, warmup, repeat)
    for k in cells:
        if k != "ios-bench":
            err = float(np.max(np.abs(cells[k].run(x) - ref)) / (np.max(np.abs(ref)) or 1.0))
            say("  " + ratio_line("ios-bench", samples["ios-bench"], k, samples[k])
                + f"; output {err:.2e} from ios-bench's (max, relative to its largest)")
    for k, m in quantized.items():
        say(f"  {k} model: {qdq_summary(m)}; ONNX Runtime runs: "
            f"{dict(sorted(optimized_ops(m.SerializeToString(), options).items()))}")
    say(f"  ios-bench's cell as recorded: integer kernels {ours.info.get('integer_kernels')}, "
        f"float ops left {ours.info.get('float_ops')}")


BENCHMARK_APP_MEDIAN = re.compile(r"Median:\s+([0-9.]+)\s*ms")


def benchmark_app(onnx_path: Path, threads: int, precision: str, seconds: int) -> float:
    """OpenVINO's ``benchmark_app`` on ``onnx_path``: its median latency (ms)."""
    exe = Path(sys.executable).with_name("benchmark_app")
    # -nthreads needs -hint none (benchmark_app's rule); one stream, synchronous: the latency hint's setting
    cmd = [str(exe), "-m", str(onnx_path), "-d", "CPU", "-hint", "none", "-nstreams", "1", "-nthreads", str(threads),
           "-infer_precision", precision, "-api", "sync", "-t", str(seconds)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found = BENCHMARK_APP_MEDIAN.findall(out)
    if not found:
        raise RuntimeError(f"benchmark_app printed no median latency: {out[-400:]}")
    return float(found[-1])


def compare_openvino(graph, threads: int, rounds: int, warmup: int, repeat: int, seconds: int, say=print) -> None:
    import onnx

    import adapters
    from ios_bench.running.task_cell import time_compiled
    from ios_core.inputs import random_input
    from ios_core.lowering.onnx import export

    x = random_input(graph, 1)
    ov = adapters.get("openvino")
    with tempfile.TemporaryDirectory(prefix="ios-bench-own-ov-") as tmp:
        path = Path(tmp) / f"{graph.name}.onnx"
        onnx.save(export(graph, 1), str(path))
        for precision, hint in (("fp32", "f32"), ("bf16", "bf16")):
            cell = ov.build(graph, 1, "cpu", threads, precision=precision)
            ran = cell.info.get("precision")
            prepared = cell.prepare(x)
            ours, theirs = [], []
            for i in range(rounds):
                steps = ("ours", "theirs") if i % 2 == 0 else ("theirs", "ours")
                for step in steps:
                    if step == "ours":
                        ours.append(time_compiled(cell, prepared, "cpu", warmup=warmup, number=1,
                                                  repeat=repeat).median)
                    else:
                        theirs.append(benchmark_app(path, threads, hint, seconds))
            from ios_core.measurement import stats

            a, b = stats.median(ours), stats.median(theirs)
            say(f"{graph.name}: OpenVINO asked for {precision} (ios-bench's cell computes in {ran}), "
                f"{threads} threads: ios-bench {a:.3f} ms [{min(ours):.3f}-{max(ours):.3f}], "
                f"benchmark_app -infer_precision {hint} {b:.3f} ms [{min(theirs):.3f}-{max(theirs):.3f}]: "
                f"{a / b:.3f}x ({rounds} alternating runs each)")


def main(argv=None) -> int:
    p = script_parser(__doc__)
    p.add_argument("--models", default="squeezenet,resnet50")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--seconds", type=int, default=5, help="benchmark_app's -t per run")
    p.add_argument("--what", default="ort,openvino", help="comma list of ort, openvino")
    args = p.parse_args(argv)
    what = [w.strip() for w in args.what.split(",") if w.strip()]
    if not what or set(what) - {"ort", "openvino"}:
        p.error(f"--what {args.what}: a comma list of ort, openvino")
    if min(args.threads, args.rounds, args.repeat, args.seconds) < 1 or args.warmup < 0:
        p.error("--threads, --rounds, --repeat and --seconds must be at least 1, --warmup at least 0")
    from ios_core import models

    try:
        graphs = [models.get(m.strip()) for m in args.models.split(",") if m.strip()]
    except models.UnknownModel as e:
        p.error(f"--models: {e}")
    for g in graphs:
        g.init_weights(0)
        if "ort" in what:
            compare_ort(g, args.threads, args.rounds, args.warmup, args.repeat)
        if "openvino" in what:
            compare_openvino(g, args.threads, args.rounds, args.warmup, args.repeat, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
