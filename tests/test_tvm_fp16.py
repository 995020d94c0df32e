"""TVM's fp16 build on cuda (issue 46): Relax's ToMixedPrecision before the cuda pipeline. Compiled here
for target cuda without a GPU (TVM's CUDA codegen and nvcc need none); the same fp16 module compiled for
the CPU is checked against the fp32 oracle at fp16's bound. Not yet run on a GPU."""

from __future__ import annotations

import pytest

from ios_core import reference
from ios_core.check import check_precision, compare
from ios_core.reference import random_input
from tests.runtime_helpers import mixed_graph

tvm = pytest.importorskip("tvm")

CUDA_TARGET = {"kind": "cuda", "arch": "sm_80"}  # no GPU to ask: the architecture named


def _cuda_compile_or_skip(mod, compile_cuda=None):
    from adapters.tvm import _compile_cuda

    try:
        return (compile_cuda or _compile_cuda)(mod, tvm.target.Target(CUDA_TARGET), False)
    except Exception as e:  # noqa: BLE001 - no CUDA compiler here: the compile-only check cannot run
        if "nvcc" in str(e).lower() or "cuda" in str(e).lower() and "not found" in str(e).lower():
            pytest.skip(f"TVM cannot compile for cuda here: {str(e)[:200]}")
        raise


def test_the_fp16_module_computes_in_fp16_and_matches_the_oracle_at_its_bound():
    from tvm import relax

    from adapters.tvm import _compile_default, fp16_ops, to_fp16, to_relax

    graph = mixed_graph().init_weights(0)
    mod, _ = to_relax(graph, 1)
    assert fp16_ops(mod) == {"fp16": 0, "total": 7}
    mixed, ops = to_fp16(mod)
    assert ops == {"fp16": 7, "total": 7}
    _cuda_compile_or_skip(mixed)  # compiles for target cuda (no GPU here)
    vm = relax.VirtualMachine(_compile_default(mixed, tvm.target.Target("llvm")), tvm.cpu(0))
    x = random_input(graph, 1, seed=1)
    out = vm["main"](tvm.runtime.tensor(x)).numpy()
    ref = reference.run(graph, x)
    assert out.dtype.name == "float32" and check_precision(out, ref, "fp16").passed
    assert compare(out, ref, 1e-4).max_rel_err > 1e-5  # it computed at fp16


def test_a_transform_that_leaves_fp32_operands_is_refused(monkeypatch):
    from tvm import relax

    from adapters.tvm import to_fp16, to_relax

    mod, _ = to_relax(mixed_graph().init_weights(0), 1)
    monkeypatch.setattr(relax.transform, "ToMixedPrecision", lambda **kw: (lambda m: m))
    with pytest.raises(RuntimeError, match="left 7 of 7 .* outside fp16"):
        to_fp16(mod)


def test_the_tvm_adapter_builds_its_fp16_cuda_cell(monkeypatch):
    """The adapter's cuda build at fp16 (compiled here; the VM that would run it needs a GPU, so the
    compiled executable is captured): its precision and the fp16 operations read back are recorded."""
    import adapters
    import adapters.tvm as tvm_adapter

    tvm_ad = adapters.get("tvm")
    assert tvm_ad.precision_reason("fp16", "cuda") is None
    assert "float16 only" in tvm_ad.precision_reason("bf16", "cuda")
    assert adapters.get("tvm-cudnn").precision_reason("fp16", "cuda") is not None
    captured = {}

    def fake_compiled(ex, info, device=None):
        captured.update(ex=ex, info=info, device=device)
        return info
    monkeypatch.setattr(tvm_adapter, "TVMCompiled", fake_compiled)
    real = tvm_adapter._compile_cuda
    monkeypatch.setattr(tvm_adapter, "_compile_cuda", lambda mod, target, cudnn: _cuda_compile_or_skip(mod, real))
    graph = mixed_graph().init_weights(0)
    info = tvm_ad._build(graph, 1, "cuda", None, precision="fp16", target=CUDA_TARGET)
    assert info["precision"] == "fp16" and info["fp16_ops"] == {"fp16": 7, "total": 7}
    assert "ToMixedPrecision" in info["pipeline"] and "fp32 accumulation" in info["precision_note"]
    info32 = tvm_ad._build(graph, 1, "cuda", None, target=CUDA_TARGET)
    assert info32["precision"] == "fp32" and "fp16_ops" not in info32
    with pytest.raises(ValueError, match="cuda only, fp16"):
        tvm_ad._build(graph, 1, "cpu", None, precision="fp16")


def test_the_cells_precision_is_read_back_from_the_module_it_compiles(monkeypatch):
    """The fp16 cell's precision comes from the module the adapter compiles, not from the request or
    the transform's own account: a transform that says it made 7 of 7 operations fp16 and changed
    nothing gives an fp32 cell (which the harness then refuses as not the precision asked for)."""
    import adapters
    import adapters.tvm as tvm_adapter
    from ios_bench.running.task_cell import precision_problem

    tvm_ad = adapters.get("tvm")
    monkeypatch.setattr(tvm_adapter, "TVMCompiled", lambda ex, info, device=None: info)
    monkeypatch.setattr(tvm_adapter, "_compile_cuda", lambda mod, target, cudnn: None)
    monkeypatch.setattr(tvm_adapter, "to_fp16", lambda mod: (mod, {"fp16": 7, "total": 7}))  # says so, does nothing
    graph = mixed_graph().init_weights(0)
    info = tvm_ad._build(graph, 1, "cuda", None, precision="fp16", target=CUDA_TARGET)
    assert info["precision"] == "fp32" and info["fp16_ops"] == {"fp16": 0, "total": 7}
    assert info["precision_source"].startswith("read back")
    assert "fp32" in precision_problem(tvm_ad, info, "fp16")
    assert tvm_adapter.computes_in({"fp16": 7, "total": 7}) == "fp16"
    with pytest.raises(RuntimeError, match="a mixed module"):
        tvm_adapter.computes_in({"fp16": 3, "total": 7})
