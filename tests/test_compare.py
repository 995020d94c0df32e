"""ios-bench compare: verdicts over rounds on synthetic A/A and A/B runs, the noise threshold,
the formats, and a schema-1 run against a schema-2 one."""

import json

import numpy as np
import pytest

from ios_bench.reporting.compare import THRESHOLD_FACTOR, compare_runs, noise_threshold, typical_spread
from ios_bench.results import Store, cell_key
from ios_bench.running.rounds import robust_spread


def cell(fw="torch", model="m", rounds=None, status="ok", passed=True, disturbed=()):
    """A schema-2 record whose rounds hold ``rounds`` (lists of samples); the rounds at the indices
    in ``disturbed`` are marked disturbed."""
    r = {"schema": 2, "cell": cell_key(model, 1, fw, "cpu"), "model": model, "batch_size": 1, "framework": fw,
         "device": "cpu", "status": status}
    if status != "ok":
        r["reason"] = "crashed"
        return r
    rs = [{"round": i, "status": "ok", "samples_ms": list(map(float, s)),
           "disturbed": "canary 2.00x its usual time" if i in disturbed else None} for i, s in enumerate(rounds)]
    good = [s for i, s in enumerate(rounds) if i not in disturbed]
    med = float(np.median([np.median(s) for s in good]))
    pooled = [v for s in good for v in s]
    r.update(rounds=rs, median_ms=med, std_ms=float(np.std(pooled)), p10_ms=min(pooled), p90_ms=max(pooled),
             samples_ms=pooled, rounds_used=len(good), rounds_measured=len(rs), rounds_disturbed=len(disturbed),
             check={"passed": passed, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""})
    return r


def rounds_of(level, n_rounds=5, n=10, between=0.02, within=0.01, seed=0):
    """Rounds whose medians scatter by ``between`` (relative) around ``level``, samples by ``within``."""
    rng = np.random.default_rng(seed)
    return [list(level * (1 + between * rng.standard_normal()) * (1 + within * rng.standard_normal(n)))
            for _ in range(n_rounds)]


def write(folder, records):
    for r in records:
        Store(folder).append(r)


def test_a_a_pair_flags_nothing_and_a_b_pair_flags_the_changes(tmp_path):
    a, a2, b = tmp_path / "a", tmp_path / "a2", tmp_path / "b"
    fws = [f"fw{i}" for i in range(12)]
    write(a, [cell(fw, rounds=rounds_of(10.0 + i, seed=i)) for i, fw in enumerate(fws)])
    write(a2, [cell(fw, rounds=rounds_of(10.0 + i, seed=100 + i)) for i, fw in enumerate(fws)])
    write(b, [cell(fw, rounds=rounds_of((10.0 + i) * 1.10, seed=200 + i)) for i, fw in enumerate(fws)])
    same = compare_runs(a, a2)
    assert same.threshold_source == "measured" and 0.01 <= same.threshold < 0.10
    flagged = [c for c in same.changes if c.verdict in ("regression", "improvement")]
    assert len(flagged) <= 1, [(c.framework, c.change, c.verdict) for c in flagged]  # about 5% at 95%
    diff = compare_runs(a, b)
    regressions = [c for c in diff.changes if c.verdict == "regression"]
    assert len(regressions) >= 11
    for c in regressions:
        assert c.ci_low > 0 and c.change == pytest.approx(0.10, abs=0.04)


def test_a_change_inside_the_noise_threshold_is_within_noise(tmp_path):
    """Tight rounds: +2 % is outside the interval, but under a given 5 % threshold."""
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, [cell("x", rounds=rounds_of(10.0, between=0.002, within=0.002))])
    write(b, [cell("x", rounds=rounds_of(10.2, between=0.002, within=0.002, seed=1))])
    c = compare_runs(a, b, threshold=0.05).changes[0]
    assert c.ci_low > 0 and c.verdict == "within noise" and "threshold" in c.why
    assert compare_runs(a, b, threshold=0.01).changes[0].verdict == "regression"


def test_between_round_noise_is_in_the_interval(tmp_path):
    """Rounds that disagree by 20 % with tight samples inside each: a one-process test would call a
    +8 % change significant; over rounds it is within noise."""
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, [cell("x", rounds=rounds_of(10.0, n_rounds=4, between=0.20, within=0.001, seed=3))])
    write(b, [cell("x", rounds=rounds_of(10.8, n_rounds=4, between=0.20, within=0.001, seed=4))])
    c = compare_runs(a, b, threshold=0.01).changes[0]
    assert c.ci_low < 0 < c.ci_high and c.verdict == "within noise"


