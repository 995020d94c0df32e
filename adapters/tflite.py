"""The ``tflite`` adapter: TensorFlow Lite as a framework of its own (issue 57), fp32 and int8 on the CPU.

Why its own framework: TFLite is another engine than TensorFlow's graph runtime (the ``tensorflow``
adapter): its own interpreter, its own kernels (XNNPACK, its default delegate, and its builtin ones).
When TensorFlow's int8 cell was a TFLite model, its speedup "over its own fp32" compared TFLite int8
with TensorFlow's graph runtime at fp32: an engine change counted as a precision gain. Here both of
this framework's precisions run in the same engine, so its int8 speedup compares one engine with itself;
``tensorflow`` refuses int8 with that reason.

The program: the graph's ``tf.function`` (``adapters.tensorflow.to_function(tflite=True)``, NHWC, the
weights the same as the ``tensorflow`` adapter's) converted by ``tf.lite.TFLiteConverter.from_concrete_functions``

- ``fp32``: without optimizations (float32 weights and activations, what the converter gives by default);
- ``int8``: TensorFlow Lite's full-integer post-training quantization (``ios_core.quantize.tflite_quantize``:
  ``Optimize.DEFAULT``, ``TFLITE_BUILTINS_INT8``, calibrated on the harness's calibration inputs or
  ``--calibration-data``, float input and output kept);

then run by the TFLite interpreter bundled with TensorFlow (:class:`TFLiteCompiled`:
``tf.lite.Interpreter(num_threads=<the cell's thread budget>)``, with its default XNNPACK delegate unless
the build option ``xnnpack=false`` asks for the builtin kernels alone). One function for both precisions:
max pools pad by mirroring the border (int8 has no -inf; exact while a side pads at most half the
window, one line beyond), sums are chains of ``tf.add`` (``tf.add_n`` stays float and outside XNNPACK).
The flatbuffer is a build, kept in the build cache (``tflite``) under a key of the traced function, the
precision and, for int8, the calibration.

What the record says, read back from the interpreter, never assumed: ``engine`` (the interpreter, the
TensorFlow version, whether XNNPACK took nodes and in how many partitions), ``num_threads`` and
``thread_pools`` (the budget given to the interpreter, XNNPACK's pool included), ``integer_kernels``
(``ios_core.quantize.tflite_integer_kernels``) and ``precision``: int8 only where its convolutions take
int8 tensors. A graph with attention (a product of two activations) is refused at int8
(``adapters.tensorflow_tensors.int8_refusal``).
"""

from __future__ import annotations

import time

import numpy as np

from ios_core.ir import Graph
from ios_core.measurement.threads import pool_record, resolve_threads

from . import tensorflow_tensors as laid
from .base import Adapter, Compiled, ProfilerMissing
from .build_cache import open_cache
from .tensorflow import _mirror_pads, _tf, _without_jax, to_function

CACHE = "tflite"  # the build cache's directory (adapters.build_cache)
FLOAT_FORMAT = "TFLite float32: weights and activations float32 (TFLiteConverter without optimizations)"


class TFLiteCompiled(Compiled):
    """A TFLite flatbuffer (float32 or int8 inside, float32 input and output) in its own
    ``tf.lite.Interpreter`` (``num_threads`` = the cell's threads; its default XNNPACK delegate, or
    none with ``xnnpack=False``: ``OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES``). ``prepare``
    transposes the NCHW input to NHWC outside the timed call; ``execute`` is a TFLite user's inference
    call: ``set_tensor``, ``invoke``, ``get_tensor`` (an int8 model quantizes the float input and
    dequantizes the output inside). Not thread-safe: one per program, one program per request in flight."""

    def __init__(self, flatbuffer: bytes, threads: int, info: dict | None = None, nhwc_out: bool = True,
                 xnnpack: bool = True):
        import warnings

        super().__init__(info)
        self.nhwc_out = nhwc_out  # as TFCompiled's
        tf = _tf()
        self.flatbuffer = flatbuffer  # the model it runs (what a test corrupts)
        options = {} if xnnpack else {
            "experimental_op_resolver_type": tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
        with warnings.catch_warnings():  # its notice that LiteRT (ai_edge_litert) succeeds it
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
            self.interpreter = tf.lite.Interpreter(model_content=flatbuffer, num_threads=int(threads), **options)
        self.interpreter.allocate_tensors()
        inputs, outputs = self.interpreter.get_input_details(), self.interpreter.get_output_details()
        if len(inputs) != 1 or len(outputs) != 1:
            raise ValueError(f"the TFLite model has {len(inputs)} inputs and {len(outputs)} outputs, expected 1 and 1")
        if inputs[0]["dtype"] != np.float32 or outputs[0]["dtype"] != np.float32:
            raise ValueError(f"the TFLite model takes {np.dtype(inputs[0]['dtype'])} and gives "
                             f"{np.dtype(outputs[0]['dtype'])}, expected float32 in and out")
        self.input_index, self.output_index = inputs[0]["index"], outputs[0]["index"]

    def prepare(self, x: np.ndarray):
        return np.ascontiguousarray(np.asarray(x, np.float32).transpose(0, 2, 3, 1))

    def execute(self, prepared):
        self.interpreter.set_tensor(self.input_index, prepared)
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self.output_index)

    def finish(self, out) -> np.ndarray:
        out = np.asarray(out, np.float32)
        return np.ascontiguousarray(out.transpose(0, 3, 1, 2) if self.nhwc_out else out)

    def profile(self, x, warmup=3, repeat=10, trace=None):
        raise ProfilerMissing("TFLite's Python interpreter has no per-operator profiler (its op profiling is the "
                              "benchmark_model tool's, --enable_op_profiling)")


