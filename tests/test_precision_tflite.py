"""int8 for TensorFlow on the CPU (issue 46; docs/precision.md): the ``tensorflow`` adapter's int8 is
TensorFlow Lite's full-integer post-training quantization of its ``tf.function``, calibrated on the
harness's seeded calibration inputs and run by the TFLite interpreter; its precision is read back from
the interpreter's convolutions, a model whose convolutions stayed float is refused with its reason, and
a corrupted quantization fails the check."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
from ios_core import reference
from ios_core.check import check_precision, tolerance_for
from ios_core.inputs import random_input
from ios_core.quantize import CALIBRATION_SAMPLES
from tests.adapter_graphs import mini_inception

TF = adapters.get("tensorflow")
BATCH = 4


def _need_tf():
    reason = TF.available()
    if reason:
        pytest.skip(reason)


def _cell_spec(tmp_path) -> dict:
    """A tensorflow int8 cell on mini_inception (padded max pool, grouped and depthwise convolutions,
    linear layers): its graph, seeded input and the fp32 oracle's output in ``tmp_path``."""
    g = mini_inception().init_weights(0)
    g.save(tmp_path / "g.json")
    x = random_input(g, BATCH, seed=0)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "ref.npy", reference.run(g, x))
    return {"task": "cell", "model_spec": str(tmp_path / "g.json"), "batch_size": BATCH, "device": "cpu",
            "adapter": "tensorflow", "precision": "int8", "threads": 1, "seed": 0, "input_seed": 0,
            "ref_path": str(tmp_path / "ref.npy"), "input_path": str(tmp_path / "x.npy"),
            "result_path": str(tmp_path / "out.json"), "warmup": 0, "number": 1, "repeat": 2, "min_sample_ms": None}


def test_the_tables_offer_int8_on_tensorflow_through_tflite_and_refuse_it_on_xla():
    assert TF.precision_reason("int8", "cpu") is None
    how = TF.precisions("cpu")["int8"]
    assert how.startswith("TensorFlow Lite converter, full-integer PTQ") and "TFLite interpreter" in how
    assert adapters.get("tensorflow-xla").precision_reason("int8", "cpu").startswith("tensorflow-xla int8 on cpu: no:")
    assert TF.precision_reason("int8", "cuda") is not None


def test_a_tensorflow_int8_cell_passes_its_check_and_records_calibration_and_integer_convolutions(tmp_path,
                                                                                                 monkeypatch):
    _need_tf()
    from ios_bench.running.task_cell import task_cell

    monkeypatch.setenv("IOS_BENCH_BUILD_CACHE", str(tmp_path / "cache"))
    spec = _cell_spec(tmp_path)
    result = task_cell(spec, {})
    assert result["status"] == "ok", result.get("reason") or result.get("check")
    assert result["precision"] == "int8" and result["check"]["tolerance"] == tolerance_for("int8")
    info = result["info"]
    convs = sum(op.TYPE == "conv" for op in mini_inception().operators())
    kernels = info["integer_kernels"]
    assert kernels["conv"] >= convs and kernels["float_conv"] == 0 and kernels["float_other"] == 0
    calib = info["calibration"]
    assert "TFLiteConverter" in calib["tool"] and calib["samples"] == CALIBRATION_SAMPLES
    assert calib["inputs"].startswith("ios_core.inputs.random_input from numpy SeedSequence(1000")
    assert calib["cache"] == "cold"
    assert 0 < result["check"]["max_rel_err"] and result["check"]["max_rel_err"] > tolerance_for("fp32")
    # the flatbuffer is a build: a second round loads it from the build cache, and computes the same
    again = task_cell(spec, {})
    assert again["status"] == "ok" and again["info"]["calibration"]["cache"] == "warm"
    assert again["check"]["max_abs_err"] == result["check"]["max_abs_err"]


def test_sums_are_quantized_too_so_no_node_computes_in_float():
    """A residual sum (two and three terms) is a chain of int8 ``ADD`` nodes: ``tf.add_n`` would stay
    float between a dequantize and a quantize (and outside XNNPACK)."""
    _need_tf()
    from ios_core.ir import GraphBuilder

    b = GraphBuilder("residual", (8, 6, 6))
    x = b.conv(b.input, 8, 3, padding=1)
    y = b.conv(x, 8, 3, padding=1, act="identity")
    z = b.relu(b.add([x, y]))
    g = b.finish(b.relu(b.add([z, b.conv(z, 8, 1, act="identity"), x]))).init_weights(0)
    c = TF.build(g, 2, threads=1, precision="int8", cache_dir="off")
    assert c.info["precision"] == "int8" and c.info["integer_kernels"]["float_other"] == 0
    names = [op["op_name"] for op in c.interpreter._get_ops_details()]
    assert "ADD_N" not in names and names.count("ADD") == 3
    x0 = random_input(g, 2, seed=0)
    assert check_precision(c.run(x0), reference.run(g, x0), "int8").passed


