"""int8 post-training static quantization and the precision an engine reports, in one place: the
ONNX Runtime and OpenVINO adapters (whole models) and the IOS runtime's kernel providers (each
piece of a schedule, ``ios_core.runtime.providers``) quantize with these functions and read back
what the engine computes in with them (docs/precision.md).

- :func:`calibration_inputs`: the harness's seeded inputs (``ios_core.inputs.random_input``, drawn
  from the calibration stream :data:`CALIBRATION_STREAM`) every quantized model is calibrated on,
  never the measured input, whatever ``--seed`` is (disjoint by construction: see the function).
- :func:`ort_quantize`: ``onnxruntime.quantization.quantize_static`` to QDQ (u8 activations, s8
  weights per channel) over given feeds; :func:`integer_kernels` reads ONNX Runtime's optimized
  graph back (its integer convolutions).
- :func:`nncf_quantize`: NNCF's ``nncf.quantize`` (OpenVINO's post-training quantization) over given
  feeds; :func:`runtime_precisions` reads the CPU plugin's runtime model back.
- :func:`torch_quantize`: PyTorch's post-training static quantization in FX graph mode
  (``prepare_fx``/``convert_fx``, ``get_default_qconfig_mapping("x86")``) over given feeds;
  :func:`torch_integer_ops` reads the converted module back (its quantized convolutions).
- :func:`tflite_quantize`: TensorFlow Lite's full-integer post-training quantization of a
  ``tf.function`` (``TFLiteConverter``, ``TFLITE_BUILTINS_INT8``) over given feeds;
  :func:`tflite_integer_kernels` reads the TFLite interpreter's nodes back (its int8 convolutions).

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
CALIBRATION_SEED = 1000  # the root of their stream: batch i from SeedSequence(CALIBRATION_SEED, spawn_key=(i,))
# how the calibration inputs are drawn, as build caches key it (a quantized model is kept per calibration)
CALIBRATION_STREAM = f"numpy SeedSequence({CALIBRATION_SEED}, spawn_key=(i,))"
METHODS = ("minmax", "entropy", "percentile")
ORT_FORMAT = "QDQ, activations u8, weights s8 per channel"
# what ort_quantize passes to quantize_static, from this one dict (and what the build caches key)
ORT_SETTINGS = {"quant_format": "QDQ", "per_channel": True, "activation_type": "QUInt8", "weight_type": "QInt8"}
# and, for a transformer (a model with TRANSFORMER_OPS), as ONNX Runtime's documentation tells its users:
# - pre_process: the model first through onnxruntime.quantization's quant_pre_process (shape inference and ORT's
#   basic optimizations: constant folding), as quantize_static's own log advises. The exporter gives a dense
#   layer's weight as Transpose(initializer); without the folding quantize_static took that for an activation
#   (u8, one scale per tensor, a QuantizeLinear at run time), with it the weight is an initializer, s8 per channel.
# - reduce_range: the weights in 7 bits, its advice for a CPU without VNNI ("may improve the accuracy ... on
#   non-VNNI machines, especially for per-channel mode"). There its u8 x s8 kernels add two products in 16 bits,
#   which saturate on inputs quantized around a mid-range zero point (layer norms' outputs, signed); a CNN's ReLU
#   outputs sit at zero point 0 and do not. On this 2-core AVX2 VM (no VNNI), vit_tiny: 0.447 pre-processed at
#   8 bits, 0.043 for that QDQ model run in float (optimizations off: no integer kernel), 0.045 at 7 bits;
#   squeezenet and resnet18 (no saturation) 0.023 and 0.018 at 8 bits, 0.042 and 0.034 at 7: a CNN keeps
#   ORT_SETTINGS, its model as exported.
ORT_TRANSFORMER = {"pre_process": "quant_pre_process", "reduce_range": True}
ORT_FORMAT_TRANSFORMER = ("QDQ after quant_pre_process, activations u8, weights s8 per channel in 7 bits "
                          "(reduce_range)")


def calibration_inputs(graph, batch_size: int, samples: int = CALIBRATION_SAMPLES,
                       seed: int = CALIBRATION_SEED) -> list[np.ndarray]:
    """The harness's seeded inputs (``ios_core.inputs.random_input``) a quantized model is calibrated
    on: ``samples`` images in batches of the cell's size, batch ``i`` drawn from
    ``SeedSequence(seed, spawn_key=(i,))`` (:func:`calibration_seed`).

    Disjoint from every measured input by construction: a measured input is drawn from an integer
    seed (``random_input(graph, bs, seed=input_seed + k)``), whose generator is seeded with the seed's
    32-bit words alone (at most four below 2**128; the CLI's seeds are below 2**32), while a spawned
    sequence's are its root's words padded to four, then the spawn key: five words that no integer
    seed below 2**128 gives. (Integer seeds ``1000 + i``, as before, were the measured input itself
    under ``--seed 1000``.)"""
    from ios_core.inputs import random_input

    if samples < 1:
        raise ValueError(f"calibration_samples must be >= 1, got {samples}")
    return [random_input(graph, batch_size, seed=calibration_seed(i, seed))
            for i in range(calibration_batches(batch_size, samples))]


def calibration_batches(batch_size: int, samples: int = CALIBRATION_SAMPLES) -> int:
    """Batches of ``batch_size`` the seeded calibration stream draws for ``samples`` samples (at least one)."""
    return max(1, -(-int(samples) // max(1, int(batch_size))))


def calibration_seed(i: int, seed: int = CALIBRATION_SEED) -> np.random.SeedSequence:
    """The seed of calibration batch ``i``: the ``i``-th child of the calibration stream's root."""
    return np.random.SeedSequence(seed, spawn_key=(i,))


def inputs_note(batches: int, seed: int = CALIBRATION_SEED) -> str:
    """How the record names the calibration inputs."""
    return (f"ios_core.inputs.random_input from numpy SeedSequence({seed}, spawn_key=(i,)), i = 0..{batches - 1} "
            "(never a measured input)")


class CalibrationDataError(ValueError):
    """A ``--calibration-data`` folder that cannot calibrate a model (missing, empty, a file that is
    not a float array of the model's input shape): the CLI prints it as one line and exits 2."""


def read_calibration_data(folder, input_shape) -> tuple[np.ndarray, dict]:
    """The samples of a ``--calibration-data`` folder for a model whose input is ``input_shape`` (one
    sample, no batch axis: ``(C, H, W)``): every ``*.npy`` file in it, in name order, each either one
    sample (``input_shape``) or a batch of them (``(n, *input_shape)``, ``n >= 1``), of a float dtype
    (float16/32/64, read as float32). Returns (the samples stacked, ``(N, *input_shape)`` float32; the
    record's note of them: folder, files, samples and a SHA-1 over each file's name and bytes).
    Raises :class:`CalibrationDataError` with a one-line reason otherwise."""
    import hashlib

    root = Path(folder)
    if not root.is_dir():
        raise CalibrationDataError(f"--calibration-data {folder}: not a folder")
    files = sorted(p for p in root.iterdir() if p.suffix == ".npy" and p.is_file())
    if not files:
        raise CalibrationDataError(f"--calibration-data {folder}: no .npy files in it")
    shape = tuple(int(d) for d in input_shape)
    h = hashlib.sha1()
    parts = []
    for f in files:
        raw = f.read_bytes()
        try:
            a = np.load(f, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise CalibrationDataError(f"--calibration-data {f.name}: not a numpy array file "
                                       f"({str(e).splitlines()[0][:120] if str(e) else type(e).__name__})") from None
        if not np.issubdtype(a.dtype, np.floating):
            raise CalibrationDataError(f"--calibration-data {f.name}: dtype {a.dtype}, expected float32 "
                                       "(float16 and float64 are read as float32)")
        if a.shape == shape:
            a = a[None]
        if a.ndim != len(shape) + 1 or a.shape[1:] != shape or a.shape[0] < 1:
            raise CalibrationDataError(f"--calibration-data {f.name}: shape {tuple(a.shape)}, expected one input "
                                       f"{shape} or a batch (N, {', '.join(map(str, shape))})")
        if not np.isfinite(a).all():
            raise CalibrationDataError(f"--calibration-data {f.name}: non-finite values")
        h.update(f"|{f.name}|".encode())
        h.update(raw)
        parts.append(np.asarray(a, np.float32))
    samples = np.ascontiguousarray(np.concatenate(parts))
    return samples, {"folder": str(folder), "files": len(files), "samples": int(samples.shape[0]),
                     "sha1": h.hexdigest()}


def calibration_feeds(graph, batch_size: int, samples: int = CALIBRATION_SAMPLES,
                      data=None) -> tuple[list[np.ndarray], dict, str]:
    """What an int8 build is calibrated on, the one rule for every int8 path: ``data`` (a
    ``--calibration-data`` folder, :func:`read_calibration_data`) when given, all its samples in name
    order grouped into batches of ``batch_size`` (the last one filled from the first samples again;
    ``samples`` is then not used), else :func:`calibration_inputs`. Returns (the batches; the record's
    note: ``samples`` and ``inputs``, plus ``data`` for a folder; the calibration's part of a build
    cache's key: the seeded stream and count, or the folder's digest)."""
    if data is None:
        feeds = calibration_inputs(graph, batch_size, samples)
        return feeds, {"samples": len(feeds) * batch_size, "inputs": inputs_note(len(feeds))}, \
            f"{CALIBRATION_STREAM} x{int(samples)}"
    arr, note = read_calibration_data(data, graph.input_shape)
    n = arr.shape[0]
    batches = -(-n // batch_size)
    idx = np.arange(batches * batch_size) % n
    feeds = [np.ascontiguousarray(arr[idx[i * batch_size:(i + 1) * batch_size]]) for i in range(batches)]
    return feeds, {"samples": n, "inputs": f"--calibration-data: {note['samples']} samples from {note['files']} "
                   f".npy files (sha1 {note['sha1'][:12]})", "data": note}, f"calibration data sha1 {note['sha1']}"


def ort_settings(model, transformer: bool | None = None) -> dict:
    """What :func:`ort_quantize` passes to ``quantize_static`` for ``model`` (an ONNX ModelProto):
    :data:`ORT_SETTINGS`, and for a transformer :data:`ORT_TRANSFORMER` too (``transformer``; where not
    given, whether ``model`` has :data:`TRANSFORMER_OPS`: :func:`has_transformer_ops`)."""
    if transformer is None:
        transformer = has_transformer_ops(model)
    return {**ORT_SETTINGS, **(ORT_TRANSFORMER if transformer else {})}


def pre_processed(model):
    """``model`` (an ONNX ModelProto) through ``onnxruntime.quantization.shape_inference.quant_pre_process``
    (symbolic and ONNX shape inference, ONNX Runtime's basic graph optimizations: constant folding), as
    ONNX Runtime's quantization documentation prepares a model for ``quantize_static``."""
    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory(prefix="ios-bench-quant-pre-") as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "pre.onnx"
        onnx.save(model, str(src))
        quant_pre_process(str(src), str(dst))
        return onnx.load(str(dst))


def ort_quantize(model, feeds: list[list[np.ndarray]], method: str = "minmax", transformer: bool | None = None):
    """``model`` (fp32 ONNX) quantized by ``onnxruntime.quantization.quantize_static`` to QDQ int8
    (activations QUInt8, weights QInt8 per channel; a transformer pre-processed, its weights in 7 bits:
    :func:`ort_settings`),
    calibrated with ``method`` on ``feeds`` (per calibration batch, one array per model input, in the
    model's input order); returns (quantized ModelProto, the calibration as the record keeps it: tool,
    method, format, settings, and what stayed float). A transformer is pre-processed first
    (:func:`pre_processed`) and keeps :func:`float_nodes` of the pre-processed model in float.
    ``transformer``: whether ``model`` is quantized as one (an IOS piece of a transformer without a layer
    norm: the caller knows its graph); where not given, whether it has :data:`TRANSFORMER_OPS`."""
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

    if transformer is None:
        transformer = has_transformer_ops(model)
    settings = ort_settings(model, transformer)
    if settings.get("pre_process"):
        model = pre_processed(model)
    exclude = float_nodes(model, transformer)  # by the model quantized: pre-processing names its nodes anew
    with tempfile.TemporaryDirectory(prefix="ios-bench-quant-") as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(src))
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # quantize_static's advice to pre-process, logged on every build
        try:
            quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat[settings["quant_format"]],
                            per_channel=bool(settings["per_channel"]),
                            activation_type=QuantType[settings["activation_type"]],
                            weight_type=QuantType[settings["weight_type"]],
                            calibrate_method=methods[method],
                            **({"reduce_range": True} if settings.get("reduce_range") else {}),
                            **({"nodes_to_exclude": exclude} if exclude else {}))
        finally:
            root.setLevel(level)
        out = onnx.load(str(dst))
    from importlib.metadata import version

    return out, {"tool": f"onnxruntime.quantization.quantize_static {version('onnxruntime')}", "method": method,
                 "format": ORT_FORMAT_TRANSFORMER if settings.get("reduce_range") else ORT_FORMAT, "settings": settings,
                 **({"kept_float": f"{len(exclude)} nodes: {FLOAT_RULE}"} if exclude else {})}


# A network with a transformer's operators is quantized as tools for transformers do (ONNX Runtime's own
# transformer recipes quantize the MatMuls' weights; NNCF's transformer model type keeps the rest in float):
# only the operators with weights (Conv, Gemm, a MatMul against a weight) are quantized; softmax, the
# normalizations, GELU, products of two activations (attention's scores and their product with the values)
# and every elementwise operator stay in float. Quantizing those too put a one-block ViT's output 53 % off
# (weights only: 2.7 %). A network with none of TRANSFORMER_OPS (every CNN of the zoo) is quantized as before
TRANSFORMER_OPS = ("Softmax", "LayerNormalization", "Erf", "ReduceL2")
WEIGHT_OPS = ("Conv", "Gemm", "MatMul")
FLOAT_RULE = ("a transformer: only Conv, Gemm and MatMul against a weight quantized; softmax, normalizations, GELU, "
              "products of two activations and elementwise operators left in float")


def has_transformer_ops(model) -> bool:
    """Whether ``model`` (an ONNX ModelProto) has any of :data:`TRANSFORMER_OPS`: a transformer, which ONNX
    Runtime's int8 quantizes by its weights (:func:`float_nodes`) in 7 bits (:data:`ORT_TRANSFORMER`)."""
    return any(n.op_type in TRANSFORMER_OPS for n in model.graph.node)


def float_nodes(model, transformer: bool | None = None) -> list[str]:
    """The names of ``model``'s nodes (an ONNX ModelProto) that :func:`ort_quantize` keeps in float: none
    for a network that is no transformer (``transformer``; where not given, one without
    :data:`TRANSFORMER_OPS`); else every node but those of :data:`WEIGHT_OPS` with a weight among their
    inputs (an initializer, or what a Constant, or a Transpose, Reshape or Cast of a weight, gives)."""
    if not (has_transformer_ops(model) if transformer is None else transformer):
        return []
    consts = {i.name for i in model.graph.initializer}
    for n in model.graph.node:  # a weight transposed or reshaped stays a weight
        if n.op_type == "Constant" or (n.op_type in ("Transpose", "Reshape", "Cast")
                                       and n.input and n.input[0] in consts):
            consts.update(n.output)
    return [n.name for n in model.graph.node
            if not (n.op_type in WEIGHT_OPS and any(i in consts for i in n.input))]


def build_key(*parts) -> str:
    """The key a quantized model is kept under in a build cache, the one rule for every quantizer: a
    SHA-1 over ``parts`` in order (bytes as they are, numpy arrays by their bytes, anything else by
    ``|`` and its text), 24 hex digits. The parts: the fp32 model and its weights, the calibration,
    the quantizer's settings."""
    import hashlib

    h = hashlib.sha1()
    for p in parts:
        if isinstance(p, (bytes, bytearray)):
            h.update(p)
        elif isinstance(p, np.ndarray):
            h.update(np.ascontiguousarray(p).tobytes())
        else:
            h.update(f"|{p}".encode())
    return h.hexdigest()[:24]


def stored_key(model, feeds: list[list[np.ndarray]], *parts) -> str:
    """The key a quantized piece is kept under in a build cache (``store``): its fp32 ONNX model
    (operators and weights), its calibration feeds' bytes and the quantizer's settings (:func:`build_key`)."""
    return build_key(model.SerializeToString(), *(np.asarray(a) for arrays in feeds for a in arrays), *parts)


def integer_kernels(optimized_path) -> dict:
    """What ONNX Runtime's optimized graph (``SessionOptions.optimized_model_filepath``) computes in
    integers: the count of integer convolutions (``conv``: QLinearConv, ConvInteger) and of other
    integer kernels (``other``: QLinear*, *Integer, :data:`ORT_INTEGER_OTHER`); the file is removed (and its
    folder, when empty)."""
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
    # QGemm (a quantized Gemm: a dense layer after pre-processing) and MatMulIntegerToFloat are integer too
    other = sum(op.startswith("QLinear") or op in ORT_INTEGER_OTHER or op.endswith("Integer") for op in ops) - conv
    return {"conv": conv, "other": other, "nodes": len(ops),
            "float_conv": sum(op in ORT_FLOAT_CONV for op in ops),
            "float_matmul": sum(op in ORT_FLOAT_MATMUL for op in ops)}


ORT_INTEGER_OTHER = ("QGemm", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QAttention")  # com.microsoft's
ORT_FLOAT_CONV = ("Conv", "FusedConv", "NhwcFusedConv", "ConvTranspose")  # float kernels of ORT's optimized graph
ORT_FLOAT_MATMUL = ("MatMul", "Gemm", "FusedMatMul", "FusedGemm")


def float_heavy(kernels: dict) -> dict:
    """The record's ``float_ops`` of an int8 build: how many convolutions (``conv``) and matrix products
    (``matmul``: MatMul, Gemm, fully connected, linear) stayed in float, from an adapter's read-back
    (``integer_kernels``, ``torch_integer_ops``, ``tflite_integer_kernels``, ``openvino_float_layers``)."""
    return {"conv": int(kernels.get("float_conv", 0)),
            "matmul": int(kernels.get("float_matmul", kernels.get("float_linear", kernels.get("float_dense", 0))))}


# The settings nncf.quantize is called with, passed explicitly (its defaults for a CNN: the preset None
# means PERFORMANCE for every model type but transformers), and recorded from this one dict.
NNCF_SETTINGS = {"preset": "performance", "fast_bias_correction": True, "target_device": "ANY"}
# a transformer (:func:`is_transformer`) is quantized as NNCF's documentation tells its users to: model type
# transformer (its own float rules for softmax, normalizations and attention), whose default preset is mixed,
# and the overflow fix on every layer (AdvancedQuantizationParameters.overflow_fix ENABLE: weights in 7 bits,
# NNCF's remedy for CPUs without VNNI, whose u8 x s8 kernels saturate 16-bit pair sums; its default fixes the
# first layer only). The same saturation as ONNX Runtime's (ORT_TRANSFORMER): on this AVX2 VM vit_tiny 0.183
# -> 0.068, convnext_tiny 0.129 -> 0.066 (SmoothQuant's alpha 0.5 on top: 0.059 and 0.031, not taken: NNCF's
# transformer defaults kept); squeezenet and resnet18 (CNN settings) 0.021 and 0.016 -> 0.049 and 0.038 with
# it: a CNN keeps NNCF_SETTINGS. And its constants folded first (openvino.passes.ConstantFolding, what
# ov.convert_model does too): the ONNX reader leaves a dense layer's weight as Transpose(constant), which NNCF
# quantized as an activation and the CPU plugin then ran 6 of a ViT block's 7 FullyConnected layers in f32.
NNCF_TRANSFORMER = {**NNCF_SETTINGS, "preset": "mixed", "model_type": "transformer", "overflow_fix": "enable",
                    "fold_constants": True}


def nncf_settings(graph) -> dict:
    """The settings ``graph`` is quantized with by NNCF: :data:`NNCF_TRANSFORMER` for a transformer,
    else :data:`NNCF_SETTINGS` (a CNN: as before)."""
    return dict(NNCF_TRANSFORMER if is_transformer(graph) else NNCF_SETTINGS)


def nncf_model_settings(model, transformer: bool | None = None) -> dict:
    """:func:`nncf_settings` for an ONNX model (an IOS piece): :data:`NNCF_TRANSFORMER` for a transformer
    (``transformer``; where not given, whether it has :data:`TRANSFORMER_OPS`), else :data:`NNCF_SETTINGS`."""
    if transformer is None:
        transformer = has_transformer_ops(model)
    return dict(NNCF_TRANSFORMER if transformer else NNCF_SETTINGS)


def nncf_method(settings: dict = NNCF_SETTINGS) -> str:
    """How the record names an NNCF run with ``settings`` (what :func:`nncf_quantize` passes)."""
    modes = {"performance": "symmetric weights and activations", "mixed": "symmetric weights, asymmetric activations"}
    return (f"nncf.quantize post-training: preset {settings['preset']} ({modes[settings['preset']]}), "
            f"fast bias correction {'on' if settings['fast_bias_correction'] else 'off'}, target device "
            f"{settings['target_device']}, NNCF's default range estimators"
            + (f", model type {settings['model_type']}" if settings.get("model_type") else "")
            + (f", overflow fix {settings['overflow_fix']}: weights in 7 bits" if settings.get("overflow_fix") else "")
            + (", constants folded first (openvino.passes.ConstantFolding)" if settings.get("fold_constants") else ""))


def nncf_quantize(ov_model, feeds: list[list[np.ndarray]], settings: dict = NNCF_SETTINGS):
    """``ov_model`` quantized by NNCF's post-training quantization (``nncf.quantize`` with ``settings``,
    passed explicitly: :data:`NNCF_SETTINGS`) over ``feeds`` (per calibration batch, one array per model
    input); returns (model, the calibration as the record keeps it: tool, method, settings)."""
    from importlib.metadata import version

    import nncf

    if not feeds:
        raise ValueError("no calibration feeds")
    items = [arrays[0] if len(arrays) == 1 else list(arrays) for arrays in feeds]
    if settings.get("fold_constants"):
        from openvino import passes

        ov_model = ov_model.clone()
        manager = passes.Manager()
        manager.register_pass(passes.ConstantFolding())
        manager.run_passes(ov_model)
    extra = {}
    if settings.get("overflow_fix"):
        from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix

        extra["advanced_parameters"] = AdvancedQuantizationParameters(
            overflow_fix=OverflowFix(settings["overflow_fix"]))
    quantized = nncf.quantize(ov_model, nncf.Dataset(items), subset_size=len(items),
                              preset=nncf.QuantizationPreset(settings["preset"]),
                              fast_bias_correction=bool(settings["fast_bias_correction"]),
                              target_device=nncf.TargetDevice[settings["target_device"]],
                              **({"model_type": nncf.ModelType[settings["model_type"].upper()]}
                                 if settings.get("model_type") else {}), **extra)
    return quantized, {"tool": f"nncf.quantize {version('nncf')}", "method": nncf_method(settings),
                       "settings": dict(settings)}


def runtime_precisions(compiled_model) -> dict:
    """{(layer type, runtime precision): count} of the OpenVINO CPU plugin's runtime model (what it executes)."""
    out: dict = {}
    for op in compiled_model.get_runtime_model().get_ops():
        rt = op.get_rt_info()
        key = (rt["layerType"].astype(str), rt["runtimePrecision"].astype(str))
        out[key] = out.get(key, 0) + 1
    return out


OV_HEAVY_LAYERS = ("Convolution", "FullyConnected", "MatMul")  # the runtime model's layers that say the precision
_OV_LABELS = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}


def runtime_float_precision(kinds: dict) -> str:
    """What the CPU plugin's runtime model (``kinds``: :func:`runtime_precisions`) runs its convolutions
    and matrix products in: ``fp32``, ``bf16``, ``fp16``, ``mixed (...)`` when they differ, or ``fp32``
    when it has none. The runtime model, not the ``INFERENCE_PRECISION_HINT`` asked for or reported."""
    got = sorted({prec for (kind, prec), n in kinds.items() if kind in OV_HEAVY_LAYERS and n})
    labels = [_OV_LABELS.get(p, p) for p in got]
    if not labels:
        return "fp32"
    return labels[0] if len(labels) == 1 else f"mixed ({', '.join(labels)})"


def openvino_float_layers(kinds: dict) -> dict:
    """``float_conv`` and ``float_matmul``: the CPU plugin's runtime layers (``kinds``:
    :func:`runtime_precisions`) that run a convolution or a matrix product in a float precision."""
    def count(layers):
        return sum(n for (kind, prec), n in kinds.items() if kind in layers and prec not in ("u8", "i8"))

    return {"float_conv": count(("Convolution",)), "float_matmul": count(("FullyConnected", "MatMul"))}


def integer_convolutions(kinds: dict) -> int:
    """How many ``Convolution`` layers of the CPU plugin's runtime model run in u8/i8 (``kinds``:
    :func:`runtime_precisions`)."""
    return sum(n for (kind, prec), n in kinds.items() if kind == "Convolution" and prec in ("u8", "i8"))


TORCH_BACKEND = "x86"  # torch.backends.quantized.engine and its default qconfig: fbgemm/oneDNN (VNNI) kernels
TORCH_FORMAT = "FX graph mode, activations u8 per tensor (reduce_range), weights s8 per channel"
TORCH_METHOD = "HistogramObserver (activations), per-channel MinMax (weights): qconfig x86's defaults"
OBSERVER_PREFIX = "activation_post_process_"  # prepare_fx's names for the observers it inserts


def is_transformer(graph) -> bool:
    """Whether ``graph`` (an IR Graph) has general-tensor operators (tokens, attention, layer norm: issue 56),
    which int8 quantizes by its weights only (:data:`FLOAT_RULE`)."""
    return has_tensor_nodes(graph.nodes())


def has_tensor_nodes(nodes) -> bool:
    """Whether any of ``nodes`` (IR nodes: a graph's, or the operators of an IOS piece) is a general-tensor
    operator (``ios_core.ir.tensor_nodes.TENSOR_TYPES``): a transformer's, quantized as one."""
    from ios_core.ir.tensor_nodes import TENSOR_TYPES

    return any(n.TYPE in TENSOR_TYPES for n in nodes)


def torch_qconfig_mapping(backend: str = TORCH_BACKEND, weights_only: bool = False):
    """The qconfig mapping a PyTorch user quantizes with for ``backend`` (its default); ``weights_only`` (a
    transformer, :data:`FLOAT_RULE`): that default's qconfig for convolutions and linear layers only,
    everything else (layer norm, softmax, matmuls between activations, elementwise operators) in float."""
    from torch.ao.quantization import QConfigMapping, get_default_qconfig_mapping

    default = get_default_qconfig_mapping(backend)
    if not weights_only:
        return default
    import torch.nn as nn

    qconfig = default.global_qconfig
    return QConfigMapping().set_object_type(nn.Conv2d, qconfig).set_object_type(nn.Linear, qconfig)


def torch_qconfig_settings(backend: str = TORCH_BACKEND, weights_only: bool = False) -> str:
    """What :func:`torch_qconfig_mapping` gives, written out (each operator type's observers and their
    arguments; objects' addresses left out): the int8 build cache's key holds it, so a changed setting, or
    a torch whose defaults changed, quantizes again."""
    import re

    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(torch_qconfig_mapping(backend, weights_only).to_dict()))


