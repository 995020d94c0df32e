"""What else used the machine while something was being timed, and a canary that notices when the
machine itself was slower.

Every stored measurement (a sweep round, a profile-database stage cost, an operator-dataset row)
is taken inside a :class:`Window`::

    with Window() as w:
        ...timed work...
    w.figures   # {"other_cpu": 0.01, "steal": 0.0, "load1": 0.3, "canary_before_ms": ..., ...}

Two kinds of figure:

- **Co-tenants this machine can see**: from ``/proc/stat`` (Linux), the CPU time every process on
  the machine used during the window minus this process's own (``getrusage``), as a fraction of
  the machine's capacity (``other_cpu``); the hypervisor's ``steal`` time likewise; the load
  average at the end.
- **Co-tenants on a GPU** (``Window(gpu=INDEX)``): NVML's per-process utilization samples of that
  GPU taken during the window (``nvmlDeviceGetProcessUtilization`` since the window opened),
  those of other processes than this one: their largest SM utilization (``gpu_other_util``,
  percent) and how many they were (``gpu_other_processes``). Where NVML is missing or the driver
  keeps no samples, the figures say so (``gpu_other``: the reason) and nothing is judged.
- **Co-tenants it cannot see** (a VM's neighbours on the host): a short fixed **canary** workload
  is timed before and after the window. A canary far slower than the canary's usual time (the
  median over the run's windows) means the machine was slower, whatever ``/proc/stat`` says.
  The canaries see only the window's edges; a slowdown in its middle shows in the timed samples
  themselves (``Window.samples``): ``slow_samples`` is the share of them slower than the canary
  threshold times the window's quickest quarter (seen here: a round whose last 4 of 10 samples
  took 2x the first 6, with ``/proc/stat`` and both canaries quiet).

:func:`judge` applies the one rule (:data:`THRESHOLDS`) that marks a window ``disturbed``. It is
used by the sweep's rounds, the measured cost model's profile database and the operator dataset.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

PROC_STAT = "/proc/stat"
TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MIN_JUDGED_WINDOW_S = 0.05  # a shorter window's CPU-time figures are mostly tick rounding: not judged
MIN_JUDGED_SAMPLES = 8  # fewer samples say too little about a slowdown inside the window: not judged


@dataclass(frozen=True)
class Thresholds:
    other_cpu: float = 0.10  # other processes' CPU time, fraction of the machine's capacity
    steal: float = 0.05  # hypervisor steal, fraction of the machine's capacity
    canary: float = 1.25  # canary time / the usual canary time
    gpu_other_util: float = 10.0  # another process's SM utilization of the GPU, percent
    # share of a window's samples slower than ``canary`` x its first quartile (a mid-window slowdown)
    slow_samples: float = 0.30


THRESHOLDS = Thresholds()


def read_cpu_times(path: str = PROC_STAT) -> dict | None:
    """Machine-wide CPU seconds from ``/proc/stat``'s first line: ``busy`` (user, nice, system, irq,
    softirq), ``idle`` (idle, iowait), ``steal``, and ``cpus`` (its per-CPU lines). None where the
    file does not exist or cannot be read (not Linux)."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    head = next((ln for ln in lines if ln.startswith("cpu ")), None)
    if head is None:
        return None
    try:
        v = [int(x) for x in head.split()[1:]]
    except ValueError:
        return None
    v += [0] * (8 - len(v))
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    cpus = sum(1 for ln in lines if ln.startswith("cpu") and ln[3:4].isdigit()) or (os.cpu_count() or 1)
    return {"busy": (user + nice + system + irq + softirq) / tick, "idle": (idle + iowait) / tick,
            "steal": steal / tick, "cpus": cpus}


def own_cpu_seconds() -> float:
    """CPU seconds this process (every thread of it) and its waited-for children used so far."""
    import resource

    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


_CANARY_DATA = None


def canary(reps: int = 5, size: int = 100_000) -> float:
    """Milliseconds of a short fixed workload (sorting ``size`` seeded doubles: single-threaded,
    CPU-bound, about 5 ms for 100,000 on a current core), the median of ``reps`` runs. Canaries
    of different sizes are different workloads: compare a canary with canaries of its size."""
    import numpy as np

    global _CANARY_DATA
    if _CANARY_DATA is None:
        _CANARY_DATA = np.random.default_rng(12345).standard_normal(100_000)
    data = _CANARY_DATA if size >= len(_CANARY_DATA) else _CANARY_DATA[:size]
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.sort(data, kind="quicksort")
        times.append((time.perf_counter() - t0) * 1e3)
    from ios_core.measurement.stats import median

    return median(times)  # the one median (an even count averages the two middle runs)


