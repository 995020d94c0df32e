"""How the measured cost model times on the GPU: a stage, the replay constants, a whole schedule.

:class:`CudaTiming` is the GPU side of ``ios_core.cost.measured.MeasuredCostModel``; the CPU's is
``ios_core.cost.timing_cpu.CpuTiming``. Both offer ``stage`` (one stage, built and timed),
``candidate`` (a whole schedule built and warmed as a cell builds it) and ``sample`` (one sample
of it, timed as a cell times it); the candidate step (``ios_core.cost.candidates``) uses the
latter two on either device.

* **A stage** (:meth:`CudaTiming.stage`) is its own CUDA program (the runtime's plan and executor,
  one stream per group; captured and replayed as a CUDA graph unless ``cuda_graph=False``, as the
  runtime will run it), random weights drawn once per graph (``runtime.cuda.RandomWeights``),
  random inputs, timed by :meth:`CudaTiming.time_program`: the model's protocol (one launch per
  sample unless ``number`` says otherwise) between two CUDA events on stream 0. ``cold_l2``: each
  sample one run after a flush of the L2 (``device.flush_l2``), off the clock.
* **Replay constants** (:meth:`CudaTiming.replay_constants`): chains of 1 and 17 trivial stages
  timed by the same :meth:`CudaTiming.time_program`, so they sit in the stage figures' regime.
* **A whole schedule** (:meth:`CudaTiming.sample`): one call, the host clock read after a device
  synchronize, through ``ios_core.measurement.gpu.time_gpu_cell``, the one protocol of a GPU cell.
"""

from __future__ import annotations

import time

import numpy as np

from ios_core.measurement.measure import Measurement, measure


def now_wall_cpu() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


def run_timed(prog, dev, s0, timer) -> float:
    """Milliseconds of one ``prog.run()`` on stream ``s0``: between the stream's two CUDA events
    (``timer``, ``dev.timer(s0)``), or by the host clock around the run and a synchronize where the
    device has no event timer."""
    if timer is None:
        t = time.perf_counter()
        prog.run()
        dev.sync(s0)
        return 1e3 * (time.perf_counter() - t)
    timer.start()
    prog.run()
    return timer.stop()

class Spent:
    """Seconds spent on something, on the wall clock and in this thread's CPU time (which leaves
    out the time a shared machine made the process wait for a core)."""

    __slots__ = ("wall", "cpu")

    def __init__(self):
        self.wall = self.cpu = 0.0

    def add(self, since: tuple[float, float]) -> tuple[float, float]:
        """Add the time since ``since`` (:func:`now_wall_cpu`); returns now."""
        now = now_wall_cpu()
        self.wall += now[0] - since[0]
        self.cpu += now[1] - since[1]
        return now


def reason(e: BaseException) -> str:
    """A failure in one line: its type and the first line of its message."""
    text = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
    return f"{type(e).__name__}" + (f": {text}" if text else "")


