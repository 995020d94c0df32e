"""int8 post-training static quantization and the precision an engine reports, in one place: the
ONNX Runtime and OpenVINO adapters (whole models) and the IOS runtime's kernel providers (each
piece of a schedule, ``ios_core.runtime.providers``) quantize with these functions and read back
what the engine computes in with them (docs/precision.md).

- :func:`calibration_inputs`: the harness's seeded inputs (``ios_core.inputs.random_input``, seeds
  :data:`CALIBRATION_SEED`..) every quantized model is calibrated on, never the measured input.
- :func:`ort_quantize`: ``onnxruntime.quantization.quantize_static`` to QDQ (u8 activations, s8
  weights per channel) over given feeds; :func:`integer_kernels` reads ONNX Runtime's optimized
  graph back (its integer convolutions).
- :func:`nncf_quantize`: NNCF's ``nncf.quantize`` (OpenVINO's post-training quantization) over given
  feeds; :func:`runtime_precisions` reads the CPU plugin's runtime model back.

The feeds are per calibration batch, one array per model input: the network's seeded inputs for a
whole model, and for a piece of a schedule the activations those same inputs produce at the
piece's inputs in the fp32 graph, so a piece is quantized as the whole model is.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

CALIBRATION_SAMPLES = 16  # seeded inputs an int8 model is calibrated on
CALIBRATION_SEED = 1000  # their seeds: CALIBRATION_SEED + i, never the measured input's (input_seed)
METHODS = ("minmax", "entropy", "percentile")
ORT_FORMAT = "QDQ, activations u8, weights s8 per channel"


def calibration_inputs(graph, batch_size: int, samples: int = CALIBRATION_SAMPLES,
                       seed: int = CALIBRATION_SEED) -> list[np.ndarray]:
    """The harness's seeded inputs (``ios_core.inputs.random_input``) a quantized model is calibrated
    on: ``samples`` images in batches of the cell's size."""
    from ios_core.inputs import random_input

    if samples < 1:
        raise ValueError(f"calibration_samples must be >= 1, got {samples}")
    batches = max(1, -(-samples // batch_size))
    return [random_input(graph, batch_size, seed=seed + i) for i in range(batches)]


def inputs_note(batches: int, seed: int = CALIBRATION_SEED) -> str:
    """How the record names the calibration inputs."""
    return f"ios_core.inputs.random_input seeds {seed}..{seed + batches - 1}"


def ort_quantize(model, feeds: list[list[np.ndarray]], method: str = "minmax"):
    """``model`` (fp32 ONNX) quantized by ``onnxruntime.quantization.quantize_static`` to QDQ int8
    (activations QUInt8, weights QInt8 per channel), calibrated with ``method`` on ``feeds`` (per
    calibration batch, one array per model input, in the model's input order); returns (quantized
    ModelProto, the calibration as the record keeps it: tool, method, format)."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    methods = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
               "percentile": CalibrationMethod.Percentile}
    if method not in methods:
        raise ValueError(f"calibration_method {method!r}: choose from {', '.join(methods)}")
    if not feeds:
        raise ValueError("no calibration feeds")
    names = [i.name for i in model.graph.input]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(dict(zip(names, arrays)) for arrays in feeds)

        def get_next(self):
            return next(self.it, None)

    with tempfile.TemporaryDirectory(prefix="ios-bench-quant-") as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(src))
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # quantize_static's advice to pre-process, logged on every build
        try:
            quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method=methods[method])
        finally:
            root.setLevel(level)
        out = onnx.load(str(dst))
    from importlib.metadata import version

    return out, {"tool": f"onnxruntime.quantization.quantize_static {version('onnxruntime')}", "method": method,
                 "format": ORT_FORMAT}


def stored_key(model, feeds: list[list[np.ndarray]], *parts) -> str:
    """The key a quantized piece is kept under in a build cache (``store``): its fp32 ONNX model
    (operators and weights), its calibration feeds' bytes and the quantizer's settings."""
    import hashlib

    h = hashlib.sha1(model.SerializeToString())
    for arrays in feeds:
        for a in arrays:
            h.update(np.ascontiguousarray(a).tobytes())
    h.update("|".join(map(str, parts)).encode())
    return h.hexdigest()[:24]


def integer_kernels(optimized_path) -> dict:
    """What ONNX Runtime's optimized graph (``SessionOptions.optimized_model_filepath``) computes in
    integers: the count of integer convolutions (``conv``: QLinearConv, ConvInteger) and of other
    integer kernels (``other``); the file is removed (and its folder, when empty)."""
    import onnx

    path = Path(optimized_path)
    try:
        ops = [node.op_type for node in onnx.load(str(path)).graph.node]
    finally:
        path.unlink(missing_ok=True)
        try:
            path.parent.rmdir()
        except OSError:
            pass
    conv = sum(op in ("QLinearConv", "ConvInteger") for op in ops)
    other = sum(op.startswith("QLinear") or op.endswith("Integer") for op in ops) - conv
    return {"conv": conv, "other": other, "nodes": len(ops)}


def nncf_quantize(ov_model, feeds: list[list[np.ndarray]]):
    """``ov_model`` quantized by NNCF's post-training quantization (``nncf.quantize``, its default
    mixed preset) over ``feeds`` (per calibration batch, one array per model input); returns
    (model, the calibration as the record keeps it: tool, method)."""
    from importlib.metadata import version

    import nncf

    if not feeds:
        raise ValueError("no calibration feeds")
    items = [arrays[0] if len(arrays) == 1 else list(arrays) for arrays in feeds]
    quantized = nncf.quantize(ov_model, nncf.Dataset(items), subset_size=len(items))
    return quantized, {"tool": f"nncf.quantize {version('nncf')}",
                       "method": "nncf default (min-max ranges, mixed preset)"}


def runtime_precisions(compiled_model) -> dict:
    """{(layer type, runtime precision): count} of the OpenVINO CPU plugin's runtime model (what it executes)."""
    out: dict = {}
    for op in compiled_model.get_runtime_model().get_ops():
        rt = op.get_rt_info()
        key = (rt["layerType"].astype(str), rt["runtimePrecision"].astype(str))
        out[key] = out.get(key, 0) + 1
    return out


def integer_convolutions(compiled_model) -> int:
    """How many ``Convolution`` layers of the CPU plugin's runtime model run in u8/i8."""
    return sum(n for (kind, prec), n in runtime_precisions(compiled_model).items()
               if kind == "Convolution" and prec in ("u8", "i8"))


__all__ = ["CALIBRATION_SAMPLES", "CALIBRATION_SEED", "METHODS", "calibration_inputs", "integer_convolutions",
           "integer_kernels", "inputs_note", "nncf_quantize", "ort_quantize", "runtime_precisions", "stored_key"]
