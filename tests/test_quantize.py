"""ios_core.quantize: the calibration inputs (reproducible, distinct batches, never a measured input), a
--calibration-data folder (read, refused in one line, recorded, in the build cache's key with the quantizer's
settings), NNCF's record, OpenVINO's read-back."""

from __future__ import annotations

import numpy as np
import pytest

from ios_bench.planning.options import MAX_SEED
from ios_core.inputs import random_input
from ios_core.quantize import CALIBRATION_SEED, calibration_inputs
from tests.adapter_graphs import mini_inception


def test_calibration_inputs_are_never_a_measured_input():
    g = mini_inception()
    calib = calibration_inputs(g, 1, 16)
    assert len(calib) == 16 and all(c.shape == (1, *g.input_shape) and c.dtype == np.float32 for c in calib)
    # every measured seed near the calibration root (the integers 1000..1015 were the calibration seeds
    # themselves), the ends of the CLI's range, and the sample inputs a scenario draws (input_seed + k)
    seeds = [*range(CALIBRATION_SEED - 4, CALIBRATION_SEED + 40), 0, 1, MAX_SEED, MAX_SEED + 1, MAX_SEED + 15]
    for seed in seeds:
        x = random_input(g, 1, seed)
        assert not any(np.array_equal(x, c) for c in calib), seed


def test_the_calibration_stream_is_reproducible_and_its_batches_differ():
    g = mini_inception()
    a, b = calibration_inputs(g, 2, 6), calibration_inputs(g, 2, 6)
    assert len(a) == 3 and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], a[1]) and not np.array_equal(a[1], a[2])


def test_the_nncf_record_names_what_nncf_quantize_was_called_with(monkeypatch):
    """The OpenVINO int8 record is made from the settings the call is given (NNCF's default for a CNN
    is the performance preset with fast bias correction, not the 'mixed preset' once recorded)."""
    import pytest

    nncf = pytest.importorskip("nncf")
    from ios_core import quantize

    called = {}

    def spy(model, dataset, **kwargs):
        called.update(kwargs)
        return model

    monkeypatch.setattr(nncf, "quantize", spy)
    _, record = quantize.nncf_quantize("model", [[np.zeros((1, 3, 4, 4), np.float32)]])
    assert called["preset"] == nncf.QuantizationPreset.PERFORMANCE and called["fast_bias_correction"] is True
    assert called["target_device"] == nncf.TargetDevice.ANY and called["subset_size"] == 1
    assert "preset performance" in record["method"] and "fast bias correction on" in record["method"]
    assert "mixed" not in record["method"]
    other = {**quantize.NNCF_SETTINGS, "preset": "mixed", "fast_bias_correction": False}
    _, record = quantize.nncf_quantize("model", [[np.zeros((1, 3, 4, 4), np.float32)]], other)
    assert called["preset"] == nncf.QuantizationPreset.MIXED and called["fast_bias_correction"] is False
    assert "preset mixed (symmetric weights, asymmetric activations)" in record["method"]
    assert "fast bias correction off" in record["method"]


def test_openvinos_float_precision_is_read_from_its_runtime_model_not_its_hint():
    """The runtime model's convolutions and matrix products decide (a plugin that reports the bf16 hint
    but runs f32 layers is fp32); layers that are neither (reorders, constants) do not count."""
    from ios_core.quantize import runtime_float_precision

    layers = {("Input", "f32"): 1, ("Reorder", "bf16"): 4, ("Const", "i32"): 9}
    assert runtime_float_precision({**layers, ("Convolution", "f32"): 10, ("FullyConnected", "f32"): 2}) == "fp32"
    assert runtime_float_precision({**layers, ("Convolution", "bf16"): 10, ("FullyConnected", "bf16"): 2}) == "bf16"
    assert runtime_float_precision({**layers, ("Convolution", "bf16"): 9, ("Convolution", "f32"): 1}) == \
        "mixed (bf16, fp32)"
    assert runtime_float_precision(layers) == "fp32"


