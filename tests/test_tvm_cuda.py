"""adapters/tvm_cuda.py's check of TVM's CUDA runtime library (issue 45, item 1b): where it does not
load, the tvm peer's reason is the loader's own error, not TVM's "no CUDA runtime"; and of what TVM's
CUDA compile needs on the GPU machine (cuda-bindings for NVRTC, a CUDA folder with the runtime headers
and CCCL, nvcc where asked for), each missing piece named in one line."""

from __future__ import annotations

import sys

import pytest

from adapters import tvm as tvm_adapter
from adapters import tvm_cuda
from tests.cuda_folders import cuda_headers, cuda_toolkit


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


# ---- what TVM's CUDA compile needs (issue 45): TVM 0.27 compiles its kernels with NVRTC when the
# module is loaded on the GPU, with -I for the CUDA folder its find_cuda_path picks -----------------


def test_the_cuda_folder_is_the_one_tvm_picks(tmp_path, monkeypatch):
    """CUDA_PATH, else nvcc on PATH (its ../.., after links: a wrapper script outside the CUDA folder
    sends TVM elsewhere), as tvm.support.nvcc.find_cuda_path reads them; CUDA_HOME is not read."""
    nvcc = pytest.importorskip("tvm.support.nvcc")
    bin_ = tmp_path / "wrap" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "nvcc").write_text("#!/bin/sh\nexec /opt/cuda-13.0/bin/nvcc \"$@\"\n")
    (bin_ / "nvcc").chmod(0o755)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", f"{bin_}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "home"))
    folder, how = tvm_adapter.cuda_folder()
    assert folder == tmp_path / "wrap" == __import__("pathlib").Path(nvcc.find_cuda_path())
    assert how == f"nvcc on PATH ({bin_ / 'nvcc'})"
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cp"))
    assert tvm_adapter.cuda_folder() == (tmp_path / "cp", "CUDA_PATH") and nvcc.find_cuda_path() == str(tmp_path / "cp")
    monkeypatch.delenv("CUDA_PATH")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(tvm_cuda, "DEFAULT_CUDA", tmp_path / "no-cuda")
    folder, how = tvm_adapter.cuda_folder()
    assert folder is None and how == (f"CUDA_PATH unset, no nvcc on PATH, no {tmp_path / 'no-cuda' / 'bin' / 'nvcc'}; "
                                      f"CUDA_HOME={tmp_path / 'home'} is not read by TVM")


def test_the_compile_check_names_the_missing_piece_and_passes_with_the_headers(tmp_path, monkeypatch):
    monkeypatch.setattr(tvm_cuda, "nvrtc_problem", lambda: None)  # NVRTC there: the headers are checked
    monkeypatch.delenv("TVM_CUDA_COMPILE_MODE", raising=False)
    env = {"PATH": str(tmp_path / "empty")}
    monkeypatch.setattr(tvm_cuda, "DEFAULT_CUDA", tmp_path / "no-cuda")
    why = tvm_adapter.cuda_compile_problem(env=env)
    assert why.startswith("TVM's CUDA compile (NVRTC) finds no CUDA folder for its headers (CUDA_PATH unset")
    assert "\n" not in why
    # a CUDA folder with the runtime headers but no CCCL (cuda/std/...): CCCL's headers named
    cuda_headers(tmp_path / "rt" / "include", cccl=False)
    why = tvm_adapter.cuda_compile_problem(env={**env, "CUDA_PATH": str(tmp_path / "rt")}, compile_check=False)
    assert why.startswith(f"TVM's CUDA compile (NVRTC) lacks cuda/std/cstdint, cuda/std/type_traits, "
                          f"cuda/std/limits in the CUDA folder {tmp_path / 'rt'} (from CUDA_PATH; searched ")
    # CCCL but no runtime headers: fp32 lacks cuda_runtime.h (TVM refuses such a folder), fp16 cuda_fp16.h too
    cuda_toolkit(tmp_path / "cccl-only", runtime=False)
    env2 = {**env, "CUDA_PATH": str(tmp_path / "cccl-only")}
    assert " lacks cuda_runtime.h in " in tvm_adapter.cuda_compile_problem(env=env2, compile_check=False)
    assert " lacks cuda_runtime.h, cuda_fp16.h in " in tvm_adapter.cuda_compile_problem("fp16", False, env2)
    # a CUDA 13 toolkit's layout: every header found, nothing to say
    cuda_toolkit(tmp_path / "cuda")
    env3 = {**env, "CUDA_PATH": str(tmp_path / "cuda")}
    assert tvm_adapter.cuda_include_dirs(tmp_path / "cuda")[-1].name == "cccl"
    assert tvm_adapter.cuda_compile_problem("fp16", compile_check=False, env=env3) is None
    # nvcc asked for (TVM_CUDA_COMPILE_MODE=nvcc) and none on PATH: nvcc named
    why = tvm_adapter.cuda_compile_problem(env={**env3, "TVM_CUDA_COMPILE_MODE": "nvcc"}, compile_check=False)
    assert why == "TVM_CUDA_COMPILE_MODE=nvcc, and no nvcc on PATH: TVM runs the nvcc binary from PATH"


