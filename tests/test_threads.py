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
