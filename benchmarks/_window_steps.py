"""The steps of a lent GPU window (``benchmarks/gpu_headline.py``): their order, titles and
estimates, each one's command and environment, and running one until it ends or its time is spent
(SIGINT, then SIGKILL to its process group; it never outlives the window that started it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KILL_AFTER_S = 15.0  # after the SIGINT
STEPS = ("doctor", "fidelity", "search", "headline")
TITLES = {"doctor": "the doctor: IOS kernels against the oracle, host time per launch, the peers",
          "fidelity": "gpu_fidelity.py on squeezenet and inception_v3: per-stage table, critical-path bound",
          "search": "bench_gpu_search.py on inception_v3: cold, only the plan cache warm, an independent cold "
                    "search timed side by side",
          "headline": "the headline (ios-bench experiment headline --device cuda), batch 1 first (fp32, then its "
                      "fp16 step: IOS-Both vs the best GPU peer at fp16), then what the window leaves"}
DOCTOR_FRAMEWORKS = "ios,torch,jax-xla,tvm"
FIDELITY_MODELS = "squeezenet,inception_v3"
SEARCH_MODELS = "inception_v3"
# the steps' costs no GPU run has measured yet (seconds), named "assumed" wherever used
ASSUMED_S = {"doctor": (60.0, "the doctor with tvm's first cuda build (the H200 ran it without tvm)"),
             "fidelity": (240.0, "gpu_fidelity on squeezenet and inception_v3 (never run on a GPU: two searches "
                                 "with fresh databases, each stage timed twice more, 60 replays)"),
             "search_extra": (30.0, "bench_gpu_search's schedule timings (50 replays each, 5 side-by-side rounds)")}
BENCH_RECORD = ROOT / "docs" / "results" / "gpu-h200-2026-11-26-headline" / "bench_gpu_search.txt"


def step_estimates(gpu: str = "h200") -> dict[str, tuple[float, str]]:
    """Each step's estimated seconds and where the figure comes from: the committed H200 windows'
    records (``ios_bench.experiments.headline.MEASURED_RUNS``, the newest's step first) where they have
    it, :data:`ASSUMED_S` where not."""
    from ios_bench.experiments import headline as hl
    from ios_bench.experiments.base import Context

    costs = hl.measured_costs()
    out = {}
    steps = costs.get("steps") or {}  # {step: (seconds, the committed window's folder)}, the newest window's
    if costs.get("doctor"):
        where = steps["doctor"][1] if "doctor" in steps else "the committed window"
        out["doctor"] = (costs["doctor"], f"measured ({where}: window.json's doctor step)")
    else:
        out["doctor"] = (ASSUMED_S["doctor"][0], "assumed: " + ASSUMED_S["doctor"][1])
    if "fidelity" in steps:
        out["fidelity"] = (steps["fidelity"][0], f"measured ({steps['fidelity'][1]}: window.json's fidelity step)")
    else:
        out["fidelity"] = (ASSUMED_S["fidelity"][0], "assumed: " + ASSUMED_S["fidelity"][1])
    try:
        m = re.search(r"inception_v3 IOS-Both r=3 s=8: search ([\d.]+) s", BENCH_RECORD.read_text())
    except OSError:
        m = None
    extra = ASSUMED_S["search_extra"]
    if "search" in steps:
        out["search"] = (steps["search"][0], f"measured ({steps['search'][1]}: window.json's search step)")
    elif m:
        cold = float(m.group(1))
        out["search"] = (3 * cold + extra[0], f"3 inception_v3 searches at {cold:.1f} s each, measured (H200 "
                                               f"2026-11-26: bench_gpu_search.txt, cold; the plan-cache-warm one "
                                               f"costed as cold), + {extra[0]:.0f} s assumed: {extra[1]}")
    else:
        out["search"] = (3 * 80.0 + extra[0], f"assumed: 3 inception_v3 searches at 80 s and {extra[1]}")
    runs = hl.EXPERIMENT.runs(Context(out=Path("x"), devices=["cuda"]))
    first, _ = hl.estimate(runs, gpu, costs)
    reduced = [r.name for r in runs if max(r.plan.batch_sizes) == 1 and r.plan.precisions != ["fp32"]]
    out["headline"] = (first, "the experiment's own estimate of its batch-1 part (ios-bench experiment headline "
                              "--device cuda --dry-run: measured and assumed figures named there), its fp16 step "
                              f"({', '.join(reduced) or 'none'}) costed as fp32's figures, assumed; the rest "
                              "continues in later calls")
    return out


def step_command(name: str, work: Path, room: float, fake: bool, extra: list[str]) -> list[str]:
    """Step ``name``'s command with ``room`` seconds (its own deadline or budget)."""
    py = sys.executable
    if name == "doctor":
        return [py, "-m", "ios_bench", "doctor", "--no-lock-clocks", "--timeout", "90", "--device",
                *(["cpu", "--frameworks", "ios"] if fake else ["cuda", "--frameworks", DOCTOR_FRAMEWORKS])]
    if name == "fidelity":
        return [py, str(ROOT / "benchmarks" / "gpu_fidelity.py"), "--budget", str(max(1, int(room / 2))),
                *(["--fake", "--models", "sample", "--image-size", "10"] if fake else ["--models", FIDELITY_MODELS])]
    if name == "search":
        return [py, str(ROOT / "benchmarks" / "bench_gpu_search.py"),
                *(["--fake", "--models", "sample", "--image-size", "10", "-r", "1", "-s", "2"] if fake
                  else ["--models", SEARCH_MODELS])]
    return headline_command(work / "headline", room, extra, fake)


def headline_command(out: Path, deadline: float, extra: list[str], fake: bool = False) -> list[str]:
    """The experiment's command for this window (``--resume`` where ``out`` holds it already)."""
    cmd = [sys.executable, "-m", "ios_bench", "experiment", "headline", "--device", "cpu" if fake else "cuda",
           *(["--quick"] if fake else []), "--out", str(out), "--deadline", str(max(1, int(deadline))),
           "--no-progress", *extra]
    if (out / "experiment.json").is_file():
        cmd.append("--resume")
    return cmd


def window_env(work: Path, site: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["IOS_BENCH_CACHE"] = str(work / "profiles.sqlite")  # stage costs and cuDNN plans, kept between calls
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return env


def _child_setup() -> None:  # pragma: no cover - runs in the child, between fork and exec
    """In the step's process: SIGINT at its default (an inherited 'ignore' would make the window's
    interrupt a no-op), and on Linux SIGKILL when this script dies (PR_SET_PDEATHSIG), so that a
    step never outlives the command that started it and keeps the GPU busy into the next call."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # an ignored signal stays ignored across exec; a default one not
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_RUNNING: list = []  # the step running now: killed with its group when this script exits


def _kill_running() -> None:
    import signal

    for proc in list(_RUNNING):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def run_until(cmd: list[str], env: dict, seconds: float, log: Path | None = None) -> int:
    """``cmd`` until it ends or ``seconds`` pass; then SIGINT (an experiment stops as on ^C, its
    report rewritten), and SIGKILL to its process group :data:`KILL_AFTER_S` later. Its exit code
    (130 or -9 when stopped). Its output goes to ``log`` (else this script's)."""
    import atexit
    import signal

    atexit.register(_kill_running)
    out = open(log, "ab") if log is not None else None
    try:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True, preexec_fn=_child_setup,
                                stdout=out, stderr=subprocess.STDOUT if out else None, stdin=subprocess.DEVNULL)
        _RUNNING.append(proc)
        try:
            return proc.wait(timeout=max(1.0, seconds))
        except subprocess.TimeoutExpired:
            print(f"the window's {seconds:.0f} s for this step are spent: interrupting it", flush=True)
            proc.send_signal(signal.SIGINT)
            try:
                return proc.wait(timeout=KILL_AFTER_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                return proc.wait()
        except BaseException:  # this script interrupted or killed softly: the step goes with it
            _kill_running()
            raise
        finally:
            if proc in _RUNNING:
                _RUNNING.remove(proc)
            try:  # what the step left behind in its group
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    finally:
        if out is not None:
            out.close()
