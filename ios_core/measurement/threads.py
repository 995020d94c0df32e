"""The thread environment: one rule for the runtime, the cost models, every adapter and the
harness's cell workers.

Two things are defined here, once:

* the **thread budget** (:func:`resolve_threads`), how an engine with an inter-op pool beside its
  intra-op pool divides it (:func:`split_budget`: all its pools together stay within the budget),
  the record of how each pool was set (:func:`pool_record`), the environment variables that carry it
  to every library (:data:`THREAD_VARS`, :func:`thread_env`) and the check that a call kept it
  (:func:`cpu_over_wall`);
* the **spin/wait policy** (:data:`SPIN_POLICIES`, :func:`spin_policy`): how long an idle
  intra-op thread busy-waits for more work before it sleeps. It matters for concurrency on
  few cores: after a 2-thread parallel region, libgomp's idle team thread spins (300,000
  spins by default) and competes for the cores with the next stage's concurrent groups
  (docs/runtime.md). The policy is chosen with ``IOS_BENCH_SPIN_POLICY`` (default
  ``short-spin``) and applies to every cell of every framework; ``docs/threads.md`` lists
  what each library gets and what the choice measured.

What each library gets:

- OpenMP (torch, oneDNN, the IOS runtime's torch provider): ``GOMP_SPINCOUNT`` (libgomp reads
  it once, when it loads, so it is set in the environment before any framework import);
  ``OMP_WAIT_POLICY`` is set or removed with it (it would override the spin count).
- ONNX Runtime: the session config entries ``session.intra_op.allow_spinning`` and
  ``session.inter_op.allow_spinning`` (:func:`ort_session_config`).
- OpenVINO: the CPU plugin has no public spin setting (oneTBB's scheduler decides): default.
- TensorFlow: no spin setting for Eigen's thread pool: default.
"""

from __future__ import annotations

import os

# Every variable that carries the intra-op thread budget to some library (one list: the harness's
# workers, env.json and the docs use it).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TVM_NUM_THREADS")
# Recorded with every run beside THREAD_VARS (set by thread_env / spin_env).
ENV_VARS = THREAD_VARS + ("TF_NUM_INTEROP_THREADS", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "KMP_BLOCKTIME")

POLICY_VAR = "IOS_BENCH_SPIN_POLICY"
DEFAULT_POLICY = "short-spin"

# name -> what each library gets. "env": variables set (None: removed); "ort": ORT allow_spinning.
SPIN_POLICIES: dict[str, dict] = {
    "short-spin": {
        "description": "idle intra-op threads spin briefly, then sleep: libgomp GOMP_SPINCOUNT=20000 "
                       "(~tens of microseconds instead of the default 300,000 spins), ONNX Runtime spinning "
                       "on (its spin is already short), OpenVINO and TensorFlow at their defaults",
        "env": {"GOMP_SPINCOUNT": "20000", "OMP_WAIT_POLICY": None},
        "ort_allow_spinning": True,
    },
    "passive": {
        "description": "idle intra-op threads sleep at once: OMP_WAIT_POLICY=PASSIVE (libgomp spins 0), "
                       "ONNX Runtime spinning off, OpenVINO and TensorFlow at their defaults",
        "env": {"GOMP_SPINCOUNT": None, "OMP_WAIT_POLICY": "PASSIVE"},
        "ort_allow_spinning": False,
    },
    "default": {
        "description": "every library's own default (libgomp spins 300,000 times, ONNX Runtime spins)",
        "env": {"GOMP_SPINCOUNT": None, "OMP_WAIT_POLICY": None},
        "ort_allow_spinning": None,
    },
}


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def resolve_threads(threads: int | None) -> int:
    """The intra-op thread budget: ``threads`` or, when not given, the number of usable cores
    (never the process's current torch setting, which earlier work may have changed)."""
    if threads is None:
        return usable_cores()
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return int(threads)


