"""The fake CUDA device's rules (tests/stream_fakes_rules.py, ``CudaRules``): each fails where CUDA fails,
and what CUDA allows passes. The executor and the measured cost model are written against them."""

from __future__ import annotations

import numpy as np
import pytest

from tests.stream_fakes import TorchQueueDevice
from tests.stream_fakes_queue import FakeTiming
from tests.stream_fakes_rules import (
    CU_EVENT_RECORD_EXTERNAL,
    CUDA_ERROR_CAPTURED_EVENT,
    CUDA_ERROR_INVALID_HANDLE,
    CUDA_ERROR_INVALID_VALUE,
    CUDA_ERROR_NOT_READY,
    CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
    CUDA_SUCCESS,
    CaptureError,
    CudaError,
    OrderError,
)


def _relu(dev, x, out):
    return dev.activation(x, out, "relu")


def _device(timing=None):
    dev = TorchQueueDevice(0, timing=timing)
    return dev, dev.stream(0), dev.stream(1)


def test_the_external_record_flag_only_while_the_stream_is_capturing():
    """CUevent_record_flags: CU_EVENT_RECORD_EXTERNAL "is invalid when used outside of capture"."""
    dev, s0, _ = _device()
    ev = dev.cp.cuda.Event()
    record = dev.driver.cuEventRecordWithFlags
    assert record(ev.ptr, s0.ptr, CU_EVENT_RECORD_EXTERNAL) == CUDA_ERROR_INVALID_VALUE
    assert record(ev.ptr, s0.ptr, 0) == CUDA_SUCCESS
    assert record(ev.ptr, 12345, 0) == CUDA_ERROR_INVALID_HANDLE
    s0.begin_capture()
    assert s0.is_capturing()
    assert record(ev.ptr, s0.ptr, CU_EVENT_RECORD_EXTERNAL) == CUDA_SUCCESS
    s0.end_capture()
    assert not s0.is_capturing()


@pytest.mark.parametrize("what", ["allocate", "sync", "sync_device", "upload", "read", "write", "workspace",
                                  "flush"])
def test_what_a_capture_forbids_fails_and_passes_outside_one(what):
    dev, s0, _ = _device()
    buf = dev.empty_shaped((1, 1, 2, 2))
    dev.sync_device()
    calls = {"allocate": lambda: dev.empty(4), "sync": lambda: dev.sync(s0), "sync_device": dev.sync_device,
             "upload": lambda: dev.upload(np.zeros(2, np.float32)), "read": lambda: dev.read(buf, s0),
             "write": lambda: dev.write(buf, np.zeros((1, 1, 2, 2), np.float32), s0),
             "workspace": lambda: dev.finalize(1), "flush": lambda: dev.flush_l2(s0)}
    call = calls[what]
    with pytest.raises(CaptureError):
        dev.capture(s0, [call])
    assert not dev.capturing  # the capture ended (CupyDevice.capture ends it when a call fails)
    call()
    dev.sync_device()


def test_a_graph_is_launched_only_once_instantiated():
    dev, s0, _ = _device()
    x, y = dev.empty_shaped((1, 1, 2, 2)), dev.empty_shaped((1, 1, 2, 2))
    launch = dev.launcher(s0, 0, _relu(dev, x, y), "relu")
    launch()
    dev.sync_device()
    graph = dev.capture(s0, [launch])
    dev.replay(graph, s0)
    graph.instantiated = False
    with pytest.raises(CudaError, match="not instantiated"):
        dev.replay(graph, s0)


def test_a_kernel_reading_what_another_stream_wrote_needs_an_event_wait_between():
    """The race is named at issue time, whatever order the streams then run in."""
    dev, s0, s1 = _device()
    a, b, c = (dev.empty_shaped((1, 2, 2, 2)) for _ in range(3))
    dev.sync_device()
    write_a = dev.launcher(s0, 0, _relu(dev, b, a), "w")
    read_a = dev.launcher(s1, 1, _relu(dev, a, c), "r")
    write_a()
    with pytest.raises(OrderError, match="reads memory written on stream 0"):
        read_a()
    dev.sync_device()
    # with an event between them: fine
    ev = dev.event()
    write_a()
    s0.record(ev)
    s1.wait_event(ev)
    read_a()
    dev.sync_device()
    # a write racing a read on another stream (the arena reused too early)
    read_a()
    with pytest.raises(OrderError, match="writes memory read on stream 1"):
        write_a()
    dev.sync_device()
    # ordered by a host synchronize of the writing stream
    write_a()
    dev.sync(s0)
    read_a()
    dev.sync_device()


def test_channel_slices_of_one_buffer_written_on_two_streams_do_not_race():
    dev, s0, s1 = _device()
    x = dev.empty_shaped((2, 2, 2, 2))
    cat = dev.empty_shaped((2, 4, 2, 2))
    dev.sync_device()
    dev.launcher(s0, 0, _relu(dev, x, dev.narrow(cat, 0, 2)), "left")()
    dev.launcher(s1, 1, _relu(dev, x, dev.narrow(cat, 2, 4)), "right")()
    with pytest.raises(OrderError):
        dev.launcher(s1, 1, _relu(dev, dev.narrow(cat, 1, 3), x), "straddles")()


