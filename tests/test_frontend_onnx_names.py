"""The ONNX importer keeps the user's own node names on the operators it makes (``node.meta``,
ios_core.ir.meta): the nodes folded into an operator too, a nameless node as ONNX tools show it; the
names survive a save and load of the graph file and key nothing (engine, plan, stage and build keys of
a graph with names are those of the same graph without)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper as oh  # noqa: E402

from ios_core.frontend import onnx as frontend  # noqa: E402
from ios_core.ir import Graph  # noqa: E402
from ios_core.ir.meta import SOURCE_NODES, source_nodes  # noqa: E402

from .test_frontend_onnx import Net, check, conv  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def named_model():
    """conv -> BatchNormalization -> a nameless Relu (folded into the conv), a zero Pad into a conv, a
    channel Concat read by a 1x1 conv, a pool, Flatten, then MatMul + Add (one linear layer)."""
    n = Net(shape=(4, 8, 8))
    c1 = conv(n, n.input, 4, 8, pads=[1] * 4)  # Conv_0
    bn = n.op("BatchNormalization", [c1, n.w((8,), offset=1.0), n.w((8,)), n.w((8,)), n.w((8,), 0.1, 1.0)])
    n.nodes.append(oh.make_node("Relu", [bn], ["relu_out"]))  # no name in the file
    pad = n.op("Pad", ["relu_out", n.c([0, 0, 1, 1, 0, 0, 1, 1])])
    c2 = conv(n, pad, 8, 8)
    cat = n.op("Concat", ["relu_out", c2], axis=1)
    c3 = conv(n, cat, 16, 8, k=1)
    flat = n.op("Flatten", [n.op("GlobalAveragePool", [c3])])
    return n.model(n.op("Add", [n.op("MatMul", [flat, n.w((8, 5))]), n.w((5,))]))


@pytest.fixture(scope="module")
def imported():
    return check(named_model())


def sources(graph):
    return [(op.TYPE, source_nodes(op)) for op in graph.operators()]


def test_each_operator_keeps_the_onnx_nodes_it_computes(imported):
    assert sources(imported) == [
        ("conv", ["Conv_0", "BatchNormalization_1", "(unnamed Relu -> relu_out)"]),  # conv + BN + Relu folded
        ("conv", ["Pad_2", "Conv_3"]),  # the zero Pad read into the convolution
        ("conv", ["Concat_4", "Conv_5"]),  # the channel Concat is composed in its reader
        ("pool", ["GlobalAveragePool_6"]),
        ("linear", ["MatMul_8", "Add_9"]),  # MatMul + Add: one linear layer (Flatten_7 computes nothing)
    ]
    assert [op.hint_name for op in imported.operators()][:2] == ["Conv_0", "Conv_3"]  # as before


def test_patterns_carry_every_node_they_cover():
    """Mul(x, Sigmoid(x)) (one silu), a channel shuffle's Reshape/Transpose/Reshape, the erf GELU's five
    nodes: each on the one operator it became, in the file's order."""
    n = Net(shape=(8, 4, 4))
    y = conv(n, n.input, 8, 8, k=1)
    y = n.op("Mul", [y, n.op("Sigmoid", [y])])
    y = n.op("Reshape", [y, n.c([-1, 2, 4, 4, 4])])
    y = n.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
    y = n.op("Reshape", [y, n.c([-1, 8, 4, 4])])
    half = n.op("Div", [y, n.w((), 0.0, np.sqrt(2.0))])
    gelu = n.op("Mul", [n.op("Mul", [y, n.op("Add", [n.op("Erf", [half]), n.w((), 0.0, 1.0)])]), n.w((), 0.0, 0.5)])
    g = check(n.model(gelu))
    assert sources(g) == [("conv", ["Conv_0"]), ("activation", ["Sigmoid_1", "Mul_2"]),
                          ("shuffle", ["Reshape_3", "Transpose_4", "Reshape_5"]),
                          ("activation", ["Div_6", "Erf_7", "Add_8", "Mul_9", "Mul_10"])]


def test_a_sigmoid_read_elsewhere_keeps_its_own_name():
    n = Net(shape=(4, 4, 4))
    s = n.op("Sigmoid", [n.input])
    y = n.op("Add", [n.op("Mul", [n.input, s]), s])
    assert sources(check(n.model(y))) == [("activation", ["Sigmoid_0"]), ("activation", ["Mul_1"]),
                                          ("element", ["Add_2"])]


