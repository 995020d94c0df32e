"""The one walk: input composition written once (ios_core.lowering), used by every converter."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from ios_core import kernels, reference
from ios_core.ir import GraphBuilder, Value
from ios_core.lowering import Primitives, compose, composition, lower, lower_nodes
from ios_core.runtime.emit_torch import CLOSURE_PRIMS
from tests.adapter_graphs import mini_inception
from tests.runtime_helpers import mixed_graph

NUMPY_PRIMS = Primitives(
    slice_channels=lambda t, b, e: t[:, b:e],
    add=lambda ts: functools.reduce(np.add, ts),
    mul=lambda ts: functools.reduce(np.multiply, ts),
    concat=lambda ts: np.concatenate(ts, axis=1),
)


def _torch_emit(op, x):
    return kernels.apply(op, x)


def _numpy_emit(op, x):
    return kernels.apply(op, torch.from_numpy(np.ascontiguousarray(x))).numpy()


def _closure_emit(op, f):
    return lambda: kernels.apply(op, f())


def _closure_lower(graph, x):
    return lower(graph, lambda: x, CLOSURE_PRIMS, _closure_emit)()


@pytest.fixture(scope="module", params=["mixed", "mini_inception"])
def graph(request):
    g = mixed_graph() if request.param == "mixed" else mini_inception()
    return g.init_weights(5)


@pytest.mark.parametrize("batch", [1, 2])
def test_every_primitive_set_matches_the_oracle(graph, batch):
    x = reference.random_input(graph, batch, seed=batch)
    ref = reference.run(graph, x)
    with torch.inference_mode():
        by_torch = lower(graph, torch.from_numpy(x), kernels.TORCH_PRIMS, _torch_emit).numpy()
        by_numpy = lower(graph, x, NUMPY_PRIMS, _numpy_emit)
        by_closures = _closure_lower(graph, torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(by_torch, ref)  # the oracle is this walk with torch primitives
    # other primitive sets compute the same values (summation order kept: left to right)
    np.testing.assert_allclose(by_numpy, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(by_closures, ref, rtol=1e-5, atol=1e-6)


def test_symbolic_primitives_record_the_structure():
    """A graph-building primitive set (as the ONNX exporter's) sees each slice, sum, product and
    concatenation once, in input order."""
    b = GraphBuilder("sym", (6, 4, 4))
    x = b.input
    a = b.conv(x, 6, 1)
    c = b.conv(x, 6, 1)
    m = b.mul([a, Value(c.node, 0, 6), c])
    s = b.add([Value(a.node, 0, 3), Value(c.node, 3, 6)])
    out = b.concat([m, s, Value(a.node, 2, 4)])
    b.end_block(out)
    g = b.finish()
    prims = Primitives(
        slice_channels=lambda t, b_, e: f"{t}[{b_}:{e}]",
        add=lambda ts: "(" + "+".join(ts) + ")",
        mul=lambda ts: "(" + "*".join(ts) + ")",
        concat=lambda ts: "cat(" + ",".join(ts) + ")",
    )
    outputs = lower_nodes(g.blocks[0].nodes, {g.input.name: "x"}, prims,
                          lambda op, t: f"{op.hint_name}<{t}>" if op.TYPE == "conv" else t)
    na, nc = a.node.hint_name, c.node.hint_name
    assert outputs[out.node.name] == (f"cat(({na}<x>*{nc}<x>*{nc}<x>),({na}<x>[0:3]+{nc}<x>[3:6]),"
                                      f"{na}<x>[2:4])")


def test_composition_describes_terms_slices_and_offsets():
    b = GraphBuilder("c", (8, 4, 4))
    x = b.input
    a = b.conv(x, 8, 1)
    c = b.conv(x, 4, 1)
    m = b.mul([Value(a.node, 4, 8), c])
    cat = b.concat([a, Value(c.node, 1, 3), c])
    b.end_block(b.add([cat, cat]))
    b.finish()
    comp = composition(m.node)
    assert comp.op == "mul" and len(comp.terms) == 1 and comp.channels == 4
    (s1, s2) = comp.terms[0].slices
    assert (s1.source, s1.begin, s1.end, s1.whole) == (a.node, 4, 8, False) and s2.whole
    assert comp.single is None and not comp.pass_through and not comp.is_concat
    comp = composition(cat.node)
    assert comp.op == "add" and comp.is_concat and comp.channels == 14
    assert [(t.offset, t.channels) for t in comp.terms] == [(0, 8), (8, 2), (10, 4)]
    assert [s.whole for s in comp.slices] == [True, False, True]


def _naive_input(node, outs):
    """The IR's input semantics written out plainly (an independent statement of them)."""
    mul = node.TYPE == "element" and node.op_type == "mul"
    terms = []
    for term in node.inputs:
        acc = None
        for v in term:
            t = outs[v.node.name][:, v.begin:v.end]
            acc = t if acc is None else (acc * t if mul else acc + t)
        terms.append(acc)
    return torch.cat(terms, 1)


def test_compose_matches_the_plain_semantics_for_every_operator():
    g = mixed_graph().init_weights(1)
    x = torch.from_numpy(reference.random_input(g, 2))
    nodes = [n for blk in g.blocks for n in blk.nodes]
    with torch.inference_mode():
        outs = lower_nodes(nodes, {g.input.name: x}, kernels.TORCH_PRIMS, _torch_emit)
        checked = 0
        for op in g.operators():
            assert torch.equal(compose(op, outs, kernels.TORCH_PRIMS), _naive_input(op, outs)), op.name
            checked += 1
    assert checked == len(list(g.operators())) > 10


def test_unsupported_node_types_are_refused_by_name():
    g = mini_inception()
    with pytest.raises(NotImplementedError, match="conv"):
        lower(g, None, NUMPY_PRIMS, _numpy_emit, supported=("pool",))
