"""OpenVINO (CPU plugin) for pieces: one compiled model per piece, float32 forced, one infer
request whose input and output tensors share memory with the runtime's buffers (set once),
so a call is a synchronous infer on the calling thread with nothing to copy."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ios_core.runtime.providers.base import Kernel, Piece, Provider
from ios_core.runtime.providers.onnx_piece import DEFAULT_OPSET, export_piece
from ios_core.runtime.providers.settings import provider_settings


def _prop(compiled_model, key: str):
    try:
        value = compiled_model.get_property(key)
    except Exception:
        return None
    if hasattr(value, "to_string"):  # ov.Type -> "f32"
        return value.to_string()
    if hasattr(value, "name") and not isinstance(value, str):
        return str(value.name)
    return str(value)


_CORE = None
_ONNX_FRONTEND = None


def core():
    """One ``ov.Core`` per process (it owns the plugin and its thread pools)."""
    global _CORE
    if _CORE is None:
        import openvino as ov

        _CORE = ov.Core()
    return _CORE


def read_onnx(model_bytes: bytes):
    """An ``ov.Model`` from ONNX bytes through the ONNX frontend named explicitly:
    ``Core.read_model(bytes)`` guesses the format from the content and refused some valid
    pieces ("Unable to read the model")."""
    global _ONNX_FRONTEND
    import io

    if _ONNX_FRONTEND is None:
        from openvino.frontend import FrontEndManager

        _ONNX_FRONTEND = FrontEndManager().load_by_framework("onnx")
    return _ONNX_FRONTEND.convert(_ONNX_FRONTEND.load(io.BytesIO(model_bytes)))


class OVKernel(Kernel):
    def __init__(self, piece: Piece, batch_size: int, compiled_model, info: dict):
        super().__init__(piece, batch_size, info)
        self.compiled_model = compiled_model

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Callable[[], None]:
        import openvino as ov
        from openvino._pyopenvino import InferRequest

        self._check(inputs, outputs)
        req = self.compiled_model.create_infer_request()
        for i, a in enumerate(inputs):
            req.set_input_tensor(i, ov.Tensor(a, shared_memory=True))
        for i, a in enumerate(outputs):
            req.set_output_tensor(i, ov.Tensor(a, shared_memory=True))
        infer = InferRequest.infer  # the binding itself: no input dispatching, outputs shared
        empty: dict = {}

        def call():
            infer(req, empty, True, False)
        call.keep = (list(inputs), list(outputs), req)  # type: ignore[attr-defined]
        return call


class OpenVINOProvider(Provider):
    def version(self) -> str | None:
        try:
            import openvino as ov

            return ov.get_version()
        except Exception:
            return None

    def _compile(self, piece, batch_size, threads, random_weights, seed):
        t0 = time.perf_counter()
        model = export_piece(piece, batch_size, opset=DEFAULT_OPSET, random_weights=random_weights, seed=seed)
        t1 = time.perf_counter()
        cfg = provider_settings("openvino", threads)
        c = core()
        compiled = c.compile_model(read_onnx(model.SerializeToString()), "CPU", cfg)
        got = _prop(compiled, "INFERENCE_PRECISION_HINT")
        if got != "f32":
            raise RuntimeError(f"openvino compiled piece {piece.name!r} in {got}, not f32")
        info = {**cfg, "inference_precision": got, "intra_op_threads": _prop(compiled, "INFERENCE_NUM_THREADS"),
                "export_seconds": t1 - t0, "compile_seconds": time.perf_counter() - t1}
        return OVKernel(piece, batch_size, compiled, info)


OPENVINO = OpenVINOProvider(name="openvino", requires=("openvino", "onnx"),
                            description="OpenVINO CPU plugin, f32 forced, one compiled model per piece, shared tensors")