def torch_quantize(module, feeds: list[list[np.ndarray]], observers: dict | None = None,
                   backend: str = TORCH_BACKEND, weights_only: bool = False):
    """``module`` (an fp32 ``torch.fx.GraphModule`` in eval mode) quantized by PyTorch's post-training
    static quantization in FX graph mode: ``prepare_fx`` with :func:`torch_qconfig_mapping` (observers
    inserted, conv+relu fused), calibration (every batch of ``feeds``, per calibration batch one array
    per model input, run through the observed module), ``convert_fx`` (quantized modules:
    ``quantized::conv2d`` on ``backend``'s kernels). With ``observers`` (the state an earlier calibration
    of the same module and feeds returned) the calibration pass is not run: the observers are loaded
    and the conversion gives the same module. Returns (converted GraphModule, the calibration as the
    record keeps it: tool, method, format, backend; the observers' state, ``{name: tensor}``)."""
    import warnings
    from importlib.metadata import version

    import torch
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    if not feeds:
        raise ValueError("no calibration feeds")
    if backend not in torch.backends.quantized.supported_engines:
        raise ValueError(f"torch {torch.__version__} has no quantized engine {backend!r} "
                         f"(it has {', '.join(torch.backends.quantized.supported_engines)})")
    torch.backends.quantized.engine = backend
    first = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in feeds[0])
    with warnings.catch_warnings():
        # torch.ao.quantization's notice that it moves to torchao (not installed), and HistogramObserver's
        # reduce_range notice: once per build, nothing a run can act on
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*reduce_range will be deprecated.*")
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        prepared = prepare_fx(module, torch_qconfig_mapping(backend, weights_only), first)
        if observers is None:
            with torch.no_grad():
                for arrays in feeds:
                    prepared(*(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays))
            observers = {k: v.detach().clone() for k, v in prepared.state_dict().items()
                         if k.startswith(OBSERVER_PREFIX)}
        else:
            want = {k for k in prepared.state_dict() if k.startswith(OBSERVER_PREFIX)}
            if set(observers) != want:
                raise ValueError(f"the stored observers are not this module's ({len(set(observers) ^ want)} "
                                 "names differ)")
            prepared.load_state_dict(observers, strict=False)
        converted = convert_fx(prepared)
    converted.eval()
    return converted, {"tool": f"torch.ao.quantization.quantize_fx prepare_fx/convert_fx {version('torch')}",
                       "method": TORCH_METHOD, "format": TORCH_FORMAT, "backend": backend,
                       **({"kept_float": FLOAT_RULE} if weights_only else {})}, observers