def test_the_openvino_cell_reads_its_precision_from_the_runtime_model(monkeypatch):
    import pytest

    import adapters
    import adapters.openvino as ov_adapter

    ov = adapters.get("openvino")
    if ov.available("cpu"):
        pytest.skip(ov.available("cpu"))
    g = mini_inception().init_weights(0)
    info = ov.build(g, 1, "cpu", 1).info
    assert info["precision"] == "fp32" and info["precision_source"].startswith("read back")
    # a runtime model whose convolutions run in bf16 under an f32 hint: the cell says what runs
    real = ov_adapter.runtime_precisions
    monkeypatch.setattr(ov_adapter, "runtime_precisions", lambda cm: {
        (k, "bf16" if k == "Convolution" else p): n for (k, p), n in real(cm).items()})
    info = ov.build(g, 1, "cpu", 1).info
    assert info["inference_precision"] == "f32" and info["precision"] == "mixed (bf16, fp32)"
    assert "run in mixed (bf16, fp32)" in info["precision_note"]


# ---- --calibration-data: a folder of .npy inputs every int8 path calibrates on ----------------------------

def _folder(tmp_path, shape, n_files=3, scale=1.0, batch_file=True, batch=2):
    d = tmp_path / "calib"
    d.mkdir(exist_ok=True)
    rng = np.random.default_rng(7)
    for i in range(n_files):
        np.save(d / f"s{i:02d}.npy", (scale * rng.standard_normal(shape)).astype(np.float32))
    if batch_file:  # a batch in one file
        np.save(d / "z_batch.npy", (scale * rng.standard_normal((batch, *shape))).astype(np.float32))
    return d


def test_a_calibration_folder_is_read_in_name_order_one_input_or_a_batch_per_file(tmp_path):
    from ios_core.quantize import calibration_feeds, read_calibration_data

    g = mini_inception()
    d = _folder(tmp_path, g.input_shape)
    arr, note = read_calibration_data(d, g.input_shape)
    assert arr.shape == (5, *g.input_shape) and arr.dtype == np.float32
    assert np.array_equal(arr[0], np.load(d / "s00.npy")) and np.array_equal(arr[3:], np.load(d / "z_batch.npy"))
    assert note["files"] == 4 and note["samples"] == 5 and len(note["sha1"]) == 40
    feeds, rec, key = calibration_feeds(g, 2, 16, d)
    # 5 samples in batches of 2: the last one filled with the first sample again; the seeded count not used
    assert [f.shape[0] for f in feeds] == [2, 2, 2] and np.array_equal(feeds[2][1], arr[0])
    # fewer samples than one batch: the one batch is filled by going round them again
    [one] = calibration_feeds(g, 8, 16, d)[0]
    assert one.shape[0] == 8 and np.array_equal(one, arr[[0, 1, 2, 3, 4, 0, 1, 2]])
    assert rec["data"]["sha1"] == note["sha1"] and rec["samples"] == 5 and note["sha1"] in key
    seeded_feeds, seeded, seeded_key = calibration_feeds(g, 2, 16)
    assert "data" not in seeded and seeded_key != key and len(seeded_feeds) == 8
    # the digest follows the files' bytes
    np.save(d / "s01.npy", np.zeros(g.input_shape, np.float32))
    assert read_calibration_data(d, g.input_shape)[1]["sha1"] != note["sha1"]


@pytest.mark.parametrize("bad, why", [
    ("missing", "not a folder"), ("empty", "no .npy files"), ("shape", "shape (3, 12, 12)"),
    ("dtype", "dtype int32"), ("batch_shape", "shape (2, 16, 12, 13)"), ("nan", "non-finite"),
    ("garbage", "not a numpy array file")])