class Window:
    """Context manager: what else used the machine during the ``with`` body (see the module).
    ``canary=False`` leaves the canary out (for windows of a few milliseconds, where it would cost
    more than the window)."""

    def __init__(self, canary: bool = True, stat_path: str = PROC_STAT, canary_reps: int = 5,
                 gpu: int | None = None, nvml=None, own_pids: set[int] | None = None, cpu: bool = True):
        self.gpu = gpu
        self.cpu = cpu  # False: no /proc/stat figures (a window too short to judge them; WindowSet's groups have them)
        self._nvml = nvml  # the pynvml module (tests pass a fake); imported when None
        self._own_pids = own_pids  # this process and its children (read now when None)
        self.use_canary = canary
        self.canary_reps = canary_reps
        self.stat_path = stat_path
        self.figures: dict = {}

    def __enter__(self) -> Window:
        if self.use_canary:
            self.figures["canary_before_ms"] = round(canary(self.canary_reps), 4)
        self._stat = read_cpu_times(self.stat_path) if self.cpu else None
        self._own = own_cpu_seconds() if self.cpu else 0.0
        self._t0 = time.perf_counter()
        self.figures["start_unix"] = round(time.time(), 3)  # when the window was open (to match with other logs)
        self._gpu_since_us = int(time.time() * 1e6)
        return self

    def samples(self, samples_ms) -> None:
        """Record what the window's timed samples say about a slowdown inside it (``slow_samples``)."""
        slow = slow_samples(samples_ms)
        if slow is not None:
            self.figures["slow_samples"] = slow

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._t0
        f = self.figures
        f["end_unix"] = round(time.time(), 3)
        f["window_s"] = round(wall, 4)
        if not self.cpu:
            if self.gpu is not None:
                f.update(gpu_others(self.gpu, self._gpu_since_us, self._nvml, self._own_pids))
            return
        own = own_cpu_seconds() - self._own
        stat = read_cpu_times(self.stat_path)
        f["own_cpu_s"] = round(own, 4)
        if self._stat is not None and stat is not None and wall > 0:
            capacity = wall * stat["cpus"]
            busy = stat["busy"] - self._stat["busy"]
            # /proc/stat counts in clock ticks, and a tickless kernel books an idle CPU's time late:
            # allow one tick per CPU at each end before calling CPU time someone else's
            slack = 2 * stat["cpus"] / TICKS_PER_S
            f["other_cpu"] = round(min(1.0, max(0.0, busy - own - slack) / capacity), 4)
            f["steal"] = round(min(1.0, max(0.0, stat["steal"] - self._stat["steal"] - slack) / capacity), 4)
            f["cpus"] = stat["cpus"]
        try:
            f["load1"] = round(os.getloadavg()[0], 2)
        except OSError:
            pass
        if self.gpu is not None:
            f.update(gpu_others(self.gpu, self._gpu_since_us, self._nvml, self._own_pids))
        if self.use_canary:
            f["canary_after_ms"] = round(canary(self.canary_reps), 4)


def gpu_others(index: int, since_us: int, nvml=None, own_pids: set[int] | None = None) -> dict:
    """Other processes' use of GPU ``index`` since ``since_us`` (microseconds since the epoch, NVML's
    sample clock): ``gpu_other_util`` (their largest SM utilization, percent) and
    ``gpu_other_processes``; or ``{"gpu_other": reason}`` where it cannot be read (NVML missing,
    not initialised, the GPU gone). NVML is initialised once per process
    (``ios_core.measurement.gpu.nvml_session``), not at each call; ``own_pids`` (this process and its
    children) is read here only when not given."""
    from ios_core.measurement.gpu import nvml_handle, nvml_session

    nvml, reason = nvml_session(nvml)
    if nvml is None:
        return {"gpu_other": reason}
    own = own_pids if own_pids is not None else own_process_tree()
    try:
        handle = nvml_handle(nvml, index)
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
        except nvml.NVMLError as e:
            if getattr(e, "value", None) != getattr(nvml, "NVML_ERROR_NOT_FOUND", object()):
                return {"gpu_other": f"NVML: {e}"}
            samples = []  # no process ran on the GPU since then
        others = [s for s in samples if s.pid not in own and s.timeStamp >= since_us]
        return {"gpu_other_util": float(max((s.smUtil for s in others), default=0)),
                "gpu_other_processes": len({s.pid for s in others})}
    except Exception as e:
        return {"gpu_other": f"NVML: {e}"}


