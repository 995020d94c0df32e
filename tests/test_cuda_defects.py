"""Issue 45, item 1 (and one figure of item 3): defects found by reading the GPU path against
CUDA's documentation, each shown on the strict fake device (tests/stream_fakes.py) or on what each
path times (its protocol, its buffers)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from ios_core.ir.builder import GraphBuilder
from tests.stream_fakes import TorchQueueDevice
from tests.stream_fakes_queue import FakeTiming

G_MS, K_MS = 0.5, 0.02  # the fake's graph launch latency and kernel time


def _chain(k: int, name="chain"):
    b = GraphBuilder(f"{name}{k}", (4, 3, 3))
    x = b.input
    for _ in range(k):
        x = b.relu(x)
    return b.finish(x).init_weights(0)


def _program(graph, dev, **kw):
    from ios_core.runtime.cuda import CudaProgram
    from ios_core.runtime.passes import make_plan
    from ios_core.runtime.program import graph_stages

    plan = make_plan(graph_stages(graph), [graph.input], [graph.exit_node], 1, arena_kinds=("concat", "value"))
    prog = CudaProgram(plan, dev, **kw)
    dev.write(prog.input_view(graph.input.name), np.ones((1, *graph.input_shape), np.float32), prog.stream_objs[0])
    return prog


@pytest.mark.parametrize("cuda_graph", [True, False])
def test_task_marks_run_outside_a_capture_and_inside_one(cuda_graph):
    """CudaProgram runs every call once before capturing (and every call, without a graph): the
    marks then record events outside a capture, where CU_EVENT_RECORD_EXTERNAL is invalid
    (gpu_fidelity printed no table). On the simulated clock each task's span is its kernel."""
    from tests.runtime_helpers import mixed_graph

    dev = TorchQueueDevice(0, timing=FakeTiming(graph_ms=G_MS, kernel_ms=K_MS))
    prog = _program(_chain(3), dev, cuda_graph=cuda_graph, task_marks=True)
    prog.run()
    dev.sync(prog.stream_objs[0])
    times = prog.task_times()
    assert len(times) == 3
    assert [round(e - b, 9) for b, e in times] == [K_MS] * 3
    assert [round(b, 9) for b, _ in times] == [0.0, K_MS, 2 * K_MS]  # one after another on one stream
    wide = _program(mixed_graph().init_weights(0), TorchQueueDevice(0), cuda_graph=cuda_graph, task_marks=True)
    wide.run()
    wide.dev.sync(wide.stream_objs[0])
    assert len(wide.task_times()) == len(wide.streams.tasks) > 3


def test_task_marks_of_a_program_with_no_tasks_read_as_none():
    from ios_core.runtime.cuda_device import CudaTaskMarks

    dev = TorchQueueDevice(0)
    marks = CudaTaskMarks(dev.cp, 0, [dev.stream(0)], driver=dev.driver)
    assert marks.read() == []


class _NumpyCupy:
    """What CupyDevice.flush_l2 calls of CuPy, on numpy, counting allocations."""

    float32 = np.float32

    def __init__(self):
        self.allocations = 0
        self.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(
            getDeviceProperties=lambda i: {"l2CacheSize": 1 << 20}))

    def _count(self, fn):
        def alloc(*a, **kw):
            self.allocations += 1
            return fn(*a, **kw)
        return alloc

    def __getattr__(self, name):
        if name in ("empty", "zeros", "ones", "full"):
            return self._count(getattr(np, name))
        raise AttributeError(name)


class _Stream:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_cold_l2_flush_reads_and_writes_only_a_preallocated_scalar():
    """L2 is write-back: a flush that writes leaves dirty lines the next stage pays to write back. The
    flush reads a buffer twice the L2 (a sum into a scalar allocated once) and writes nothing else."""
    from ios_core.runtime.cuda_device import CupyDevice

    cp = _NumpyCupy()
    dev = types.SimpleNamespace(cp=cp, device=types.SimpleNamespace(id=0))
    CupyDevice.flush_l2(dev, _Stream())
    buf = dev._flush
    assert buf.size * 4 >= 2 << 20  # twice the L2
    before, allocated = buf.copy(), cp.allocations
    for _ in range(3):
        CupyDevice.flush_l2(dev, _Stream())
    assert np.array_equal(buf, before)  # read, never written
    assert cp.allocations == allocated  # nothing allocated after the first flush
    scalars = [v for v in vars(dev).values() if isinstance(v, np.ndarray) and v.size == 1]
    assert len(scalars) == 1 and float(scalars[0]) == pytest.approx(float(buf.sum(dtype=np.float64)), rel=1e-3)
    # the fake device's flush mirrors it: one kernel reading the buffer into its scalar
    fake = TorchQueueDevice(0)
    s = fake.stream(0)
    fake.flush_l2(s)
    fake.sync(s)
    kept = fake._flush.clone()
    fake.flush_l2(s)
    fake.sync(s)
    assert bool((fake._flush == kept).all()) and float(fake._flush_sum) == float(kept.sum())