def test_a_tflite_model_with_one_corrupted_weight_scale_fails_its_check():
    _need_tf()
    from adapters.tensorflow import _tf
    from adapters.tflite import TFLiteCompiled

    _tf()  # TensorFlow imported the adapter's way before its tools
    from tensorflow.lite.tools import flatbuffer_utils

    g = mini_inception().init_weights(0)
    x = random_input(g, BATCH, seed=0)
    ref = reference.run(g, x)
    c = TF.build(g, BATCH, threads=1, precision="int8", cache_dir="off")
    assert check_precision(c.run(x), ref, "int8").passed
    model = flatbuffer_utils.read_model_from_bytearray(c.flatbuffer)
    codes = [op.builtinCode for op in model.operatorCodes]
    from tensorflow.lite.python import schema_py_generated as schema

    sub = model.subgraphs[0]
    conv = next(op for op in sub.operators if codes[op.opcodeIndex] == schema.BuiltinOperator.CONV_2D)
    weight = sub.tensors[conv.inputs[1]]
    assert weight.type == schema.TensorType.INT8 and len(weight.quantization.scale) > 1  # per channel
    weight.quantization.scale = np.asarray(weight.quantization.scale) * 10
    bad = TFLiteCompiled(bytes(flatbuffer_utils.convert_object_to_bytearray(model)), 1)
    res = check_precision(bad.run(x), ref, "int8")
    assert not res.passed, "a convolution's weight scale 10x off passed the int8 check"


def test_a_model_whose_convolutions_stayed_float_is_refused_with_its_reason(tmp_path, monkeypatch):
    """The converter's dynamic-range quantization (no representative dataset: int8 weights, float
    activations, what a user who forgets the calibration gets) in place of the full-integer one: its
    convolutions take float tensors, so the cell is not recorded as int8 but fails with the reason."""
    _need_tf()
    import ios_core.quantize as quantize
    from adapters.tensorflow import _tf
    from ios_bench.running.task_cell import task_cell

    tf = _tf()
    real = quantize.tflite_quantize

    def weights_only(concrete, trackable, feeds):
        _, calib = real(concrete, trackable, feeds)
        converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], trackable)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        return bytes(converter.convert()), calib

    monkeypatch.setattr(quantize, "tflite_quantize", weights_only)
    monkeypatch.setenv("IOS_BENCH_BUILD_CACHE", "off")
    result = task_cell(_cell_spec(tmp_path), {})
    assert result["status"] == "failed" and result["precision"] == "fp32"
    kernels = result["info"]["integer_kernels"]
    assert kernels["conv"] == 0 and kernels["float_conv"] > 0 and kernels["float_other"] > 0
    assert result["reason"].startswith("precision: asked for int8, tensorflow computes in fp32 (no convolution of "
                                       "the TFLite model takes int8 tensors")


def _max_pools(kernel, stride, padding=0, padding_end=()):
    from ios_core.ir import GraphBuilder

    b = GraphBuilder("max_pools", (3, 7, 7))
    x = b.conv(b.input, 4, 3, padding=1, act="identity")  # negative values: a zero padding would show
    return b.finish(b.pool(x, "max", kernel, stride, padding=padding, padding_end=padding_end)).init_weights(0)


@pytest.mark.parametrize("kernel,stride,padding,padding_end", [(2, 2, 1, ()), (3, 2, (0, 0), (1, 1)), (3, 1, 1, ())])
def test_max_pools_padded_by_mirroring_give_the_oracles_fp32_output(kernel, stride, padding, padding_end):
    """The int8 build's max-pool padding (the border mirrored, not -inf) is exact while a side pads
    at most half the window: the fp32 function built that way matches the oracle at fp32's bound."""
    _need_tf()
    from adapters.tensorflow import _tf, to_function

    tf = _tf()
    g = _max_pools(kernel, stride, padding, padding_end)
    x = random_input(g, 2, seed=3)
    fn = to_function(g, 2, tflite=True)
    out = fn(tf.constant(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))).numpy().transpose(0, 3, 1, 2)
    res = check_precision(out, reference.run(g, x), "fp32")
    assert res.passed, res.reason
    assert any(op.type == "MirrorPad" for op in fn.get_concrete_function().graph.get_operations())


def test_a_max_pool_padded_past_half_its_window_is_one_line_for_int8():
    _need_tf()
    g = _max_pools(2, 1, (0, 0), (2, 2))
    refusal = r"^max pool \S+: padding \(0, 0, 2, 2\) is more than half its 2x2 window"
    with pytest.raises(ValueError, match=refusal) as e:
        TF.build(g, 1, threads=1, precision="int8", cache_dir="off")
    assert "\n" not in str(e.value)


def test_requests_in_flight_get_one_interpreter_each(tmp_path):
    """A TFLite interpreter is not thread-safe: N requests in flight (a LoadGen cell) are N programs,
    each its own interpreter with its share of the threads, the flatbuffer quantized once (the build
    cache) and every program computing the same int8 output."""
    _need_tf()
    from adapters.tflite import TFLiteCompiled
    from ios_bench.scenarios.concurrency import build_engine

    g = mini_inception().init_weights(0)
    engine, info = build_engine(TF, g, 1, "cpu", 2, 2, {"precision": "int8", "cache_dir": str(tmp_path)})
    a, b = engine.programs
    assert info["kind"] == "instances" and info["threads_per_instance"] == 1
    assert isinstance(a, TFLiteCompiled) and a.interpreter is not b.interpreter and a.info["num_threads"] == 1
    assert [p.info["calibration"]["cache"] for p in (a, b)] == ["cold", "warm"]
    x = random_input(g, 1, seed=0)
    assert np.array_equal(a.run(x), b.run(x))
