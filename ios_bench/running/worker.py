"""One cell in its own process: ``python -m ios_bench.running.worker SPEC_JSON``.

The parent (:mod:`ios_bench.running.sweep`) starts one worker per task with the thread budget already in
its environment; the worker sets the same variables again before importing any framework, runs
the task and writes its result as JSON to ``spec["result_path"]`` (atomically). A worker that
crashes or hangs writes nothing; the parent then records the failure with the stderr tail.

Tasks:
  probe      which adapters can run on the device, and their versions
  reference  the oracle output for (model, batch), saved once per run (refs/)
  optimize   an IOS cell's schedule, searched and saved (schedules/): never timed in this process
  doctor     one framework's GPU path on a small graph against the oracle (ios-bench doctor)
  doctor_ios the IOS runtime's GPU paths against the oracle (ios_bench.machine.gpu_paths)
  cell       one round of one cell (``ios_bench.planning.cells.CellSpec``): build one framework (or load an
             IOS schedule), check its output, time it inside an interference window (what else
             used the machine, and the canary before and after: ``ios_core.measurement.interference``), check
             the output of the last timed call again (status ``wrong`` when either check fails)
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

from ios_core.measurement.threads import THREAD_VARS, apply_spin_policy, thread_env  # noqa: F401 - re-exported

PARENT_ENV = "IOS_BENCH_PARENT_PID"
# task kind -> (module, function): each kind's code lives in a module of its own, imported only
# by the workers that run it
TASKS = {"probe": ("ios_bench.running.task_setup", "task_probe"),
         "reference": ("ios_bench.running.task_setup", "task_reference"),
         "optimize": ("ios_bench.running.task_optimize", "task_optimize"),
         "cell": ("ios_bench.running.task_cell", "task_cell"),
         "doctor": ("ios_bench.running.task_doctor", "task_doctor"),
         "doctor_ios": ("ios_bench.running.task_doctor", "task_doctor_ios")}


def die_with_parent() -> None:
    """On Linux: SIGKILL this worker when the sweep process that started it dies (a killed sweep
    leaves no orphan running). Set here, at the worker's start, rather than in a ``preexec_fn``
    (unsafe in a parent with threads); if the parent died before this ran, exit at once."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        return
    if os.getppid() != int(parent):
        os._exit(1)


def load_plugins() -> list[str]:
    """Import the modules named in ``IOS_BENCH_PLUGINS`` (comma-separated); they may register
    extra models (``ios_core.models.register``) or adapters (``adapters.register``)."""
    import importlib

    names = [m.strip() for m in os.environ.get("IOS_BENCH_PLUGINS", "").split(",") if m.strip()]
    for name in names:
        importlib.import_module(name)
    return names


# the frameworks' top-level modules; a worker records which it imported (``frameworks_imported``):
# none but those its cell runs (an IOS cell on ONNX Runtime kernels imports no torch)
FRAMEWORK_MODULES = ("torch", "tensorflow", "jax", "onnxruntime", "openvino", "tvm", "tensorrt", "cupy")


def _threads_seen(result: dict) -> None:
    result["frameworks_imported"] = [m for m in FRAMEWORK_MODULES if m in sys.modules]
    if "torch" in sys.modules:
        try:
            result["torch_threads"] = sys.modules["torch"].get_num_threads()
        except Exception:
            pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()
    spec = json.loads(argv[0])
    threads = spec.get("threads")
    if threads:  # before any framework import
        os.environ.update(thread_env(int(threads)))
    for warning in apply_spin_policy(spec.get("spin_policy")):  # before any framework import, too
        print(f"warning: {warning}", file=sys.stderr)
    if str(spec.get("device", "")).startswith("cuda"):
        # fp32 means fp32 in every library of a GPU worker (cuDNN and cuBLAS called by TVM, ONNX
        # Runtime, TensorFlow, ...): the driver-level switch that disables TF32 everywhere
        os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
    from ios_bench.running.sideeffects import quiet_environment

    quiet_environment()  # no telemetry files in the home folder (a Ray worker inherits no parent env)
    import faulthandler

    faulthandler.enable()  # a segfault leaves a Python traceback in the stderr tail
    result: dict = {"pid": os.getpid()}
    t0 = time.perf_counter()
    try:
        load_plugins()
        task = spec["task"]
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}")
        module, name = TASKS[task]
        run = getattr(importlib.import_module(module), name)
        if task == "cell":  # a round fills in the result as it goes (its phase, should it fail)
            result = run(spec, result)
        else:
            result.update(run(spec))
    except BaseException as e:  # noqa: B036 - every failure becomes this cell's record
        import traceback

        traceback.print_exc()
        phase = result.pop("phase", None)
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        from ios_bench.machine.device_memory import oom_reason

        oom = oom_reason(e, spec.get("device", ""))  # a cell that does not fit the GPU says so
        result.update(status="failed", reason=f"{phase + ': ' if phase else ''}" + (oom or f"{type(e).__name__}"
                      + (f": {msg}" if msg else "")))
    _threads_seen(result)
    try:
        import resource

        result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    except Exception:
        pass
    result["worker_seconds"] = time.perf_counter() - t0
    from ios_core.atomic import atomic_write_json

    atomic_write_json(spec["result_path"], result, indent=None)
    return 0 if result.get("status") in ("ok", "skipped") else 1


def fast_exit(rc: int) -> None:
    """End the worker without the interpreter's teardown: its result is written (atomically) and
    nothing it did is still to be saved, yet unloading TensorFlow takes about 1 s and torch about
    0.35 s on a 2-core machine, in every round of a sweep. Output is flushed first; children left
    behind (a compiler's worker pool) are reaped by the parent (``launch.run_worker`` kills the
    worker's session once it exits). ``IOS_BENCH_WORKER_TEARDOWN=1`` keeps the interpreter's own
    exit (a profiler or a coverage tool writes its file then)."""
    if os.environ.get("IOS_BENCH_WORKER_TEARDOWN") == "1":
        sys.exit(rc)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # pragma: no cover - a closed stream has nothing left to lose
            pass
    os._exit(rc)


if __name__ == "__main__":
    fast_exit(main())
