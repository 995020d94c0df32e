"""ios-bench profile: the stage latency view of a schedule."""

from __future__ import annotations

from ios_core import models


def test_profile_reference_schedule(data_dir, run_cli):
    code, out, err = run_cli(["profile", "--schedule", str(data_dir / "tiny_schedule.json"), "--batch", "2",
                           "--repeat", "2", "--warmup", "1"])
    assert code == 0, err
    assert "Parallel(" in out and "Given schedule:" in out and "Stage latency: [" in out
    lines = [ln for ln in out.splitlines() if ln.strip()[:1].isdigit() and "%" in ln]
    assert len(lines) == 6  # six stages, two of them with two groups
    assert sum(1 for ln in lines if ln.split()[1] == "2") == 2
    assert "2 parallel" in out and "whole graph" in out


def test_profile_model_json_sequential(tmp_path, run_cli):
    g = models.get("sample", input_shape=(16, 8, 8))
    path = tmp_path / "sample_small.json"
    g.save(path)
    code, out, err = run_cli(["profile", "--model", str(path), "--repeat", "2", "--no-show-graph"])
    assert code == 0, err
    assert out.startswith("Sequential schedule:")
    assert "5 stages (0 parallel)" in out


def test_profile_bad_input(data_dir, run_cli):
    code, _, err = run_cli(["profile"])
    assert code == 2 and "--model or --schedule" in err
    code, _, err = run_cli(["profile", "--schedule", str(data_dir / "tiny_schedule.json"), "--strategy", "both"])
    assert code == 2 and "drop --strategy" in err
    code, _, err = run_cli(["profile", "--model", "no_such_model"])
    assert code == 2


def test_profile_measures_costs_on_its_provider(monkeypatch, tmp_path, run_cli):
    """``profile --strategy S --cost measured --provider P`` optimizes with stages timed on P, the
    provider it then profiles on (not the default torch)."""
    import pytest

    from ios_core.cost import measured

    if "onnxruntime" not in measured._planner_providers():
        pytest.skip("onnxruntime is not a runtime provider here")
    made = []
    real = measured.MeasuredCostModel.__init__

    def spy(self, *a, **kw):
        made.append(kw.get("provider"))
        real(self, *a, **kw)

    monkeypatch.setattr(measured.MeasuredCostModel, "__init__", spy)
    monkeypatch.setenv("IOS_BENCH_CACHE", str(tmp_path / "profiles.sqlite"))
    g = models.get("sample", input_shape=(16, 8, 8))
    path = tmp_path / "sample_small.json"
    g.save(path)
    code, out, err = run_cli(["profile", "--model", str(path), "--strategy", "parallel", "--cost", "measured",
                              "--provider", "onnxruntime", "--repeat", "2", "--no-show-graph"])
    assert code == 0, err
    assert made == ["onnxruntime"]
