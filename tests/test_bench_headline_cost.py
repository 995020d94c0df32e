"""benchmarks/bench_headline_cost.py: the two protocols' plans, their side-by-side tables, and bad input."""

from __future__ import annotations

import pytest

from tests.conftest import benchmark_module


@pytest.fixture
def bench():
    return benchmark_module("bench_headline_cost")


def test_the_two_plans_differ_only_by_their_protocol(bench):
    from ios_core.measurement.protocol import protocol_fields, round_calls

    new = bench.headline_plan(["nasnet"], [1, 16, 32], bench.PROTOCOLS["time-bounded"])
    old = bench.headline_plan(["nasnet"], [1, 16, 32], bench.PROTOCOLS["fixed"])
    assert new.batch_sizes == old.batch_sizes == [1, 16, 32] and new.frameworks is None and old.schedules is None
    assert protocol_fields(old)["cap_factor"] is None and protocol_fields(new)["cap_factor"] == 3.0
    # a 12.7 s call: the check, 3 warmup, 1 calibration, 10 samples against the check (the warmup), 3 samples
    assert (round_calls(12_700, old).total, round_calls(12_700, new).total) == (15, 4)


def test_each_option_changes_only_what_it_names_and_all_four_cost_less_than_today(bench, tmp_path):
    from ios_bench.planning.plan import Plan
    from ios_bench.running.dry_run import plan_and_estimate

    base = {**bench.PROTOCOLS["time-bounded"]}
    plans = {n: bench.headline_plan(["resnet18"], [1, 16], {**base, **o}) for n, o in bench.OPTIONS.items()}
    today = plans["today"]
    assert today.ios_options == {} and today.min_repeat == 3 and today.rounds == Plan().rounds
    assert plans["search at batch 1, reused at 16 and 32"].ios_options == {"optimize_batch": 1}
    assert plans["2 rounds a cell"].rounds == 2 and plans["2 rounds a cell"].min_repeat == 3
    assert plans["cap factor 2"].cap_factor == 2.0 and plans["cap factor 2"].ios_options == {}
    got, probes = {}, None  # no earlier runs beside the folder: the stated figures, one probe worker
    for n in ("today", "search at batch 1, reused at 16 and 32", "all four"):
        got[n] = plan_and_estimate(plans[n], tmp_path / "run", quiet=True, probes=probes, probe_speed=False)
        probes = got[n]["probes"]
    assert got["search at batch 1, reused at 16 and 32"]["searches"] < got["today"]["searches"]
    assert got["all four"]["seconds"] < got["search at batch 1, reused at 16 and 32"]["seconds"] < \
        got["today"]["seconds"]


def test_the_tables_put_each_protocols_hours_and_share_side_by_side(bench):
    def got(total, b1, kinds, capped):
        return {"seconds": total, "by_batch": {1: b1, 32: total - b1}, "by_kind": kinds, "by_model": {"m": total},
                "by_framework": {"torch": total}, "capped": capped, "cells": 4, "rounds": 9, "searches": 1,
                "references": 2}

    rows = bench.side_by_side("t", {"time-bounded": got(3600.0, 900.0, {"timed": 1800.0, "start": 1800.0}, [{}]),
                                    "fixed": got(7200.0, 900.0, {"timed": 7200.0}, [])})
    text = "\n".join(rows)
    assert "| **total** | 1.00 | 100% | 2.00 | 100% |" in text
    assert "| batch 32 | 0.75 | 75% | 1.75 | 88% |" in text
    assert "| worker starts, canaries, the round's own work | 0.50 | 50% | - | - |" in text  # a part one lacks
    assert "cells predicted capped (a prediction) time-bounded 1, fixed 0" in text


def test_bad_input_is_one_line_and_exit_2(bench, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--models", "no-such-model"])
    assert e.value.code == 2 and capsys.readouterr().err.count("\n") == 1
