"""benchmarks/_window_machine.py: what the window finds on the lent machine (a plan cache from
another cuDNN, the CUDA folder TVM's compile is pointed at)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import _window_machine as wm
from tests.cuda_folders import cuda_headers, cuda_toolkit


def test_a_plan_cache_from_another_cudnn_is_one_line(tmp_path):
    from ios_core.cost.cache import CudnnPlanCache

    db = tmp_path / "profiles.sqlite"
    assert wm.plan_cache_problem(db, "9.19.0") is None  # nothing yet
    cache = CudnnPlanCache({"gpu": "NVIDIA H200", "cudnn": "9.10.2"}, db)
    cache.put("conv a", {"plan": 1})
    cache.put("conv b", {"plan": 2})
    cache.close()
    line = wm.plan_cache_problem(db, "9.19.0")
    assert line == (f"plan cache {db}: 2 plan(s) from cuDNN 9.10.2, this machine has cuDNN 9.19.0: not used here "
                    "(rebuilt and stored under this cuDNN)")
    assert wm.plan_cache_problem(db, "9.10.2") is None


# ---- the tvm peer's CUDA compile on the GPU machine (adapters/tvm.py: what TVM 0.27 needs) ----------


def test_tvm_is_pointed_at_a_cuda_folder_with_its_headers(tmp_path, monkeypatch):
    """TVM's own pick (here a wrapper nvcc outside the CUDA folder, as on the development machines)
    lacks the headers: CUDA_HOME, /usr/local/cuda, the machine's CUDA 13 wheels, then the carried header
    wheels are tried, and the steps get CUDA_PATH; a CUDA_PATH already set is left alone."""
    import site

    from adapters import tvm as tvm_adapter

    wrap = tmp_path / "wrap" / "bin"
    wrap.mkdir(parents=True)
    (wrap / "nvcc").write_text("#!/bin/sh\nexec /opt/cuda/bin/nvcc \"$@\"\n")
    (wrap / "nvcc").chmod(0o755)
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(tmp_path / "site-packages")])
    monkeypatch.setattr(tvm_adapter, "DEFAULT_CUDA", tmp_path / "usr-local-cuda")
    env = {"PATH": str(wrap)}
    dest = tmp_path / "made"
    assert wm.tvm_cuda_path({**env, "CUDA_PATH": "/x"}, None, dest) == (
        None, "CUDA_PATH=/x is set here: TVM uses it, left as it is")
    path, why = wm.tvm_cuda_path(env, None, dest)
    assert path is None and why.startswith(f"TVM's own pick, {tmp_path / 'wrap'} (nvcc on PATH ({wrap / 'nvcc'})), "
                                           "lacks cuda_runtime.h, ")
    assert "no CUDA folder here or carried has them (carry nvidia-cuda-runtime and nvidia-cuda-cccl" in why
    # the carried header wheels' include folder: a CUDA folder made of it
    carried = cuda_headers(tmp_path / "carried" / "nvidia" / "cu13" / "include")
    path, why = wm.tvm_cuda_path(env, carried, dest)
    assert path and tvm_adapter.missing_headers(Path(path), "fp16") == [] and f"made of {carried}" in why
    # the machine's own CUDA 13 wheels come before the carried ones, if they hold CCCL too
    own = cuda_headers(tmp_path / "site-packages" / "nvidia" / "cu13" / "include")
    path, why = wm.tvm_cuda_path(env, carried, dest)
    assert f"made of {own}: this machine's CUDA 13 wheels" in why
    # a toolkit at /usr/local/cuda comes before those; CUDA_HOME before it
    cuda_headers(tmp_path / "usr-local-cuda" / "include")  # CCCL in include/cccl only: TVM does not look there
    assert wm.tvm_cuda_path(env, carried, dest)[0] != str(tmp_path / "usr-local-cuda")
    (tmp_path / "usr-local-cuda" / "include").rename(tmp_path / "old")
    cuda_toolkit(tmp_path / "usr-local-cuda")
    assert wm.tvm_cuda_path(env, carried, dest)[0] == str(tmp_path / "usr-local-cuda")
    cuda_toolkit(tmp_path / "home")
    path, why = wm.tvm_cuda_path({**env, "CUDA_HOME": str(tmp_path / "home")}, carried, dest)
    assert path == str(tmp_path / "home") and why.endswith("(CUDA_HOME has them)")
    # TVM's own pick holding them: nothing set
    cuda_toolkit(tmp_path / "wrap")
    assert wm.tvm_cuda_path(env, carried, dest) == (None, f"TVM finds its CUDA headers in {tmp_path / 'wrap'} "
                                                          f"(nvcc on PATH ({wrap / 'nvcc'}))")
