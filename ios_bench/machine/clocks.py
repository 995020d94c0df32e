"""Clock locking for stable timings (``ios-bench run --lock-clocks``), with guaranteed restore.

CPU: every core's cpufreq governor set to ``performance`` and turbo/boost switched off (what
``pyperf system tune`` does), previous values restored afterwards. NVIDIA GPU (only when the
sweep uses a ``cuda`` device): the SM clock locked to the requested value, else to a clock
the GPU can sustain under load (NVML's default application clock: the maximum boost clock
throttles), through NVML (``nvmlDeviceSetGpuLockedClocks``, nvidia-ml-py) and reset afterwards
(``nvmlDeviceResetGpuLockedClocks``); without NVML, ``nvidia-smi --lock-gpu-clocks`` and
``--reset-gpu-clocks``. The locked clocks are told to the workers (``IOS_BENCH_GPU_LOCKED_SM_MHZ``,
part of the profile database's key) and every cell records the throttle reasons NVML reports.
The restore runs on normal exit, on an exception, on SIGINT and on SIGTERM/SIGHUP (turned into
``SystemExit`` so every ``finally`` runs), and once more from ``atexit``; it is idempotent.

Where locking is impossible (no permission, no cpufreq interface as in most VMs, no GPU) this
says so once and records ``unlocked (reason)``; the sweep carries on. All machine access goes
through :mod:`ios_bench.machine.system`.

Only one sweep at a time may lock a machine's clocks: locking holds an ``flock`` on a machine-wide
lock file (:func:`machine_lock_path`), released when its holder dies. What must be restored is
saved (atomically, after every change) in the run folder's ``clocks.json`` and beside the machine
lock, so that after a SIGKILL ``ios-bench clocks reset [RUN]`` restores it - and the next sweep
that locks restores it first. A restore that fails is retried with backoff; what still fails is
kept in the saved state for ``ios-bench clocks reset``.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ios_bench.errors import InputError
from ios_bench.machine import system
from ios_bench.running.locks import Busy, FileLock
from ios_core.atomic import atomic_write_json
from ios_core.measurement.gpu import LOCKED_CLOCK_ENV

STATE_FILE = "clocks.json"
RESTORE_ATTEMPTS = 6  # backoff 0.05 s doubling: about 3 s in all before leaving it to `clocks reset`


def machine_lock_path() -> Path:
    """The machine-wide clock lock: ``IOS_BENCH_CLOCK_LOCK``, else beside a fake sysfs root
    (``IOS_BENCH_SYSFS``, how tests replace the machine), else in the temporary folder."""
    if os.environ.get("IOS_BENCH_CLOCK_LOCK"):
        return Path(os.environ["IOS_BENCH_CLOCK_LOCK"])
    if os.environ.get("IOS_BENCH_SYSFS"):
        return Path(os.environ["IOS_BENCH_SYSFS"]) / ".ios-bench-clocks.lock"
    return Path(tempfile.gettempdir()) / "ios-bench-clocks.lock"


def machine_state_path() -> Path:
    return machine_lock_path().with_suffix(".json")


def _write_with_retry(path: Path, value: str, attempts: int = RESTORE_ATTEMPTS) -> str | None:
    err = None
    for i in range(attempts):
        err = system.write(path, value)
        if err is None:
            return None
        time.sleep(0.05 * 2 ** i)
    return err


def _reset_gpu_with_retry(index: str, attempts: int = RESTORE_ATTEMPTS) -> str | None:
    """Reset GPU ``index``'s locked clocks: through NVML when it is there, else nvidia-smi."""
    err = None
    for i in range(attempts):
        if _nvml() is not None:
            err = _nvml_reset([int(index)])
            if err is None:
                return None
            time.sleep(0.05 * 2 ** i)
            continue
        r = system.run(["nvidia-smi", "-i", index, "--reset-gpu-clocks"])
        if r.ok:
            return None
        err = r.error()
        time.sleep(0.05 * 2 ** i)
    return err