def test_a_bad_calibration_folder_is_a_one_line_error(tmp_path, bad, why):
    from ios_core.quantize import CalibrationDataError, read_calibration_data

    g = mini_inception()
    d = tmp_path / "calib"
    if bad != "missing":
        d.mkdir()
    if bad == "shape":
        np.save(d / "a.npy", np.zeros((3, 12, 12), np.float32))
    elif bad == "dtype":
        np.save(d / "a.npy", np.zeros(g.input_shape, np.int32))
    elif bad == "batch_shape":
        np.save(d / "a.npy", np.zeros(g.input_shape, np.float32))
        np.save(d / "b.npy", np.zeros((2, 16, 12, 13), np.float32))
    elif bad == "nan":
        np.save(d / "a.npy", np.full(g.input_shape, np.nan, np.float32))
    elif bad == "garbage":
        (d / "a.npy").write_bytes(b"not numpy")
    with pytest.raises(CalibrationDataError) as e:
        read_calibration_data(d, g.input_shape)
    assert why in str(e.value) and "\n" not in str(e.value)


def _ort_or_skip():
    import adapters

    reason = adapters.get("onnxruntime").available()
    if reason:
        pytest.skip(reason)
    return adapters.get("onnxruntime")


def test_onnxruntime_int8_is_calibrated_on_the_folder_and_its_record_says_so(tmp_path):
    from onnx import numpy_helper

    ort_adapter = _ort_or_skip()
    g = mini_inception()
    g.init_weights(0)
    d = _folder(tmp_path, g.input_shape, scale=4.0)  # inputs 4x the seeded ones' spread: other activation ranges
    seeded = ort_adapter.build(g, 2, threads=1, precision="int8")
    folder = ort_adapter.build(g, 2, threads=1, precision="int8", calibration_data=str(d))
    calib = folder.info["calibration"]
    assert calib["data"]["files"] == 4 and calib["samples"] == 5 and "--calibration-data" in calib["inputs"]
    assert "data" not in seeded.info["calibration"] and "SeedSequence" in seeded.info["calibration"]["inputs"]

    from adapters.onnxruntime import quantize
    from ios_core.lowering.onnx import export

    def input_scale(model):  # the scale of the model input's QuantizeLinear: set by the calibration's ranges
        name = model.graph.input[0].name
        q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == name)
        return float(numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == q.input[1])))

    a, _ = quantize(export(g, 2), g, 2)
    b, _ = quantize(export(g, 2), g, 2, data=str(d))
    assert input_scale(b) > 2.5 * input_scale(a)  # calibrated on the folder's (4x wider) inputs


def test_the_int8_build_cache_key_holds_the_calibration_source_and_the_quantizers_settings(tmp_path, monkeypatch):
    import ios_core.quantize as q

    ort_adapter = _ort_or_skip()
    g = mini_inception()
    g.init_weights(0)
    cache = tmp_path / "cache"
    d = _folder(tmp_path, g.input_shape)

    def state(**kw):
        return ort_adapter.build(g, 1, threads=1, precision="int8", cache_dir=str(cache), **kw).info["calibration"]

    assert state()["cache"] == "cold" and state()["cache"] == "warm"
    assert state(calibration_data=str(d))["cache"] == "cold"  # another calibration source: not the seeded model
    assert state(calibration_data=str(d))["cache"] == "warm"
    np.save(d / "s00.npy", np.ones(g.input_shape, np.float32))
    assert state(calibration_data=str(d))["cache"] == "cold"  # a file changed: its digest, its key
    monkeypatch.setitem(q.ORT_SETTINGS, "per_channel", False)
    got = state()
    assert got["cache"] == "cold" and got["settings"]["per_channel"] is False  # a changed setting: built again


def _int8_adapter(name):
    """(``name``'s adapter, the small test graph with seeded weights); the test skips where ``name`` has no int8
    here."""
    import adapters

    adapter = adapters.get(name)
    reason = adapter.available() or adapter.precision_reason("int8", "cpu")
    if reason:
        pytest.skip(reason)
    return adapter, mini_inception().init_weights(0)


def _int8_builds(tmp_path, name):
    """A function building ``name``'s int8 cell of a small graph (2 calibration samples, one build cache
    under ``tmp_path``) and returning its calibration record; the test skips where ``name`` has no int8 here."""
    adapter, g = _int8_adapter(name)
    return lambda: adapter.build(g, 1, threads=1, precision="int8", calibration_samples=2,
                                 cache_dir=str(tmp_path / "cache")).info["calibration"]


