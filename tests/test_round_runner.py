"""ios_bench.running.round_runner: which cells get a round in a pass, and in which order (unit tests of its
rules; the whole protocol runs end to end in tests/test_sweep.py)."""

from ios_bench.planning.cells import Cell
from ios_bench.records.cell_records import CellRecords
from ios_bench.running.round_runner import RoundRunner
from tests.round_fakes import context


def _runner(tmp_path, **plan):
    ctx, _ = context(tmp_path, **plan)
    return RoundRunner(ctx, CellRecords(ctx.plan, True), set(), lambda *what: None, lambda w: None,
                       lambda t: None, {})


def _cell(fw="torch", scenario=None):
    return Cell("m", "m", 1, fw, "cpu", adapter=fw, scenario=scenario, instances=1 if scenario else None,
                instance_threads=2 if scenario else None)


def _r(ok=True, disturbed=None, samples=(1.0,)):
    return {"status": "ok" if ok else "failed", "disturbed": disturbed, "samples_ms": list(samples)}


def test_order_is_a_seeded_permutation_that_changes_per_pass(tmp_path):
    runner = _runner(tmp_path, round_seed=5)
    keys = [f"c{i}" for i in range(8)]
    first = runner.order(keys, "g")
    assert sorted(first) == keys and runner.order(keys, "g") == first  # the same pass: the same order
    runner.passes += 1
    assert runner.order(keys, "g") != first
    assert _runner(tmp_path, round_seed=5).order(keys, "g") == first  # replayable from the seed


def test_a_fixed_count_stops_at_its_rounds_or_its_reruns(tmp_path):
    runner = _runner(tmp_path, rounds=3, max_reruns=2)
    c = _cell()
    assert runner.wanted(c, {c.key: []}, {})
    assert runner.wanted(c, {c.key: [_r(), _r(disturbed="load")]}, {})
    assert not runner.wanted(c, {c.key: [_r(), _r(), _r()]}, {})
    assert not runner.wanted(c, {c.key: [_r(disturbed="x")] * 5}, {})  # 3 + 2 re-runs spent
    assert not runner.wanted(c, {c.key: []}, {c.key: {"status": "failed"}})  # a failed round ends the cell


def test_auto_adds_rounds_while_the_interval_is_wide(tmp_path):
    runner = _runner(tmp_path, rounds="auto", target_ci=2.0)
    c = _cell()
    tight = [_r(samples=(10.0, 10.0, 10.0)) for _ in range(3)]
    wide = [_r(samples=(5.0, 5.5)), _r(samples=(10.0, 11.0)), _r(samples=(20.0, 22.0))]
    assert runner.wanted(c, {c.key: tight[:2]}, {})  # fewer than the 3 it starts with
    assert not runner.wanted(c, {c.key: tight}, {})
    assert runner.wanted(c, {c.key: wide}, {})


def test_a_spent_time_budget_gives_no_more_rounds_beyond_the_first(tmp_path):
    runner = _runner(tmp_path, rounds=3, time_budget=0.0)
    c = _cell()
    assert runner.wanted(c, {c.key: []}, {})  # every cell gets one round
    assert not runner.wanted(c, {c.key: [_r()]}, {})


def test_server_sweeps_measure_single_stream_bounds_first(tmp_path):
    runner = _runner(tmp_path, scenario="server", quick=True)
    wave = {"g": [_cell("torch", "server"), _cell("torch", "single-stream")]}
    phases = runner.phases(wave)
    assert [[c.scenario for c in cs] for p in phases for cs in p.values()] == [["single-stream"], ["server"]]
    assert _runner(tmp_path).phases(wave) == [wave]


def test_cells_sharing_a_schedule_are_taken_off_the_progress_once_known(tmp_path, monkeypatch):
    """Two IOS cells of a group whose searched schedules are identical are measured once: the other's
    rounds (its weight x the rounds per cell) leave the progress bar and the ETA before any round."""
    from ios_bench.running import round_runner
    from tests.round_fakes import FakeExecutor

    ctx, _ = context(tmp_path, FakeExecutor(answer=lambda t: {"status": "failed", "reason": "not run here"}))
    seq = Cell("m", "m", 1, "ios-sequential", "cpu", "sequential", "ios", 2.0)
    greedy = Cell("m", "m", 1, "ios-greedy", "cpu", "greedy", "ios", 2.5)
    monkeypatch.setattr(round_runner, "optimize_schedules",
                        lambda ctx, cells: {c.key: {"path": f"schedules/{c.schedule}.json", "hash": "same"}
                                            for c in cells})
    dropped, advanced = [], []
    runner = RoundRunner(ctx, CellRecords(ctx.plan, True), {seq.key, greedy.key}, lambda *what: None,
                         advanced.append, lambda t: None, {}, drop=dropped.append)
    done = runner.measure({seq.group: [seq, greedy]}, {("m", 1): {"status": "ok"}}, None)
    assert dropped == [2.5 * ctx.plan.rounds]  # the greedy cell's rounds, never run
    assert advanced == [2.0]  # the sequential cell's one (failed) round ran
    assert {c.key for c, _ in done} == {seq.key, greedy.key}


def test_an_unstable_cell_gets_extra_rounds_while_one_is_cheap():
    """RoundRunner.extra_round: with its planned rounds measured, a cell whose interval is too wide
    (rounds.unstable_reason) gets more, up to plan.extra_rounds; not a stable one, not past the extra
    rounds, not an expensive one, not an ab side, not with extra_rounds 0 (a plan from before them)."""
    from types import SimpleNamespace

    from ios_bench.planning.cells import Cell
    from ios_bench.running.round_runner import EXTRA_ROUND_MAX_S, RoundRunner

    def rounds(*medians):
        return [{"status": "ok", "samples_ms": [m] * 5, "disturbed": None} for m in medians]

    def runner(**plan):
        p = SimpleNamespace(**{"rounds": 3, "extra_rounds": 3, "max_reruns": 6, "time_budget": None, **plan})
        return SimpleNamespace(ctx=SimpleNamespace(plan=p), budget_left=lambda: True)

    cell = Cell("m", "m", 1, "onnxruntime", "cpu", None, "onnxruntime")
    cell.weight = 2.0
    noisy, calm = rounds(11.22, 8.47, 10.25), rounds(10.0, 10.1, 10.05)
    extra = RoundRunner.extra_round
    assert extra(runner(), cell, noisy, 3)
    assert not extra(runner(), cell, calm, 3)  # its interval is narrow enough
    assert not extra(runner(), cell, noisy + rounds(9.66, 9.73, 9.87), 6)  # 3 extra rounds spent
    assert not extra(runner(extra_rounds=0), cell, noisy, 3)
    assert not extra(runner(rounds=1), cell, noisy[:1], 1)  # a one-round plan asked for speed
    pricey = Cell("m", "m", 1, "onnxruntime", "cpu", None, "onnxruntime")
    pricey.weight = EXTRA_ROUND_MAX_S + 1
    assert not extra(runner(), pricey, noisy, 3)
    side = Cell("m", "m", 1, "onnxruntime", "cpu", None, "onnxruntime", side="A")
    assert not extra(runner(), side, noisy, 3)
