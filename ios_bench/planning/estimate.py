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
    # at bf16 and int8: fp32's times the median speedup over its own fp32 the frameworks had on this 2-core
    # VM on 2026-11-27 (runs/prec-a, inception_v3 and randwire b1: bf16 1.6-1.9x, int8 0.3-5.9x, median 2.6x)
    "gmacs_per_s": {"default": 60.0, "default@bf16": 105.0, "default@int8": 156.0},
    # a search worker: its start, then per operator of the model by kernel provider and precision (each
    # stage timed, the candidates compiled by the provider's engine end to end; at int8 each piece quantized
    # and calibrated first), plus per state of the DP (:func:`search_states`), once for all the schedules it
    # searches (one cost model: the stages timed for the first are reused by the next; the quick sweep of
    # 10:04, /tmp/estrun2: sequential 0-1.3 s, greedy 0.9-1.6, both 1.0-2.8 after it), plus per schedule
    # optimize_schedule_s. Measured on this 2-core VM on 2026-11-27 (runs/prec-a: 12
    # searches, inception_v3 and randwire b1, 12.7-317 s, a fresh profile database): the states
    # explain randwire's searches (46,223 states against inception_v3's 1,207, both ~120 operators):
    # 2.4-3.0 ms each over the six provider/precision pairs; the rest per operator, below
    "optimize_schedule_s": 0.3,
    # ... and at a batch above 1, this many of what the batch adds to the model's latency on the provider's
    # engine at its precision (the stages are timed at the cell's batch; the figures above are batch 1's):
    # docs/results/batchsize (2026-11-22, this VM's CPU, 2 cores): inception_v3's IOS-Both search on torch
    # took 3.1, 9.6 and 37.9 s at batch 1, 4 and 16, 25, 25 and 24 of torch's latency at that batch
    "optimize_batch_latencies": 24,
    "optimize_s_per_state": 0.0026,
    "optimize_s_per_op": {"ios[torch]": 0.04, "ios[onnxruntime]": 0.085, "ios[openvino]": 0.14,
                          "ios[openvino]@bf16": 0.10, "ios[onnxruntime]@int8": 0.35, "ios[openvino]@int8": 1.63,
                          "default": 0.085},
    "reference_fixed_s": 1.2,
    "base_mib": {"tensorflow": 900.0, "tvm": 600.0, "tvm-tuned": 600.0, "default": 450.0},
    "weight_copies": 2.0,  # the loaded weights and the framework's own copy
    "activation_factor": 2.0,  # a framework's arena may hold about twice the oracle's live activations
    "canary_s": 0.05,
    # a round's own work besides its worker's start, build, canaries (canary_s) and timed runs: loading the
    # input and the oracle's output, the output checks, writing the result ...
    "round_s": 0.1,
    # ... and the part of a round's fixed cost a calibration does not time: the build (from the build cache
    # after the first round: ``adapters.build_cache``). With round_s: the quick sweep of 2026-11-27 10:04 UTC
    # (/tmp/estrun2/runs/r1, quiet; sample and squeezenet): its later rounds' wall less their timed loop and
    # the worker's start its sweep measured, the median per framework: 0.35-0.52 s (ONNX Runtime, OpenVINO,
    # torch, JAX, IOS on every provider), TensorFlow 1.26, TensorFlow-XLA 1.36, torch-compile 3.35; each
    # less the canaries and round_s. Checked on the quick sweeps of 09:58 (under load) and 15:32 (quiet)
    "build_s": {"torch-compile": 3.1, "tensorflow-xla": 1.1, "tensorflow": 1.0, "tvm": 4.0, "tvm-tuned": 4.0,
                "default": 0.2},
    # ... plus this many of the model's fp32 latencies (with the framework's own: a build grows with the
    # model's work, the pieces an IOS provider compiles one per stage; a warm int8 build loads its
    # quantized model). Measured on this 2-core VM on 2026-11-27 (runs/prec-a, inception_v3 and randwire
    # b1: later rounds' wall less their timed loop, worker start and the parts above; the mean of the two
    # networks, each within about 1.5x of it)
    "build_latencies": {"onnxruntime": 13, "openvino": 24, "torch": 2, "tensorflow": 16, "ios[torch]": 18,
                        "ios[onnxruntime]": 37, "ios[openvino]": 52, "ios[openvino]@bf16": 42,
                        "onnxruntime@int8": 17, "openvino@int8": 40, "torch@int8": 28, "tensorflow@int8": 18,
                        "ios[onnxruntime]@int8": 34, "ios[openvino]@int8": 73, "default": 0},
    # ... and what the first round's cold build adds (torch-compile: measured on the quick sweep's networks)
    "first_build_s": {"torch-compile": 9.5, "default": 0.0},
    # ... in the model's fp32 latencies: int8's post-training quantization (calibration on seeded inputs,
    # per piece for IOS: docs/precision.md), kept by the build cache for the later rounds. Measured on
    # this 2-core VM on 2026-11-27 (runs/prec-a: first round's wall less the later rounds' median; 3.4-9.3 s
    # on inception_v3, 8.6-31 s on randwire; the mean of the two networks' multiples)
    "first_build_latencies": {"onnxruntime@int8": 90, "openvino@int8": 165, "torch@int8": 36,
                              "tensorflow@int8": 200, "ios[onnxruntime]@int8": 105, "ios[openvino]@int8": 165,
                              "default": 0},
    # the canary's time (speed_probe) on the 2-core VM the figures above were measured on, at its
    # usual speed (2026-11-27 09:40 UTC: 3.86-3.90 ms whenever a core was free; docs/harness.md)
    "canary_ms": 3.9,
}
# a build's stated growth (build_latencies) is full from BUILD_FULL_OPS operators on (inception_v3 and
# randwire, ~120, where it was measured), none up to BUILD_BASE_OPS and a share between: the stated build_s
# was measured on the quick sweep's networks (sample: 5 operators, squeezenet: 38), whose builds it holds
# already (the quick sweep of 2026-11-27 10:04 UTC: ONNX Runtime's and OpenVINO's rounds 0.6-1.0 s in all)
BUILD_BASE_OPS, BUILD_FULL_OPS = 38, 100
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
    """``STATED[name]``'s figure for ``framework`` (a series: ``openvino@int8``, ``ios-both[openvino]@int8``):
    its kind at its precision (``ios[openvino]@int8``), its kind, its name at its precision, its name
    (``ios`` for every IOS cell), the table's default at its precision, else its default."""
    table = STATED[name]
    plain, _, precision = framework.partition(PRECISION_SEP)
    kind, base = _base_kind(plain), _base_name(plain)
    for key in (series(kind, precision), kind, series(base, precision), base, series("default", precision)):
        if key in table:
            return table[key]
    return table["default"]


