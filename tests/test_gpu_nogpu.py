"""The GPU paths on a machine without a GPU: clear one-line answers, nothing half-written, and
the device-independent pieces (probes) checked here; the timer protocol is tests/test_measure.py's."""

from __future__ import annotations

import os
import sys
import types

import pytest

from ios_core.measurement import gpu


def _no_gpu(monkeypatch):
    """Make every probe say 'no GPU', whatever is installed here."""
    monkeypatch.setattr(gpu, "gpu_missing", lambda: "no NVIDIA GPU driver (test)")
    monkeypatch.setattr(gpu, "_nvidia_smi_gpus", lambda: [])


def test_run_device_cuda_without_gpu_exits_2_and_writes_nothing(run_cli, tmp_path, monkeypatch):
    _no_gpu(monkeypatch)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["run", "--device", "cuda", "--models", "sample", "--out", "runs/x"])
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "cuda" in lines[0] and "no NVIDIA GPU driver (test)" in lines[0], err
    assert not (tmp_path / "runs").exists()


def test_gpu_missing_answers_in_one_line_here():
    reason = gpu.gpu_missing()
    if reason is None:
        pytest.skip("this machine has a GPU")
    assert "\n" not in reason and reason


def test_cuda_missing_names_the_extra_when_cupy_is_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    reason = gpu.cuda_missing()
    assert reason is not None and "CuPy is not installed" in reason and "ios-bench[gpu]" in reason


def test_gpu_missing_uses_nvml_first(monkeypatch):
    """Through the process's one NVML session: opened once however often it is asked, shut down at exit."""
    calls = []
    fake = types.SimpleNamespace(nvmlInit=lambda: calls.append("init"), nvmlDeviceGetCount=lambda: 2,
                                 nvmlShutdown=lambda: calls.append("shutdown"))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert gpu.gpu_missing() is None and gpu.gpu_missing() is None
    assert calls == ["init"]
    gpu.close_nvml_sessions()  # at exit
    assert calls == ["init", "shutdown"]


def test_fingerprint_key_names_gpu_driver_cuda_cudnn_and_clock_setting():
    fp = {"name": "NVIDIA A100", "driver": "550.54", "cuda_runtime": "12.4", "cudnn": "9.1.0", "sm_clock_mhz": 1410,
          "app_sm_clock_mhz": 1095, "locked_sm_clock_mhz": None}
    key = gpu.fingerprint_key(fp)
    for part in ("NVIDIA A100", "550.54", "12.4", "9.1.0", "app1095"):
        assert part in key
    # the instantaneous SM clock (idle vs boost) is not part of the key; the locked clock is
    assert gpu.fingerprint_key({**fp, "sm_clock_mhz": 210}) == key
    assert gpu.fingerprint_key({**fp, "locked_sm_clock_mhz": 1095}) != key
    assert "locked1095" in gpu.fingerprint_key({**fp, "locked_sm_clock_mhz": 1095})


def test_profile_database_key_ignores_the_instantaneous_sm_clock(monkeypatch):
    from ios_core.cost import cache

    fp = {"name": "G", "compute_capability": "9.0", "driver": "575", "cuda_runtime": "12.9", "cudnn": "9.10",
          "app_sm_clock_mhz": 1755, "locked_sm_clock_mhz": None}
    keys = []
    for sm, locked in ((345, None), (1980, None), (1980, 1755)):
        monkeypatch.setattr(gpu, "fingerprint", lambda device=0, sm=sm, locked=locked: {
            **fp, "sm_clock_mhz": sm, "locked_sm_clock_mhz": locked})
        cache._fingerprint.cache_clear()
        keys.append(cache._fingerprint("cuda", "{}")[0])
    cache._fingerprint.cache_clear()
    assert keys[0] == keys[1] != keys[2]


def test_locked_clock_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv(gpu.LOCKED_CLOCK_ENV, "0:1410,1:1095")
    assert gpu.locked_sm_clock(0) == 1410 and gpu.locked_sm_clock(1) == 1095 and gpu.locked_sm_clock(2) is None