def test_a_missing_cuda_bindings_is_named_with_the_missing_headers(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # import cuda.bindings raises, as where not installed
    monkeypatch.setattr(tvm_cuda, "DEFAULT_CUDA", tmp_path / "no-cuda")
    why = tvm_adapter.cuda_compile_problem(env={"PATH": str(tmp_path)})
    first, second = why.split(" | ")
    assert first.startswith("TVM compiles its CUDA kernels with NVRTC through cuda-bindings (cuda.bindings.nvrtc), "
                            "which does not import here (")
    assert "install cuda-bindings" in first and "finds no CUDA folder" in second


def test_a_compile_that_fails_is_the_nvrtc_logs_telling_line(tmp_path, monkeypatch):
    nvcc = pytest.importorskip("tvm.support.nvcc")
    monkeypatch.setattr(tvm_cuda, "nvrtc_problem", lambda: None)
    seen = {}

    def compile_cuda(code, target_format=None, arch=None, options=None, path_target=None, compiler="nvrtc"):
        seen.update(code=code, target_format=target_format, arch=arch, compiler=compiler)
        raise RuntimeError('NVRTC compilation failed:\ntvm_kernels.cu(3): catastrophic error: could not open source '
                           'file "cuda_fp16.h"\n  #include <cuda_fp16.h>\n')

    monkeypatch.setattr(nvcc, "compile_cuda", compile_cuda)
    why = tvm_adapter.cuda_compile_problem("fp16", env={"CUDA_PATH": str(cuda_toolkit(tmp_path / "cuda"))})
    assert why == ("TVM's CUDA compile (nvrtc) of a small kernel fails: tvm_kernels.cu(3): catastrophic error: could "
                   'not open source file "cuda_fp16.h"')
    assert "#include <cuda_fp16.h>" in seen["code"] and "#include <cuda/std/cstdint>" in seen["code"]
    assert (seen["target_format"], seen["arch"], seen["compiler"]) == ("ptx", "sm_80", "nvrtc")


def test_a_folder_made_of_the_cuda_13_wheels_include_is_one_tvm_compiles_with(tmp_path):
    """nvidia-cuda-runtime and nvidia-cuda-cccl install into nvidia/cu13/include (CCCL under cccl/):
    linked as include/ and targets/<triple>/include, TVM's -I list covers both."""
    include = cuda_headers(tmp_path / "site" / "nvidia" / "cu13" / "include")
    made = tvm_adapter.cuda_folder_from(include, tmp_path / "cuda")
    assert tvm_adapter.missing_headers(made, "fp16") == []
    assert len(tvm_adapter.cuda_include_dirs(made)) == 3
    assert tvm_adapter.missing_headers(tvm_adapter.cuda_folder_from(include, tmp_path / "cuda"), "fp16") == []  # again


def test_the_tvm_peers_cuda_reason_is_the_compiles_missing_piece(tmp_path, monkeypatch):
    """A GPU and TVM's CUDA runtime there, but no CUDA headers: the cells' skip reason says so (not a
    failure at the first cell's module load)."""
    tvm = pytest.importorskip("tvm")
    import adapters

    monkeypatch.setattr(tvm.runtime, "enabled", lambda kind: True)

    class _Dev:
        exist = True

    monkeypatch.setattr(tvm, "cuda", lambda i=0: _Dev())
    monkeypatch.setattr(tvm_adapter, "cuda_runtime_problem", lambda: None)
    monkeypatch.setattr(tvm_cuda, "nvrtc_problem", lambda: None)
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "empty"))
    reason = adapters.get("tvm").available("cuda")
    assert reason.startswith("TVM's CUDA compile (NVRTC) lacks cuda_runtime.h, ") and "no CUDA runtime" not in reason


def test_an_fp16_build_on_a_gpu_names_what_its_compile_lacks(monkeypatch):
    """available('cuda') checks fp32's needs; the fp16 build on a present GPU checks cuda_fp16.h too, and
    fails in one line before compiling (where the GPU would fail at the module's load)."""
    tvm = pytest.importorskip("tvm")
    import adapters
    from tests.runtime_helpers import mixed_graph

    class _Dev:
        exist = True

    monkeypatch.setattr(tvm, "cuda", lambda i=0: _Dev())
    asked = []
    monkeypatch.setattr(tvm_adapter, "cuda_compile_problem",
                        lambda precision="fp32", *a, **k: asked.append(precision) or "no cuda_fp16.h (test)")
    monkeypatch.setattr(tvm_adapter, "_compile_cuda", lambda *a: pytest.fail("compiled despite the missing header"))
    with pytest.raises(RuntimeError, match=r"^no cuda_fp16.h \(test\)$"):
        adapters.get("tvm")._build(mixed_graph().init_weights(0), 1, "cuda", None, precision="fp16",
                                   target={"kind": "cuda", "arch": "sm_90"})
    assert asked == ["fp16"]
