"""What the CUDA paths need, whether this machine has it, and the GPU's identity.

Everything here imports its GPU library lazily and never raises for a missing GPU: a
machine without one gets a one-line reason (:func:`cuda_missing`), which is what
``ios-bench doctor`` prints and what ``ios-bench run --device cuda`` stops with.

* :func:`cuda_missing` -- ``None`` when the IOS CUDA runtime can run here, else what is
  missing (the ``gpu`` extra, a driver, a GPU, the cuDNN library).
* :func:`fingerprint` -- the GPU's name, driver, CUDA runtime, cuDNN and its clock setting
  (the locked SM clock when ``ios-bench run --lock-clocks`` locked it, else the application
  clock): the key of the profile database for stages measured on this GPU
  (``ios_core.cost.cache``). The instantaneous SM clock, which moves between idle and boost,
  is recorded but is not part of the key.
* :class:`CudaEventTimer` -- times a sample with two CUDA events on one stream, the GPU's
  own clock (``ios_core.measurement.measure.measure(..., timer=...)``): the IOS runtime's own
  measurements and the measured cost model.
* :func:`time_gpu_cell`, :data:`GPU_CELL_CLOCK` and :func:`device_synchronizer` -- the one timing
  protocol of every GPU cell of a sweep, whatever the framework: the host clock read after a
  device-wide synchronize following every call (``ios_bench.running.task_cell.time_compiled``), and
  of the whole schedules the measured cost model times end to end (its candidates).
* :func:`time_calls` -- that protocol on a GPU, ``measure`` on the CPU: what a cell's rounds and a
  framework's profiled calls are both timed with, so a profiler's cost compares one clock with itself.
* :func:`throttle_reasons`, :func:`sustainable_sm_clock` -- what NVML says limits the clock,
  and the clock a lock can hold under load (the default application clock).

Nothing in this module has run on a GPU in this project's development (see README).
"""

from __future__ import annotations

import importlib

GPU_EXTRA_HINT = "pip install 'ios-bench[gpu]'"
# Set by ios_bench.machine.clocks.ClockLock for the processes it starts: "<index>:<MHz>,..." of the GPUs
# whose SM clock it locked (ios_core reads it, never imports ios_bench).
LOCKED_CLOCK_ENV = "IOS_BENCH_GPU_LOCKED_SM_MHZ"
# How every GPU cell is timed (recorded as the cell's "clock"): host clock, whole device
# synchronized after every call, so frameworks that expose no stream are timed like the rest.
GPU_CELL_CLOCK = "host+device-sync"


def _import(module: str):
    try:
        return importlib.import_module(module), None
    except Exception as e:  # ImportError, or a broken install raising anything
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def gpu_missing() -> str | None:
    """Why this machine has no NVIDIA GPU to run on, or None. Asks NVML (nvidia-ml-py), then
    ``nvidia-smi``, then CuPy, then torch: whichever is there; the first GPU found wins, else the
    first reason is returned."""
    reasons = []
    pynvml, why = nvml_session()
    if pynvml is not None:
        try:
            n = pynvml.nvmlDeviceGetCount()
            if n > 0:
                return None
            reasons.append("no NVIDIA GPU (the driver lists none)")
        except Exception as e:
            reasons.append(f"no NVIDIA GPU driver ({type(e).__name__}: {e})")
    elif why.startswith(_NVML_FAILED):  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        reasons.append(f"no NVIDIA GPU driver ({why[len(_NVML_FAILED):]})")
    smi = _nvidia_smi_gpus()
    if smi:
        return None
    if _import("cupy")[0] is not None:
        r = cupy_missing()
        if r is None:
            return None
        reasons.append(r)
    torch, _ = _import("torch")
    if torch is not None and torch.cuda.is_available():
        return None
    return reasons[0] if reasons else "no NVIDIA GPU found (no NVML, no nvidia-smi, no CuPy, torch sees no CUDA device)"


