"""ios_bench.running.launch and the worker's end (ios_bench.running.worker.fast_exit): a worker ends
without the interpreter's teardown once its result is written, and what it left running is reaped."""

import time

from ios_bench.running.launch import run_worker

PLUGIN = '''
import atexit, os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
with open(os.environ["TEST_CHILD_PID_FILE"], "w") as f:
    f.write(str(child.pid))
atexit.register(time.sleep, 60)  # a teardown that would hold the round for a minute
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except OSError:
        return False


def test_a_worker_ends_without_teardown_and_what_it_left_running_is_reaped(tmp_path, monkeypatch):
    (tmp_path / "slow_teardown_plugin.py").write_text(PLUGIN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("IOS_BENCH_PLUGINS", "slow_teardown_plugin")
    monkeypatch.setenv("TEST_CHILD_PID_FILE", str(tmp_path / "child.pid"))
    spec = {"task": "probe", "device": "cpu", "names": [], "result_path": str(tmp_path / "probe.json")}
    t0 = time.perf_counter()
    res = run_worker(spec, 120, tmp_path / "probe.log", threads=1)
    took = time.perf_counter() - t0
    assert res["status"] == "ok", res
    assert took < 30, f"the worker waited for its teardown ({took:.1f} s)"
    pid = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the worker's child outlived it"


def test_teardown_can_be_kept_for_a_profiler(tmp_path, monkeypatch):
    """IOS_BENCH_WORKER_TEARDOWN=1: the interpreter exits as usual (atexit handlers run)."""
    marker = tmp_path / "atexit-ran"
    (tmp_path / "marker_plugin.py").write_text(
        f"import atexit, pathlib\natexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("IOS_BENCH_PLUGINS", "marker_plugin")
    spec = {"task": "probe", "device": "cpu", "names": [], "result_path": str(tmp_path / "probe.json")}
    monkeypatch.setenv("IOS_BENCH_WORKER_TEARDOWN", "1")
    assert run_worker(spec, 120, tmp_path / "a.log", threads=1)["status"] == "ok"
    assert marker.read_text() == "yes"
    marker.unlink()
    monkeypatch.delenv("IOS_BENCH_WORKER_TEARDOWN")
    assert run_worker(spec, 120, tmp_path / "b.log", threads=1)["status"] == "ok"
    assert not marker.exists()  # the fast exit skips atexit
