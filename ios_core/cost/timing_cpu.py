"""How the measured cost model times on the CPU: a stage, an operator among concurrent copies, a
pool dispatch, a whole schedule.

:class:`CpuTiming` is the CPU side of ``ios_core.cost.measured.MeasuredCostModel``; the GPU's is
``ios_core.cost.timing_cuda.CudaTiming``. Both offer ``stage`` (one stage, built and timed),
``candidate`` (a whole schedule built and warmed as a cell builds it) and ``sample`` (one sample
of it, timed as a cell times it: ``Runtime.measure``, the host clock); the candidate step
(``ios_core.cost.candidates``) uses the latter two on either device.

* **A stage** (:meth:`CpuTiming.stage`): built alone with the runtime's planner and this model's
  provider (random weights and inputs), timed by the one measurement function at a thread budget;
  ``primed``: each run follows a full-width OpenMP region (the state the runtime's previous stage
  leaves) and only the stage is on the clock.
* **Concurrent copies** (:meth:`CpuTiming.concurrent`): one operator, one copy per worker with its
  thread share, dispatched together on the runtime's pool after the primer
  (:meth:`CpuTiming.primed_dispatch`).
"""

from __future__ import annotations

import time

import numpy as np

from ios_core.measurement import stats
from ios_core.measurement.measure import Measurement, measure
from ios_core.runtime import tensors as _tensors
from ios_core.runtime.factory import build_program
from ios_core.runtime.pool import shared_pool

# a whole schedule's warmup stops after 2 runs where they alone lasted this long (CpuTiming.candidate)
WARM_LONG_S = 1.0


def _no_primer() -> None:
    return None


def random_inputs(prog, externals, batch_size: int, seed: int) -> None:
    """Seeded standard-normal inputs for a program's external inputs, in its own tensors."""
    rng = np.random.default_rng(seed)
    for ext in externals:
        x = rng.standard_normal((batch_size, *ext.output_shape), dtype=np.float32)
        prog.env[prog.input_slots[ext.name]] = prog.tensors.from_numpy(x)


