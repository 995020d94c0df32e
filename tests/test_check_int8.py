"""The int8 output check (``ios_core.check.check_precision``) against the corruptions a quantized model
really suffers, on the model each framework built (issue 57): an activation's scale off by 2x (too
small: the upper half of its calibrated range clipped), a zero point off by 2x, a per-channel weight
scale swapped between two channels, a weight 10x off. Each corruption alters the quantized model itself
(the QDQ initializers of ONNX Runtime's graph, the FakeQuantize ranges and weight scales of NNCF's
OpenVINO model, the converted torch module's quantization parameters, the TFLite flatbuffer's tensor
quantization), then the check over a batch of seeded inputs must refuse it, as a sweep checks an int8 cell:
with the oracle's own int8 simulation of the network (``ios_core.reference.int8_simulation``, calibrated on
the same inputs as the frameworks), whose RMS error bounds the cell's (``ios_core.check``).

Where: the weights' corruptions on the first convolution (every output depends on it); the activation
scale on the last quantized activation (the output's, which every output passes through); the zero
point on the activation whose zero point doubling moves most (a zero point of 0, as symmetric
quantization gives, is the same when doubled: such a model has nothing to corrupt, said by a skip)."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
from ios_core import reference
from ios_core.check import check_precision
from ios_core.inputs import random_input
from ios_core.quantize import calibration_feeds
from tests.adapter_graphs import mini_inception

pytestmark = pytest.mark.filterwarnings("ignore:All inputs of this cat operator:UserWarning")

BATCH = 16  # the arg-max agreement is over a batch of seeded inputs, not one sample
KINDS = ("activation_scale", "zero_point", "swapped_channel_scale", "weight_10x")
FRAMEWORKS = ("onnxruntime", "openvino", "torch", "tflite")


def _swap(scales: np.ndarray) -> np.ndarray:
    """Per-channel scales with the smallest and the largest swapped (the swap that moves most)."""
    s = np.array(scales, copy=True)
    i, j = int(np.argmin(s)), int(np.argmax(s))
    s[[i, j]] = s[[j, i]]
    return s


def _doubled_zero_point(zp: int, lo: int, hi: int) -> int:
    return int(np.clip(2 * int(zp), lo, hi))


# ---- ONNX Runtime: the QDQ graph quantize_static wrote ------------------------------------------------

def ort_corrupt(model, kind: str):
    """A copy of ``model`` (QDQ ONNX) with ``kind`` done to it, or None where it has nothing to corrupt."""
    import onnx
    from onnx import numpy_helper

    bad = onnx.ModelProto()
    bad.CopyFrom(model)
    inits = {i.name: i for i in bad.graph.initializer}
    arr = {n: numpy_helper.to_array(i) for n, i in inits.items()}

    def put(name, value):
        inits[name].CopyFrom(numpy_helper.from_array(np.asarray(value, arr[name].dtype), name))

    nodes = list(bad.graph.node)
    if kind in ("swapped_channel_scale", "weight_10x"):
        conv = next(n for n in nodes if n.op_type == "Conv")
        deq = next(n for n in nodes if n.op_type == "DequantizeLinear" and n.output[0] == conv.input[1])
        s = arr[deq.input[1]]
        put(deq.input[1], _swap(s) if kind == "swapped_channel_scale" else s * 10)
        return bad
    # the last activation's DequantizeLinear (the output's) reads it with its own, corrupted parameter:
    # the Q and DQ of a QDQ pair disagree, as a hand-edited or mis-merged QDQ graph has them
    deq = [n for n in nodes if n.op_type == "DequantizeLinear" and n.input[0] not in inits][-1]
    port = 1 if kind == "activation_scale" else 2
    old = arr[deq.input[port]]
    new = old * 2 if kind == "activation_scale" else np.asarray(_doubled_zero_point(old, 0, 255), old.dtype)
    if np.array_equal(new, old):
        return None
    name = f"{deq.input[port]}_corrupted"
    bad.graph.initializer.append(numpy_helper.from_array(np.asarray(new, old.dtype), name))
    deq.input[port] = name
    return bad


def ort_run(model, x):
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


# ---- OpenVINO: NNCF's quantized model (FakeQuantize on activations, compressed weights) -------------------

def _ov_const(node):
    return node.get_data().copy() if node.get_type_name() == "Constant" else None


def ov_corrupt(ov_model, kind: str):
    """``ov_model`` (NNCF's, in place) with ``kind`` done to it, or None where it has nothing to corrupt."""
    import openvino as ov
    import openvino.opset13 as ops

    def replace(node, port, value):
        node.input(port).replace_source_output(ops.constant(np.asarray(value, np.float32)).output(0))

    ordered = ov_model.get_ordered_ops()
    fqs = [op for op in ordered if op.get_type_name() == "FakeQuantize"
           and _ov_const(op.input_value(0).get_node()) is None]  # on activations
    if kind in ("swapped_channel_scale", "weight_10x"):
        conv = next(op for op in ordered if op.get_type_name() == "Convolution")
        node = conv.input_value(1).get_node()  # weights: i8 Constant -> Convert -> (Subtract) -> Multiply(scale)
        while node.get_type_name() != "Multiply":
            node = node.input_value(0).get_node()
        port = next(i for i in range(2) if _ov_const(node.input_value(i).get_node()) is not None
                    and node.input_value(i).get_node().get_element_type() == ov.Type.f32)
        s = _ov_const(node.input_value(port).get_node())
        flat = s.reshape(-1)
        new = (_swap(flat) if kind == "swapped_channel_scale" else flat * 10).reshape(s.shape)
        replace(node, port, new)
        return ov_model
    if kind == "activation_scale":
        fq = fqs[-1]  # the last activation's: a FakeQuantize is a Q/DQ pair; its dequantizing range read 2x
        for port in (3, 4):
            replace(fq, port, _ov_const(fq.input_value(port).get_node()) * 2)
        return ov_model
    # the last activation's zero point, in levels: -output_low / step, less 128 where the range holds
    # negatives (i8); 0 where the range is symmetric about 0 or starts at 0 (NNCF's performance preset)
    fq = fqs[-1]
    lo, hi = (_ov_const(fq.input_value(p).get_node()) for p in (3, 4))
    levels = fq.get_levels()
    step = (hi - lo) / (levels - 1)
    zp = np.round(-lo / step) - (levels // 2 if np.any(lo < 0) else 0)
    if not np.any(zp):
        return None
    shift = zp * step  # zero point doubled: every dequantized value moves down by zp * step
    for port in (3, 4):
        replace(fq, port, _ov_const(fq.input_value(port).get_node()) - shift)
    return ov_model


# ---- torch: the converted FX module (quantized modules carry their output's scale and zero point) -----------

def torch_corrupt(module, kind: str):
    """``module`` (a converted FX module, in place) with ``kind`` done to it, or None."""
    import torch
    from torch.ao.nn.quantized.modules.conv import _ConvNd

    convs = [m for m in module.modules() if isinstance(m, _ConvNd)]
    if kind in ("swapped_channel_scale", "weight_10x"):
        conv = convs[0]
        w = conv.weight()
        s = w.q_per_channel_scales()
        new = torch.from_numpy(_swap(s.numpy())) if kind == "swapped_channel_scale" else s * 10
        conv.set_weight_bias(torch._make_per_channel_quantized_tensor(
            w.int_repr(), new.to(s.dtype), w.q_per_channel_zero_points(), w.q_per_channel_axis()), conv.bias())
        return module
    quantized = [m for m in module.modules() if hasattr(m, "scale") and hasattr(m, "zero_point")
                 and not isinstance(m.scale, torch.nn.Module)]
    if kind == "activation_scale":
        last = quantized[-1]
        last.scale = float(last.scale) * 0.5
        return module
    return None  # a torch quantized tensor carries its own zero point (NOT_CORRUPTIBLE)


# ---- TFLite: the flatbuffer (each tensor carries its quantization) -----------------------------------------

def tflite_corrupt(flatbuffer: bytes, kind: str):
    """The flatbuffer with ``kind`` done to it, or None."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model_from_bytearray(flatbuffer)
    codes = [op.builtinCode for op in model.operatorCodes]
    sub = model.subgraphs[0]
    if kind in ("swapped_channel_scale", "weight_10x"):
        conv = next(op for op in sub.operators if codes[op.opcodeIndex] == schema.BuiltinOperator.CONV_2D)
        q = sub.tensors[conv.inputs[1]].quantization
        q.scale = _swap(np.asarray(q.scale)) if kind == "swapped_channel_scale" else np.asarray(q.scale) * 10
    else:
        dequant = next(op for op in sub.operators if codes[op.opcodeIndex] == schema.BuiltinOperator.DEQUANTIZE
                       and op.outputs[0] in sub.outputs)
        q = sub.tensors[dequant.inputs[0]].quantization  # the last activation, read by the output's dequantize
        if kind == "activation_scale":
            q.scale = np.asarray(q.scale) * 0.5
        else:
            zp = _doubled_zero_point(q.zeroPoint[0], -128, 127)
            if zp == int(q.zeroPoint[0]):
                return None
            q.zeroPoint = np.asarray([zp], np.asarray(q.zeroPoint).dtype)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


# where a corruption is no error in the model's format: no output check can see it, and none should
NOT_CORRUPTIBLE = {
    ("openvino", "zero_point"): "NNCF's performance preset quantizes symmetrically: every zero point is 0, the same "
                                "when doubled",
    ("torch", "zero_point"): "a torch quantized tensor carries its own zero point: doubled, its producer writes and "
                             "every consumer reads it alike, the values move only where the shifted range clips "
                             "(test_a_torch_zero_point_doubled_moves_the_integers_not_the_values)",
}


# ---- the cases -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def case():
    g = mini_inception().init_weights(0)
    x = random_input(g, BATCH, seed=0)
    simulated = reference.int8_simulation(g, calibration_feeds(g, BATCH)[0])(x)
    return g, x, reference.run(g, x), [simulated]


def _need(name):
    adapter = adapters.get(name)
    reason = adapter.available() or adapter.precision_reason("int8", "cpu")
    if reason:
        pytest.skip(reason)
    return adapter


def corrupted_output(name, g, x, kind):
    """(the correct int8 model's output, the corrupted one's or None) of framework ``name`` on ``x``."""
    adapter = _need(name)
    if name == "onnxruntime":
        from adapters.onnxruntime import quantize
        from ios_core.lowering.onnx import export

        model, _ = quantize(export(g, BATCH), g, BATCH)
        bad = ort_corrupt(model, kind)
        return ort_run(model, x), (None if bad is None else ort_run(bad, x))
    if name == "openvino":  # the model NNCF quantized, as the adapter quantizes it, compiled as the adapter does
        import tempfile
        from pathlib import Path

        import openvino as ov

        from adapters.openvino import nncf_quantized
        from ios_core.lowering.onnx import export

        onnx_model = export(g, BATCH)
        core = ov.Core()
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "m.onnx").write_bytes(onnx_model.SerializeToString())
            model, _ = nncf_quantized(core.read_model(str(Path(tmp) / "m.onnx")), onnx_model, g, BATCH, None)

        def run(m):
            return np.array(core.compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})({0: x})[0], np.float32)

        good = run(model)
        bad = ov_corrupt(model, kind)
        return good, (None if bad is None else run(bad))
    c = adapter.build(g, BATCH, threads=1, precision="int8", cache_dir="off")
    good = c.run(x)
    if name == "torch":
        return good, (None if torch_corrupt(c.fn, kind) is None else c.run(x))
    from adapters.tflite import TFLiteCompiled

    blob = tflite_corrupt(c.flatbuffer, kind)
    return good, (None if blob is None else TFLiteCompiled(blob, 1).run(x))


# what the check lets through today, measured (docs/precision.md): strict, so a check that learns to refuse
# them turns these into failures to be moved into the passing cases
PASSES_TODAY = {
    ("torch", "activation_scale"): "the last activation's upper half clipped: max error 7.4e-2 under int8's 1e-1, "
                                   "RMS 0.032 under 6 x the simulation's 0.011; correct int8 cells reach 4.1 x "
                                   "(docs/results/precision/int8-simulated-bound-2026-11-29.md)",
}


def _cases():
    for name in FRAMEWORKS:
        for kind in KINDS:
            why = PASSES_TODAY.get((name, kind))
            yield pytest.param(name, kind, marks=pytest.mark.xfail(strict=True, reason=why) if why else ())


@pytest.mark.parametrize("name, kind", list(_cases()))
def test_the_int8_check_refuses_a_corrupted_quantized_model(case, name, kind):
    g, x, ref, simulated = case
    good, bad = corrupted_output(name, g, x, kind)
    assert check_precision(good, ref, "int8", simulated=simulated).passed  # the model as built passes
    if bad is None:
        pytest.skip(NOT_CORRUPTIBLE[name, kind])
    res = check_precision(bad, ref, "int8", simulated=simulated)
    assert not res.passed, (f"{name}, {kind}: passed (max {res.max_rel_err:.3f}, RMS {res.rms_rel_err:.3f} "
                            f"<= {res.rms_bound:.3f}, arg-max {res.argmax_agreement})")


def test_a_torch_zero_point_doubled_moves_the_integers_not_the_values(case):
    import torch

    g, x, _, _ = case
    c = _need("torch").build(g, BATCH, threads=1, precision="int8", cache_dir="off")
    conv = min((m for m in c.fn.modules() if type(m).__name__ == "Conv2d" and int(m.zero_point) > 0),
               key=lambda m: int(m.zero_point))  # the shift least likely to clip
    seen = []
    conv.register_forward_hook(lambda mod, i, o: seen.append((o.int_repr().clone(), o.dequantize().clone())))
    before = c.run(x)
    conv.zero_point = 2 * int(conv.zero_point)
    after = c.run(x)
    (q0, v0), (q1, v1) = seen
    assert not torch.equal(q0, q1)  # the integers moved by the zero point ...
    inside = (q1 < 255) & (q0 > 0)  # ... the values did not, where both ranges hold them (neither clipped)
    assert inside.float().mean() > 0.9 and torch.allclose(v0[inside], v1[inside], rtol=0, atol=float(conv.scale))
    assert check_precision(after, before, "int8").max_rel_err < 0.01
