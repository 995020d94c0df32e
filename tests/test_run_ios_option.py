"""``ios-bench run --ios-option KEY=VALUE`` (the IOS optimizer settings of every IOS cell: the
pruning parameters r and s, ...) and ``--frameworks none`` (IOS schedules only): what lands in the
plan, and bad input as one line with exit code 2."""

from __future__ import annotations

import json

import pytest

from ios_bench.commands import run as run_cmd


class _Sweep:
    """Stands in for the sweep: keeps the plan it was given, runs nothing."""

    plans: list = []

    def __init__(self, plan, folder, **kwargs):
        self.plans.append((plan, folder, kwargs))

    def run(self):
        return {"ran": 0, "ok": 0, "wrong": 0, "failed": 0, "skipped": 0}

    def say(self, text):
        pass


@pytest.fixture
def captured(monkeypatch):
    _Sweep.plans = []
    monkeypatch.setattr(run_cmd, "Sweep", _Sweep)
    return _Sweep.plans


def test_ios_options_and_no_frameworks_land_in_the_plan(run_cli, tmp_path, captured):
    code, out, err = run_cli(["run", "--models", "sample", "--frameworks", "none", "--schedules", "both",
                              "--ios-option", "max_group_size=2", "--ios-option", "max_num_groups=3",
                              "--ios-option", "cost_cache=private", "--out", str(tmp_path / "r"), "--no-report"])
    assert code in (0, None), err
    plan = captured[0][0]
    assert plan.frameworks == [] and plan.schedules == ["both"]
    assert plan.ios_options == {"max_group_size": 2, "max_num_groups": 3, "cost_cache": "private"}
    assert json.loads(json.dumps(plan.to_dict()))["ios_options"]["max_group_size"] == 2


@pytest.mark.parametrize("args,message", [
    (["--ios-option", "max_group_size=0"], "max_group_size is '0', expected a positive integer"),
    (["--ios-option", "max_group_size=two"], "expected a positive integer"),
    (["--ios-option", "nosuch=1"], "unknown IOS option 'nosuch'"),
    (["--ios-option", "max_num_groups"], "expected KEY=VALUE"),
    (["--ios-option", "cost_cache=sometimes"], "cost_cache is 'sometimes'"),
])
def test_bad_ios_options_are_one_line(run_cli, tmp_path, captured, args, message):
    code, out, err = run_cli(["run", "--models", "sample", *args, "--out", str(tmp_path / "r")])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert captured == [] and not (tmp_path / "r").exists()
