"""The measured cost model: the latency of a stage is what the runtime takes to run it.

``make_measured_cost_model(**options)`` returns a :class:`MeasuredCostModel`, whose
``stage_latency(stage, batch_size)`` builds just that stage with the runtime's planner
(random weights, random inputs of the right shapes), times it with the one measurement
function and returns the median in milliseconds. Results are cached in memory and, unless
``cache=False``, in the persistent profile database (``ios_core.cost.cache``), keyed by the
device fingerprint, batch size, thread budget, method and the stage's canonical signature,
so re-optimizing, another batch size or another model with the same operators reuse them.

On ``device="cuda"`` each stage is planned and run as its own CUDA program (the CUDA
executor, one stream per group) and timed with CUDA events; the database key then names the
GPU, driver, CUDA, cuDNN and SM clock (``ios_core.measurement.gpu.fingerprint``). Not run on a GPU in
this project's development.

Modes
-----
``mode="calibrated"`` (default; what ``ios-bench run`` uses) composes a stage from its
operators, each measured as it will run: a single-group stage is the sum of its operators at
the full thread budget (back to back, as in the runtime); in a concurrent stage the groups are
assigned to workers as the runtime assigns them (longest first, threads divided), and each
operator is measured *running concurrently with copies of itself on the other workers*, each
with its thread share, on the runtime's persistent pool, right after a full-width OpenMP region
(the spin/wait state the surrounding stages leave), less one pool dispatch; the stage's time
is the slowest worker plus one dispatch (measured in the same state). So contention between
concurrent groups (memory bandwidth, the GIL, spinning OpenMP teams) is in the figures, and
the number of measurements grows with the distinct operators (x thread shares), not with the
stages: hundreds for the paper's networks.

``mode="composed"`` is the same composition with every operator measured alone (no
contention): optimistic about concurrent stages.

``mode="hybrid"``: composed for single-group stages; a concurrent stage is measured for real
(in the primed state above) unless its composed estimate is not below the sum of its operators
at the full budget (then it is dominated and not measured). Accurate, but on inception_v3 it
still measures about a thousand stages.

``mode="stage"`` measures every distinct stage the optimizer asks about, alone: what the
reference implementation does, but the DP asks about many stages (5,479 for inception_v3,
240,704 for nasnet at r=3, s=8), and a stage measured alone does not see the state the
preceding stage leaves.

Whatever the mode, ``ios_core.optimize`` ends a search by timing candidates end to end with the
real runtime (:meth:`MeasuredCostModel.time_candidates`, interleaved) and keeps the fastest
(``optimize_stats.validation``): the DP's schedule, the sequential and greedy ones, the DP without
merges and the DP under a fitted per-stage cost (``candidates``; each strategy only those of its own
space), on the CPU racing (a candidate clearly slower after 3 rounds is timed no more). On
cuda the cuDNN plan chosen per convolution geometry is kept in the profile database
(``ios_core.cost.cache.CudnnPlanCache``), stages are timed with no minimum sample duration (CUDA
events time each replay), and :meth:`MeasuredCostModel.replay_constants` measures the per-graph
cost every stage figure carries (docs/runtime.md, "On the GPU").

Where each part lives: how a stage and a whole schedule are timed on each device,
``ios_core.cost.timing_cpu.CpuTiming`` and ``ios_core.cost.timing_cuda.CudaTiming`` (one small
protocol: ``stage``, ``candidate``, ``sample``; a candidate is timed as the cell that runs it is);
the candidate step, ``ios_core.cost.candidates``; here, the modes, the caches, the disturbance
rule and the GPU's canary groups and bookkeeping.
"""

from __future__ import annotations

import time

from ios_core.cost import candidates as _candidates
from ios_core.cost.cache import ProfileCache, library_version, stage_signature
from ios_core.cost.candidates import CANDIDATES, RACE_DROP, RACE_ROUNDS  # noqa: F401  (their home before the split)
from ios_core.cost.timing_cpu import CpuTiming
from ios_core.cost.timing_cuda import CudaTiming, Spent, now_wall_cpu
from ios_core.ir import Node, leaf_nodes
from ios_core.measurement.interference import CanaryReference, Window, WindowSet
from ios_core.measurement.measure import Measurement, measure
from ios_core.measurement.threads import resolve_threads
from ios_core.optimizer.stage import Stage
from ios_core.runtime import providers as _providers
from ios_core.runtime import tensors as _tensors
from ios_core.runtime.pool import assign_groups, shared_pool, split_threads

DISTURBED_RETRIES = 2  # a stage measured on a disturbed machine is measured again at most this often
# what a stage that cannot be built or timed on the GPU costs: finite (the search's comparisons need
# it), far above any schedule, so the search goes without that stage wherever it can
UNRUNNABLE_MS = 1e9


