"""bf16 for TensorFlow and JAX (issue 46; docs/precision.md): TensorFlow's bf16 build computes its
convolutions and matrix products in bf16 (read back from its graph) within bf16's bound; XLA on the
CPU (jax-xla, tensorflow-xla) turns bf16 convolutions into f32 ones, which the read-back of the
compiled HLO reports, so those cells fail the precision rule and their tables declare bf16 "no" on
the CPU; the HLO read-back itself on cuDNN/cuBLAS-shaped text (the GPU path, not run here)."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
from ios_core import reference
from ios_core.check import check_precision, tolerance_for
from ios_core.inputs import random_input
from ios_core.models.coverage import coverage_graph


def _skip_unavailable(name):
    reason = adapters.get(name).available()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def case():
    g = coverage_graph().init_weights(5)  # every op type: depthwise, grouped, linear, resize, pools
    x = random_input(g, 2, seed=0)
    return g, x, reference.run(g, x)


def _precision_problem(name, info, asked):
    from ios_bench.running.task_cell import precision_problem

    return precision_problem(adapters.get(name), info, asked)


def test_tensorflow_bf16_computes_in_bf16_within_its_bound(case):
    _skip_unavailable("tensorflow")
    g, x, ref = case
    c = adapters.get("tensorflow").build(g, 2, threads=1, precision="bf16")
    assert c.info["precision"] == "bf16" and "precision_note" not in c.info
    assert _precision_problem("tensorflow", c.info, "bf16") is None
    ops = c.fn.get_concrete_function().graph.get_operations()
    convs = [op for op in ops if op.type in ("Conv2D", "DepthwiseConv2dNative", "MatMul")]
    assert convs and {op.get_attr("T").name for op in convs} == {"bfloat16"}
    out = c.run(x)
    assert out.dtype == np.float32
    res = check_precision(out, ref, "bf16")
    assert res.passed, res.reason
    assert res.max_rel_err > tolerance_for("fp32") / 100  # not an fp32 result relabelled


def test_tensorflow_reads_back_what_its_graph_computes_in():
    _skip_unavailable("tensorflow")
    import tensorflow as tf

    from adapters.tensorflow import computes_in

    def fn_of(dtype):
        w = tf.constant(np.ones((3, 3, 2, 4)), dtype)
        f = tf.function(lambda x: tf.nn.conv2d(x, w, 1, "VALID"),
                        input_signature=[tf.TensorSpec((1, 5, 5, 2), dtype)])
        return f, tf.zeros((1, 5, 5, 2), dtype)

    assert computes_in(*fn_of(tf.bfloat16), jit_compile=False) == "bf16"
    assert computes_in(*fn_of(tf.float32), jit_compile=False) == "fp32"


@pytest.mark.parametrize("name", ["jax-xla", "tensorflow-xla"])
def test_xla_on_the_cpu_computes_bf16_convolutions_in_f32_so_the_cell_fails_and_the_table_says_no(name, case):
    _skip_unavailable(name)
    g, x, ref = case
    a = adapters.get(name)
    assert a.precision_reason("bf16", "cpu").startswith(f"{name} bf16 on cpu: no: XLA's CPU backend")
    with pytest.raises(ValueError, match="no: XLA's CPU backend"):
        a.build(g, 2, threads=1, precision="bf16")
    # the build itself, past the table: weights and input in bf16, the compiled HLO's convolutions f32
    c = a._build(g, 2, "cpu", 1, precision="bf16", **a.options)
    assert c.info["precision"] == "fp32" and "fp32" in c.info["precision_note"]
    problem = _precision_problem(name, c.info, "bf16")
    assert problem.startswith(f"precision: asked for bf16, {name} computes in fp32")
    assert check_precision(c.run(x), ref, "bf16").passed  # its output alone would not have told


def test_jax_half_precision_builds_carry_params_and_input_in_that_dtype(case):
    """The cuda fp16/bf16 path on the CPU device: params and input in float16, output float32 within
    the bound, and what XLA compiled read back (f32 on the CPU: XLA upcasts there too)."""
    _skip_unavailable("jax-xla")
    import jax

    g, x, ref = case
    a = adapters.get("jax-xla")
    assert a.precision_reason("fp16", "cuda") is None and a.precision_reason("bf16", "cuda") is None
    c = a._build(g, 2, "cpu", 1, precision="fp16")
    assert {str(p.dtype) for p in jax.tree.leaves(c.params)} == {"float16"}
    assert str(c.prepare(x).dtype) == "float16" and c.info["matmul_precision"] == "default"
    # XLA's CPU backend upcasts half-precision convolutions and dots (as it does bf16's): the compiled
    # HLO says f32, so the cell says fp32, which the precision rule refuses
    assert c.info["precision"] == "fp32" and "fp32" in c.info["precision_note"]
    problem = _precision_problem("jax-xla", c.info, "fp16")
    assert problem.startswith("precision: asked for fp16, jax-xla computes in fp32")
    out = c.run(x)
    assert out.dtype == np.float32 and check_precision(out, ref, "fp16").passed


HLO = """HloModule jit_forward
%fused_computation (p0: bf16[2,8,8,8]) -> bf16[2,8,8,8] {
  ROOT %convolution.1 = bf16[2,8,8,8]{3,2,1,0} convolution(bf16[2,3,8,8] %p0, bf16[8,3,3,3] %p1), window={size=3x3}
}
ENTRY %main (Arg_0: bf16[2,3,8,8]) -> bf16[2,4] {
  %custom-call.2 = (bf16[2,8,8,8]{3,2,1,0}, u8[0]{0}) custom-call(%a, %b), custom_call_target="__cudnn$convForward"
  %cublas = (bf16[2,4]{1,0}, s8[4]{0}) custom-call(%c, %d), custom_call_target="__cublas$lt$matmul"
  %sort = (f32[4]{0}) custom-call(%e), custom_call_target="TopK"
  ROOT %dot.3 = bf16[2,4]{1,0} dot(bf16[2,512] %r, bf16[512,4] %w), lhs_contracting_dims={1}
}
"""


def test_the_hlo_read_back_sees_convolutions_dots_and_library_calls():
    from adapters.jax import hlo_compute_precision

    assert hlo_compute_precision(HLO) == "bf16"  # the TopK custom call is not a convolution or GEMM
    assert hlo_compute_precision(HLO.replace("bf16", "f16")) == "fp16"
    cudnn_f32 = HLO.replace("(bf16[2,8,8,8]{3,2,1,0}, u8[0]{0})", "(f32[2,8,8,8]{3,2,1,0}, u8[0]{0})")
    assert hlo_compute_precision(cudnn_f32) == "mixed (bf16, fp32)"  # one cuDNN call in f32 is not bf16
    assert hlo_compute_precision("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(0)\n}") == "fp32"
