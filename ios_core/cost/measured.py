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
GPU, driver, CUDA, cuDNN and SM clock (``ios_core.gpu.fingerprint``). Not run on a GPU in
this project's development.

Modes
-----
``mode="stage"`` (default) measures every distinct stage the optimizer asks about: exact,
and what the reference implementation does, but the DP asks about many stages (5,479 for
inception_v3, 240,704 for nasnet at r=3, s=8).

``mode="composed"`` measures each distinct *operator* once per thread share and composes a
stage's latency from them: the groups are assigned to workers as the runtime assigns them
(longest first, threads divided), a worker's time is the sum of its operators' latencies at
its thread share, and the stage's time is the slowest worker plus the measured cost of one
concurrent dispatch. The number of measurements grows with the number of distinct operators
(hundreds), not of stages, which is what makes nasnet's IOS-Both optimization feasible on a
CPU; it ignores contention between concurrent groups (memory bandwidth, the GIL between small
kernels), so it is optimistic about parallel stages. ``docs/runtime.md`` shows how much
schedule quality it gives up.
"""

from __future__ import annotations

import time

import torch

from ..ir import Node, leaf_nodes
from ..measure import Measurement, measure
from ..optimizer.stage import Stage
from ..runtime.emit_torch import build_program
from ..runtime.pool import assign_groups, shared_pool, split_threads
from ..threads import resolve_threads
from .cache import ProfileCache, stage_signature


def _stage_groups(stage: Stage) -> list[list[Node]]:
    if stage.kind == "merge":
        from ..optimizer.merge import merge_convs

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


class MeasuredCostModel:
    def __init__(self, threads: int | None = None, device: str = "cpu", warmup: int = 2, number: int = 1,
                 repeat: int = 5, min_sample_ms: float | None = 1.0, cache=True, mode: str = "stage",
                 seed: int = 0, backend=None):
        self._gpu = backend  # the CUDA executor's device (tests pass a fake one)
        if device.startswith("cuda") and backend is None:
            from ..gpu import cuda_missing

            missing = cuda_missing()
            if missing is not None:
                raise RuntimeError(f"the measured cost model cannot time stages on {device}: {missing}")
            from ..runtime.cuda_device import CupyDevice

            self._gpu = CupyDevice(int(device.split(":")[1]) if ":" in device else 0)
        elif device != "cpu" and not device.startswith("cuda"):
            raise ValueError(f"unknown device {device!r}")
        if self._gpu is not None:
            if mode != "stage":
                raise ValueError("on cuda the measured cost model times whole stages (mode='stage')")
            threads = 1  # not a GPU parameter: one database key whatever the thread budget
        if mode not in ("stage", "composed"):
            raise ValueError(f"mode must be 'stage' or 'composed', not {mode!r}")
        self.threads = resolve_threads(threads)
        self.device = device
        self.protocol = dict(warmup=warmup, number=number, repeat=repeat, min_sample_ms=min_sample_ms)
        self.mode = mode
        self.seed = seed
        self.method = f"runtime-median:w{warmup}n{number}r{repeat}m{min_sample_ms or 0}"
        if cache is True:
            self.cache: ProfileCache | None = ProfileCache(device=device)
        elif cache is False or cache is None:
            self.cache = None
        elif isinstance(cache, ProfileCache):
            self.cache = cache
        else:
            self.cache = ProfileCache(cache, device=device)
        self._memo: dict[tuple, float] = {}
        self._op_memo: dict[tuple, tuple[Node, float]] = {}  # composed mode: operator object -> latency
        self.measured = 0  # stages actually timed by this object
        self.measure_seconds = 0.0
        self.calls = 0
        self._dispatch_ms: float | None = None

    # ---- public ----------------------------------------------------------------------------
    def stage_latency(self, stage: Stage, batch_size: int) -> float:
        self.calls += 1
        if self.mode == "composed":
            return self._composed(stage, batch_size)
        return self._latency(stage.kind, stage.groups, batch_size, self.threads, lambda: _stage_groups(stage))

    @property
    def hits(self) -> int:
        return self.cache.hits if self.cache else 0

    @property
    def misses(self) -> int:
        return self.cache.misses if self.cache else self.measured

    def stats(self) -> dict:
        return {"mode": self.mode, "threads": self.threads, "calls": self.calls, "measured": self.measured,
                "measure_seconds": round(self.measure_seconds, 3), "hits": self.hits, "misses": self.misses,
                "cache": str(self.cache.path) if self.cache else None, "method": self.method}

    def __repr__(self) -> str:
        return f"MeasuredCostModel({self.stats()})"

    # ---- internals ---------------------------------------------------------------------------
    def _latency(self, kind: str, groups: list[list[Node]], batch_size: int, threads: int, build) -> float:
        sig, desc = stage_signature(kind, groups)
        key = (batch_size, threads, sig)
        if key in self._memo:
            return self._memo[key]
        value = None
        if self.cache is not None:
            value = self.cache.get(batch_size, threads, self.method, sig)
        if value is None:
            ms, std, samples = self._measure(build(), batch_size, threads)
            value = ms
            if self.cache is not None:
                self.cache.put(batch_size, threads, self.method, sig, ms, std, samples, desc[:4000])
        self._memo[key] = value
        return value

    def measure_stage(self, stage: Stage, batch_size: int) -> Measurement:
        """Time ``stage`` now (no cache) with this model's protocol, threads and provider; every sample."""
        return self._measurement(_stage_groups(stage), batch_size, self.threads)

    def _measure(self, groups: list[list[Node]], batch_size: int, threads: int) -> tuple[float, float, int]:
        m = self._measurement(groups, batch_size, threads)
        return m.median, m.std, m.repeat

    def _measurement(self, groups: list[list[Node]], batch_size: int, threads: int) -> Measurement:
        if self._gpu is not None:
            return self._measurement_cuda(groups, batch_size)
        t0 = time.perf_counter()
        externals = _externals(groups)
        outputs = [n for g in groups for n in g]
        prog = build_program([groups], externals, outputs, batch_size, threads, random_weights=True,
                             seed=self.seed)
        gen = torch.Generator().manual_seed(self.seed)
        for ext in externals:
            prog.env[prog.input_slots[ext.name]] = torch.randn((batch_size, *ext.output_shape), generator=gen)
        caller = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            with torch.inference_mode():
                m = measure(prog.run, **self.protocol)
        finally:
            torch.set_num_threads(caller)
        self.measured += 1
        self.measure_seconds += time.perf_counter() - t0
        return m

    def _measurement_cuda(self, groups: list[list[Node]], batch_size: int) -> Measurement:
        """The stage as its own CUDA program (the runtime's plan and executor, one stream per
        group), timed with CUDA events on stream 0 by the one measurement function."""
        import numpy as np

        from ..runtime.cuda import CudaProgram
        from ..runtime.plan import make_plan

        t0 = time.perf_counter()
        externals = _externals(groups)
        outputs = [n for g in groups for n in g]
        plan = make_plan([groups], externals, outputs, batch_size, arena_kinds=("concat", "value"))
        dev = self._gpu
        prog = CudaProgram(plan, dev, random_weights=True, seed=self.seed)
        rng = np.random.default_rng(self.seed)
        s0 = prog.stream_objs[0]
        for ext in externals:
            dev.write(prog.input_view(ext.name), rng.standard_normal((batch_size, *ext.output_shape),
                                                                     dtype=np.float32), s0)
        m = measure(prog.run, **self.protocol, sync=lambda: dev.sync(s0), timer=dev.timer(s0))
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
        worst = max(sum(self._ops_latency(groups[i], batch_size, t) for i in a) for a, t in zip(assigned, per))
        return worst + self.dispatch_ms()

    def _ops_latency(self, group: list[Node], batch_size: int, threads: int) -> float:
        """Sum of the group's operators, each measured alone (one-operator stages, cached)."""
        total = 0.0
        memo = self._op_memo
        for node in group:
            for leaf in leaf_nodes(node):
                key = (id(leaf), batch_size, threads)
                hit = memo.get(key)
                if hit is not None and hit[0] is leaf:
                    total += hit[1]
                    continue
                if leaf.TYPE == "identity" and len(leaf.inputs) == 1 and len(leaf.inputs[0]) == 1:
                    ms = 0.0  # a pass-through: no work
                else:
                    ms = self._latency("parallel", [[leaf]], batch_size, threads, lambda leaf=leaf: [[leaf]])
                memo[key] = (leaf, ms)  # the node is kept, so its id is not reused
                total += ms
        return total

    def dispatch_ms(self) -> float:
        """The cost of one concurrent dispatch on the worker pool (trivial tasks), measured once."""
        if self._dispatch_ms is None:
            sig = f"pool-dispatch:{min(self.threads, 8)}"
            cached = self.cache.get(1, self.threads, self.method, sig) if self.cache is not None else None
            if cached is None:
                pool = shared_pool()
                n = min(self.threads, 8)
                per = split_threads(self.threads, n)
                tasks = [((lambda: None), t) for t in per]
                m = measure(lambda: pool.run(tasks, self.threads), warmup=20, number=50, repeat=5)
                cached = m.median
                if self.cache is not None:
                    self.cache.put(1, self.threads, self.method, sig, cached, m.std, m.repeat, sig)
            self._dispatch_ms = cached
        return self._dispatch_ms


def make_measured_cost_model(**options) -> MeasuredCostModel:
    """Factory used by ``ios_core.cost.make_cost_model("measured", **options)``; options are
    :class:`MeasuredCostModel`'s (threads, warmup, number, repeat, min_sample_ms, cache = True |
    False | path | ProfileCache, mode = "stage" | "composed", seed)."""
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