def test_the_openvino_int8_build_cache_key_holds_nncfs_settings(tmp_path, monkeypatch):
    """A changed NNCF setting (its preset here) quantizes the model again instead of reusing the one
    quantized with the old settings; the record names the setting the model was quantized with."""
    import ios_core.quantize as q

    calibration = _int8_builds(tmp_path, "openvino")
    assert calibration()["cache"] == "cold" and calibration()["cache"] == "warm"
    monkeypatch.setitem(q.NNCF_SETTINGS, "preset", "mixed")
    got = calibration()
    assert got["cache"] == "cold" and got["settings"]["preset"] == "mixed"


def test_the_torch_int8_build_cache_key_holds_its_qconfig(tmp_path, monkeypatch):
    """The key holds the qconfig mapping written out (torch_qconfig_settings), not only a description of
    it: a changed observer (or a torch whose defaults changed) calibrates again instead of loading observers
    of another kind."""
    from torch.ao.quantization import MinMaxObserver, QConfig, QConfigMapping, default_per_channel_weight_observer

    import ios_core.quantize as q

    calibration = _int8_builds(tmp_path, "torch")

    def cache():
        return calibration()["cache"]

    assert cache() == "cold" and cache() == "warm"
    minmax = QConfigMapping().set_global(QConfig(activation=MinMaxObserver.with_args(reduce_range=True),
                                                 weight=default_per_channel_weight_observer))
    monkeypatch.setattr(q, "torch_qconfig_mapping", lambda backend=q.TORCH_BACKEND, weights_only=False: minmax)
    assert cache() == "cold" and cache() == "warm"


def test_the_tflite_int8_build_cache_key_holds_the_converters_settings(tmp_path, monkeypatch):
    """tflite_quantize sets the converter from TFLITE_SETTINGS and the key holds them: a changed setting
    (float kernels allowed beside the int8 ones here) converts again; the record names the settings."""
    import ios_core.quantize as q

    calibration = _int8_builds(tmp_path, "tflite")
    first = calibration()
    assert first["cache"] == "cold" and calibration()["cache"] == "warm"
    assert first["settings"] == q.TFLITE_SETTINGS
    monkeypatch.setitem(q.TFLITE_SETTINGS, "supported_ops", "TFLITE_BUILTINS")
    got = calibration()
    assert got["cache"] == "cold" and got["settings"]["supported_ops"] == "TFLITE_BUILTINS"
    assert "TFLITE_BUILTINS)" in got["tool"]


@pytest.mark.parametrize("name, options", [("openvino", {}), ("torch", {}), ("tflite", {}),
                                           ("ios", {"provider": "onnxruntime"}), ("ios", {"provider": "openvino"})])
def test_every_int8_path_is_calibrated_on_the_folder_when_given(tmp_path, name, options):
    import adapters
    from ios_core.check import check_precision
    from ios_core.reference import run as oracle

    adapter = adapters.get(name)
    reason = adapter.available() or adapter.precision_reason("int8", "cpu", **options)
    if reason:
        pytest.skip(reason)
    g = mini_inception()
    g.init_weights(0)
    d = _folder(tmp_path, g.input_shape, batch=13)  # 16 samples, as many as the seeded calibration's
    c = adapter.build(g, 2, threads=1, precision="int8", calibration_data=str(d), **options)
    calib = c.info["calibration"]
    assert calib["data"]["files"] == 4 and calib["samples"] == 16, calib
    x = random_input(g, 2, seed=3)
    out = c.run(x)
    assert check_precision(out, oracle(g, x), "int8").passed
    # ... and calibrated on it, not only recording it: a folder of the same inputs 4x larger (ranges 4x wider,
    # so steps 4x coarser) gives another quantized model, where a path that read its seeded inputs would not
    (tmp_path / "wide").mkdir()
    wide = _folder(tmp_path / "wide", g.input_shape, batch=13, scale=4.0)
    other = adapter.build(g, 2, threads=1, precision="int8", calibration_data=str(wide), **options)
    assert other.info["calibration"]["data"]["files"] == 4
    assert not np.array_equal(other.run(x), out)


