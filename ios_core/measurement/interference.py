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
  average at the end. **Which** processes: each process's CPU time (utime + stime of
  ``/proc/<pid>/stat``, every process this user can see) read at both edges; the ones that used the
  most of the machine's capacity over the window, this process tree (this process, its
  descendants and its ancestors) left out, are kept as ``others`` (name, pid, share; at most
  :data:`TOP_OTHERS`, none under :data:`MIN_NAMED_SHARE`), so that a disturbed window names them.
  Reading them costs about a millisecond per hundred processes (``others_read_ms``); a window too
  short to judge (:data:`MIN_JUDGED_WINDOW_S`) does not read them at its end.
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
PROC = "/proc"
TOP_OTHERS = 3  # a window keeps (and a verdict names) at most this many other processes
MIN_NAMED_SHARE = 0.02  # a process under this share of the machine's capacity over a window is not named


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


def read_process_times(proc: str = PROC) -> dict[int, tuple[str, int, float, int]]:
    """Every process this user can see in ``proc``: ``{pid: (name, start tick, CPU seconds, parent
    pid)}``, the CPU seconds utime + stime of ``/proc/<pid>/stat`` (every thread of it). A process
    that vanished or cannot be read is left out; ``{}`` where ``proc`` cannot be listed."""
    try:
        pids = [int(p) for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return {}
    out = {}
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/stat", "rb") as f:
                raw = f.read()
            right = raw.rindex(b")")  # the name may hold spaces and parentheses: it ends at the last ")"
            name = raw[raw.index(b"(") + 1:right].decode(errors="replace")
            rest = raw[right + 2:].split()
            out[pid] = (name, int(rest[19]), (int(rest[11]) + int(rest[12])) / TICKS_PER_S, int(rest[1]))
        except (OSError, ValueError, IndexError):
            continue
    return out


def own_tree(procs: dict, pid: int | None = None) -> set[int]:
    """``pid`` (this process by default), its descendants and its ancestors in the ``procs`` of
    :func:`read_process_times`: the run itself, never named as another process."""
    pid = os.getpid() if pid is None else pid
    tree, parent = {pid}, {p: v[3] for p, v in procs.items()}
    p = parent.get(pid)
    while p and p not in tree:  # ancestors
        tree.add(p)
        p = parent.get(p)
    children: dict[int, list[int]] = {}
    for c, p in parent.items():
        children.setdefault(p, []).append(c)
    todo = [pid]
    while todo:  # descendants
        for c in children.get(todo.pop(), []):
            if c not in tree:
                tree.add(c)
                todo.append(c)
    return tree


def top_others(before: dict, after: dict, wall: float, cpus: int, exclude: set[int] = frozenset(),
               top: int = TOP_OTHERS, floor: float = MIN_NAMED_SHARE, proc: str | None = None) -> list[dict]:
    """The processes (not in ``exclude``) that used the most of the machine's capacity (``wall`` x
    ``cpus``) between two :func:`read_process_times` readings: ``[{"name", "pid", "share"}]``, the
    largest first, at most ``top``, none under ``floor``; with ``proc``, each also with ``cmd``, the
    start of its command line (``python3`` alone says little). A process not in ``before`` (or whose
    pid was reused: another start tick) started during the window: all its CPU time counts."""
    capacity = wall * max(1, cpus)
    if capacity <= 0:
        return []
    rows = []
    for pid, (name, start, cpu, _) in after.items():
        if pid in exclude:
            continue
        was = before.get(pid)
        used = cpu - (was[2] if was is not None and was[1] == start else 0.0)
        share = min(1.0, max(0.0, used) / capacity)
        if share >= floor:
            rows.append({"name": name, "pid": pid, "share": round(share, 4)})
    rows.sort(key=lambda r: (-r["share"], r["pid"]))
    rows = rows[:top]
    for r in rows if proc else []:
        try:
            with open(f"{proc}/{r['pid']}/cmdline", "rb") as f:
                cmd = f.read(400).replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cmd:
            r["cmd"] = cmd[:80]
    return rows


def named(others) -> str:
    """``python3 pid 1234: 38%, make pid 99: 5%`` (the shares of the machine's capacity)."""
    return ", ".join(f"{o.get('name')} pid {o.get('pid')}: {float(o.get('share') or 0):.0%}"
                     for o in others or [] if isinstance(o, dict))


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
                 gpu: int | None = None, nvml=None, own_pids: set[int] | None = None, cpu: bool = True,
                 processes: bool = True, proc: str = PROC, exclude: set[int] | None = None):
        self.gpu = gpu
        self.processes = processes and cpu  # False: no per-process reading (which processes used the CPUs)
        self.proc = proc
        self.exclude = exclude  # the processes never named (None: this process tree, own_tree)
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
        self._procs = None
        if self.processes:
            t = time.monotonic()  # (the read's own cost; perf_counter times the window)
            self._procs = read_process_times(self.proc)
            self._procs_ms = (time.monotonic() - t) * 1e3
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
            if self._procs and wall >= MIN_JUDGED_WINDOW_S:  # who: only where the window is long enough to judge
                t = time.monotonic()
                after = read_process_times(self.proc)
                mine = own_tree(after) if self.exclude is None else self.exclude
                f["others"] = top_others(self._procs, after, wall, stat["cpus"], mine, proc=self.proc)
                f["others_read_ms"] = round(self._procs_ms + (time.monotonic() - t) * 1e3, 3)
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