def tflite_float(concrete_function, trackable) -> tuple[bytes, dict]:
    """A TensorFlow ``concrete_function`` (fp32) converted to a float32 TFLite flatbuffer as a TFLite user
    converts one: ``TFLiteConverter.from_concrete_functions``, no optimizations, builtin ops only (an op
    without a TFLite kernel fails the conversion rather than running TensorFlow's kernel). Returns (the
    flatbuffer, the conversion as the record keeps it)."""
    tf = _tf()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete_function], trackable)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return bytes(converter.convert()), {
        "tool": f"tf.lite.TFLiteConverter (no optimizations, TFLITE_BUILTINS) {tf.__version__}",
        "format": FLOAT_FORMAT}


def tflite_converted(fn, graph: Graph, batch_size: int, precision: str, samples: int, cache_dir=None,
                     data=None) -> tuple[bytes, dict]:
    """``fn`` (the fp32 ``tf.function``, NHWC) as a TFLite flatbuffer at ``precision``: fp32 converted
    without optimizations (:func:`tflite_float`), int8 quantized by TensorFlow Lite's full-integer
    post-training quantization (``ios_core.quantize.tflite_quantize``) on the calibration inputs
    (``ios_core.quantize.calibration_feeds``: the seeded ones, or the ``data`` folder's; NHWC). Kept in
    the build cache (``tflite``) under a key of the traced function (its graph and every captured
    weight), the precision, the format and for int8 the calibration, and the converter's version: a
    later round loads the same flatbuffer. Returns (flatbuffer bytes, the conversion as the record keeps
    it: for int8 the calibration)."""
    import json

    from ios_core.quantize import (
        TFLITE_FORMAT,
        TFLITE_METHOD,
        TFLITE_SETTINGS,
        build_key,
        calibration_feeds,
        tflite_quantize,
    )

    tf = _tf()
    concrete = fn.get_concrete_function()
    if precision == "int8":
        batches, note, source = calibration_feeds(graph, batch_size, samples, data)  # seeded inputs or the folder's
        feeds = [[np.ascontiguousarray(x.transpose(0, 2, 3, 1))] for x in batches]
        how = (source, TFLITE_FORMAT, TFLITE_METHOD, *sorted(TFLITE_SETTINGS.items()))
    elif precision == "fp32":
        how = (FLOAT_FORMAT,)
    else:
        raise ValueError(f"precision {precision!r}: tflite builds fp32 and int8")
    key = build_key(concrete.graph.as_graph_def().SerializeToString(deterministic=True),
                    *(np.asarray(t.numpy()) for t in concrete.captured_inputs), batch_size, precision, *how)
    cache = open_cache(cache_dir, CACHE, tf.__version__)
    path = cache.dir / f"{key}.tflite" if cache is not None else None
    if path is not None and path.is_file():
        meta = json.loads(path.with_suffix(".json").read_text())
        return path.read_bytes(), {**meta, "cache": "warm"}
    if precision == "int8":
        blob, record = tflite_quantize(concrete, fn, feeds)
        record = {**record, **note}
    else:
        blob, record = tflite_float(concrete, fn)
    if path is not None:
        path.write_bytes(blob)
        path.with_suffix(".json").write_text(json.dumps(record))
        cache.seal()
        record["cache"] = "cold"
    return blob, record


def engine_record(tf, kernels: dict, xnnpack: bool) -> str:
    """What ran the model, read back: the interpreter, TensorFlow's version and whether XNNPACK took
    nodes (its ``DELEGATE`` partitions in the interpreter's node list)."""
    parts = kernels["delegated"]
    if not xnnpack:
        delegate = "XNNPACK off (BUILTIN_WITHOUT_DEFAULT_DELEGATES): builtin kernels only"
    elif parts:
        delegate = f"XNNPACK delegate: {parts} partition{'s' if parts > 1 else ''}, builtin kernels for the rest"
    else:
        delegate = "XNNPACK delegate took no node: builtin kernels only"
    return f"TFLite interpreter (tf.lite.Interpreter, TensorFlow {tf.__version__}); {delegate}"