class CpuTiming:
    """Times stages and whole schedules on the CPU with ``provider``'s kernels and ``protocol`` (the
    one measurement function's warmup, number, repeat, min_sample_ms); ``threads``: the full budget;
    ``precision``: what every stage and candidate is compiled at."""

    form = "cpu"
    clock = "host"

    def __init__(self, provider: str, tensors, protocol: dict, threads: int, seed: int = 0, device: str = "cpu",
                 precision: str = "fp32"):
        self.provider, self.tensors, self.protocol = provider, tensors, protocol
        self.threads, self.seed, self.device = threads, seed, device
        # stages and candidates built at the cell's precision (a stage's random weights: calibrated on
        # seeded random inputs; a candidate's own weights: on the seeded calibration inputs)
        self._kw = {"provider": provider} if provider != "torch" else {}
        if precision != "fp32":
            self._kw["precision"] = precision
        self._primer = None

    # ---- stages ----------------------------------------------------------------------------------
    def stage(self, groups, externals, batch_size: int, threads: int, primed: bool = False) -> Measurement:
        """Time one stage (built alone with the runtime's planner). ``primed``: every run of the
        stage follows a ``threads``-wide OpenMP region, as a parallel stage follows the
        full-width operators around it in the runtime; then only the stage is timed, in the
        spin/wait state that region leaves (its idle team threads spinning or asleep)."""
        outputs = [n for g in groups for n in g]
        prog = build_program([groups], externals, outputs, batch_size, threads, random_weights=True,
                             seed=self.seed, **self._kw)
        random_inputs(prog, externals, batch_size, self.seed)
        with _tensors.running(prog.tensors, threads):
            if not primed:
                return measure(prog.run, **self.protocol)
            primer = self.primer(threads)
            run = prog.run
            clock = time.perf_counter_ns
            acc = [0]

            def fn():
                primer()
                t = clock()
                run()
                acc[0] += clock() - t

            def read():
                v, acc[0] = acc[0], 0
                return [v / 1e6]

            m = measure(fn, stage_times=read, **self.protocol)
            return Measurement(samples_ms=[row[0] for row in m.stage_ms], number=m.number, warmup=m.warmup)

    def concurrent(self, groups, externals, batch_size: int, shares: tuple[int, ...]) -> tuple[float, float, int]:
        """One operator (``groups == [[leaf]]``) run as it runs in a parallel stage: one copy per
        worker, each with its thread share, concurrently on the runtime's pool, after a full-width
        OpenMP region (the state the preceding stage leaves): (median, std, samples) in ms of the
        dispatch (one pool dispatch included)."""
        outputs = [n for g in groups for n in g]
        progs = []
        for i, t in enumerate(shares):
            prog = build_program([groups], externals, outputs, batch_size, t, random_weights=True,
                                 seed=self.seed + i, **self._kw)
            random_inputs(prog, externals, batch_size, self.seed + i)
            progs.append(prog)
        return self.primed_dispatch([(prog.run, t) for prog, t in zip(progs, shares)], **self.protocol)

    def primed_dispatch(self, tasks, **protocol) -> tuple[float, float, int]:
        """(median, std, samples) in ms of one pool dispatch of ``tasks``, each preceded by a
        full-width OpenMP region (the spin state the runtime's previous stage leaves); only
        the dispatch is on the clock."""
        pool = shared_pool(self.tensors)
        primer = self.primer(self.threads)
        clock = time.perf_counter_ns
        acc = [0]

        def fn():
            primer()
            t = clock()
            pool.run(tasks, self.threads)
            acc[0] += clock() - t

        def read():
            v, acc[0] = acc[0], 0
            return [v / 1e6]

        with _tensors.running(self.tensors, self.threads):
            m = measure(fn, stage_times=read, **protocol)
        per = [row[0] for row in m.stage_ms]
        return stats.median(per), stats.std(per), m.repeat  # the one median and std, as for every stage

    def primer(self, threads: int):
        """A short (~tens of microseconds) element-wise op over ``threads`` OpenMP threads: the
        state torch's kernels leave between stages. Another provider's kernels run on thread pools
        of their own, fixed when a piece is compiled, and leave no such state: nothing to prime
        (and a torch team spinning beside them would only take their cores)."""
        if self.tensors.name != "torch":
            return _no_primer
        if self._primer is None or self._primer[0] != threads:
            import torch

            a = torch.rand(1 << 17)
            b = torch.empty_like(a)
            self._primer = (threads, lambda: torch.mul(a, 1.0001, out=b))
        return self._primer[1]

    # ---- whole schedules, as a cell runs and times them ---------------------------------------
    def candidate(self, graph, batch_size: int):
        """``graph`` built as a cell builds it (this provider, the full thread budget) and warmed: at
        least 0.1 s and 2 runs with the torch provider, 0.25 s and 5 runs with another (a fresh ONNX
        Runtime session ran its first several runs up to 3x slower); bounded by time as a cell's
        warmup is: 2 runs where they alone lasted :data:`WARM_LONG_S` (a call of half a second or
        more: batch 16 and 32), at most 50."""
        from ios_core.runtime import make_runtime

        rt = make_runtime(graph, batch_size, device=self.device, threads=self.threads, **self._kw)
        min_runs, min_s = (2, 0.1) if self.provider == "torch" else (5, 0.25)
        t_warm = time.perf_counter()
        runs = 0
        while runs < min_runs or (time.perf_counter() - t_warm < min_s and runs < 50):
            if runs >= 2 and time.perf_counter() - t_warm >= WARM_LONG_S:
                break
            self.sample(rt)
            runs += 1
        return rt

    def sample(self, rt, warmup: int = 0) -> float:
        """One call of ``rt`` timed as a CPU cell is (``Runtime.measure``: the host clock after its sync)."""
        return rt.measure(warmup=warmup, number=1, repeat=1).median


__all__ = ["WARM_LONG_S", "CpuTiming", "random_inputs"]
