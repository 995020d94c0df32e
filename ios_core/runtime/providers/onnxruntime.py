"""ONNX Runtime (CPU execution provider) for pieces: one InferenceSession per piece, its
inputs and outputs bound once to the runtime's buffers (IO binding over their memory), so a
call is ``run_with_iobinding`` and nothing else: no feeds dictionary, no output allocation,
no copies."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ios_core.runtime.providers.base import Kernel, Piece, Provider, convolutions, transformer_piece
from ios_core.runtime.providers.onnx_piece import DEFAULT_OPSET, export_piece
from ios_core.runtime.providers.settings import provider_settings


def session_options(threads: int, precision: str = "fp32"):
    """``SessionOptions`` from :func:`provider_settings` (the one place they are stated)."""
    import onnxruntime as ort

    cfg = provider_settings("onnxruntime", threads, precision)
    so = ort.SessionOptions()
    so.intra_op_num_threads = cfg["intra_op_num_threads"]
    so.inter_op_num_threads = cfg["inter_op_num_threads"]
    so.execution_mode = getattr(ort.ExecutionMode, cfg["execution_mode"])
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, cfg["graph_optimization_level"])
    for key, value in cfg.items():
        if key.startswith("session."):
            so.add_session_config_entry(key, value)
    so.log_severity_level = 3  # warnings about unused initializers of tiny pieces are noise
    return so, cfg


class ORTKernel(Kernel):
    def __init__(self, piece: Piece, batch_size: int, session, info: dict):
        super().__init__(piece, batch_size, info)
        self.session = session

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Callable[[], None]:
        self._check(inputs, outputs)
        io = self.session.io_binding()
        for node, a in zip(self.piece.inputs, inputs):
            io.bind_input(node.name, "cpu", 0, np.float32, list(a.shape), a.ctypes.data)
        for node, a in zip(self.piece.outputs, outputs):
            io.bind_output(node.name, "cpu", 0, np.float32, list(a.shape), a.ctypes.data)
        keep = (list(inputs), list(outputs))  # the binding holds raw pointers: keep the arrays alive
        # the C++ session's own method (what InferenceSession.run_with_iobinding calls, one Python
        # frame less); the public method where the private names ever change
        inner, binding = getattr(self.session, "_sess", None), getattr(io, "_iobinding", None)
        if inner is not None and binding is not None and hasattr(inner, "run_with_iobinding"):
            run = inner.run_with_iobinding

            def call():
                run(binding, None)
        else:
            public = self.session.run_with_iobinding

            def call():
                public(io)
        call.keep = keep  # type: ignore[attr-defined]
        call.io_binding = io  # type: ignore[attr-defined]
        return call

    def run_plain(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``InferenceSession.run`` with a feeds dictionary (allocates outputs): for comparing
        the per-call overhead with the bound call."""
        return self.session.run(None, {node.name: a for node, a in zip(self.piece.inputs, inputs)})


def quantized_piece(model, feeds, store=None, transformer: bool | None = None):
    """``model`` quantized by ``ios_core.quantize.ort_quantize`` (MinMax) on ``feeds``, as a transformer's
    piece where ``transformer`` (weights only, pre-processed, 7 bits); with ``store`` (a build cache's
    directory) kept there under ``stored_key`` and reused (``calibration["cache"]``)."""
    import json
    from pathlib import Path

    import onnx

    from ios_core import quantize

    path = None
    if store is not None:
        import onnxruntime as ort

        # every setting quantize_static is given (ORT_SETTINGS, a transformer's ORT_TRANSFORMER too) in the
        # key: a changed setting never reuses a piece quantized otherwise
        if transformer is None:
            transformer = quantize.has_transformer_ops(model)
        settings = quantize.ort_settings(model, transformer)
        key = quantize.stored_key(model, feeds, "minmax", ort.__version__, *sorted(settings.items()))
        path = Path(store) / f"{key}.onnx"
        if path.is_file():
            return onnx.load(str(path)), {**json.loads(path.with_suffix(".json").read_text()), "cache": "warm"}
    out, calib = quantize.ort_quantize(model, feeds, "minmax", transformer=transformer)
    if path is not None:
        onnx.save(out, str(path))
        path.with_suffix(".json").write_text(json.dumps(calib))
        calib = {**calib, "cache": "cold"}
    return out, calib


class OnnxRuntimeProvider(Provider):
    def version(self) -> str | None:
        try:
            import onnxruntime

            return onnxruntime.__version__
        except Exception:
            return None

    def _compile(self, piece, batch_size, threads, random_weights, seed, precision="fp32", calibration=None,
                 store=None):
        """int8: the piece's ONNX model quantized by ``ios_core.quantize.ort_quantize`` (the onnxruntime
        adapter's quantizer: QDQ, MinMax) on ``calibration``; the precision recorded is what ONNX
        Runtime's optimized graph holds (``ios_core.quantize.integer_kernels``): int8 where the piece's
        convolutions became integer kernels."""
        import tempfile
        from pathlib import Path

        import onnxruntime as ort

        t0 = time.perf_counter()
        model = export_piece(piece, batch_size, opset=DEFAULT_OPSET, random_weights=random_weights, seed=seed)
        calib, optimized = None, None
        so, cfg = session_options(threads, precision)
        if precision == "int8":
            # a piece with a general-tensor operator (a transformer's, if only its dense layers) is quantized as one
            model, calib = quantized_piece(model, calibration, store, transformer_piece(piece))
            optimized = Path(tempfile.mkdtemp(prefix="ios-bench-ort-piece-")) / "optimized.onnx"
            so.optimized_model_filepath = str(optimized)  # read back: the kernels ONNX Runtime chose
        t1 = time.perf_counter()
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        info = {**cfg, "export_seconds": t1 - t0, "compile_seconds": time.perf_counter() - t1,
                "precision": "fp32", "convolutions": convolutions(piece)}
        if precision == "int8":
            from ios_core.quantize import float_heavy, integer_kernels

            kernels = integer_kernels(optimized)
            info.update(calibration=calib, integer_kernels=kernels, float_ops=float_heavy(kernels),
                        precision="int8" if kernels["conv"] or not info["convolutions"] else "fp32")
        return ORTKernel(piece, batch_size, session, info)


ONNXRUNTIME = OnnxRuntimeProvider(
    name="onnxruntime", requires=("onnxruntime", "onnx"),
    description="ONNX Runtime CPU execution provider, one session per piece, IO binding",
    precision_table={"int8": "each piece quantized by onnxruntime.quantization.quantize_static (QDQ, u8 activations, "
                             "s8 weights per channel, MinMax) on the activations the 16 seeded calibration inputs "
                             "produce at its inputs in the fp32 graph; int8 where its convolutions became integer "
                             "kernels",
                     "bf16": "no: ONNX Runtime's CPU execution provider has no bf16 convolution kernels"})
