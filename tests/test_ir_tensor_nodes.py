"""The general-tensor operators (ios_core/ir/tensor_nodes.py): shapes, validation, MACs, JSON, and
the oracle's kernel of each against an independent NumPy formula."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from ios_core import reference
from ios_core.ir import Graph, GraphBuilder, GraphError, Value
from ios_core.ir.tensor_nodes import TENSOR_TYPES


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x.astype(np.float64))


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _run(b: GraphBuilder, out: Value, x: np.ndarray, seed: int = 0):
    b.end_block(out)
    g = b.finish().init_weights(seed)
    return g, reference.run(g, x).astype(np.float64)


def _x(shape, n=2, seed=1):
    return np.random.default_rng(seed).standard_normal((n, *shape)).astype(np.float32)


# ---- shapes and validation --------------------------------------------------------------------------
def test_shapes_of_an_attention_head_split():
    b = GraphBuilder("g", (6, 8))  # 6 tokens x 8 features
    q = b.transpose(b.reshape(b.dense(b.input, 8), (6, 2, 4)), (1, 0, 2))
    k = b.transpose(b.reshape(b.dense(b.input, 8), (6, 2, 4)), (1, 2, 0))
    s = b.matmul(q, k)
    assert (q.node.output_shape, k.node.output_shape, s.node.output_shape) == ((2, 6, 4), (2, 4, 6), (2, 6, 6))
    assert s.node.macs() == 2 * 6 * 6 * 4
    assert q.node.inputs[0][0].node.inputs[0][0].node.macs() == 6 * 8 * 8  # the dense: per token
    p = b.prepend(b.input, rows=2)
    assert p.node.output_shape == (8, 8) and p.node.params() == 16
    ln = b.layernorm(b.input, axes=2)
    assert ln.node.weight_shape == (6, 8) and ln.node.params() == 2 * 48


@pytest.mark.parametrize("make, message", [
    (lambda b, x: b.matmul(x, x), "cannot multiply 6x8 by 6x8"),
    (lambda b, x: b.reshape(x, (5, 8)), "cannot reshape 6x8 to 5x8"),
    (lambda b, x: b.transpose(x, (1, 0, 2)), "perm .* for a shape of 2 axes"),
    (lambda b, x: b.softmax(x, axis=2), "axis 2 is outside a shape of 2 axes"),
    (lambda b, x: b.constant(x, (3, 8)), "a constant of shape 3x8 does not broadcast to 6x8"),
    (lambda b, x: b.layernorm(x, axes=3), "normalizes 3 axes of a shape of 2"),
    (lambda b, x: b.l2norm(x, axis=-3), "axis -3 is outside a shape of 2 axes"),
    (lambda b, x: b.l2norm(x, eps=0), r"eps must be a number in \(0, 1\)"),
    (lambda b, x: b.conv(x, 4, 1), r"takes a feature map \(C, H, W\), not a tensor of shape \(6, 8\)"),
])
def test_malformed_tensor_operators_are_refused_naming_the_node(make, message):
    b = GraphBuilder("g", (6, 8))
    try:
        out = make(b, b.input)
    except (GraphError, ValueError) as e:  # shape inference itself may refuse
        assert re.search(message, str(e)), str(e)
        return
    b.end_block(out)
    with pytest.raises(GraphError, match=message):
        b.finish()


def test_a_permutation_and_a_rank_are_checked():
    b = GraphBuilder("g", (6, 8))
    with pytest.raises(ValueError, match="perm must be a permutation"):
        b.transpose(b.input, (0, 0))
    with pytest.raises(GraphError, match="1 to 5 positive integers"):
        GraphBuilder("g", (1, 2, 3, 4, 5, 6))


def test_json_round_trip_of_every_tensor_type():
    b = GraphBuilder("g", (4, 2, 2))
    t = b.transpose(b.reshape(b.input, (4, 4)), (1, 0))
    t = b.constant(b.prepend(t), (5, 4))
    h = b.l2norm(b.layernorm(t, eps=1e-6), axis=0, eps=1e-9)
    a = b.softmax(b.constant(b.matmul(h, b.transpose(h, (1, 0))), (1,), "mul"), axis=0)
    out = b.dense(b.matmul(a, h), 3, act="gelu_tanh")
    b.end_block(out)
    g = b.finish().init_weights(0)
    assert {n.TYPE for n in g.operators()} >= set(TENSOR_TYPES)
    text = json.dumps(g.to_json())
    again = Graph.from_json(json.loads(text))
    assert json.dumps(again.to_json()) == text
    cfg = next(n for n in g.to_json()["blocks"][0]["inner_nodes"] if n["type"] == "softmax")
    assert cfg["axis"] == 0 and cfg["output_shape"] == [5, 5]
    cfg = next(n for n in g.to_json()["blocks"][0]["inner_nodes"] if n["type"] == "l2norm")
    assert cfg["axis"] == 0 and cfg["eps"] == 1e-9
    x = _x((4, 2, 2))
    again.init_weights(0)  # each node's weights are drawn from its name: the same arrays
    np.testing.assert_array_equal(reference.run(again, x), reference.run(g, x))


# ---- the oracle against NumPy ---------------------------------------------------------------------
def test_matmul_softmax_and_transpose():
    b = GraphBuilder("g", (2, 3, 4))
    at = b.transpose(b.input, (0, 2, 1))  # (2, 4, 3)
    s = b.softmax(b.matmul(b.input, at), axis=1)  # (2, 3, 3), softmax along the middle axis
    x = _x((2, 3, 4))
    _, got = _run(b, s, x)
    want = _softmax(np.matmul(x, np.swapaxes(x, 2, 3)).astype(np.float64), axis=2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0])
def test_l2norm_divides_by_the_norm_floored_at_eps(axis):
    b = GraphBuilder("g", (3, 4, 5))
    out = b.l2norm(b.input, axis=axis, eps=0.5)
    x = _x((3, 4, 5))
    x[0] *= 1e-3  # the first image: every norm under eps, divided by eps
    _, got = _run(b, out, x)
    x64 = x.astype(np.float64)
    norm = np.sqrt((x64 * x64).sum(axis=axis % 3 + 1, keepdims=True))
    np.testing.assert_allclose(got, x64 / np.maximum(norm, 0.5), rtol=1e-5, atol=1e-6)
    assert out.node.output_shape == (3, 4, 5)


def test_layernorm_over_the_last_two_axes():
    b = GraphBuilder("g", (3, 4, 5))
    out = b.layernorm(b.input, axes=2, eps=1e-3)
    x = _x((3, 4, 5))
    g, got = _run(b, out, x)
    ln = out.node
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(2, 3), keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=(2, 3), keepdims=True)
    want = (x64 - mean) / np.sqrt(var + 1e-3) * ln.weight + ln.bias
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh"])
def test_dense_with_gelu(act):
    b = GraphBuilder("g", (5, 6))
    out = b.dense(b.input, 7, act=act)
    x = _x((5, 6))
    _, got = _run(b, out, x)
    d = out.node
    y = x.astype(np.float64) @ d.weight.T.astype(np.float64) + d.bias
    if act == "gelu":
        want = 0.5 * y * (1 + _erf(y / np.sqrt(2)))
    else:
        want = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
    assert got.shape == (2, 5, 7)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_reshape_constant_prepend_and_the_class_token_slice():
    b = GraphBuilder("g", (4, 2, 3))
    t = b.transpose(b.reshape(b.input, (4, 6)), (1, 0))  # (6 tokens, 4 features)
    p = b.prepend(t)
    c = b.constant(p, (7, 4))
    m = b.constant(c, (4,), "mul")
    cls = b.identity(m.narrow(0, 1))  # the class token: the slice [0, 1) of the tokens
    x = _x((4, 2, 3))
    _, got = _run(b, cls, x)
    toks = x.reshape(2, 4, 6).transpose(0, 2, 1)
    seq = np.concatenate([np.broadcast_to(p.node.weight, (2, 1, 4)), toks], axis=1)
    want = ((seq + c.node.weight) * m.node.weight)[:, :1]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_an_element_sum_broadcasts_a_value_whose_trailing_axes_are_one():
    b = GraphBuilder("g", (3, 4))
    pooled = b.reshape(b.dense(b.input, 1), (3, 1))
    out = b.add([b.input, pooled])
    x = _x((3, 4))
    _, got = _run(b, out, x)
    d = pooled.node.inputs[0][0].node
    want = x + (x.astype(np.float64) @ d.weight.T + d.bias)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
