"""The lent machine as ``benchmarks/gpu_headline.py`` finds it, only read, never changed: its GPU
(asked in a fresh process each time, so that one that vanishes is seen), a plan cache stored under
another cuDNN, and the CUDA folder TVM's compile is pointed at, with the toolchain's facts."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from benchmarks._window_wheels import HEADER_WHEELS

ROOT = Path(__file__).resolve().parent.parent


def plan_cache_problem(db: Path, cudnn) -> str | None:
    """One line where the profile database's cuDNN plan cache holds plans stored under another
    cuDNN than this machine's (``cudnn``): they are not used here (rebuilt); None otherwise."""
    if not db.is_file():
        return None
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            rows = con.execute("SELECT versions, COUNT(*) FROM cudnn_plans GROUP BY versions").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return None  # no plan table yet
    other: dict = {}
    for versions, n in rows:
        try:
            theirs = json.loads(versions).get("cudnn")
        except (ValueError, AttributeError):
            theirs = "?"
        if theirs != cudnn:
            other[theirs] = other.get(theirs, 0) + n
    if not other:
        return None
    return (f"plan cache {db}: " + ", ".join(f"{n} plan(s) from cuDNN {v}" for v, n in sorted(other.items(), key=str))
            + f", this machine has cuDNN {cudnn}: not used here (rebuilt and stored under this cuDNN)")


def probe_gpu(fake: bool, env: dict | None = None) -> dict:
    """The GPU's state, asked in a fresh process each time (a vanished GPU is seen): {missing: the
    reason there is no GPU, or None; cuda: why the IOS CUDA runtime cannot run (CuPy, cuDNN: a
    wheel that did not travel), or None; name, cudnn, clocks (their state: only read, never set)}."""
    if fake:
        return {"missing": os.environ.get("IOS_BENCH_WINDOW_FAKE_GPU_GONE") or None, "name": "fake device (CPU)",
                "cudnn": None, "clocks": "fake device: no clocks"}
    code = ("import json\nfrom ios_core.measurement import gpu\nr = gpu.gpu_missing()\n"
            "fp = {} if r else gpu.fingerprint()\n"
            "print(json.dumps({'missing': r, 'cuda': None if r else gpu.cuda_missing(), 'name': fp.get('name'), "
            "'cudnn': fp.get('cudnn'), 'clocks': None if r else gpu.clock_state(fp)}))\n")
    try:
        env = dict(env or os.environ)
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH", "")) if x)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90, cwd=ROOT,
                           env=env)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return {"missing": f"the GPU could not be asked ({type(e).__name__})", "name": None, "cudnn": None,
                "clocks": None}


def tvm_cuda_path(env: dict, carried: Path | None, dest: Path) -> tuple[str | None, str]:
    """Where TVM's CUDA compile finds its headers for the steps (``env``): (a CUDA_PATH to set, or None
    to leave TVM's own choice; one line saying which and why). TVM reads CUDA_PATH, else nvcc on
    PATH, else /usr/local/cuda, and never CUDA_HOME (adapters/tvm.py); a wrapper script ``nvcc`` outside
    the CUDA folder (``/usr/local/bin/nvcc`` running ``/usr/local/cuda-13.0/bin/nvcc``, as on the
    development machines) sends it to the wrong folder. Tried in turn where TVM's pick lacks a header:
    CUDA_HOME, /usr/local/cuda, the machine's CUDA 13 wheels' include folder, the carried header wheels'."""
    import site

    from adapters.tvm import DEFAULT_CUDA, cuda_folder, cuda_folder_from, missing_headers

    if "CUDA_PATH" in env:
        return None, f"CUDA_PATH={env['CUDA_PATH']} is set here: TVM uses it, left as it is"
    folder, how = cuda_folder(env)
    if folder is not None and not missing_headers(folder, "fp16"):
        return None, f"TVM finds its CUDA headers in {folder} ({how})"
    pick = (f"TVM's own pick, {folder} ({how}), lacks {', '.join(missing_headers(folder, 'fp16'))}"
            if folder is not None else f"TVM finds no CUDA folder ({how})")
    homes = [(Path(env["CUDA_HOME"]), "CUDA_HOME")] if env.get("CUDA_HOME") else []
    homes.append((DEFAULT_CUDA, str(DEFAULT_CUDA)))
    for path, name in homes:
        if path.is_dir() and not missing_headers(path, "fp16"):
            return str(path), f"{pick}: CUDA_PATH={path} for the steps ({name} has them)"
    includes = [(Path(sp) / "nvidia" / "cu13" / "include", f"this machine's CUDA 13 wheels ({sp})")
                for sp in site.getsitepackages()]
    if carried is not None:
        includes.append((carried, "the carried " + " and ".join(HEADER_WHEELS) + " wheels"))
    for i, (include, name) in enumerate(includes):
        if (include / "cuda_runtime.h").is_file():
            made = cuda_folder_from(include, dest / f"cuda-{i}")
            if not missing_headers(made, "fp16"):
                return str(made), f"{pick}: CUDA_PATH={made} for the steps (made of {include}: {name})"
    return None, (f"{pick}, and no CUDA folder here or carried has them (carry {' and '.join(HEADER_WHEELS)}: "
                  "--fetch-wheels): the tvm cells are skipped with that reason")


TOOLCHAIN_PROBE = """
import json
from adapters.imports import absent
with absent("torch", unless="tvm"):  # as a tvm worker imports it: torch (which loads NVRTC's builtins) hidden
    try:
        import tvm  # noqa: F401
    except Exception:
        pass
from adapters.tvm import cuda_toolchain_facts
print(json.dumps(cuda_toolchain_facts()))
"""


def toolchain_facts(env: dict) -> list[str]:
    """This machine's CUDA toolchain as the steps see it (``env``), asked in a fresh process as a tvm
    worker imports TVM: nvcc, CUDA_PATH, CUDA_HOME, /usr/local/cuda/include, where cuda_fp16.h and CCCL
    are, cuda-bindings, NVRTC, TVM's CUDA folder and its compile at fp32 and fp16."""
    try:
        p = subprocess.run([sys.executable, "-c", TOOLCHAIN_PROBE], capture_output=True, text=True, timeout=120,
                           cwd=ROOT, env=env)
        return [str(x) for x in json.loads(p.stdout.strip().splitlines()[-1])]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1][:200] if "p" in locals() else ""
        return [f"the toolchain could not be asked ({type(e).__name__}{': ' + tail if tail else ''})"]