# ---- "int8" means integer convolutions: what each engine left in float, read back ------------------------

def test_the_read_backs_count_the_convolutions_and_matrix_products_left_in_float(tmp_path):
    import onnx
    import torch.nn as nn
    from onnx import helper

    from ios_core.quantize import float_heavy, integer_kernels, openvino_float_layers, torch_integer_ops

    nodes = [helper.make_node(op, [], [f"y{i}"]) for i, op in
             enumerate(["QLinearConv", "Conv", "FusedConv", "MatMul", "QLinearMatMul", "Gemm", "Relu", "QGemm",
                        "MatMulIntegerToFloat"])]
    path = tmp_path / "opt" / "m.onnx"
    path.parent.mkdir()
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [], [])), str(path))
    k = integer_kernels(path)
    assert (k["conv"], k["other"], k["float_conv"], k["float_matmul"]) == (1, 3, 2, 2)
    assert float_heavy(k) == {"conv": 2, "matmul": 2}
    kinds = {("Convolution", "u8"): 3, ("Convolution", "f32"): 1, ("FullyConnected", "f32"): 1,
             ("MatMul", "i8"): 1, ("Eltwise", "f32"): 4}
    assert float_heavy(openvino_float_layers(kinds)) == {"conv": 1, "matmul": 1}
    module = nn.Sequential(nn.Conv2d(1, 1, 1), nn.Flatten(), nn.Linear(4, 2), nn.Linear(2, 2))
    assert float_heavy(torch_integer_ops(module)) == {"conv": 1, "matmul": 2}


@pytest.mark.parametrize("name", ["onnxruntime", "openvino", "torch", "tflite"])
def test_every_int8_adapter_records_what_it_left_in_float(name):
    from ios_core.ir import Conv

    adapter, g = _int8_adapter(name)

    info = adapter.build(g, 1, threads=1, precision="int8", cache_dir="off").info
    assert set(info["float_ops"]) == {"conv", "matmul"}, info["float_ops"]
    integer = info["integer_convolutions"] if name == "openvino" else info["integer_kernels"]["conv"]
    # every convolution of the graph is either an integer kernel or counted in float (openvino's CPU plugin
    # runs some of mini_inception's in f32 after NNCF: recorded, not hidden)
    convs = sum(isinstance(op, Conv) for op in g.operators())
    if name == "tflite":  # the TFLite graph has convolutions of its own (a dense layer as a 1x1 CONV_2D)
        assert integer + info["float_ops"]["conv"] >= convs and info["float_ops"]["conv"] == 0, info
    else:
        assert integer + info["float_ops"]["conv"] == convs, info
    assert all(isinstance(v, int) and v >= 0 for v in info["float_ops"].values())


def test_a_transformer_is_quantized_by_its_weights_and_a_cnn_as_before():
    """ONNX Runtime int8 (ios_core.quantize.float_nodes): a CNN keeps no node in float (quantize_static is
    called as before); the one-block ViT keeps every node but Conv, Gemm and the MatMuls against a weight in
    float (attention's two activation products among them), and then holds the int8 bound (quantizing
    everything put it 53 % off)."""
    pytest.importorskip("onnxruntime")
    import adapters
    from ios_core import reference
    from ios_core.check import compare, tolerance_for
    from ios_core.lowering.onnx import export
    from ios_core.quantize import float_nodes
    from tests.test_ops_transformer import one_block_vit

    assert float_nodes(export(mini_inception().init_weights(0), 1)) == []
    g = glorot(one_block_vit())
    m = export(g, 2)
    floats = set(float_nodes(m))
    ops = {n.name: n.op_type for n in m.graph.node}
    quantized = [n for n in ops if n not in floats]
    assert {ops[n] for n in quantized} == {"Conv", "MatMul", "Gemm"}
    assert sum(ops[n] == "MatMul" for n in floats) == 2  # the scores and their product with the values
    assert all(ops[n] != "Softmax" and ops[n] != "LayerNormalization" for n in quantized)
    x = reference.random_input(g, 2, 0)
    c = adapters.get("onnxruntime").build(g, 2, threads=1, precision="int8")
    res = compare(c.finish(c.execute(c.prepare(x))), reference.run(g, x), tolerance_for("int8"))
    assert res.passed, res.reason


