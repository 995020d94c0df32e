"""Capped cells (ios_bench.running.round_runner.cap_decisions, CellResult.capped): a framework cell several
times slower than its group's best correct peer after its first round gets no more rounds; the best peer,
IOS cells and scenario cells never; the record keeps its one figure with no interval and a status that
keeps it out of every comparison; a real sweep shows it."""

from __future__ import annotations

from ios_bench.planning.cells import Cell
from ios_bench.records.record import CellResult
from ios_bench.reporting.report_tables import cell_counts
from ios_bench.running.round_runner import cap_decisions


def _cell(fw, schedule=None, precision="fp32", scenario=None):
    return Cell(model="m", model_spec="m", batch_size=1, framework=fw, device="cpu", schedule=schedule,
                adapter="ios" if schedule else fw, precision=precision, scenario=scenario)


def _rounds(*medians, disturbed=False):
    return [{"status": "ok", "median_ms": m, "disturbed": "canary" if disturbed else None} for m in medians]


def test_a_cell_over_the_factor_is_capped_and_the_best_never():
    cells = [_cell("fast"), _cell("mid"), _cell("slow"), _cell("ios-both", schedule="both")]
    rounds = {c.key: _rounds(ms) for c, ms in zip(cells, (10.0, 29.0, 31.0, 400.0))}
    capped = cap_decisions(cells, rounds, 3.0, set())
    # 31 > 3 x 10; 29 is not; the IOS cell is 40x and never capped; the best is never capped
    assert set(capped) == {cells[2].key}
    why = capped[cells[2].key]
    assert (why["best"], why["best_ms"], why["ms"]) == ("fast", 10.0, 31.0)
    assert abs(why["ratio"] - 3.1) < 1e-9


def test_judged_once_after_the_first_undisturbed_round():
    fast, slow = _cell("fast"), _cell("slow")
    judged: set[str] = set()
    # a disturbed first round is no first round: nothing judged
    assert cap_decisions([fast, slow], {fast.key: _rounds(10.0), slow.key: _rounds(50.0, disturbed=True)},
                         3.0, judged) == {}
    assert slow.key not in judged
    rounds = {fast.key: _rounds(10.0), slow.key: _rounds(50.0, disturbed=True) + _rounds(20.0)}
    assert cap_decisions([fast, slow], rounds, 3.0, judged) == {} and slow.key in judged
    # later rounds (a slower second round) never cap a cell judged already
    rounds[slow.key] += _rounds(90.0)
    assert cap_decisions([fast, slow], rounds, 3.0, judged) == {}


def test_peers_are_compared_at_their_own_precision_and_never_when_off():
    fp32, int8 = _cell("a"), _cell("b", precision="int8")
    slow32 = _cell("c")
    rounds = {fp32.key: _rounds(10.0), int8.key: _rounds(2.0), slow32.key: _rounds(25.0)}
    # c at fp32 is 2.5x a (fp32), 12.5x b (int8): only its own precision counts
    assert cap_decisions([fp32, int8, slow32], rounds, 3.0, set()) == {}
    assert cap_decisions([fp32, int8, slow32], rounds, 2.0, set()).keys() == {slow32.key}
    assert cap_decisions([fp32, int8, slow32], rounds, None, set()) == {}
    scen = _cell("d", scenario="offline")
    rounds[scen.key] = _rounds(500.0)
    assert scen.key not in cap_decisions([fp32, scen], rounds, 3.0, set())


def test_a_capped_record_has_no_interval_and_no_place_in_comparisons():
    import pandas as pd

    rec = {"cell": "m-b1-slow-cpu", "status": "ok", "median_ms": 31.0, "ci_low_ms": 30.0, "ci_high_ms": 32.0,
           "between_round_cv": 0.01}
    out = CellResult.capped(rec, {"factor": 3.0, "ms": 31.0, "best": "fast", "best_ms": 10.0, "ratio": 3.1})
    assert out["status"] == "capped" and out["median_ms"] == 31.0
    assert "ci_low_ms" not in out and "between_round_cv" not in out
    assert "3.1x the best peer (fast" in out["reason"]
    assert CellResult(out).figure_text() == "31.00 capped (3.1x the best)"  # the one formatter: 4 digits
    counts = cell_counts(pd.DataFrame([out, {"status": "ok", "median_ms": 10.0, "check_passed": True}]))
    assert counts["capped"] == 1 and counts["failed"] == 0 and counts["ok"] == 1


def test_the_round_runner_caps_the_slow_framework_after_one_round(tmp_path):
    """The protocol end to end on a fake executor (so a busy machine's disturbed rounds cannot blur it):
    three rounds planned, the 60 ms framework is 6x the 10 ms one after round 1, so it gets no more
    rounds, its record is capped, and its two rounds leave the progress bar; --no-cap measures all."""
    from ios_bench.records.cell_records import CellRecords
    from ios_bench.running.round_runner import RoundRunner
    from tests.round_fakes import FakeExecutor, context

    ms = {"fast": 10.0, "slow": 60.0}

    def answer(task):
        m = ms[task.payload[0].framework]
        return {"status": "ok", "samples_ms": [m, m, m], "median_ms": m, "repeat": 3, "number": 1, "warmup": 1,
                "check": {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""}}

    for cap, rounds_of_slow in ((3.0, 1), (None, 3)):
        ctx, said = context(tmp_path / str(cap), FakeExecutor(answer=answer), rounds=3, cap_factor=cap)
        fast, slow = (Cell("m", "m", 1, fw, "cpu", adapter=fw) for fw in ("fast", "slow"))
        dropped = []
        runner = RoundRunner(ctx, CellRecords(ctx.plan, True), {fast.key, slow.key}, lambda *what: None,
                             lambda w: None, lambda t: None, {}, drop=dropped.append)
        done = {c.framework: r for c, r in runner.measure({fast.group: [fast, slow]}, {("m", 1): {}}, None)}
        assert len(done["slow"]["rounds"]) == rounds_of_slow and len(done["fast"]["rounds"]) == 3
        if cap:
            assert done["slow"]["status"] == "capped" and done["slow"]["capped"]["ratio"] == 6.0
            assert "ci_low_ms" not in done["slow"] and done["fast"]["status"] == "ok"
            assert dropped == [2 * slow.weight] and any("capped" in line for line in said)
        else:
            assert done["slow"]["status"] == "ok" and dropped == []