def judge(figures: dict, canary_ref: float | None, thresholds: Thresholds = THRESHOLDS,
          load: list[dict] | None = None, group=None, slow_ref: float | None = None) -> str | None:
    """Why the window with ``figures`` was disturbed (one phrase), or None when it was not.
    ``canary_ref``: the usual canary time (the median over the run's windows), or None.
    ``load``: the run's steady co-tenants (:func:`steady_load`): their steady share of this window
    (in its ``group``, the cell it measured) is the condition the run is measured under, not a
    disturbance (:func:`under_load`); what they used over it, and every other process, still is.
    Under that load the caller passes the cell's own usual canary under it as ``canary_ref`` and its
    usual share of slowed samples as ``slow_ref``: a window is disturbed when its share of slowed
    samples exceeds that by the threshold (the co-tenant's time slices slow some samples of every
    window: that is the condition too)."""
    why = []
    window = figures.get("window_s")
    long_enough = not isinstance(window, (int, float)) or window >= MIN_JUDGED_WINDOW_S
    other = figures.get("other_cpu")
    if long_enough and isinstance(other, (int, float)) and load and under_load(figures, load, group):
        other = max(0.0, other - sum(_steady_part(figures, c, group) for c in load))
        if other > thresholds.other_cpu:
            why.append(f"besides the steady load, other processes used {other:.0%} of the CPUs"
                       + _who(figures, exclude=load))
    elif long_enough and isinstance(other, (int, float)) and other > thresholds.other_cpu:
        why.append(f"other processes used {other:.0%} of the CPUs" + _who(figures))
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
    usual = slow_ref if isinstance(slow_ref, (int, float)) else 0.0
    if isinstance(slow, (int, float)) and slow > thresholds.slow_samples + usual:
        why.append(f"{slow:.0%} of its samples over {thresholds.canary:g}x its quickest quarter (slowed mid-window"
                   + (f"; {usual:.0%} usual under the steady load)" if usual else ")"))
    return "; ".join(why) or None


def _who(figures: dict, exclude=()) -> str:
    """`` (python3 pid 1234: 38%)``: the window's named other processes, or nothing."""
    skip = {(c.get("name"), c.get("pid")) for c in exclude}
    others = [o for o in figures.get("others") or []
              if isinstance(o, dict) and (o.get("name"), o.get("pid")) not in skip]
    return f" ({named(others)})" if others else ""


# ---- steady load: a co-tenant present at about the same share through a whole run is a condition
#
# Its share of a window depends on what runs beside it (a busy loop on one core: 50 % of the machine
# beside a one-thread cell, 33 % beside a two-thread one that takes part of its core), so "about the
# same share" is judged per group of windows (a sweep's cell: ``groups``), against the share that
# group usually sees, and "present through the run" over every window.

MIN_STEADY_WINDOWS = 4  # fewer judged windows say too little to call a co-tenant steady
STEADY_PRESENT = 0.9  # a steady co-tenant is at its steady share in at least this share of the windows
STEADY_BAND = (0.05, 0.25)  # "about the same share": within max(5 points, 25 % of its share) of its median


def steady_band(share: float) -> float:
    """How far a window's share of a steady co-tenant may be from its steady share."""
    return max(STEADY_BAND[0], STEADY_BAND[1] * share)


def _share(figures: dict, name, pid) -> float:
    return next((float(o.get("share") or 0.0) for o in figures.get("others") or []
                 if isinstance(o, dict) and o.get("name") == name and o.get("pid") == pid), 0.0)


def share_in(c: dict, group=None) -> float:
    """The steady share of co-tenant ``c`` in windows of ``group`` (its share over the run where the
    group has none of its own)."""
    shares = c.get("shares")
    return float(shares[group]) if isinstance(shares, dict) and group in shares else float(c["share"])


def _steady_part(figures: dict, c: dict, group=None) -> float:
    """What of the window's other CPU time the steady co-tenant ``c`` accounts for: its share in the
    window, at most its steady share (in ``group``) plus the band (more than that is a burst of its own)."""
    share = share_in(c, group)
    return min(_share(figures, c.get("name"), c.get("pid")), share + steady_band(share))


