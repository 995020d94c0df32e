"""OpenVINO adapter on the exported ONNX model: CPU plugin, latency performance hint.

Precision is forced to float32 (``INFERENCE_PRECISION_HINT=f32``): on CPUs with AVX512_BF16
or AMX the CPU plugin otherwise silently computes in bf16. The precision the compiled model
reports is read back and recorded (``info["inference_precision"]``) so a result never
claims f32 it did not get; the harness checks every output at the tolerance of the precision
it asked for (``ios_core.check.tolerance_for``), so an engine that ignores the request fails.
Threads: ``INFERENCE_NUM_THREADS`` = the thread budget (the CPU plugin's one pool, shared by its streams;
``info["thread_pools"]`` reads both back).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from ios_core.lowering.onnx import DEFAULT_OPSET, export
from ios_core.measurement.threads import pool_record, resolve_threads
from ios_core.quantize import (  # noqa: F401  (runtime_precisions: its home before the IOS providers read it too)
    CALIBRATION_SAMPLES,
    CALIBRATION_STREAM,
    NNCF_SETTINGS,
    build_key,
    calibration_feeds,
    calibration_inputs,
    float_heavy,
    inputs_note,
    integer_convolutions,
    nncf_method,
    nncf_quantize,
    nncf_settings,
    openvino_float_layers,
    runtime_float_precision,
    runtime_precisions,
)

from .base import Adapter, Compiled, OpTime, ProfilerMissing, median_per_name
from .build_cache import open_cache


class OVCompiled(Compiled):
    def __init__(self, compiled_model, info):
        super().__init__(info)
        self.compiled_model = compiled_model
        self.request = compiled_model.create_infer_request()

    def prepare(self, x: np.ndarray):
        return np.ascontiguousarray(x, dtype=np.float32)

    def execute(self, prepared):
        self.request.infer({0: prepared}, share_inputs=True, share_outputs=True)
        return self.request.get_output_tensor(0).data

    def finish(self, out) -> np.ndarray:
        return np.array(out, dtype=np.float32, copy=True)  # the request's buffer is reused next call

    def profile(self, x, warmup=3, repeat=10, trace=None):
        """The infer request's profiling info (build option ``perf_count=True``): each executed
        layer's real time, median over ``repeat`` runs after the timed ones, and its ``exec_type``
        (the kernel it ran: ``jit_avx2_FP32``, ``ref_any_I8``, ...); a layer's sources are the
        original (ONNX) layer names the runtime graph records for it (several when fused).
        ``trace``: none is written (the counters have durations, not timestamps)."""
        import openvino as ov

        from ios_core.measurement.measure import measure

        if not self.info.get("profiling"):
            raise ProfilerMissing("built without PERF_COUNT (build option perf_count=True)")
        prepared = self.prepare(x)
        m = measure(lambda: self.execute(prepared), warmup=warmup, repeat=repeat)
        origin = {op.get_friendly_name(): _original_names(op) for op in
                  self.compiled_model.get_runtime_model().get_ordered_ops()}
        calls: list[dict[str, float]] = []
        kinds: dict[str, str] = {}
        kernels: dict[str, str] = {}
        for _ in range(repeat):
            self.execute(prepared)
            call: dict[str, float] = {}
            for p in self.request.get_profiling_info():
                if p.status != ov.ProfilingInfo.Status.EXECUTED:
                    continue
                call[p.node_name] = call.get(p.node_name, 0.0) + p.real_time.total_seconds() * 1000
                kinds[p.node_name] = p.node_type
                kernels[p.node_name] = p.exec_type
            calls.append(call)
        return [OpTime(name, ms, tuple(origin.get(name) or (name,)), kinds[name], exec_type=kernels[name])
                for name, ms in median_per_name(calls).items()], m

    def in_flight(self, jobs: int):
        """OpenVINO's own way to keep ``jobs`` requests in flight: an ``AsyncInferQueue`` of that
        many infer requests over this compiled model (as ``benchmark_app`` does in throughput mode)."""
        import openvino as ov

        return ov.AsyncInferQueue(self.compiled_model, jobs)


def _original_names(op) -> list[str]:
    """The original layer names a runtime-graph layer computes (``originalLayersNames``)."""
    rt = op.get_rt_info()
    if "originalLayersNames" not in rt:
        return []
    value = rt["originalLayersNames"]
    text = value.astype(str) if hasattr(value, "astype") else str(value)
    return [n.strip() for n in text.split(",") if n.strip()]


_LABELS = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}
_HINTS = {v: k for k, v in _LABELS.items()}  # the sweep's precision -> INFERENCE_PRECISION_HINT


def _prop(compiled_model, key: str):
    """A compiled model's property as plain text ("f32", "LATENCY", "2"), None if unreadable."""
    try:
        value = compiled_model.get_property(key)
    except Exception:
        return None
    if hasattr(value, "to_string"):  # ov.Type -> "f32", "bf16"
        return value.to_string()
    if hasattr(value, "name") and not isinstance(value, str):  # enums such as PerformanceMode
        return str(value.name)
    return str(value)