def _stage_groups(stage: Stage) -> list[list[Node]]:
    if stage.kind == "merge":
        from ios_core.optimizer.merge import merge_convs

        convs = [g[0] for g in stage.groups]
        return [[merge_convs(convs, "merged_" + "_".join(c.name for c in convs))]]
    return [list(g) for g in stage.groups]


def _externals(groups: list[list[Node]]) -> list[Node]:
    inside = {id(n) for g in groups for n in g}
    for g in groups:
        for n in g:
            for leaf in leaf_nodes(n):
                inside.add(id(leaf))
    out: dict[int, Node] = {}
    for g in groups:
        for n in g:
            for p in n.predecessors():
                if id(p) not in inside:
                    out.setdefault(id(p), p)
    return list(out.values())


MODES = ("stage", "composed", "calibrated", "hybrid")
PROVIDERS = tuple(_providers.names())  # the registry's kernel providers


def _planner_providers() -> tuple[str, ...]:
    """Kernel providers the runtime has in this build (the registry, ``ios_core.runtime.providers``)."""
    return tuple(_providers.names())


ON = ("true", "on", "yes", "1")
OFF = ("false", "off", "no", "0", "none")


def _switch(value) -> bool | None:
    """A cache option as ``--cost-option`` spells it: True for on (``True``, "true", "on", "yes", "1"),
    False for off (``False``, ``None``, "false", "off", "no", "0", "none"; any case), None for anything else
    (a path to a database of its own)."""
    if value is True or value is False:
        return value
    if value is None:
        return False
    text = str(value).strip().lower()
    return True if text in ON else False if text in OFF else None


