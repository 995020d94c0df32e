"""TVM's CUDA toolchain, as the ``tvm`` and ``tvm-cudnn`` adapters (adapters/tvm.py) need it on a GPU machine:
its CUDA runtime library, the CUDA folder, headers and NVRTC its kernel compile needs (each missing piece named
in one line), the facts a GPU window prints about them, and the Relax pipeline for target cuda (with cuDNN
offload for tvm-cudnn). Moved from adapters/tvm.py, which re-exports these names."""

from __future__ import annotations

import os
from pathlib import Path

CUDA_RUNTIME_LIB = "libtvm_runtime_cuda"  # TVM's CUDA runtime, a library of its own beside libtvm_runtime
CUDART = "libcudart.so.13"  # what that library needs (apache-tvm 0.27 wheels: CUDA 13)


def cuda_runtime_problem(tvm_dir: Path | None = None) -> str | None:
    """TVM's CUDA runtime library loaded as TVM loads it: None when it loads (or this TVM has no
    such library), else the loader's own error in one line. TVM swallows that ``OSError`` and then
    says it has no CUDA runtime, a wrong reason: the library looks for ``libcudart.so.13`` beside
    itself and on the loader's path only (with torch hidden from a TVM worker's import, torch's
    copy is not loaded). Call it after ``import tvm``, whose libraries it needs."""
    import ctypes

    if tvm_dir is None:
        import tvm

        tvm_dir = Path(tvm.__file__).parent
    libs = sorted(tvm_dir.glob(f"lib/{CUDA_RUNTIME_LIB}*.so*")) + sorted(tvm_dir.glob(f"{CUDA_RUNTIME_LIB}*.so*"))
    if not libs:
        return None
    lib = libs[0]
    try:
        ctypes.CDLL(str(lib))
    except OSError as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        beside = "beside it" if (lib.parent / CUDART).exists() else f"not beside it in {lib.parent}"
        return f"TVM's CUDA runtime {lib.name} does not load: {why} ({CUDART} {beside})"
    return None


def cuda_reason(cudnn: bool = False) -> str | None:
    """Why this TVM build cannot compile and run for CUDA here (or with cuDNN offload), or None."""
    import tvm

    if not tvm.runtime.enabled("cuda"):
        return f"this TVM build ({tvm.__version__}) has no CUDA runtime"
    if not tvm.cuda(0).exist:
        return "TVM sees no CUDA GPU"
    if cudnn and tvm.get_global_func("relax.ext.cudnn", True) is None:
        return f"this TVM build ({tvm.__version__}) has no cuDNN codegen (built without USE_CUDNN)"
    return None


# ---- what TVM's CUDA compile needs on the GPU machine (issue 45) ---------------------------------
# Read in apache-tvm 0.27.0.post1's own source. ``tvm.compile`` for target cuda only writes CUDA C
# (which is why it builds here without a GPU); the CUDA module compiles that source when it is loaded
# on the GPU (``CUDAModuleNode::JitCompileFromSource`` in libtvm_runtime_cuda.so), through the
# function ``tvm_callback_cuda_compile`` that ``import tvm`` registers (``tvm/support/nvcc.py``; 0.27
# moved it there from tvm.contrib.nvcc). It compiles with NVRTC through ``cuda.bindings.nvrtc`` (the
# ``cuda-bindings`` package, apache-tvm's ``cuda`` extra; ``TVM_CUDA_COMPILE_MODE=nvcc`` runs the
# ``nvcc`` binary from PATH instead), passing ``-I`` for the CUDA folder ``find_cuda_path()`` names:
# ``CUDA_PATH`` (CUDA_HOME is not read), else ``nvcc`` on PATH (its ``../..``), else /usr/local/cuda
# when /usr/local/cuda/bin/nvcc exists: its ``include/``, ``targets/<triple>/include`` and that
# folder's ``cccl/`` (CUDA 13 keeps CCCL there); a folder without ``cuda_runtime.h`` is refused.
# The source it compiles includes CCCL's ``cuda/std/cstdint``, ``cuda/std/type_traits`` and
# ``cuda/std/limits`` (TVM's NVRTC preamble and header generator) and, for the fp16 build,
# ``cuda_fp16.h``; NVRTC 13 has none of them built in. NVRTC also opens ``libnvrtc-builtins.so.X.Y``
# with the loader, which finds it only on the loader's path unless it is loaded already.
TVM_CUDA_HEADERS = {"fp32": ("cuda_runtime.h", "cuda/std/cstdint", "cuda/std/type_traits", "cuda/std/limits"),
                    "fp16": ("cuda_runtime.h", "cuda/std/cstdint", "cuda/std/type_traits", "cuda/std/limits",
                             "cuda_fp16.h")}
