"""The round's timing protocol from the command line to the record: time-bounded rounds by default
(``--warmup-time``, ``--sample-time``, ``--min-repeat``), ``--fixed-counts`` for the old one, a plan.json
written before the fields keeps its fixed protocol on ``--resume``, and nonsense refused in one line."""

from __future__ import annotations

import json

import pytest

from ios_bench.errors import InputError
from ios_bench.planning.plan import Plan
from tests.harness_helpers import cli

QUIET = ["--no-progress", "--no-report", "--rounds", "1", "--schedules", "none", "--min-sample-ms", "10"]


def _records(folder):
    return {r["framework"]: r for r in map(json.loads, (folder / "results.jsonl").read_text().splitlines())}


def test_a_sweep_times_each_cell_by_its_own_cost(tmp_path):
    # test-delay sleeps 400 ms a call: warmup 400 + 400 >= 500 ms -> 2 calls, no calibration call,
    # ceil(1000 / 400) = 3 samples; test-ref is under a millisecond: 3 warmup calls, calibrated to
    # samples of >= 10 ms, and the most samples (10)
    p = cli(["run", "--models", "tiny_a", "--frameworks", "test-ref,test-delay", "--adapter-option",
             "test-delay:delay_ms=400", "--out", "runs/t", "--sample-time", "1", "--warmup-time", "0.5",
             "--min-repeat", "2", *QUIET], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = _records(tmp_path / "runs/t")
    slow, fast = recs["test-delay"], recs["test-ref"]
    assert slow["protocol"]["mode"] == "time-bounded" and slow["protocol"]["sample_s"] == 1.0
    # (a round disturbed on a busy machine is measured again: every round ran the same protocol)
    assert {(r["warmup_calls"], r["calibration_calls"], r["samples"], r["number"])
            for r in slow["protocol"]["rounds"]} == {(2, 0, 3, 1)}
    assert len(slow["samples_ms"]) == 3 * (slow["rounds_used"] or len(slow["rounds"])) and slow["warmup"] == 2
    for f in fast["protocol"]["rounds"]:
        assert f["warmup_calls"] == 3 and f["samples"] == 10 and f["number"] > 1 and f["calibration_calls"] >= 1


def test_fixed_counts_is_the_old_protocol(tmp_path):
    p = cli(["run", "--models", "tiny_a", "--frameworks", "test-delay", "--adapter-option", "test-delay:delay_ms=300",
             "--out", "runs/f", "--fixed-counts", "--warmup", "1", "--repeat", "4", *QUIET], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    rec = _records(tmp_path / "runs/f")["test-delay"]
    plan = json.loads((tmp_path / "runs/f/plan.json").read_text())
    assert plan["sample_s"] is None and plan["warmup_s"] is None
    assert rec["protocol"]["mode"] == "fixed"
    # exactly 1 warmup call, the calibration's one call, 4 samples: whatever a call costs
    assert {(r["warmup_calls"], r["calibration_calls"], r["samples"]) for r in rec["protocol"]["rounds"]} == {(1, 1, 4)}


def test_a_plan_from_before_time_bounded_rounds_keeps_fixed_counts():
    old = Plan().to_dict()
    for key in ("warmup_s", "sample_s", "min_repeat"):
        old.pop(key)
    plan = Plan.from_dict(old)
    assert plan.sample_s is None and plan.warmup_s is None
    assert Plan.from_dict(Plan().to_dict()).sample_s == 1.0  # a new plan keeps its own


def test_a_plan_from_before_extra_rounds_gives_none_and_a_bad_count_is_refused():
    old = Plan().to_dict()
    old.pop("extra_rounds")
    assert Plan.from_dict(old).extra_rounds == 0
    assert Plan.from_dict({**Plan().to_dict(), "extra_rounds": 3}).extra_rounds == 3  # a plan's own kept
    with pytest.raises(InputError, match="extra_rounds"):
        Plan.from_dict({**Plan().to_dict(), "extra_rounds": -1})


@pytest.mark.parametrize("fields", [{"sample_s": -1}, {"warmup_s": "fast"}, {"min_repeat": 0},
                                    {"sample_s": 1.0, "warmup_s": None}])
def test_a_corrupt_protocol_in_plan_json_is_refused(fields):
    with pytest.raises(InputError):
        Plan.from_dict({**Plan().to_dict(), **fields})


@pytest.mark.parametrize("args, says", [
    (["--sample-time", "-1"], "--sample-time"),
    (["--warmup-time", "nan"], "--warmup-time"),
    (["--min-repeat", "0"], "--min-repeat"),
    (["--extra-rounds", "-1"], "--extra-rounds"),
    (["--min-repeat", "5", "--repeat", "2"], "--min-repeat 5 is more than --repeat 2"),
])
def test_nonsense_is_one_line_and_exit_2(tmp_path, args, says):
    p = cli(["run", "--models", "tiny_a", "--frameworks", "test-ref", "--out", "runs/x", *QUIET, *args], tmp_path)
    assert p.returncode == 2, p.stderr
    assert says in p.stderr and not (tmp_path / "runs/x").exists()
