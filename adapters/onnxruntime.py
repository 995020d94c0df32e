"""ONNX Runtime adapters on the exported ONNX model (``ios_core.lowering.onnx``), CPU provider:

- ``onnxruntime``: ``ORT_SEQUENTIAL``, operators one after another, each using the
  intra-op thread pool;
- ``onnxruntime-parallel``: ``ORT_PARALLEL``, ONNX Runtime's own inter-operator
  parallelism (independent branches run concurrently on the inter-op pool), the closest
  peer to IOS on CPU.

Both use all graph optimizations (``ORT_ENABLE_ALL``) and stay inside the one thread budget
``n`` (``ios_core.measurement.threads.resolve_threads``): sequential mode has ``n`` intra-op threads;
parallel mode has ``inter_op_threads`` (default ``n``) inter-op threads with
``n // inter_op_threads`` intra-op threads each, so the two pools together never hold more than
``n`` threads (ONNX Runtime's default would add an inter-op pool the size of the machine on top).
``onnxruntime`` on ``device="cuda"``: the CUDA execution provider (the ``onnxruntime-gpu``
build) with ``use_tf32=0`` (fp32 strict, recorded as ``info["tf32"]``) and exhaustive cuDNN
algorithm search; input and output stay on the GPU through I/O binding (the input is copied
there outside the timed call). A session whose first provider is not CUDA (ONNX Runtime falls
back silently) is refused. Written against ONNX Runtime's documented API; not run on a GPU in
this project.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from ios_core.lowering.onnx import DEFAULT_OPSET, export
from ios_core.measurement.threads import ort_session_config, policy_name, pool_record, resolve_threads, split_budget
from ios_core.quantize import (  # noqa: F401  (their home before the IOS providers quantized too)
    CALIBRATION_SAMPLES,
    CALIBRATION_STREAM,
    FLOAT_RULE,
    ORT_SETTINGS,
    build_key,
    calibration_feeds,
    calibration_inputs,
    float_heavy,
    float_nodes,
    has_transformer_ops,
    inputs_note,
    integer_kernels,
    ort_quantize,
    ort_settings,
)

from .base import Adapter, Compiled, OpTime, ProfilerMissing, median_per_name, per_call_ms


class ORTCompiled(Compiled):
    def __init__(self, session, info):
        super().__init__(info)
        self.session = session
        self._new_session = None  # a profiling build: makes a fresh profiling session (``profile``)
        self._profiled = False
        self.input_name = session.get_inputs()[0].name
        self.output_names = [session.get_outputs()[0].name]

    def prepare(self, x: np.ndarray):
        return {self.input_name: np.ascontiguousarray(x, dtype=np.float32)}

    def execute(self, prepared):
        return self.session.run(self.output_names, prepared)[0]

    def profile(self, x, warmup=3, repeat=10, trace=None):
        """ONNX Runtime's session profiling (build option ``profile=True``): the node kernel
        times of the ``repeat`` timed runs (median per node); fused nodes keep a member's name.
        ``trace``: a path where ONNX Runtime's own JSON profile (Chrome trace events) is kept, written
        atomically; else it is deleted. ONNX Runtime ends a session's profiling when its file is
        written: a second call profiles a fresh session of the same model and options."""
        from ios_core.atomic import atomic_write_bytes
        from ios_core.measurement.measure import measure

        if not self.info.get("profiling"):
            raise ProfilerMissing("built without session profiling (build option profile=True)")
        if self._profiled:
            self.session = self._new_session()
        self._profiled = True
        prepared = self.prepare(x)
        m = measure(lambda: self.execute(prepared), warmup=warmup, repeat=repeat, sync=self.sync)
        path = Path(self.session.end_profiling())
        try:
            data = path.read_bytes()
            if trace is not None:
                atomic_write_bytes(trace, data)
            events = json.loads(data)
        finally:
            path.unlink(missing_ok=True)
        return ort_rows(events, repeat), m


def ort_rows(events: list[dict], runs: int) -> list[OpTime]:
    """Per node, the median kernel time (ms) over the last ``runs`` ``model_run`` windows of an
    ONNX Runtime profile (its JSON trace events)."""
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                     if e.get("cat") == "Session" and e.get("name") == "model_run")[-runs:]
    if not windows:
        raise ProfilerMissing("ONNX Runtime's profile holds no model_run")
    kinds: dict[str, str] = {}
    suffix = "_kernel_time"
    spans = []
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith(suffix):
            continue
        name = e["name"][:-len(suffix)]
        spans.append((name, e["ts"], e["ts"] + e["dur"]))
        kinds[name] = (e.get("args") or {}).get("op_name", "")
    calls = per_call_ms(windows, spans, 1e3)  # a node's time counted once (us)
    return [OpTime(name, ms, (name,), kinds[name]) for name, ms in median_per_name(calls).items()]


CUDA_PROVIDER = "CUDAExecutionProvider"
CUDA_OPTIONS = {"use_tf32": "0", "cudnn_conv_algo_search": "EXHAUSTIVE", "do_copy_in_default_stream": "1"}


class ORTCudaCompiled(Compiled):
    """I/O binding on the GPU: ``prepare`` places the input there, ``execute`` runs the bound
    session (ONNX Runtime returns once its stream is done), ``finish`` copies the output back."""

    def __init__(self, session, info):
        import onnxruntime as ort

        super().__init__(info)
        self.ort = ort
        self.session = session
        self.input_name = session.get_inputs()[0].name
        self.output_name = session.get_outputs()[0].name
        self.binding = session.io_binding()

    def prepare(self, x: np.ndarray):
        value = self.ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x, dtype=np.float32), "cuda", 0)
        self.binding.bind_ortvalue_input(self.input_name, value)
        self.binding.bind_output(self.output_name, "cuda", 0)
        self.binding.synchronize_inputs()
        return value

    def execute(self, prepared):
        self.session.run_with_iobinding(self.binding)
        return self.binding

    def finish(self, out) -> np.ndarray:
        return out.copy_outputs_to_cpu()[0]

    def sync(self) -> None:
        self.binding.synchronize_outputs()


class OnnxRuntime(Adapter):
    def profile_options(self) -> dict:
        return {"profile": True}

    def available(self, device: str = "cpu") -> str | None:
        reason = super().available(device)
        if reason is None and device.startswith("cuda"):
            import onnxruntime as ort

            if CUDA_PROVIDER not in ort.get_available_providers():
                reason = (f"onnxruntime {ort.__version__} has no {CUDA_PROVIDER} (the onnxruntime-gpu build is not "
                          "installed)")
        return reason

    def _build(self, graph, batch_size, device, threads, inter_op_threads=None, execution_mode="sequential",
               opset=DEFAULT_OPSET, optimization="all", profile=False, precision="fp32",
               calibration_samples=CALIBRATION_SAMPLES, calibration_method="minmax", cache_dir=None,
               calibration_data=None):
        """``precision="int8"``: the exported model quantized with ``onnxruntime.quantization.quantize_static``
        (QDQ, activations u8, weights s8 per channel), calibrated on ``calibration_samples`` seeded inputs
        (:func:`calibration_inputs`), or on the samples of ``calibration_data`` (a ``--calibration-data``
        folder, ``ios_core.quantize.calibration_feeds``), with ``calibration_method`` (minmax, entropy,
        percentile); the quantized model is kept in the build cache (``cache_dir``) under a key of the
        model, the calibration and the quantizer's settings.
        The precision recorded is what ONNX Runtime's optimized graph holds: int8 only where its
        convolutions became integer kernels (QLinearConv, ConvInteger)."""
        import onnxruntime as ort

        n = resolve_threads(threads)
        t0 = time.perf_counter()
        model = export(graph, batch_size, opset=opset)
        export_seconds = time.perf_counter() - t0
        calibration = None
        if precision == "int8":
            t_q = time.perf_counter()
            model, calibration = quantized(model, graph, batch_size, int(calibration_samples), calibration_method,
                                           cache_dir, calibration_data)
            calibration["seconds"] = round(time.perf_counter() - t_q, 3)
        so = ort.SessionOptions()
        # parallel mode: inter-op threads run independent nodes (default: one per thread of the budget)
        _, inter, intra = split_budget(n, inter_op_threads if execution_mode == "parallel" else 1,
                                       default_inter=n)
        so.intra_op_num_threads = intra
        so.inter_op_num_threads = inter
        spin = ort_session_config()  # the run's one spin/wait policy (ios_core.measurement.threads)
        for key, value in spin.items():
            so.add_session_config_entry(key, value)
        if profile:  # ios-bench profile: the per-node JSON trace, in a folder of its own
            so.enable_profiling = True
            so.profile_file_prefix = str(Path(tempfile.mkdtemp(prefix="ios-bench-ort-profile-")) / "ort")
        so.execution_mode = {"sequential": ort.ExecutionMode.ORT_SEQUENTIAL,
                             "parallel": ort.ExecutionMode.ORT_PARALLEL}[execution_mode]
        so.graph_optimization_level = {
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }[optimization]
        t1 = time.perf_counter()
        cuda = device.startswith("cuda")
        providers = ([(CUDA_PROVIDER, {**CUDA_OPTIONS, "device_id": str(_device_id(device))}), "CPUExecutionProvider"]
                     if cuda else ["CPUExecutionProvider"])
        optimized = None
        if calibration is not None:  # the graph ONNX Runtime runs, read back for the kernels it chose
            optimized = Path(tempfile.mkdtemp(prefix="ios-bench-ort-int8-")) / "optimized.onnx"
            so.optimized_model_filepath = str(optimized)
            so.log_severity_level = 3  # its note that an optimized model holds this machine's layouts: known
        session = ort.InferenceSession(model.SerializeToString(), so, providers=providers)
        if cuda and session.get_providers()[0] != CUDA_PROVIDER:
            raise RuntimeError(f"ONNX Runtime did not enable {CUDA_PROVIDER} (providers: {session.get_providers()})")
        info = {
            "threads": n, "intra_op_threads": intra, "inter_op_threads": inter,
            "thread_pools": pool_record(intra_op=(intra, "SessionOptions.intra_op_num_threads"),
                                        inter_op=(inter if execution_mode == "parallel" else "unused",
                                                  "SessionOptions.inter_op_num_threads, ORT_PARALLEL only")),
            "execution_mode": f"ORT_{execution_mode.upper()}", "graph_optimization": optimization,
            "spin_policy": policy_name(), "spin_config": spin or "library default",
            "providers": session.get_providers(), "opset": opset, "framework_version": ort.__version__,
            "export_seconds": export_seconds, "session_seconds": time.perf_counter() - t1,
        }
        if profile:
            info["profiling"] = "session profiling (per-node JSON trace)"
        if calibration is not None:
            kernels = integer_kernels(optimized)
            info.update(calibration=calibration, integer_kernels=kernels, float_ops=float_heavy(kernels),
                        precision="int8" if kernels.get("conv", 0) else "fp32")
            if not kernels.get("conv", 0):
                info["precision_note"] = "no convolution of ONNX Runtime's optimized graph is an integer kernel"
        if cuda:
            info.update(tf32=False, cuda_provider_options=dict(CUDA_OPTIONS))
            return ORTCudaCompiled(session, info)
        compiled = ORTCompiled(session, info)
        if profile:  # each further profiled block: a fresh session (ONNX Runtime profiles a session once)
            data = model.SerializeToString()
            so.optimized_model_filepath = ""  # read back once, at the build (its folder is gone)
            compiled._new_session = lambda: ort.InferenceSession(data, so, providers=providers)
        return compiled


def quantize(model, graph, batch_size: int, samples: int = CALIBRATION_SAMPLES, method: str = "minmax", data=None):
    """``model`` (fp32 ONNX) quantized by ``onnxruntime.quantization.quantize_static`` to QDQ int8
    (``ios_core.quantize.ort_quantize``: activations QUInt8, weights QInt8 per channel), calibrated on
    ``ios_core.quantize.calibration_feeds`` (the seeded inputs, or the folder ``data``); returns
    (quantized ModelProto, the calibration as the record keeps it)."""
    feeds, note, _ = calibration_feeds(graph, batch_size, samples, data)
    out, calib = ort_quantize(model, [[x] for x in feeds], method)
    return out, {**calib, **note}


def quantized(model, graph, batch_size: int, samples: int, method: str, cache_dir=None, data=None):
    """:func:`quantize`, kept in the build cache (``adapters.build_cache``, ``onnxruntime-int8``) under
    a key of the fp32 model, the calibration (seeded stream or the folder's digest) and the quantizer's
    settings (``ORT_SETTINGS``, a transformer's ``ORT_TRANSFORMER`` too: ``ort_settings``): a later round
    loads the same quantized model, a changed setting never does."""
    import onnx
    import onnxruntime as ort

    from .build_cache import open_cache

    cache = open_cache(cache_dir, "onnxruntime-int8", ort.__version__)
    feeds, note, source = calibration_feeds(graph, batch_size, samples, data)
    path = None
    if cache is not None:  # the float nodes follow from the model; the rule that chose them is in the key
        key = build_key(model.SerializeToString(), method, source, sorted(ort_settings(model).items()),
                        *((FLOAT_RULE,) if has_transformer_ops(model) else ()))  # a CNN's key as before
        path = cache.dir / f"{key}.onnx"
    if path is not None and path.is_file():
        meta = json.loads(path.with_suffix(".json").read_text())
        return onnx.load(str(path)), {**meta, "cache": "warm"}
    out, calib = ort_quantize(model, [[x] for x in feeds], method)
    calib = {**calib, **note}
    if path is not None:
        onnx.save(out, str(path))
        path.with_suffix(".json").write_text(json.dumps(calib))
        cache.seal()
        calib = {**calib, "cache": "cold"}
    return out, calib


def _device_id(device: str) -> int:
    return int(device.split(":")[1]) if ":" in device else 0


INT8_HOW = (f"onnxruntime.quantization.quantize_static: QDQ (u8 activations, s8 weights per channel), MinMax "
            f"calibration on {CALIBRATION_SAMPLES} seeded inputs; a transformer by its weights only, in 7 bits "
            "(reduce_range); int8 where the optimized graph has integer convolutions")
BF16_NO = "no: ONNX Runtime's CPU execution provider has no bf16 convolution kernels (an fp32 run would be mislabelled)"
FP16_NOT_YET = "not yet: an fp16 model (onnxconverter_common float16) on the CUDA provider is not built"

SEQUENTIAL = OnnxRuntime(
    name="onnxruntime",
    description="ONNX Runtime on the exported ONNX model, ORT_SEQUENTIAL (CPU provider; CUDA provider on cuda)",
    requires=("onnxruntime", "onnx"),
    devices=("cpu", "cuda"),
    tolerance=1e-3,
    options={"execution_mode": "sequential"},
    mode="ORT_SEQUENTIAL",
    # several run calls in flight on one session (InferenceSession.run is thread-safe), its
    # intra-op pool sized to each caller's share of the thread budget
    concurrency="shared",
    precision_table={"cpu": {"int8": INT8_HOW, "bf16": BF16_NO}, "cuda": {"fp16": FP16_NOT_YET}},
)

PARALLEL = OnnxRuntime(
    name="onnxruntime-parallel",
    description="ONNX Runtime with ORT_PARALLEL: its own inter-operator parallelism",
    requires=("onnxruntime", "onnx"),
    tolerance=1e-3,
    options={"execution_mode": "parallel"},
    mode="ORT_PARALLEL",
    concurrency="shared",
    precision_table={"cpu": {"int8": INT8_HOW, "bf16": BF16_NO}},
)
