"""ios_core.measurement.threads: the one thread environment, the spin/wait policies, and where they are applied
(an adapter's session, the CLI's one-line refusal of an unknown policy)."""

from __future__ import annotations

import pytest

from ios_core.measurement import threads
from tests.runtime_helpers import mixed_graph


def test_thread_env_uses_the_one_list():
    env = threads.thread_env(3)
    assert all(env[k] == "3" for k in threads.THREAD_VARS)
    assert env["TF_NUM_INTEROP_THREADS"] == "1"
    from ios_bench.machine import envinfo
    from ios_bench.running import worker

    assert worker.THREAD_VARS is threads.THREAD_VARS  # the harness has no list of its own
    assert set(threads.THREAD_VARS) <= set(envinfo.THREAD_ENV_VARS)


def test_spin_policies_set_or_remove_variables(monkeypatch):
    base = {"GOMP_SPINCOUNT": "5", "OMP_WAIT_POLICY": "ACTIVE", "PATH": "/bin"}
    short = threads.spin_env("short-spin", base)
    assert short["GOMP_SPINCOUNT"] == "20000" and "OMP_WAIT_POLICY" not in short and short["PATH"] == "/bin"
    assert short[threads.POLICY_VAR] == "short-spin"
    passive = threads.spin_env("passive", base)
    assert passive["OMP_WAIT_POLICY"] == "PASSIVE" and "GOMP_SPINCOUNT" not in passive
    default = threads.spin_env("default", base)
    assert "GOMP_SPINCOUNT" not in default and "OMP_WAIT_POLICY" not in default
    assert threads.ort_session_config("passive")["session.intra_op.allow_spinning"] == "0"
    assert threads.ort_session_config("short-spin")["session.intra_op.allow_spinning"] == "1"
    assert threads.ort_session_config("default") == {}
    monkeypatch.setenv(threads.POLICY_VAR, "passive")
    assert threads.policy_name() == "passive" and threads.spin_policy()["name"] == "passive"
    monkeypatch.setenv(threads.POLICY_VAR, "bogus")
    with pytest.raises(ValueError, match="unknown spin policy 'bogus'"):
        threads.policy_name()


def test_apply_spin_policy_after_torch_warns(monkeypatch):
    import torch  # noqa: F401 - loaded: OpenMP has read its environment already

    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv(threads.POLICY_VAR, raising=False)
    warnings = threads.apply_spin_policy("short-spin")
    assert warnings and "after torch was imported" in warnings[0]
    import os

    assert os.environ["GOMP_SPINCOUNT"] == "20000"
    assert threads.apply_spin_policy("short-spin") == []  # nothing changed now


def test_onnxruntime_adapter_applies_the_policy(monkeypatch):
    import adapters

    a = adapters.get("onnxruntime")
    if a.available() is not None:
        pytest.skip(a.available())
    monkeypatch.setenv(threads.POLICY_VAR, "passive")
    c = a.build(mixed_graph().init_weights(0), 1, "cpu", 1)
    assert c.info["spin_policy"] == "passive"
    assert c.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_bad_spin_policy_is_a_one_line_error(run_cli, monkeypatch):
    monkeypatch.setenv(threads.POLICY_VAR, "hot")
    code, out, err = run_cli(["list", "models"])
    assert code == 2 and "unknown spin policy 'hot'" in err


# Every CPU adapter at a budget of 1 thread, each in a fresh process without the harness's thread
# variables: the adapter alone must keep the budget, all its pools together. (tvm: its host target, which
# turns off what the VM hides: adapters/tvm_target.py.)
BUDGET_CASES = {"ios": {}, "torch": {}, "tensorflow": {}, "tensorflow-xla": {}, "jax-xla": {}, "onnxruntime": {},
                "onnxruntime-parallel": {}, "openvino": {}, "tvm": {}, "tflite": {}}
# CPU time over wall time of one thread's work: 1, plus a margin for the engines' own bookkeeping threads
MAX_CPU_OVER_WALL = 1.15


@pytest.mark.parametrize("name", list(BUDGET_CASES))
def test_every_adapter_keeps_a_budget_of_one_thread(name):
    import json
    import subprocess
    import sys

    import adapters
    from tests.thread_probe import clean_env

    if name not in adapters.names() or adapters.get(name).available("cpu") is not None:
        pytest.skip(f"{name} is not available here")
    p = subprocess.run([sys.executable, "-m", "tests.thread_probe", name, "1", json.dumps(BUDGET_CASES[name])],
                       capture_output=True, text=True, env=clean_env(), timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    # measured (a machine busy with other work can hide a second busy thread, never invent one) ...
    assert got["cpu_over_wall"] <= MAX_CPU_OVER_WALL, (
        f"{name} kept {got['cpu_over_wall']:.2f} cores busy at a budget of 1 thread ({got['ms']:.0f} ms a call; "
        f"pools {got['thread_pools']})")
    # ... and recorded: every pool's size as the engine reports it back, within the budget whatever the load
    assert got["thread_pools"], f"{name}: the build does not record how its thread pools were set"
    assert all(v.split(" ", 1)[0] in ("1", "unused") for v in got["thread_pools"].values()), got["thread_pools"]


def test_split_budget_keeps_every_pool_within_the_budget():
    assert threads.split_budget(4, None) == (4, 1, 4)  # one operator at a time unless asked
    assert threads.split_budget(4, None, default_inter=4) == (4, 4, 1)
    assert threads.split_budget(4, 3) == (4, 3, 1)
    assert threads.split_budget(2, 8) == (2, 2, 1)  # never more inter-op threads than the budget
    for n in range(1, 9):
        for inter in range(1, 10):
            budget, i, j = threads.split_budget(n, inter)
            assert budget == n and i * j <= n and i >= 1 and j >= 1
    with pytest.raises(ValueError, match="inter_op_threads must be >= 1"):
        threads.split_budget(2, 0)


def test_cpu_over_wall_is_cpu_time_over_wall_time_of_the_calls(monkeypatch):
    import time

    clock = {"wall": 100.0, "cpu": 7.0}

    def two_threads_busy():  # 10 ms of wall time, 20 ms of CPU time
        clock["wall"] += 0.010
        clock["cpu"] += 0.020

    monkeypatch.setattr(time, "perf_counter", lambda: clock["wall"])
    monkeypatch.setattr(time, "process_time", lambda: clock["cpu"])
    assert threads.cpu_over_wall(two_threads_busy, 3) == pytest.approx(2.0)
    monkeypatch.undo()
    assert threads.cpu_over_wall(lambda: time.sleep(0.02), 3) < 0.3  # sleeping: no CPU, whatever the load