class CudaTiming:
    """Times stages and whole schedules on ``dev`` (``runtime.cuda_device.CupyDevice``, or the tests'
    fake device) with ``protocol`` (the one measurement function's warmup, number, repeat,
    min_sample_ms). ``build`` and ``timed`` add up the seconds spent building stage programs and
    inside the measurement function."""

    clock = None  # set at first use: ios_core.measurement.gpu.GPU_CELL_CLOCK

    def __init__(self, dev, protocol: dict, cuda_graph: bool = True, seed: int = 0, device: str = "cuda"):
        from ios_core.runtime.cuda import RandomWeights

        self.dev, self.protocol, self.cuda_graph, self.seed, self.device = dev, protocol, cuda_graph, seed, device
        self.weights = RandomWeights(seed)  # shared by every stage program: drawn once per graph
        self.build, self.timed = Spent(), Spent()
        self._replay: dict | None = None

    @property
    def form(self) -> str:
        """What a figure is the latency of: ``cuda-graph replay`` or ``cuda launches`` (one by one)."""
        return "cuda-graph replay" if self.cuda_graph else "cuda launches"

    # ---- stages ----------------------------------------------------------------------------------
    def time_program(self, prog, **overrides) -> Measurement:
        """The one way a program is timed as a stage: the protocol between two CUDA events on
        stream 0 (every stage figure, and the chains of :meth:`replay_constants`)."""
        dev, s0 = self.dev, prog.stream_objs[0]
        return measure(prog.run, **{**self.protocol, **overrides}, sync=lambda: dev.sync(s0), timer=dev.timer(s0))

    def stage(self, groups, externals, batch_size: int, cold_l2: bool = False) -> Measurement:
        """The stage ``groups`` (reading ``externals``) as its own CUDA program, timed."""
        from ios_core.runtime.cuda import CudaProgram
        from ios_core.runtime.passes import make_plan

        t0 = now_wall_cpu()
        outputs = [n for g in groups for n in g]
        plan = make_plan([groups], externals, outputs, batch_size, arena_kinds=("concat", "value"))
        dev = self.dev
        rng = np.random.default_rng(self.seed)
        # captured (cuda_graph) as the runtime captures a schedule: the graph reads the input buffers written below
        prog = CudaProgram(plan, dev, cuda_graph=self.cuda_graph, random_weights=True, seed=self.seed,
                           weights=self.weights)
        s0 = prog.stream_objs[0]
        for ext in externals:
            dev.write(prog.input_view(ext.name), rng.standard_normal((batch_size, *ext.output_shape),
                                                                     dtype=np.float32), s0)
        t1 = self.build.add(t0)
        if cold_l2:
            return self._cold(prog, s0)
        m = self.time_program(prog)
        self.timed.add(t1)
        m.meta["form"] = self.form
        return m

    def _cold(self, prog, s0) -> Measurement:
        """Each sample one run after a flush of the L2 (not on the clock)."""
        dev = self.dev
        for _ in range(self.protocol["warmup"]):
            prog.run()
        dev.sync(s0)
        timer, samples = dev.timer(s0), []
        for _ in range(max(self.protocol["repeat"], 1)):
            dev.flush_l2(s0)
            dev.sync(s0)
            samples.append(run_timed(prog, dev, s0, timer))
        m = Measurement(samples_ms=samples, number=1, warmup=self.protocol["warmup"])
        m.meta["form"] = self.form + ", cold L2"
        return m

    # ---- replay constants ------------------------------------------------------------------------
    def replay_constants(self) -> dict:
        """Measured once: chains of 1 and 17 trivial stages (a ReLU on 8x4x4 values each), captured
        and replayed as the stages are; ``stage_ms`` is the slope (what one more trivial stage costs
        inside a replay) and ``graph_ms`` the rest of the one-stage chain (the graph's launch and the
        timing around it), which every stage figure carries once and a whole network's replay only
        once. ``{"reason"}`` when it cannot be timed."""
        if self._replay is None:
            try:
                ms = {k: self._chain_ms(k) for k in (1, 17)}
                stage = (ms[17] - ms[1]) / 16
                self._replay = {"graph_ms": round(ms[1] - stage, 6), "stage_ms": round(stage, 6),
                                "chain_ms": {str(k): round(v, 6) for k, v in ms.items()}, "form": self.form}
            except Exception as e:  # a GPU gone: the reason, no correction
                self._replay = {"reason": reason(e)}
        return self._replay

    def _chain_ms(self, k: int) -> float:
        from ios_core.ir.builder import GraphBuilder
        from ios_core.runtime.cuda import CudaProgram
        from ios_core.runtime.passes import make_plan
        from ios_core.runtime.program import graph_stages

        b = GraphBuilder(f"chain{k}", (8, 4, 4))
        x = b.input
        for _ in range(k):
            x = b.relu(x)
        g = b.finish(x)
        plan = make_plan(graph_stages(g), [g.input], [g.exit_node], 1, arena_kinds=("concat", "value"))
        dev = self.dev
        prog = CudaProgram(plan, dev, cuda_graph=self.cuda_graph, random_weights=True, seed=self.seed,
                           weights=self.weights)
        dev.write(prog.input_view(g.input.name), np.ones((1, 8, 4, 4), dtype=np.float32), prog.stream_objs[0])
        # timed as every stage is (the regime of launch latency, not of launches back to back)
        return self.time_program(prog, warmup=max(self.protocol["warmup"], 5),
                                 repeat=max(self.protocol["repeat"], 11)).median

    # ---- whole schedules, as a cell runs and times them ---------------------------------------
    def candidate(self, graph, batch_size: int):
        """``graph`` built as a cell builds it (the CUDA runtime on this device, a CUDA-graph replay
        unless ``cuda_graph=False``), its input prepared once, warmed by two runs."""
        from ios_core.reference import random_input
        from ios_core.runtime.cuda import CudaRuntime

        rt = CudaRuntime(graph, batch_size, device=self.device, backend=self.dev, cuda_graph=self.cuda_graph,
                         precision=getattr(self.dev, "precision", "fp32"))  # the cell's precision, as its stages
        rt.prepare(random_input(rt.graph, batch_size))
        self.sample(rt, warmup=2)
        return rt

    def sample(self, rt, warmup: int = 0) -> float:
        """One call of ``rt`` timed as a GPU cell is: the host clock after a device synchronize."""
        from ios_core.measurement import gpu

        dev = self.dev
        self.clock = gpu.GPU_CELL_CLOCK

        def sync():
            rt.sync()
            dev.sync_device()
        return gpu.time_gpu_cell(rt.execute, sync, now=dev.now_ns, warmup=warmup, number=1, repeat=1).median


__all__ = ["CudaTiming", "Spent", "now_wall_cpu", "reason"]