class OpenVINO(Adapter):
    def precisions(self, device: str = "cpu") -> dict[str, str]:
        """The declared table, int8 refused with the reason where NNCF (its quantizer) is not installed."""
        import importlib.util

        table = super().precisions(device)
        if "int8" in table and importlib.util.find_spec("nncf") is None:
            table["int8"] = "no: NNCF, OpenVINO's quantizer, is not installed (the openvino extra installs it)"
        return table

    def profile_options(self) -> dict:
        return {"perf_count": True}

    def in_flight_options(self, instances: int) -> dict:
        """benchmark_app's throughput mode: the THROUGHPUT hint with one stream per request in flight."""
        return {"performance_hint": "THROUGHPUT", "num_streams": instances}

    def _build(self, graph, batch_size, device, threads, opset=DEFAULT_OPSET, precision="fp32",
               performance_hint="LATENCY", num_streams=None, cache_dir=None, perf_count=False,
               calibration_samples=None, calibration_data=None):
        """``cache_dir``: OpenVINO's model cache (``CACHE_DIR``) kept there across rounds
        (``adapters.build_cache``: checked before the build, rebuilt when foreign). ``precision``: the
        sweep's (fp32, bf16), asked of the CPU plugin as its INFERENCE_PRECISION_HINT (f32 forced for
        fp32) and read back from the compiled model; int8: the model quantized by NNCF (``nncf.quantize``,
        post-training, calibrated on the harness's seeded inputs: :func:`nncf_quantized`), the rest in f32,
        recorded as int8 only where the plugin's runtime model runs its convolutions in u8/i8."""
        import openvino as ov

        int8 = precision == "int8"
        precision = "f32" if int8 else _HINTS.get(precision, precision)

        n = resolve_threads(threads)
        cache = open_cache(cache_dir, "openvino", ov.get_version())
        t0 = time.perf_counter()
        model = export(graph, batch_size, opset=opset)
        export_seconds = time.perf_counter() - t0
        core = ov.Core()
        with tempfile.TemporaryDirectory(prefix="ios-bench-ov-") as tmp:
            path = Path(tmp) / "model.onnx"
            path.write_bytes(model.SerializeToString())
            t1 = time.perf_counter()
            ov_model = core.read_model(str(path))
            calibration = None
            if int8:
                ov_model, calibration = nncf_quantized(ov_model, model, graph, batch_size, calibration_samples,
                                                       cache_dir, calibration_data)
            config = {"PERFORMANCE_HINT": performance_hint, "INFERENCE_PRECISION_HINT": precision,
                      "INFERENCE_NUM_THREADS": str(n)}
            if perf_count:  # ios-bench profile: per-layer counters on every infer request
                config["PERF_COUNT"] = "YES"
            if num_streams is not None:
                config["NUM_STREAMS"] = str(int(num_streams))
            if cache is not None:
                config["CACHE_DIR"] = str(cache.dir)
            compiled_model = core.compile_model(ov_model, "CPU", config)
        if cache is not None:
            cache.seal()
        got = _prop(compiled_model, "INFERENCE_PRECISION_HINT")
        info = {
            "threads": n, "intra_op_threads": _prop(compiled_model, "INFERENCE_NUM_THREADS"),
            "thread_pools": pool_record(
                threads=(_prop(compiled_model, "INFERENCE_NUM_THREADS"), "INFERENCE_NUM_THREADS = the budget, all "
                                                                         "streams together, read back"),
                streams=(_prop(compiled_model, "NUM_STREAMS"), "NUM_STREAMS (the hint's, or as asked), read back")),
            "performance_hint": _prop(compiled_model, "PERFORMANCE_HINT"),
            "num_streams": _prop(compiled_model, "NUM_STREAMS"),
            # the hint, as reported; the precision: what the runtime model's heavy layers run in
            "inference_precision": got, "precision": runtime_float_precision(runtime_precisions(compiled_model)),
            "precision_source": "read back: the runtime precision of the CPU plugin's runtime model's convolutions "
                                "and matrix products (get_runtime_model)",
            "execution_mode": f"{_prop(compiled_model, 'PERFORMANCE_HINT') or performance_hint} hint, "
                              f"{_prop(compiled_model, 'NUM_STREAMS') or '?'} stream(s)",
            "opset": opset, "framework_version": ov.get_version(),
            "export_seconds": export_seconds, "compile_seconds": time.perf_counter() - t1,
        }
        if perf_count:
            info["profiling"] = "PERF_COUNT (per-layer counters)"
        if cache is not None:
            info.update(cache.info())
        if got != precision or info["precision"] != _LABELS.get(precision, precision):
            info["precision_note"] = (f"asked INFERENCE_PRECISION_HINT={precision}, the CPU plugin reports {got}; "
                                      "its runtime model's convolutions and matrix products run in "
                                      f"{info['precision']}")
        if calibration is not None:
            kinds = runtime_precisions(compiled_model)
            convs = integer_convolutions(kinds)
            info.update(calibration=calibration, integer_convolutions=convs,
                        float_ops=float_heavy(openvino_float_layers(kinds)),
                        precision="int8" if convs else runtime_float_precision(kinds))
            if not convs:
                info["precision_note"] = "no convolution of the CPU plugin's runtime model runs in u8/i8"
        return OVCompiled(compiled_model, info)


