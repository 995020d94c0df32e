"""A GPU cell's device memory, read in its worker after the timed loop: two views.

* The allocator's: what the framework's own allocator says it used at its peak in this process
  (``Compiled.device_memory()`` where an adapter gives it (JAX: ``peak_bytes_in_use``); else
  torch's caching allocator (``torch.cuda.max_memory_allocated``, and ``max_memory_reserved``:
  what it held), where this process initialised CUDA through torch; else CuPy's default memory
  pool (the IOS runtime's arena and workspaces), whose held bytes are its high-water mark since
  the pool keeps freed blocks).
* NVML's: the GPU memory the driver charges to this process (``nvmlDeviceGetComputeRunningProcesses``;
  context, libraries' workspaces and every allocator included), and the device's used and total
  memory. A process NVML does not list (another PID namespace) gets the reason instead.

Each worker is a fresh process, so both are the peaks of one round of one cell (caching allocators
keep what they took, so NVML's reading after the loop is the process's high-water mark too).
:func:`oom_reason` names an out-of-memory error of any of these libraries, so a cell that does not
fit the GPU says so in its reason.
"""

from __future__ import annotations

import os
import sys

MIB = 2**20


def _mib(v) -> float | None:
    return round(v / MIB, 1) if isinstance(v, (int, float)) and v >= 0 else None


def allocator_view(compiled) -> dict | None:
    """The framework allocator's peak (``allocator``, ``allocator_peak_mib``, and what it held)."""
    own = getattr(compiled, "device_memory", None)
    if callable(own):
        try:
            got = own()
        except Exception:
            got = None
        if got and got.get("peak_bytes") is not None:
            return {"allocator": got.get("allocator", "the adapter's"), "allocator_peak_mib": _mib(got["peak_bytes"]),
                    **({"allocator_limit_mib": _mib(got["bytes_limit"])} if got.get("bytes_limit") else {})}
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return {"allocator": "torch (CUDA caching allocator)",
                    "allocator_peak_mib": _mib(torch.cuda.max_memory_allocated()),
                    "allocator_reserved_mib": _mib(torch.cuda.max_memory_reserved())}
    except Exception:
        pass
    cupy = sys.modules.get("cupy")
    try:
        if cupy is not None:
            pool = cupy.get_default_memory_pool()
            return {"allocator": "cupy (default memory pool)", "allocator_peak_mib": _mib(pool.total_bytes()),
                    "allocator_in_use_mib": _mib(pool.used_bytes())}
    except Exception:
        pass
    return None


def nvml_view(device: int = 0, pid: int | None = None) -> dict:
    """NVML's view (the process's one NVML session): this process's GPU memory (``nvml_process_mib``)
    and the device's used/total."""
    from ios_core.measurement.gpu import nvml_handle, nvml_session

    pid = os.getpid() if pid is None else pid
    pynvml, why = nvml_session()
    if pynvml is None:  # no NVML, or one that would not start: said so
        return {"nvml_note": f"NVML unavailable ({why[:140]})"}
    out: dict = {}
    try:
        handle = nvml_handle(pynvml, device)
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        out.update(nvml_device_used_mib=_mib(mem.used), nvml_device_total_mib=_mib(mem.total))
        procs = list(pynvml.nvmlDeviceGetComputeRunningProcesses(handle) or [])
        mine = [p for p in procs if getattr(p, "pid", None) == pid]
        used = getattr(mine[0], "usedGpuMemory", None) if mine else None
        if mine and isinstance(used, int):
            out["nvml_process_mib"] = _mib(used)
        else:
            out["nvml_note"] = (f"NVML lists no memory for this process (pid {pid}; {len(procs)} process(es) listed: "
                                "another PID namespace?)")
    except Exception as e:  # noqa: BLE001 - a reading NVML refuses is a note, never a failed cell
        out["nvml_note"] = f"NVML: {str(e)[:100] or type(e).__name__}"
    return out


def gpu_memory(compiled, device: str) -> dict | None:
    """Both views for a cell on ``cuda`` (None on other devices): the record's ``gpu_memory``."""
    if not str(device).startswith("cuda"):
        return None
    out = {"when": "after the timed loop (this worker's peak)"}
    out.update(allocator_view(compiled) or {"allocator": None})
    out.update(nvml_view(0))
    return out


_OOM_TYPES = ("OutOfMemoryError",)  # torch.cuda.OutOfMemoryError, cupy.cuda.memory.OutOfMemoryError
_OOM_TEXT = ("RESOURCE_EXHAUSTED", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation", "CUDA out of memory",
             "out of memory allocating", "CUDNN_STATUS_ALLOC_FAILED")


def oom_reason(exc: BaseException, device: str) -> str | None:
    """``out of memory on the GPU: ...`` when ``exc`` is a GPU library's out-of-memory error, else None."""
    if not str(device).startswith("cuda"):
        return None
    text = str(exc)
    if type(exc).__name__ in _OOM_TYPES or any(t in text for t in _OOM_TEXT):
        first = (text.strip().splitlines() or [""])[0][:200]
        return f"out of memory on the GPU ({type(exc).__name__}: {first})"
    return None