def _nvidia_smi_gpus() -> list[str]:
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        r = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in r.stdout.splitlines() if line.strip()] if r.returncode == 0 else []


def cupy_missing() -> str | None:
    """Why CuPy cannot drive a GPU here, or None."""
    cupy, err = _import("cupy")
    if cupy is None:
        return f"CuPy is not installed ({GPU_EXTRA_HINT}; {err})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError: no driver, insufficient driver, no device
        return f"no usable CUDA GPU ({str(e).splitlines()[0][:160]})"
    if n < 1:
        return "no CUDA GPU (the driver lists none)"
    return None


def cudnn_missing() -> str | None:
    """Why NVIDIA's cuDNN Frontend cannot run here, or None (checked after CuPy)."""
    cudnn, err = _import("cudnn")
    if cudnn is None:
        return f"the cuDNN Frontend (nvidia-cudnn-frontend) is not installed ({GPU_EXTRA_HINT}; {err})"
    try:
        cudnn.backend_version()
    except Exception as e:  # the frontend loads libcudnn lazily
        return f"the cuDNN library is not loadable ({str(e).splitlines()[0][:160]}; pip install nvidia-cudnn-cu12)"
    return None


def cuda_missing(cudnn: bool = True) -> str | None:
    """Why the IOS CUDA runtime cannot run here (the first thing missing), or None."""
    return cupy_missing() or (cudnn_missing() if cudnn else None)


def tensorrt_missing() -> str | None:
    trt, err = _import("tensorrt")
    if trt is None:
        return f"TensorRT is not installed ({GPU_EXTRA_HINT}: tensorrt-cu12; {err})"
    return cupy_missing()


def locked_sm_clock(device: int = 0) -> int | None:
    """The SM clock ``ios-bench run --lock-clocks`` locked GPU ``device`` at, or None."""
    import os

    for part in os.environ.get(LOCKED_CLOCK_ENV, "").split(","):
        index, _, mhz = part.partition(":")
        if index.strip() == str(device) and mhz.strip().isdigit():
            return int(mhz)
    return None


