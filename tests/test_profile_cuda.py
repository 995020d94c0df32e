"""Profiles on cuda (issue 57), without a GPU: each framework's rows read from traces in that
framework's own format (torch's FunctionEvents, TensorFlow's and JAX's XSpace) in which a GPU
kernel's time and its launch's host time differ, so a profile that reads the host's events on
cuda gets other figures than one that reads the kernels; and the clock the profiled calls are
timed with is the unprofiled cell's."""

from __future__ import annotations

import pytest

from adapters.base import OpTime, ProfilerMissing

# ---- torch: device_time_total of the kernels an event launched, not its CPU time ------------------


def _torch_call(start, children):
    """One timed call: the range ``ios-bench:call`` over ``children`` ((name, cpu_us, kernel_us or None)),
    each an op event (on cuda: its kernel appended, as the profiler does)."""
    from torch.autograd.profiler_util import FunctionEvent

    from adapters.pytorch import CALL

    call = FunctionEvent(id=start, name=CALL, thread=0, start_us=start, end_us=start + 1000, use_device="cuda")
    t = start
    for i, (name, cpu_us, kernel_us) in enumerate(children):
        e = FunctionEvent(id=start + i + 1, name=name, thread=0, start_us=t, end_us=t + cpu_us, use_device="cuda")
        if kernel_us is not None:
            e.append_kernel(f"kernel_{name}", 0, kernel_us)
        call.append_cpu_child(e)
        t += cpu_us
    return [call, *call.cpu_children]


def test_torch_rows_on_cuda_are_the_kernels_time_and_on_the_cpu_the_host_time():
    pytest.importorskip("torch")
    from adapters.pytorch import torch_rows

    # the host launches each op in 20-30 us; its kernels run 400 and 100 us on the GPU
    events = _torch_call(0, [("ios:a", 30, 400), ("ios:b", 20, 100)]) + \
        _torch_call(5000, [("ios:a", 30, 600), ("ios:b", 20, 100)])
    on_gpu = {r.name: r for r in torch_rows(events, device_time=True)}
    assert on_gpu["ios:a"].ms == pytest.approx(0.5) and on_gpu["ios:b"].ms == pytest.approx(0.1)
    assert on_gpu["ios:a"].sources == ("a",)
    # the kernel was launched by the op itself: all of its device time is its own
    assert on_gpu["ios:a"].self_ms == pytest.approx(0.5)
    on_host = {r.name: r.ms for r in torch_rows(events)}
    assert on_host == {"ios:a": pytest.approx(0.03), "ios:b": pytest.approx(0.02)}


def test_torch_rows_on_cuda_without_a_kernel_are_refused_not_shown_as_host_time():
    pytest.importorskip("torch")
    from adapters.pytorch import torch_rows

    events = _torch_call(0, [("ios:a", 30, None), ("ios:b", 20, None)])
    with pytest.raises(ProfilerMissing, match="no GPU kernel"):
        torch_rows(events, device_time=True)
    assert {r.name for r in torch_rows(events)} == {"ios:a", "ios:b"}  # on the CPU they are the figures


# ---- TensorFlow: the GPU plane's kernels by their op annotation, not the host's op events ----------


