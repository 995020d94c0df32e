"""OpenVINO (CPU plugin) for pieces: one compiled model per piece, float32 forced, one infer
request whose input and output tensors share memory with the runtime's buffers (set once),
so a call is a synchronous infer on the calling thread with nothing to copy."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ios_core.runtime.providers.base import Kernel, Piece, Provider, convolutions, transformer_piece
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


def quantized_piece(ov_model, onnx_model, feeds, store=None, transformer: bool | None = None):
    """``ov_model`` quantized by ``ios_core.quantize.nncf_quantize`` on ``feeds`` (a transformer's piece:
    ``transformer``, or where not given one with a transformer's operators, with NNCF's transformer settings:
    ``nncf_model_settings``); with ``store`` (a build cache's directory) kept there (OpenVINO IR) under
    ``stored_key`` of the fp32 ONNX piece and reused."""
    import json
    from pathlib import Path

    from ios_core import quantize

    path = None
    chosen = quantize.nncf_model_settings(onnx_model, transformer)  # a transformer's piece: NNCF_TRANSFORMER
    if store is not None:
        import openvino as ov

        settings = sorted(chosen.items())  # a changed setting never reuses a piece quantized otherwise
        path = Path(store) / f"{quantize.stored_key(onnx_model, feeds, 'nncf', ov.get_version(), settings)}.xml"
        if path.is_file():
            return core().read_model(str(path)), {**json.loads(path.with_suffix(".json").read_text()), "cache": "warm"}
    out, calib = quantize.nncf_quantize(ov_model, feeds, chosen)
    if path is not None:
        import openvino as ov

        ov.save_model(out, str(path))
        path.with_suffix(".json").write_text(json.dumps(calib))
        calib = {**calib, "cache": "cold"}
    return out, calib


class OpenVINOProvider(Provider):
    def version(self) -> str | None:
        try:
            import openvino as ov

            return ov.get_version()
        except Exception:
            return None

    def precisions(self) -> dict[str, str]:
        """The declared table, int8 refused with the reason where NNCF (its quantizer) is not installed."""
        import importlib.util

        table = super().precisions()
        if importlib.util.find_spec("nncf") is None:
            table["int8"] = "no: NNCF, OpenVINO's quantizer, is not installed (the openvino extra installs it)"
        return table

    def _compile(self, piece, batch_size, threads, random_weights, seed, precision="fp32", calibration=None,
                 store=None):
        """bf16: the CPU plugin's ``INFERENCE_PRECISION_HINT=bf16``, read back from the compiled piece;
        int8: the piece quantized by NNCF (``ios_core.quantize.nncf_quantize``, the openvino adapter's
        quantizer) on ``calibration``, int8 where the plugin's runtime model runs its convolutions in
        u8/i8 (``ios_core.quantize.integer_convolutions``). The kernel's ``info["precision"]`` is what
        the plugin reports, never the request."""
        t0 = time.perf_counter()
        model = export_piece(piece, batch_size, opset=DEFAULT_OPSET, random_weights=random_weights, seed=seed)
        t1 = time.perf_counter()
        cfg = provider_settings("openvino", threads, precision)
        c = core()
        ov_model = read_onnx(model.SerializeToString())
        calib = None
        if precision == "int8":
            ov_model, calib = quantized_piece(ov_model, model, calibration, store, transformer_piece(piece))
        compiled = c.compile_model(ov_model, "CPU", cfg)
        got = _prop(compiled, "INFERENCE_PRECISION_HINT")
        if precision == "fp32" and got != "f32":
            raise RuntimeError(f"openvino compiled piece {piece.name!r} in {got}, not f32")
        info = {**cfg, "inference_precision": got, "intra_op_threads": _prop(compiled, "INFERENCE_NUM_THREADS"),
                "export_seconds": t1 - t0, "compile_seconds": time.perf_counter() - t1,
                "precision": _LABELS.get(got, str(got)), "convolutions": convolutions(piece)}
        if precision == "int8":
            from ios_core.quantize import float_heavy, integer_convolutions, openvino_float_layers, runtime_precisions

            kinds = runtime_precisions(compiled)
            convs = integer_convolutions(kinds)
            info.update(calibration=calib, integer_convolutions=convs,
                        float_ops=float_heavy(openvino_float_layers(kinds)),
                        precision="int8" if convs or not info["convolutions"] else info["precision"])
        return OVKernel(piece, batch_size, compiled, info)


_LABELS = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}  # INFERENCE_PRECISION_HINT -> the sweep's precision

OPENVINO = OpenVINOProvider(
    name="openvino", requires=("openvino", "onnx"),
    description="OpenVINO CPU plugin, f32 forced, one compiled model per piece, shared tensors",
    precision_table={"bf16": "INFERENCE_PRECISION_HINT=bf16 for each piece, read back from each compiled piece",
                     "int8": "each piece quantized by NNCF (nncf.quantize) on the activations the 16 seeded "
                             "calibration inputs produce at its inputs in the fp32 graph, the rest f32; int8 where "
                             "the plugin runs its convolutions in u8/i8"})