def _fixed_key(framework: str) -> str:
    """What a round's fixed part is learned and looked up by: the worker's kind at its precision
    (``ios[openvino]@int8``, ``torch``): a build differs by kernel provider and precision."""
    plain, _, precision = framework.partition(PRECISION_SEP)
    return series(_base_kind(plain), precision)


def search_states(graph) -> int:
    """The states the IOS DP solves on ``graph`` (the optimizer's own count, for its progress bar;
    cheap next to the search): what a search's cost grows with besides its operators."""
    from ios_core.optimizer.optimize import graph_states

    return graph_states(graph)


# the build cache each framework's builds keep (adapters.build_cache): its directory's name
BUILD_CACHES = {"torch-compile": "torch-inductor", "torch-compile-cudagraphs": "torch-inductor", "jax-xla": "jax",
                "openvino": "openvino", "tensorflow-xla": "tensorflow-xla"}


def warm_build_cache(framework: str, model: str | None = None, batch: int = 1) -> bool:
    """Whether the build cache this sweep's rounds will use (``IOS_BENCH_BUILD_CACHE``: the user
    scope of ``--build-cache user``, or a directory named there) already holds the cell's own build:
    ``model`` at ``batch`` by ``framework`` (a series: its precision, ``openvino@bf16``), as a manifest
    there names it (``adapters.build_cache.sealed_builds``), so that its first round is not cold. Another
    model's, batch's or precision's build in the same cache is not this cell's. The run scope (each run
    folder's own ``cache/``) starts empty.

    What it cannot tell: a manifest sealed before builds were named (or by a build no round's worker
    named) holds builds it does not list, so it is counted cold (the estimate then errs long by a
    first build); the device (a cache on any device, ``<name>`` or ``<name>@<gpu>``, counts: the GPU a
    cuda cell will get is not known here); and the versions (a cache an older version sealed is rebuilt,
    and the estimate is short by that build). A framework without a cache of its own (``BUILD_CACHES``)
    or a cell without a model is cold."""
    from adapters.build_cache import build_name, resolve, sealed_builds

    name = BUILD_CACHES.get(_base_name(framework))
    where = resolve(None)
    if name is None or where is None or model is None:
        return False
    want = build_name(model, batch, framework.partition(PRECISION_SEP)[2] or "fp32")
    root = Path(where).expanduser()
    try:
        return any(want in (sealed_builds(d) or []) for d in root.glob(f"{name}*")
                   if d.name == name or d.name.startswith(f"{name}@"))
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
    """What earlier runs on this machine measured: latencies per (model, batch, framework series),
    round overheads and first rounds' cold builds per worker kind and precision (:func:`_fixed_key`),
    peak memory per framework, schedule searches per (model, batch, provider, precision)."""

    latency_ms: dict[tuple[str, int, str], float] = field(default_factory=dict)
    fixed_s: dict[str, list[float]] = field(default_factory=dict)
    peak: list[tuple[str, str, int, float]] = field(default_factory=list)  # (framework, model, batch, MiB)
    gpu_peak: list[tuple[str, str, int, float]] = field(default_factory=list)  # the same on the GPU (gpu_memory)
    # a search worker's schedules: (model, batch, provider, precision) -> {schedule: optimize_seconds}
    optimize_s: dict[tuple[str, int, str, str], dict[str, float]] = field(default_factory=dict)
    # a first round's wall less the later ones' median: (model, seconds) per worker kind and precision
    first_build_s: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    fixed_by_model: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (kind, model): fixed_s's
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

        fixed_key = _fixed_key(series(rec["framework"], rec.get("precision")))
        walls = {r.get("round"): r.get("wall_seconds") or _span(r.get("started"), r.get("finished"))
                 for r in rec.get("rounds") or []}
        later = [w for k, w in walls.items() if k != 0 and isinstance(w, (int, float))]
        if isinstance(walls.get(0), (int, float)) and later:
            self.first_build_s.setdefault(fixed_key, []).append((rec["model"], max(0.0, walls[0] - median(later))))
        for r in rec.get("rounds") or [rec]:
            c = canary_ms(r.get("interference") or {})
            if c:
                self.canary_ms.append(float(c))
            if later and r.get("round") == 0:  # its cold build is learnt apart (first_build_s)
                continue
            wall = r.get("wall_seconds") or _span(r.get("started"), r.get("finished"))
            reps, warm = r.get("repeat") or rec.get("repeat"), r.get("warmup") or rec.get("warmup") or 0
            number = r.get("number") or rec.get("number") or 1
            if isinstance(wall, (int, float)) and isinstance(reps, int):
                fixed = wall - warm * lat - reps * number * lat
                if fixed > 0:
                    self.fixed_s.setdefault(fixed_key, []).append(fixed)
                    self.fixed_by_model.setdefault((fixed_key, rec["model"]), []).append(fixed)
        if isinstance(rec.get("peak_rss_mib"), (int, float)):
            self.peak.append((rec["framework"], rec["model"], int(rec["batch_size"]), float(rec["peak_rss_mib"])))
        gpu = rec.get("gpu_memory") if isinstance(rec.get("gpu_memory"), dict) else {}
        seen = gpu.get("nvml_process_mib") or gpu.get("allocator_peak_mib")  # NVML's view holds the context too
        if isinstance(seen, (int, float)):
            self.gpu_peak.append((rec["framework"], rec["model"], int(rec["batch_size"]), float(seen)))
        if isinstance(rec.get("optimize_seconds"), (int, float)) and not rec.get("schedule_reused"):
            self.optimize_s.setdefault((rec["model"], int(rec["batch_size"]), rec.get("provider") or "torch",
                                        rec.get("precision") or "fp32"), {})[rec.get("schedule") or ""] = \
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