def _xspace(kernel_stat: str = "kernel_annotation", annotate: bool = True, late_ns: int = 0) -> bytes:
    """A TensorFlow trace of two calls of two ops: on the host plane each call's range and its ops'
    events (launches: 10 us each), on ``/device:GPU:0`` one stream's kernels (conv 300 + 100 us in
    two kernels, relu 50 us), named by the annotation stack of the op that launched them.

    ``late_ns``: the ops' events on a second host line (thread) and the kernels' line start that
    much after the calls' line (each line's events are offsets from its own start, in ps); the GPU
    plane comes first, the ops' thread runs each call's function around its ops and an event that is
    no op (no ``name:type``), and a kernel without an annotation (a copy) runs first in each call."""
    pytest.importorskip("tensorflow")
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from adapters.tensorflow import CALL

    space = xplane_pb2.XSpace()
    host = space.planes.add(id=1, name="/host:CPU")
    for i, name in enumerate((CALL, "ios_op0/Conv2D:Conv2D", "ios_op1/Relu:Relu", "__inference_forward_28",
                              "MemoryAllocation"), 1):
        host.event_metadata[i].id, host.event_metadata[i].name = i, name
    line = host.lines.add(id=1, name="tf_Compute", timestamp_ns=1000)
    op_line = host.lines.add(id=2, name="tf_Compute", timestamp_ns=1000 + late_ns) if late_ns else line
    gpu = space.planes.add(id=2, name="/device:GPU:0")
    gpu.stat_metadata[1].id, gpu.stat_metadata[1].name = 1, kernel_stat
    # by reference, the whole stack: the call's own range outermost, the op innermost
    gpu.stat_metadata[2].id, gpu.stat_metadata[2].name = 2, f"{CALL}::ios_op1/Relu:Relu#id=7,step=0#"
    for i, name in enumerate(("implicit_convolve_sgemm", "relu_kernel"), 1):
        gpu.event_metadata[i].id, gpu.event_metadata[i].name = i, name
    stream = gpu.lines.add(id=7, name="Stream #7", timestamp_ns=1000 + late_ns)
    us = 1_000_000  # ps
    for start in (0, 2000):
        line.events.add(metadata_id=1, offset_ps=start * us + late_ns * 1000, duration_ps=1000 * us)
        if late_ns:
            op_line.events.add(metadata_id=4, offset_ps=(start + 1) * us, duration_ps=900 * us)
            op_line.events.add(metadata_id=5, offset_ps=(start + 2) * us, duration_ps=1 * us)
            stream.events.add(metadata_id=1, offset_ps=(start + 40) * us, duration_ps=5 * us)
        op_line.events.add(metadata_id=2, offset_ps=(start + 5) * us, duration_ps=10 * us)
        op_line.events.add(metadata_id=3, offset_ps=(start + 20) * us, duration_ps=10 * us)
        for offset, dur, kernel, text in ((50, 300, 1, "ios_op0/Conv2D:Conv2D"), (360, 100, 1,
                                          "ios_op0/Conv2D:Conv2D"), (470, 50, 2, None)):
            e = stream.events.add(metadata_id=kernel, offset_ps=(start + offset) * us, duration_ps=dur * us)
            if annotate:
                e.stats.add(metadata_id=1, **({"str_value": text} if text else {"ref_value": 2}))
    if late_ns:
        planes = list(space.planes)
        del space.planes[:]
        space.planes.extend(reversed(planes))
    return space.SerializeToString()


@pytest.mark.parametrize("stat", ["kernel_annotation", "tf_op"])
def test_tensorflow_rows_on_cuda_are_the_kernels_of_each_op_and_on_the_cpu_the_host_events(stat):
    from adapters.tensorflow import xplane_rows

    scopes = {"ios_op0": "conv", "ios_op1": "relu"}
    rows = xplane_rows(_xspace(stat), scopes, kernels=True)
    assert rows == [OpTime("ios_op0/Conv2D", pytest.approx(0.4), ("conv",), "Conv2D"),
                    OpTime("ios_op1/Relu", pytest.approx(0.05), ("relu",), "Relu")]
    host = {r.name: r.ms for r in xplane_rows(_xspace(stat), scopes)}
    assert host == {"ios_op0/Conv2D": pytest.approx(0.01), "ios_op1/Relu": pytest.approx(0.01)}


def test_tensorflow_events_of_lines_that_start_apart_are_placed_by_each_lines_start():
    """Each line's events are offsets (ps) from the line's own start (ns): the ops' thread and the GPU
    stream starting a second after the calls' thread, their events fall in the calls all the same, and
    the times are the events' own (ps to ms, exactly)."""
    from adapters.tensorflow import xplane_rows

    scopes = {"ios_op0": "conv", "ios_op1": "relu"}
    rows = xplane_rows(_xspace(late_ns=10**9), scopes, kernels=True)
    assert [(r.name, r.ms) for r in rows] == [("ios_op0/Conv2D", pytest.approx(0.4, rel=1e-12)),
                                              ("ios_op1/Relu", pytest.approx(0.05, rel=1e-12))]
    host = {r.name: r.ms for r in xplane_rows(_xspace(late_ns=10**9), scopes)}
    assert host == {"ios_op0/Conv2D": pytest.approx(0.01, rel=1e-12), "ios_op1/Relu": pytest.approx(0.01, rel=1e-12)}


