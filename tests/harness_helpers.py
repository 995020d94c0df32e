"""Helpers for the harness tests: the real CLI in a subprocess (with the test plugin), waiting, FAST options."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ios_bench.results import cell_key

ROOT = Path(__file__).resolve().parent.parent


def env_for(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env["IOS_BENCH_PLUGINS"] = "tests.harness_plugin"
    env.update(extra or {})
    return env


def cli(args, cwd, extra=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "ios_bench", *args], cwd=cwd, env=env_for(extra),
                          capture_output=True, text=True, timeout=timeout)


# The CLI as a terminal's ^C finds it: SIGINT raising KeyboardInterrupt. A test process started in the
# background of a non-interactive shell (`make test &`) ignores SIGINT, an ignored signal stays ignored
# across exec, and Python then installs no handler: a test sending SIGINT would see the run finish.
_WITH_SIGINT = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                "sys.argv[0] = 'ios-bench'; runpy.run_module('ios_bench', run_name='__main__', alter_sys=True)")


def start(args, cwd, extra=None):
    """The CLI in a subprocess, SIGINT at Python's default handler whatever this process inherited."""
    return subprocess.Popen([sys.executable, "-c", _WITH_SIGINT, *args], cwd=cwd, env=env_for(extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ios_schedules_available() -> bool:
    try:
        from ios_core.optimizer import optimize  # noqa: F401
    except ImportError:
        return False
    found = importlib.util.find_spec
    return found("ios_core.cost") is not None and found("adapters.ios") is not None


def real_frameworks() -> list[str]:
    import adapters

    return [n for n in ("onnxruntime",) if n in adapters.names() and adapters.get(n).available() is None]


def workers_of(folder: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "ios_bench.running.worker" in cmd and str(folder) in cmd:
            found.append(p)
    return found


def wait_for(pred, timeout=120.0, what="condition"):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# one round per cell (the round protocol has its own tests), IOS on the torch kernels only
FAST = ["--warmup", "0", "--repeat", "2", "--min-sample-ms", "0", "--no-progress", "--rounds", "1",
        "--ios-providers", "torch"]


def rec(model="m", bs=1, fw="torch", device="cpu", median=10.0, spread=0.2, status="ok", passed=True, n=3):
    r = {"cell": cell_key(model, bs, fw, device), "model": model, "batch_size": bs, "framework": fw,
         "device": device, "status": status}
    if status == "ok":
        samples = [median + spread * (2 * i / (n - 1) - 1) for i in range(n)]
        r.update(median_ms=median, mean_ms=median, std_ms=spread, p10_ms=median - spread, p90_ms=median + spread,
                 samples_ms=samples, throughput=bs * 1000 / median,
                 check={"passed": passed, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""})
    else:
        r["reason"] = "crashed"
    return r


# ---- results store ------------------------------------------------------------------------------


def _store_lines(folder, lines):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def _rec(fw="x", median=10.0, **extra):
    from ios_bench.results import cell_key

    r = {"schema": 1, "cell": cell_key("m", 1, fw, "cpu"), "model": "m", "batch_size": 1, "framework": fw,
         "device": "cpu", "status": "ok", "median_ms": median, "mean_ms": median, "std_ms": 0.1,
         "p10_ms": median - 0.1, "p90_ms": median + 0.1, "samples_ms": [median] * 5, "throughput": 1000 / median,
         "check": {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""}}
    r.update(extra)
    return r