def history_macs(history: History, known: dict[str, int]) -> dict[str, int]:
    """Multiply-accumulates per image of the zoo models earlier runs measured that ``known`` lacks
    (what :meth:`Model.rate` needs to learn a framework's rate from them); a model the zoo does not
    name is left out."""
    from ios_bench.planning.loading import load_graph

    out = {}
    for name in dict.fromkeys(m for m, _, _ in history.latency_ms):
        if name in known:
            continue
        try:
            out[name] = int(load_graph(name).macs())
        except Exception:  # noqa: BLE001 - a JSON model of another run, not here: no rate from it
            continue
    return out


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
    states: dict[str, int] = field(default_factory=dict)  # graph name -> the IOS DP's states (search_states)
    warmup: int = 3
    repeat: int = 10
    min_sample_ms: float = 0.0
    sources: dict[str, int] = field(default_factory=dict)  # where each latency came from -> cells
    calibrated: dict[str, float] = field(default_factory=dict)  # framework -> a fresh worker's start (calibrate)
    probe_ms: float | None = None  # the canary now (speed_probe); None: the figures are used as they are
    # (series, model, batch) -> whether the build cache the rounds will use holds that cell's own build
    # (warm_build_cache; a replay: what its records say)
    warm_cache: object = field(default=None, repr=False)

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

    def fixed_s(self, framework: str, model: str | None = None) -> float:
        """A round's fixed part (``framework``: a series, ``openvino@int8``): earlier runs' where they
        measured its worker kind at its precision (:func:`_fixed_key`; their rounds of ``model`` where
        there are any, a build grows with the model), else the calibrated start of a worker plus the
        stated build part, else the stated figure."""
        key = _fixed_key(framework)
        got = self.history.fixed_by_model.get((key, model))
        if got:
            return median(got) * self.speed(True)
        if self.history.fixed_s.get(key):  # other models': their build part moved to this model's size
            k = _stated("build_latencies", framework)
            lat = {m: self._fp32_latency_s(m, framework) for (kk, m) in self.history.fixed_by_model if kk == key}
            rest = [f - k * lat[m] for (kk, m), fs in self.history.fixed_by_model.items() if kk == key for f in fs]
            if rest and model is not None:
                return max(WORKER_START_S, median(rest) * self.speed(True) + k * self._fp32_latency_s(model, framework))
            return median(self.history.fixed_s[key]) * self.speed(True)
        plain = framework.split(PRECISION_SEP, 1)[0]  # a worker's start does not depend on the precision
        if plain in self.calibrated:  # measured now: only the stated part is scaled
            return self.calibrated[plain] + (STATED["round_s"] + _stated("build_s", framework)) * self.speed(False)
        return _stated("fixed_s", framework) * self.speed(False)

    def _fp32_latency_s(self, model: str | None, framework: str) -> float:
        """The model's fp32 latency at batch 1 on ``framework``'s engine: what a build's size is counted
        in (a build does not grow with the batch: resnet50's at 1 and 16 alike, runs/prec-b)."""
        if model is None:
            return 0.0
        return self.latency_s(model, 1, framework.split(PRECISION_SEP, 1)[0], count=False)

    def build_s(self, model: str, batch: int, framework: str) -> float:
        """What a round's build adds with the model's size (:data:`STATED` ``build_latencies``, in full
        from :data:`BUILD_FULL_OPS` operators on, none up to :data:`BUILD_BASE_OPS`, a share between),
        where no earlier run measured the fixed part of ``framework``'s kind at its precision (theirs
        holds it)."""
        if self.history.fixed_s.get(_fixed_key(framework)):
            return 0.0
        ops = self.ops.get(model, BUILD_FULL_OPS)
        share = min(1.0, max(0.0, (ops - BUILD_BASE_OPS) / (BUILD_FULL_OPS - BUILD_BASE_OPS)))
        return _stated("build_latencies", framework) * self._fp32_latency_s(model, framework) * share

    def first_build_s(self, framework: str, model: str | None = None, batch: int = 1) -> float:
        """What a cell's first round adds to its fixed part (``framework``: a series): its cold build,
        int8's calibration included. Earlier runs' (their first rounds' wall less their later ones', per
        worker kind and precision: of ``model`` where they ran it, else in its fp32 latencies), else none
        where they measured the kind's rounds but not a first one apart, or where the build cache the
        rounds will use holds the cell's own build (this model, batch and precision:
        :func:`warm_build_cache`), else the stated figure (seconds, plus the model's fp32 latencies where
        ``model`` is given)."""
        key = _fixed_key(framework)
        learnt = self.history.first_build_s.get(key)
        if learnt:
            same = [x for m, x in learnt if m == model]
            if same or model is None:
                return median(same or [x for _, x in learnt]) * self.speed(True)
            times = [x / lat for m, x in learnt if (lat := self._fp32_latency_s(m, framework)) > 0]
            return median(times) * self._fp32_latency_s(model, framework) if times else 0.0
        warm = self.warm_cache or warm_build_cache
        if self.history.fixed_s.get(key) or warm(framework, model, batch):
            return 0.0
        return (_stated("first_build_s", framework) * self.speed(False)
                + _stated("first_build_latencies", framework) * self._fp32_latency_s(model, framework))

    def round_s(self, model: str, batch: int, framework: str, count: bool = False) -> float:
        lat = self.latency_s(model, batch, framework, count)
        sample = max(lat, self.min_sample_ms / 1000)
        return (self.fixed_s(framework, model) + self.build_s(model, batch, framework) + self.warmup * lat
                + self.repeat * sample + 2 * STATED["canary_s"])

    def cell_s(self, cell, count: bool = False) -> float:
        """One round of ``cell`` (a sweep's ``Cell``)."""
        return self.round_s(cell.model, cell.batch_size, series(cell.framework, getattr(cell, "precision", None)),
                            count)

    def optimize_s(self, model: str, batch: int, provider: str, schedules: int = 1, precision: str = "fp32") -> float:
        """One search worker of (model, batch, provider, precision) searching ``schedules`` schedules:
        its start (calibrated as that provider's IOS cells), then its search: an earlier run's worker of
        that key (the sum of its schedules' ``optimize_seconds``), else the stated model: per operator by
        provider and precision and per DP state once (its schedules share one cost model: the stages timed
        for the first are not timed again), plus ``optimize_schedule_s`` per schedule."""
        framework = "ios-sequential" + ("" if provider == "torch" else f"[{provider}]")
        start = self.calibrated.get(framework, STATED["fixed_s"]["default"] * self.speed(False))
        got = self.history.optimize_s.get((model, batch, provider, precision or "fp32"))
        if got:
            return start + sum(got.values()) * self.speed(True)
        per_op = _stated("optimize_s_per_op", series(f"ios[{provider}]", precision))
        engine = series(provider, precision)  # the stages' kernels: the provider's own engine at the precision
        more = 0.0 if batch <= 1 or model not in self.macs else STATED["optimize_batch_latencies"] * max(
            0.0, self.latency_s(model, batch, engine, count=False) - self.latency_s(model, 1, engine, count=False))
        return start + more + (STATED["optimize_schedule_s"] * max(1, schedules) + per_op * self.ops.get(model, 0)
                               + STATED["optimize_s_per_state"] * self.states.get(model, 0)) * self.speed(False)

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