def glorot(g, seed: int = 0):
    """The test graphs' linear layers at the scale torchvision's ViT initializes its MLP with (Glorot: standard
    deviation sqrt(2 / (fan in + fan out))): the zoo's 0.02 (ViT's and ConvNeXt's own, for widths of hundreds)
    would make a layer of 8 features give a fifteenth of its input, and int8's error a large share of a tiny output."""
    rng = np.random.default_rng(seed)
    for n in g.nodes():
        if n.TYPE == "dense":
            n.weight = (rng.standard_normal(n.weight.shape) * np.sqrt(2.0 / sum(n.weight.shape))).astype(np.float32)
    return g


@pytest.mark.parametrize("name", ["onnxruntime", "torch", "openvino"])
@pytest.mark.parametrize("graph", ["vit", "convnext"])
def test_int8_holds_its_bound_on_the_transformer_graphs(name, graph):
    """Every int8 adapter on the one-block ViT and the tiny ConvNeXt (random weights) against the oracle at
    the int8 bound, each quantizing a transformer as its users' recipes do: torch FX with qconfigs on Conv2d
    and Linear only (the default mapping put the ViT 119 % off), NNCF with model type transformer, constants
    folded and the overflow fix (the tiny ConvNeXt was 0.197 off without the last two), ONNX Runtime by its
    weights, pre-processed, in 7 bits (above); the record says so."""
    import adapters
    from ios_core import reference
    from ios_core.check import compare, tolerance_for
    from tests.test_ops_transformer import one_block_vit, tiny_convnext

    reason = adapters.get(name).available()
    if reason or adapters.get(name).precision_reason("int8", "cpu"):
        pytest.skip(reason or adapters.get(name).precision_reason("int8", "cpu"))
    g = glorot({"vit": one_block_vit, "convnext": tiny_convnext}[graph]())
    x = reference.random_input(g, 2, 0)
    c = adapters.get(name).build(g, 2, threads=1, precision="int8")
    res = compare(c.finish(c.execute(c.prepare(x))), reference.run(g, x), tolerance_for("int8"))
    assert res.passed, f"{name} int8 on {graph}: {res.reason}"
    calib = c.info.get("calibration") or {}
    said = calib.get("kept_float") or (calib.get("settings") or {}).get("model_type")
    assert said, f"{name}'s record does not say how a transformer was quantized: {calib}"


# ---- int8 on a transformer as each tool's documentation tells its users (issue 56) --------------------------

def _int8_weights(model) -> dict:
    """{DequantizeLinear node: (its int8 weight initializer, its scale)} of a QDQ model: the weights
    quantize_static stored as int8 (an activation is quantized at run time and has no such initializer)."""
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return {n.name: (inits[n.input[0]], inits[n.input[1]]) for n in model.graph.node
            if n.op_type == "DequantizeLinear" and n.input[0] in inits and inits[n.input[0]].dtype == np.int8}