def torch_integer_ops(module) -> dict:
    """What a converted FX module computes in integers: ``conv``, its quantized convolutions (modules
    of ``torch.ao.nn.quantized``, fused conv+relu included, and ``quantized::conv*`` calls in its
    graph); ``other``, its other quantized modules and ``quantized::`` calls; ``float_conv``, the
    convolutions left in float (``nn.Conv*``, reference modules included); ``float_linear``, the
    ``nn.Linear`` modules left in float."""
    import torch.nn as nn
    from torch.ao.nn.quantized.modules.conv import _ConvNd as QuantizedConv

    conv = other = float_conv = float_linear = 0
    for m in module.modules():
        kind = type(m).__module__
        if isinstance(m, QuantizedConv):
            conv += 1
        elif isinstance(m, nn.modules.conv._ConvNd):
            float_conv += 1
        elif isinstance(m, nn.Linear):  # a float or reference Linear (a quantized Linear is no nn.Linear)
            float_linear += 1
        elif (kind.startswith(("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized"))
              and not type(m).__name__.endswith("PackedParams")):  # a quantized Linear's weights, not a kernel
            other += 1
    import torch.fx

    for n in module.graph.nodes if isinstance(module, torch.fx.GraphModule) else ():
        name = str(n.target) if n.op == "call_function" else ""
        if name.startswith("quantized."):
            if name.startswith("quantized.conv"):
                conv += 1
            else:
                other += 1
    return {"conv": conv, "other": other, "float_conv": float_conv, "float_linear": float_linear}