class MeasuredCostModel:
    """See the module docstring. ``provider`` is the runtime's kernel provider the schedule will
    run on: stages are measured with it, and it is part of the profile database key."""

    def __init__(self, threads: int | None = None, device: str = "cpu", warmup: int = 2, number: int = 1,
                 repeat: int = 5, min_sample_ms: float | None | str = "auto", cache=True, mode: str | None = None,
                 seed: int = 0, provider: str = "torch", margin: float = 0.05, backend=None,
                 cuda_graph: bool | None = None, canary_every: int = 64, nvml=None, plan_cache=True,
                 candidates: str | tuple | None = None, precision: str = "fp32"):
        self._gpu = backend  # the CUDA executor's device (tests pass a fake one)
        # the precision stages are timed at: the device's (cuda: fp32, fp16, bf16); part of the
        # database key, so an fp32 figure never stands for an fp16 one
        self.precision = str(precision or "fp32")
        if self.precision != "fp32" and not device.startswith("cuda"):  # the CPU: what the provider offers
            reason = _providers.get(provider).precision_reason(self.precision) if provider in PROVIDERS else None
            if reason is not None:
                raise ValueError(f"the measured cost model cannot time stages at {self.precision}: {reason}")
        if backend is not None and getattr(backend, "precision", "fp32") != self.precision:
            raise ValueError(f"the device computes in {getattr(backend, 'precision', 'fp32')}, the cost model was "
                             f"asked for {self.precision}")
        if device.startswith("cuda") and backend is None:
            from ios_core.measurement.gpu import cuda_missing

            missing = cuda_missing()
            if missing is not None:
                raise RuntimeError(f"the measured cost model cannot time stages on {device}: {missing}")
            from ios_core.runtime.cuda_device import CupyDevice

            self._gpu = CupyDevice(int(device.split(":")[1]) if ":" in device else 0, plan_cache=None,
                                   precision=self.precision)
        elif device != "cpu" and not device.startswith("cuda"):
            raise ValueError(f"unknown device {device!r}")
        if mode is None:  # the default: calibrated on the CPU, whole stages on a GPU
            mode = "stage" if self._gpu is not None else "calibrated"
        if self._gpu is not None:
            if mode != "stage":
                raise ValueError("on cuda the measured cost model times whole stages (mode='stage')")
            threads = 1  # not a GPU parameter: one database key whatever the thread budget
        elif cuda_graph not in (None, False, "false", "False", "0"):
            raise ValueError("cuda_graph applies to the measured cost model on cuda only")
        # on cuda a stage is timed in the form the runtime will run it: a captured CUDA graph
        # replayed (the default, as IOS cells on cuda run), or its launches on the streams
        self.cuda_graph = self._gpu is not None and cuda_graph not in (False, "false", "False", "0")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if provider not in _planner_providers():
            raise ValueError(f"provider {provider!r} is not available to the runtime in this build; "
                             f"choose one of {', '.join(_planner_providers())}")
        if isinstance(min_sample_ms, str) and min_sample_ms == "auto":
            # sized for the clock: on cuda events time each replay to the microsecond (a 1 ms minimum
            # sample repeated a 20 us stage 50 times: 41.6 s of an 80.8 s inception_v3 search on an H200);
            # on the CPU a sample lasts at least 1 ms (the timer and the OS's noise)
            min_sample_ms = None if self._gpu is not None else 1.0
        self.threads = resolve_threads(int(threads) if threads is not None else None)
        self.device = device
        self.provider = provider
        self.protocol = dict(warmup=int(warmup), number=int(number), repeat=int(repeat),
                             min_sample_ms=float(min_sample_ms) if min_sample_ms else None)
        self.mode = mode
        self.margin = float(margin)
        self.seed = int(seed)
        self.method = f"runtime-median:w{warmup}n{number}r{repeat}m{min_sample_ms or 0}"
        if provider != "torch":  # torch's version is in the device fingerprint already
            self.method += f":{provider}-{library_version(_providers.distribution(provider))}"
        if self.cuda_graph:  # a graph replay is another measurement than the same launches one by one
            self.method += ":cuda-graph"
        if self.precision != "fp32":  # a stage at fp16 is another measurement (an fp32 key stays as it was)
            self.method += f":{self.precision}"
        # the tensors and thread control of the programs it times (torch's only for the torch
        # provider: a cost model for ONNX Runtime or OpenVINO kernels imports no torch)
        self._tensors = _tensors.for_provider(provider)
        if provider != "torch" and mode == "calibrated":  # no torch OpenMP primer (see timing_cpu.CpuTiming.primer)
            self.method += ":unprimed"
        if _switch(cache) is True:
            self.cache: ProfileCache | None = ProfileCache(device=device)
        elif _switch(cache) is False:
            self.cache = None
        elif isinstance(cache, ProfileCache):
            self.cache = cache
        else:
            self.cache = ProfileCache(cache, device=device)
        # cuda: the cuDNN plan chosen per convolution geometry, kept in this database (its plan cache,
        # ``ios_core.cost.cache.CudnnPlanCache``) unless ``plan_cache`` is False or names another
        if self._gpu is not None and hasattr(self._gpu, "attach_plan_cache"):
            if _switch(plan_cache) is True or plan_cache == "default":
                if self.cache is not None:
                    self._gpu.attach_plan_cache(self.cache.path)
            elif _switch(plan_cache) is None:  # a path
                self._gpu.attach_plan_cache(plan_cache)
        self.candidates = _candidates.candidate_names(candidates)
        self.correction: dict | None = None  # what the end-to-end candidates showed (note_candidates)
        self.candidates_timed = 0  # distinct schedules timed end to end (note_candidates)
        self.candidates_considered = 0  # candidate rows, those identical to another included
        self._memo: dict[tuple, float] = {}
        self._op_memo: dict[tuple, tuple[Node, float]] = {}  # composed mode: operator object -> latency
        self.measured = 0  # stages actually timed by this object
        self.measure_seconds = 0.0
        self.calls = 0
        self.pruned = 0  # hybrid: multi-group stages answered by composition (dominated), not measured
        self._dispatch_ms: float | None = None
        self._canary = CanaryReference()  # the usual canary of this process's stage measurements
        self.disturbed = 0  # stage measurements taken again because the machine was disturbed
        # on cuda: the bookkeeping around each stage costs microseconds (see _latency_gpu)
        self._windows = WindowSet(gpu=0, nvml=nvml, canary_every=canary_every) if self._gpu is not None else None
        # how a stage and a whole schedule are timed on this device (timing_cuda, timing_cpu)
        if self._gpu is not None:
            self._timing = CudaTiming(self._gpu, self.protocol, self.cuda_graph, self.seed, device)
        else:
            self._timing = CpuTiming(provider, self._tensors, self.protocol, self.threads, self.seed, device,
                                     precision=self.precision)
        self.failures: dict[str, str] = {}  # stage signature -> why it could not be timed (cuda)
        self.revised = 0  # stage values measured again after a condemned canary group
        self._revised_seen = 0
        # seconds on the wall clock and in this thread's CPU time (cuda): building stage programs (plans,
        # kernels, weights, inputs, graph capture); inside the one measurement function (warmup and
        # samples); everything else a timed stage cost (windows, canaries, NVML, signatures, database)
        self._overhead = Spent()
        self._build, self._timed = (self._timing.build, self._timing.timed) if self._gpu is not None else (Spent(),
                                                                                                           Spent())
        self._plans = None
        self._stored: dict[tuple, dict] = {}  # cuda: (batch, threads) -> the database's rows, read once
        self._rows: dict[tuple, tuple] = {}  # cuda: measured rows waiting for their canary group's verdict

    # ---- public ----------------------------------------------------------------------------
    @property
    def composes_groups(self) -> bool:
        """Whether a one-group stage costs the sum of its operators' figures (the composed, calibrated and
        hybrid modes on the CPU; ``ios_core.optimizer.optimize.schedule`` breaks a chain graph's ties by it)."""
        return self._gpu is None and self.mode in ("composed", "calibrated", "hybrid")

    def stage_latency(self, stage: Stage, batch_size: int) -> float:
        self.calls += 1
        if self.mode in ("composed", "calibrated"):
            return self._composed(stage, batch_size)
        if self.mode == "hybrid":
            return self._hybrid(stage, batch_size)
        return self._latency(stage.kind, stage.groups, batch_size, self.threads, lambda: _stage_groups(stage))

    @property
    def hits(self) -> int:
        return self.cache.hits if self.cache else 0

    @property
    def misses(self) -> int:
        return self.cache.misses if self.cache else self.measured

    @property
    def form(self) -> str:
        """What a stage's figure is the latency of: ``cuda-graph replay`` (each stage captured and
        replayed as a CUDA graph), ``cuda launches`` (its kernels launched on the streams one by
        one), or ``cpu``."""
        return self._timing.form

    def stats(self) -> dict:
        out = {"mode": self.mode, "provider": self.provider, "precision": self.precision, "threads": self.threads,
               "calls": self.calls,
               "measured": self.measured, "pruned": self.pruned, "form": self.form,
               "measure_seconds": round(self.measure_seconds, 3), "hits": self.hits, "misses": self.misses,
               "cache": str(self.cache.path) if self.cache else None, "method": self.method,
               "disturbed_remeasured": self.disturbed,
               "disturbed_rows_skipped": self.cache.disturbed_skipped if self.cache else 0,
               "candidates": list(self.candidates), "candidates_timed": self.candidates_timed,
               "candidates_considered": self.candidates_considered,
               "correction": self.correction}
        if self._gpu is not None:
            from ios_core.measurement.gpu import nvml_sessions_opened

            timed = max(self.measured, 1)
            out.update({"build_seconds": round(self._build.wall, 4), "timed_seconds": round(self._timed.wall, 4),
                        "overhead_seconds": round(self._overhead.wall, 4),
                        "overhead_cpu_seconds": round(self._overhead.cpu, 4),
                        "overhead_ms_per_stage": round(1e3 * self._overhead.wall / timed, 4),
                        "overhead_cpu_ms_per_stage": round(1e3 * self._overhead.cpu / timed, 4),
                        "weight_draws": self._timing.weights.draws, "nvml_sessions": nvml_sessions_opened(),
                        "revised_after_canary": self.revised, "failed_stages": len(self.failures),
                        **(self._gpu.plans.stats() if hasattr(self._gpu, "plans") else {}),
                        **({"failures": dict(list(self.failures.items())[:5])} if self.failures else {}),
                        **{f"window_{k}": v for k, v in self._windows.stats().items()}})
        return out

    def __repr__(self) -> str:
        return f"MeasuredCostModel({self.stats()})"

    def plan_store(self):
        """Where ``ios_core.optimize`` keeps the schedules it found with this cost model (the
        profile database), and the key part naming the costs; None without a database. On cuda
        the block schedules a search finds are written when :meth:`refine` finds none of the
        stage costs it used revised (else dropped: the search runs again)."""
        if self.cache is None:
            return None
        ident = (f"{self.method}|{self.mode}|t{self.threads}|{self.provider}|m{self.margin}|"
                 f"{self.protocol}")
        if self._gpu is not None:
            if self._plans is None:
                self._plans = _DeferredPlans(self.cache)
            return self._plans, ident
        return self.cache, ident

    def end_search(self) -> None:
        """Called by ``ios_core.optimize`` when a search ends (whatever its strategy): on cuda the
        open canary group is closed and what was measured is written to the database."""
        if self._gpu is not None:
            self._close_group()
            if self._plans is not None:  # block schedules found with costs revised since: not stored
                (self._plans.commit if self.revised == self._revised_seen else self._plans.drop)()
            self._revised_seen = self.revised

    def refine(self, stages, batch_size: int) -> int:
        """Called by ``ios_core.optimize`` after each search: on cuda the open canary group is
        closed (its stages measured again if the canary condemns it), and the number of stage
        costs revised since the last search began is returned, so that the search runs again with
        the revised costs (all in memory: no stage is timed twice). 0 on the CPU."""
        if self._gpu is None:
            return 0
        self._close_group()
        revised, self._revised_seen = self.revised - self._revised_seen, self.revised
        if self._plans is not None:
            if revised:
                self._plans.drop()
            else:
                self._plans.commit()
        return revised

    def validate_schedule(self, schedule, sequential, batch_size: int, repeat: int = 7) -> dict | None:
        """Time ``schedule`` and the ``sequential`` schedule of the same graph with the real
        runtime (:meth:`time_candidates`); returns ``{"schedule_ms", "sequential_ms", "kept"}``
        where ``kept`` is ``"schedule"`` only when it measured faster (None when neither ran)."""
        v = self.time_candidates({"schedule": schedule, "sequential": sequential}, batch_size, repeat=repeat)
        med = v["measured_ms"]
        if "schedule" not in med or "sequential" not in med:
            return None
        kept = "schedule" if med["schedule"] < med["sequential"] else "sequential"
        return {"schedule_ms": med["schedule"], "sequential_ms": med["sequential"], "kept": kept,
                "provider": self.provider, "samples": v["samples"], "seconds": v["seconds"]}

    def time_candidates(self, graphs: dict, batch_size: int, repeat: int | None = None,
                        runtimes: dict | None = None) -> dict:
        """Time whole schedules (``graphs``: name -> scheduled graph) end to end, interleaved
        (``ios_core.cost.candidates.time_candidates``), each built and timed as the cell that will run
        it (this model's device timing: on cuda this device, a CUDA-graph replay unless
        ``cuda_graph=False``, one call per sample on the host clock after a device synchronize,
        ``ios_core.measurement.gpu.time_gpu_cell``; on the CPU this model's provider and threads,
        ``Runtime.measure``). ``repeat`` rounds (11 on cuda, 7 on the CPU; fewer, at least
        :data:`~ios_core.cost.candidates.RACE_ROUNDS`, once they have spent
        :data:`~ios_core.cost.candidates.RACE_S` seconds), on the CPU racing:
        after :data:`RACE_ROUNDS` rounds a candidate whose median is above the best's by more than
        :data:`RACE_DROP` is timed no more. ``runtimes`` (name -> (graph, runtime)) keeps each built
        and warm runtime for a later call with the same graph object. Returns ``{"measured_ms",
        "failed", "samples", "samples_by", "seconds", "number", "clock", "form", "provider"}``."""
        gpu = self._gpu is not None
        repeat = int(repeat if repeat is not None else (11 if gpu else 7))
        v = _candidates.time_candidates(self._timing, graphs, batch_size, repeat, runtimes, race=not gpu,
                                        seed=self.seed, budget_s=_candidates.RACE_S)
        return {**v, "form": self.form, "provider": self.provider}

    def note_candidates(self, validation: dict) -> None:
        """What the end-to-end candidates showed (``ios_core.optimize``), stated in :meth:`stats`
        (``correction``: ``ios_core.cost.candidates.correction``; on cuda each candidate also gets
        ``corrected_ms``, with :meth:`replay_constants`). ``candidates_timed`` counts the distinct
        schedules timed (a row ``same_as`` another ran nothing), ``candidates_considered`` every row."""
        self.correction = _candidates.correction(validation, self.replay_constants())
        self.candidates_timed += self.correction["candidates_timed"]
        self.candidates_considered += self.correction["candidates_considered"]

    def replay_constants(self) -> dict | None:
        """On cuda, measured once per cost model: the per-graph cost every stage figure carries once
        and a whole network's replay only once (``graph_ms``), and what one more trivial stage costs
        inside a replay (``stage_ms``): ``ios_core.cost.timing_cuda.CudaTiming.replay_constants``.
        None on the CPU; ``{"reason"}`` when it cannot be timed."""
        return self._timing.replay_constants() if self._gpu is not None else None

    # ---- internals ---------------------------------------------------------------------------
    def _latency(self, kind: str, groups: list[list[Node]], batch_size: int, threads: int, build,
                 primed: bool = False, shares: tuple[int, ...] | None = None) -> float:
        sig, desc = stage_signature(kind, groups)
        if primed:  # a different measurement of the same stage: its own key
            sig = "primed:" + sig
        if shares:
            sig = f"concurrent{'x'.join(map(str, shares))}:" + sig
        key = (batch_size, threads, sig)
        if key in self._memo:
            return self._memo[key]
        if self._gpu is not None:
            return self._latency_gpu(key, sig, desc, build)
        value = None
        if self.cache is not None:
            value = self.cache.get(batch_size, threads, self.method, sig)
        if value is None:
            taken = 0
            for _attempt in range(1 + DISTURBED_RETRIES):  # a disturbed measurement is taken again (bounded)
                taken += 1
                with Window(canary_reps=3, gpu=0 if self.device == "cuda" else None) as window:
                    if shares:
                        ms, std, samples = self._measure_concurrent(build(), batch_size, shares)
                    else:
                        ms, std, samples = self._measure(build(), batch_size, threads, primed)
                disturbed = self._canary.judge(window.figures)
                if disturbed is None:
                    break
                self.disturbed += 1
            # the stage counts once, however often taken (what building it measured, e.g. the pool's
            # dispatch cost on the first attempt, counts as it happened)
            self.measured -= taken - 1
            value = ms
            if self.cache is not None:  # a row still disturbed is kept, marked: no later search reuses it
                self.cache.put(batch_size, threads, self.method, sig, ms, std, samples, desc[:4000],
                               disturbed=disturbed, interference=window.figures)
        self._memo[key] = value
        return value

    # ---- cuda: stages by the thousand ----------------------------------------------------------
    def _latency_gpu(self, key: tuple, sig: str, desc: str, build) -> float:
        """A stage's latency on the GPU. The disturbance rule is kept at a cost of microseconds per
        stage: one window per stage (other processes on the GPU through one NVML session, the
        process tree read once: :class:`~ios_core.measurement.interference.WindowSet`), a canary every
        ``canary_every`` stages whose condemned groups are measured again, weights drawn once per
        graph. A stage that cannot be built or timed (a GPU gone, a kernel cuDNN has no engine
        for) costs :data:`UNRUNNABLE_MS`, with the reason in ``failures``: the search goes on
        without it where it can."""
        mark = self._mark()
        batch_size = key[0]
        value = None
        if self.cache is not None:  # the database's rows for this batch size, read once (ProfileCache.snapshot)
            stored = self._stored.get(key[:2])
            if stored is None:
                stored = self._stored[key[:2]] = self.cache.snapshot(batch_size, key[1], self.method)
            value = stored.get(sig)
            self.cache.count_lookup(value, sig in stored)
        if value is None:
            value = self._take_gpu(key, sig, desc, build)
            self._book_overhead(mark)
            if sig not in self.failures:
                self._windows.add((key, sig, desc, build))
                if self._windows.full:
                    self._close_group()
            return self._memo[key]
        self._memo[key] = value
        return value

    def _take_gpu(self, key: tuple, sig: str, desc: str, build) -> float:
        """Time one stage (retried while its own window says disturbed); store it in memory and in
        the database."""
        batch_size = key[0]
        figures: dict = {}
        disturbed = None
        for _attempt in range(1 + DISTURBED_RETRIES):
            with self._windows.window() as window:
                try:
                    t0 = now_wall_cpu()
                    groups = build()  # the stage's groups (a merge stage's merged convolution): building
                    self._build.add(t0)
                    ms, std, samples = self._measure(groups, batch_size, key[1])
                except Exception as e:  # a stage that fails to build or run: its reason, not a traceback
                    why = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
                    self.failures[sig] = why
                    self._memo[key] = UNRUNNABLE_MS
                    return UNRUNNABLE_MS
            figures = window.figures
            disturbed = self._windows.judge(figures)
            if disturbed is None:
                break
            self.disturbed += 1
        self.failures.pop(sig, None)
        self._memo[key] = ms
        # written to the database when its canary group closes (one commit per group, and a
        # condemned group's rows only once re-measured); a row still disturbed is kept, marked
        self._rows[key] = (batch_size, key[1], self.method, sig, ms, std, samples, desc[:4000], disturbed, figures)
        return ms

    def flush(self) -> None:
        """Write the stage costs measured since the last write to the profile database (on cuda
        they are written once per canary group, after its verdict; :meth:`refine` flushes too)."""
        rows, self._rows = list(self._rows.values()), {}
        if self.cache is not None and rows:
            self.cache.put_many(rows)

    def _close_group(self) -> None:
        """Close the open canary group; a condemned group's stages are measured again (at most
        ``DISTURBED_RETRIES`` times); the values they replace were maybe used by the search already
        (``revised``; :meth:`refine` makes it search again)."""
        mark = self._mark()
        why, items, figures = self._windows.close_group()
        tries = 0
        while why is not None and items:
            tries += 1
            self.disturbed += len(items)
            last = tries >= DISTURBED_RETRIES
            for key, sig, desc, build in items:
                self.measured -= 1  # the stage counts once, however often taken
                self._take_gpu(key, sig, desc, build)
                self._windows.add((key, sig, desc, build))
            self.revised += len(items)
            why, items, figures = self._windows.close_group()
            if why is not None and last:
                for key, _sig, _desc, _build in items:  # still condemned: kept, marked, never reused
                    if key in self._rows:
                        row = self._rows[key]
                        self._rows[key] = (*row[:8], row[8] or why, {**row[9], **figures})
                break
        self.flush()
        self._book_overhead(mark)

    def _mark(self) -> tuple:
        """Now, and what building and timing had cost so far (for :meth:`_book_overhead`)."""
        return now_wall_cpu(), self._build.wall + self._timed.wall, self._build.cpu + self._timed.cpu

    def _book_overhead(self, mark: tuple) -> None:
        """Book what passed since ``mark`` as overhead, less the building and timing inside it."""
        (wall0, cpu0), wall_in, cpu_in = mark
        wall, cpu = now_wall_cpu()
        self._overhead.wall += wall - wall0 - (self._build.wall + self._timed.wall - wall_in)
        self._overhead.cpu += cpu - cpu0 - (self._build.cpu + self._timed.cpu - cpu_in)

    def measure_stage(self, stage: Stage, batch_size: int, cold_l2: bool = False) -> Measurement:
        """Time ``stage`` now (no cache) with this model's protocol, threads and provider; every sample.
        ``cold_l2`` (cuda): before each sample a buffer larger than the GPU's L2 is written
        (``device.flush_l2``), outside the timed region: the stage reads its inputs and weights
        from device memory."""
        if cold_l2:
            if self._gpu is None:
                raise ValueError("cold_l2 applies to the measured cost model on cuda")
            return self._measurement_cuda(_stage_groups(stage), batch_size, cold_l2=True)
        return self._measurement(_stage_groups(stage), batch_size, self.threads)

    def _measure(self, groups: list[list[Node]], batch_size: int, threads: int,
                 primed: bool = False) -> tuple[float, float, int]:
        m = self._measurement(groups, batch_size, threads, primed)
        return m.median, m.std, m.repeat

    def _measurement(self, groups: list[list[Node]], batch_size: int, threads: int,
                     primed: bool = False) -> Measurement:
        """Time one stage (built alone with the runtime's planner). ``primed``: every run of the
        stage follows a ``threads``-wide OpenMP region, as a parallel stage follows the
        full-width operators around it in the runtime; then only the stage is timed, in the
        spin/wait state that region leaves (its idle team threads spinning or asleep)."""
        if self._gpu is not None:
            return self._measurement_cuda(groups, batch_size)
        t0 = time.perf_counter()
        m = self._timing.stage(groups, _externals(groups), batch_size, threads, primed)
        self.measured += 1
        self.measure_seconds += time.perf_counter() - t0
        return m

    def _hybrid(self, stage: Stage, batch_size: int) -> float:
        """Operators composed; a concurrent stage measured for real, in the runtime's state,
        unless composition shows it cannot beat running its operators one after another.

        Composition is optimistic about concurrent groups (it sees no contention), so when
        the composed estimate of a stage is not below ``(1 + margin)`` times the sum of its
        operators at the full thread budget (a decomposition the DP always has), the stage
        is dominated: its composed estimate is returned and nothing is measured. Otherwise
        the stage is measured (``primed``: after a full-width OpenMP region, as in the
        runtime) and the measurement is the answer."""
        groups = _stage_groups(stage)
        if len(groups) == 1 or self.threads == 1:
            return self._composed(stage, batch_size)
        optimistic = self._composed(stage, batch_size)
        serial = sum(self._ops_latency(g, batch_size, self.threads) for g in groups)
        if optimistic >= serial * (1.0 + self.margin):
            self.pruned += 1
            return optimistic
        return self._latency("parallel", groups, batch_size, self.threads, lambda: groups, primed=True)

    def _measurement_cuda(self, groups: list[list[Node]], batch_size: int, cold_l2: bool = False) -> Measurement:
        """The stage as its own CUDA program, timed (``timing_cuda.CudaTiming.stage``)."""
        t0 = time.perf_counter()
        m = self._timing.stage(groups, _externals(groups), batch_size, cold_l2=cold_l2)
        if not cold_l2:
            self.measured += 1
            self.measure_seconds += time.perf_counter() - t0
        return m

    def _composed(self, stage: Stage, batch_size: int) -> float:
        groups = _stage_groups(stage)
        if len(groups) == 1:
            return self._ops_latency(groups[0], batch_size, self.threads)
        nworkers = min(len(groups), self.threads)
        if nworkers <= 1:
            return sum(self._ops_latency(g, batch_size, self.threads) for g in groups)
        costs = [sum(max(leaf.macs(), 1) for n in g for leaf in leaf_nodes(n)) for g in groups]
        assigned = assign_groups(costs, nworkers)
        per = split_threads(self.threads, nworkers)
        shares = tuple(per) if self.mode == "calibrated" else None
        worst = max(sum(self._ops_latency(groups[i], batch_size, t, shares) for i in a)
                    for a, t in zip(assigned, per))
        return worst + self.dispatch_ms()

    def _ops_latency(self, group: list[Node], batch_size: int, threads: int,
                     shares: tuple[int, ...] | None = None) -> float:
        """Sum of the group's operators, each measured alone (one-operator stages, cached).
        ``shares`` (calibrated mode): the operator is measured running concurrently with copies
        of itself, one per worker of the stage with that worker's thread share, as it will run."""
        total = 0.0
        memo = self._op_memo
        for node in group:
            for leaf in leaf_nodes(node):
                key = (id(leaf), batch_size, threads, shares)
                hit = memo.get(key)
                if hit is not None and hit[0] is leaf:
                    total += hit[1]
                    continue
                if leaf.TYPE == "identity" and len(leaf.inputs) == 1 and len(leaf.inputs[0]) == 1:
                    ms = 0.0  # a pass-through: no work
                elif shares:
                    ms = self._latency("parallel", [[leaf]], batch_size, threads, lambda leaf=leaf: [[leaf]],
                                       shares=shares)
                else:
                    ms = self._latency("parallel", [[leaf]], batch_size, threads, lambda leaf=leaf: [[leaf]])
                memo[key] = (leaf, ms)  # the node is kept, so its id is not reused
                total += ms
        return total

    def _measure_concurrent(self, groups: list[list[Node]], batch_size: int,
                            shares: tuple[int, ...]) -> tuple[float, float, int]:
        """One operator (``groups == [[leaf]]``) run as it runs in a parallel stage: one copy per
        worker, each with its thread share, concurrently on the runtime's pool, after a
        full-width OpenMP region (the state the preceding stage leaves). Returns the stage's
        time less one pool dispatch (which the composition adds once per stage)."""
        t0 = time.perf_counter()
        med, std, repeat = self._timing.concurrent(groups, _externals(groups), batch_size, shares)
        self.measured += 1
        self.measure_seconds += time.perf_counter() - t0
        return max(med - self.dispatch_ms(), 0.1 * med), std, repeat

    def dispatch_ms(self) -> float:
        """The cost of one concurrent dispatch on the worker pool (trivial tasks), measured once
        (in calibrated mode after a full-width OpenMP region, as in the runtime)."""
        if self._dispatch_ms is None:
            primed = self.mode == "calibrated"
            sig = f"pool-dispatch{'-primed' if primed else ''}:{min(self.threads, 8)}"
            cached = self.cache.get(1, self.threads, self.method, sig) if self.cache is not None else None
            if cached is None:
                pool = shared_pool(self._tensors)
                n = min(self.threads, 8)
                per = split_threads(self.threads, n)
                tasks = [((lambda: None), t) for t in per]
                if primed:
                    cached, std, repeat = self._timing.primed_dispatch(tasks, warmup=20, number=50, repeat=5)
                else:
                    m = measure(lambda: pool.run(tasks, self.threads), warmup=20, number=50, repeat=5)
                    cached, std, repeat = m.median, m.std, m.repeat
                self.measured += 1
                if self.cache is not None:
                    self.cache.put(1, self.threads, self.method, sig, cached, std, repeat, sig)
            self._dispatch_ms = cached
        return self._dispatch_ms


