"""The general-tensor operators (issue 56) through every backend that lowers them, against the
oracle: a one-block vision transformer (4 tokens and a class token x 8 features x 2 heads) and a
tiny ConvNeXt (one block per stage, a downsampling between): the ONNX exporter (onnxruntime,
OpenVINO), the PyTorch adapter (eager and torch.compile), JAX, TensorFlow (with and without XLA)
and TVM, and IOS (the DP scheduler, the CPU runtime on its kernel providers)."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
from ios_core import optimize, reference
from ios_core.check import compare
from ios_core.cost import SyntheticCostModel
from ios_core.ir import GraphBuilder
from ios_core.models.convnext import convnext
from ios_core.models.vit import vit
from ios_core.runtime import Runtime

BATCH = 2


def one_block_vit():
    return vit("vit_block", image=8, patch=4, dim=8, depth=1, heads=2, mlp=16, num_classes=5).init_weights(0)


def tiny_convnext():
    return convnext("convnext_block", image=16, depths=(1, 1), dims=(8, 16), num_classes=5).init_weights(0)


def cosine_attention():
    """Swin V2's cosine attention on 4 tokens x 8 features, 2 heads: the queries and keys divided by
    their norms (``l2norm``), the scores scaled; the keys scaled down first, so that their norms are
    under the ``eps`` they are floored at (F.normalize's clamp is taken)."""
    b = GraphBuilder("cosine_block", (3, 4, 4))
    x = b.transpose(b.reshape(b.conv(b.input, 8, 2, stride=2, act="identity"), (8, 4)), (1, 0))  # 4 x 8
    x = b.end_block(b.layernorm(x))

    def heads(v, perm):
        return b.transpose(b.reshape(b.dense(x, 8), (4, 2, 4)), perm)

    q, k, v = heads(x, (1, 0, 2)), heads(x, (1, 2, 0)), heads(x, (1, 0, 2))
    small = b.constant(k, (1,), "mul")
    scores = b.softmax(b.constant(b.matmul(b.l2norm(q), b.l2norm(small, axis=1, eps=0.5)), (2, 1, 1), "mul"))
    out = b.reshape(b.transpose(b.matmul(scores, v), (1, 0, 2)), (4, 8))
    b.end_block(b.add([x, b.dense(out, 8)]))
    g = b.finish().init_weights(0)
    small.node.weight = np.full((1,), 0.01, np.float32)
    return g


GRAPHS = {"vit": one_block_vit, "convnext": tiny_convnext, "cosine": cosine_attention}


@pytest.fixture(scope="module")
def cases():
    out = {}
    for name, make in GRAPHS.items():
        g = make()
        x = reference.random_input(g, BATCH, seed=0)
        out[name] = (g, x, reference.run(g, x))
    return out


def test_the_small_graphs_hold_the_new_operators(cases):
    types = {n.TYPE for g, _, _ in cases.values() for n in g.operators()}
    assert types >= {"matmul", "softmax", "layernorm", "dense", "reshape", "transpose", "constant", "prepend",
                     "l2norm"}
    acts = {n.act for g, _, _ in cases.values() for n in g.operators() if n.TYPE == "dense"}
    assert "gelu" in acts
    g, _, ref = cases["vit"]
    assert g.blocks[0].exit_node.output_shape == (5, 8) and ref.shape == (BATCH, 5, 1, 1)


@pytest.mark.parametrize("framework", ["torch", "torch-compile", "onnxruntime", "onnxruntime-parallel", "openvino",
                                       "jax-xla", "tensorflow", "tensorflow-xla", "tflite", "tvm"])
@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_each_adapter_that_lowers_them_matches_the_oracle(cases, framework, graph):
    adapter = adapters.get(framework)
    if adapter.available():
        pytest.skip(adapter.available())
    g, x, ref = cases[graph]
    result = compare(adapter.build(g, BATCH, threads=1).run(x), ref, adapter.tolerance)
    assert result.passed, f"{framework} on {graph}: {result.reason}"


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_ios_both_schedules_them_and_the_runtime_computes_the_oracles_output(cases, graph):
    g, x, ref = cases[graph]
    scheduled = optimize(g, "both", SyntheticCostModel(), batch_size=BATCH)
    stages = [st for b in scheduled.blocks for st in b.stages]
    assert len(stages) < sum(len(b.nodes) for b in scheduled.blocks)  # something ran side by side
    if graph == "vit":  # the query, key and value projections are independent: IOS may put them in one stage
        assert max(len(groups) for groups in stages) >= 2  # a stage is a list of groups
    for provider in ("torch", "onnxruntime"):
        out = Runtime(scheduled, BATCH, provider=provider).run(x)
        result = compare(out, ref, 1e-3)
        assert result.passed, f"IOS on {provider}, {graph}: {result.reason}"


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_the_torch_runtime_at_bf16_holds_the_bf16_bound(cases, graph):
    from ios_core.check import tolerance_for

    g, x, ref = cases[graph]
    runtime = Runtime(optimize(g, "both", SyntheticCostModel(), batch_size=BATCH), BATCH, provider="torch",
                      precision="bf16")
    result = compare(runtime.run(x), ref, tolerance_for("bf16"))
    assert result.passed, f"IOS at bf16 on {graph}: {result.reason}"
