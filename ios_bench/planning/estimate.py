"""What a sweep will cost before it runs: its duration, and each cell's memory. Both are
**estimates**, printed and recorded as such.

One stated model serves both; its constants (:data:`STATED`) are replaced by what earlier runs
on this machine measured wherever such runs exist (:func:`learn`):

* **A round of a cell** takes ``fixed + warmup * latency + repeat * max(latency, min_sample)``
  seconds: ``fixed`` is a fresh worker's start, its framework's import and the build, the rest the
  timed loop (a sample lasts at least ``min_sample_ms``: the worker raises the runs per sample).
  ``latency`` comes, in this order, from an earlier record of the same model, batch and framework;
  from one at another batch size, scaled by the batch; from the framework's rate (multiply-
  accumulates per second) over its earlier records; from the stated rate.
* **A cell** is ``rounds`` rounds (``auto``: its minimum, so the estimate is a lower bound then).
  Each (model, batch, device, provider) adds one schedule search, each (model, batch) one
  reference output.
* **A cell's memory** is ``base + copies * weights + activation_factor * activations * batch``:
  ``activations`` is the per-image activation footprint the oracle's plan computes
  (:func:`ios_core.reference.activation_bytes`), ``base`` a process with its framework loaded,
  learned per framework from earlier records' peak resident memory.

"Earlier runs" are the run folders beside the sweep's own (``runs/*``), and the sweep's own on
``--resume``, whose ``env.json`` names this machine's CPU model and core count.

Where no earlier run measured a framework's fixed part, it is **calibrated** in the sweep's first
seconds (:func:`calibrate`): the sweep's probe worker times each framework's start as its cells do
it (:func:`probed_starts`; a fresh interpreter of its own where the probe did not), plus the
stated round's own work and build part (:data:`STATED` ``round_s``, ``build_s``), and a cell's
first round its cold build (``first_build_s``). While the sweep runs, :class:`Eta` corrects the remaining time from
the rounds that finished (their measured time against their estimate).

**This machine's speed now** (:func:`speed_probe`, :func:`speed_factor`): the stated figures and the
earlier runs' were measured at some speed of this machine, and a shared VM's speed drifts by more
than the goal of the estimate (two quick sweeps twenty minutes apart took 230 s and 310 s). The
rounds' own canary (``ios_core.measurement.interference.canary``: a fixed single-threaded sort, the
median of its tries, a few ms) is timed at plan time (the least of three, 50 ms apart); every figure
of the model that was not measured now (stated or learnt: latencies, round and build parts,
searches, references) is scaled by its time against the canary's time when those figures were
measured: the median canary of the earlier runs' rounds (each round records its own) for what they
taught, :data:`STATED` ``canary_ms`` for the stated figures, within :data:`SPEED_BOUNDS`. The
workers' starts calibrated now are not scaled (they are this machine's speed now already), nor the
canaries' own stated time.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ios_core.measurement.stats import median

# The stated model (docs/harness.md, "Before a sweep starts"): what is assumed where no earlier
# run on this machine measured it. Rates are multiply-accumulates per second on all the cores
# of a 2-core machine; memory in MiB.
STATED = {
    "fixed_s": {"tensorflow": 8.0, "tvm": 6.0, "tvm-tuned": 6.0, "openvino": 3.0, "default": 3.0},
    "gmacs_per_s": {"default": 60.0},
    # a schedule search: a worker's start, then per schedule searched about this much, per operator
    # of the model, plus about this many sequential latencies of stage timing (a fresh profile
    # database; measured on the quick sweep's networks on a 2-core machine: 1-2 s per schedule)
    "optimize_schedule_s": 0.3,
    "optimize_s_per_op": 0.025,
    "optimize_latencies": 20,
    "reference_fixed_s": 1.2,
    "base_mib": {"tensorflow": 900.0, "tvm": 600.0, "tvm-tuned": 600.0, "default": 450.0},
    "weight_copies": 2.0,  # the loaded weights and the framework's own copy
    "activation_factor": 2.0,  # a framework's arena may hold about twice the oracle's live activations
    "canary_s": 0.05,
    # a round's own work besides its worker's start, build and timed runs: the canaries, loading the
    # input and the oracle's output, the output checks, writing the result
    "round_s": 0.3,
    # the part of a round's fixed cost a calibration does not time: the build (from the run's build
    # cache after the first round: ``adapters.build_cache``) ...
    "build_s": {"torch-compile": 3.5, "tensorflow-xla": 0.9, "tensorflow": 0.8, "tvm": 4.0, "tvm-tuned": 4.0,
                "jax-xla": 0.4, "default": 0.2},
    # ... and what the first round's cold build adds (measured on the quick sweep's networks)
    "first_build_s": {"torch-compile": 9.5, "default": 0.0},
    # the canary's time (speed_probe) on the 2-core VM the figures above were measured on, at its
    # usual speed (2026-11-27 09:40 UTC: 3.86-3.90 ms whenever a core was free; docs/harness.md)
    "canary_ms": 3.9,
}
PROBE_BATCHES, PROBE_PAUSE_S = 3, 0.05  # the canary at plan time: three of its medians, this far apart
SPEED_BOUNDS = (0.5, 2.0)  # the scale a probe may put on the model: past these a probe is not believed further
WORKER_START_S = 1.0  # the least a round's fixed part takes (a fresh process, imports): --time-budget's check
MEMORY_MARGIN = 0.9  # a cell is skipped when its estimate exceeds this share of the available memory
GPU_BASE_MIB = 600.0  # stated: a GPU worker's CUDA context and libraries' workspaces before its own tensors


def speed_probe(batches: int = PROBE_BATCHES, canary=None, sleep=None) -> float:
    """This machine's speed now, ms: the rounds' canary (``ios_core.measurement.interference.canary``,
    the median of its 5 tries, the figure each round records), after one untimed try, the least of
    ``batches`` of them :data:`PROBE_PAUSE_S` apart: what a free core does now, not the burst of
    another process that happens to start in those milliseconds (a 2-core VM's canary doubles then)."""
    import time

    if canary is None:
        from ios_core.measurement.interference import canary
    sleep = sleep or time.sleep
    canary(1)
    got = []
    for i in range(max(1, batches)):
        if i:
            sleep(PROBE_PAUSE_S)
        got.append(float(canary(5)))
    return min(got)


def speed_factor(now_ms: float | None, then_ms: float | None) -> float:
    """How much longer than when ``then_ms`` was measured things take now (``now_ms / then_ms``, the
    canary's times), within :data:`SPEED_BOUNDS`; 1.0 when either is missing."""
    if not now_ms or not then_ms or now_ms <= 0 or then_ms <= 0:
        return 1.0
    low, high = SPEED_BOUNDS
    return min(high, max(low, now_ms / then_ms))


def _stated(name: str, framework: str) -> float:
    table = STATED[name]
    return table.get(_base_name(framework), table["default"])


# the build cache each framework's builds keep (adapters.build_cache): its directory's name
BUILD_CACHES = {"torch-compile": "torch-inductor", "torch-compile-cudagraphs": "torch-inductor", "jax-xla": "jax",
                "openvino": "openvino", "tensorflow-xla": "tensorflow-xla"}


def warm_build_cache(framework: str) -> bool:
    """Whether the build cache this sweep's rounds will use (``IOS_BENCH_BUILD_CACHE``: the user
    scope of ``--build-cache user``, or a directory named there) already holds a sealed build of
    ``framework`` (any device), so that its first round is not cold. The run scope (each run
    folder's own ``cache/``) starts empty. The manifest's versions are not checked here: a cache an
    older version sealed is rebuilt, and the estimate is short by that build."""
    from adapters.build_cache import MANIFEST, resolve

    name = BUILD_CACHES.get(_base_name(framework))
    where = resolve(None)
    if name is None or where is None:
        return False
    root = Path(where).expanduser()
    try:
        return any((d / MANIFEST).is_file() for d in root.glob(f"{name}*") if d.name == name
                   or d.name.startswith(f"{name}@"))
    except OSError:
        return False


PRECISION_SEP = "@"


def series(framework: str, precision: str | None) -> str:
    """What the estimate learns and looks latencies up by: the framework, and its precision where
    not fp32 (``openvino@bf16``), so that a reduced-precision figure never stands for fp32's."""
    return framework if not precision or precision == "fp32" else f"{framework}{PRECISION_SEP}{precision}"


def _base_name(framework: str) -> str:
    """``ios-both[openvino]`` -> ``ios``; peers keep their name, less a precision (``openvino@bf16``)."""
    return "ios" if framework.startswith("ios-") else framework.split(PRECISION_SEP, 1)[0]


@dataclass
class History:
    """What earlier runs on this machine measured: latencies per (model, batch, framework), round
    overheads and peak memory per framework, schedule searches per (model, batch, provider)."""

    latency_ms: dict[tuple[str, int, str], float] = field(default_factory=dict)
    fixed_s: dict[str, list[float]] = field(default_factory=dict)
    peak: list[tuple[str, str, int, float]] = field(default_factory=list)  # (framework, model, batch, MiB)
    gpu_peak: list[tuple[str, str, int, float]] = field(default_factory=list)  # the same on the GPU (gpu_memory)
    optimize_s: dict[tuple[str, int, str], float] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    canary_ms: list[float] = field(default_factory=list)  # each learnt round's canary (its machine's speed then)

    def add(self, rec: dict, run: str | None = None) -> None:
        if rec.get("status") not in ("ok", "wrong") or not isinstance(rec.get("median_ms"), (int, float)):
            return
        if rec.get("scenario"):  # a LoadGen cell's latencies are under load, its rounds LoadGen tests: not a model
            return
        key = (rec["model"], int(rec["batch_size"]), series(rec["framework"], rec.get("precision")))
        self.latency_ms[key] = float(rec["median_ms"])
        lat = rec["median_ms"] / 1000
        from ios_core.measurement.interference import canary_ms

        for r in rec.get("rounds") or [rec]:
            c = canary_ms(r.get("interference") or {})
            if c:
                self.canary_ms.append(float(c))
            wall = r.get("wall_seconds") or _span(r.get("started"), r.get("finished"))
            reps, warm = r.get("repeat") or rec.get("repeat"), r.get("warmup") or rec.get("warmup") or 0
            number = r.get("number") or rec.get("number") or 1
            if isinstance(wall, (int, float)) and isinstance(reps, int):
                fixed = wall - warm * lat - reps * number * lat
                if fixed > 0:
                    self.fixed_s.setdefault(_base_name(rec["framework"]), []).append(fixed)
        if isinstance(rec.get("peak_rss_mib"), (int, float)):
            self.peak.append((rec["framework"], rec["model"], int(rec["batch_size"]), float(rec["peak_rss_mib"])))
        gpu = rec.get("gpu_memory") if isinstance(rec.get("gpu_memory"), dict) else {}
        seen = gpu.get("nvml_process_mib") or gpu.get("allocator_peak_mib")  # NVML's view holds the context too
        if isinstance(seen, (int, float)):
            self.gpu_peak.append((rec["framework"], rec["model"], int(rec["batch_size"]), float(seen)))
        if isinstance(rec.get("optimize_seconds"), (int, float)) and not rec.get("schedule_reused"):
            self.optimize_s[(rec["model"], int(rec["batch_size"]), rec.get("provider") or "torch")] = \
                float(rec["optimize_seconds"])
        if run and run not in self.runs:
            self.runs.append(run)


def _span(start, end) -> float | None:
    try:
        return (_dt.datetime.fromisoformat(end) - _dt.datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


def same_machine(env: dict | None, cpu: dict) -> bool:
    """Whether a run folder's ``env.json`` was written on a machine like this one (CPU model and
    usable cores)."""
    theirs = (env or {}).get("cpu") or {}
    return (bool(theirs.get("model")) and theirs.get("model") == cpu.get("model")
            and theirs.get("usable_cores") == cpu.get("usable_cores"))


def learn(folders: list[Path], cpu: dict) -> History:
    """Every finished record of the run folders measured on a machine like this one."""
    from ios_bench.results import read_records

    hist = History()
    for folder in folders:
        try:
            env = json.loads((folder / "env.json").read_bytes())
        except (OSError, ValueError):
            continue
        if not same_machine(env, cpu) or not (folder / "results.jsonl").is_file():
            continue
        for rec in read_records(folder / "results.jsonl", on_problem=lambda m: None):
            hist.add(rec, folder.name)
    return hist


def earlier_runs(folder: Path) -> list[Path]:
    """The run folders beside ``folder`` (and ``folder`` itself), newest last."""
    parent = Path(folder).resolve().parent
    try:
        found = [p for p in parent.iterdir() if p.is_dir() and (p / "results.jsonl").is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime)


@dataclass
class Model:
    """The cost model of one sweep: the stated constants, overridden by an earlier run's figures."""

    history: History
    macs: dict[str, int]  # graph name -> multiply-accumulates per image
    ops: dict[str, int]  # graph name -> operators
    warmup: int = 3
    repeat: int = 10
    min_sample_ms: float = 0.0
    sources: dict[str, int] = field(default_factory=dict)  # where each latency came from -> cells
    calibrated: dict[str, float] = field(default_factory=dict)  # framework -> a fresh worker's start (calibrate)
    probe_ms: float | None = None  # the canary now (speed_probe); None: the figures are used as they are

    def speed(self, learnt: bool) -> float:
        """The scale on a figure not measured now: the canary now against the earlier runs' rounds'
        canaries (``learnt``: a figure they taught; without any, the stated speed) or against the
        stated figures' canary."""
        stated = STATED["canary_ms"]
        then = median(self.history.canary_ms) if learnt and self.history.canary_ms else stated
        return speed_factor(self.probe_ms, then)

    def rate(self, framework: str) -> float:
        """Multiply-accumulates per second of ``framework`` over its earlier records."""
        got = [self.macs[m] * b / (ms / 1000) for (m, b, fw), ms in self.history.latency_ms.items()
               if fw == framework and m in self.macs and ms > 0]
        return median(got) if got else _stated("gmacs_per_s", framework) * 1e9

    def latency_s(self, model: str, batch: int, framework: str, count: bool = True) -> float:
        h = self.history.latency_ms
        fp32 = framework.split(PRECISION_SEP, 1)[0]
        learnt = True
        if (model, batch, framework) in h:
            src, value = "earlier runs", h[(model, batch, framework)] / 1000
        elif fp32 != framework and (model, batch, fp32) in h:  # another precision: its fp32 figure, an upper bound
            src, value = "earlier runs (its fp32 figure)", h[(model, batch, fp32)] / 1000
        else:
            others = sorted(((b, ms) for (m, b, fw), ms in h.items() if m == model and fw == framework),
                            key=lambda x: abs(x[0] - batch))
            if others:
                src, value = "earlier runs (another batch size)", others[0][1] / 1000 * batch / others[0][0]
            else:
                from_runs = any(fw == framework for (_, _, fw) in h)
                src = "earlier runs (the framework's rate)" if from_runs else "stated model"
                learnt = from_runs
                value = self.macs.get(model, 0) * batch / self.rate(framework)
        if count:
            self.sources[src] = self.sources.get(src, 0) + 1
        return value * self.speed(learnt)

    def fixed_s(self, framework: str) -> float:
        """A round's fixed part: earlier runs' where they measured it, else the calibrated start
        of a worker plus the stated build part, else the stated figure."""
        got = self.history.fixed_s.get(_base_name(framework))
        if got:
            return median(got) * self.speed(True)
        framework = framework.split(PRECISION_SEP, 1)[0]  # a worker's start does not depend on the precision
        if framework in self.calibrated:  # measured now: only the stated part is scaled
            return self.calibrated[framework] + (STATED["round_s"] + _stated("build_s", framework)) * self.speed(False)
        return _stated("fixed_s", framework) * self.speed(False)

    def first_build_s(self, framework: str) -> float:
        """What a cell's first round adds to its fixed part (a cold build, where no earlier run
        measured the framework's rounds: theirs include it, and where the build cache the rounds
        will use holds no sealed build of the framework: :func:`warm_build_cache`)."""
        if self.history.fixed_s.get(_base_name(framework)) or warm_build_cache(framework):
            return 0.0
        return _stated("first_build_s", framework) * self.speed(False)

    def round_s(self, model: str, batch: int, framework: str, count: bool = False) -> float:
        lat = self.latency_s(model, batch, framework, count)
        sample = max(lat, self.min_sample_ms / 1000)
        return self.fixed_s(framework) + self.warmup * lat + self.repeat * sample + 2 * STATED["canary_s"]

    def cell_s(self, cell, count: bool = False) -> float:
        """One round of ``cell`` (a sweep's ``Cell``)."""
        return self.round_s(cell.model, cell.batch_size, series(cell.framework, getattr(cell, "precision", None)),
                            count)

    def optimize_s(self, model: str, batch: int, provider: str, schedules: int = 1) -> float:
        """One search worker of (model, batch, provider) searching ``schedules`` schedules: its start
        (calibrated as that provider's IOS cells), then each schedule's search (an earlier run's,
        else the stated model)."""
        framework = "ios-sequential" + ("" if provider == "torch" else f"[{provider}]")
        start = self.calibrated.get(framework, STATED["fixed_s"]["default"] * self.speed(False))
        got = self.history.optimize_s.get((model, batch, provider))
        if got is not None:
            got *= self.speed(True)
        else:
            seq = self.latency_s(model, batch, framework, count=False)  # scaled already
            got = ((STATED["optimize_schedule_s"] + STATED["optimize_s_per_op"] * self.ops.get(model, 0))
                   * self.speed(False) + STATED["optimize_latencies"] * seq)
        return start + max(1, schedules) * got

    def reference_s(self, model: str, batch: int) -> float:
        return STATED["reference_fixed_s"] * self.speed(False) + 2 * self.latency_s(model, batch, "torch", count=False)

    def speed_note(self) -> str:
        """What the estimate was scaled by, for its printed line (empty without a probe)."""
        if self.probe_ms is None:
            return ""
        note = (f"scaled by {self.speed(False):.2f} for this machine's speed now (canary {self.probe_ms:.2f} ms "
                f"against {STATED['canary_ms']:.2f} ms stated")
        if self.history.canary_ms:
            note += f", {self.speed(True):.2f} for earlier runs' figures (their rounds' canaries)"
        low, high = SPEED_BOUNDS
        return note + f"; bounded to {low}-{high})"


def _base_kind(framework: str) -> str:
    """What a framework's worker imports: ``ios-both[openvino]`` -> ``ios[openvino]``, ``ios-both``
    -> ``ios[torch]``; a peer is itself."""
    if framework.startswith("ios-"):
        provider = framework.partition("[")[2].rstrip("]") or "torch"
        return f"ios[{provider}]"
    return framework


def _modules(kind: str) -> list[str]:
    """The modules a worker of ``kind`` imports for its framework: the adapter's (or the IOS kernel
    provider's) requirements."""
    if kind.startswith("ios["):
        from ios_core.runtime import providers

        return ["adapters.ios", *providers.get(kind[4:-1]).requires]
    import adapters

    return [type(adapters.get(kind)).__module__, *adapters.get(kind).requires]


_START = ("import time; t = time.perf_counter(); import importlib, sys; import ios_bench.running.worker; "
          "[importlib.import_module(m) for m in sys.argv[1:]]")


def start_probe(kind: str, clock=None) -> float:
    """Seconds a fresh worker of ``kind`` takes to start: an interpreter importing the harness's
    worker and the framework's modules, timed from outside (what every round pays before it builds)."""
    import os
    import subprocess
    import sys
    import time

    clock = clock or time.perf_counter
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + (os.pathsep + os.environ["PYTHONPATH"]
                                               if os.environ.get("PYTHONPATH") else "")}
    t0 = clock()
    subprocess.run([sys.executable, "-c", _START, *_modules(kind)], env=env, capture_output=True, timeout=300,
                   check=True)
    return clock() - t0


def probed_starts(probes: dict, fallback=start_probe):
    """A ``probe`` for :func:`calibrate` reading what the sweep's probe workers measured: per adapter
    and per IOS kernel provider, that worker's own start plus the imports of the framework's modules
    (``start_s``, ``provider_start_s``: ``ios_bench.running.task_setup.task_probe``), so that the
    calibration starts no process of its own; a kind the probe did not time is measured by
    ``fallback``."""
    starts: dict[str, float] = {}
    for p in probes.values():
        for name, info in (p.get("adapters") or {}).items():
            if isinstance(info, dict) and info.get("start_s") is not None:
                starts.setdefault(name, float(info["start_s"]))
        for provider, seconds in (p.get("provider_start_s") or {}).items():
            if seconds is not None:
                starts.setdefault(f"ios[{provider}]", float(seconds))

    def probe(kind: str) -> float:
        return starts[kind] if kind in starts else fallback(kind)

    return probe


def calibrate(frameworks, history: History, probe=start_probe, clock=None, budget_s: float = 10.0) -> dict:
    """{framework: a fresh worker's measured start, s} for the sweep's frameworks whose fixed part
    no earlier run measured (one probe per kind of worker: IOS cells on one provider share one),
    within ``budget_s`` of ``clock`` (what is left keeps the stated figure). A probe that fails
    leaves its frameworks stated."""
    import time

    clock = clock or time.perf_counter
    t0 = clock()
    kinds: dict[str, list[str]] = {}
    for fw in dict.fromkeys(frameworks):
        if not history.fixed_s.get(_base_name(fw)):
            kinds.setdefault(_base_kind(fw), []).append(fw)
    out: dict[str, float] = {}
    for kind, fws in kinds.items():
        if clock() - t0 > budget_s:
            break
        try:
            seconds = float(probe(kind))
        except Exception:  # noqa: BLE001 - a framework that cannot start keeps the stated figure
            continue
        for fw in fws:
            out[fw] = seconds
    return out


class Eta:
    """The remaining time of a sweep, corrected from the rounds that finished: before any, the
    estimate less the time spent; after, the estimated remainder scaled by how long the finished
    rounds took against their estimate (``clock``: seconds, injectable)."""

    def __init__(self, estimated_s: float, clock=None):
        import time

        self.clock = clock or time.monotonic
        self.total = float(estimated_s)
        self.start = self.clock()
        self.done_estimated = 0.0
        self.done_actual = 0.0
        self._mark = self.start

    def finished(self, estimated_s: float) -> None:
        """A round (or a reference, a search) estimated at ``estimated_s`` finished now."""
        now = self.clock()
        self.done_estimated += float(estimated_s)
        self.done_actual = now - self.start
        self._mark = now

    def drop(self, estimated_s: float) -> None:
        """Work estimated at ``estimated_s`` will not run after all (an IOS cell measured as the
        identical schedule of another): the remaining time no longer waits for it."""
        self.total = max(0.0, self.total - float(estimated_s))

    def ratio(self) -> float | None:
        """Measured over estimated time of what finished (None before anything did)."""
        return self.done_actual / self.done_estimated if self.done_estimated > 0 else None

    def remaining(self) -> float:
        left = max(0.0, self.total - self.done_estimated)
        r = self.ratio()
        if r is None:
            return max(0.0, left - (self.clock() - self.start))
        return max(0.0, left * r - (self.clock() - self._mark))


def min_round_seconds(repeat: int, min_sample_ms: float | None) -> float:
    """The least time one round of one cell can take: a fresh worker, then ``repeat`` samples of at
    least ``min_sample_ms`` (the lower bound ``--time-budget`` is checked against)."""
    return WORKER_START_S + repeat * (min_sample_ms or 0) / 1000


def sweep_seconds(model: Model, cells: list, rounds: dict[str, int], todo_refs: set, todo_searches,
                  fresh: set | None = None) -> dict:
    """The estimated duration of measuring ``cells`` (``rounds[cell.key]`` rounds left each; a cell
    in ``fresh``, none of whose rounds ran yet (None: every cell), pays its first round's cold build,
    :meth:`Model.first_build_s`), plus the reference outputs and schedule searches still to make
    (``todo_searches``: {(model, batch, provider): schedules to search}, or a set of those keys: one
    each). Returns {"seconds", "cells", "per_cell", "from"}."""
    per_cell = {}
    for c in cells:
        left = rounds[c.key]
        cold = left > 0 and (fresh is None or c.key in fresh)
        per_cell[c.key] = left * model.cell_s(c, count=True) + (model.first_build_s(c.framework) if cold else 0.0)
    total = sum(per_cell.values())
    total += sum(model.reference_s(m, b) for m, b in todo_refs)
    searches = todo_searches if isinstance(todo_searches, dict) else dict.fromkeys(todo_searches, 1)
    total += sum(model.optimize_s(m, b, p, n) for (m, b, p), n in searches.items())
    return {"seconds": total, "cells": len(cells), "per_cell": per_cell, "from": dict(model.sources)}


# ---- memory --------------------------------------------------------------------------------

def activation_mib(graph) -> float:
    """The per-image activation footprint of ``graph`` (the oracle's liveness plan), in MiB."""
    from ios_core.reference import activation_bytes

    return activation_bytes(graph) / 2**20


def cell_memory_mib(framework: str, weights_mib: float, act_mib: float, batch: int, history: History,
                    acts: dict[str, float] | None = None, weights: dict[str, float] | None = None) -> float:
    """The estimated peak resident memory of one cell's worker."""
    copies, factor = STATED["weight_copies"], STATED["activation_factor"]
    bases = [peak - copies * weights[m] - factor * acts[m] * b for fw, m, b, peak in history.peak
             if _base_name(fw) == _base_name(framework) and acts and weights and m in acts and m in weights]
    base = max(median(bases), 100.0) if bases else _stated("base_mib", framework)
    return base + copies * weights_mib + factor * act_mib * batch


def gpu_memory_mib(framework: str, weights_mib: float, act_mib: float, batch: int, history: History,
                   acts: dict[str, float] | None = None, weights: dict[str, float] | None = None) -> float:
    """The estimated peak GPU memory of one cell's worker: the stated model of
    :func:`cell_memory_mib`, its base learned from earlier cells' ``gpu_memory``."""
    copies, factor = STATED["weight_copies"], STATED["activation_factor"]
    bases = [peak - copies * weights[m] - factor * acts[m] * b for fw, m, b, peak in history.gpu_peak
             if _base_name(fw) == _base_name(framework) and acts and weights and m in acts and m in weights]
    base = max(median(bases), 100.0) if bases else GPU_BASE_MIB
    return base + copies * weights_mib + factor * act_mib * batch


def gpu_free_mib(device: int = 0) -> float | None:
    """The GPU's free memory now (NVML, in the process's one session), or None where NVML cannot say."""
    from ios_core.measurement.gpu import nvml_handle, nvml_session

    pynvml, _ = nvml_session()
    if pynvml is None:  # no NVML, no driver: no GPU check
        return None
    try:
        return pynvml.nvmlDeviceGetMemoryInfo(nvml_handle(pynvml, device)).free / 2**20
    except Exception:  # noqa: BLE001
        return None


def available_mib() -> float:
    """Memory a new worker can have now: the machine's available memory, and the cgroup's room
    below its limit where one is set (cgroup v2), whichever is less."""
    import psutil

    avail = psutil.virtual_memory().available / 2**20
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit != "max":
            avail = min(avail, (int(limit) - used) / 2**20)
    except (OSError, ValueError):
        pass
    return avail


def too_big(estimate_mib: float, available: float) -> str | None:
    """Why a cell cannot start (one line), or None."""
    if estimate_mib <= MEMORY_MARGIN * available:
        return None
    return (f"not enough memory: the cell needs about {estimate_mib:,.0f} MiB (an estimate: weights, the framework's "
            f"activations at this batch, its arena) and {available:,.0f} MiB are available")


def memory_skips(cells: list, refs: dict, history: History, gpu_free: float | None = None) -> dict[str, str]:
    """{cell key: why it cannot start} for the cells whose estimated memory exceeds what is
    available on this machine now, and for a cell on ``cuda`` also its estimated GPU memory
    against the GPU's free memory (``gpu_free``, MiB; NVML's reading when not given). ``refs``:
    {(model, batch): the reference's metadata}, which carries each model's activation and weight
    footprint."""
    acts = {m: ref.get("activation_mib") for (m, _), ref in refs.items() if ref.get("activation_mib") is not None}
    weights = {m: ref.get("weights_mib") for (m, _), ref in refs.items() if ref.get("weights_mib") is not None}
    avail = available_mib()
    on_gpu = [c for c in cells if str(c.device).startswith("cuda")]
    if on_gpu and gpu_free is None:
        gpu_free = gpu_free_mib()
    out = {}
    for c in cells:
        if c.model not in acts or c.model not in weights:
            continue
        need = cell_memory_mib(c.framework, weights[c.model], acts[c.model], c.batch_size, history, acts, weights)
        why = too_big(need, avail)
        if why is None and gpu_free is not None and str(c.device).startswith("cuda"):
            need = gpu_memory_mib(c.framework, weights[c.model], acts[c.model], c.batch_size, history, acts, weights)
            if need > MEMORY_MARGIN * gpu_free:
                why = (f"not enough GPU memory: the cell needs about {need:,.0f} MiB on the GPU (an estimate: "
                       f"weights, the framework's activations at this batch, its context) and {gpu_free:,.0f} MiB "
                       "are free there")
        if why:
            out[c.key] = why
    return out


def human(seconds: float) -> str:
    """``3 h 05 min``, ``12 min``, ``40 s``."""
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"