def test_one_onnx_node_may_be_several_operators():
    """Sub of two activations: a negation (affine) and a sum, both computing Sub_1."""
    n = Net(shape=(4, 4, 4))
    y = n.op("Sub", [n.input, n.op("Relu", [n.input])])
    assert sources(check(n.model(y))) == [("activation", ["Relu_0"]), ("affine", ["Sub_1"]), ("element", ["Sub_1"])]


def test_the_names_survive_a_save_and_load_of_the_graph_file(imported, tmp_path):
    imported.save(tmp_path / "g.json")
    cfg = json.loads((tmp_path / "g.json").read_text())
    assert cfg["blocks"][0]["exit_node"]["meta"] == {SOURCE_NODES: ["Conv_0", "BatchNormalization_1",
                                                                    "(unnamed Relu -> relu_out)"]}
    back = Graph.load(tmp_path / "g.json")
    assert sources(back) == sources(imported)
    back.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == (tmp_path / "g.json").read_text()


def test_a_name_that_is_not_utf8_is_read_with_replacement_characters(tmp_path):
    data = named_model().SerializeToString()
    assert data.count(b"Conv_3") == 1
    g = frontend.load(data.replace(b"Conv_3", b"Conv\xff3"))  # the same length: the file stays valid
    assert sources(g)[1] == ("conv", ["Pad_2", "Conv\ufffd3"])
    g.save(tmp_path / "g.json")
    assert sources(Graph.load(tmp_path / "g.json"))[1] == ("conv", ["Pad_2", "Conv\ufffd3"])


@pytest.mark.parametrize("meta, why", [
    ([1], "must be an object"), ({SOURCE_NODES: "Conv_0"}, "must be a list"),
    ({SOURCE_NODES: ["Conv_0", ""]}, "non-empty string"), ({SOURCE_NODES: [3]}, "non-empty string"),
])
def test_a_bad_meta_in_a_graph_file_is_one_graph_error(imported, meta, why):
    from ios_core.ir import GraphError

    cfg = imported.to_json()
    cfg["blocks"][0]["exit_node"]["meta"] = meta
    with pytest.raises(GraphError, match=why):
        Graph.from_json(cfg)


def _stripped(graph):
    for op in graph.operators():
        op.meta.clear()
    return graph


def test_names_key_nothing():
    """Every key computed on a graph: the same with the names as without them."""
    from adapters.tensorrt import engine_key, graph_hash
    from ios_core.cost.cache import stage_signature
    from ios_core.lowering.onnx import export
    from ios_core.optimizer.optimize import _plan_key

    named, bare = frontend.load(named_model()), _stripped(frontend.load(named_model()))
    assert any(source_nodes(op) for op in named.operators()) and not any(op.meta for op in bare.operators())

    def keys(g):
        fp = {"name": "gpu", "compute_capability": "9.0"}
        return {"graph_hash": graph_hash(g), "engine": engine_key(g, 1, "10", fp, "0"),
                "plans": [_plan_key("cost", g, bi, "both", 1, 8, 3, 8) for bi in range(len(g.blocks))],
                "stages": [stage_signature("seq", [[op]])[0] for op in g.operators()],
                "onnx": export(g, 1).SerializeToString(), "json": json.dumps(g.to_json(meta=False))}

    assert keys(named) == keys(bare)
    assert json.dumps(named.to_json()) != json.dumps(bare.to_json())  # the file keeps them
    bare.exit_node.bias = bare.exit_node.bias + 1  # the keys do see what the graph computes
    assert keys(named)["graph_hash"] != keys(bare)["graph_hash"]


def test_graph_files_and_zoo_graphs_without_names_are_written_as_before():
    from ios_core.models import get

    path = ROOT / "docs/results/frameworks/runs/frameworks/schedules/squeezenet-b1-cpu-both.json"
    text = path.read_text()
    assert json.dumps(Graph.load(path).to_json(), indent=2) == text  # byte for byte
    zoo = get("squeezenet")
    assert json.dumps(zoo.to_json()) == json.dumps(zoo.to_json(meta=False))
    assert '"meta"' not in json.dumps(zoo.to_json())
