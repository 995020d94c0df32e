"""adapters/tflite.py: TensorFlow Lite as a framework of its own (issue 57; docs/precision.md), fp32 and
int8 in the one engine, the TFLite interpreter: fp32 the converter's float model, int8 TensorFlow Lite's
full-integer post-training quantization (issue 46: once the ``tensorflow`` adapter's int8, which now
refuses it), calibrated on the harness's calibration inputs. Each against the oracle at its bound; the
record says the engine (XNNPACK or not, TensorFlow's version) and the threads given; the precision is read
back from the interpreter's convolutions, a model whose convolutions stayed float is refused with its
reason, and a corrupted quantization fails the check. ``ios-bench list frameworks`` lists it with its
precisions."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
from ios_core import reference
from ios_core.check import check_precision, tolerance_for
from ios_core.inputs import random_input
from ios_core.quantize import CALIBRATION_SAMPLES
from tests.adapter_graphs import mini_inception

TF = adapters.get("tflite")
BATCH = 4


def _need_tf():
    reason = TF.available()
    if reason:
        pytest.skip(reason)


def _cell_spec(tmp_path) -> dict:
    """A tflite int8 cell on mini_inception (padded max pool, grouped and depthwise convolutions,
    linear layers): its graph, seeded input and the fp32 oracle's output in ``tmp_path``."""
    g = mini_inception().init_weights(0)
    g.save(tmp_path / "g.json")
    x = random_input(g, BATCH, seed=0)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "ref.npy", reference.run(g, x))
    return {"task": "cell", "model_spec": str(tmp_path / "g.json"), "batch_size": BATCH, "device": "cpu",
            "adapter": "tflite", "precision": "int8", "threads": 1, "seed": 0, "input_seed": 0,
            "ref_path": str(tmp_path / "ref.npy"), "input_path": str(tmp_path / "x.npy"),
            "result_path": str(tmp_path / "out.json"), "warmup": 0, "number": 1, "repeat": 2, "min_sample_ms": None}


def test_tflite_offers_fp32_and_int8_and_tensorflow_refuses_int8_with_the_reason():
    assert TF.precision_reason("int8", "cpu") is None and TF.precision_reason("fp32", "cpu") is None
    how = TF.precisions("cpu")
    assert list(how) == ["fp32", "int8"] and "TFLite interpreter" in how["fp32"] and "XNNPACK" in how["fp32"]
    assert how["int8"].startswith("TensorFlow Lite converter, full-integer PTQ") and "TFLite interpreter" in how["int8"]
    assert TF.precision_reason("int8", "cuda") is not None and TF.devices == ("cpu",)
    # TensorFlow's graph runtime no longer hands its int8 cell to another engine: one line, the reason
    tf_graph = adapters.get("tensorflow")
    refusal = ("tensorflow int8 on cpu: no: int8 is the tflite framework's: TensorFlow's graph runtime has no int8 "
               "kernels here")
    assert tf_graph.precision_reason("int8", "cpu") == refusal
    assert adapters.get("tensorflow-xla").precision_reason("int8", "cpu").startswith("tensorflow-xla int8 on cpu: no:")
    if tf_graph.available() is None:
        with pytest.raises(ValueError) as e:
            tf_graph.build(mini_inception().init_weights(0), 1, threads=1, precision="int8")
        assert str(e.value) == refusal


def test_tflite_is_listed_with_its_precisions(monkeypatch):
    """``ios-bench list frameworks`` (its rows and its precisions table): tflite with fp32 and int8 on the
    CPU, tensorflow's int8 refused with the reason."""
    from rich.console import Console

    from ios_bench.commands import list as listing

    assert "tflite" in adapters.names()
    monkeypatch.setattr(adapters, "names", lambda: ["tensorflow", "tflite"])
    rows = {r["name"]: r for r in listing.framework_rows()}
    assert set(rows["tflite"]["precisions"]) == {"cpu"} and set(rows["tflite"]["precisions"]["cpu"]) == {"fp32", "int8"}
    console = Console(record=True, width=400)
    console.print(listing.precisions_table(list(rows.values())))
    lines = [" ".join(line.replace("│", " ").split()) for line in console.export_text().splitlines()]
    assert any(line.startswith("tflite cpu int8 TensorFlow Lite converter") for line in lines), lines
    assert any(line.startswith("tflite cpu fp32 TFLiteConverter without optimizations") for line in lines), lines
    assert any(line.startswith("tensorflow cpu int8 no: int8 is the tflite framework's") for line in lines), lines


