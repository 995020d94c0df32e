"""ios_core.ir.meta on its own: the source nodes recorded on a node (each once, in the file's order,
those folded in before or after), how a nameless node is shown, and a node's ``"meta"`` written and
read back (the limits on what a file may hold). The ONNX importer's use of it: test_frontend_onnx_names."""

from __future__ import annotations

import json

import pytest

from ios_core.ir import Graph, GraphBuilder, GraphError
from ios_core.ir.meta import (
    SOURCE_NODES,
    absorb,
    absorb_before,
    add_source_nodes,
    meta_from_json,
    meta_to_json,
    source_nodes,
    unnamed,
)


def _nodes(count: int, *names_each):
    b = GraphBuilder("m", (3, 4, 4))
    nodes = [b.conv(b.input, 3, 1).node for _ in range(count)]
    for node, names in zip(nodes, names_each):
        if names:
            node.meta[SOURCE_NODES] = list(names)
    return nodes


def test_names_are_added_each_once_after_those_a_node_has():
    (n,) = _nodes(1, ["Conv_0"])
    add_source_nodes(n, ["Relu_2", "Conv_0", "Relu_2", "Add_3"])
    assert source_nodes(n) == ["Conv_0", "Relu_2", "Add_3"]
    add_source_nodes(n, ["Add_3"])
    assert source_nodes(n) == ["Conv_0", "Relu_2", "Add_3"]


def test_a_node_without_names_gains_no_meta_from_nodes_without_names():
    a, b = _nodes(2)
    absorb(a, b)
    absorb_before(a, b)
    add_source_nodes(a, [])
    assert a.meta == {} and source_nodes(a) == []  # a zoo graph's nodes stay as they were written


def test_absorbed_names_come_after_and_absorbed_before_names_first():
    conv, bn, act, sig = _nodes(4, ["Conv_1"], ["BatchNormalization_2"], ["Relu_3"], ["Sigmoid_0"])
    absorb(conv, bn, act)
    assert source_nodes(conv) == ["Conv_1", "BatchNormalization_2", "Relu_3"]
    absorb_before(conv, sig)
    assert source_nodes(conv) == ["Sigmoid_0", "Conv_1", "BatchNormalization_2", "Relu_3"]
    assert source_nodes(bn) == ["BatchNormalization_2"]  # the absorbed keep their own


def test_a_nameless_node_is_shown_by_its_output_else_its_position():
    assert unnamed("Relu", "y") == "(unnamed Relu -> y)"
    assert unnamed("Relu", "y", 4) == "(unnamed Relu -> y)"
    assert unnamed("Relu", "", 4) == "(unnamed Relu #4)"
    assert unnamed("Relu", None, 0) == "(unnamed Relu #0)"
    assert unnamed("Relu", None) == "(unnamed Relu)"


def test_meta_as_json_is_a_copy():
    names = ["Conv_0"]
    meta = {SOURCE_NODES: names, "other": ("a", "b"), "flag": 1}
    out = meta_to_json(meta)
    assert out == {SOURCE_NODES: ["Conv_0"], "other": ["a", "b"], "flag": 1}
    out[SOURCE_NODES].append("Relu_1")
    assert names == ["Conv_0"]  # writing the JSON's list leaves the node's alone


def test_a_file_may_give_a_node_ten_thousand_names_not_more():
    names = [f"n{i}" for i in range(10_000)]
    assert meta_from_json({SOURCE_NODES: names}, "node 'c'")[SOURCE_NODES] == names
    with pytest.raises(GraphError, match="has 10001 names"):
        meta_from_json({SOURCE_NODES: [*names, "one_more"]}, "node 'c'")


def test_meta_keys_must_be_strings_and_other_keys_are_kept():
    with pytest.raises(GraphError, match="node 'c': meta keys must be strings"):
        meta_from_json({1: "x"}, "node 'c'")
    assert meta_from_json({"note": 3}, "node 'c'") == {"note": 3}


def test_a_graph_file_keeps_a_nodes_meta():
    b = GraphBuilder("m", (3, 4, 4))
    add_source_nodes(b.conv(b.input, 3, 1).node, ["Conv_0", "Relu_1"])
    b.conv(b.input, 3, 1)  # no names: no "meta" written
    cfg = json.loads(json.dumps(b.finish().to_json()))
    assert json.dumps(cfg).count('"meta"') == 1
    back = Graph.from_json(cfg)
    assert [source_nodes(op) for op in back.operators()] == [["Conv_0", "Relu_1"], []]
