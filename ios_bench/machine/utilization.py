"""Device busy-ness over time while a cell's timed loop runs (the paper's utilization experiment).

On CPU, :class:`CpuSampler` reads the per-CPU time counters of ``/proc/stat`` (Linux; elsewhere
``psutil.cpu_times(percpu=True)``, where it can) on a background thread every ``period_s``,
restricted to the cores of the process's affinity mask, and the process's own CPU time
(``time.process_time``: nanosecond resolution). Each sample is the busy share of each core over
the interval since the previous sample, and the process's CPU time over the interval divided by
(interval x cores): 100 % means every core of the mask was busy with this process.

Two limits, stated with every trace (``notes``):

- ``/proc/stat`` counts in clock ticks (``USER_HZ``, 100 per second on Linux), so a core's
  busy share over a 10 ms interval is 0, 50 or 100 % and the like: the trace is quantized;
  averages over longer windows (the report smooths over ``SMOOTH_MS``) and the means are not.
- Per-core busy-ness is the whole machine's, other processes included (this host is shared);
  the process share counts this process only.

On CUDA, :func:`sampler` returns ``ios_core.measurement.gpu.UtilizationSampler`` (NVML SM utilization), the
one ``ios-bench profile --device cuda`` uses.

A trace (:meth:`CpuSampler.trace`) is a JSON object::

    {"kind": "cpu", "source": "/proc/stat", "period_ms": 10, "cpus": [0, 1], "clock_ticks_per_s": 100,
     "t_s": [...],                      # end of each interval, seconds since the sampler started
     "busy_pct": [[core0, core1], ...], # per interval, one value per core of "cpus"
     "process_pct": [...],              # this process, % of all cores of the mask
     "notes": [...]}
"""

from __future__ import annotations

import os
import threading
import time

PROC_STAT = "/proc/stat"
DEFAULT_PERIOD_S = 0.01
SMOOTH_MS = 50.0  # the report's moving-average window over the quantized per-core series


def affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def read_proc_stat(path: str = PROC_STAT) -> dict[int, tuple[int, int]]:
    """{cpu index: (busy ticks, total ticks)} from ``/proc/stat``'s ``cpuN`` lines. Busy is
    everything but ``idle`` and ``iowait``; ``guest`` times are already inside ``user``/``nice``
    and are not counted twice."""
    out = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("cpu") or line.startswith("cpu "):
                continue
            parts = line.split()
            try:
                cpu = int(parts[0][3:])
                vals = [int(v) for v in parts[1:9]]  # user nice system idle iowait irq softirq steal
            except ValueError:
                continue
            vals += [0] * (8 - len(vals))
            total = sum(vals)
            out[cpu] = (total - vals[3] - vals[4], total)
    return out


def _read_psutil() -> dict[int, tuple[float, float]]:
    import psutil

    out = {}
    for i, t in enumerate(psutil.cpu_times(percpu=True)):
        total = sum(t)
        idle = t.idle + getattr(t, "iowait", 0.0)
        out[i] = (total - idle, total)
    return out


def cpu_source() -> tuple[str | None, str | None]:
    """(source name, None) where per-CPU counters can be read, else (None, the reason)."""
    try:
        if read_proc_stat():
            return PROC_STAT, None
        problem = f"{PROC_STAT} has no per-CPU lines"
    except OSError as e:
        problem = f"{PROC_STAT}: {e.strerror or e}"
    try:
        if _read_psutil():
            return "psutil", None
    except Exception as e:  # noqa: BLE001 - any failure means: cannot sample here
        problem += f"; psutil.cpu_times: {type(e).__name__}: {e}"
    return None, f"per-core CPU utilization cannot be sampled here ({problem})"


