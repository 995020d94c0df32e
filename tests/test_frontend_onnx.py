"""The ONNX frontend: each supported operator (and its awkward attributes) imports into the IR and
the oracle then computes what onnxruntime computes on the original model; what the IR cannot
represent is refused in one line naming the operator, the node and every other unsupported type."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as onh  # noqa: E402

from ios_core import reference  # noqa: E402
from ios_core.frontend import UnsupportedModel  # noqa: E402
from ios_core.frontend import onnx as frontend  # noqa: E402
from ios_core.ir import Graph  # noqa: E402


class Net:
    """A tiny ONNX graph builder: ``x = n.op("Conv", [n.input, n.w((8, 4, 3, 3))], pads=[1]*4)``."""

    def __init__(self, shape=(4, 8, 8), opset=17, batch="N"):
        self.shape, self.opset, self.batch = shape, opset, batch
        self.nodes, self.inits = [], []
        self.input = "x"
        self.rng = np.random.default_rng(0)
        self.count = 0

    def w(self, shape, scale=0.3, offset=0.0, dtype=np.float32):
        name = f"w{len(self.inits)}"
        arr = (self.rng.standard_normal(shape) * scale + offset).astype(dtype)
        self.inits.append(onh.from_array(arr, name))
        return name

    def c(self, values, dtype=np.int64):
        name = f"c{len(self.inits)}"
        self.inits.append(onh.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [f"{op_type.lower()}{self.count}_{i}" for i in range(n_out)]
        self.nodes.append(oh.make_node(op_type, inputs, outs, name=f"{op_type}_{self.count}", **attrs))
        self.count += 1
        return outs[0] if n_out == 1 else outs

    def model(self, out):
        graph = oh.make_graph(
            self.nodes, "net", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [self.batch, *self.shape])],
            [oh.make_value_info(out, oh.make_tensor_type_proto(TensorProto.FLOAT, None))], initializer=self.inits)
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", self.opset)])
        model.ir_version = 8
        return model


def check(model, batch=2, rtol=1e-4):
    """Import ``model``; the oracle must match onnxruntime on the original model."""
    graph = frontend.load(model)
    x = np.random.default_rng(1).standard_normal((batch, *graph.input_shape)).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    got = reference.run(graph, x)
    assert got.size == want.size, (got.shape, want.shape)
    err = np.abs(got.reshape(want.shape) - want).max() / max(np.abs(want).max(), 1e-6)
    assert err <= rtol, f"max rel error {err:.2e}"
    return graph


def types(graph):
    return [op.TYPE for op in graph.operators()]


def conv(n, x, cin, cout, k=3, **attrs):
    return n.op("Conv", [x, n.w((cout, cin // attrs.get("group", 1), k, k)), n.w((cout,))], **attrs)


@pytest.mark.parametrize("attrs", [
    dict(pads=[1, 1, 1, 1]),
    dict(pads=[0, 1, 2, 1], strides=[2, 2]),  # asymmetric
    dict(pads=[2, 2, 2, 2], dilations=[2, 2]),
    dict(group=2, pads=[1, 1, 1, 1]),
    dict(auto_pad="SAME_UPPER", strides=[2, 2]),
    dict(auto_pad="SAME_LOWER"),
])
def test_conv_attributes(attrs):
    n = Net()
    g = check(n.model(conv(n, n.input, 4, 6, **attrs)))
    assert types(g) == ["conv"]


def test_depthwise_conv_with_relu6_and_folded_batchnorm():
    n = Net()
    y = conv(n, n.input, 4, 8, group=4, pads=[1, 1, 1, 1])
    y = n.op("BatchNormalization", [y, n.w((8,), 0.2, 1.0), n.w((8,)), n.w((8,)), n.w((8,), 0.1, 1.0)])
    y = n.op("Clip", [y, n.c(0.0, np.float32), n.c(6.0, np.float32)])
    g = check(n.model(y))
    assert types(g) == ["conv"] and g.exit_node.act == "relu6"  # BN folded, ReLU6 fused


def test_standalone_batchnorm_is_an_affine_node():
    n = Net()
    y = n.op("BatchNormalization", [n.input, n.w((4,), 0.2, 1.0), n.w((4,)), n.w((4,)), n.w((4,), 0.1, 1.0)],
             epsilon=1e-3)
    y = n.op("Relu", [y])
    g = check(n.model(conv(n, y, 4, 4, pads=[1, 1, 1, 1])))
    assert types(g) == ["affine", "conv"] and g.operators().__next__().act == "relu"


@pytest.mark.parametrize("op,attrs", [
    ("Sigmoid", {}), ("Tanh", {}), ("HardSwish", {}), ("HardSigmoid", {"alpha": 1 / 6}), ("HardSigmoid", {}),
    ("LeakyRelu", {"alpha": 0.1}), ("Relu", {}),
])
def test_activations(op, attrs):
    n = Net()
    y = n.op(op, [n.input], **attrs)
    g = check(n.model(n.op("Add", [y, y])))
    assert "activation" in types(g)


def test_clip_general_and_silu():
    n = Net()
    y = n.op("Clip", [n.input, n.c(-0.5, np.float32), n.c(0.7, np.float32)])
    s = n.op("Mul", [y, n.op("Sigmoid", [y])])
    g = check(n.model(n.op("Add", [s, n.input])))
    acts = [(op.act_type, op.alpha, op.beta) for op in g.operators() if op.TYPE == "activation"]
    assert acts == [("clip", -0.5, pytest.approx(0.7)), ("silu", 0.0, 0.0)]


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1]),
])
def test_max_pool(attrs):
    n = Net(shape=(4, 9, 9))
    check(n.model(n.op("MaxPool", [n.input], **attrs)))


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0),
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, count_include_pad=0),
    dict(kernel_shape=[2, 2], strides=[2, 2]),
])
def test_average_pool(attrs):
    n = Net(shape=(4, 9, 9))
    check(n.model(n.op("AveragePool", [n.input], **attrs)))


def test_pad_is_read_into_conv_and_pool():
    n = Net()
    p = n.op("Pad", [n.input, n.c([0, 0, 1, 0, 0, 0, 2, 1])])
    y = conv(n, p, 4, 4, strides=[2, 2])
    p2 = n.op("Pad", [y, n.c([0, 0, 1, 1, 0, 0, 1, 1])])
    g = check(n.model(n.op("AveragePool", [p2], kernel_shape=[3, 3])))
    c, pool = list(g.operators())
    assert c.pads == (1, 0, 2, 1) and pool.pads == (1, 1, 1, 1) and pool.count_include_pad


def test_a_pad_that_no_conv_absorbs_is_made_real():
    """Zeros before a MaxPool (which pads with -inf: HGNet's stem), read by an Add, padded again with
    another value: prepended rows (``_pad_any``)."""
    n = Net()  # (4, 8, 8), values of both signs: the zeros show at the border
    p = n.op("Pad", [n.input, n.c([0, 0, 1, 1, 0, 0, 2, 2])])  # 11 x 11
    m = n.op("MaxPool", [p], kernel_shape=[2, 2], strides=[1, 1])  # 10 x 10
    q = n.op("Pad", [n.input, n.c([0, 0, 1, 0, 0, 0, 0, 1])])  # 9 x 9, then 10 x 10 with 1.5
    s = n.op("Add", [m, n.op("Pad", [q, n.c([0, 0, 0, 1, 0, 0, 1, 0]), n.c(1.5, np.float32)])])
    g = check(n.model(s))
    assert "prepend" in types(g) and "pool" in types(g)


def test_slices_and_concatenations_along_height_and_width_of_a_feature_map():
    """Along an axis other than channels: transposes around the IR's channel slices (issue 56)."""
    n = Net()  # (4, 8, 8)
    top = n.op("Slice", [n.input, n.c([0]), n.c([3]), n.c([2])])  # rows 0:3
    odd = n.op("Slice", [n.input, n.c([1]), n.c([8]), n.c([3]), n.c([2])])  # columns 1::2
    y = n.op("Concat", [n.op("Relu", [top]), n.input], axis=2)  # 11 rows
    z = n.op("Concat", [odd, n.op("Sigmoid", [odd])], axis=-1)  # 8 columns
    g = check(n.model(n.op("Add", [n.op("Slice", [y, n.c([3]), n.c([11]), n.c([2])]), z])))
    assert "transpose" in types(g)


def test_squeeze_excitation_broadcast_and_classifier():
    """SE block (global pool, two 1x1 convs, sigmoid, broadcast mul), residual add, ReduceMean,
    Gemm; then Flatten/MatMul and constant Add/Sub/Mul/Div."""
    n = Net(shape=(8, 6, 6))
    s = n.op("GlobalAveragePool", [n.input])
    s = n.op("Relu", [conv(n, s, 8, 4, k=1)])
    s = n.op("Sigmoid", [conv(n, s, 4, 8, k=1)])
    y = n.op("Mul", [n.input, s])
    y = n.op("Add", [y, n.op("Sub", [n.input, y])])
    y = n.op("Mul", [n.op("Div", [y, n.c(np.full((1, 8, 1, 1), 2.0), np.float32)]), n.w((8, 1, 1))])
    y = n.op("Sub", [n.c(0.5, np.float32), y])
    m = n.op("ReduceMean", [y], axes=[2, 3], keepdims=0)
    z = n.op("Gemm", [m, n.w((5, 8)), n.w((5,))], transB=1, alpha=0.5, beta=2.0)
    z = n.op("Add", [n.op("MatMul", [z, n.w((5, 3))]), n.w((3,))])
    g = check(n.model(z))
    assert any(op.TYPE == "element" and op.broadcasts for op in g.operators())


def test_concat_split_slice_are_channel_slices():
    n = Net(shape=(6, 5, 5))
    a, b = n.op("Split", [n.input, n.c([2, 4])], n_out=2, axis=1)
    s = n.op("Slice", [b, n.c([1]), n.c([100]), n.c([1])])
    cat = n.op("Concat", [s, a, n.input], axis=1)
    y = conv(n, cat, 11, 4, k=1)
    g = check(n.model(y))
    assert types(g) == ["conv"]
    assert [[(v.begin, v.end) for v in t] for t in g.exit_node.inputs] == [[(3, 6)], [(0, 2)], [(0, 6)]]


def test_channel_shuffle_and_flatten_reshape():
    n = Net(shape=(8, 4, 4))
    y = n.op("Reshape", [n.input, n.c([-1, 2, 4, 4, 4])])
    y = n.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
    y = n.op("Reshape", [y, n.c([-1, 8, 4, 4])])
    y = conv(n, y, 8, 4, k=1)
    y = n.op("Reshape", [y, n.c([0, -1])])
    g = check(n.model(n.op("Gemm", [y, n.w((3, 64))], transB=1)))
    assert types(g) == ["shuffle", "conv", "flatten", "linear"]


def test_channel_shuffle_through_shape_arithmetic():
    """ShuffleNet as exported by torch: the reshape targets come from Shape/Gather/Div arithmetic."""
    n = Net(shape=(8, 4, 4))
    shape = n.op("Shape", [n.input])
    parts = [n.op("Unsqueeze", [n.op("Gather", [shape, n.c(i)], axis=0), n.c([0])]) for i in range(4)]
    per = n.op("Div", [parts[1], n.c([2])])
    target = n.op("Concat", [parts[0], n.c([2]), per, parts[2], parts[3]], axis=0)
    y = n.op("Reshape", [n.input, target])
    y = n.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
    y = n.op("Reshape", [y, n.op("Concat", [parts[0], n.c([-1]), parts[2], parts[3]], axis=0)])
    g = check(n.model(n.op("Relu", [y])))
    assert types(g) == ["shuffle", "activation"]


@pytest.mark.parametrize("mode,attrs,size", [
    ("nearest", dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"), [2, 4, 10, 12]),
    ("nearest", dict(), None),
    ("linear", dict(coordinate_transformation_mode="pytorch_half_pixel"), [2, 4, 9, 11]),
    ("linear", dict(coordinate_transformation_mode="align_corners"), [2, 4, 9, 11]),
])
def test_resize(mode, attrs, size):
    n = Net(shape=(4, 5, 6))
    if size is None:
        y = n.op("Resize", [n.input, "", n.c([1, 1, 2, 2], np.float32)], mode=mode, **attrs)
    else:
        y = n.op("Resize", [n.input, "", "", n.c(size)], mode=mode, **attrs)
    g = check(n.model(y))
    assert types(g) == ["resize"]


def test_identity_dropout_constant_folding():
    n = Net()
    k = n.op("Constant", [], value=onh.from_array(np.full((1, 4, 1, 1), 3.0, np.float32)))
    y = n.op("Dropout", [n.op("Identity", [n.input])])
    g = check(n.model(n.op("Mul", [y, n.op("Identity", [k])])))
    assert types(g) == ["affine"]


# ---- refusals -----------------------------------------------------------------------------------
def _refusal(model) -> str:
    with pytest.raises(UnsupportedModel) as e:
        frontend.load(model)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_refusal_names_op_node_and_every_other_unsupported_type():
    n = Net()
    y = n.op("LRN", [n.input], size=3)
    y = n.op("LpNormalization", [y], axis=1)
    y = n.op("LRN", [y], size=3)
    msg = _refusal(n.model(n.op("Hardmax", [y], axis=1)))
    assert "unsupported ONNX operator LRN (node 'LRN_0')" in msg
    assert "other unsupported operator types: LpNormalization, Hardmax" in msg


@pytest.mark.parametrize("build,needle", [
    # a 3-D kernel on a 4-D input is not valid ONNX: the checker's reason names the node
    (lambda n: n.op("Conv", [n.input, n.w((4, 4, 3, 3, 3))]), "spatial dimensions"),
    (lambda n: n.op("Transpose", [n.input], perm=[1, 0, 2, 3]), "batch axis moved from the front"),
    (lambda n: n.op("Add", [n.input, n.w((2, 1, 8, 8))]), "along the batch axis"),
    (lambda n: n.op("Concat", [n.input, n.input], axis=0), "an operation along the batch axis"),
    (lambda n: n.op("Resize", [n.input, "", n.c([1, 1, 2, 2], np.float32)], mode="cubic"), "mode='cubic'"),
    (lambda n: n.op("Reshape", [n.input, n.c([-1, 8, 8])]), "reshape"),
])
def test_attribute_refusals(build, needle):
    n = Net()
    msg = _refusal(n.model(build(n)))
    assert needle in msg and "node" in msg


def test_refuses_two_inputs_and_non_float():
    n = Net()
    model = n.model(n.op("Relu", [n.input]))
    model.graph.input.append(oh.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8]))
    assert "2 inputs" in _refusal(model)
    model = Net().model(Net().op("Relu", ["x"]))
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    assert "not float32" in _refusal(model)


