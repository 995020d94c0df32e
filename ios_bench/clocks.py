"""Clock locking for stable timings (``ios-bench run --lock-clocks``), with guaranteed restore.

CPU: every core's cpufreq governor set to ``performance`` and turbo/boost switched off (what
``pyperf system tune`` does), previous values restored afterwards. NVIDIA GPU (only when the
sweep uses a ``cuda`` device): the SM clock locked to the requested or maximum value through
NVML (``nvmlDeviceSetGpuLockedClocks``, nvidia-ml-py) and reset afterwards
(``nvmlDeviceResetGpuLockedClocks``); without NVML, ``nvidia-smi --lock-gpu-clocks`` and
``--reset-gpu-clocks``. The restore runs on normal exit, on an exception, on
SIGINT and on SIGTERM/SIGHUP (turned into ``SystemExit`` so every ``finally`` runs), and once
more from ``atexit``; it is idempotent.

Where locking is impossible (no permission, no cpufreq interface as in most VMs, no GPU) this
says so once and records ``unlocked (reason)``; the sweep carries on. All machine access goes
through :mod:`ios_bench.system`.
"""

from __future__ import annotations

import atexit
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from . import system


class Terminated(SystemExit):
    """Raised from the SIGTERM/SIGHUP handler so that cleanup code runs."""


def _cpufreq_dirs() -> list[Path]:
    root = system.sysfs("devices", "system", "cpu")
    dirs = [d for d in root.glob("cpu[0-9]*/cpufreq") if d.is_dir()]
    return sorted(dirs, key=lambda d: int(re.sub(r"\D", "", d.parent.name) or 0))


def _boost_file() -> tuple[Path, str] | None:
    """(file, value meaning 'boost off')."""
    intel = system.sysfs("devices", "system", "cpu", "intel_pstate", "no_turbo")
    if intel.exists():
        return intel, "1"
    generic = system.sysfs("devices", "system", "cpu", "cpufreq", "boost")
    if generic.exists():
        return generic, "0"
    return None


def read_cpu_settings() -> dict:
    """Governor per core, boost state and observed frequency (what env.json records)."""
    dirs = _cpufreq_dirs()
    governors = {d.parent.name: system.read(d / "scaling_governor") for d in dirs}
    boost = _boost_file()
    out: dict = {"cpufreq": bool(dirs), "governors": sorted({g for g in governors.values() if g})}
    if boost:
        out["boost_file"] = str(boost[0])
        out["boost_file_value"] = system.read(boost[0])
    mhz = observed_cpu_mhz()
    if mhz is not None:
        out["observed_mhz"] = mhz
    return out


def observed_cpu_mhz() -> float | None:
    """Mean current CPU frequency: cpufreq's scaling_cur_freq, else /proc/cpuinfo's 'cpu MHz'."""
    vals = []
    for d in _cpufreq_dirs():
        v = system.read(d / "scaling_cur_freq")
        if v and v.isdigit():
            vals.append(int(v) / 1000.0)
    if not vals:
        text = system.read(system.procfs("cpuinfo")) or ""
        vals = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", text, flags=re.M)]
    return round(sum(vals) / len(vals), 1) if vals else None


def query_gpus() -> tuple[list[dict], str | None]:
    """[{index, name, sm_mhz, max_sm_mhz, driver}], or ([], reason)."""
    if system.which("nvidia-smi") is None:
        return [], "no NVIDIA GPU (nvidia-smi not found)"
    r = system.run(["nvidia-smi", "--query-gpu=index,name,clocks.sm,clocks.max.sm,driver_version",
                    "--format=csv,noheader,nounits"])
    if not r.ok:
        return [], r.error()
    gpus = []
    for line in r.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue

        def num(s):
            try:
                return float(s)
            except ValueError:
                return None

        gpus.append({"index": parts[0], "name": parts[1], "sm_mhz": num(parts[2]), "max_sm_mhz": num(parts[3]),
                     "driver": parts[4]})
    return gpus, (None if gpus else "nvidia-smi lists no GPU")