def nncf_quantized(ov_model, onnx_model, graph, batch_size: int, samples: int | None, cache_dir=None, data=None):
    """``ov_model`` quantized by NNCF's post-training quantization (``nncf.quantize`` with
    ``ios_core.quantize.NNCF_SETTINGS``, recorded from them), calibrated over ``samples`` seeded
    inputs of the harness's generator, the same as onnxruntime's (``ios_core.quantize.calibration_inputs``),
    kept in the build cache (``openvino-int8``) under a key of the model, the calibration and the
    settings; returns (model, calibration)."""
    from importlib.metadata import version

    import openvino as ov

    samples = int(samples or CALIBRATION_SAMPLES)
    settings = nncf_settings(graph)  # a transformer: NNCF's transformer model type
    feeds, note, source = calibration_feeds(graph, batch_size, samples, data)  # the seeded inputs or the folder's
    calib = {"tool": f"nncf.quantize {version('nncf')}", "method": nncf_method(settings),
             "settings": dict(settings), **note}
    cache = open_cache(cache_dir, "openvino-int8", f"{ov.get_version()} nncf {version('nncf')}")
    # the quantizer's settings are in the key: a changed setting never reuses a model quantized otherwise
    key = build_key(onnx_model.SerializeToString(), source, sorted(settings.items()))
    path = cache.dir / f"{key}.xml" if cache is not None else None
    if path is not None and path.is_file():
        return ov.Core().read_model(str(path)), {**calib, "cache": "warm"}
    quantized, _ = nncf_quantize(ov_model, [[x] for x in feeds], settings)
    if path is not None:
        ov.save_model(quantized, str(path))
        cache.seal()
        calib["cache"] = "cold"
    return quantized, calib


OPENVINO = OpenVINO(
    name="openvino",
    description="OpenVINO CPU plugin on the exported ONNX model, latency hint, f32 forced",
    requires=("openvino", "onnx"),
    tolerance=1e-3,
    concurrency="async",
    fp32_how="INFERENCE_PRECISION_HINT=f32, forced (the CPU plugin picks bf16 on AVX512_BF16 CPUs otherwise)",
    precision_table={"cpu": {"bf16": "INFERENCE_PRECISION_HINT=bf16 (benchmark_app -infer_precision bf16)",
                             "int8": "NNCF post-training quantization (nncf.quantize) on 16 seeded inputs, the rest "
                                     "f32; int8 where the plugin runs its convolutions in u8/i8"}},
)