DEFAULT_CUDA = Path("/usr/local/cuda")  # find_cuda_path's last resort (when its bin/nvcc exists)
COMPILE_MODES = ("nvrtc", "nvcc")
_PROBE_SOURCE = "extern \"C\" __global__ void ios_probe(float* x) { x[threadIdx.x] = 1.0f; }\n"
PROBE_ARCH = "sm_80"  # the probe compiles to PTX for it: NVRTC needs no GPU for that


def cuda_folder(env=None) -> tuple[Path | None, str]:
    """The CUDA folder TVM's ``find_cuda_path`` picks under ``env`` (default: this process's), and how
    it found it; (None, why there is none) where TVM raises 'Cannot find CUDA path'."""
    import shutil

    env = os.environ if env is None else env
    if "CUDA_PATH" in env:
        return Path(env["CUDA_PATH"]), "CUDA_PATH"
    nvcc = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    if nvcc:
        return Path(os.path.realpath(os.path.join(nvcc, "../.."))), f"nvcc on PATH ({nvcc})"
    if (DEFAULT_CUDA / "bin" / "nvcc").exists():
        return DEFAULT_CUDA, f"{DEFAULT_CUDA}/bin/nvcc"
    home = env.get("CUDA_HOME")
    return None, ("CUDA_PATH unset, no nvcc on PATH, no " + str(DEFAULT_CUDA / "bin" / "nvcc")
                  + (f"; CUDA_HOME={home} is not read by TVM" if home else ""))


def _target_triples() -> list[str]:
    import platform

    machine, system = platform.machine(), platform.system().lower()
    if system == "linux" and machine.lower() in ("aarch64", "arm64"):
        return ["sbsa-linux", f"{machine}-{system}"]
    return [f"{machine}-{system}"]


def cuda_include_dirs(folder: Path) -> list[Path]:
    """The ``-I`` folders TVM's NVRTC compile passes for CUDA folder ``folder`` (those that exist)."""
    dirs = [folder / "include"] if (folder / "include").is_dir() else []
    arch = next((folder / "targets" / t / "include" for t in _target_triples()
                 if (folder / "targets" / t / "include").is_dir()), None)
    if arch is not None:
        dirs.append(arch)
        if (arch / "cccl").is_dir():
            dirs.append(arch / "cccl")
    return dirs


def missing_headers(folder: Path, precision: str = "fp32") -> list[str]:
    """The headers TVM's generated CUDA C (at ``precision``) includes that no ``-I`` folder of
    ``folder`` holds."""
    dirs = cuda_include_dirs(folder)
    return [h for h in TVM_CUDA_HEADERS[precision] if not any((d / h).is_file() for d in dirs)]