# ---- files, CLI ------------------------------------------------------------------------------------
def _small_cnn(path, batch="N"):
    n = Net(shape=(3, 16, 16), batch=batch)
    y = n.op("Relu", [conv(n, n.input, 3, 8, pads=[1, 1, 1, 1], strides=[2, 2])])
    a = conv(n, y, 8, 8, k=1)
    b = conv(n, y, 8, 8, pads=[1, 1, 1, 1])
    y = n.op("Relu", [n.op("Add", [a, b])])
    y = n.op("Flatten", [n.op("GlobalAveragePool", [y])])
    model = n.model(n.op("Gemm", [y, n.w((10, 8))], transB=1))
    onnx.save(model, str(path))
    return model


def test_load_file_save_json_roundtrip(tmp_path):
    _small_cnn(tmp_path / "net.onnx")
    graph = frontend.load(tmp_path / "net.onnx")
    assert graph.name == "net" and graph.source == {"format": "onnx", "path": str(tmp_path / "net.onnx")}
    graph.save(tmp_path / "net.json")
    again = Graph.load(tmp_path / "net.json")
    assert again.source == graph.source
    x = np.ones((1, 3, 16, 16), np.float32)
    np.testing.assert_array_equal(reference.run(again, x), reference.run(graph, x))


def test_cli_import_and_show(tmp_path, run_cli):
    _small_cnn(tmp_path / "net.onnx")
    code, out, err = run_cli(["import", str(tmp_path / "net.onnx"), "-o", str(tmp_path / "g.json")])
    assert code == 0, err
    assert (tmp_path / "g.json").is_file() and (tmp_path / "g.npz").is_file()
    assert "the file's weights" in out
    code, out, _ = run_cli(["show", str(tmp_path / "net.onnx")])
    assert code == 0 and "Conv2d" in out