class _DeferredPlans:
    """The profile database's block schedules as ``ios_core.optimize`` sees them on cuda: read from
    the database, written only when :meth:`MeasuredCostModel.refine` commits them (a search whose
    stage costs were revised by a condemned canary group leaves nothing behind)."""

    def __init__(self, cache: ProfileCache):
        self.cache = cache
        self.pending: dict[str, list] = {}

    def get_plan(self, key: str):
        return self.cache.get_plan(key)

    def put_plan(self, key: str, plan: list) -> None:
        self.pending[key] = plan

    def commit(self) -> None:
        for key, plan in self.pending.items():
            self.cache.put_plan(key, plan)
        self.pending.clear()

    def drop(self) -> None:
        self.pending.clear()


def concurrency_pairs(cache: ProfileCache, batch_size: int,
                      threads: int) -> dict[str, list[tuple[int, float, float]]]:
    """What concurrency buys, from the calibrated measurements in a profile database: per
    measurement method (one per provider and library version), ``(n, alone_ms, concurrent_ms)``
    for every operator that was measured both alone at the full thread budget
    and concurrently with copies of itself (one per worker, each with its thread share; the
    time less one pool dispatch). With ``n`` workers, ``n * alone_ms / concurrent_ms`` is the
    speedup of running ``n`` such operators concurrently over running them one after another
    at the full budget (below 1: concurrency loses)."""
    rows = {(t, m, sig): ms for t, m, sig, ms in cache.rows(batch_size)}
    out: dict[str, list[tuple[int, float, float]]] = {}
    for (_share, method, sig), ms in rows.items():
        if not sig.startswith("concurrent"):
            continue
        prefix, base = sig.split(":", 1)
        shares = [int(x) for x in prefix[len("concurrent"):].split("x")]
        if sum(shares) != threads:
            continue
        # stored under the operator's own share; alone: the full budget (``_ops_latency``)
        alone = rows.get((threads, method, base))
        if alone is not None:
            out.setdefault(method, []).append((len(shares), alone, ms))
    return out


def make_measured_cost_model(**options) -> MeasuredCostModel:
    """Factory used by ``ios_core.cost.make_cost_model("measured", **options)``; options are
    :class:`MeasuredCostModel`'s (threads, warmup, number, repeat, min_sample_ms, cache = True |
    False | path | ProfileCache, mode = "calibrated" (default) | "composed" | "hybrid" | "stage", provider, margin,
    seed)."""
    return MeasuredCostModel(**options)


def estimate_operator_count(stages: list[Stage]) -> int:
    """Distinct operators among ``stages`` (what ``mode="composed"`` measures, per thread share)."""
    sigs = set()
    for st in stages:
        for g in st.groups:
            for n in g:
                for leaf in leaf_nodes(n):
                    sigs.add(stage_signature("parallel", [[leaf]])[0])
    return len(sigs)


__all__ = ["MeasuredCostModel", "estimate_operator_count", "make_measured_cost_model"]