def test_onnxruntime_quantizes_a_transformers_weights_per_channel_in_7_bits_and_a_cnns_as_before():
    """Read back from the quantized model: the one-block ViT's 6 dense layers, its classifier and its patch
    convolution have int8 weights with one scale per output channel, in 7 bits (reduce_range: |q| <= 64); the
    dense layers' weights count only because the model was pre-processed (exported as Transpose(weight),
    quantize_static took them for activations: u8, one scale, quantized at run time). A CNN: 8 bits, as before."""
    pytest.importorskip("onnxruntime")
    from ios_core.lowering.onnx import export
    from ios_core.quantize import ORT_SETTINGS, ort_quantize
    from tests.test_ops_transformer import one_block_vit

    g = glorot(one_block_vit())
    q, record = ort_quantize(export(g, 1), [[x] for x in calibration_inputs(g, 1, 2)])
    weights = _int8_weights(q)
    assert len(weights) == 8, sorted(weights)  # 6 dense + classifier + patch convolution
    for w, scale in weights.values():
        assert scale.size == w.shape[0] > 1 or scale.size == w.shape[1] > 1, (w.shape, scale.shape)  # per channel
        assert np.abs(w.astype(int)).max() <= 64, np.abs(w.astype(int)).max()  # 7 bits
    assert record["settings"]["reduce_range"] is True and record["settings"]["pre_process"] == "quant_pre_process"
    assert "7 bits" in record["format"] and "quant_pre_process" in record["format"], record["format"]
    cnn = mini_inception().init_weights(0)
    q, record = ort_quantize(export(cnn, 1), [[x] for x in calibration_inputs(cnn, 1, 2)])
    assert record["settings"] == ORT_SETTINGS and "7 bits" not in record["format"]
    assert max(int(np.abs(w.astype(int)).max()) for w, _ in _int8_weights(q).values()) == 127


def three_layer_vit():
    """The zoo's vit_tiny (224x224, 192 features, 3 heads, ViT's initialization) at 3 of its 12 layers: deep
    enough for the 8-bit weights' saturation on a CPU without VNNI (ONNX Runtime 0.146, OpenVINO 0.166 here)."""
    from ios_core.models.vit import vit

    return vit("vit_3", depth=3).init_weights(0)


@pytest.mark.parametrize("name", ["onnxruntime", "openvino"])
def test_int8_holds_its_bound_on_vit_tiny_at_three_layers(name):
    """ONNX Runtime (7-bit weights after pre-processing: 0.029 here) and OpenVINO (NNCF's overflow fix,
    constants folded: 0.071) hold the int8 bound on vit_tiny cut to 3 layers, at 2 threads as the sweep runs;
    every dense layer of OpenVINO's runtime model is an integer kernel (only attention's products in float)."""
    import adapters
    from ios_core import reference
    from ios_core.check import compare, tolerance_for

    adapter = adapters.get(name)
    reason = adapter.available() or adapter.precision_reason("int8", "cpu")
    if reason:
        pytest.skip(reason)
    g = three_layer_vit()
    x = reference.random_input(g, 1, 0)
    c = adapter.build(g, 1, threads=2, precision="int8", cache_dir="off")
    res = compare(c.finish(c.execute(c.prepare(x))), reference.run(g, x), tolerance_for("int8"))
    assert res.passed, f"{name} int8 on a 3-layer vit_tiny: {res.reason}"
    assert c.info["float_ops"]["matmul"] <= 2 * 3, c.info["float_ops"]  # at most the 2 products a layer


def test_nncf_folds_a_transformers_constants_and_quantizes_its_weights_in_7_bits():
    """Read back from NNCF's model: the one-block ViT's weights (6 dense layers, classifier, patch
    convolution) are int8 constants within 7 bits (the overflow fix on every layer); a CNN's settings fix the
    first layer only. The dense layers' weights are constants only because the constants were folded."""
    pytest.importorskip("nncf")
    import tempfile
    from pathlib import Path

    import openvino as ov

    from ios_core.lowering.onnx import export
    from ios_core.quantize import NNCF_SETTINGS, nncf_method, nncf_quantize, nncf_settings
    from tests.test_ops_transformer import one_block_vit

    def int8_constants(g, settings):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "m.onnx"
            path.write_bytes(export(g, 1).SerializeToString())
            model = ov.Core().read_model(str(path))
        q, record = nncf_quantize(model, [[x] for x in calibration_inputs(g, 1, 2)], settings)
        return [op.get_data() for op in q.get_ops()
                if op.get_type_name() == "Constant" and op.get_element_type() == ov.Type.i8], record

    g = glorot(one_block_vit())
    settings = nncf_settings(g)
    assert settings["overflow_fix"] == "enable" and settings["fold_constants"] is True
    consts, record = int8_constants(g, settings)
    assert len(consts) == 8 and all(np.abs(c.astype(int)).max() <= 64 for c in consts), [c.shape for c in consts]
    assert "overflow fix enable" in record["method"] and "ConstantFolding" in record["method"]
    cnn = mini_inception().init_weights(0)
    assert nncf_settings(cnn) == NNCF_SETTINGS and "overflow" not in nncf_method(NNCF_SETTINGS)
    consts, _ = int8_constants(cnn, NNCF_SETTINGS)
    assert max(int(np.abs(c.astype(int)).max()) for c in consts) == 127


