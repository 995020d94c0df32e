"""The ``gpu`` extra installs CUDA 12 builds that run on a CUDA 12 driver, NVRTC included
(issue 22: ``tensorrt>=10`` resolved to TensorRT 11's CUDA 13 build, driver 580+, and
``cupy-cuda12x`` without ``ctk`` brought no NVRTC, so the first kernel failed on an image
without a CUDA toolkit).

* Offline: the extra names CUDA 12 distributions only.
* ``pip install --dry-run --report`` of the extra (needs the package index; skipped, saying so,
  only when the index cannot be reached): every CUDA-versioned distribution it resolves to is
  a CUDA 12 one, CuPy comes with NVRTC. TensorRT's libraries (``tensorrt-cu12-libs``) are a stub
  that fetches the real wheel from NVIDIA's own index while pip prepares its metadata, so
  TensorRT is resolved without dependencies and its declared dependencies are checked instead.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
CUDA_SUFFIX = re.compile(r"(?:-|_)cu(?:da)?(\d+)(?:x)?(?:$|-|_)")


def _gpu_extra() -> list[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return list(meta["gpu"])


def _name(req: str) -> str:
    return re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].strip().lower()


def _cuda_major(name: str) -> int | None:
    m = CUDA_SUFFIX.search(name.lower() + "-")
    return int(m.group(1)) if m else None


def test_the_gpu_extra_names_cuda_12_builds_only():
    names = [_name(r) for r in _gpu_extra()]
    assert "tensorrt" not in names, "the bare tensorrt package resolves to the CUDA 13 build"
    for n in names:
        if n.startswith(("tensorrt", "cupy", "nvidia-cuda", "nvidia-cudnn-cu")):
            assert _cuda_major(n) == 12, n
    cupy = next(r for r in _gpu_extra() if _name(r).startswith("cupy"))
    assert "[ctk]" in cupy.replace(" ", "")  # CuPy's CUDA toolkit libraries, NVRTC among them
    assert "nvidia-cuda-nvrtc-cu12" in names


def _pip(*args: str, timeout: float = 540) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout)


def _index_or_skip() -> None:
    try:
        r = _pip("index", "versions", "nvidia-ml-py", timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip("the package index did not answer within 120 s")
    if r.returncode != 0:
        pytest.skip(f"the package index is unreachable: {(r.stderr or r.stdout).strip().splitlines()[-1][:200]}")


def _resolve(reqs: list[str], tmp_path: Path, *extra: str) -> list[dict]:
    report = tmp_path / "report.json"
    r = _pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), *extra, *reqs)
    assert r.returncode == 0, f"pip could not resolve {reqs}:\n{r.stderr[-3000:]}"
    return json.loads(report.read_text())["install"]


@pytest.mark.slow
def test_the_gpu_extra_resolves_to_cuda_12_builds_with_nvrtc(tmp_path):
    _index_or_skip()
    reqs = _gpu_extra()
    trt = [r for r in reqs if _name(r).startswith("tensorrt")]
    rest = [r for r in reqs if r not in trt]
    installed = _resolve(rest, tmp_path)
    names = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installed}
    wrong = {n: v for n, v in names.items() if _cuda_major(n) not in (None, 12)}
    assert not wrong, f"non-CUDA-12 builds in the gpu extra's resolution: {wrong}"
    assert "nvidia-cuda-nvrtc-cu12" in names and names["nvidia-cuda-nvrtc-cu12"].startswith("12.")
    assert "cupy-cuda12x" in names
    assert not any(n.startswith("cuda-bindings") and not v.startswith("12.") for n, v in names.items())
    assert trt, "the gpu extra has no TensorRT"
    for item in _resolve(trt, tmp_path, "--no-deps"):
        meta = item["metadata"]
        assert meta["version"].split(".")[0] in ("10", "11"), meta["version"]
        deps = [_name(d) for d in meta.get("requires_dist") or [] if "extra ==" not in d]
        assert deps and all(_cuda_major(d) == 12 for d in deps if d.startswith("tensorrt")), deps
