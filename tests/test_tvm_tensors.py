"""adapters/tvm_tensors.py: the general-tensor operators as Relax ops (target llvm, CPU), against the
oracle: each operator on small token graphs (ranks 1 to 5, every axis the operator takes), the
erf and tanh GELUs told apart, a one-block ViT and a ConvNeXt block (the zoo's vit_tiny and
convnext_tiny at batch 1: slow); the ViT block compiled for cuda; the fp16 refusal; and a CNN
graph's Relax module and build-cache key exactly what they were before this module existed."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import adapters
from adapters import tvm_cache
from ios_core import reference
from ios_core.check import compare
from ios_core.ir import GraphBuilder
from ios_core.ir.tensor_nodes import TENSOR_TYPES
from tests.adapter_graphs import imported_ops, mini_inception
from tests.test_ops_transformer import one_block_vit, tiny_convnext

TVM = adapters.get("tvm")
pytestmark = pytest.mark.skipif(TVM.available() is not None, reason=f"tvm unavailable: {TVM.available()}")
BATCH = 2


def _tokens(name: str):
    """A builder and 4 tokens x 8 features (a 2x2 stride-2 convolution's map, read as a sequence)."""
    b = GraphBuilder(name, (3, 4, 4))
    c = b.conv(b.input, 8, 2, stride=2, act="identity")  # (8, 2, 2)
    return b, c, b.transpose(b.reshape(c, (8, 4)), (1, 0))  # (4, 8)


def _done(b: GraphBuilder, out):
    """The graph, its weights drawn; the dense layers' biases made nonzero (their own are zero, which
    would hide a bias left out)."""
    g = b.finish(out).init_weights(0)
    rng = np.random.default_rng(1)
    for op in g.operators():
        if op.TYPE == "dense":
            op.bias = (0.1 * rng.standard_normal(op.out_features)).astype(np.float32)
    return g


def matmul_graph():
    """Products of activations of rank 2, 3 (heads) and 4, each by a transpose of itself."""
    b, _, t = _tokens("tvm_matmul")
    h = b.transpose(b.reshape(t, (4, 2, 4)), (1, 0, 2))  # (2, 4, 4)
    s3 = b.matmul(h, b.transpose(h, (0, 2, 1)))
    s2 = b.matmul(t, b.transpose(t, (1, 0)))  # (4, 4)
    h4 = b.reshape(t, (2, 2, 2, 4))
    s4 = b.matmul(h4, b.transpose(h4, (0, 1, 3, 2)))  # (2, 2, 2, 2)
    return _done(b, b.concat([b.reshape(s3, (8, 4)), s2, b.reshape(s4, (4, 4))]))


def softmax_graph():
    """Softmax along the last axis, the first, and the middle one of a rank-3 tensor."""
    b, _, t = _tokens("tvm_softmax")
    s2 = b.softmax(b.reshape(t, (2, 4, 4)), axis=1)
    return _done(b, b.concat([b.softmax(t), b.softmax(t, axis=0), b.reshape(s2, (4, 8))]))


def l2norm_graph():
    """The norm along the last axis and the first, and a norm under its ``eps`` (the floor taken)."""
    b, _, t = _tokens("tvm_l2norm")
    small = b.constant(t, (1,), "mul")
    g = _done(b, b.concat([b.l2norm(t), b.l2norm(t, axis=0), b.l2norm(small, eps=0.5)]))
    small.node.weight = np.full((1,), 0.01, np.float32)  # norms of about 0.03: floored at 0.5
    return g


def layernorm_graph():
    """Layer norm over the last axis and over the last two of a rank-3 tensor."""
    b, _, t = _tokens("tvm_layernorm")
    two = b.layernorm(b.reshape(t, (2, 2, 8)), axes=2, eps=1e-3)
    return _done(b, b.concat([b.layernorm(t), b.reshape(two, (4, 8))]))


def dense_graph():
    """Dense layers with both GELUs, on tokens of rank 1, 2 and 3."""
    b, _, t = _tokens("tvm_dense")
    d3 = b.reshape(b.dense(b.reshape(t, (2, 2, 8)), 6), (4, 6))
    d1 = b.reshape(b.dense(b.reshape(t, (32,)), 6, act="relu"), (1, 6))
    return _done(b, b.concat([b.dense(t, 6, act="gelu"), b.dense(t, 6, act="gelu_tanh"), d3, d1]))


def layout_graph():
    """Reshapes to ranks 4 and 5 and transposes of them."""
    b, _, t = _tokens("tvm_layout")
    p4 = b.transpose(b.reshape(t, (2, 2, 2, 4)), (3, 1, 0, 2))  # (4, 2, 2, 2)
    p5 = b.transpose(b.reshape(p4, (2, 2, 2, 2, 2)), (4, 0, 3, 1, 2))
    return _done(b, b.concat([b.reshape(p5, (4, 8)), t]))


def constant_graph():
    """Constants of every broadcast shape, added and multiplied, on tokens and on a feature map;
    two learned rows put first."""
    b, c, t = _tokens("tvm_constant")
    x = b.constant(b.constant(b.constant(b.constant(t, (4, 8)), (8,), "mul"), (4, 1)), (1,), "mul")
    m = b.reshape(b.constant(c, (8, 1, 1), "mul"), (4, 8))
    return _done(b, b.concat([b.prepend(x, rows=2), m]))


def compose_graph():
    """Slices, sums and concatenations of token sequences; a per-token scale broadcast over the
    features (a (4, 1) value); affine on tokens of rank 2 and 1; an activation."""
    b, _, t = _tokens("tvm_compose")
    summed = b.add([t.narrow(0, 2), t.narrow(2, 4)])
    scaled = b.mul([t, b.dense(t, 1)])
    flat = b.reshape(b.affine(b.reshape(t, (32,))), (4, 8))
    return _done(b, b.concat([summed, scaled, b.affine(t, act="relu"), flat, b.activation(t.narrow(1, 3), "tanh")]))


OPERATOR_GRAPHS = {"matmul": matmul_graph, "softmax": softmax_graph, "l2norm": l2norm_graph,
                   "layernorm": layernorm_graph, "dense": dense_graph, "layout": layout_graph,
                   "constant": constant_graph, "compose": compose_graph}


def _check(graph, batch=BATCH, tolerance=None, x=None):
    x = reference.random_input(graph, batch, seed=1) if x is None else x
    out = TVM.build(graph, batch, threads=1).run(x)
    result = compare(out, reference.run(graph, x), TVM.tolerance if tolerance is None else tolerance)
    assert result.passed, f"{graph.name}: {result.reason}"
    return out


def test_the_operator_graphs_hold_every_general_tensor_operator():
    types = {op.TYPE for make in OPERATOR_GRAPHS.values() for op in make().operators()}
    assert set(TENSOR_TYPES) <= types


@pytest.mark.parametrize("name", sorted(OPERATOR_GRAPHS))
def test_each_operator_matches_the_oracle(name):
    _check(OPERATOR_GRAPHS[name]())


@pytest.mark.parametrize("make", [one_block_vit, tiny_convnext], ids=["vit_block", "convnext_block"])
def test_a_vit_block_and_a_convnext_block_match_the_oracle(make):
    from adapters.tvm import to_relax

    graph = make()
    text = to_relax(graph, BATCH)[0].script()
    # Relax's own operators, not a decomposition of them
    assert "R.nn.layer_norm" in text and "R.permute_dims" in text and "R.matmul" in text
    if graph.name == "vit_block":
        assert "R.nn.softmax" in text and "R.nn.gelu(" in text and "R.concat" in text
        # ViT's own initialization (std 0.02) leaves a one-block ViT's attention almost uniform, which a
        # softmax along the wrong axis would match: weights 25 times larger make it peaked
        for op in graph.operators():
            if op.TYPE == "dense":
                op.weight = op.weight * np.float32(25)
    _check(graph)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["vit_tiny", "convnext_tiny"])