def test_unstable_when_rounds_are_too_few_or_mostly_disturbed(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, [cell("one", rounds=rounds_of(10, n_rounds=1)), cell("dist", rounds=rounds_of(10, n_rounds=5))])
    write(b, [cell("one", rounds=rounds_of(20, n_rounds=3)),
              cell("dist", rounds=rounds_of(20, n_rounds=5), disturbed=(0, 1, 2))])
    got = {c.framework: c for c in compare_runs(a, b).changes}
    assert got["one"].verdict == "unstable" and "A has 1 undisturbed round" in got["one"].why
    assert got["dist"].verdict == "unstable" and "disturbed" in got["dist"].why


def test_with_its_plan_a_cell_that_got_its_rounds_is_judged_on_them(tmp_path):
    """Disturbed rounds are measured again: a cell with the 3 undisturbed rounds its plan asked for
    (beside 4 disturbed ones) is judged on them; one whose re-runs ran out at 2 is unstable."""
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, [cell("got", rounds=rounds_of(10, n_rounds=3, between=0.003, within=0.003)),
              cell("short", rounds=rounds_of(10, n_rounds=3, between=0.003, within=0.003, seed=5))])
    write(b, [cell("got", rounds=rounds_of(12, n_rounds=7, between=0.003, within=0.003, seed=1),
                   disturbed=(0, 2, 4, 6)),
              cell("short", rounds=rounds_of(12, n_rounds=9, between=0.003, within=0.003, seed=2),
                   disturbed=(0, 1, 2, 3, 4, 5, 6))])
    for folder in (a, b):
        (folder / "plan.json").write_text(json.dumps({"rounds": 3}))
    got = {c.framework: c for c in compare_runs(a, b).changes}
    assert got["got"].verdict == "regression" and got["got"].rounds_b == 3
    assert got["short"].verdict == "unstable"
    assert "B has 2 undisturbed rounds of the 3 asked for (7 disturbed" in got["short"].why
    (b / "plan.json").write_text(json.dumps({"rounds": "auto"}))  # auto starts with 3 rounds
    assert {c.framework: c.verdict for c in compare_runs(a, b).changes}["short"] == "unstable"
    (b / "plan.json").unlink()  # no plan: more disturbed rounds than undisturbed
    assert {c.framework: c.verdict for c in compare_runs(a, b).changes}["got"] == "unstable"


def test_disturbed_rounds_are_left_out_of_the_figure(tmp_path):
    """A disturbed round 3x slower does not move the figure."""
    a, b = tmp_path / "a", tmp_path / "b"
    base = rounds_of(10.0, n_rounds=4, between=0.005, within=0.005)
    write(a, [cell("x", rounds=base)])
    write(b, [cell("x", rounds=base[:3] + [[30.0] * 10, [31.0] * 10], disturbed=(3, 4))])
    c = compare_runs(a, b).changes[0]
    assert c.median_b == pytest.approx(c.median_a, rel=0.01) and c.rounds_b == 3


def test_status_changes_are_regressions(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, [cell("breaks", rounds=rounds_of(10)), cell("wrong", rounds=rounds_of(10))])
    write(b, [cell("breaks", status="failed"), cell("wrong", rounds=rounds_of(10), passed=False)])
    got = {c.framework: c.verdict for c in compare_runs(a, b).changes}
    assert got == {"breaks": "regression (now failed)", "wrong": "regression (now wrong output)"}


def test_noise_threshold_is_the_typical_difference_of_two_rounds():
    flat = [[10.0] * 5, [10.0] * 5]
    assert noise_threshold(typical_spread([(flat, flat)])) == 0.01  # the floor
    assert noise_threshold(None) == 0.01
    spread = [[9.0] * 5, [10.0] * 5, [11.0] * 5]  # round medians 9, 10, 11
    s = robust_spread(np.log([9.0, 10.0, 11.0]))
    assert 0.1 < s < 0.25
    assert typical_spread([(spread, spread)]) == pytest.approx(s)
    assert noise_threshold(typical_spread([(spread, spread)])) == pytest.approx(THRESHOLD_FACTOR * s * np.sqrt(2))
    # the median over cells: one cell that scatters does not set it
    quiet = [[10.0] * 5, [10.1] * 5, [9.9] * 5]
    assert typical_spread([(spread, spread), (quiet, quiet), (quiet, quiet)]) < s / 5
    # robust like the figure: one round 50 % slow among five that agree within 1 % moves it little
    mostly = [[10.0] * 5, [10.1] * 5, [9.9] * 5, [10.05] * 5, [15.0] * 5]
    assert noise_threshold(typical_spread([(mostly, mostly)])) < 0.03