def _loaded_library(prefix: str) -> Path | None:
    """The file of a library this process has loaded whose name starts with ``prefix``."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
            if Path(path).name.startswith(prefix):
                return Path(path)
    except OSError:
        pass
    return None


def nvrtc_problem() -> str | None:
    """Why NVRTC cannot compile for TVM in this process (one line), or None. Loads it as TVM does
    (``cuda.bindings.nvrtc``), then loads the ``libnvrtc-builtins.so.X.Y`` beside it, as PyTorch
    (pytorch/pytorch#167614) and cuda-pathfinder do: NVRTC opens it by name, which the loader finds
    only on its own path or when loaded already."""
    import ctypes

    try:
        from cuda.bindings import nvrtc
    except Exception as e:  # noqa: BLE001 - not installed, or an import that fails: its own words
        return (f"TVM compiles its CUDA kernels with NVRTC through cuda-bindings (cuda.bindings.nvrtc), which "
                f"does not import here ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}): "
                "install cuda-bindings (apache-tvm's cuda extra)")
    try:
        _, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001 - the library does not load: the loader's words
        return f"NVRTC does not load through cuda.bindings ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
    builtins = f"libnvrtc-builtins.so.{major}.{minor}"
    try:
        ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)  # on the loader's path
        return None
    except OSError:
        pass
    lib = _loaded_library("libnvrtc.so")
    beside = lib.parent / builtins if lib is not None else None
    if beside is not None and beside.is_file():
        try:
            ctypes.CDLL(str(beside), mode=ctypes.RTLD_GLOBAL)
            return None
        except OSError as e:
            return f"NVRTC's {beside} does not load: {str(e).splitlines()[0][:200]}"
    return f"NVRTC {major}.{minor} ({lib or 'libnvrtc'}) has no {builtins} beside it nor on the loader's path"


def cuda_compile_problem(precision: str = "fp32", compile_check: bool = True, env=None) -> str | None:
    """Why TVM cannot compile its CUDA kernels here at ``precision`` (fp32, fp16): one line naming
    the missing piece (cuda-bindings, NVRTC or its builtins, the CUDA folder, a header, nvcc), or
    None. ``compile_check``: also compile a small kernel including those headers with TVM's own
    ``compile_cuda`` (to PTX for :data:`PROBE_ARCH`; no GPU needed), which settles it."""
    env = os.environ if env is None else env
    mode = env.get("TVM_CUDA_COMPILE_MODE", "nvrtc").lower()
    if mode not in COMPILE_MODES:
        return f"TVM_CUDA_COMPILE_MODE={mode}: TVM compiles CUDA with nvrtc or nvcc only"
    folder, how = cuda_folder(env)
    if mode == "nvcc":
        import shutil

        if shutil.which("nvcc", path=env.get("PATH", os.defpath)) is None:
            return "TVM_CUDA_COMPILE_MODE=nvcc, and no nvcc on PATH: TVM runs the nvcc binary from PATH"
        return _probe_compile(precision, mode) if compile_check else None
    problems = [p for p in (nvrtc_problem(), _headers_problem(folder, how, precision)) if p]
    if problems:  # every missing piece at once, in one line: one window can then bring them all
        return " | ".join(problems)
    if not compile_check:
        return None
    key = (precision, mode, str(folder))
    if key not in _PROBED:  # once per process and folder (envinfo asks twice, a doctor once per variant)
        _PROBED[key] = _probe_compile(precision, mode)
    return _PROBED[key]


_PROBED: dict = {}


def _headers_problem(folder: Path | None, how: str, precision: str) -> str | None:
    if folder is None:
        return (f"TVM's CUDA compile (NVRTC) finds no CUDA folder for its headers ({how}): set CUDA_PATH to a "
                "folder whose include/ holds cuda_runtime.h and CCCL (cuda/std/...)")
    missing = missing_headers(folder, precision)
    if missing:
        dirs = ", ".join(str(d) for d in cuda_include_dirs(folder)) or f"no include/ in {folder}"
        return (f"TVM's CUDA compile (NVRTC) lacks {', '.join(missing)} in the CUDA folder {folder} (from {how}; "
                f"searched {dirs})")
    return None


def _probe_compile(precision: str, mode: str) -> str | None:
    try:
        from tvm.support import nvcc
    except Exception as e:  # noqa: BLE001
        return f"tvm.support.nvcc does not import ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
    src = "".join(f"#include <{h}>\n" for h in TVM_CUDA_HEADERS[precision] if h != "cuda_runtime.h") + _PROBE_SOURCE
    try:
        nvcc.compile_cuda(src, target_format="ptx", arch=PROBE_ARCH, compiler=mode)
    except Exception as e:  # noqa: BLE001 - TVM's compile error: its first telling line
        lines = [x.strip() for x in str(e).splitlines() if x.strip()]
        telling = next((x for x in lines if "error" in x.lower() and not x.lower().startswith("nvrtc compilation")),
                       lines[0] if lines else type(e).__name__)
        return f"TVM's CUDA compile ({mode}) of a small kernel fails: {telling[:240]}"
    return None


def cuda_toolchain_facts(env=None) -> list[str]:
    """What the next session needs to know about this machine's CUDA toolchain, one fact a line:
    nvcc, CUDA_PATH, CUDA_HOME, /usr/local/cuda/include, where cuda_fp16.h and CCCL are, cuda-bindings
    and NVRTC, and TVM's CUDA folder and verdict per precision."""
    import shutil
    import site
    import sys

    env = os.environ if env is None else env
    nvcc = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    facts = [f"nvcc on PATH: {nvcc or 'no'}", f"CUDA_PATH: {env.get('CUDA_PATH', 'unset')}",
             f"CUDA_HOME: {env.get('CUDA_HOME', 'unset')}",
             f"{DEFAULT_CUDA}/include: {'present' if (DEFAULT_CUDA / 'include').is_dir() else 'absent'}"
             + (f", bin/nvcc {'present' if (DEFAULT_CUDA / 'bin' / 'nvcc').exists() else 'absent'}")]
    roots = [DEFAULT_CUDA / "include"] + [Path(env[k]) / "include" for k in ("CUDA_PATH", "CUDA_HOME") if env.get(k)]
    for sp in [*site.getsitepackages(), *sys.path]:
        for sub in ("nvidia/cu13/include", "nvidia/cuda_runtime/include", "nvidia/cuda_cccl/include"):
            roots.append(Path(sp) / sub)
    seen, fp16, cccl = set(), [], []
    for r in roots:
        if r in seen or not r.is_dir():
            continue
        seen.add(r)
        if (r / "cuda_fp16.h").is_file():
            fp16.append(str(r))
        for c in (r / "cuda/std/cstdint", r / "cccl/cuda/std/cstdint"):
            if c.is_file():
                cccl.append(str(c.parent.parent.parent))
    facts.append(f"cuda_fp16.h found in: {', '.join(fp16) or 'none of ' + str(len(seen)) + ' include folders'}")
    facts.append(f"CCCL (cuda/std/cstdint) found in: {', '.join(cccl) or 'none'}")
    try:
        from importlib.metadata import version

        facts.append(f"cuda-bindings: {version('cuda-bindings')}")
    except Exception:  # noqa: BLE001
        facts.append("cuda-bindings: not installed")
    folder, how = cuda_folder(env)
    facts.append(f"TVM's CUDA folder: {folder} ({how})" + (f"; -I {', '.join(map(str, cuda_include_dirs(folder)))}"
                                                            if folder else ""))
    facts.append(f"TVM_CUDA_COMPILE_MODE: {env.get('TVM_CUDA_COMPILE_MODE', 'unset (nvrtc)')}")
    for precision in ("fp32", "fp16"):
        facts.append(f"TVM's CUDA compile at {precision}: {cuda_compile_problem(precision, env=env) or 'ok'}")
    lib = _loaded_library("libnvrtc.so")
    facts.append(f"libnvrtc loaded: {lib or 'no'}")
    return facts


def cuda_folder_from(include: Path, dest: Path) -> Path:
    """A CUDA folder for TVM made of one include folder that holds the CUDA runtime headers and CCCL
    under ``cccl/`` (the CUDA 13 wheels' ``nvidia/cu13/include``): ``dest/include`` and
    ``dest/targets/<triple>/include`` link to it, so TVM's ``-I`` list has both and ``cccl/``.
    Returns ``dest`` (for ``CUDA_PATH``)."""
    triple = dest / "targets" / _target_triples()[0]
    triple.mkdir(parents=True, exist_ok=True)
    for link in (dest / "include", triple / "include"):
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(include.resolve(), target_is_directory=True)
    return dest


def cuda_target(spec=None):
    import tvm

    return tvm.target.Target(spec or "cuda")


def _compile_cuda(mod, target, cudnn: bool):
    """The default Relax pipeline for CUDA (legalize, fuse, DLight GPU schedules, lower); with
    ``cudnn``, convolutions (with bias and ReLU where they match) are first partitioned out to
    cuDNN (BYOC) and code-generated -- the paper's TVM-cuDNN."""
    import tvm
    from tvm import relax

    if cudnn:
        from tvm.relax.backend.cuda.cudnn import partition_for_cudnn

        mod = partition_for_cudnn(mod)
        mod = relax.transform.RunCodegen()(mod)
    return tvm.compile(mod, target, relax_pipeline=relax.get_default_pipeline(target))