def test_cli_refusal_is_one_line_exit_2(tmp_path, run_cli):
    n = Net()
    onnx.save(n.model(n.op("Hardmax", [n.op("LRN", [n.input], size=3)])), str(tmp_path / "bad.onnx"))
    code, out, err = run_cli(["import", str(tmp_path / "bad.onnx"), "-o", str(tmp_path / "bad.json")])
    assert code == 2
    assert err.strip().count("\n") == 0 and "LRN" in err and "Hardmax" in err
    assert not (tmp_path / "bad.json").exists()
    code, _, err = run_cli(["import", str(tmp_path / "missing.onnx")])
    assert code == 2 and "no such file" in err
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    code, _, err = run_cli(["import", str(tmp_path / "junk.onnx")])
    assert code == 2 and "not a readable ONNX model" in err


def test_sweep_on_an_onnx_file_checks_against_the_original(tmp_path):
    """`ios-bench run --models net.onnx`: a framework and an IOS schedule, each cell in its
    worker, checked against the oracle and onnxruntime on the original file (the file's weights,
    fixed batch 2 here: the independent reference runs in chunks for batch 4)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    _small_cnn(tmp_path / "net.onnx", batch=2)
    root = Path(__file__).resolve().parent.parent
    p = subprocess.run([sys.executable, "-m", "ios_bench", "run", "--models", str(tmp_path / "net.onnx"), "--batch",
                        "4", "--frameworks", "onnxruntime", "--schedules", "greedy", "--out", "runs/r", "--warmup",
                        "0", "--repeat", "1", "--min-sample-ms", "0", "--no-progress", "--no-report", "--rounds", "1",
                        "--ios-providers", "torch"], cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "runs" / "r" / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 and {r["kind"] for r in records} == {"framework", "ios"}
    for r in records:
        assert r["status"] == "ok", r.get("reason")
        assert r["check"]["passed"] and r["check"]["source"]["passed"], r["check"]


def test_cli_optimize_profile_export_on_onnx(tmp_path, run_cli):
    _small_cnn(tmp_path / "net.onnx")
    sched = tmp_path / "sched.json"
    code, _, err = run_cli(["optimize", "--model", str(tmp_path / "net.onnx"), "--batch", "1", "--strategy", "both",
                            "-o", str(sched)])
    assert code == 0, err
    code, out, err = run_cli(["profile", "--model", str(tmp_path / "net.onnx"), "--schedule", str(sched),
                              "--repeat", "2", "--warmup", "0", "--no-show-graph"])
    assert code == 0, err
    code, _, err = run_cli(["export", str(sched), "-o", str(tmp_path / "again.onnx"), "--dynamic-batch"])
    assert code == 0, err
    x = np.random.default_rng(3).standard_normal((2, 3, 16, 16)).astype(np.float32)
    a = ort.InferenceSession(str(tmp_path / "net.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    b = ort.InferenceSession(str(tmp_path / "again.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"input": x})[0]
    np.testing.assert_allclose(b.reshape(a.shape), a, rtol=0, atol=1e-4 * np.abs(a).max())
