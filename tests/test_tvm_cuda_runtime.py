"""adapters/tvm.py's check of TVM's CUDA runtime library (issue 45, item 1b): where it does not
load, the tvm peer's reason is the loader's own error, not TVM's "no CUDA runtime"."""

from __future__ import annotations

import pytest

from adapters import tvm as tvm_adapter


def test_a_cuda_runtime_that_does_not_load_is_the_loaders_own_error(tmp_path):
    lib = tmp_path / "tvm" / "lib"
    lib.mkdir(parents=True)
    assert tvm_adapter.cuda_runtime_problem(tmp_path / "tvm") is None  # a TVM without the library: nothing to say
    (lib / "libtvm_runtime_cuda.so").write_bytes(b"not an ELF file" * 10)
    why = tvm_adapter.cuda_runtime_problem(tmp_path / "tvm")
    assert why.startswith("TVM's CUDA runtime libtvm_runtime_cuda.so does not load: ")
    assert "libtvm_runtime_cuda.so" in why.split("does not load: ")[1]  # the loader names the file it refused
    assert f"(libcudart.so.13 not beside it in {lib})" in why and "\n" not in why
    (lib / "libcudart.so.13").write_bytes(b"")
    assert tvm_adapter.cuda_runtime_problem(tmp_path / "tvm").endswith("(libcudart.so.13 beside it)")


def test_the_tvm_peers_cuda_reason_is_the_loaders_when_its_runtime_does_not_load():
    pytest.importorskip("tvm")
    import adapters

    problem = tvm_adapter.cuda_runtime_problem()
    if problem is None:
        pytest.skip("TVM's CUDA runtime loads here")
    reason = adapters.get("tvm").available("cuda")
    assert reason == problem and "no CUDA runtime" not in reason