def test_a_tflite_fp32_build_matches_the_oracle_and_records_its_engine_and_threads(tmp_path):
    """fp32: the converter's float model in the same interpreter as int8, at fp32's bound; the record says
    the interpreter, TensorFlow's version, the XNNPACK partitions (read back from its nodes), the threads it
    was given, and the precision read back (no int8 convolution); the flatbuffer is kept in the build cache."""
    _need_tf()
    from adapters.tensorflow import _tf

    g = mini_inception().init_weights(0)
    x = random_input(g, 2, seed=0)
    c = TF.build(g, 2, threads=2, cache_dir=str(tmp_path))
    res = check_precision(c.run(x), reference.run(g, x), "fp32")
    assert res.passed, res.reason
    info = c.info
    assert info["precision"] == "fp32" and info["integer_kernels"]["conv"] == 0
    assert info["integer_kernels"]["float_conv"] >= sum(op.TYPE == "conv" for op in g.operators())
    assert info["num_threads"] == 2 and info["threads"] == 2 and info["thread_pools"]["interpreter"].startswith("2 ")
    assert info["xnnpack"] is True and info["xnnpack_partitions"] >= 1
    assert info["engine"].startswith(f"TFLite interpreter (tf.lite.Interpreter, TensorFlow {_tf().__version__}); "
                                     "XNNPACK delegate: ")
    assert info["execution_mode"] == "tf.lite.Interpreter" and info["model_format"] == "TFLite fp32 flatbuffer"
    assert "no optimizations" in info["conversion"]["tool"] and info["conversion"]["cache"] == "cold"
    again = TF.build(g, 2, threads=2, cache_dir=str(tmp_path))
    assert again.info["conversion"]["cache"] == "warm" and np.array_equal(again.run(x), c.run(x))
    # the int8 build of the same graph is its own entry of the cache, not the float one
    assert TF.build(g, 2, threads=1, precision="int8", cache_dir=str(tmp_path)).info["calibration"]["cache"] == "cold"


def test_the_interpreter_is_given_the_cells_thread_budget(monkeypatch):
    """num_threads = the cell's thread budget at both precisions, as the interpreter is constructed (what the
    record's num_threads says; tests/test_threads.py measures CPU over wall time, which a busy machine can hide)."""
    _need_tf()
    from adapters.tensorflow import _tf

    tf = _tf()
    real, seen = tf.lite.Interpreter, []

    def spy(*args, **kwargs):
        seen.append(kwargs.get("num_threads"))
        return real(*args, **kwargs)

    monkeypatch.setattr(tf.lite, "Interpreter", spy)
    g = mini_inception().init_weights(0)
    got = [TF.build(g, 1, threads=n, precision=p, cache_dir="off").info["num_threads"]
           for n, p in ((1, "fp32"), (3, "fp32"), (2, "int8"))]
    assert seen == got == [1, 3, 2]


def test_without_xnnpack_the_builtin_kernels_compute_the_same_and_the_record_says_so():
    _need_tf()
    g = mini_inception().init_weights(0)
    x = random_input(g, 2, seed=1)
    c = TF.build(g, 2, threads=1, cache_dir="off", xnnpack=False)
    assert c.info["xnnpack"] is False and c.info["xnnpack_partitions"] == 0
    assert "XNNPACK off" in c.info["engine"]
    res = check_precision(c.run(x), reference.run(g, x), "fp32")
    assert res.passed, res.reason
    with pytest.raises(ValueError, match="^xnnpack='no': tflite takes true or false$"):
        TF.build(g, 2, threads=1, cache_dir="off", xnnpack="no")


def test_int8_refuses_attention_naming_the_node_and_holds_the_bound_on_convnext():
    """General tensors (moved from tests/test_tensorflow_tensors.py with TensorFlow's int8): attention at
    int8 is refused naming the node, a ConvNeXt block holds int8's bound and the fp32 one fp32's."""
    _need_tf()
    from tests.test_ops_transformer import GRAPHS

    with pytest.raises(ValueError, match=r"^precision 'int8': tflite refuses graph .*node '\d+' multiplies two "
                                         r"activations.*misses the int8 bound"):
        TF.build(GRAPHS["vit"](), 2, threads=1, precision="int8")
    g = GRAPHS["convnext"]()
    x = random_input(g, 2, seed=0)
    built = TF.build(g, 2, threads=1, precision="int8", cache_dir="off")
    assert built.info["precision"] == "int8"
    result = check_precision(built.run(x), reference.run(g, x), "int8")
    assert result.passed, result.reason
    result = check_precision(TF.build(g, 2, threads=1, cache_dir="off").run(x), reference.run(g, x), "fp32")
    assert result.passed, result.reason


def test_a_tflite_int8_cell_passes_its_check_and_records_calibration_and_integer_convolutions(tmp_path,
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
    assert result["reason"].startswith("precision: asked for int8, tflite computes in fp32 (no convolution of "
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
