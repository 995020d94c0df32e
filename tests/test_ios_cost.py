"""Costs that predict the runtime, validated schedules, the one thread/spin environment, and the
harness records of IOS cells (provider, predicted_ms, sequential_ms)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ios_core import threads
from ios_core.cost import cache as cost_cache
from ios_core.cost.measured import MeasuredCostModel
from ios_core.ir import GraphBuilder
from ios_core.optimizer import schedule
from ios_core.optimizer.stage import Stage
from tests.runtime_helpers import mixed_graph

FAST = dict(warmup=1, number=1, repeat=2, min_sample_ms=None)


def _fan(channels: int = 8):
    """Three parallel convolutions of one input, concatenated."""
    b = GraphBuilder("fan", (channels, 10, 10))
    x = b.input
    outs = [b.conv(x, channels, k, padding=k // 2) for k in (1, 3, 3)]
    b.end_block(b.concat(outs))
    g = b.finish()
    return g, g.blocks[0].nodes


# ---- the thread environment ---------------------------------------------------------------------
def test_thread_env_uses_the_one_list():
    env = threads.thread_env(3)
    assert all(env[k] == "3" for k in threads.THREAD_VARS)
    assert env["TF_NUM_INTEROP_THREADS"] == "1"
    from ios_bench import envinfo, worker

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


# ---- the profile database key ----------------------------------------------------------------------
def test_cache_key_includes_spin_environment_and_provider(monkeypatch, tmp_path):
    monkeypatch.setenv("GOMP_SPINCOUNT", "20000")
    monkeypatch.setenv(threads.POLICY_VAR, "short-spin")
    a = cost_cache.device_fingerprint("cpu")
    monkeypatch.setenv("GOMP_SPINCOUNT", "300000")
    b = cost_cache.device_fingerprint("cpu")
    monkeypatch.setenv(threads.POLICY_VAR, "default")
    c = cost_cache.device_fingerprint("cpu")
    assert len({a[0], b[0], c[0]}) == 3
    assert json.loads(a[1])["environment"]["GOMP_SPINCOUNT"] == "20000"
    # a different spin environment does not read the other's rows
    g, nodes = _fan()
    monkeypatch.setenv("GOMP_SPINCOUNT", "20000")
    db = tmp_path / "p.sqlite"
    MeasuredCostModel(threads=1, cache=db, **FAST).stage_latency(Stage("parallel", [[nodes[0]]]), 1)
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    cm = MeasuredCostModel(threads=1, cache=db, **FAST)
    cm.stage_latency(Stage("parallel", [[nodes[0]]]), 1)
    assert cm.hits == 0 and cm.measured == 1
    with pytest.raises(ValueError, match="provider 'nope' is not available"):
        MeasuredCostModel(provider="nope", cache=False)


# ---- the calibrated and hybrid modes ------------------------------------------------------------------
def test_calibrated_mode_measures_operators_concurrently_and_caches(tmp_path):
    g, nodes = _fan()
    db = tmp_path / "p.sqlite"
    cm = MeasuredCostModel(threads=2, cache=db, **FAST)
    assert cm.mode == "calibrated"  # the default
    par = Stage("parallel", [[nodes[0]], [nodes[1]], [nodes[2]]])
    one = Stage("parallel", [[nodes[1]]])
    t_par = cm.stage_latency(par, 1)
    t_one = cm.stage_latency(one, 1)
    assert t_par > 0 and t_one > 0
    # distinct operators x (the full budget for the single stage, concurrent 1+1 for the parallel
    # one): two distinct convolution shapes concurrent (the two 3x3 are the same operator), one
    # alone, and the pool dispatch
    assert cm.measured == 4
    assert t_par >= cm.dispatch_ms()
    again = MeasuredCostModel(threads=2, cache=db, **FAST)
    assert again.stage_latency(par, 1) == t_par and again.stage_latency(one, 1) == t_one
    assert again.measured == 0 and again.hits >= 3


def test_hybrid_mode_measures_or_prunes_every_concurrent_stage():
    g, nodes = _fan()
    cm = MeasuredCostModel(threads=2, cache=False, mode="hybrid", **FAST)
    stages = [Stage("parallel", [[nodes[0]], [nodes[1]]]), Stage("parallel", [[nodes[1]], [nodes[2]]]),
              Stage("parallel", [[nodes[0]], [nodes[1]], [nodes[2]]])]
    for st in stages:
        assert cm.stage_latency(st, 1) > 0
    singles = 2  # the 1x1 and the 3x3 operators at the full budget
    composed_shares = 2  # composition at one thread each (optimistic, alone)
    primed = cm.measured - singles - composed_shares - 1  # and the pool dispatch
    assert cm.pruned + primed == len(stages)
    with pytest.raises(ValueError, match="mode must be one of"):
        MeasuredCostModel(mode="fast", cache=False)


# ---- validated schedules ---------------------------------------------------------------------------
class _Judge:
    """A deterministic cost model that claims parallel stages are free and whose validation
    reports what the test tells it."""

    def __init__(self, kept):
        self.kept = kept
        self.asked = []

    def stage_latency(self, stage, batch_size):
        return 1.0 if len(stage.groups) == 1 else 0.1

    def validate_schedule(self, schedule, sequential, batch_size):
        self.asked.append((schedule, sequential))
        return {"schedule_ms": 2.0 if self.kept == "sequential" else 1.0, "sequential_ms": 1.5, "kept": self.kept}


def test_optimizer_returns_sequential_when_the_schedule_measures_slower():
    g, _ = _fan()
    judge = _Judge("sequential")
    res = schedule(g, "both", judge)
    out, st = res.graph, res.stats
    assert st.validation["kept"] == "sequential" and st.validation["schedule_ms"] == 2.0
    assert all(len(stage) == 1 and len(stage[0]) == 1 for b in out.blocks for stage in b.stages)
    assert st.cost_ms == pytest.approx(st.validation["sequential_cost_ms"])
    assert st.validation["schedule_cost_ms"] < st.validation["sequential_cost_ms"]
    assert "SEQUENTIAL schedule is returned" in st.summary()
    kept = schedule(g, "both", _Judge("schedule"))
    assert kept.stats.validation["kept"] == "schedule"
    assert any(len(stage) > 1 for b in kept.graph.blocks for stage in b.stages)
    assert schedule(g, "both", _Judge("schedule"), validate=False).stats.validation is None
    j = _Judge("schedule")
    schedule(g, "sequential", j)
    assert j.asked == []  # nothing to validate


def test_measured_validation_times_both_with_the_runtime():
    g, _ = _fan()
    g.init_weights(0)
    cm = MeasuredCostModel(threads=2, cache=False, **FAST)
    v = schedule(g, "parallel", cm).stats.validation
    assert v["schedule_ms"] > 0 and v["sequential_ms"] > 0 and v["kept"] in ("schedule", "sequential")
    assert (v["kept"] == "schedule") == (v["schedule_ms"] < v["sequential_ms"])
    assert v["provider"] == "torch"


# ---- harness: labels, providers, the report --------------------------------------------------------
def test_provider_labels_and_keys():
    from ios_bench.cells import label, schedule_key, split_framework

    assert schedule_key("both") == "ios-both" and label("ios-both") == "IOS-Both"
    assert schedule_key("both", "onnxruntime") == "ios-both[onnxruntime]"
    assert label("ios-both[onnxruntime]") == "IOS-Both[onnxruntime]"
    assert split_framework("ios-both[openvino]") == ("ios-both", "openvino")
    assert split_framework("ios-greedy") == ("ios-greedy", "torch")
    assert split_framework("onnxruntime") == ("onnxruntime", None)


def test_bad_ios_provider_is_a_one_line_error(run_cli, tmp_path):
    code, out, err = run_cli(["run", "--models", "sample", "--ios-providers", "torch,cuda-magic",
                              "--out", str(tmp_path / "r")])
    assert code == 2 and "unknown IOS provider cuda-magic" in err


def test_report_shows_prediction_error_and_flags_slower_schedules(tmp_path):
    from ios_bench.report import SLOWER_FLAG, ios_table, slower_than_sequential

    rows = [dict(model="m", batch_size=1, framework="ios-sequential", device="cpu", status="ok", schedule="sequential",
                 provider="torch", median_ms=10.0, predicted_ms=9.0, sequential_ms=10.0, optimize_seconds=1.0),
            dict(model="m", batch_size=1, framework="ios-both", device="cpu", status="ok", schedule="both",
                 provider="torch", median_ms=12.0, predicted_ms=8.0, sequential_ms=10.0, optimize_seconds=2.0),
            dict(model="m", batch_size=1, framework="ios-both[openvino]", device="cpu", status="ok", schedule="both",
                 provider="openvino", median_ms=5.0, predicted_ms=5.5, sequential_ms=6.0, optimize_seconds=2.0)]
    df = pd.DataFrame(rows)
    flagged = slower_than_sequential(df)
    assert [r["framework"] for r in flagged] == ["ios-both"]
    md = ios_table(df, "cpu", 1).md()
    assert "| m | IOS-Both | torch | 12.000 | 8.000 | -33.3% | 10.000 | 0.83x | " + SLOWER_FLAG in md
    # Markdown cells escape Markdown syntax (ios_bench/escape.md): the brackets render as [openvino]
    assert r"| m | IOS-Both\[openvino\] | openvino | 5.000 | 5.500 | +10.0% | 6.000 | 1.20x | ok |" in md
    assert "Mean absolute prediction error: 17.8% over 3 cells" in md


def test_bad_spin_policy_is_a_one_line_error(run_cli, monkeypatch):
    monkeypatch.setenv(threads.POLICY_VAR, "hot")
    code, out, err = run_cli(["list", "models"])
    assert code == 2 and "unknown spin policy 'hot'" in err


def test_second_optimization_reuses_block_schedules(tmp_path):
    g, _ = _fan()
    g.init_weights(0)
    db = tmp_path / "p.sqlite"
    first = schedule(g, "both", MeasuredCostModel(threads=2, cache=db, **FAST), validate=False)
    assert first.stats.blocks_reused == 0 and first.stats.states > 0
    cm = MeasuredCostModel(threads=2, cache=db, **FAST)
    second = schedule(g, "both", cm, validate=False)
    st = second.stats
    assert st.blocks_reused == len(g.blocks) and st.states == 0 and cm.calls == 0
    assert [b.stages for b in second.graph.blocks] == [b.stages for b in first.graph.blocks]
    assert st.cost_ms == pytest.approx(first.stats.cost_ms)
    assert "block schedules reused" in st.summary()
    # other search parameters or another provider/mode are other keys
    other = schedule(g, "both", MeasuredCostModel(threads=2, cache=db, mode="composed", **FAST), validate=False)
    assert other.stats.blocks_reused == 0