class TFLite(Adapter):
    def available(self, device: str = "cpu") -> str | None:
        with _without_jax():
            return super().available(device)

    def distribution(self) -> str:
        return "tensorflow"  # TFLite is the interpreter bundled with TensorFlow

    def _build(self, graph, batch_size, device, threads, precision="fp32", cache_dir=None, calibration_samples=None,
               calibration_data=None, xnnpack=True):
        """The graph's ``tf.function`` written for TFLite (``to_function(tflite=True)``) converted at
        ``precision`` (:func:`tflite_converted`, kept in the build cache) and run by a ``tf.lite.Interpreter``
        with the cell's thread budget (:class:`TFLiteCompiled`). ``calibration_samples`` and
        ``calibration_data``: read by int8 builds only (one ``--adapter-option`` serves a sweep of both
        precisions). The precision recorded is read back from the interpreter's nodes
        (``ios_core.quantize.tflite_integer_kernels``): int8 where its convolutions take int8 tensors."""
        from ios_core.quantize import CALIBRATION_SAMPLES, float_heavy, tflite_integer_kernels

        if not isinstance(xnnpack, bool):
            raise ValueError(f"xnnpack={xnnpack!r}: {self.name} takes true or false")
        if precision == "int8":
            refusal = laid.int8_refusal(graph)
            if refusal:
                raise ValueError(refusal)
        for op in graph.operators():  # one line before tracing (an error raised inside a trace grows TF's context)
            if getattr(op, "pool_type", None) == "max" and any(op.pads):
                _mirror_pads(op)
        tf = _tf()
        n = resolve_threads(threads)
        samples = int(calibration_samples or CALIBRATION_SAMPLES)
        t0 = time.perf_counter()
        fn = to_function(graph, batch_size, tflite=True)
        blob, conversion = tflite_converted(fn, graph, batch_size, precision, samples, cache_dir, calibration_data)
        conversion["seconds"] = round(time.perf_counter() - t0, 3)
        t1 = time.perf_counter()
        compiled = TFLiteCompiled(blob, n, nhwc_out=not laid.has_tensors(graph), xnnpack=xnnpack)
        kernels = tflite_integer_kernels(compiled.interpreter)
        compiled.info.update({
            "threads": n, "num_threads": n, "framework_version": tf.__version__,
            "layout": laid.LAYOUT_TENSORS if laid.has_tensors(graph) else "NHWC",
            "thread_pools": pool_record(interpreter=(n, "tf.lite.Interpreter(num_threads=), its one pool, XNNPACK's "
                                                        "too")),
            "engine": engine_record(tf, kernels, xnnpack), "xnnpack": xnnpack,
            "xnnpack_partitions": kernels["delegated"],
            # one execution mode at every precision (the report pairs a framework's cells by it: one engine)
            "execution_mode": self.mode, "model_format": f"TFLite {precision} flatbuffer",
            "interpreter_seconds": time.perf_counter() - t1, "flatbuffer_bytes": len(blob),
            "integer_kernels": kernels, "precision": "int8" if kernels["conv"] else "fp32",
        })
        if precision == "int8":
            compiled.info.update({"calibration": conversion, "float_ops": float_heavy(kernels)})
            if not kernels["conv"]:
                compiled.info["precision_note"] = (f"no convolution of the TFLite model takes int8 tensors "
                                                   f"({kernels['float_conv']} float)")
        else:
            compiled.info["conversion"] = conversion
        return compiled


FP32_CPU = ("TFLiteConverter without optimizations (float32 weights and activations), run by the TFLite "
            "interpreter (XNNPACK's float kernels, its default delegate) with the cell's threads")
INT8_CPU = ("TensorFlow Lite converter, full-integer PTQ (TFLiteConverter, Optimize.DEFAULT, TFLITE_BUILTINS_INT8; "
            "float input/output) calibrated on 16 seeded inputs, run by the TFLite interpreter (XNNPACK/builtin int8 "
            "kernels) with the cell's threads; int8 where its convolutions take int8 tensors")

TFLITE = TFLite(
    name="tflite",
    description="TensorFlow Lite: the tf.function converted to a TFLite flatbuffer, run by tf.lite.Interpreter "
                "(XNNPACK), NHWC",
    requires=("tensorflow",),
    devices=("cpu",),
    tolerance=1e-3,
    options={},
    mode="tf.lite.Interpreter",
    fp32_how=FP32_CPU,
    precision_table={"cpu": {"int8": INT8_CPU}},
)