TFLITE_FORMAT = "TFLite full integer: activations s8 per tensor, weights s8 per channel, float input and output"
# the converter's settings (tflite_quantize sets them from here; the build cache's key holds them)
TFLITE_SETTINGS = {"optimizations": "DEFAULT", "supported_ops": "TFLITE_BUILTINS_INT8",
                   "inference_input_type": "float32", "inference_output_type": "float32"}
TFLITE_METHOD = "min-max ranges over the representative dataset (the TFLite converter's calibration)"
TFLITE_CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CONV_3D")


def tflite_quantize(concrete_function, trackable, feeds: list[list[np.ndarray]]) -> tuple[bytes, dict]:
    """A TensorFlow ``concrete_function`` (fp32, of the ``tf.function`` ``trackable``) quantized by
    TensorFlow Lite's full-integer post-training quantization, as TensorFlow users deploy int8:
    ``TFLiteConverter.from_concrete_functions``, ``optimizations=[Optimize.DEFAULT]``,
    ``representative_dataset`` = ``feeds`` (per calibration batch, one array per input, in the
    function's layout), ``supported_ops=[TFLITE_BUILTINS_INT8]`` (an op with no int8 kernel fails the
    conversion rather than staying float), float input and output kept. TensorFlow must be imported
    already (``adapters.tensorflow``, which keeps JAX out of its import). Returns (the flatbuffer, the
    calibration as the record keeps it: tool, method, format)."""
    import warnings

    import tensorflow as tf

    if not feeds:
        raise ValueError("no calibration feeds")
    settings = dict(TFLITE_SETTINGS)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete_function], trackable)
    converter.optimizations = [getattr(tf.lite.Optimize, settings["optimizations"])]
    converter.representative_dataset = lambda: ([np.ascontiguousarray(a, np.float32) for a in arrays]
                                                for arrays in feeds)
    converter.target_spec.supported_ops = [getattr(tf.lite.OpsSet, settings["supported_ops"])]
    converter.inference_input_type = getattr(tf, settings["inference_input_type"])
    converter.inference_output_type = getattr(tf, settings["inference_output_type"])
    with warnings.catch_warnings():  # its note that a float input has no statistics: the model quantizes it
        warnings.filterwarnings("ignore", message=".*Statistics for quantized inputs.*")
        flatbuffer = converter.convert()
    return bytes(flatbuffer), {
        "tool": f"tf.lite.TFLiteConverter (Optimize.{settings['optimizations']}, {settings['supported_ops']}) "
                f"{tf.__version__}",
        "method": TFLITE_METHOD, "format": TFLITE_FORMAT, "settings": settings}