def device_synchronizer():
    """A function that waits for everything queued on the current GPU (all streams, every
    framework in this process: they share the primary context), or None without CuPy or torch
    with CUDA."""
    cupy, _ = _import("cupy")
    if cupy is not None:
        return cupy.cuda.runtime.deviceSynchronize
    torch, _ = _import("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.synchronize
    return None


def time_gpu_cell(fn, sync, now=None, **protocol):
    """The one timing protocol of a GPU cell (:data:`GPU_CELL_CLOCK`), and of every whole schedule
    the measured cost model times end to end to choose the one a cell will run: ``fn()`` one call at
    a time, ``sync()`` (which waits for the whole device) after each, the host clock read after it
    (``ios_core.measurement.measure.measure``; ``protocol``: its warmup, number, repeat,
    min_sample_ms). ``now``: the host clock in nanoseconds (the tests' fake GPU passes its own)."""
    from ios_core.measurement.measure import measure

    return measure(fn, sync=sync, timer=None, clock=GPU_CELL_CLOCK, now=now, **protocol)


def time_calls(fn, sync, device: str, timer=None, **protocol):
    """The one way a program's calls are timed on ``device``, whatever times them (a cell's rounds,
    a doctor path, a framework's profiled block): on a GPU :func:`time_gpu_cell` (``sync`` and a
    device-wide synchronize after every call, the host clock: a profiled block and the unprofiled
    one it is compared with read the same clock); on the CPU
    ``ios_core.measurement.measure.measure`` with ``sync`` and ``timer`` (the program's own, if any)."""
    from ios_core.measurement.measure import measure

    if str(device).startswith("cuda"):
        device_sync = device_synchronizer()

        def both():
            sync()
            if device_sync is not None:
                device_sync()
        return time_gpu_cell(fn, both, **protocol)
    return measure(fn, sync=sync, timer=timer, **protocol)


def throttle_reasons(pynvml, handle) -> list[str]:
    """Why the clock is below its maximum now (NVML's clock event reasons, by name: e.g.
    ``SwPowerCap``, ``HwThermalSlowdown``, ``GpuIdle``); [] when nothing limits it."""
    get = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = int(get(handle))
    prefix = "nvmlClocksEventReason" if hasattr(pynvml, "nvmlClocksEventReasonGpuIdle") else "nvmlClocksThrottleReason"
    out = []
    for name in sorted(dir(pynvml)):
        if name.startswith(prefix) and name[len(prefix):] not in ("All", "None"):
            bit = getattr(pynvml, name)
            if isinstance(bit, int) and bit and mask & bit == bit:
                out.append(name[len(prefix):])
    return out


def sustainable_sm_clock(pynvml, handle) -> int | None:
    """The SM clock a lock can hold under sustained load: the default application clock (the
    board's base clock, below boost), else the current application clock; None if NVML knows
    neither. The maximum boost clock is not sustainable: it throttles under load."""
    for name in ("nvmlDeviceGetDefaultApplicationsClock", "nvmlDeviceGetApplicationsClock"):
        try:
            mhz = int(getattr(pynvml, name)(handle, pynvml.NVML_CLOCK_SM))
        except Exception:
            continue
        if mhz > 0:
            return mhz
    return None


def fingerprint(device: int = 0) -> dict:
    """Identity of the GPU a measurement was taken on: name, compute capability, driver, CUDA
    runtime, cuDNN, the clock setting (locked SM clock, application clock) and, for the record
    only, the current/maximum SM clock and throttle reasons (NVML when available). Missing
    pieces are ``None``; never raises."""
    out: dict = {"name": None, "compute_capability": None, "driver": None, "cuda_runtime": None, "cudnn": None,
                 "sm_clock_mhz": None, "max_sm_clock_mhz": None, "app_sm_clock_mhz": None,
                 "locked_sm_clock_mhz": locked_sm_clock(device), "throttle_reasons": None}
    cupy, _ = _import("cupy")
    if cupy is not None:
        rt = cupy.cuda.runtime
        try:
            props = rt.getDeviceProperties(device)
            name = props.get("name", b"")
            out["name"] = name.decode() if isinstance(name, bytes) else str(name)
            out["compute_capability"] = f"{props.get('major')}.{props.get('minor')}"
        except Exception:
            pass
        for key, fn in (("driver", rt.driverGetVersion), ("cuda_runtime", rt.runtimeGetVersion)):
            try:
                out[key] = _cuda_version(int(fn()))
            except Exception:
                pass
    cudnn, _ = _import("cudnn")
    if cudnn is not None:
        try:
            out["cudnn"] = str(cudnn.backend_version_string())
        except Exception:
            pass
    nv = nvml_info(device)
    out["name"] = out["name"] or nv.get("name")
    out["driver_cuda"] = out["driver"]  # the CUDA version the driver supports
    out["driver"] = nv.get("driver_version") or out["driver"]  # e.g. 575.51.03
    for key in ("sm_clock_mhz", "max_sm_clock_mhz", "app_sm_clock_mhz", "throttle_reasons"):
        out[key] = nv.get(key)
    return out


def clock_setting(fp: dict) -> str:
    """``locked<MHz>`` when ``--lock-clocks`` locked the SM clock, else ``app<MHz>`` (the
    application clock the GPU boosts from, unlocked)."""
    if fp.get("locked_sm_clock_mhz"):
        return f"locked{fp['locked_sm_clock_mhz']}"
    return f"app{fp.get('app_sm_clock_mhz')}"


def clock_state(fp: dict | None = None, device: int = 0) -> str:
    """The GPU's clock state in words, recorded with every GPU figure: ``SM clock locked at <MHz>
    (--lock-clocks)`` when this run locked it, else ``clocks left alone (application clock <MHz>,
    SM <MHz> now)`` (what NVML knows; ``clocks left alone (NVML could not say more)`` without it).
    Nothing in ios-bench locks a clock unless asked."""
    fp = fp if fp is not None else fingerprint(device)
    if fp.get("locked_sm_clock_mhz"):
        return f"SM clock locked at {fp['locked_sm_clock_mhz']} MHz (--lock-clocks)"
    parts = [f"application clock {fp['app_sm_clock_mhz']} MHz" if fp.get("app_sm_clock_mhz") else None,
             f"SM {fp['sm_clock_mhz']} MHz now" if fp.get("sm_clock_mhz") else None]
    parts = [p for p in parts if p]
    return "clocks left alone (" + (", ".join(parts) if parts else "NVML could not say more") + ")"


def fingerprint_key(fp: dict) -> str:
    """The profile-database device key:
    ``cuda:<name>|drv<driver>|cuda<runtime>|cudnn<v>|<clock setting>``, the clock setting being
    ``locked<MHz>`` (locked by ``--lock-clocks``) or ``app<MHz>`` (unlocked: the application
    clock the GPU boosts from). Never the instantaneous SM clock, which differs between an idle
    and a busy GPU, so stages measured under one setting are reused under the same setting."""
    return (f"cuda:{fp.get('name')}|drv{fp.get('driver')}|cuda{fp.get('cuda_runtime')}|cudnn{fp.get('cudnn')}"
            f"|{clock_setting(fp)}")


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}" if v else "0"


