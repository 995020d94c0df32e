"""IOS's CUDA runtime on general tensors (issue 56, item 5): a one-block vision transformer, a tiny
ConvNeXt and Swin V2's cosine attention (tests/test_ops_transformer.py's graphs) run by the CUDA
executor on the strict fake device (tests/stream_fakes.py; its general-tensor kernels in
tests/stream_fakes_tensors.py), IOS-Sequential and parallel schedules (every dependency level a
stage, and the DP scheduler's), with and without CUDA-graph capture, in random CUDA-legal stream
orders, against the oracle. Not run on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from ios_core import optimize, reference
from ios_core.check import check_precision, compare, tolerance_for
from ios_core.cost import SyntheticCostModel
from ios_core.ir import GraphBuilder, Value
from ios_core.ir.tensor_nodes import MatMul
from ios_core.reference import random_input
from tests.stream_fakes import TorchQueueDevice
from tests.test_ops_transformer import GRAPHS
from tests.test_runtime_cuda_fake import _asap

BATCH = 2
FP32 = tolerance_for("fp32")


def _runtime(graph, batch=BATCH, seed=0, cuda_graph=False, precision="fp32", device=None):
    from ios_core.runtime.cuda import CudaRuntime

    dev = device if device is not None else TorchQueueDevice(seed, precision=precision)
    return CudaRuntime(graph, batch, "cuda", backend=dev, cuda_graph=cuda_graph, precision=precision)


def _schedule(graph, how):
    if how == "sequential":
        return graph
    if how == "levels":
        return _asap(graph)
    return optimize(graph, how, SyntheticCostModel(), batch_size=BATCH)


def peaked(make):
    """``make``'s graph with its attention scores scaled up (the learned scalar before the softmax):
    with ViT's initialization the scores are near 0 and the softmax near uniform along either axis,
    so a softmax along the wrong axis would pass unseen."""
    def build():
        g = make()
        for n in g.operators():
            if n.TYPE == "constant" and n.op_type == "mul" and tuple(n.weight_shape) == (1,):
                n.weight = np.full((1,), 300.0, np.float32)
        return g
    return build


@pytest.fixture(scope="module")
def cases():
    out = {}
    for name, make in GRAPHS.items():
        make = peaked(make) if name == "vit" else make
        g = make()
        x = random_input(g, BATCH, seed=3)
        out[name] = (make, x, reference.run(g, x))
    return out


@pytest.mark.parametrize("cuda_graph", [False, True])
@pytest.mark.parametrize("how", ["sequential", "levels", "parallel"])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_cuda_runtime_runs_general_tensors_like_the_oracle(cases, name, how, cuda_graph):
    make, x, ref = cases[name]
    graph = _schedule(make(), how)
    for seed in range(3):  # random CUDA-legal stream orders
        rt = _runtime(graph, seed=seed, cuda_graph=cuda_graph)
        for _ in range(2):  # a second run reuses every buffer (fresh memory is NaN)
            out = rt.run(x)
        chk = compare(out, ref, FP32)
        assert chk.passed, (name, how, cuda_graph, seed, chk)
    assert rt.stats["cuda_graph"] is cuda_graph
    if how != "sequential" and name != "convnext":  # ConvNeXt is a chain: nothing to run side by side
        assert rt.stats["streams"] >= 2, rt.stats["streams"]  # the parallel stages ran on streams of their own


def test_every_general_tensor_kernel_is_launched(cases):
    make, x, _ = cases["cosine"]
    rt = _runtime(make())
    rt.run(x)
    kinds = {k for fn in rt.program.kernels for k in getattr(fn, "kinds", ())}
    assert kinds >= {"ios_matmul", "ios_layernorm", "ios_rownorm", "ios_strided"}
    types = {n.TYPE for g in (m() for m, _, _ in cases.values()) for n in g.operators()}
    assert types >= {"matmul", "softmax", "layernorm", "dense", "reshape", "transpose", "constant", "prepend", "l2norm"}


def test_a_summed_operand_is_composed_into_scratch_and_matches():
    b = GraphBuilder("operand_sum", (3, 4, 4))
    x = b.transpose(b.reshape(b.conv(b.input, 6, 2, stride=2, act="identity"), (6, 4)), (1, 0))  # 4 tokens x 6
    p, q = b.dense(x, 6), b.dense(x, 6)
    w = b.transpose(b.dense(x, 8), (1, 0))  # 8 features x 4 tokens
    # (4 x 6) @ (6 x 4): the first operand a sum of two values (one term of two), the second a slice read in place
    y = b._add(MatMul(b._new_name(), [[p, q], [w.narrow(2, 8)]]))
    b.end_block(b.layernorm(b.softmax(y, axis=0), axes=2))
    g = b.finish().init_weights(2)
    x_in = random_input(g, BATCH, seed=1)
    ref = reference.run(g, x_in)
    rt = _runtime(g)
    assert rt.stats["scratch_bytes"] >= BATCH * 4 * 6 * 4
    assert compare(rt.run(x_in), ref, FP32).passed


def test_a_token_slice_feeds_a_dense_layer_in_place():
    """A dense layer reading the class token (a slice of the sequence, strided across samples) reads
    it in place: per-sample contiguous, no scratch."""
    b = GraphBuilder("token_slice", (3, 4, 4))
    x = b.transpose(b.reshape(b.conv(b.input, 6, 2, stride=2, act="identity"), (6, 4)), (1, 0))
    x = b.constant(b.prepend(x, rows=2), (6,), "mul")  # 6 tokens x 6
    b.end_block(b.dense(x.narrow(1, 3), 3, act="gelu_tanh"))
    g = b.finish().init_weights(0)
    x_in = random_input(g, 3, seed=2)
    rt = _runtime(g, batch=3)
    assert rt.stats["scratch_bytes"] == 0  # nothing composed
    assert compare(rt.run(x_in), reference.run(g, x_in), FP32).passed


def test_softmax_and_l2norm_along_a_middle_axis():
    b = GraphBuilder("axes", (4, 3, 5))
    y = b.softmax(b.conv(b.input, 4, 1, act="identity"), axis=1)
    z = b.l2norm(b.transpose(y, (2, 0, 1)), axis=-2, eps=1e-6)
    b.end_block(b.reshape(z, (5, 12)))
    g = b.finish().init_weights(0)
    x_in = random_input(g, BATCH, seed=4)
    assert compare(_runtime(g).run(x_in), reference.run(g, x_in), FP32).passed


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precision_general_tensors_hold_their_bound(cases, precision):
    for name in ("vit", "convnext"):
        make, x, ref = cases[name]
        out = _runtime(_asap(make()), precision=precision).run(x)
        chk = check_precision(out, ref, precision)
        assert chk.passed, (name, precision, chk)
        assert compare(out, ref, 1e-5).max_rel_err > 1e-5  # it computed at the precision


@pytest.mark.parametrize("act", ["sigmoid", "gelu", "leaky_relu"])
def test_an_activation_on_a_wide_tensor_runs_like_the_oracle(act):
    """An element-wise activation does not care about rank: on a tensor of 5 axes with the batch (past
    ios_map's 4) it runs (the real device through ios_strided, test_cuda_tensor_kernels), here on a
    slice of a concatenation's first image axis and in a stage beside another branch."""
    b = GraphBuilder("wide", (2, 3, 4))
    y = b.reshape(b.conv(b.input, 4, 1, act="identity"), (2, 2, 3, 4))
    z = b.reshape(b.conv(b.input, 4, 1, act="identity"), (2, 2, 3, 4))
    cat = b.end_block(b.concat([y, z]))  # (4, 2, 3, 4): the activation reads its second half
    w = b.activation(Value(cat.node, 2, 4), act, 0.1)
    b.end_block(b.add([w, b.activation(Value(cat.node, 0, 2), "tanh")]))
    g = b.finish().init_weights(0)
    x_in = random_input(g, BATCH, seed=0)
    ref = reference.run(g, x_in)
    for sched in (g, _asap(g)):
        rt = _runtime(sched)
        chk = compare(rt.run(x_in), ref, FP32)
        assert chk.passed, chk


@pytest.mark.parametrize("shape", [(24,), (2, 3, 2, 2)])
def test_an_affine_on_a_token_vector_or_a_wide_tensor_scales_its_first_axis(shape):
    """``affine``'s scale and shift are per channel, the first image axis, at any rank (the oracle's
    ``channel_shape``): a distilled DeiT ends in one on its (1000,) logits (the heads' mean, folded);
    here on a vector of 24 per sample and on a tensor of 5 axes with the batch."""
    b = GraphBuilder("affine_any_rank", (3, 4, 4))
    y = b.reshape(b.conv(b.input, 6, 2, stride=2, act="identity"), shape)
    b.end_block(b.affine(y, act="relu"))
    g = b.finish().init_weights(0)
    x_in = random_input(g, BATCH, seed=0)
    chk = compare(_runtime(g).run(x_in), reference.run(g, x_in), FP32)
    assert chk.passed, chk


def test_the_launchers_refuse_no_general_tensor_type():
    from ios_core.ir.tensor_nodes import TENSOR_TYPES
    from ios_core.runtime.cuda import CudaLaunchers

    assert all(CudaLaunchers.handles(t) for t in TENSOR_TYPES)
    assert not set(TENSOR_TYPES) & set(CudaLaunchers.REFUSES)


def test_wide_element_sums_broadcast_through_the_strided_kernel():
    """An element-wise product of a 5-axis tensor (with the batch) and a broadcast value: the fake
    and the oracle agree (the real device takes ios_strided there: test_cuda_tensor_kernels)."""
    b = GraphBuilder("wide_sum", (2, 3, 4))
    c = b.conv(b.input, 4, 1, act="identity")
    y = b.reshape(c, (4, 3, 2, 2))
    s = b.reshape(b.global_avg_pool(c), (4, 1, 1, 1))
    b.end_block(b.transpose(b.mul([y, s]), (1, 0, 2, 3)))
    g = b.finish().init_weights(0)
    x_in = random_input(g, BATCH, seed=0)
    assert compare(_runtime(g).run(x_in), reference.run(g, x_in), FP32).passed



@pytest.mark.parametrize("name", ["vit_tiny", "convnext_tiny"])
def test_the_zoos_transformers_at_full_size_under_the_dp_schedule(name):
    """The zoo's ViT-Ti/16 (197 tokens, 3 heads, 12 layers) and ConvNeXt-T at 224x224, scheduled by IOS's
    DP (merge and parallel) and replayed as one CUDA graph on the fake device, batch 1."""
    from ios_core import models

    graph = models.get(name).init_weights(0)
    x = random_input(graph, 1, seed=0)
    sched = optimize(graph, "both", SyntheticCostModel(), batch_size=1)
    rt = _runtime(sched, batch=1, cuda_graph=True)
    chk = compare(rt.run(x), reference.run(graph, x), FP32)
    assert chk.passed, chk
    assert rt.dev.captured == 1


def test_the_dp_scheduler_times_transformer_stages_as_cuda_programs():
    """IOS's DP scheduler with the measured cost model on cuda: each candidate stage of the ViT block is a
    CUDA program of its own (random weights, its inputs external) timed on the fake device; the schedule
    found runs like the oracle."""
    from ios_core.cost.measured import MeasuredCostModel

    graph = peaked(GRAPHS["vit"])()
    cm = MeasuredCostModel(device="cuda", backend=TorchQueueDevice(1), cache=False, warmup=1, repeat=2,
                           min_sample_ms=None)
    sched = optimize(graph, "both", cm, batch_size=BATCH)
    assert cm.measured > 0
    x = random_input(graph, BATCH, seed=0)
    assert compare(_runtime(sched).run(x), reference.run(graph, x), FP32).passed