def tflite_integer_kernels(interpreter) -> dict:
    """What a ``tf.lite.Interpreter`` (tensors allocated) computes in integers, read from its nodes:
    ``conv``, the convolutions (``CONV_2D``, ``DEPTHWISE_CONV_2D``, ...) whose input and filter are int8;
    ``float_conv``, the others; ``other``, the other nodes with an int8 input; ``float_other``, the
    other nodes that compute on a float input (a (de)quantize excepted: the model's float input and
    output pass through one); ``nodes``; ``delegated``, the partitions a delegate (XNNPACK) took (its
    ``DELEGATE`` nodes; the nodes it replaced are still listed with their tensors)."""
    dtypes = {t["index"]: np.dtype(t["dtype"]) for t in interpreter.get_tensor_details()}
    ops = interpreter._get_ops_details()  # the interpreter's node list (no public accessor in tf.lite)
    conv = float_conv = other = float_other = delegated = float_dense = 0
    for op in ops:
        types = [dtypes.get(i) for i in op["inputs"] if i >= 0]
        if op["op_name"] == "DELEGATE":
            delegated += 1
        elif op["op_name"] in TFLITE_CONVS:
            if len(types) >= 2 and types[0] == np.int8 and types[1] == np.int8:
                conv += 1
            else:
                float_conv += 1
        elif np.dtype(np.int8) in types:
            other += 1
        elif np.dtype(np.float32) in types and op["op_name"] not in ("QUANTIZE", "DEQUANTIZE"):
            float_other += 1
            float_dense += op["op_name"] in ("FULLY_CONNECTED", "BATCH_MATMUL")
    return {"conv": conv, "float_conv": float_conv, "other": other, "float_other": float_other,
            "float_dense": float_dense, "nodes": len(ops) - delegated, "delegated": delegated}


__all__ = ["CALIBRATION_SAMPLES", "CALIBRATION_SEED", "CALIBRATION_STREAM", "METHODS", "NNCF_SETTINGS", "ORT_SETTINGS",
           "ORT_TRANSFORMER", "TORCH_BACKEND", "CalibrationDataError", "calibration_feeds", "read_calibration_data",
           "build_key", "calibration_inputs",
           "float_heavy", "has_tensor_nodes", "openvino_float_layers", "calibration_seed", "integer_convolutions",
           "integer_kernels",
           "has_transformer_ops", "inputs_note", "nncf_method", "nncf_model_settings", "nncf_quantize",
           "ort_quantize", "ort_settings",
           "runtime_float_precision", "runtime_precisions", "stored_key",
           "tflite_integer_kernels", "tflite_quantize", "torch_integer_ops", "torch_qconfig_mapping", "torch_quantize"]
