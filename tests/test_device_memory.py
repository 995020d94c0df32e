"""A GPU cell's peak device memory (ios_bench.machine.device_memory), without a GPU: the allocator's view
from the adapter, torch or CuPy, NVML's view of this process on a fake NVML, the record field,
the worker's cell task writing it, and an out-of-memory error named as such."""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from ios_bench.machine import device_memory as dm
from ios_bench.records.record import BY_NAME, columns, flatten, round_fields

MIB = 2**20


class NVML:
    """nvidia-ml-py's memory readings: device 0 with this process (or another) on it."""

    def __init__(self, pids=None, used=300 * MIB, fail=None):
        self.pids = [os.getpid()] if pids is None else pids
        self.used, self.fail, self.calls = used, fail, []

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"h{i}"

    def nvmlDeviceGetMemoryInfo(self, h):
        if self.fail:
            raise RuntimeError(self.fail)
        return SimpleNamespace(used=2048 * MIB, total=81559 * MIB, free=79511 * MIB)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=p, usedGpuMemory=self.used) for p in self.pids]


class WithOwnView:
    def device_memory(self):
        return {"allocator": "jax (XLA BFC)", "peak_bytes": 123 * MIB, "bytes_limit": 60000 * MIB}


def test_the_adapters_own_view_comes_first(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", NVML())
    got = dm.gpu_memory(WithOwnView(), "cuda")
    assert got["allocator"] == "jax (XLA BFC)" and got["allocator_peak_mib"] == 123.0
    assert got["allocator_limit_mib"] == 60000.0
    assert got["nvml_process_mib"] == 300.0 and got["nvml_device_used_mib"] == 2048.0
    assert got["nvml_device_total_mib"] == 81559.0 and "nvml_note" not in got
    dm.gpu_memory(WithOwnView(), "cuda")  # read again: the process's one NVML session, shut down at exit
    assert sys.modules["pynvml"].calls == ["init"]
    from ios_core.measurement.gpu import close_nvml_sessions

    close_nvml_sessions()
    assert sys.modules["pynvml"].calls == ["init", "shutdown"]


def test_torch_and_cupy_allocators(monkeypatch):
    cuda = SimpleNamespace(is_initialized=lambda: True, max_memory_allocated=lambda: 50 * MIB,
                           max_memory_reserved=lambda: 64 * MIB)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    assert dm.allocator_view(object()) == {"allocator": "torch (CUDA caching allocator)", "allocator_peak_mib": 50.0,
                                           "allocator_reserved_mib": 64.0}
    # torch present but CUDA never initialised through it (the IOS runtime): CuPy's pool
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=SimpleNamespace(is_initialized=lambda: False)))
    pool = SimpleNamespace(total_bytes=lambda: 40 * MIB, used_bytes=lambda: 30 * MIB)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(get_default_memory_pool=lambda: pool))
    assert dm.allocator_view(object()) == {"allocator": "cupy (default memory pool)", "allocator_peak_mib": 40.0,
                                           "allocator_in_use_mib": 30.0}
    monkeypatch.delitem(sys.modules, "cupy")
    assert dm.allocator_view(object()) is None


def test_nvml_that_does_not_list_this_process_or_fails_is_a_note(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", NVML(pids=[1]))
    got = dm.nvml_view(0)
    assert "nvml_process_mib" not in got and "PID namespace" in got["nvml_note"]
    assert got["nvml_device_used_mib"] == 2048.0
    monkeypatch.setitem(sys.modules, "pynvml", NVML(fail="NVMLError_GpuIsLost"))
    assert "GpuIsLost" in dm.nvml_view(0)["nvml_note"]
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert "NVML unavailable" in dm.nvml_view(0)["nvml_note"]


def test_cpu_cells_record_none():
    assert dm.gpu_memory(WithOwnView(), "cpu") is None


def test_out_of_memory_errors_are_named():
    class OutOfMemoryError(RuntimeError):  # torch.cuda's and CuPy's class name
        pass

    r = dm.oom_reason(OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), "cuda")
    assert r.startswith("out of memory on the GPU (OutOfMemoryError: CUDA out of memory")
    xla = RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 123 bytes.\nmore")
    assert "RESOURCE_EXHAUSTED" in dm.oom_reason(xla, "cuda") and "\n" not in dm.oom_reason(xla, "cuda")
    assert dm.oom_reason(RuntimeError("shape mismatch"), "cuda") is None
    # the CPU's OOM is the kernel's (ios_bench.running.launch)
    assert dm.oom_reason(OutOfMemoryError("x"), "cpu") is None


