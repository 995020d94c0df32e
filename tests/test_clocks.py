"""Clock locking (ios_bench.machine.clocks) on a fake machine: lock, restore, reset after a kill, one lock per
machine."""

import json

import pytest

from ios_bench.errors import InputError
from ios_bench.machine import clocks
from tests.harness_helpers import ROOT


def fake_sysfs(root, governor="powersave", no_turbo="0", cores=2):
    cpu = root / "devices" / "system" / "cpu"
    for i in range(cores):
        d = cpu / f"cpu{i}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(governor + "\n")
        (d / "scaling_available_governors").write_text("performance powersave\n")
        (d / "scaling_cur_freq").write_text("2000000\n")
    (cpu / "intel_pstate").mkdir()
    (cpu / "intel_pstate" / "no_turbo").write_text(no_turbo + "\n")
    return cpu


def test_cpu_clock_lock_and_restore(tmp_path, monkeypatch):
    cpu = fake_sysfs(tmp_path)
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))  # no nvidia-smi
    said = []
    with clocks.ClockLock(True, ["cpu"], echo=said.append) as lock:
        assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "performance"
        assert (cpu / "cpu1/cpufreq/scaling_governor").read_text() == "performance"
        assert (cpu / "intel_pstate/no_turbo").read_text() == "1"
        assert lock.state["clocks"] == "locked (CPU governor performance, turbo off)"
        assert lock.observe() == {"cpu_mhz": 2000.0}
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"
    assert (cpu / "intel_pstate/no_turbo").read_text() == "0"
    assert lock.state["restored"] is True
    assert len(said) == 1


def test_clock_lock_impossible_says_why_once(tmp_path, monkeypatch):
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))  # an empty sysfs: no cpufreq (like a VM)
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    said = []
    with clocks.ClockLock(True, ["cpu", "cuda"], echo=said.append) as lock:
        pass
    assert lock.state["clocks"].startswith("unlocked (CPU: no cpufreq interface")
    assert "GPU: no NVIDIA GPU (nvidia-smi not found)" in lock.state["clocks"]
    assert len(said) == 1
    with clocks.ClockLock(False) as lock:
        pass
    assert lock.state["clocks"].startswith("unlocked (not requested")


def test_clock_restore_on_exception(tmp_path, monkeypatch):
    cpu = fake_sysfs(tmp_path)
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    with pytest.raises(RuntimeError):
        with clocks.ClockLock(True, ["cpu"], echo=lambda s: None):
            assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "performance"
            raise RuntimeError("boom")
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"


# ---- bad input: one line, exit 2 ----------------------------------------------------------------


LOCK_AND_DIE = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from ios_bench.machine.clocks import ClockLock
lock = ClockLock(True, ["cpu"], echo=lambda s: None, state_path=sys.argv[1])
lock.__enter__()
print("locked", flush=True)
if sys.argv[3] == "die":
    os.kill(os.getpid(), signal.SIGKILL)
import time
time.sleep(120)
"""


def _fake_machine(tmp_path, monkeypatch):
    cpu = fake_sysfs(tmp_path / "sys")
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path / "sys"))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))  # no nvidia-smi
    return cpu


def test_clocks_reset_after_a_sigkill(tmp_path, monkeypatch, run_cli):
    import subprocess
    import sys

    cpu = _fake_machine(tmp_path, monkeypatch)
    run = tmp_path / "runs" / "k"
    run.mkdir(parents=True)
    p = subprocess.run([sys.executable, "-c", LOCK_AND_DIE, str(run / "clocks.json"), str(ROOT), "die"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -9 and "locked" in p.stdout
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "performance"  # left locked by the dead sweep
    saved = json.loads((run / "clocks.json").read_text())
    assert [v for _, v in saved["cpu"]] == ["powersave", "powersave", "0"]
    code, out, err = run_cli(["clocks", "reset", str(run)])
    assert code == 0, err
    assert "restored 3 clock setting(s)" in out
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"
    assert (cpu / "cpu1/cpufreq/scaling_governor").read_text() == "powersave"
    assert (cpu / "intel_pstate/no_turbo").read_text() == "0"
    assert not (run / "clocks.json").exists()
    code, out, err = run_cli(["clocks", "reset", str(run)])
    assert code == 0 and "nothing to restore" in out


def test_the_next_lock_restores_what_a_killed_sweep_left(tmp_path, monkeypatch):
    import subprocess
    import sys

    from ios_bench.machine.clocks import ClockLock

    cpu = _fake_machine(tmp_path, monkeypatch)
    p = subprocess.run([sys.executable, "-c", LOCK_AND_DIE, str(tmp_path / "c.json"), str(ROOT), "die"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -9
    said = []
    with ClockLock(True, ["cpu"], echo=said.append) as lock:
        assert lock.state["before"]["cpu"]["governors"] == ["powersave"]  # the real previous value
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"
    assert any("restored 3 setting(s)" in s for s in said)


def test_two_sweeps_cannot_lock_clocks_at_once(tmp_path, monkeypatch, run_cli):
    import subprocess
    import sys

    from ios_bench.machine.clocks import ClockLock

    _fake_machine(tmp_path, monkeypatch)
    holder = subprocess.Popen([sys.executable, "-c", LOCK_AND_DIE, str(tmp_path / "c.json"), str(ROOT), "hold"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(InputError, match="locked by another sweep"):
            ClockLock(True, ["cpu"], echo=lambda s: None).__enter__()
        code, out, err = run_cli(["clocks", "reset"])
        assert code == 2 and "running sweep holds the clocks" in err
        folder = tmp_path / "runs" / "second"
        code, out, err = run_cli(["run", "--lock-clocks", "--out", str(folder), "--models", "sample",
                                  "--frameworks", "torch", "--schedules", "none", "--no-progress"])
        assert code == 2 and err.count("\n") == 1 and "locked by another sweep" in err
        assert not (folder / "results.jsonl").exists() and not (folder / "plan.json").exists()
    finally:
        holder.kill()
        holder.wait()
    with ClockLock(False, ["cpu"]):  # not locking needs no machine lock
        pass


def test_a_failing_restore_is_retried(tmp_path, monkeypatch):
    from ios_bench.machine import clocks as clk
    from ios_bench.machine import system

    cpu = _fake_machine(tmp_path, monkeypatch)
    real_write, failures = system.write, {"n": 0}

    def flaky(path, value):
        if value == "powersave" and failures["n"] < 2:  # the first two restores of a governor fail
            failures["n"] += 1
            return f"{path}: Device or resource busy"
        return real_write(path, value)

    monkeypatch.setattr(system, "write", flaky)
    with clk.ClockLock(True, ["cpu"], echo=lambda s: None, state_path=tmp_path / "clocks.json") as lock:
        assert (tmp_path / "clocks.json").exists()
    assert failures["n"] == 2
    assert lock.state["restored"] is True
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"
    assert not (tmp_path / "clocks.json").exists()


# ---- one graph, one name, one cell (item 10) ----------------------------------------------------------
