"""Starting one worker process (:func:`run_worker`): its environment (thread budget, spin policy),
its own process group, its timeout, and a failure record when it crashes or hangs. Every executor
(local, Ray) runs tasks through this one function."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from adapters.build_cache import ENV as BUILD_CACHE_ENV
from ios_bench.running.worker import PARENT_ENV
from ios_core.measurement.threads import spin_env, thread_env


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def tail(path: Path, lines: int = 25, chars: int = 3000) -> str:
    try:
        text = path.read_bytes()[-chars * 4:].decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])[-chars:]


def run_worker(spec: dict, timeout: float, log_path: Path, threads: int | None) -> dict:
    """Run one task in a fresh process; returns the worker's result, or a failure record with
    the reason (crash signal, exit code, timeout) and the tail of its output."""
    result_path = Path(spec["result_path"])
    result_path.unlink(missing_ok=True)
    env = dict(os.environ)
    if threads:
        env.update(thread_env(threads))
    env = spin_env(spec.get("spin_policy"), env)  # the worker sets it again before any framework import
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env[PARENT_ENV] = str(os.getpid())  # the worker dies with this process (see worker.die_with_parent)
    if spec.get("task") == "cell" and BUILD_CACHE_ENV not in env:
        # a round reuses what the run's earlier rounds built (adapters.build_cache): <run folder>/cache
        # on the node that runs it (the result file lies in the run folder's work folder); a user's value wins
        env[BUILD_CACHE_ENV] = str(result_path.resolve().parent.parent / "cache")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ios_bench.running.worker", json.dumps(spec)],
                                stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, env=env,
                                # its own session, so a timeout kills its whole group; no preexec_fn,
                                # which is unsafe while other threads are alive
                                start_new_session=os.name == "posix")
        timed_out = False
        oom_before = oom_kills()
        peak = _PeakRSS(proc.pid)
        try:
            while True:  # wake once a second: the worker's peak memory (its own figure dies with it)
                try:
                    rc = proc.wait(timeout=min(1.0, max(0.01, timeout - (time.perf_counter() - t0))))
                    break
                except subprocess.TimeoutExpired:
                    peak.sample()
                    if time.perf_counter() - t0 >= timeout:
                        timed_out = True
                        _kill_group(proc)
                        rc = proc.returncode
                        break
        except BaseException:  # SIGINT/SIGTERM in the parent: take the worker down with us
            _kill_group(proc)
            raise
    wall = time.perf_counter() - t0
    _reap_group(proc)  # what the worker left behind (it ends without teardown: worker.fast_exit)
    result = None
    if result_path.exists():
        try:
            result = json.loads(result_path.read_text())
        except (OSError, json.JSONDecodeError):
            result = None
        result_path.unlink(missing_ok=True)
    if result is None:
        if timed_out:
            reason = f"timeout: no result after {timeout:g} s (hang?); worker killed"
        elif rc is not None and rc < 0:
            sig = _signal_name(rc)
            reason = f"crashed: worker killed by {sig}"
            if sig == "SIGKILL":
                reason = out_of_memory_reason(peak.mib, oom_kills() > oom_before) or reason
        else:
            reason = f"crashed: worker exited with code {rc} without a result"
        result = {"status": "failed", "reason": reason, "returncode": rc}
    result["wall_seconds"] = round(wall, 3)
    if result.get("status") != "ok":
        result["stderr_tail"] = tail(log_path)
    return result


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker's own session: it and its children only
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass


def _reap_group(proc: subprocess.Popen) -> None:
    """Kill what is left of a finished worker's session (a compiler's pool of child processes)."""
    if os.name != "posix":
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _PeakRSS:
    """The largest resident memory seen of a worker and its children (psutil), in MiB."""

    def __init__(self, pid: int):
        self.pid, self.mib = pid, 0.0

    def sample(self) -> None:
        try:
            import psutil

            p = psutil.Process(self.pid)
            rss = p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
        except Exception:  # gone, or no psutil: the figure stays what it was
            return
        self.mib = max(self.mib, rss / 2**20)


def oom_kills() -> int:
    """The kernel's count of OOM kills in this process's cgroup (cgroup v2 ``memory.events``), or
    -1 where it cannot be read."""
    try:
        for line in Path("/sys/fs/cgroup/memory.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return -1


def out_of_memory_reason(peak_mib: float, oom_seen: bool) -> str | None:
    """"out of memory: ..." for a worker killed by SIGKILL that we did not kill ourselves: the
    kernel's OOM killer counted a kill, or the worker was close to the machine's memory."""
    try:
        import psutil

        total = psutil.virtual_memory().total / 2**20
    except Exception:
        total = 0.0
    near = total and peak_mib > 0.8 * total
    if not (oom_seen or near):
        return None
    return (f"out of memory: worker killed by the kernel's OOM killer (SIGKILL) at a peak of {peak_mib:,.0f} MiB "
            f"seen; the machine has {total:,.0f} MiB" + ("" if oom_seen else " (OOM kill inferred from its peak)"))
