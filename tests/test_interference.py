"""ios_core.measurement.interference: other processes' CPU time from /proc/stat (a fake one, and the real one
with a real busy process), the canary, the one rule that marks a window disturbed."""

import os
import subprocess
import sys
import time

import pytest

from ios_core.measurement import interference
from ios_core.measurement.interference import THRESHOLDS, Window, judge, read_cpu_times

STAT = """cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0
cpu0 1 0 1 1 0 0 0 0 0 0
cpu1 1 0 1 1 0 0 0 0 0 0
intr 1
"""


def write_stat(path, user, system, idle, steal=0):
    path.write_text(STAT.format(user=user, system=system, idle=idle, steal=steal))


def test_fake_proc_stat_other_cpu_and_steal(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    write_stat(stat, 1000, 500, 10000)
    got = read_cpu_times(str(stat))
    tick = os.sysconf("SC_CLK_TCK")
    assert got["cpus"] == 2 and got["busy"] == pytest.approx(1500 / tick)
    # a window of 1 s on 2 CPUs in which the machine was busy for 1.2 CPU-seconds, 0.2 of them ours
    clock = iter([100.0, 101.0])
    monkeypatch.setattr(interference.time, "perf_counter", lambda: next(clock))
    own = iter([5.0, 5.2])
    monkeypatch.setattr(interference, "own_cpu_seconds", lambda: next(own))
    w = Window(canary=False, stat_path=str(stat))
    with w:
        write_stat(stat, 1000 + int(1.0 * tick), 500 + int(0.2 * tick), 10000, steal=int(0.3 * tick))
    slack = 2 * 2 / interference.TICKS_PER_S  # one tick per CPU at each end is rounding, not a co-tenant
    assert w.figures["other_cpu"] == pytest.approx((1.0 - slack) / 2, abs=0.01)  # (1.2 - 0.2) CPU-s of 2
    assert w.figures["steal"] == pytest.approx((0.3 - slack) / 2, abs=0.01)
    why = judge(w.figures, None)
    assert "other processes used 48%" in why and "steal 13%" in why


def test_no_proc_stat_gives_no_figure_and_no_verdict(tmp_path):
    w = Window(canary=False, stat_path=str(tmp_path / "missing"))
    with w:
        pass
    assert "other_cpu" not in w.figures and judge(w.figures, None) is None


BUSY = "import time\nt = time.time()\nwhile time.time() - t < 3: pass\n"


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc/stat")
def test_a_real_busy_process_is_seen():
    """A co-tenant burning one core during a window of mostly-idle waiting is counted as other
    processes' CPU time, far above the threshold; the waiting itself is not."""
    cpus = read_cpu_times()["cpus"]
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        time.sleep(0.3)
        with Window(canary=False) as w:
            time.sleep(1.0)
    finally:
        busy.wait()
    assert w.figures["other_cpu"] >= min(0.5, 0.8 / cpus) > THRESHOLDS.other_cpu
    assert judge(w.figures, None) is not None
    assert w.figures["own_cpu_s"] < 0.1


def test_canary_is_a_short_fixed_workload():
    c = interference.canary()
    assert 0 < c < 200
    assert judge({"canary_before_ms": c, "canary_after_ms": 3 * c}, c).startswith("canary 3.00x")
    assert judge({"canary_before_ms": c, "canary_after_ms": c}, c) is None


def test_the_canary_is_the_one_median_of_its_runs(monkeypatch):
    """Four runs of 4, 1, 3 and 2 ms: the canary is their median, 2.5 ms (the two middle runs
    averaged, as every median here), not the upper middle run."""
    ticks = iter([0.0, 0.004, 1.0, 1.001, 2.0, 2.003, 3.0, 3.002])  # perf_counter before and after each run
    monkeypatch.setattr(interference.time, "perf_counter", lambda: next(ticks))
    assert interference.canary(reps=4, size=1000) == pytest.approx(2.5)


def test_the_profile_database_never_reuses_a_disturbed_row(tmp_path):
    import sqlite3

    from ios_core.cost.cache import ProfileCache

    db = ProfileCache(tmp_path / "p.sqlite")
    db.put(1, 2, "m", "quiet", 1.5, interference={"other_cpu": 0.01})
    db.put(1, 2, "m", "noisy", 3.0, disturbed="other processes used 40% of the CPUs",
           interference={"other_cpu": 0.4})
    assert db.get(1, 2, "m", "quiet") == 1.5
    assert db.get(1, 2, "m", "noisy") is None and db.stats()["disturbed_rows_remeasured"] == 1
    assert [r[2] for r in db.rows(1)] == ["quiet"]
    db.close()
    # a database written before disturbance was recorded gains the columns and keeps its rows
    old = tmp_path / "old.sqlite"
    con = sqlite3.connect(old)
    con.executescript("""CREATE TABLE stage_latency (device TEXT NOT NULL, batch_size INTEGER NOT NULL,
        threads INTEGER NOT NULL, method TEXT NOT NULL, signature TEXT NOT NULL, latency_ms REAL NOT NULL,
        std_ms REAL, samples INTEGER, created REAL NOT NULL, description TEXT,
        PRIMARY KEY (device, batch_size, threads, method, signature));""")
    con.commit()
    con.close()
    db = ProfileCache(old)
    con = sqlite3.connect(old)
    con.execute("INSERT INTO stage_latency (device, batch_size, threads, method, signature, latency_ms, created) "
                "VALUES (?, 1, 2, 'm', 's', 2.5, 0)", (db.device,))
    con.commit()
    con.close()
    assert db.get(1, 2, "m", "s") == 2.5


def test_canary_reference_learns_only_from_quiet_windows():
    from ios_core.measurement.interference import CanaryReference

    ref = CanaryReference()
    for _ in range(5):
        assert ref.judge({"canary_before_ms": 1.0, "canary_after_ms": 1.0}) is None
    assert ref.judge({"canary_before_ms": 1.0, "canary_after_ms": 2.0}).startswith("canary 2.00x")
    assert ref.judge({"other_cpu": 0.5, "canary_before_ms": 1.0}) is not None
    assert ref.values == [1.0] * 5


class _FakeNvml:
    """pynvml's calls the window makes, with a driver that holds the given utilization samples."""

    NVML_ERROR_NOT_FOUND = 6

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self, samples=None, error=None):
        self.samples, self.error, self.calls = samples or [], error, []

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetProcessUtilization(self, handle, since):
        from types import SimpleNamespace

        if self.error is not None:
            raise self.NVMLError(self.error)
        return [SimpleNamespace(pid=p, timeStamp=t, smUtil=u, memUtil=0, encUtil=0, decUtil=0)
                for p, t, u in self.samples if t >= since]


