"""ios_bench.planning.estimate on the GPU: a cell on cuda whose estimated GPU memory exceeds the GPU's free
memory is skipped before it starts, with the reason; earlier cells' recorded ``gpu_memory``
replaces the stated base (as ``peak_rss_mib`` does on the CPU)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from ios_bench.planning import estimate
from ios_bench.planning.cells import Cell

REFS = {("m", 1): {"activation_mib": 100.0, "weights_mib": 50.0}, ("m", 32): {"activation_mib": 100.0,
                                                                            "weights_mib": 50.0}}


def _cell(device="cuda", batch=32, fw="torch"):
    return Cell("m", "m", batch, fw, device, adapter=fw)


def test_gpu_memory_is_learned_from_earlier_cells():
    h = estimate.History()
    stated = estimate.gpu_memory_mib("torch", 50.0, 100.0, 4, h)
    assert stated == pytest.approx(estimate.GPU_BASE_MIB + 2 * 50 + 2 * 100 * 4)
    h.add({"status": "ok", "median_ms": 1.0, "model": "m", "batch_size": 1, "framework": "torch",
           "gpu_memory": {"allocator_peak_mib": 400.0, "nvml_process_mib": 1500.0}})
    assert h.gpu_peak == [("torch", "m", 1, 1500.0)]  # NVML's view: the context and libraries too
    learned = estimate.gpu_memory_mib("torch", 50.0, 100.0, 4, h, {"m": 100.0}, {"m": 50.0})
    assert learned == pytest.approx((1500 - 100 - 200) + 100 + 800)


def test_a_cuda_cell_that_would_not_fit_the_gpu_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setattr(estimate, "available_mib", lambda: 1e9)  # the host has room
    h = estimate.History()
    big, small, cpu = _cell(batch=32), _cell(batch=1), _cell(device="cpu", batch=32)
    out = estimate.memory_skips([big, small, cpu], REFS, h, gpu_free=5000.0)
    assert list(out) == [big.key]  # 600 + 100 + 6,400 MiB needed, 5,000 free; batch 1 fits; a CPU cell is not
    assert out[big.key].startswith("not enough GPU memory: the cell needs about 7,100 MiB on the GPU")
    assert "5,000 MiB are free there" in out[big.key]


def test_the_gpu_free_memory_is_nvml_s_and_none_without_it(monkeypatch):
    from ios_core.measurement.gpu import close_nvml_sessions

    info = SimpleNamespace(free=8 * 2**30, used=0, total=8 * 2**30)
    calls = []
    nvml = SimpleNamespace(nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("shutdown"),
                           nvmlDeviceGetHandleByIndex=lambda i: "h", nvmlDeviceGetMemoryInfo=lambda h: info)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert estimate.gpu_free_mib() == 8192.0 and estimate.gpu_free_mib() == 8192.0
    assert calls == ["init"]  # the process's one NVML session, however often it is read
    close_nvml_sessions()  # at exit
    assert calls == ["init", "shutdown"]
    monkeypatch.setattr(estimate, "available_mib", lambda: 1e9)
    assert estimate.memory_skips([_cell(batch=32)], REFS, estimate.History()) == {}  # 7,100 of 8,192: fits
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert estimate.gpu_free_mib() is None
    assert estimate.memory_skips([_cell(batch=32)], REFS, estimate.History()) == {}  # no NVML: no GPU check
