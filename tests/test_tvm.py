"""TVM adapters: Relax conversion against the oracle, threads/info, registry, missing TVM.

The MetaSchedule-tuned adapter has its own file (tests/test_tvm_tuned.py)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import adapters
from ios_core import models, reference
from ios_core.check import compare
from ios_core.ir import GraphBuilder, Value

TVM = adapters.get("tvm")
needs_tvm = pytest.mark.skipif(TVM.available() is not None, reason=f"tvm unavailable: {TVM.available()}")


def every_op_graph():
    """A small graph with every IR operator kind and attribute the converter handles."""
    b = GraphBuilder("every_op", (8, 11, 11))
    x = b.input
    a = b.conv(x, 12, 3, stride=2, padding=1, act="relu")                 # 12x6x6
    g = b.conv(a, 12, 3, padding=2, dilation=2, groups=3, act="sigmoid")  # grouped + dilated
    m = b.pool(a, "max", kernel=3, stride=1, padding=1)
    v = b.pool(a, "avg", kernel=3, stride=1, padding=1)                   # padding counted
    s = b.add([g, m])
    p = b.mul([s, v])
    t = b.activation(p, "tanh")
    with b.sequential() as seq:
        c = b.conv(t, 6, 1, act="identity")
        b.relu(c)
    # channel slices of two tensors, concatenated (Identity with several terms)
    cat = b.identity([[Value(t.node, 2, 8)], [Value(seq.output.node, 0, 4)]])
    b.end_block(cat)
    y = b.pool(b.conv(cat, 10, 3, stride=2, act="relu"), "global_max")
    z = b.pool(y, "global_avg")
    f = b.flatten(z)
    o = b.linear(f, 7, act="relu")
    b.end_block(b.linear(o, 5))
    return b.finish().init_weights(3)


@needs_tvm
def test_sample_network_matches_oracle():
    graph = models.get("sample", input_shape=(32, 15, 15)).init_weights(0)
    x = reference.random_input(graph, 1)
    compiled = TVM.build(graph, batch_size=1, threads=2)
    check = compare(compiled.run(x), reference.run(graph, x), TVM.tolerance)
    assert check.passed, check
    info = compiled.info
    assert info["precision"] == "fp32"
    import tvm

    # the pool TVM really runs (a pool an earlier test of this process started narrower cannot grow:
    # a sweep's cells are fresh processes; tests/test_threads.py checks a budget kept in one)
    assert info["threads"] == 2 and info["tvm_threads"] == int(tvm.runtime.num_threads())
    assert info["target"].startswith("{") and "llvm" in info["target"]
    assert info["tvm_version"] == info["framework_version"] or info["framework_version"].startswith(
        info["tvm_version"].split(".post")[0])
    assert info["build_seconds"] > 0


@needs_tvm
def test_every_operator_matches_oracle_at_batch_2():
    graph = every_op_graph()
    kinds = {op.TYPE for op in graph.operators()}
    assert {"conv", "pool", "element", "identity", "activation", "relu", "flatten", "linear"} <= kinds
    x = reference.random_input(graph, 2, seed=1)
    compiled = TVM.build(graph, batch_size=2, threads=1)
    assert compiled.info["tvm_threads"] == 1  # the runtime pool narrowed (or started) to 1
    out = compiled.run(x)
    assert out.shape == (2, 5, 1, 1)
    check = compare(out, reference.run(graph, x), TVM.tolerance)
    assert check.passed, check


@needs_tvm
def test_imported_operators_match_oracle():
    """Asymmetric padding, averages excluding padding, parametric activations, affine, channel
    shuffle, resize, broadcast multiply (what the ONNX importer produces)."""
    from tests.adapter_graphs import imported_ops

    graph = imported_ops().init_weights(5)
    x = reference.random_input(graph, 2, seed=3)
    check = compare(TVM.build(graph, batch_size=2, threads=1).run(x), reference.run(graph, x), TVM.tolerance)
    assert check.passed, check


@needs_tvm
def test_avg_pool_counts_padding_like_the_oracle():
    b = GraphBuilder("avgpad", (3, 5, 5))
    c = b.conv(b.input, 3, 1, act="identity")
    b.end_block(b.pool(c, "avg", kernel=3, stride=1, padding=1))
    graph = b.finish().init_weights(0)
    conv = c.node  # made an identity map, so the pool sees the input unchanged
    conv.set_weights({"weight": np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1), "bias": np.zeros(3, np.float32)})
    x = np.ones((1, 3, 5, 5), np.float32)
    out = TVM.build(graph, batch_size=1, threads=1).run(x)
    # a corner window sees 4 ones and 5 zeros of padding: 4/9 when padding counts (not 1.0)
    assert out[0, 0, 0, 0] == pytest.approx(4 / 9, rel=1e-6)
    assert compare(out, reference.run(graph, x)).passed


@needs_tvm
def test_squeezenet_batch1_matches_oracle():
    graph = models.get("squeezenet").init_weights(0)
    x = reference.random_input(graph, 1)
    compiled = TVM.build(graph, batch_size=1, threads=2)
    check = compare(compiled.run(x), reference.run(graph, x), TVM.tolerance)
    assert check.passed, check
    # the timed path is prepare -> execute -> finish, as the harness drives it
    prepared = compiled.prepare(x)
    np.testing.assert_array_equal(compiled.finish(compiled.execute(prepared)), compiled.run(x))


def test_both_adapters_registered():
    assert {"tvm", "tvm-tuned"} <= set(adapters.names())
    assert adapters.get("tvm").name == "tvm"
    assert adapters.get("tvm-tuned").name == "tvm-tuned"


def test_list_frameworks_shows_tvm():
    from click.testing import CliRunner

    from ios_bench.commands.list import command

    result = CliRunner().invoke(command, ["frameworks"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "tvm-tuned" in result.output and "tvm " in result.output


@pytest.mark.parametrize("name", ["tvm", "tvm-tuned"])
def test_available_says_why_when_tvm_missing(monkeypatch, name):
    # None in sys.modules makes "import tvm" raise ImportError, as if apache-tvm were absent
    monkeypatch.setitem(sys.modules, "tvm", None)
    reason = adapters.get(name).available()
    assert reason is not None and "tvm" in reason
    graph = models.get("sample", input_shape=(4, 5, 5)).init_weights(0)
    with pytest.raises(RuntimeError, match="cannot run"):
        adapters.get(name).build(graph, 1)


def test_unavailable_on_gpu():
    from ios_core.measurement.gpu import gpu_missing

    if gpu_missing() is None:
        pytest.skip("this machine has a GPU")
    # tvm targets cuda where the build and a GPU allow; this CPU build says why not
    assert "cuda" in (TVM.available("cuda") or "").lower()


@needs_tvm
def test_unknown_option_is_rejected():
    graph = models.get("sample", input_shape=(4, 5, 5)).init_weights(0)
    with pytest.raises(ValueError, match="unknown options"):
        TVM.build(graph, 1, trials=3)


@needs_tvm
@pytest.mark.slow
@pytest.mark.parametrize("name", ["alexnet", "resnet18", "inception_v3", "randwire", "nasnet"])
def test_zoo_model_matches_oracle(name):
    """Untuned TVM runs naive loops (inception_v3 ~15 s, nasnet about a minute per run here)."""
    graph = models.get(name).init_weights(0)
    x = reference.random_input(graph, 1)
    check = compare(TVM.build(graph, batch_size=1, threads=2).run(x), reference.run(graph, x), TVM.tolerance)
    assert check.passed, check


def compile_for_cuda(graph):
    """``graph`` through the tvm adapter's cuda path (Relax's default pipeline for cuda: legalize, fuse,
    DLight GPU schedules, lower; fp32) for an H100/H200's sm_90, with no GPU here: the VM executable and
    its CUDA device modules. Skips where this TVM build has no CUDA code generator or compiler library."""
    import tvm

    from adapters.tvm import _compile_cuda, cuda_target, to_relax

    if tvm.get_global_func("target.build.cuda", True) is None:
        pytest.skip(f"this TVM build ({tvm.__version__}) has no CUDA code generator")
    mod, _ = to_relax(graph, 1)
    target = cuda_target({"kind": "cuda", "arch": "sm_90"})  # no GPU here to ask for its architecture
    try:
        ex = _compile_cuda(mod, target, cudnn=False)
    except Exception as e:  # noqa: BLE001 - only a missing CUDA compiler library excuses it
        if "nvrtc" in str(e).lower() or "nvcc" in str(e).lower():
            pytest.skip(f"TVM cannot compile CUDA here: {str(e).splitlines()[0][:200]}")
        raise

    def kinds(m):
        yield m
        for i in m.imports:
            yield from kinds(i)

    return ex, [m for m in kinds(ex.mod) if m.kind == "cuda"]


@needs_tvm
def test_the_cuda_variant_builds_its_relax_module_for_cuda_without_a_gpu():
    """The tvm adapter's cuda path compiled here for sm_90, where this TVM build has the CUDA code
    generator: a VM executable whose device module is CUDA with scheduled kernels."""
    import tvm

    ex, cuda = compile_for_cuda(every_op_graph())
    assert isinstance(ex, tvm.relax.VMExecutable) and len(cuda) == 1
    src = cuda[0].inspect_source("cuda")
    assert src.count("__global__") >= 5 and "threadIdx.x" in src  # kernels scheduled for GPU threads
    assert "half" not in src.replace("#include", "")  # fp32: no half-precision arithmetic


def test_tvm_cudnn_is_a_skipped_cell_with_its_reason_without_cudnn(monkeypatch):
    """tvm-cudnn on a TVM built with CUDA but without cuDNN (the apache-tvm wheel): its reason
    says so, and the cell is skipped with it."""
    tvm = pytest.importorskip("tvm")
    from adapters import tvm as tvm_adapter

    if tvm.get_global_func("relax.ext.cudnn", True) is not None:
        pytest.skip("this TVM build has cuDNN")
    monkeypatch.setattr(tvm.runtime, "enabled", lambda kind: True)  # as on a GPU machine

    class _Dev:
        exist = True

    monkeypatch.setattr(tvm, "cuda", lambda i=0: _Dev())
    reason = tvm_adapter.cuda_reason(cudnn=True)
    assert reason and "no cuDNN codegen" in reason and tvm.__version__ in reason
    assert tvm_adapter.cuda_reason(cudnn=False) is None  # the tvm peer itself is not refused