class ClockLock:
    """Context manager: lock clocks on enter (when ``lock``), restore on exit whatever happens."""

    def __init__(self, lock: bool, devices: list[str] | tuple[str, ...] = ("cpu",), gpu_clock_mhz: int | None = None,
                 echo: Callable[[str], None] | None = None):
        self.lock = lock
        self.use_gpu = any(d.startswith("cuda") for d in devices)
        self.gpu_clock_mhz = gpu_clock_mhz
        self.echo = echo or (lambda s: print(s, file=sys.stderr))
        self._restore_cpu: list[tuple[Path, str]] = []  # (file, previous value)
        self._locked_gpus: list[str] = []  # locked with nvidia-smi
        self._nvml_locked: list[int] = []  # locked with NVML
        self._old_handlers: dict[int, object] = {}
        self._restored = False
        self.state: dict = {"requested": lock}

    # ---- public -------------------------------------------------------------------------------
    def __enter__(self) -> ClockLock:
        self.state["before"] = self.snapshot()
        self._install_handlers()  # always: SIGTERM must unwind the sweep (and kill its worker)
        if not self.lock:
            self.state["clocks"] = "unlocked (not requested; use --lock-clocks)"
            return self
        atexit.register(self.restore)
        notes, reasons = [], []
        cpu_note, cpu_reason = self._lock_cpu()
        (notes if cpu_note else reasons).append(cpu_note or cpu_reason)
        if self.use_gpu:
            gpu_note, gpu_reason = self._lock_gpu()
            (notes if gpu_note else reasons).append(gpu_note or gpu_reason)
        if notes and not reasons:
            self.state["clocks"] = "locked (" + "; ".join(notes) + ")"
        elif notes:
            self.state["clocks"] = "partly locked (" + "; ".join(notes) + "); unlocked (" + "; ".join(reasons) + ")"
        else:
            self.state["clocks"] = "unlocked (" + "; ".join(reasons) + ")"
        self.echo(f"clocks: {self.state['clocks']}")
        self.state["locked"] = self.snapshot()
        return self

    def __exit__(self, *exc) -> None:
        self.restore()
        self.state["after"] = self.snapshot()
        self._uninstall_handlers()

    def restore(self) -> None:
        """Undo every change made (idempotent; also called from atexit and signal paths)."""
        if self._restored:
            return
        self._restored = True
        problems = []
        for path, value in reversed(self._restore_cpu):
            err = system.write(path, value)
            if err:
                problems.append(err)
        for idx in self._locked_gpus:
            r = system.run(["nvidia-smi", "-i", idx, "--reset-gpu-clocks"])
            if not r.ok:
                problems.append(r.error())
        if self._nvml_locked:
            err = _nvml_reset(self._nvml_locked)
            if err:
                problems.append(err)
        if problems:
            self.echo("warning: could not restore clocks: " + "; ".join(problems))
            self.state["restore_problems"] = problems
        elif self._restore_cpu or self._locked_gpus or self._nvml_locked:
            self.state["restored"] = True
        self._restore_cpu.clear()
        self._locked_gpus.clear()
        self._nvml_locked.clear()

    def snapshot(self) -> dict:
        snap = {"cpu": read_cpu_settings()}
        if self.use_gpu:
            gpus, reason = query_gpus()
            snap["gpu"] = gpus if gpus else reason
        return snap

    def observe(self) -> dict:
        """Clocks right now (recorded with each cell)."""
        out = {}
        mhz = observed_cpu_mhz()
        if mhz is not None:
            out["cpu_mhz"] = mhz
        if self.use_gpu:
            gpus, _ = query_gpus()
            if gpus:
                out["gpu_sm_mhz"] = [g["sm_mhz"] for g in gpus]
        return out

    # ---- CPU ----------------------------------------------------------------------------------
    def _lock_cpu(self) -> tuple[str | None, str | None]:
        dirs = _cpufreq_dirs()
        if not dirs:
            return None, "CPU: no cpufreq interface (typical of VMs and containers)"
        for d in dirs:
            gov = d / "scaling_governor"
            old = system.read(gov)
            if old is None:
                return None, f"CPU: cannot read {gov}"
            avail = (system.read(d / "scaling_available_governors") or "performance").split()
            if "performance" not in avail:
                self.restore_cpu_only()
                return None, f"CPU: governor 'performance' not offered by {d.parent.name} ({' '.join(avail)})"
            if old != "performance":
                err = system.write(gov, "performance")
                if err:
                    self.restore_cpu_only()
                    return None, f"CPU: {err}"
                self._restore_cpu.append((gov, old))
        note = "CPU governor performance"
        boost = _boost_file()
        if boost:
            path, off = boost
            old = system.read(path)
            if old is not None and old != off:
                err = system.write(path, off)
                if err:
                    note += f", turbo left on ({err})"
                else:
                    self._restore_cpu.append((path, old))
                    note += ", turbo off"
            elif old == off:
                note += ", turbo already off"
        return note, None

    def restore_cpu_only(self) -> None:
        for path, value in reversed(self._restore_cpu):
            system.write(path, value)
        self._restore_cpu.clear()

    # ---- GPU ----------------------------------------------------------------------------------
    def _lock_gpu(self) -> tuple[str | None, str | None]:
        nvml = _nvml()
        if nvml is not None:
            return self._lock_gpu_nvml(nvml)
        gpus, reason = query_gpus()
        if not gpus:
            return None, f"GPU: {reason}"
        done = []
        for g in gpus:
            mhz = self.gpu_clock_mhz or g["max_sm_mhz"]
            if not mhz:
                return None, f"GPU {g['index']}: maximum SM clock unknown"
            r = system.run(["nvidia-smi", "-i", g["index"], f"--lock-gpu-clocks={int(mhz)},{int(mhz)}"])
            if not r.ok:
                return (", ".join(done) or None), f"GPU {g['index']}: {r.error()}"
            self._locked_gpus.append(g["index"])
            done.append(f"GPU {g['index']} at {int(mhz)} MHz")
        return ", ".join(done), None

    def _lock_gpu_nvml(self, nvml) -> tuple[str | None, str | None]:
        done = []
        try:
            for i in range(nvml.nvmlDeviceGetCount()):
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                mhz = self.gpu_clock_mhz or nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)
                nvml.nvmlDeviceSetGpuLockedClocks(h, int(mhz), int(mhz))
                self._nvml_locked.append(i)
                done.append(f"GPU {i} at {int(mhz)} MHz (NVML)")
        except Exception as e:  # NVMLError_NoPermission (needs root), NotSupported, ...
            return (", ".join(done) or None), f"GPU (NVML): {type(e).__name__}: {e}"
        return ", ".join(done), None

    # ---- signals ------------------------------------------------------------------------------
    def _install_handlers(self) -> None:
        def handler(signum, frame):
            self.restore()
            raise Terminated(128 + signum)

        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is None:
                continue
            try:
                self._old_handlers[sig] = signal.signal(sig, handler)
            except ValueError:  # not the main thread
                pass

    def _uninstall_handlers(self) -> None:
        for sig, old in self._old_handlers.items():
            try:
                signal.signal(sig, old)
            except (ValueError, TypeError):
                pass
        self._old_handlers.clear()


def _nvml():
    """The initialized ``pynvml`` module, or None (not installed, no driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _nvml_reset(indices: list[int]) -> str | None:
    nvml = _nvml()
    if nvml is None:
        return "NVML unavailable: GPU clocks not reset (run nvidia-smi --reset-gpu-clocks)"
    problems = []
    for i in indices:
        try:
            nvml.nvmlDeviceResetGpuLockedClocks(nvml.nvmlDeviceGetHandleByIndex(i))
        except Exception as e:
            problems.append(f"GPU {i}: {type(e).__name__}: {e}")
    return "; ".join(problems) or None