def sweep_seconds(model: Model, cells: list, rounds: dict[str, int], todo_refs: set, todo_searches,
                  fresh: set | None = None) -> dict:
    """The estimated duration of measuring ``cells`` (``rounds[cell.key]`` rounds left each; a cell
    in ``fresh``, none of whose rounds ran yet (None: every cell), pays its first round's cold build,
    :meth:`Model.first_build_s`), plus the reference outputs and schedule searches still to make
    (``todo_searches``: {(model, batch, provider[, precision[, device]]): schedules to search}, or a set of
    those keys: one each; without a precision, fp32; the device tells workers apart, it does not cost).
    Returns {"seconds", "cells", "per_cell", "from"}."""
    per_cell = {}
    for c in cells:
        left = rounds[c.key]
        cold = left > 0 and (fresh is None or c.key in fresh)
        cold_s = model.first_build_s(series(c.framework, getattr(c, "precision", None)), c.model, c.batch_size) \
            if cold else 0.0
        per_cell[c.key] = left * model.cell_s(c, count=True) + cold_s
    total = sum(per_cell.values())
    total += sum(model.reference_s(m, b) for m, b in todo_refs)
    searches = todo_searches if isinstance(todo_searches, dict) else dict.fromkeys(todo_searches, 1)
    total += sum(model.optimize_s(*key[:3], n, *key[3:4]) for key, n in searches.items())
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


