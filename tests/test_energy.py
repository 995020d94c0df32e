"""Energy per inference (issue 47 item 4) on a fake NVML: the counter read around a window."""

from __future__ import annotations

import pytest

from ios_core.measurement.energy import CPU_REASON, EnergyMeter
from ios_core.measurement.gpu import close_nvml_sessions


class FakeNVML:
    """NVML's energy counter (mJ), advancing by ``step_mj`` per reading; ``supported=False``
    raises like a GPU before Volta."""

    class NVMLError_NotSupported(Exception):
        pass

    def __init__(self, step_mj: int = 500, supported: bool = True):
        self.mj, self.step_mj, self.supported, self.reads = 10_000, step_mj, supported, 0

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("gpu", index)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.supported:
            raise self.NVMLError_NotSupported("Not Supported")
        self.reads += 1
        self.mj += self.step_mj
        return self.mj


@pytest.fixture(autouse=True)
def _fresh_sessions():
    close_nvml_sessions()
    yield
    close_nvml_sessions()


def test_joules_and_watts_from_the_counter():
    nvml = FakeNVML(step_mj=500)
    meter = EnergyMeter("cuda:0", nvml=nvml)
    meter.start()
    fields = meter.stop(calls=10)
    # one reading at each edge: the counter moved 500 mJ over 10 inferences
    assert fields["joules_per_inference"] == pytest.approx(0.05)
    assert fields["average_watts"] == pytest.approx(0.5 / fields["energy_window_s"])
    assert nvml.reads == 3  # the probe at construction, then the two edges


def test_no_counter_is_said_never_zero():
    fields = EnergyMeter("cuda", nvml=FakeNVML(supported=False))
    fields.start()
    out = fields.stop(calls=5)
    assert out == {"energy": "not available here: this GPU has no total-energy counter "
                             "(NVMLError_NotSupported: Not Supported)"}
    assert EnergyMeter("cpu").stop(calls=3) == {"energy": f"not available here: {CPU_REASON}"}
    still = EnergyMeter("cuda", nvml=FakeNVML(step_mj=0))
    still.start()
    assert still.stop(calls=3)["energy"].startswith("not available here: NVML's energy counter did not advance")


def test_profile_records_energy_on_this_cpu():
    from ios_bench.profiling import profile_one

    from .test_profile_frameworks import pair_graph

    res = profile_one("ios", pair_graph(), 1, threads=1, warmup=1, repeat=2)
    assert res["energy"] == f"not available here: {CPU_REASON}" and "joules_per_inference" not in res


def test_table_shows_energy_beside_latency():
    from ios_bench.reporting.profile_table import render

    from .test_profile_frameworks import _fake_results, pair_graph

    g = pair_graph()
    a, b, c = _fake_results(g)
    a.update(joules_per_inference=0.0412, average_watts=212.4, energy_window_s=1.0)
    b["energy"] = "not available here: no counter"
    text = render(g, [a, b, c])
    row = next(line for line in text.splitlines() if line.startswith("energy / inference"))
    assert "41.20 mJ, 212.4 W" in row and row.split()[-2:] == ["-", "n/a"]
    assert "energy: not available here: no counter" in text