def test_tensorflow_xla_function_is_one_unmapped_row_of_its_own_time():
    pytest.importorskip("tensorflow")
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from adapters.tensorflow import CALL, xplane_rows

    space = xplane_pb2.XSpace()
    host = space.planes.add(id=1, name="/host:CPU")
    for i, name in enumerate((CALL, "__inference_forward_28"), 1):
        host.event_metadata[i].id, host.event_metadata[i].name = i, name
    line = host.lines.add(id=1, name="tf_Compute", timestamp_ns=1000)
    us = 1_000_000  # ps
    for start, dur in ((0, 300), (2000, 500)):
        line.events.add(metadata_id=1, offset_ps=start * us, duration_ps=1000 * us)
        line.events.add(metadata_id=2, offset_ps=(start + 5) * us, duration_ps=dur * us)
    assert xplane_rows(space.SerializeToString(), {}) == [
        OpTime("__inference_forward_28", pytest.approx(0.4, rel=1e-12), (), "compiled function")]


def test_tensorflow_kernels_without_an_op_annotation_are_refused_on_cuda():
    from adapters.tensorflow import xplane_rows

    with pytest.raises(ProfilerMissing, match="no GPU kernel carrying"):
        xplane_rows(_xspace(annotate=False), {}, kernels=True)
    with pytest.raises(ProfilerMissing, match="no GPU kernel carrying"):  # a stat of another name
        xplane_rows(_xspace("correlation_id"), {}, kernels=True)


# ---- JAX: an instruction's launch (host plane) and its kernel (GPU plane) counted once -------------


def _jax_data(planes):
    def ev(name, start, dur, **stats):
        return type("E", (), {"name": name, "start_ns": start, "duration_ns": dur, "stats": list(stats.items())})()

    return type("D", (), {"planes": [type("P", (), {"name": name, "lines": [type("L", (), {"events": [
        ev(*e[:3], **e[3]) for e in events]})()]})() for name, events in planes]})()


def test_jax_rows_on_cuda_count_the_kernel_not_its_launch_too(monkeypatch):
    pytest.importorskip("jax")
    import jax

    from adapters.jax import CALL, trace_rows

    host = [(CALL, 0, 1_000_000, {}), ("launch", 10_000, 50_000, {"hlo_op": "convolution"})]
    kernels = [("sm80_conv", 100_000, 400_000, {"hlo_op": "convolution"})]  # after its launch: no overlap
    monkeypatch.setattr(jax.profiler.ProfileData, "from_file", staticmethod(
        lambda path: _jax_data([("/host:CPU", host), ("/device:GPU:0", kernels)])))
    assert trace_rows("x", {"convolution": {"ios_op0"}}, {"ios_op0": "1"}, gpu=True) == \
        [OpTime("convolution", pytest.approx(0.4), ("1",), "hlo")]
    # read as on the CPU (every plane), the launch's 50 us are added to the kernel's 400
    assert trace_rows("x", {}, {})[0].ms == pytest.approx(0.45)
    monkeypatch.setattr(jax.profiler.ProfileData, "from_file", staticmethod(
        lambda path: _jax_data([("/host:CPU", host)])))
    with pytest.raises(ProfilerMissing, match="no GPU kernel"):
        trace_rows("x", {}, {}, gpu=True)


# ---- one clock for the profiled and the unprofiled calls -----------------------------------------


class _Timer:
    clock = "cuda events"

    def __init__(self):
        self.used = 0

    def start(self):
        self.used += 1

    def stop(self):
        return 1.0


def test_time_calls_on_cuda_is_the_gpu_cells_clock_whatever_timer_the_program_has(monkeypatch):
    from ios_core.measurement import gpu

    log = []
    monkeypatch.setattr(gpu, "device_synchronizer", lambda: lambda: log.append("device"))
    timer = _Timer()
    m = gpu.time_calls(lambda: log.append("call"), lambda: log.append("sync"), "cuda:0", timer,
                       warmup=0, number=1, repeat=3)
    assert m.meta["clock"] == gpu.GPU_CELL_CLOCK and timer.used == 0
    calls = [i for i, what in enumerate(log) if what == "call"]
    assert len(calls) == 3  # each followed by the program's sync, then the whole device's, before the clock
    assert all(log[i + 1:i + 3] == ["sync", "device"] for i in calls), log
    m = gpu.time_calls(lambda: None, lambda: None, "cpu", timer, warmup=0, number=1, repeat=3)
    assert m.meta["clock"] != gpu.GPU_CELL_CLOCK and timer.used == 3  # the CPU: the program's own timer