class CpuSampler:
    """Per-core busy % (and this process's CPU %) every ``period_s`` on a background thread.

    Use as a context manager around the timed loop. Where no per-CPU counters can be read,
    ``reason`` says why and the sampler records nothing (it never fails the measurement)."""

    def __init__(self, period_s: float = DEFAULT_PERIOD_S, cpus: list[int] | None = None):
        if not period_s > 0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self.period_s = float(period_s)
        self.cpus = list(cpus) if cpus is not None else affinity()
        self.source, self.reason = cpu_source()
        self.t_s: list[float] = []
        self.busy_pct: list[list[float]] = []
        self.process_pct: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._duration = 0.0

    def _read(self) -> dict:
        return read_proc_stat() if self.source == PROC_STAT else _read_psutil()

    def __enter__(self) -> CpuSampler:
        if self.source is None:
            return self
        self._stop.clear()
        first = self._read()
        missing = [c for c in self.cpus if c not in first]
        if missing:  # an affinity mask naming CPUs the counters do not list: keep the ones they do
            self.cpus = [c for c in self.cpus if c in first]
        t0 = time.perf_counter()
        self._t0 = t0

        def loop(prev=first, prev_t=t0, prev_p=time.process_time()):
            while not self._stop.wait(self.period_s):
                now, now_t, now_p = self._read(), time.perf_counter(), time.process_time()
                self._add(prev, now, now_t - prev_t, now_p - prev_p, now_t - t0)
                prev, prev_t, prev_p = now, now_t, now_p
            now, now_t, now_p = self._read(), time.perf_counter(), time.process_time()
            if now_t - prev_t > self.period_s / 2:  # the last partial interval, if it is not a sliver
                self._add(prev, now, now_t - prev_t, now_p - prev_p, now_t - t0)

        self._thread = threading.Thread(target=loop, name="cpu-util", daemon=True)
        self._thread.start()
        return self

    def _add(self, prev: dict, now: dict, dt: float, dp: float, t: float) -> None:
        row = []
        for c in self.cpus:
            busy = now[c][0] - prev[c][0]
            total = now[c][1] - prev[c][1]
            row.append(100.0 * busy / total if total > 0 else 0.0)
        self.t_s.append(round(t, 6))
        self.busy_pct.append([round(v, 2) for v in row])
        self.process_pct.append(round(100.0 * dp / (dt * max(len(self.cpus), 1)), 2) if dt > 0 else 0.0)

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._duration = time.perf_counter() - self._t0

    def trace(self) -> dict:
        notes = []
        if self.source == PROC_STAT:
            hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
            notes.append(f"per-core counters tick {hz} times a second: a core's share over one "
                         f"{self.period_s * 1000:g} ms interval is quantized")
        notes.append("per-core busy-ness is the whole machine's (other processes included); "
                     "process_pct is this process alone")
        out = {"kind": "cpu", "source": self.source, "period_ms": self.period_s * 1000, "cpus": self.cpus,
               "duration_s": round(self._duration, 6), "t_s": self.t_s, "busy_pct": self.busy_pct,
               "process_pct": self.process_pct, "notes": notes}
        if self.source == PROC_STAT and hasattr(os, "sysconf"):
            out["clock_ticks_per_s"] = os.sysconf("SC_CLK_TCK")
        if self.reason:
            out["reason"] = self.reason
        return out


def summarize(trace: dict) -> dict:
    """The record's summary of a trace: mean busy % per core (weighted by interval length),
    over all cores, and the process's mean CPU %; or ``reason`` where nothing was sampled."""
    t = trace.get("t_s") or []
    if trace.get("kind") == "cuda-sm":
        gpu = trace.get("sm_pct") or []
        return {"kind": "cuda-sm", "samples": len(gpu),
                "mean_sm_pct": round(sum(gpu) / len(gpu), 2) if gpu else None,
                **({"reason": trace["reason"]} if trace.get("reason") else {})}
    if not t:
        return {"kind": trace.get("kind", "cpu"), "samples": 0,
                "reason": trace.get("reason") or "no sample (the timed loop was shorter than one period)"}
    widths = [t[0]] + [b - a for a, b in zip(t, t[1:])]
    span = sum(widths) or 1.0
    cpus = trace["cpus"]
    per_core = {str(c): round(sum(w * row[i] for w, row in zip(widths, trace["busy_pct"])) / span, 2)
                for i, c in enumerate(cpus)}
    return {"kind": "cpu", "source": trace.get("source"), "samples": len(t), "period_ms": trace.get("period_ms"),
            "cpus": cpus, "mean_busy_pct": per_core,
            "mean_busy_pct_all": round(sum(per_core.values()) / max(len(per_core), 1), 2),
            "process_pct": round(sum(w * p for w, p in zip(widths, trace["process_pct"])) / span, 2)}


class CudaSampler:
    """NVML SM utilization (``ios_core.measurement.gpu.UtilizationSampler``) with the trace layout above:
    ``kind: cuda-sm``, ``t_s``, ``sm_pct``, ``mem_pct``. Written against NVML's documentation;
    not run on these (GPU-less) machines."""

    def __init__(self, period_s: float = 0.005, device: int = 0):
        from ios_core.measurement.gpu import UtilizationSampler

        self._inner = UtilizationSampler(device=device, period_s=period_s)
        self.period_s = period_s
        self.reason = None

    def __enter__(self) -> CudaSampler:
        try:
            self._inner.__enter__()
        except Exception as e:  # noqa: BLE001 - no NVML: the measurement goes on without a trace
            # UtilizationSampler raises RuntimeError with its reason (NVML named in it)
            self.reason = str(e) if isinstance(e, RuntimeError) else f"NVML: {type(e).__name__}: {e}"
            self._inner = None
        return self

    def __exit__(self, *exc) -> None:
        if self._inner is not None:
            self._inner.__exit__(*exc)

    def trace(self) -> dict:
        samples = self._inner.samples if self._inner is not None else []
        out = {"kind": "cuda-sm", "source": "nvml", "period_ms": self.period_s * 1000,
               "t_s": [round(s[0], 6) for s in samples], "sm_pct": [s[1] for s in samples],
               "mem_pct": [s[2] for s in samples], "notes": ["NVML utilization: percent of the last sample "
                                                              "period in which a kernel ran"]}
        if self.reason:
            out["reason"] = self.reason
        return out


def sampler(device: str, period_s: float = DEFAULT_PERIOD_S):
    """The sampler for a device kind: per-core CPU on ``cpu``, NVML SM utilization on ``cuda``."""
    return CudaSampler(period_s=min(period_s, 0.005)) if device == "cuda" else CpuSampler(period_s=period_s)
