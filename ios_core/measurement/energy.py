"""Energy per inference where the hardware counts it: NVML's total-energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver loaded; Volta and later),
read at both edges of a timed window through the process's one NVML session
(``ios_core.measurement.gpu.nvml_session``).

    meter = EnergyMeter(device)            # "cuda", "cuda:1" or "cpu"
    meter.start()
    m = measure(...)                       # the timed window, whatever it is
    fields = meter.stop(calls=m.repeat * m.number + m.warmup)
    # {"joules_per_inference": 0.41, "average_watts": 212.0, "energy_window_s": 1.9}
    # or {"energy": "not available here: <reason>"}: never zero where nothing was counted

The window's length for the average power is the wall time between the two readings (the
counter's own window), not a latency figure. On the CPU there is no counter the harness reads
(this project's VMs have no RAPL interface), so the record says so.
"""

from __future__ import annotations

import time

NOT_AVAILABLE = "not available here: "
CPU_REASON = "energy is read from NVML's counter on cuda only; no CPU energy counter is read (no RAPL interface here)"


class EnergyMeter:
    def __init__(self, device: str = "cpu", nvml=None):
        self.device = str(device)
        self.reason: str | None = None
        self.nvml = self.handle = None
        self._start: tuple[int, float] | None = None
        if not self.device.startswith("cuda"):
            self.reason = CPU_REASON
            return
        from ios_core.measurement.gpu import nvml_handle, nvml_session

        self.nvml, reason = nvml_session(nvml)
        if reason is not None:
            self.reason = reason
            return
        index = int(self.device.split(":")[1]) if ":" in self.device else 0
        try:
            self.handle = nvml_handle(self.nvml, index)
            self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
        except Exception as e:  # NVMLError_NotSupported on GPUs before Volta, ...
            self.reason = f"this GPU has no total-energy counter ({type(e).__name__}: {e})"

    def _read_mj(self) -> int:
        return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def start(self) -> None:
        if self.reason is None:
            self._start = (self._read_mj(), time.perf_counter())

    def stop(self, calls: int) -> dict:
        """The window's figures: joules per inference (``calls`` inferences ran in it) and average
        watts, or ``{"energy": "not available here: ..."}``."""
        if self.reason is not None:
            return {"energy": NOT_AVAILABLE + self.reason}
        if self._start is None:
            raise RuntimeError("EnergyMeter.stop() without start()")
        mj0, t0 = self._start
        mj, seconds = self._read_mj() - mj0, time.perf_counter() - t0
        self._start = None
        if calls < 1 or seconds <= 0:
            raise ValueError(f"an energy window needs calls >= 1 and a positive length, got {calls}, {seconds}")
        if mj <= 0:  # the counter did not move: its resolution is coarser than the window
            return {"energy": NOT_AVAILABLE + f"NVML's energy counter did not advance in {seconds:.3f} s"}
        joules = mj / 1000
        return {"joules_per_inference": joules / calls, "average_watts": joules / seconds, "energy_window_s": seconds}