def test_a_cell_asking_more_rounds_is_judged_on_three_undisturbed(tmp_path):
    """A plan of 5 rounds whose re-runs ran out: 3 undisturbed rounds a side are enough for a
    verdict (the default --rounds), 2 are not."""
    a, b = tmp_path / "a", tmp_path / "b"
    tight = {"between": 0.003, "within": 0.003}
    write(a, [cell("three", rounds=rounds_of(10, n_rounds=5, **tight)),
              cell("two", rounds=rounds_of(10, n_rounds=5, seed=1, **tight))])
    write(b, [cell("three", rounds=rounds_of(12, n_rounds=11, seed=2, **tight), disturbed=tuple(range(8))),
              cell("two", rounds=rounds_of(12, n_rounds=11, seed=3, **tight), disturbed=tuple(range(9)))])
    for folder in (a, b):
        (folder / "plan.json").write_text(json.dumps({"rounds": 5}))
    got = {c.framework: c for c in compare_runs(a, b).changes}
    assert got["three"].verdict == "regression" and got["three"].rounds_b == 3
    assert got["two"].verdict == "unstable" and "B has 2 undisturbed rounds of the 5 asked for" in got["two"].why


def test_schema_1_run_against_schema_2_says_what_it_means(tmp_path, run_cli):
    a, b = tmp_path / "a", tmp_path / "b"
    old = {"cell": cell_key("m", 1, "x", "cpu"), "model": "m", "batch_size": 1, "framework": "x", "device": "cpu",
           "status": "ok", "median_ms": 10.0, "std_ms": 0.1, "p10_ms": 9.9, "p90_ms": 10.1,
           "samples_ms": [10.0 + 0.01 * i for i in range(20)],
           "check": {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""}}
    a.mkdir()
    (a / "results.jsonl").write_text(json.dumps(old) + "\n")  # no "schema": written by the first version
    write(b, [cell("x", rounds=rounds_of(13.0))])
    code, out, err = run_cli(["compare", str(a), str(b)])
    assert code == 0, err
    assert "schema 1" in err and "one round" in err
    assert "unstable" in out


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_machine_readable_formats_and_fail_on_regression(tmp_path, run_cli, fmt):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, [cell("x", rounds=rounds_of(10.0)), cell("y", rounds=rounds_of(10.0))])
    write(b, [cell("x", rounds=rounds_of(20.0)), cell("y", rounds=rounds_of(10.0, seed=9))])
    code, out, err = run_cli(["compare", str(a), str(b), "--format", fmt, "--fail-on-regression"])
    assert code == 1, err
    if fmt == "json":
        data = json.loads(out)
        verdicts = {c["framework"]: c["verdict"] for c in data["cells"]}
        assert verdicts["x"] == "regression" and data["counts"]["regression"] == 1
        assert 0 < data["threshold"] < 1
    else:
        lines = out.strip().splitlines()
        assert lines[0].startswith("cell,") and "verdict" in lines[0]
        assert any(",regression," in ln for ln in lines[1:])
    assert "1 regression" in err


def test_table_shows_rounds_and_interval(tmp_path, run_cli):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, [cell("x", rounds=rounds_of(10.0))])
    write(b, [cell("x", rounds=rounds_of(13.0))])
    code, out, err = run_cli(["compare", str(a), str(b)])
    assert code == 0, err
    assert "95% CI" in out and "5/5" in out and "regression" in out and "noise threshold" in out


def test_bad_noise_threshold_is_one_line(tmp_path, run_cli):
    a = tmp_path / "a"
    write(a, [cell("x", rounds=rounds_of(10.0))])
    code, out, err = run_cli(["compare", str(a), str(a), "--noise-threshold", "nan"])
    assert code == 2 and len(err.strip().splitlines()) == 1


def _offline(fw, rates, seed):
    """An Offline LoadGen cell whose rounds reported ``rates`` samples/s (their per-query latencies,
    under load, are the same in every case: they are not the figure)."""
    rng = np.random.default_rng(seed)
    r = cell(fw, rounds=[list(50 + rng.standard_normal(20)) for _ in rates])
    r["scenario"] = "offline"
    for rnd, rate in zip(r["rounds"], rates):
        rnd["loadgen"] = {"samples_per_s": rate, "valid": True}
    return r


def test_scenario_cells_are_compared_on_their_loadgen_figure(tmp_path):
    """Offline throughput down 10 % is a regression, up 10 % an improvement, although the
    queries' latencies under load did not move."""
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, [_offline("down", [100.0, 100.4, 99.7], 0), _offline("up", [100.0, 100.3, 99.8], 1)])
    write(b, [_offline("down", [90.0, 90.2, 89.9], 2), _offline("up", [110.0, 110.3, 109.8], 3)])
    cmp = compare_runs(a, b, threshold=0.03)
    got = {c.framework: c for c in cmp.changes}
    assert got["down"].verdict == "regression" and got["down"].change == pytest.approx(100 / 90 - 1, rel=0.01)
    assert got["up"].verdict == "improvement" and got["up"].change == pytest.approx(100 / 110 - 1, rel=0.01)
    assert got["down"].median_a == pytest.approx(10.0, rel=0.01)  # ms per sample
    assert any("LoadGen scenario cells" in n for n in cmp.notes)
