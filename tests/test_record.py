"""ios_bench.records.record's result types: RoundResult (a round as kept) and CellResult (a cell's record from
its rounds: the one place its figures are derived, with ios_core.measurement.stats)."""

import pytest

from ios_bench.records.record import CellResult, RoundResult, problems
from ios_bench.results import check_record
from ios_core.measurement import stats
from ios_core.measurement.measure import Measurement

BASE = {"schema": 2, "cell": "m|b2|torch|cpu", "model": "m", "batch_size": 2, "framework": "torch",
        "label": "torch", "kind": "framework", "device": "cpu", "threads": 2, "started": "t0"}
CHECK = {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""}


def _round(i, samples, status="ok", disturbed=None, **more):
    return {"round": i, "status": status, "samples_ms": samples, "check": dict(CHECK), "disturbed": disturbed,
            "repeat": len(samples), "number": 1, "warmup": 1, **stats.summary(samples), **more}


def test_measured_round_carries_the_measurements_own_figures():
    m = Measurement(samples_ms=[1.0, 2.0, 3.0, 10.0], number=2, warmup=1, meta={"clock": "host"})
    r = RoundResult.measured(m, dict(CHECK), {"canary_before_ms": 1.0})
    assert r["median_ms"] == 2.5 == m.median and r["samples_ms"] == [1.0, 2.0, 3.0, 10.0]
    assert r["clock"] == "host" and r["interference"] == {"canary_before_ms": 1.0} and r["check"]["passed"]
    assert r["repeat"] == 4 and r["number"] == 2 and r["warmup"] == 1
    no_clock = RoundResult.measured(Measurement(samples_ms=[1.0], number=1, warmup=0), dict(CHECK), None)
    assert "clock" not in no_clock and "interference" not in no_clock


def test_round_from_worker_keeps_declared_keys_and_marks_a_wrong_output():
    res = {"status": "ok", "samples_ms": [1.0], "check": {"passed": False}, "pid": 7, "junk": 1}
    r = RoundResult.from_worker(res, index=2, position=0, started="s", pass_index=0, log="l")
    assert r["status"] == "wrong" and r["round"] == 2 and r["pid"] == 7 and "junk" not in r and r["log"] == "l"
    res = {"status": "ok", "samples_ms": [1.0], "check": dict(CHECK), "utilization": {"mean": 1}}
    r = RoundResult.from_worker(res, index=0, position=1, started=None, pass_index=1, log=None, util_trace="u.json")
    assert r["status"] == "ok" and r["utilization"]["trace"] == "u.json" and r["pass"] == 1


def test_cell_figure_is_the_median_of_undisturbed_round_medians():
    rounds = [_round(0, [10.0, 11.0]), _round(1, [12.0, 13.0]), _round(2, [50.0, 60.0], disturbed="canary"),
              _round(3, [14.0, 15.0])]
    rec = CellResult.from_rounds(BASE, rounds, seed=1)
    assert rec["median_ms"] == stats.median([10.5, 12.5, 14.5]) == 12.5
    assert rec["rounds_used"] == 3 and rec["rounds_disturbed"] == 1 and rec["status"] == "ok"
    assert rec["throughput"] == pytest.approx(2 * 1000 / 12.5) and rec["rounds"] is rounds
    assert rec["ci_low_ms"] <= 12.5 <= rec["ci_high_ms"]
    assert check_record(rec) is None and not problems(rec)


def test_every_round_disturbed_is_said_never_silently_pooled():
    rounds = [_round(i, [10.0 + i], disturbed="load") for i in range(3)]
    rec = CellResult.from_rounds(BASE, rounds, seed=0)
    assert rec["rounds_used"] == 0 and "every round was disturbed" in rec["unstable"]
    assert rec["median_ms"] == 11.0


def test_one_wrong_round_makes_the_cell_wrong():
    bad = {**CHECK, "passed": False, "reason": "off"}
    rounds = [_round(0, [1.0]), _round(1, [1.0], status="wrong", check=bad)]
    rounds[1]["check"] = bad
    rec = CellResult.from_rounds(BASE, rounds, seed=0)
    assert rec["status"] == "wrong" and rec["check"]["reason"] == "off"


def test_the_sequential_baseline_is_the_same_statistic_as_the_figure():
    # 4 rounds: a sorted(x)[n // 2] baseline would read 13, the median reads 12.5
    seq = [10.0, 12.0, 13.0, 20.0]
    rounds = [_round(i, [5.0], sequential_ms=s) for i, s in enumerate(seq)]
    rec = CellResult.from_rounds({**BASE, "kind": "ios", "schedule": "both"}, rounds, seed=0)
    assert rec["sequential_ms"] == 12.5 == stats.median(seq)
    # from the sequential cell of the sweep: its own figure, the same median over rounds
    ios = {**rec, "cell": "m|b2|ios-both|cpu", "framework": "ios-both", "provider": "torch", "median_ms": 5.0}
    seq_cell = CellResult.from_rounds(BASE, [_round(i, [s]) for i, s in enumerate(seq)], seed=0)
    recs = {ios["cell"]: ios, "m|b2|ios-sequential|cpu": {**seq_cell, "cell": "m|b2|ios-sequential|cpu"}}
    CellResult.sequential_figures(recs, lambda r: "m|b2|ios-sequential|cpu")
    assert ios["sequential_ms"] == seq_cell["median_ms"] == 12.5
    assert ios["speedup_over_sequential"] == pytest.approx(12.5 / 5.0)


