"""One timing protocol for every GPU cell (issue 22): a schedule, its sequential baseline and
every peer record the same clock, whether the framework exposes a CUDA stream (IOS, TensorRT,
torch) or not (TensorFlow, ONNX Runtime, TVM); every GPU worker disables TF32 for all
libraries. Checked without a GPU: the device-wide synchronize is a counter."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from adapters.base import Compiled
from ios_bench.running import task_cell, worker
from ios_core.measurement import gpu


class EventTimer:
    """What an IOS, TensorRT or torch program offers: CUDA events on its stream."""

    clock = "cuda-events"

    def __init__(self, log):
        self.log = log

    def start(self):
        self.log.append("event-start")

    def stop(self):
        self.log.append("event-stop")
        return 1.0


class Program(Compiled):
    def __init__(self, log, with_timer: bool):
        super().__init__({"precision": "fp32"})
        self.log, self.with_timer = log, with_timer

    def execute(self, prepared):
        self.log.append("call")
        return prepared

    def sync(self):
        self.log.append("sync")

    def timer(self):
        return EventTimer(self.log) if self.with_timer else None


@pytest.fixture
def device_sync(monkeypatch):
    log = []
    monkeypatch.setattr(gpu, "device_synchronizer", lambda: lambda: log.append("device-sync"))
    return log


@pytest.mark.parametrize("with_timer", [True, False])
def test_every_gpu_program_is_timed_the_same_way(device_sync, with_timer):
    log = []
    m = task_cell.time_compiled(Program(log, with_timer), np.zeros(1), "cuda", warmup=1, number=2, repeat=3)
    assert m.meta["clock"] == gpu.GPU_CELL_CLOCK
    assert "event-start" not in log  # the program's own CUDA-event timer is not used on a GPU cell
    assert log.count("call") == 1 + 2 * 3
    assert len(device_sync) >= 2 * 3 and log.count("sync") >= 2 * 3  # after every timed call
    assert len(m.call_ms) == 6  # per-call times, as on the CPU


def test_cpu_cells_keep_their_protocol():
    log = []
    m = task_cell.time_compiled(Program(log, False), np.zeros(1), "cpu", warmup=0, number=1, repeat=2)
    assert m.meta["clock"] == "host"


class Adapter:
    name = "fake"

    def __init__(self, log, with_timer):
        self.log, self.with_timer = log, with_timer

    def build(self, graph, batch, device, threads, **options):
        return Program(self.log, self.with_timer)


@pytest.mark.parametrize("with_timer", [True, False])
def test_a_schedule_and_its_baseline_record_the_same_clock(device_sync, with_timer):
    spec = {"batch_size": 1, "device": "cuda", "threads": 1, "warmup": 1, "number": 1, "repeat": 2}
    log = []
    cell = task_cell.time_compiled(Program(log, with_timer), np.zeros(1), "cuda", warmup=1, number=1, repeat=2)
    result = {"clock": cell.meta["clock"]}
    task_cell._sequential_baseline(spec, result, Adapter(log, with_timer), None, {}, np.zeros(1))
    assert result["sequential_clock"] == result["clock"] == gpu.GPU_CELL_CLOCK


def test_a_baseline_on_another_clock_is_refused(device_sync):
    spec = {"batch_size": 1, "device": "cuda", "threads": 1, "warmup": 0, "number": 1, "repeat": 1}
    with pytest.raises(RuntimeError, match="not comparable"):
        task_cell._sequential_baseline(spec, {"clock": "cuda-events"}, Adapter([], True), None, {}, np.zeros(1))


def test_gpu_workers_disable_tf32_everywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "1")
    out = tmp_path / "probe.json"
    spec = {"task": "probe", "device": "cuda", "names": ["ios"], "result_path": str(out)}
    before = dict(os.environ)
    try:
        worker.main([json.dumps(spec)])
        assert os.environ["NVIDIA_TF32_OVERRIDE"] == "0"
    finally:  # the worker sets its process's environment: give this one back
        os.environ.clear()
        os.environ.update(before)
    assert json.loads(out.read_text())["status"] == "ok"