# ---- one NVML session per process ------------------------------------------------------------
# nvmlInit/nvmlShutdown cost milliseconds (the driver opens the device files, enumerates the GPUs):
# the measured GPU cost model reads NVML around every stage it times, so it keeps one session open
# for the life of the process (shut down at exit) instead of one per reading. Every reader of NVML
# opens it here (gpu_missing, nvml_info, UtilizationSampler, the clock lock, the memory readings
# and the GPU memory check of ios_bench): none calls nvmlInit or nvmlShutdown itself. Keyed by the
# module object (tests hand in fakes) and the process id (a forked child opens its own).
_NVML_SESSIONS: dict[int, dict] = {}
_NVML_INITS = {"count": 0}  # nvmlInit calls made through nvml_session in this process
_NVML_FAILED = "NVML: "  # how a reason of nvml_session's for an NVML that would not start begins


def nvml_session(nvml=None):
    """``(pynvml, None)`` with NVML initialised, once per process (``nvml``: the module to use,
    tests pass a fake), or ``(None, reason)`` where NVML is missing or cannot be initialised (the
    reason is kept: a process does not retry a failed NVML at every stage)."""
    import os

    if nvml is None:
        nvml, err = _import("pynvml")
        if nvml is None:
            return None, f"pynvml is not installed ({err})"
    key = id(nvml)
    entry = _NVML_SESSIONS.get(key)
    if entry is not None and entry["module"] is nvml and entry["pid"] == os.getpid():
        return (nvml, None) if entry["reason"] is None else (None, entry["reason"])
    reason = None
    try:
        _NVML_INITS["count"] += 1
        nvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        reason = f"{_NVML_FAILED}{type(e).__name__}: {e}"
    if not _NVML_SESSIONS:
        import atexit

        atexit.register(close_nvml_sessions)
    _NVML_SESSIONS[key] = {"module": nvml, "pid": os.getpid(), "reason": reason, "handles": {}}
    return (nvml, None) if reason is None else (None, reason)


def nvml_handle(nvml, index: int):
    """The device handle of GPU ``index`` in ``nvml``'s session (looked up once)."""
    entry = _NVML_SESSIONS.get(id(nvml))
    handles = entry["handles"] if entry is not None and entry["module"] is nvml else {}
    h = handles.get(index)
    if h is None:
        h = handles[index] = nvml.nvmlDeviceGetHandleByIndex(index)
    return h