def _cost_model(**kw):
    from ios_core.cost.measured import MeasuredCostModel

    return MeasuredCostModel(device="cuda", backend=TorchQueueDevice(1, timing=FakeTiming(G_MS, K_MS)),
                             cache=False, warmup=1, number=1, repeat=2, min_sample_ms=None, nvml=_NoNVML(), **kw)


class _NoNVML:
    def nvmlInit(self):
        raise RuntimeError("no NVML here")


def test_replay_constants_are_timed_as_stages_are():
    """A stage's figure is one launch between two events; chains timed with launches back to back
    overlap the graph's latency with the previous replay's work, and graph_ms came out near zero."""
    rep = _cost_model().replay_constants()
    assert rep["graph_ms"] == pytest.approx(G_MS) and rep["stage_ms"] == pytest.approx(K_MS)
    assert rep["chain_ms"]["1"] == pytest.approx(G_MS + K_MS)


def test_candidates_are_timed_as_a_gpu_cell_is(monkeypatch):
    """One call at a time, the host clock after a device synchronize (GPU_CELL_CLOCK), through the one
    protocol function a cell's worker uses too."""
    from ios_core.measurement import gpu
    from ios_core.optimizer import optimize

    used = []
    real = gpu.time_gpu_cell

    def spy(*a, **kw):
        m = real(*a, **kw)
        used.append(m.meta["clock"])
        return m

    monkeypatch.setattr(gpu, "time_gpu_cell", spy)
    cm = _cost_model()
    graphs = {"one": _chain(1, "a"), "five": _chain(5, "b")}
    for g in graphs.values():
        optimize(g, "sequential", cm, batch_size=1, validate=False)
    v = cm.time_candidates(graphs, 1, repeat=3)
    # each whole schedule replayed once per sample: the graph's latency once, its kernels
    assert v["measured_ms"]["one"] == pytest.approx(G_MS + K_MS)
    assert v["measured_ms"]["five"] == pytest.approx(G_MS + 5 * K_MS)
    assert used and set(used) == {gpu.GPU_CELL_CLOCK} and v["clock"] == gpu.GPU_CELL_CLOCK
    # a cell's worker times through the same function
    from ios_bench.running import task_cell

    compiled = types.SimpleNamespace(execute=lambda p: None, sync=lambda: None)
    used.clear()
    monkeypatch.setattr(gpu, "device_synchronizer", lambda: None)
    task_cell.time_compiled(compiled, None, "cuda", warmup=0, number=1, repeat=2)
    assert used == [gpu.GPU_CELL_CLOCK]


def test_a_primed_dispatch_reports_the_one_median_and_std(monkeypatch):
    """Issue 45 item 3: one definition per figure. The CPU's concurrent-copy figures were a
    statistics.pstdev (divided by n) beside every other stage's stats.std (n - 1)."""
    from ios_core.cost import timing_cpu
    from ios_core.measurement import stats
    from ios_core.measurement.measure import Measurement
    from ios_core.runtime import tensors

    rows = [[1.0], [2.0], [4.0]]
    monkeypatch.setattr(timing_cpu, "measure", lambda fn, stage_times=None, **kw: Measurement(
        samples_ms=[r[0] for r in rows], number=1, warmup=0, stage_ms=rows))
    timing = timing_cpu.CpuTiming("torch", tensors.for_provider("torch"), {}, threads=1)
    med, std, n = timing.primed_dispatch([(lambda: None, 1)])
    assert (med, std, n) == (2.0, stats.std([1.0, 2.0, 4.0]), 3) and std == pytest.approx(1.5275, abs=1e-4)