def steady_load(windows, thresholds: Thresholds = THRESHOLDS, groups=None) -> list[dict]:
    """The steady co-tenants of a run's windows (``figures`` of :class:`Window`, those too short to
    judge or without ``others`` left out): each process (same name and pid) whose share of the
    machine, in at least :data:`STEADY_PRESENT` of the windows, is within :func:`steady_band` of the
    median share of the window's group and that median at least half the ``other_cpu`` threshold
    (less disturbs nothing). ``groups``: one key per window (the cell it measured), or None for one
    group. ``[{"name", "pid", "share", "windows", "of", "shares"}]`` (``share``: the median over the
    groups' shares; ``shares``: {group: its share}; largest share first); ``[]`` with fewer than
    :data:`MIN_STEADY_WINDOWS` windows. A co-tenant that comes and goes, or a burst, is not steady."""
    from ios_core.measurement.stats import median

    windows = list(windows)
    keys = list(groups) if groups is not None else [None] * len(windows)
    judged = [(f, g) for f, g in zip(windows, keys)
              if isinstance(f, dict) and isinstance(f.get("others"), list)
              and isinstance(f.get("other_cpu"), (int, float))
              and not (isinstance(f.get("window_s"), (int, float)) and f["window_s"] < MIN_JUDGED_WINDOW_S)]
    if len(judged) < MIN_STEADY_WINDOWS:
        return []
    seen = dict.fromkeys((o.get("name"), o.get("pid")) for f, _ in judged for o in f["others"] if isinstance(o, dict))
    floor = thresholds.other_cpu / 2
    out = []
    for name, pid in seen:
        by_group: dict = {}
        for f, g in judged:
            by_group.setdefault(g, []).append(_share(f, name, pid))
        shares = {g: median(v) for g, v in by_group.items()}
        at = sum(shares[g] >= floor and abs(_share(f, name, pid) - shares[g]) <= steady_band(shares[g])
                 for f, g in judged)
        if at >= STEADY_PRESENT * len(judged):
            c = {"name": name, "pid": pid, "share": round(median(shares.values()), 4), "windows": at, "of": len(judged)}
            if groups is not None:
                c["shares"] = {g: round(v, 4) for g, v in shares.items()}
            out.append(c)
    return sorted(out, key=lambda c: -c["share"])


def under_load(figures: dict, load: list[dict] | None, group=None) -> bool:
    """Whether the window (of ``group``) ran under the steady ``load``: every steady co-tenant at no
    less than its steady share there minus the band (absent from it, the window ran under another
    condition)."""
    return bool(load) and all(_share(figures, c.get("name"), c.get("pid"))
                              >= share_in(c, group) - steady_band(share_in(c, group)) for c in load)


def load_label(load: list[dict] | None, group=None) -> str | None:
    """``under load: python3 pid 1234 50% of the CPUs`` (None without a steady load): each co-tenant
    at its steady share in ``group``."""
    if not load:
        return None
    return "under load: " + ", ".join(f"{c.get('name')} pid {c.get('pid')} {share_in(c, group):.0%}"
                                      for c in load) + " of the CPUs"


def load_by(load: list[dict] | None) -> str | None:
    """Who the steady ``load`` is (``python3 pid 1234``, shares left out): two rounds ran under the
    same load when this is the same, whatever share each cell saw of it."""
    if not load:
        return None
    return ", ".join(f"{c.get('name')} pid {c.get('pid')}" for c in load)


def machine_now(seconds: float = 1.0, proc: str = PROC, stat_path: str = PROC_STAT,
                exclude: set[int] | None = None) -> dict:
    """What uses this machine now: a :class:`Window` (no canary) over ``seconds`` of sleep
    (``exclude``: the processes not to name; this process tree by default)."""
    with Window(canary=False, proc=proc, stat_path=stat_path, exclude=exclude) as w:
        time.sleep(seconds)
    return w.figures


def quiet_verdict(figures: dict, thresholds: Thresholds = THRESHOLDS) -> str:
    """One line on a :func:`machine_now` reading: who uses the machine and whether a sweep started
    now would have its rounds disturbed."""
    if not isinstance(figures.get("other_cpu"), (int, float)):
        return "machine: no /proc/stat here: what else uses the machine cannot be read"
    why = judge(figures, None, thresholds)
    cmds = [f"pid {o['pid']}: {o['cmd']}" for o in figures.get("others") or [] if isinstance(o, dict) and o.get("cmd")]
    head = (f"machine over {figures.get('window_s', 0):.1f} s: other processes used {figures['other_cpu']:.0%} of "
            f"the CPUs" + _who(figures) + (f", steal {figures['steal']:.0%}" if figures.get("steal") else ""))
    if why is None:
        return head + f": quiet (a round is disturbed over {thresholds.other_cpu:.0%})"
    head += f" [{'; '.join(cmds)}]" if cmds else ""
    return head + (f": a sweep now would have its rounds disturbed (over {thresholds.other_cpu:.0%} of the CPUs, "
                   f"or steal over {thresholds.steal:.0%}); a co-tenant that stays at the same share through the sweep "
                   "is measured as a steady load instead (figures labelled 'under load')")


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