def test_the_zoo_transformers_match_the_oracle_at_batch_1(model):
    """Untuned TVM runs naive loops: vit_tiny about 3 s a call here, convnext_tiny about 12 s (under load)."""
    from ios_core import models

    _check(models.get(model).init_weights(0), batch=1)


@pytest.mark.slow
def test_tvm_tuned_tunes_the_vit_blocks_tasks_and_matches_the_oracle(tmp_path):
    """MetaSchedule on the ViT block's fused tasks (layer norm, softmax, the batched products among
    them), one trial each: about 3 minutes here, most of it MetaSchedule's first import."""
    tuned = adapters.get("tvm-tuned")
    if tuned.available():
        pytest.skip(tuned.available())
    graph = one_block_vit()
    x = reference.random_input(graph, BATCH, seed=0)
    built = tuned.build(graph, BATCH, threads=2, db=str(tmp_path / "db"), trials_per_task=1)
    assert built.info["tasks_total"] > 10 and built.info["tasks_untuned"] == 0
    result = compare(built.run(x), reference.run(graph, x), tuned.tolerance)
    assert result.passed, result.reason


def test_the_erf_and_tanh_gelus_are_told_apart():
    """A dense layer of weight 3I, so its GELU sees values up to about 10, where the two forms differ by
    about 1e-4 of the output; each matches its own form at 1e-5."""
    outs = {}
    for act in ("gelu", "gelu_tanh"):
        b, _, t = _tokens(f"tvm_{act}")
        d = b.dense(t, 8, act=act)
        g = b.finish(d).init_weights(0)
        d.node.weight, d.node.bias = 3 * np.eye(8, dtype=np.float32), np.zeros(8, np.float32)
        outs[act] = _check(g, tolerance=1e-5, x=3 * reference.random_input(g, BATCH, seed=2))
    assert compare(outs["gelu"], outs["gelu_tanh"], 1e-5).max_rel_err > 1e-5


