"""What a sweep will cost before it runs: its duration, and each cell's memory. Both are
**estimates**, printed and recorded as such.

Its parts, each importable from here: the stated figures and their sources
(:mod:`~ios_bench.planning.estimate_stated`), what earlier runs measured
(:mod:`~ios_bench.planning.estimate_history`), the cost model of a sweep
(:mod:`~ios_bench.planning.estimate_model`), the replay of a finished run
(:mod:`~ios_bench.planning.estimate_replay`); here the workers' starts calibrated now, the ETA and memory.

One stated model serves both; its constants (:data:`STATED`) are replaced by what earlier runs
on this machine measured wherever such runs exist (:func:`learn`):

* **A round of a cell** takes ``fixed + warmup * latency + repeat * max(latency, min_sample)``
  seconds: ``fixed`` is a fresh worker's start, its framework's import and the build, the rest the
  timed loop (a sample lasts at least ``min_sample_ms``: the worker raises the runs per sample).
  ``latency`` comes, in this order, from an earlier record of the same model, batch and framework;
  from one at another batch size, scaled by the batch; from the framework's rate (multiply-
  accumulates per second) over its earlier records; from the stated rate.
  The build part grows with the model (``STATED["build_latencies"]``: the model's fp32 latencies),
  and a first round adds its cold build (int8: the calibration); both per worker kind (IOS: per
  kernel provider) and precision, learnt so where earlier runs measured them.
* **A cell** is ``rounds`` rounds (``auto``: its minimum, so the estimate is a lower bound then).
  Each (model, batch, provider, precision) adds one schedule search (per operator by provider and
  precision, per state of the DP: :func:`search_states`), each (model, batch) one reference output.
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
measured: for what earlier runs taught, not at all while the canary now lies within the range their
rounds' canaries spanned (each round records its own; their 10th-90th percentile), else against the
nearer end of that range (:func:`band_factor`: a 1 ms canary on a shared 2-core VM moves by 30 % from
one minute to the next, and so did the same plan's estimate when it was scaled against their median);
:data:`STATED` ``canary_ms`` for the stated figures; within :data:`SPEED_BOUNDS`. The
workers' starts calibrated now are not scaled (they are this machine's speed now already), nor the
canaries' own stated time. A canary compares moments of one kind of host: the stated latencies are
scaled only on a host with the stated figures' instruction sets (``Model.stated_host``), and earlier
runs are learnt from only where their host had this one's (:func:`same_machine`).
"""

from __future__ import annotations

from pathlib import Path

# the estimate's parts, importable from here (their public names: docs/architecture.md)
from ios_bench.planning.estimate_history import (  # noqa: F401
    History,
    _span,
    earlier_runs,
    history_macs,
    history_sizes,
    learn,
    same_machine,
)
from ios_bench.planning.estimate_model import (  # noqa: F401
    BUILD_CACHES,
    Model,
    human,
    search_states,
    sweep_seconds,
    warm_build_cache,
)
from ios_bench.planning.estimate_replay import replay, replay_lines  # noqa: F401
from ios_bench.planning.estimate_stated import (  # noqa: F401
    BUILD_BASE_OPS,
    BUILD_FULL_OPS,
    GPU_BASE_MIB,
    MEMORY_MARGIN,
    PRECISION_SEP,
    PROBE_BATCHES,
    PROBE_PAUSE_S,
    SPEED_BOUNDS,
    STATED,
    WORKER_START_S,
    _base_kind,
    _base_name,
    _fixed_key,
    _stated,
    band_factor,
    canary_band,
    series,
    speed_factor,
    speed_probe,
)
from ios_core.measurement.stats import median


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
    for fw in dict.fromkeys(frameworks):  # a series (openvino@int8): its kind at its precision learnt?
        plain = fw.split(PRECISION_SEP, 1)[0]
        if not history.fixed_s.get(_fixed_key(fw)) and plain not in kinds.get(_base_kind(plain), []):
            kinds.setdefault(_base_kind(plain), []).append(plain)
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