def nvml_sessions_opened() -> int:
    """How many NVML sessions this process opened through :func:`nvml_session` (1 when NVML is
    read however often)."""
    return _NVML_INITS["count"]


def close_nvml_sessions() -> None:
    """Shut down this process's NVML sessions (at exit; tests call it to start afresh)."""
    import os

    for key, entry in list(_NVML_SESSIONS.items()):
        del _NVML_SESSIONS[key]
        if entry["reason"] is None and entry["pid"] == os.getpid():
            try:
                entry["module"].nvmlShutdown()
            except Exception:
                pass


def nvml_info(device: int = 0) -> dict:
    """Name, driver version, SM clocks (current, maximum, application) and throttle reasons
    from NVML (nvidia-ml-py), or {} without it."""
    pynvml, _ = nvml_session()
    if pynvml is None:
        return {}
    try:
        h = nvml_handle(pynvml, device)
        name = pynvml.nvmlDeviceGetName(h)
        drv = pynvml.nvmlSystemGetDriverVersion()
        out = {"name": name.decode() if isinstance(name, bytes) else name,
               "driver_version": drv.decode() if isinstance(drv, bytes) else drv,
               "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
               "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)}
        app = pynvml.nvmlDeviceGetApplicationsClock
        for key, fn in (("app_sm_clock_mhz", lambda: int(app(h, pynvml.NVML_CLOCK_SM))),
                        ("throttle_reasons", lambda: throttle_reasons(pynvml, h))):
            try:
                out[key] = fn()
            except Exception:  # not supported on this board
                out[key] = None
        return out
    except Exception:
        return {}


class CudaEventTimer:
    """Times a sample on the GPU's clock: an event recorded on ``stream`` before the sample's
    calls and one after; ``stop`` waits for the second (only that event, not the device) and
    returns the milliseconds between them (``cupy.cuda.get_elapsed_time``)."""

    clock = "cuda-events"

    def __init__(self, stream=None, cupy=None):
        if cupy is None:  # the tests' fake device passes its own (tests/stream_fakes_queue.py: FakeCupy)
            import cupy

        self._cupy = cupy
        self.stream = stream
        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def start(self) -> None:
        self._start.record(self.stream)

    def stop(self) -> float:
        self._end.record(self.stream)
        self._end.synchronize()
        return float(self._cupy.cuda.get_elapsed_time(self._start, self._end))


class UtilizationSampler:
    """Samples the GPU's SM utilization (NVML ``nvmlDeviceGetUtilizationRates``: the percent of
    the last sample period in which a kernel ran) every ``period_s`` on a background thread, as
    the IOS paper's utilization experiment does. Use as a context manager; ``samples`` holds
    ``(seconds since start, gpu %, memory %)``. NVML is read in the process's one session
    (:func:`nvml_session`); a machine without it raises ``RuntimeError`` with the reason."""

    def __init__(self, device: int = 0, period_s: float = 0.005):
        self.device, self.period_s = device, period_s
        self.samples: list[tuple[float, int, int]] = []
        self._stop = None
        self._thread = None

    def __enter__(self):
        import threading
        import time

        pynvml, why = nvml_session()
        if pynvml is None:
            raise RuntimeError(f"GPU utilization cannot be sampled ({why})")
        handle = nvml_handle(pynvml, self.device)
        self._stop = threading.Event()
        t0 = time.perf_counter()

        def loop():
            while not self._stop.is_set():
                u = pynvml.nvmlDeviceGetUtilizationRates(handle)
                self.samples.append((time.perf_counter() - t0, int(u.gpu), int(u.memory)))
                self._stop.wait(self.period_s)

        self._thread = threading.Thread(target=loop, name="gpu-util", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def mean_gpu_percent(self) -> float | None:
        return sum(s[1] for s in self.samples) / len(self.samples) if self.samples else None