def test_the_vit_block_compiles_for_cuda_without_a_gpu():
    """The cuda cell's fp32 pipeline (DLight's GPU schedules) takes layer norm, softmax and the batched
    products: compiled for sm_90 here, every kernel bound to GPU threads (no GPU to run it)."""
    from tests.test_tvm import compile_for_cuda

    _, cuda = compile_for_cuda(one_block_vit())
    assert len(cuda) == 1 and "threadIdx.x" in cuda[0].inspect_source("cuda")


def test_fp16_is_refused_on_general_tensors_in_one_line():
    graph = one_block_vit()
    with pytest.raises(ValueError, match=r"^tvm: precision fp16 is not built for graph 'vit_block' \(node '\d+' of "
                                         r"type '\w+', a general tensor\)") as got:
        TVM._build(graph, 1, "cuda", None, precision="fp16", target={"kind": "cuda", "arch": "sm_80"})
    assert "\n" not in str(got.value)


# The Relax text (sha256) and the build cache's key of CNN graphs, written before adapters/tvm_tensors.py
# existed (apache-tvm 0.27.0.post1, tvm-ffi 0.1.14.post0): the CNN path must give them unchanged.
CNN_BEFORE = {
    "0.27.0.post1 tvm-ffi 0.1.14.post0": {
        "mini_inception": ("de61cb51ac8b9e36aa19c76282d96cbfb7c57b8fe0febd6f494401b8bafbe781",
                           "76594930924250b9ec86b3450a863f3c"),
        "imported_ops": ("6cb317696a6a72878d013e8ef3a6eb39c857ddbb4e1ec325b98fc3af1790709c",
                         "caf3b8f9442f24308c035a95178a7632"),
    },
}


@pytest.mark.parametrize("make", [mini_inception, imported_ops], ids=["mini_inception", "imported_ops"])
def test_a_cnn_graphs_relax_module_and_cache_key_are_unchanged(make):
    from adapters.tvm import to_relax

    recorded = CNN_BEFORE.get(tvm_cache.versions())
    if recorded is None:
        pytest.skip(f"recorded with another TVM than {tvm_cache.versions()}")
    graph = make().init_weights(0)
    mod = to_relax(graph, 1)[0]
    key = tvm_cache.build_key(mod, batch_size=1, precision="fp32", target="llvm", cudnn=False, pipeline="p")
    assert (hashlib.sha256(mod.script().encode()).hexdigest(), key) == recorded[graph.name]