def test_kernels_on_uploaded_weights_before_the_uploads_are_synchronized_fail():
    """A legacy-stream upload is not waited for by non-blocking streams: a kernel reading the
    uploaded memory before a device synchronize races it; a kernel on other memory does not (a
    second program built while the first's warm-up is queued is legal CUDA)."""
    dev, s0, _ = _device()
    x, y = dev.empty_shaped((1, 1, 2, 2)), dev.empty_shaped((1, 1, 2, 2))
    w = dev.upload(np.ones(4, np.float32)).view(1, 1, 2, 2)
    dev.launcher(s0, 0, _relu(dev, x, y), "other memory")()
    with pytest.raises(OrderError, match="uploaded"):
        dev.launcher(s0, 0, _relu(dev, w, y), "reads the weights")()
    dev.sync_device()
    dev.launcher(s0, 0, _relu(dev, w, y), "reads the weights")()


def test_elapsed_time_only_between_completed_events_recorded_with_timing():
    dev, s0, _ = _device()
    elapsed = dev.cp.cuda.get_elapsed_time
    a, b = dev.cp.cuda.Event(), dev.cp.cuda.Event()
    with pytest.raises(CudaError) as never:
        elapsed(a, b)
    assert never.value.code == CUDA_ERROR_INVALID_HANDLE
    a.record(s0)
    b.record(s0)
    with pytest.raises(CudaError) as pending:
        elapsed(a, b)
    assert pending.value.code == CUDA_ERROR_NOT_READY
    b.synchronize()
    assert elapsed(a, b) >= 0.0
    untimed = dev.event()  # CupyDevice's ordering events: timing disabled
    s0.record(untimed)
    dev.sync_device()
    with pytest.raises(CudaError) as no_timing:
        elapsed(a, untimed)
    assert no_timing.value.code == CUDA_ERROR_INVALID_HANDLE
    # a plain record inside a capture is no node of the graph: it records no time at a replay
    plain = dev.cp.cuda.Event()
    graph = dev.capture(s0, [lambda: plain.record(s0)])
    dev.replay(graph, s0)
    dev.sync_device()
    with pytest.raises(CudaError) as captured:
        elapsed(a, plain)
    assert captured.value.code == CUDA_ERROR_CAPTURED_EVENT


def test_a_stream_joined_into_a_capture_must_be_joined_back():
    dev, s0, s1 = _device()
    x, y = dev.empty_shaped((1, 1, 2, 2)), dev.empty_shaped((1, 1, 2, 2))
    work = dev.launcher(s1, 1, _relu(dev, x, y), "k")
    work()
    dev.sync_device()
    fork, join = dev.event(), dev.event()

    def forked():
        s0.record(fork)
        s1.wait_event(fork)  # s1 joins the capture
        work()
        assert s1.is_capturing()

    with pytest.raises(CudaError) as unjoined:
        dev.capture(s0, [forked])
    assert unjoined.value.code == CUDA_ERROR_STREAM_CAPTURE_UNJOINED

    def joined():
        forked()
        s1.record(join)
        s0.wait_event(join)

    graph = dev.capture(s0, [joined])
    dev.replay(graph, s0)
    dev.sync_device()


def test_the_simulated_clock_pipelines_back_to_back_graph_launches():
    """FakeTiming: one launch between two events costs the graph's latency and its kernels; ten back
    to back overlap the latency with the previous graph's work (what a GPU does)."""
    dev, s0, _ = _device(FakeTiming(graph_ms=1.0, kernel_ms=0.25))
    x, y = dev.empty_shaped((1, 1, 2, 2)), dev.empty_shaped((1, 1, 2, 2))
    launch = dev.launcher(s0, 0, _relu(dev, x, y), "k")
    launch()
    dev.sync_device()
    graph = dev.capture(s0, [launch, launch])
    timer = dev.timer(s0)
    timer.start()
    dev.replay(graph, s0)
    assert timer.stop() == pytest.approx(1.5)
    timer.start()
    for _ in range(10):
        dev.replay(graph, s0)
    assert timer.stop() == pytest.approx(1.0 + 10 * 0.5)
    t0 = dev.now_ns()
    dev.replay(graph, s0)
    dev.sync_device()  # the host clock, read after a device synchronize
    assert (dev.now_ns() - t0) / 1e6 == pytest.approx(1.5)


def test_a_host_copy_is_cupys_set_same_shape_contiguous_float32():
    """``CupyDevice.write`` is CuPy's ``ndarray.set``: another shape raises (no broadcast, unlike
    torch's ``copy_``), a non-contiguous destination raises; the fake's write does the same."""
    from tests.stream_fakes import TorchQueueDevice

    dev = TorchQueueDevice(0)
    s = dev.stream(0)
    view = dev.empty_shaped((2, 3, 4, 4))
    with pytest.raises(ValueError, match="Shape mismatch"):
        dev.write(view, np.ones((1, 3, 4, 4), np.float32), s)  # would broadcast in torch
    with pytest.raises(RuntimeError, match="non-contiguous"):
        dev.write(dev.narrow(view, 1, 3), np.ones((2, 2, 4, 4), np.float32), s)
    dev.write(view, np.ones((2, 3, 4, 4), np.float32), s)
    assert float(view.sum()) == 96.0