def test_throttle_reasons_are_named():
    nv = types.SimpleNamespace(nvmlClocksEventReasonGpuIdle=1, nvmlClocksEventReasonSwPowerCap=4,
                               nvmlClocksEventReasonHwSlowdown=8, nvmlClocksEventReasonAll=0xFF,
                               nvmlClocksEventReasonNone=0, nvmlDeviceGetCurrentClocksEventReasons=lambda h: 4 | 8)
    assert gpu.throttle_reasons(nv, "h") == ["HwSlowdown", "SwPowerCap"]


def test_fingerprint_never_raises_without_gpu():
    fp = gpu.fingerprint()
    assert set(fp) >= {"name", "driver", "cuda_runtime", "cudnn", "sm_clock_mhz"}


def test_doctor_without_gpu_gives_a_reason_per_framework(run_cli):
    if gpu.gpu_missing() is None:
        pytest.skip("this machine has a GPU")
    code, out, err = run_cli(["doctor", "--device", "cpu,cuda", "--frameworks", "ios,torch"])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "cpu:"
    cuda = next(i for i, line in enumerate(lines) if line.startswith("cuda: "))
    assert gpu.gpu_missing().split(" (")[0] in lines[cuda]
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in lines[cuda + 1:] if line.startswith("  ")}
    assert set(rows) == {"ios", "torch"}
    for status, reason in rows.values():
        assert status == "no" and reason
    assert "cuda paths" not in out  # nothing run without a GPU


class FakeNVML:
    """nvidia-ml-py's functions the clock lock calls, recording them."""

    NVML_CLOCK_SM = 1

    def __init__(self, gpus=1, fail_lock=False):
        self.calls, self.gpus, self.fail_lock = [], gpus, fail_lock

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"h{i}"

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        assert kind == self.NVML_CLOCK_SM
        return 1980

    def nvmlDeviceGetDefaultApplicationsClock(self, h, kind):
        assert kind == self.NVML_CLOCK_SM
        return 1410

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0

    def nvmlDeviceSetGpuLockedClocks(self, h, lo, hi):
        if self.fail_lock:
            raise RuntimeError("NVMLError_NoPermission")
        self.calls.append(("lock", h, lo, hi))

    def nvmlDeviceResetGpuLockedClocks(self, h):
        self.calls.append(("reset", h))


def test_nvml_info_reads_the_processs_one_nvml_session(monkeypatch):
    class Info(FakeNVML):
        def nvmlDeviceGetName(self, h):
            return b"NVIDIA H200"

        def nvmlSystemGetDriverVersion(self):
            return "575.51.03"

        def nvmlDeviceGetClockInfo(self, h, kind):
            return 1980

        def nvmlDeviceGetApplicationsClock(self, h, kind):
            return 1410

    nvml = Info()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    info = gpu.nvml_info()
    assert info["name"] == "NVIDIA H200" and info["app_sm_clock_mhz"] == 1410 and info["throttle_reasons"] == []
    assert gpu.nvml_info() == info and nvml.calls == ["init"]  # read twice, opened once
    gpu.close_nvml_sessions()  # at exit
    assert nvml.calls == ["init", "shutdown"]


def test_gpu_clocks_locked_with_nvml_and_reset_even_on_error(tmp_path, monkeypatch):
    from ios_bench.machine import clocks

    nvml = FakeNVML(gpus=2)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    with pytest.raises(RuntimeError, match="boom"):
        with clocks.ClockLock(True, ["cuda"], echo=lambda s: None) as lock:
            # a sustainable clock (the default application clock), not the maximum boost (1980)
            assert ("lock", "h0", 1410, 1410) in nvml.calls and ("lock", "h1", 1410, 1410) in nvml.calls
            assert "GPU 0 at 1410 MHz (default application clock, NVML)" in lock.state["clocks"]
            assert os.environ[gpu.LOCKED_CLOCK_ENV] == "0:1410,1:1410"  # what workers key the profile database on
            raise RuntimeError("boom")
    assert gpu.LOCKED_CLOCK_ENV not in os.environ
    assert ("reset", "h0") in nvml.calls and ("reset", "h1") in nvml.calls
    resets = [c for c in nvml.calls if c[0] == "reset"]
    lock.restore()  # idempotent: no second reset
    assert [c for c in nvml.calls if c[0] == "reset"] == resets
    # the lock and the reset read NVML in the process's one session, which is shut down at exit
    assert nvml.calls.count("init") == 1 and "shutdown" not in nvml.calls
    gpu.close_nvml_sessions()
    assert nvml.calls[-1] == "shutdown"