def test_a_float_tflite_build_has_no_integer_convolution():
    """The TFLite read-back counts a convolution as integer only when its input and filter are int8: the fp32
    build of the same graph (float input, float filter, a bias: three inputs) has every one in float; its node
    count is the model's nodes, whether XNNPACK took them into a partition or not."""
    import adapters
    from ios_core.ir import Conv
    from ios_core.quantize import tflite_integer_kernels

    adapter = adapters.get("tflite")
    reason = adapter.available()
    if reason:
        pytest.skip(reason)
    g = mini_inception()
    g.init_weights(0)
    compiled = adapter.build(g, 1, threads=1, precision="fp32", cache_dir="off")
    k = tflite_integer_kernels(compiled.interpreter)
    convs = sum(isinstance(op, Conv) for op in g.operators())
    assert k["conv"] == 0 and k["float_conv"] >= convs, k
    assert k["nodes"] >= convs, k  # the model's nodes, a delegate's partitions aside: at least its convolutions


def test_an_int8_tflite_build_computes_nothing_in_float_but_its_input_quantize():
    """Two convolutions quantized whole: both integer, and the QUANTIZE that takes the model's float input
    (it only converts) is not counted as computing in float."""
    import adapters
    from ios_core.ir.builder import GraphBuilder
    from ios_core.quantize import tflite_integer_kernels

    adapter = adapters.get("tflite")
    reason = adapter.available() or adapter.precision_reason("int8", "cpu")
    if reason:
        pytest.skip(reason)
    b = GraphBuilder("two_convs", (4, 8, 8))
    b.end_block(b.conv(b.conv(b.input, 8, 3, padding=1), 8, 1))
    g = b.finish()
    g.init_weights(0)
    k = tflite_integer_kernels(adapter.build(g, 1, threads=1, precision="int8", cache_dir="off").interpreter)
    assert (k["conv"], k["float_conv"], k["float_other"], k["float_dense"]) == (2, 0, 0, 0), k


def test_a_float_fx_graph_has_no_quantized_function():
    """torch's read-back counts the ``quantized.*`` functions of an FX graph: a traced float module's nodes
    (its input, its modules, its output, a float function) are none of them."""
    import torch
    import torch.fx
    import torch.nn as nn

    from ios_core.quantize import torch_integer_ops

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 1)

        def forward(self, x):
            return torch.flatten(torch.relu(self.conv(x)), 1)

    ops = torch_integer_ops(torch.fx.symbolic_trace(Net()))
    assert (ops["conv"], ops["other"], ops["float_conv"]) == (0, 0, 1), ops


def test_torch_counts_each_quantized_kernel_once_and_not_a_linears_packed_weights():
    """A quantized Linear holds its weights in a ``LinearPackedParams`` module: the Linear is the kernel, its
    packed weights are not another; a quantize and a dequantize are integer kernels of their own."""
    import torch
    import torch.ao.nn.quantized as nnq
    import torch.nn as nn

    from ios_core.quantize import torch_integer_ops

    module = nn.Sequential(nnq.Quantize(0.1, 0, torch.quint8), nnq.Linear(4, 2), nnq.DeQuantize())
    assert any(type(m).__name__.endswith("PackedParams") for m in module.modules())
    ops = torch_integer_ops(module)
    assert (ops["conv"], ops["other"], ops["float_linear"]) == (0, 3, 0), ops