def test_the_record_declares_the_field_and_its_columns():
    assert BY_NAME["gpu_memory"].kind == "object" and "gpu_memory" in round_fields()
    assert {"gpu_allocator_peak_mib", "gpu_nvml_process_mib"} <= set(columns())
    row = flatten({"gpu_memory": {"allocator_peak_mib": 12.5, "nvml_process_mib": 600.0}})
    assert row["gpu_allocator_peak_mib"] == 12.5 and row["gpu_nvml_process_mib"] == 600.0


class _Window:
    def __init__(self, gpu=None):
        self.figures = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def samples(self, samples):
        pass


def _cell_spec(tmp_path, adapter: str) -> dict:
    from ios_core import models, reference

    g = models.get("sample", input_shape=(4, 7, 7)).init_weights(0)
    path = tmp_path / "g.json"
    g.save(path)
    x = reference.random_input(g, 1, seed=0)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "ref.npy", reference.run(g, x))
    return {"task": "cell", "model_spec": str(path), "batch_size": 1, "device": "cuda", "adapter": adapter,
            "threads": 1, "seed": 0, "input_seed": 0, "ref_path": str(tmp_path / "ref.npy"),
            "input_path": str(tmp_path / "x.npy"), "result_path": str(tmp_path / "out.json"), "warmup": 0,
            "number": 1, "repeat": 2, "min_sample_ms": None}


@pytest.fixture
def fake_gpu_adapter(monkeypatch):
    """A cell adapter that says it runs on cuda (it computes with torch on the CPU) and gives its
    allocator's view; the GPU's NVML, synchronize and interference window are fakes."""
    import adapters
    from ios_core.measurement import gpu, interference

    adapters.register("fake-gpu-memory", "tests.test_device_memory:FAKE")
    monkeypatch.setattr(gpu, "device_synchronizer", lambda: None)
    monkeypatch.setattr(interference, "Window", _Window)
    monkeypatch.setitem(sys.modules, "pynvml", NVML())
    yield "fake-gpu-memory"
    adapters._REGISTRY.pop("fake-gpu-memory", None)


def test_a_cuda_cell_records_its_peak_device_memory(tmp_path, fake_gpu_adapter):
    from ios_bench.running import task_cell

    result = task_cell.task_cell(_cell_spec(tmp_path, fake_gpu_adapter), {})
    assert result["status"] == "ok", result
    mem = result["gpu_memory"]
    assert mem["allocator"] == "jax (XLA BFC)" and mem["allocator_peak_mib"] == 123.0
    assert mem["nvml_process_mib"] == 300.0 and mem["when"].startswith("after the timed loop")


def test_a_cuda_cell_that_runs_out_of_memory_says_so(tmp_path, fake_gpu_adapter, monkeypatch):
    from ios_bench.running import worker

    monkeypatch.setattr(_FakeGPU, "fail", "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9 GiB")
    spec = _cell_spec(tmp_path, fake_gpu_adapter)
    before = dict(os.environ)
    try:
        assert worker.main([json.dumps(spec)]) == 1
    finally:  # the worker sets its process's environment: give this one back
        os.environ.clear()
        os.environ.update(before)
    res = json.loads((tmp_path / "out.json").read_text())
    assert res["status"] == "failed"
    assert res["reason"].startswith("build: out of memory on the GPU (RuntimeError: RESOURCE_EXHAUSTED")


from adapters.base import Adapter  # noqa: E402
from adapters.pytorch import EAGER  # noqa: E402


class _FakeGPU(Adapter):
    fail = None

    def _build(self, graph, batch_size, device, threads):
        if self.fail:
            raise RuntimeError(self.fail)
        compiled = EAGER.build(graph, batch_size, "cpu", threads)
        compiled.device_memory = WithOwnView().device_memory
        return compiled


FAKE = _FakeGPU(name="fake-gpu-memory", requires=("torch",), devices=("cpu", "cuda"))