def test_nvml_locked_clocks_are_saved_for_clocks_reset(tmp_path, monkeypatch, run_cli):
    """After a SIGKILL (no restore ran), `ios-bench clocks reset` resets the NVML-locked GPUs."""
    from ios_bench.machine import clocks

    nvml = FakeNVML(gpus=2)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    lock = clocks.ClockLock(True, ["cuda"], echo=lambda s: None)
    lock.__enter__()
    saved = clocks.read_state(clocks.machine_state_path())
    assert saved["gpus"] == ["0", "1"]
    lock.release()  # the sweep dies here: no restore
    lock._restored = True
    monkeypatch.delenv(gpu.LOCKED_CLOCK_ENV, raising=False)
    code, out, err = run_cli(["clocks", "reset"])
    assert code == 0, err
    assert ("reset", "h0") in nvml.calls and ("reset", "h1") in nvml.calls
    assert not clocks.machine_state_path().exists()


def test_gpu_clock_lock_without_permission_says_why(tmp_path, monkeypatch):
    from ios_bench.machine import clocks

    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(fail_lock=True))
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    with clocks.ClockLock(True, ["cuda"], echo=lambda s: None) as lock:
        pass
    assert "GPU (NVML): RuntimeError: NVMLError_NoPermission" in lock.state["clocks"]


def test_profile_device_cuda_without_gpu_exits_2(run_cli, monkeypatch):
    monkeypatch.setattr(gpu, "cuda_missing", lambda cudnn=True: "no usable CUDA GPU (test)")
    code, out, err = run_cli(["profile", "--model", "sample", "--device", "cuda"])
    assert code == 2 and "no usable CUDA GPU (test)" in err and len(err.strip().splitlines()) == 1


def test_utilization_sampler_reads_nvml_until_stopped(monkeypatch):
    import time

    class Rates:
        gpu, memory = 87, 12

    calls = []
    fake = types.SimpleNamespace(nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("down"),
                                 nvmlDeviceGetHandleByIndex=lambda i: f"h{i}",
                                 nvmlDeviceGetUtilizationRates=lambda h: Rates())
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with gpu.UtilizationSampler(period_s=0.001) as util:
        time.sleep(0.05)
    n = len(util.samples)
    time.sleep(0.01)
    assert n >= 3 and len(util.samples) == n  # stopped
    with gpu.UtilizationSampler(period_s=0.001):  # a second sampler: the same NVML session
        pass
    assert util.mean_gpu_percent == 87 and calls == ["init"]
    gpu.close_nvml_sessions()  # at exit
    assert calls == ["init", "down"]
    assert all(b >= a for (a, _, _), (b, _, _) in zip(util.samples, util.samples[1:]))


def test_run_device_cuda_with_nothing_runnable_exits_2_and_writes_nothing(run_cli, tmp_path, monkeypatch):
    """A GPU is there (pretended) but no framework can use it: one line naming why, no run."""
    monkeypatch.setattr(gpu, "gpu_missing", lambda: None)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["run", "--device", "cuda", "--models", "sample", "--frameworks", "torch",
                              "--schedules", "none", "--out", "runs/x", "--no-progress"])
    assert code == 2, (out, err)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: nothing can run on cuda: torch: "), err
    assert err.strip().splitlines()[-1] == errors[0]
    assert not (tmp_path / "runs" / "x").exists()
