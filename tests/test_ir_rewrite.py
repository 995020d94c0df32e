"""ios_core.ir.rewrite: consumers kept up to date, replace-uses, dead-code removal, the import
passes, block discovery; the same primitives on a Graph; and the importer's work growing
linearly with the network's size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ios_core import reference
from ios_core.ir import Activation, Affine, Conv, Element, GraphBuilder, GraphError, Node, Placeholder, Value, whole
from ios_core.ir.rewrite import (
    NodeList,
    consumers_of,
    cut_blocks,
    fold_affine,
    fuse_activations,
    fuse_silu,
    live_nodes,
    run_passes,
)


def _node(cls, name, inputs, **attrs) -> Node:
    n = cls(name, inputs, **attrs)
    n.infer_shape()
    return n


def _chain():
    """x -> conv(identity) -> affine -> relu (-> out); a side tanh nobody reads."""
    x = Placeholder("x", (4, 5, 5))
    conv = _node(Conv, "conv", [[whole(x)]], out_channels=4, kernel=(3, 3), padding=(1, 1), act="identity")
    conv.weight = np.ones(conv.weight_shape, np.float32)
    conv.bias = np.zeros(4, np.float32)
    aff = _node(Affine, "aff", [[whole(conv)]])
    aff.weight = np.full(4, 2.0, np.float32)
    aff.bias = np.full(4, 1.0, np.float32)
    relu = _node(Activation, "relu", [[whole(aff)]], act_type="relu")
    side = _node(Activation, "side", [[whole(x)]], act_type="tanh")
    return x, [conv, aff, side, relu]


def test_consumers_are_kept_up_to_date_by_every_rewrite():
    x, (conv, aff, side, relu) = _chain()
    ops = NodeList([conv, aff, side, relu], relu)
    assert ops.consumers(conv) == [aff] and ops.consumers(aff) == [relu] and ops.consumers(relu) == []
    ops.replace_all_uses_with(aff, conv)
    assert relu.inputs[0][0].node is conv and ops.removed(aff)
    assert ops.consumers(conv) == [relu] and ops.sole_consumer(conv, relu)
    # the output follows a replacement, and a node that is the output is never a sole-consumer fusion target
    ops.replace_all_uses_with(relu, conv)
    assert ops.output is conv and not ops.sole_consumer(conv, relu)
    assert ops.eliminate_dead_code() == [conv]
    assert list(ops) == [conv] and ops.removed(side)


def test_insert_before_keeps_order_and_consumers():
    x, (conv, aff, side, relu) = _chain()
    ops = NodeList([conv, aff, relu], relu)
    extra = _node(Activation, "extra", [[whole(conv)]], act_type="sigmoid")
    ops.insert_before(aff, extra)
    assert list(ops) == [conv, extra, aff, relu]
    assert ops.consumers(conv) == [aff, extra]
    ops.remove(extra)
    assert list(ops) == [conv, aff, relu] and ops.consumers(conv) == [aff]


def test_fold_affine_then_fuse_activation_matches_the_unfused_graph():
    x, (conv, aff, side, relu) = _chain()
    inp = np.random.default_rng(0).standard_normal((1, 4, 5, 5)).astype(np.float32)
    import torch

    want = torch.relu(2 * torch.conv2d(torch.from_numpy(inp), torch.ones(4, 4, 3, 3), padding=1) + 1).numpy()
    live = run_passes([conv, aff, side, relu], relu, [fold_affine, fuse_activations])
    assert live == [conv] and conv.act == "relu"
    np.testing.assert_allclose(conv.weight, 2.0) and np.testing.assert_allclose(conv.bias, 1.0)
    from ios_core.ir import Block, Graph

    g = Graph("folded", x, [Block(x, [], conv)]).validate()
    np.testing.assert_allclose(reference.run(g, inp), want, rtol=1e-5, atol=1e-5)


def test_no_fusion_when_the_producer_has_another_reader():
    x, (conv, aff, side, relu) = _chain()
    other = _node(Activation, "other", [[whole(conv)]], act_type="tanh")
    out = _node(Element, "out", [[whole(relu), whole(other)]], op_type="add")
    live = run_passes([conv, aff, side, relu, other, out], out)
    assert aff in live and relu not in live and aff.act == "relu"  # relu fused into the affine instead
    assert conv.act == "identity"


def test_silu_replaces_mul_of_sigmoid_and_the_sigmoid_dies():
    x = Placeholder("x", (3, 4, 4))
    sig = _node(Activation, "sig", [[whole(x)]], act_type="sigmoid")
    mul = _node(Element, "mul", [[whole(x), whole(sig)]], op_type="mul")
    out = _node(Activation, "out", [[whole(mul)]], act_type="tanh")
    ops = NodeList([sig, mul, out], out)
    fuse_silu(ops)
    live = ops.eliminate_dead_code()
    assert [n.TYPE for n in live] == ["activation", "activation"]
    assert live[0].act_type == "silu" and out.inputs[0][0].node is live[0]


def test_live_nodes_and_consumers_of():
    x, (conv, aff, side, relu) = _chain()
    assert live_nodes([conv, aff, side, relu], [relu]) == [conv, aff, relu]
    users = consumers_of([conv, aff, side, relu])
    assert users[id(x)] == [conv, side] and users[id(conv)] == [aff]


def test_cut_blocks_cuts_only_where_nothing_later_reads_back():
    x = Placeholder("x", (2, 3, 3))
    a = _node(Activation, "a", [[whole(x)]], act_type="relu")
    b = _node(Activation, "b", [[whole(a)]], act_type="tanh")
    c = _node(Element, "c", [[whole(a), whole(b)]], op_type="add")  # reads a: no cut after a
    d = _node(Activation, "d", [[whole(c)]], act_type="relu")
    blocks = cut_blocks(x, [a, b, c, d])
    assert [(e.name, [n.name for n in inner], ex.name) for e, inner, ex in blocks] == [
        ("x", [], "a"), ("a", ["b"], "c"), ("c", [], "d")]


def test_graph_consumers_replace_and_eliminate_dead_code():
    b = GraphBuilder("g", (4, 6, 6))
    a = b.conv(b.input, 4, 3, padding=1)
    dead = b.conv(b.input, 4, 1)
    c = b.conv(a, 4, 1)
    d = b.conv(a, 4, 3, padding=1)
    b.end_block(b.add([c, d]))
    g = b.finish().init_weights(0)
    users = g.consumers()
    assert [n.name for n in users[a.node.name]] == [c.node.name, d.node.name]
    assert users[dead.node.name] == []
    # c's reader now reads d twice; c and the never-read conv are dead
    assert [n.name for n in g.replace_all_uses_with(c.node, d.node)] == [g.exit_node.name]
    removed = g.eliminate_dead_code()
    assert {n.name for n in removed} == {c.node.name, dead.node.name}
    g.validate()
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)
    import torch

    t = torch.from_numpy(x)
    ya = torch.relu(torch.conv2d(t, torch.from_numpy(a.node.weight), torch.from_numpy(a.node.bias), padding=1))
    yd = torch.relu(torch.conv2d(ya, torch.from_numpy(d.node.weight), torch.from_numpy(d.node.bias), padding=1))
    np.testing.assert_allclose(reference.run(g, x), (yd + yd).numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(GraphError, match="cannot be replaced"):
        g.replace_all_uses_with(g.exit_node, a.node)
    assert isinstance(Value(a.node, 0, 4), Value)


def _import_work(units: int) -> int:
    """Calls of Node.predecessors while importing a ``units``-unit synthetic network."""
    pytest.importorskip("onnx")
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_import.py"
    spec = importlib.util.spec_from_file_location("bench_import", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    UNIT_NODES, make_model = bench.UNIT_NODES, bench.make_model
    from ios_core.frontend import onnx as frontend

    calls = [0]
    original = Node.predecessors

    def counted(self):
        calls[0] += 1
        return original(self)

    model = make_model(units * UNIT_NODES)
    Node.predecessors = counted
    try:
        g = frontend.load(model)
    finally:
        Node.predecessors = original
    assert len(g.blocks) == 2 * units  # a cut after the residual sum and after the last relu
    return calls[0]


def test_import_work_grows_linearly_with_the_network():
    small, big = _import_work(20), _import_work(80)
    # linear: 4x the nodes, about 4x the work (quadratic passes did about 16x)
    assert big <= 4.4 * small, (small, big)