# ---- replay: what the estimate says of a finished run folder --------------------------------

def replay(folder: Path, learn_from: list[Path] | None = None, graphs: dict | None = None) -> dict:
    """The estimate a run folder's sweep gets from this module now, from its own records only (no
    process started, nothing measured): its plan (``plan.json``), the cells it measured
    (``results.jsonl``, skipped ones left out, as the sweep leaves them out), the schedule searches
    they needed, the workers' starts and the canary its sweep measured (``env.json``'s
    ``estimate``), earlier runs' figures from ``learn_from`` (none: the stated model only). Returns
    {"estimated_s", "measured_s" (the sweep's ``duration_s``), "parts": {"rounds", "first_builds",
    "searches", "references"}, "measured_parts": {"rounds", "searches"}, "recorded_s" (what its sweep
    printed), "graphs" (what it used of the models)}. ``graphs``: {model: (macs, operators, DP states)}, loaded
    from the zoo when not given."""
    from types import SimpleNamespace

    from ios_bench.results import read_records

    folder = Path(folder)
    plan = json.loads((folder / "plan.json").read_bytes())
    env = json.loads((folder / "env.json").read_bytes())
    recs = [r for r in read_records(folder / "results.jsonl", on_problem=lambda m: None)
            if r.get("status") != "skipped"]
    if graphs is None:
        from ios_bench.planning.loading import load_graph

        graphs = {}
        for name in dict.fromkeys(r["model"] for r in recs):
            g = load_graph(name)
            graphs[name] = (g.macs(), g.num_operators(), search_states(g))
    recorded = env.get("estimate") or {}
    hist = learn(list(learn_from or []), env.get("cpu") or {})
    macs = {m: v[0] for m, v in graphs.items()}
    model = Model(hist, {**history_macs(hist, macs), **macs}, {m: v[1] for m, v in graphs.items()},
                  {m: v[2] for m, v in graphs.items() if len(v) > 2},
                  warmup=plan.get("warmup", 3), repeat=plan.get("repeat", 10) * plan.get("number", 1),
                  min_sample_ms=plan.get("min_sample_ms") or 0.0)
    model.calibrated = {k: float(v) for k, v in (recorded.get("workers_start_s") or {}).items()}
    model.probe_ms = recorded.get("canary_ms")
    # the build cache as its sweep found it: a cell whose first round reused a build it did not make (fp32
    # cells only, as before: a reduced-precision record's state is not taken to say its calibration was reused)
    warm = {(series(r["framework"], r.get("precision")), r["model"], int(r["batch_size"])) for r in recs
            if (r.get("precision") or "fp32") == "fp32" for x in (r.get("rounds") or [])[:1]
            if ((x.get("info") or {}).get("build_cache") or {}).get("state") == "warm"}
    model.warm_cache = lambda framework, m, b: (framework, m, b) in warm
    rounds = int(plan["rounds"]) if str(plan.get("rounds")).isdigit() else 1
    cells = [SimpleNamespace(key=r["cell"], model=r["model"], model_spec=r["model"], batch_size=int(r["batch_size"]),
                             framework=r["framework"], precision=r.get("precision") or "fp32",
                             provider=r.get("provider"), device=r.get("device") or "cpu") for r in recs]
    # one search worker per search key (as the sweep counts them), each searching the schedule files its
    # cells were measured with, less those the folder held already (schedule_reused)
    from ios_bench.running.schedules import search_key

    files: dict[tuple, set] = {}
    for c, r in zip(cells, recs):
        if r.get("schedule") and not r.get("schedule_reused"):
            files.setdefault(search_key(c, plan.get("ios_options")), set()).add(r.get("schedule_file") or r["schedule"])
    searches = {key: len(v) for key, v in files.items()}  # its model spec is the record's model name
    refs = {(r["model"], int(r["batch_size"])) for r in recs}
    est = sweep_seconds(model, cells, {c.key: rounds for c in cells}, refs, searches)
    first = sum(model.first_build_s(series(c.framework, c.precision), c.model, c.batch_size) for c in cells)
    search_s = sum(model.optimize_s(m, b, p, n, precision=q) for (m, b, p, q, _), n in searches.items())
    ref_s = sum(model.reference_s(m, b) for m, b in refs)
    # a round measured once for several cells (their schedules identical: ios_bench.running.schedules.
    # same_schedules) is in each of their records: counted once (by its worker's process and start)
    walls, seen = [], set()
    for r in recs:
        for x in r.get("rounds") or []:
            once = (x.get("pid"), x.get("started")) if x.get("pid") else None
            if once is None or once not in seen:
                seen.add(once)
                walls.append(x.get("wall_seconds") or _span(x.get("started"), x.get("finished")) or 0.0)
    measured_search = sum(float(r["optimize_seconds"]) for r in recs
                          if isinstance(r.get("optimize_seconds"), (int, float)) and not r.get("schedule_reused"))
    # per cell: a round and its first build, estimated against measured (the median of its later rounds;
    # its first round less that)
    per_cell = []
    for c, r in zip(cells, recs):
        got = {x.get("round"): x.get("wall_seconds") or _span(x.get("started"), x.get("finished"))
               for x in r.get("rounds") or []}
        later = [w for k, w in got.items() if k != 0 and isinstance(w, (int, float))]
        first_wall = got.get(0) if isinstance(got.get(0), (int, float)) else None
        per_cell.append({"series": series(c.framework, c.precision), "model": c.model, "batch": c.batch_size,
                         "round_s": model.cell_s(c), "measured_round_s": median(later) if later else None,
                         "first_build_s": model.first_build_s(series(c.framework, c.precision), c.model, c.batch_size),
                         "measured_first_build_s": first_wall - median(later) if later and first_wall is not None
                         else None})
    return {"estimated_s": est["seconds"], "measured_s": env.get("duration_s"), "recorded_s": recorded.get("seconds"),
            "graphs": graphs, "cells": per_cell,
            "parts": {"rounds": est["seconds"] - first - search_s - ref_s, "first_builds": first, "searches": search_s,
                      "references": ref_s},
            "measured_parts": {"rounds": sum(walls), "searches": measured_search}}