def own_process_tree() -> set[int]:
    """This process's id and its children's (psutil; the children are left out without it)."""
    return {os.getpid(), *_children()}


def _children() -> list[int]:
    try:
        import psutil

        return [c.pid for c in psutil.Process().children(recursive=True)]
    except Exception:
        return []


def canary_ms(figures: dict) -> float | None:
    """The window's canary: the slower of its before and after runs (None without a canary)."""
    vals = [figures.get(k) for k in ("canary_before_ms", "canary_after_ms")]
    vals = [v for v in vals if isinstance(v, (int, float)) and v > 0]
    return max(vals) if vals else None


def judge(figures: dict, canary_ref: float | None, thresholds: Thresholds = THRESHOLDS) -> str | None:
    """Why the window with ``figures`` was disturbed (one phrase), or None when it was not.
    ``canary_ref``: the usual canary time (the median over the run's windows), or None."""
    why = []
    window = figures.get("window_s")
    long_enough = not isinstance(window, (int, float)) or window >= MIN_JUDGED_WINDOW_S
    other = figures.get("other_cpu")
    if long_enough and isinstance(other, (int, float)) and other > thresholds.other_cpu:
        why.append(f"other processes used {other:.0%} of the CPUs")
    steal = figures.get("steal")
    if long_enough and isinstance(steal, (int, float)) and steal > thresholds.steal:
        why.append(f"steal {steal:.0%}")
    gpu = figures.get("gpu_other_util")
    if isinstance(gpu, (int, float)) and gpu > thresholds.gpu_other_util:
        n = figures.get("gpu_other_processes") or 1
        why.append(f"{n} other process{'es' if n > 1 else ''} used up to {gpu:.0f}% of the GPU")
    c = canary_ms(figures)
    if c is not None and canary_ref and c > thresholds.canary * canary_ref:
        why.append(f"canary {c / canary_ref:.2f}x its usual time")
    slow = figures.get("slow_samples")
    if isinstance(slow, (int, float)) and slow > thresholds.slow_samples:
        why.append(f"{slow:.0%} of its samples over {thresholds.canary:g}x its quickest quarter (slowed mid-window)")
    return "; ".join(why) or None


