"""adapters/tensorflow_tensors.py: the TensorFlow adapters' general tensors and their layout rule
(feature maps NHWC, general tensors in the IR's order, converted where an operator reads the other
layout). The small graphs of tests/test_ops_transformer.py against the oracle are there; here: the
rule itself (which transposes cost nothing), values of both layouts meeting in sums, products,
concatenations and slices, the bf16 bound, and the zoo's vit_tiny and convnext_tiny at batch 1 (slow).
int8 (TFLite's, refusing attention) is the tflite framework's: tests/test_tflite.py."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
from adapters.tensorflow_tensors import IR, NHWC, has_tensors, transpose_perm
from ios_core import models, reference
from ios_core.check import compare, tolerance_for
from ios_core.ir import GraphBuilder
from tests.test_ops_transformer import GRAPHS

BATCH = 2


def _adapter(name):
    adapter = adapters.get(name)
    if adapter.available():
        pytest.skip(adapter.available())
    return adapter


def mixed_layouts():
    """Values of both layouts meeting: a conv's map (nhwc) and the same map reshaped (ir) summed,
    multiplied by a 1x1 map of each layout, concatenated, sliced; a conv, an affine, a flatten and a
    linear reading ir values; a rank-2 token sequence's slice read by a linear."""
    b = GraphBuilder("mixed_layouts", (3, 4, 4))
    a = b.conv(b.input, 8, 3, padding=1, act="identity")  # nhwc (8, 4, 4)
    t = b.reshape(a, (8, 4, 4))  # the same map, ir
    s = b.add([t, a])  # ir first: a converted to ir
    pooled = b.global_avg_pool(a)  # nhwc (8, 1, 1)
    p_ir = b.reshape(pooled, (8, 1, 1))
    m = b.mul([a, p_ir])  # nhwc first, a broadcast ir 1x1 map converted to nhwc
    m2 = b.mul([s, pooled])  # ir first, the nhwc 1x1 map converted to ir
    cat = b.concat([s.narrow(0, 4), m.narrow(2, 6), m2])  # slices of both layouts, joined in ir
    y = b.affine(b.conv(cat, 6, 1, act="relu"), act="relu")  # the conv reads it in nhwc
    tokens = b.transpose(b.reshape(b.affine(t), (8, 16)), (1, 0))  # affine on ir, 16 tokens x 8
    z = b.linear(b.dense(tokens, 6, act="gelu_tanh").narrow(0, 2), 5)  # a linear on a rank-2 ir slice
    flat = b.linear(b.flatten(b.reshape(y, (6, 16))), 5)  # flatten of an ir value
    return b.finish(b.add([z, flat])).init_weights(0)


def traced_ops(graph, kind: str, **options) -> int:
    """How many ops of type ``kind`` the traced function of ``graph`` holds."""
    from adapters.tensorflow import to_function

    fn = to_function(graph, BATCH, **options)
    return sum(op.type == kind for op in fn.get_concrete_function().graph.get_operations())


def test_a_transpose_of_a_stored_layout_costs_nothing():
    # ConvNeXt's permutes around its layer norm: (C, H, W) -> (H, W, C) of an nhwc map is that map ...
    assert transpose_perm((1, 2, 0), NHWC) == ((), IR)
    # ... and (H, W, C) -> (C, H, W) of it is an nhwc map again
    assert transpose_perm((2, 0, 1), IR) == ((), NHWC)
    # otherwise one transpose of the stored tensor, the batch axis kept first, giving ir
    assert transpose_perm((1, 0), IR) == ((0, 2, 1), IR)
    assert transpose_perm((1, 0, 2), IR) == ((0, 2, 1, 3), IR)
    assert transpose_perm((0, 1, 2), NHWC) == ((), NHWC)  # the identity: the map as it is
    assert transpose_perm((2, 1, 0), NHWC) == ((0, 2, 1, 3), IR)


def test_convnext_runs_without_a_layout_transpose():
    """The tiny ConvNeXt's ten permutes cost nothing: its one Transpose is the (5, 1, 1) output's,
    given in the IR's order."""
    g = GRAPHS["convnext"]()
    assert sum(op.TYPE == "transpose" for op in g.operators()) == 10
    assert traced_ops(g, "Transpose") == 1


def test_a_graph_without_general_tensors_is_traced_as_before():
    g = models.get("sample").init_weights(0)
    assert not has_tensors(g) and has_tensors(GRAPHS["vit"]())
    from adapters.tensorflow import TFCompiled

    built = adapters.get("tensorflow").build(g, 1, threads=1) if not adapters.get("tensorflow").available() else None
    if built is None:
        pytest.skip("tensorflow is not installed")
    assert isinstance(built, TFCompiled) and built.nhwc_out and built.info["layout"] == "NHWC"


@pytest.mark.parametrize("framework", ["tensorflow", "tensorflow-xla"])
def test_values_of_both_layouts_meet_and_match_the_oracle(framework):
    adapter = _adapter(framework)
    g = mixed_layouts()
    x = reference.random_input(g, BATCH, seed=1)
    result = compare(adapter.build(g, BATCH, threads=1).run(x), reference.run(g, x), adapter.tolerance)
    assert result.passed, result.reason


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_bf16_holds_the_bf16_bound(graph):
    adapter = _adapter("tensorflow")
    g = GRAPHS[graph]()
    x = reference.random_input(g, BATCH, seed=0)
    built = adapter.build(g, BATCH, threads=1, precision="bf16")
    assert built.info["precision"] == "bf16"  # read back from the traced graph's products
    result = compare(built.run(x), reference.run(g, x), tolerance_for("bf16"))
    assert result.passed, result.reason


def test_xla_refuses_bf16_with_its_reason():
    adapter = _adapter("tensorflow-xla")
    with pytest.raises(ValueError, match="computes bf16 convolutions and dot products in f32"):
        adapter.build(GRAPHS["vit"](), BATCH, threads=1, precision="bf16")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["vit_tiny", "convnext_tiny"])
@pytest.mark.parametrize("framework", ["tensorflow", "tensorflow-xla"])
def test_the_zoo_transformers_match_the_oracle_at_batch_1(framework, model):
    adapter = _adapter(framework)
    g = models.get(model).init_weights(0)
    x = reference.random_input(g, 1, seed=0)
    result = compare(adapter.build(g, 1, threads=2).run(x), reference.run(g, x), adapter.tolerance)
    assert result.passed, f"{framework} on {model}: {result.reason}"
    assert np.isfinite(result.max_rel_err)


def test_bf16_computes_products_in_bf16_and_the_norms_statistics_in_f32():
    from adapters.tensorflow import to_function

    tf = pytest.importorskip("tensorflow")
    g = GRAPHS["vit"]()
    ops = to_function(g, BATCH, dtype=tf.bfloat16).get_concrete_function().graph.get_operations()
    products = {op.get_attr("T").name for op in ops if op.type in ("MatMul", "BatchMatMulV2", "BatchMatMulV3")}
    assert products == {"bfloat16"}
    assert {op.get_attr("T").name for op in ops if op.type in ("Softmax", "Mean", "Rsqrt")} == {"float32"}