def test_worker_baseline_uses_the_round_median(monkeypatch):
    from ios_bench.running import task_cell

    class Built:
        def prepare(self, x):
            return x

    class Adapter:
        def build(self, graph, batch_size, device, threads, **options):
            return Built()

    samples = [1.0, 2.0, 3.0, 10.0]  # sorted(x)[n // 2] would be 3.0
    monkeypatch.setattr(task_cell, "time_compiled", lambda *a, **k: Measurement(samples, 1, 0, meta={"clock": "host"}))
    result = {"clock": "host"}
    spec = {"batch_size": 1, "device": "cpu", "threads": 1, "warmup": 0, "number": 1, "repeat": 4}
    task_cell._sequential_baseline(spec, result, Adapter(), None, {}, None)
    assert result["sequential_ms"] == 2.5 == stats.median(samples)


def test_stopped_unmeasured_invalid_and_same_as():
    rounds = [_round(0, [1.0])]
    rec = CellResult.from_rounds(BASE, rounds, seed=0, stopped={"status": "failed", "reason": "boom"})
    assert rec["status"] == "failed" and rec["reason"] == "boom" and "median_ms" not in rec
    assert CellResult.from_rounds(BASE, [], seed=0)["reason"] == "no round was measured"
    un = CellResult.unmeasured(BASE, "skipped", "no GPU", stderr_tail="x")
    assert un["status"] == "skipped" and un["stderr_tail"] == "x" and "finished" in un and check_record(un) is None
    inv = CellResult.invalid({**BASE, "median_ms": "nan?"}, "median_ms")
    assert inv["status"] == "failed" and "median_ms" not in inv and inv["cell"] == BASE["cell"]
    canon = CellResult.from_rounds({**BASE, "label": "IOS-Both"}, rounds, seed=0)
    same = CellResult.same_as({**BASE, "cell": "other", "label": "IOS-Merge"}, canon, {"schedule_hash": "h"})
    assert same["cell"] == "other" and same["median_ms"] == canon["median_ms"]
    assert same["same_schedule_as"] == "IOS-Both"


def test_node_env_of_the_rounds_node():
    rounds = [_round(0, [1.0], node="n1")]
    rec = CellResult.from_rounds(BASE, rounds, seed=0, node_env=lambda node: f"nodes/{node}/env.json")
    assert rec["node"] == "n1" and rec["node_env"] == "nodes/n1/env.json"


def test_figure_text_is_one_rule():
    rounds = [_round(0, [10.0]), _round(1, [10.4]), _round(2, [9.6])]
    c = CellResult(CellResult.from_rounds(BASE, rounds, seed=0))
    text = c.figure_text()
    assert text.startswith("10.00 ±") and c.passed and c.median_ms == 10.0
    assert CellResult({**BASE, "status": "failed"}).figure_text() == "failed"
    one = CellResult({**BASE, "status": "ok", "median_ms": 5.0, "std_ms": 0.2, "unstable": "one round",
                      "check": CHECK})
    assert one.figure_text() == "5.000 ±0.200 (unstable)" and one.spread_ms() == 0.2


def test_the_first_rounds_build_is_kept_apart():
    """With a build cache the first round builds cold and the next warm: the record keeps the first
    round's build (first_build_seconds) beside the last's (build_seconds)."""
    rounds = [_round(0, [10.0], build_seconds=6.1), _round(1, [10.0], build_seconds=1.2),
              _round(2, [10.0], build_seconds=1.1)]
    rec = CellResult.from_rounds(BASE, rounds, seed=0)
    assert rec["first_build_seconds"] == 6.1 and rec["build_seconds"] == 1.1
    assert check_record(rec) is None and not problems(rec)
    assert "first_build_seconds" not in CellResult.from_rounds(BASE, [_round(0, [10.0])], seed=0)


def test_the_frameworks_a_worker_imported_are_kept():
    res = {"status": "ok", "samples_ms": [1.0], "check": dict(CHECK), "frameworks_imported": ["onnxruntime"]}
    r = RoundResult.from_worker(res, index=0, position=0, started=None, pass_index=0, log=None)
    assert r["frameworks_imported"] == ["onnxruntime"]
    rec = CellResult.from_rounds(BASE, [{**_round(0, [10.0]), "frameworks_imported": ["onnxruntime"]}], seed=0)
    assert rec["frameworks_imported"] == ["onnxruntime"] and not problems(rec)