def replay_lines(folder: Path, graphs: dict | None = None, per_cell: bool = False) -> list[str]:
    """What :func:`replay` says of a run folder, as lines to print: its measured duration, what its
    sweep estimated then, and what the estimate says now from the stated model only, learning from
    the runs beside it that started before it, and as a rerun of it (learning from it too); ``graphs``
    as :func:`replay`'s. ``per_cell``: after each, a line per cell: a round and its first build,
    estimated against measured."""
    folder = Path(folder)
    env = json.loads((folder / "env.json").read_bytes())
    if not isinstance(env.get("duration_s"), (int, float)):
        return [f"{folder.name}: no measured duration (env.json has no duration_s: the sweep did not finish)"]
    started = env.get("captured") or ""
    before = []
    for p in earlier_runs(folder):
        if p.resolve() == folder.resolve():
            continue
        try:
            if (json.loads((p / "env.json").read_bytes()).get("captured") or "") < started:
                before.append(p)
        except (OSError, ValueError):
            continue

    def pct(est: float) -> str:
        return f"{human(est)} ({est / env['duration_s'] - 1:+.0%})"

    def sec(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} s"

    out = [f"{folder.name}: took {human(env['duration_s'])}; its sweep estimated "
           f"{human(env['estimate']['seconds']) if (env.get('estimate') or {}).get('seconds') else '-'}"]
    for what, learn_from in (("the stated model only", []),
                             (f"earlier runs beside it ({', '.join(p.name for p in before) or 'none'})", before),
                             ("a rerun of it (its own records too)", [*before, folder])):
        got = replay(folder, learn_from, graphs)
        graphs = graphs or got["graphs"]
        parts, measured = got["parts"], got["measured_parts"]
        out.append(f"  estimate now from {what}: {pct(got['estimated_s'])}; searches {human(parts['searches'])} "
                   f"(measured {human(measured['searches'])}), rounds {human(parts['rounds'] + parts['first_builds'])} "
                   f"with {human(parts['first_builds'])} of first builds (measured {human(measured['rounds'])})")
        for c in got["cells"] if per_cell else []:
            out.append(f"    {c['series']} {c['model']} b{c['batch']}: a round {sec(c['round_s'])} (measured "
                       f"{sec(c['measured_round_s'])}), its first build {sec(c['first_build_s'])} (measured "
                       f"{sec(c['measured_first_build_s'])})")
    return out