def test_other_processes_on_the_gpu_disturb_a_window():
    import os

    from ios_core.measurement.interference import Window, gpu_others, judge

    me = os.getpid()
    assert gpu_others(0, 100, _FakeNvml([(me, 150, 95), (4242, 160, 70), (4243, 90, 99)]), {me}) == {
        "gpu_other_util": 70.0, "gpu_other_processes": 1}  # the worker's own samples and older ones do not count
    nv = _FakeNvml([(4242, 2**62, 40), (4343, 2**62, 35)])  # samples inside the window
    with Window(canary=False, gpu=0, nvml=nv) as w:
        pass
    assert w.figures["gpu_other_util"] == 40.0 and w.figures["gpu_other_processes"] == 2
    with Window(canary=False, gpu=0, nvml=nv) as w2:  # NVML stays open: one session per process
        pass
    assert w2.figures["gpu_other_util"] == 40.0
    assert nv.calls == ["init"]
    from ios_core.measurement.gpu import close_nvml_sessions

    close_nvml_sessions()  # what the process does at exit
    assert nv.calls == ["init", "shutdown"]
    assert judge(w.figures, None) == "2 other processes used up to 40% of the GPU"
    quiet = gpu_others(0, 0, _FakeNvml(error=_FakeNvml.NVML_ERROR_NOT_FOUND), {me})  # no process sampled
    assert quiet == {"gpu_other_util": 0.0, "gpu_other_processes": 0} and judge(quiet, None) is None
    broken = gpu_others(0, 0, _FakeNvml(error=999), {me})
    assert broken["gpu_other"].startswith("NVML:") and judge(broken, None) is None


def test_a_slowdown_inside_the_window_shows_in_its_samples():
    """The canaries see the window's edges only; a slowdown in its middle is in the samples. The
    round seen here: the last 4 of 10 samples took 2x the first 6, /proc/stat and canaries quiet."""
    steady = [22.5, 23.5, 23.3, 22.5, 23.3, 22.6, 23.0, 22.9, 23.1, 22.8]
    slowed = [29.7, 23.5, 23.3, 22.5, 23.3, 22.6, 41.5, 45.6, 52.2, 48.5]
    assert interference.slow_samples(steady) == 0.0
    assert interference.slow_samples(slowed) == 0.5
    assert interference.slow_samples(slowed[:7]) is None  # too few samples to tell
    quiet = {"other_cpu": 0.0, "steal": 0.0, "canary_before_ms": 0.5, "canary_after_ms": 0.5}
    assert judge({**quiet, "slow_samples": interference.slow_samples(steady)}, 0.5) is None
    why = judge({**quiet, "slow_samples": interference.slow_samples(slowed)}, 0.5)
    assert why and "50% of its samples" in why and "mid-window" in why
    # one or two outliers (a single slow call) are not a slowed machine: the median ignores them
    assert judge({**quiet, "slow_samples": interference.slow_samples(steady[:8] + [60.0, 40.0])}, 0.5) is None
    with Window(canary=False) as w:
        pass
    w.samples(slowed)
    assert w.figures["slow_samples"] == 0.5
    w2 = Window(canary=False)
    w2.samples([1.0, 2.0])
    assert "slow_samples" not in w2.figures