def split_budget(threads: int | None, inter_op_threads: int | None = None, default_inter: int = 1
                 ) -> tuple[int, int, int]:
    """The one rule for an engine with an inter-op pool (concurrent operators) beside its intra-op pool
    (one operator's threads): ``(budget, inter, intra)`` with ``inter * intra <= budget``.

    ``inter`` is ``inter_op_threads`` (default ``default_inter``: 1, one operator at a time, unless the
    engine's mode is to run operators concurrently), capped at the budget; ``intra`` is the budget
    divided among them. An engine left at its own default would size its inter-op pool from the
    machine's cores (TensorFlow, ONNX Runtime's parallel mode, torch), on top of the intra-op budget."""
    n = resolve_threads(threads)
    inter = default_inter if inter_op_threads is None else int(inter_op_threads)
    if inter < 1:
        raise ValueError(f"inter_op_threads must be >= 1, got {inter_op_threads}")
    inter = min(n, inter)
    return n, inter, max(1, n // inter)


def pool_record(**pools: tuple[object, str]) -> dict[str, str]:
    """``info["thread_pools"]`` of a build: each pool's size as the engine reports it back and how it was
    set (``pool_record(intra_op=(1, "set_intra_op_parallelism_threads"))`` -> ``{"intra_op": "1
    (set_intra_op_parallelism_threads)"}``); a size the engine cannot report is ``"?"``."""
    return {name: f"{'?' if value is None else value} ({how})" for name, (value, how) in pools.items()}


def cpu_over_wall(call, calls: int = 5) -> float:
    """This process's CPU time over the wall time of ``calls`` calls of ``call``: about 1 when the calls
    kept one core busy, above 1 when more threads computed at once. A budget of 1 thread kept means at
    most about 1 (less when the machine's other work took the core part of the time)."""
    import time

    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        call()
    wall = time.perf_counter() - w0
    return (time.process_time() - c0) / wall if wall > 0 else 0.0


def thread_env(threads: int) -> dict[str, str]:
    """Environment variables giving every library the same thread budget."""
    env = {k: str(int(threads)) for k in THREAD_VARS}
    env["TF_NUM_INTEROP_THREADS"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def policy_name(name: str | None = None) -> str:
    """The spin policy in effect: ``name``, else ``IOS_BENCH_SPIN_POLICY``, else the default."""
    name = name or os.environ.get(POLICY_VAR) or DEFAULT_POLICY
    if name not in SPIN_POLICIES:
        raise ValueError(f"unknown spin policy {name!r} ({POLICY_VAR}); choose one of {', '.join(SPIN_POLICIES)}")
    return name


def spin_policy(name: str | None = None) -> dict:
    """The policy as a record: name, description, environment and per-library settings."""
    name = policy_name(name)
    p = SPIN_POLICIES[name]
    return {"name": name, "description": p["description"],
            "env": {k: v for k, v in p["env"].items()},
            "onnxruntime": {"session.intra_op.allow_spinning": _ort_flag(p["ort_allow_spinning"])},
            "openvino": "library default (no spin setting in the CPU plugin's public properties)",
            "tensorflow": "library default (no spin setting for Eigen's thread pool)"}


def _ort_flag(v: bool | None) -> str:
    return "library default" if v is None else ("1" if v else "0")


def spin_env(name: str | None = None, base: dict | None = None) -> dict[str, str]:
    """``base`` (default: ``os.environ``) with the policy's variables set or removed."""
    env = dict(os.environ if base is None else base)
    env[POLICY_VAR] = policy_name(name)
    for k, v in SPIN_POLICIES[policy_name(name)]["env"].items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def apply_spin_policy(name: str | None = None) -> list[str]:
    """Set the policy in this process's environment. OpenMP reads it when it loads: call this
    before torch (or any framework) is imported. Returns warnings (empty when it took effect)."""
    import sys

    before = {k: os.environ.get(k) for k in SPIN_POLICIES[policy_name(name)]["env"]}
    new = spin_env(name)
    for k in list(os.environ):
        if k not in new:
            del os.environ[k]
    os.environ.update(new)
    changed = [k for k in before if before[k] != os.environ.get(k)]
    if changed and "torch" in sys.modules:
        return [f"spin policy {policy_name(name)!r} set after torch was imported: OpenMP already read "
                f"{', '.join(changed)} and will not see the change"]
    return []


def ort_session_config(name: str | None = None) -> dict[str, str]:
    """ONNX Runtime session config entries of the policy (``so.add_session_config_entry``)."""
    flag = SPIN_POLICIES[policy_name(name)]["ort_allow_spinning"]
    if flag is None:
        return {}
    v = "1" if flag else "0"
    return {"session.intra_op.allow_spinning": v, "session.inter_op.allow_spinning": v}


def environment_record() -> dict:
    """What env.json and the cost cache record: the policy and every thread/spin variable set."""
    return {"spin_policy": policy_name(), "vars": {k: os.environ[k] for k in ENV_VARS if k in os.environ}}