def read_state(path: Path) -> dict | None:
    """A saved clock state ({"cpu": [[file, value], ...], "gpus": [index, ...]}), None if absent."""
    try:
        data = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as e:
        raise InputError(f"{path}: corrupt clock state ({type(e).__name__})") from None
    def pair(p) -> bool:
        return isinstance(p, list) and len(p) == 2 and all(isinstance(s, str) for s in p)

    ok = isinstance(data, dict) and isinstance(data.get("cpu", []), list) and isinstance(data.get("gpus", []), list) \
        and all(pair(p) for p in data.get("cpu", [])) and all(isinstance(g, str) for g in data.get("gpus", []))
    if not ok:
        raise InputError(f"{path}: corrupt clock state (unexpected layout)")
    return data


def reset_from(path: Path, echo: Callable[[str], None] | None = None) -> tuple[int, list[str]]:
    """Restore what a saved state says (each write retried); returns (settings restored, problems).
    The state file is removed when everything was restored, else rewritten with what is left."""
    state = read_state(path)
    if state is None:
        return 0, []
    left_cpu, left_gpu, problems, done = [], [], [], 0
    for file, value in reversed(state.get("cpu", [])):
        err = _write_with_retry(Path(file), value)
        if err:
            left_cpu.insert(0, [file, value])
            problems.append(err)
        else:
            done += 1
    for index in state.get("gpus", []):
        err = _reset_gpu_with_retry(index)
        if err:
            left_gpu.append(index)
            problems.append(err)
        else:
            done += 1
    if left_cpu or left_gpu:
        atomic_write_json(path, {"cpu": left_cpu, "gpus": left_gpu})
    else:
        Path(path).unlink(missing_ok=True)
    if echo and done:
        echo(f"clocks: restored {done} setting(s) saved in {path}")
    return done, problems


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
                 echo: Callable[[str], None] | None = None, state_path: str | os.PathLike | None = None,
                 cpu: bool = True):
        self.lock = lock
        self.lock_cpu = cpu  # False: the GPU's clock only (ios-bench doctor)
        self.state_paths = [machine_state_path()] + ([Path(state_path)] if state_path else [])
        self._machine_lock: FileLock | None = None
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
    def reserve(self) -> None:
        """Take the machine-wide clock lock (``InputError`` if another sweep holds it) and restore
        what a killed sweep left locked. Called by ``__enter__``; a sweep calls it early to refuse
        before it writes anything."""
        if not self.lock or self._machine_lock is not None:
            return
        lock = FileLock(machine_lock_path(), "a sweep with --lock-clocks")
        try:
            lock.acquire()
        except Busy as e:
            raise InputError(f"--lock-clocks: the clocks of this machine are locked by another sweep ({e})") from None
        self._machine_lock = lock
        left = machine_state_path()
        if left.exists():  # a sweep was killed with its clocks locked: restore before reading them
            _, problems = reset_from(left, self.echo)
            if problems:
                self.echo("warning: could not restore the clocks a killed sweep left locked: " + "; ".join(problems))

    def __enter__(self) -> ClockLock:
        self.reserve()
        self.state["before"] = self.snapshot()
        self._install_handlers()  # always: SIGTERM must unwind the sweep (and kill its worker)
        if not self.lock:
            self.state["clocks"] = "unlocked (not requested; use --lock-clocks)"
            return self
        atexit.register(self.restore)
        notes, reasons = [], []
        if self.lock_cpu:
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
        self.release()

    def release(self) -> None:
        """Give the machine-wide clock lock back (idempotent; after restoring)."""
        if self._machine_lock is not None:
            self._machine_lock.release()
            self._machine_lock = None

    def _save(self) -> None:
        """Persist what restore must undo (after every change), for ``ios-bench clocks reset``."""
        gpus = list(self._locked_gpus) + [str(i) for i in self._nvml_locked if str(i) not in self._locked_gpus]
        state = {"cpu": [[str(p), v] for p, v in self._restore_cpu], "gpus": gpus}
        for path in self.state_paths:
            try:
                if state["cpu"] or state["gpus"]:
                    atomic_write_json(path, state)
                else:
                    path.unlink(missing_ok=True)
            except OSError as e:
                self.echo(f"warning: cannot save the clock state to {path}: {e.strerror or e}")

    def restore(self) -> None:
        """Undo every change made, each retried with backoff (idempotent; also called from atexit
        and signal paths). What cannot be restored stays saved for ``ios-bench clocks reset``."""
        if self._restored:
            return
        self._restored = True
        problems, left_cpu, left_gpu = [], [], []
        for path, value in reversed(self._restore_cpu):
            err = _write_with_retry(path, value)
            if err:
                problems.append(err)
                left_cpu.insert(0, (path, value))
        for idx in self._locked_gpus:
            err = _reset_gpu_with_retry(idx)
            if err:
                problems.append(err)
                left_gpu.append(idx)
        nvml_changed = bool(self._nvml_locked)
        if self._nvml_locked:  # NVML-locked GPUs (saved too: `clocks reset` resets them after a SIGKILL)
            left_nvml = [i for i in self._nvml_locked if _reset_gpu_with_retry(str(i), attempts=3)]
            if left_nvml:
                problems.append(f"GPU {', '.join(map(str, left_nvml))}: locked clocks not reset (NVML)")
            self._nvml_locked[:] = left_nvml
        os.environ.pop(LOCKED_CLOCK_ENV, None)
        changed = bool(self._restore_cpu or self._locked_gpus) or nvml_changed
        self._restore_cpu[:] = left_cpu
        self._locked_gpus[:] = left_gpu
        if changed:
            self._save()
        if problems:
            where = self.state_paths[-1]
            self.echo("warning: could not restore clocks: " + "; ".join(problems)
                      + f"; run `ios-bench clocks reset {where.parent}` to try again")
            self.state["restore_problems"] = problems
        elif changed:
            self.state["restored"] = True

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
            reasons = _throttle_reasons()
            if reasons is not None:
                out["gpu_throttle_reasons"] = reasons
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
                self._save()
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
                    self._save()
                    note += ", turbo off"
            elif old == off:
                note += ", turbo already off"
        return note, None

    def restore_cpu_only(self) -> None:
        left = [(p, v) for p, v in reversed(self._restore_cpu) if _write_with_retry(p, v)]
        self._restore_cpu[:] = list(reversed(left))
        self._save()

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
            self._save()
            done.append(f"GPU {g['index']} at {int(mhz)} MHz")
        return ", ".join(done), None

    def _lock_gpu_nvml(self, nvml) -> tuple[str | None, str | None]:
        from ios_core.measurement.gpu import sustainable_sm_clock

        done, locked = [], []
        try:
            for i in range(nvml.nvmlDeviceGetCount()):
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                mhz = self.gpu_clock_mhz or sustainable_sm_clock(nvml, h)
                if not mhz:
                    raise RuntimeError(f"GPU {i}: no sustainable clock known (no application clock); use --gpu-clock")
                self._nvml_locked.append(i)
                self._save()  # before the change: a SIGKILL right after it leaves it saved
                nvml.nvmlDeviceSetGpuLockedClocks(h, int(mhz), int(mhz))
                locked.append(f"{i}:{int(mhz)}")
                how = "requested" if self.gpu_clock_mhz else "default application clock"
                done.append(f"GPU {i} at {int(mhz)} MHz ({how}, NVML)")
        except Exception as e:  # NVMLError_NoPermission (needs root), NotSupported, ...
            if len(self._nvml_locked) > len(locked):  # the last lock did not happen
                self._nvml_locked.pop()
                self._save()
            self._announce(locked)
            return (", ".join(done) or None), f"GPU (NVML): {type(e).__name__}: {e}"
        self._announce(locked)
        return ", ".join(done), None

    def _announce(self, locked: list[str]) -> None:
        """Tell the worker processes which GPUs run at which locked clock (the profile database
        keys on it: ios_core.measurement.gpu.fingerprint)."""
        if locked:
            os.environ[LOCKED_CLOCK_ENV] = ",".join(locked)

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
    """The initialized ``pynvml`` module, or None (not installed, no driver): the process's one
    NVML session (``ios_core.measurement.gpu.nvml_session``, shut down at exit)."""
    from ios_core.measurement.gpu import nvml_session

    return nvml_session()[0]


def _throttle_reasons() -> list[list[str]] | None:
    """Per GPU, why its clock is below the maximum now (NVML), or None without NVML."""
    nvml = _nvml()
    if nvml is None:
        return None
    from ios_core.measurement.gpu import throttle_reasons

    try:
        return [throttle_reasons(nvml, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())]
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
