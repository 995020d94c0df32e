"""benchmarks/_window_steps.py: a step's command and environment, and running one until its time
is spent (SIGINT, then SIGKILL; never outliving the window that started it)."""

from __future__ import annotations

import os
import sys

import pytest

from benchmarks import _window_steps as ws
from tests.conftest import ROOT


def test_the_headline_step_is_one_experiment_command_resumed_in_the_next(tmp_path):
    out = tmp_path / "headline"
    cmd = ws.headline_command(out, 512.7, ["--gpu", "h200"])
    assert cmd[1:8] == ["-m", "ios_bench", "experiment", "headline", "--device", "cuda", "--out"]
    assert "--deadline" in cmd and cmd[cmd.index("--deadline") + 1] == "512" and "--resume" not in cmd
    out.mkdir()
    (out / "experiment.json").write_text("{}")
    assert ws.headline_command(out, 300, [])[-1] == "--resume"
    env = ws.window_env(tmp_path, tmp_path / "site")
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(tmp_path / "site"), str(ws.ROOT)]
    assert env["IOS_BENCH_CACHE"] == str(tmp_path / "profiles.sqlite")  # in the working folder, packed


def test_a_step_dies_with_the_window_and_takes_sigint_even_when_the_window_ignores_it(tmp_path):
    """The step runs in its own session (so its group can be killed): without a parent-death
    signal it would outlive a killed window and keep the GPU busy into the next call; and an
    ignored SIGINT would be inherited, turning the window's interrupt into a 30 s wait for SIGKILL."""
    import signal
    import subprocess
    import time

    pid_file = tmp_path / "child.pid"
    child = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    parent = (f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom benchmarks._window_steps import run_until\n"
              f"print(run_until([sys.executable, '-c', {child!r}], {{}}, 120))\n")
    p = subprocess.Popen([sys.executable, "-c", parent])
    try:
        for _ in range(200):
            if pid_file.is_file() and pid_file.read_text():
                break
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        p.kill()  # the window killed outright (the device tool's end of a command)
        p.wait()
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the step outlived the window that started it")
    finally:
        p.kill()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a window started with SIGINT ignored
    try:
        t0 = time.monotonic()
        rc = ws.run_until([sys.executable, "-c", "import time\ntime.sleep(60)\n"], dict(os.environ), 1.0)
    finally:
        signal.signal(signal.SIGINT, old)
    assert rc == -signal.SIGINT and time.monotonic() - t0 < ws.KILL_AFTER_S  # SIGINT ended it, not SIGKILL


def test_a_step_that_runs_past_the_window_is_interrupted_then_killed(monkeypatch):
    import time

    t0 = time.monotonic()
    code = "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    raise SystemExit(130)\n"
    assert ws.run_until([sys.executable, "-c", code], dict(os.environ), 1.0) == 130  # SIGINT: the ^C path
    monkeypatch.setattr(ws, "KILL_AFTER_S", 1.0)
    stubborn = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)\n"
    assert ws.run_until([sys.executable, "-c", stubborn], dict(os.environ), 1.0) == -9  # then SIGKILL
    assert time.monotonic() - t0 < 30
    assert ws.run_until([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ), 30) == 3