def slow_samples(samples_ms, factor: float = THRESHOLDS.canary) -> float | None:
    """The share of ``samples_ms`` slower than ``factor`` x their first quartile: near 0 on a steady
    machine (a sample's own jitter stays well within 25 %), large when the machine slowed for part of
    the window. None for fewer than :data:`MIN_JUDGED_SAMPLES` samples."""
    values = sorted(float(v) for v in samples_ms)
    if len(values) < MIN_JUDGED_SAMPLES:
        return None
    q1 = values[(len(values) - 1) // 4]
    return round(sum(v > factor * q1 for v in values) / len(values), 4)


class CanaryReference:
    """The usual canary time of one process's windows: the median of the canaries seen so far
    (for stores that judge each measurement as it is taken: the profile database, the dataset)."""

    def __init__(self):
        self.values: list[float] = []

    def judge(self, figures: dict, thresholds: Thresholds = THRESHOLDS) -> str | None:
        c = canary_ms(figures)
        from ios_core.measurement.stats import median

        ref = median(self.values) if len(self.values) >= 3 else None
        why = judge(figures, ref, thresholds)
        if c is not None and why is None:  # only undisturbed canaries set what is usual
            self.values.append(c)
        return why


class WindowSet:
    """Windows for many short measurements in a row (the measured GPU cost model's stages, a few
    milliseconds each), keeping :func:`judge`'s rule while reading once what does not change
    between them and amortizing the canary:

    * NVML is read in one session per process (``ios_core.measurement.gpu.nvml_session``), never opened and
      shut per window;
    * the process tree (whose GPU samples are this process's own) is read once, at the set's
      first window (``tree_reads``);
    * the windows are grouped ``canary_every`` at a time; a *group* has a canary at each edge
      (the closing canary of one group opens the next) and is judged by them against the usual
      canary (:class:`CanaryReference`), as a stage's own window was; the group is a
      :class:`Window` of its own too, whose CPU figures (``/proc/stat``) are recorded with the
      verdict, not judged (a stage's window never lasted long enough to judge them, see
      :data:`MIN_JUDGED_WINDOW_S`, and a GPU stage hardly depends on the host's other load).
      :meth:`close_group` hands a condemned group's items back so that what was measured in it
      is measured again. A canary run is ``canary_reps`` sorts; one over the threshold is
      confirmed with ``confirm_reps`` before it condemns anything (a single slow sort is not a
      slow machine), of ``canary_size`` doubles (a quarter of a :class:`Window`'s: about a
      millisecond). After a condemned group the next opens with a fresh canary.

    What each window reads itself (other processes on the GPU) is judged per window
    (:meth:`judge`)."""

    def __init__(self, gpu: int | None = None, nvml=None, canary_every: int = 64, canary_reps: int = 1,
                 confirm_reps: int = 3, canary_size: int = 25_000, stat_path: str = PROC_STAT,
                 thresholds: Thresholds = THRESHOLDS):
        if canary_every < 1:
            raise ValueError("canary_every must be at least 1")
        self.gpu, self.nvml, self.stat_path, self.thresholds = gpu, nvml, stat_path, thresholds
        self.canary_every, self.canary_reps, self.confirm_reps = int(canary_every), int(canary_reps), int(confirm_reps)
        self.canary_size = int(canary_size)  # a quarter of a window's canary: about a millisecond
        self.reference = CanaryReference()
        self.group: list = []
        self._edge: float | None = None  # the canary at the open group's start (None: none yet)
        self._own: set[int] | None = None
        self._group_window: Window | None = None  # the open group's CPU figures
        self.windows = 0
        self.canaries = 0  # canary runs (confirmations included)
        self.canary_seconds = 0.0
        self.tree_reads = 0
        self.groups = 0
        self.condemned_groups = 0

    def own_pids(self) -> set[int]:
        if self._own is None:
            self._own = own_process_tree()
            self.tree_reads += 1
        return self._own

    def _canary(self, reps: int) -> float:
        t0 = time.perf_counter()
        ms = round(canary(reps, self.canary_size), 4)
        self.canaries += 1
        self.canary_seconds += time.perf_counter() - t0
        return ms

    def window(self) -> Window:
        """A window for the next measurement (no canary of its own: the group's edges have it)."""
        if self._edge is None:
            self._edge = self._canary(self.canary_reps)
        if self._group_window is None:
            self._group_window = Window(canary=False, stat_path=self.stat_path).__enter__()
        self.windows += 1
        return Window(canary=False, stat_path=self.stat_path, gpu=self.gpu, nvml=self.nvml, cpu=False,
                      own_pids=self.own_pids() if self.gpu is not None else None)

    def judge(self, figures: dict) -> str | None:
        """The per-window part of the rule (no canary: that is the group's)."""
        return judge(figures, None, self.thresholds)

    def add(self, item) -> None:
        """``item`` (whatever the caller needs to measure it again) was measured in the open group."""
        self.group.append(item)

    @property
    def full(self) -> bool:
        return len(self.group) >= self.canary_every

    def close_group(self) -> tuple[str | None, list, dict]:
        """Close the open group with a canary: ``(why it is condemned or None, its items, the
        canary figures)``. An empty group is not judged."""
        items, self.group = self.group, []
        group, self._group_window = self._group_window, None
        if not items:
            return None, [], {}
        self.groups += 1
        figures = {}
        if group is not None:
            group.__exit__(None, None, None)
            figures.update(group.figures)
        before = self._edge if self._edge is not None else self._canary(self.canary_reps)
        after = self._canary(self.canary_reps)
        figures.update({"canary_before_ms": before, "canary_after_ms": after, "group_windows": len(items)})
        # judged as a stage's own window was: by its canary (the CPU figures of the group are
        # recorded, not judged: a GPU stage's time hardly depends on the host's other load, and
        # a stage window never lasted long enough to judge them)
        from ios_core.measurement.stats import median

        edges = {k: figures[k] for k in ("canary_before_ms", "canary_after_ms")}
        ref = self.reference.values
        usual = median(ref) if len(ref) >= 3 else None  # the one median (ios_core.measurement.stats)
        if usual and judge(edges, usual, self.thresholds) and self.confirm_reps > self.canary_reps:
            figures["canary_after_ms"] = edges["canary_after_ms"] = after = self._canary(self.confirm_reps)
        why = self.reference.judge(edges, self.thresholds)
        if why is not None:
            self.condemned_groups += 1
            self._edge = None  # the next group opens with a fresh canary
        else:
            self._edge = after
        return why, items, figures

    def stats(self) -> dict:
        return {"windows": self.windows, "canaries": self.canaries, "canary_seconds": round(self.canary_seconds, 4),
                "groups": self.groups, "condemned_groups": self.condemned_groups,
                "process_tree_reads": self.tree_reads, "canary_every": self.canary_every}
