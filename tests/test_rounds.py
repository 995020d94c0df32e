"""The round protocol's parts: the interleaving order, the statistics over rounds (a hierarchical
interval with the coverage it claims on data of known variance), the unstable verdict."""

import math

import numpy as np
import pytest

from ios_bench.reporting.compare import PRIOR_DF
from ios_bench.running.rounds import (
    AUTO,
    MIN_ROUNDS_FOR_VERDICT,
    UNSTABLE_CI_PCT,
    hierarchical_bootstrap,
    interval,
    judge_rounds,
    needs_more,
    paired_half_width,
    paired_interval,
    paired_spread,
    planned_rounds,
    pooled_scale,
    ratio_interval,
    round_order,
    summarize,
    typical_paired_spread,
    usual_canary,
)


def test_round_order_is_a_seeded_permutation_different_per_round():
    keys = [f"c{i}" for i in range(8)]
    orders = [round_order(keys, r, seed=7, group="m|b1|cpu") for r in range(6)]
    for o in orders:
        assert sorted(o) == sorted(keys)
    assert len({tuple(o) for o in orders}) >= 5  # shuffled per round
    assert orders == [round_order(keys, r, seed=7, group="m|b1|cpu") for r in range(6)]  # replayable
    assert orders != [round_order(keys, r, seed=8, group="m|b1|cpu") for r in range(6)]
    assert orders != [round_order(keys, r, seed=7, group="m|b16|cpu") for r in range(6)]
    # every cell takes every position about equally often over many rounds (drift hits all alike)
    first = [round_order(keys[:4], r, 0, "g")[0] for r in range(400)]
    counts = [first.count(k) for k in keys[:4]]
    assert min(counts) > 60, counts


def test_hierarchical_interval_covers_between_round_variance():
    """Data with known structure: round means ~ N(10, 0.5), samples ~ N(round mean, 0.05). A
    one-process interval (samples only) would be ~10x too narrow; the hierarchical one covers the
    true centre about as often as it claims."""
    rng = np.random.default_rng(1)
    hits, widths, naive = 0, [], []
    trials = 200
    for t in range(trials):
        rounds = [list(rng.normal(rng.normal(10.0, 0.5), 0.05, size=20)) for _ in range(7)]
        lo, hi = interval(hierarchical_bootstrap(rounds, n=400, seed=t), 0.90)
        hits += lo <= 10.0 <= hi
        widths.append(hi - lo)
        one = np.asarray(rounds[0])
        naive.append(np.ptp(np.quantile([np.median(rng.choice(one, one.size)) for _ in range(200)], [0.05, 0.95])))
    assert 0.75 <= hits / trials <= 0.99, hits / trials
    assert np.median(widths) > 5 * np.median(naive)


def synthetic_rounds(rng, level, k, between, within=0.005, n=10):
    return [list(level * np.exp(rng.normal(0, between)) * np.exp(rng.normal(0, within, size=n))) for _ in range(k)]


@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("moderated", [False, True])
def test_change_interval_covers_zero_as_often_as_it_claims_and_sees_ten_percent(k, moderated):
    """Round medians scattered by 2 % (log-normal), samples by 0.5 %: an A/A pair's 95 % interval
    holds zero about 95 % of the time, on the cell's own rounds or lent the run's typical spread
    (as ``compare`` does); a +10 % pair's excludes zero nearly always (on its own rounds at 3 a
    side, 8 in 10 times: that is what the typical spread is lent for)."""
    rng = np.random.default_rng(k)
    prior = (0.02, PRIOR_DF) if moderated else None
    trials, holds, seen = 300, 0, 0
    for _ in range(trials):
        a = synthetic_rounds(rng, 10.0, k, 0.02)
        change, lo, hi = ratio_interval(a, synthetic_rounds(rng, 10.0, k, 0.02), prior=prior)
        holds += lo <= 0 <= hi
        assert lo <= change <= hi
        seen += ratio_interval(a, synthetic_rounds(rng, 11.0, k, 0.02), prior=prior)[1] > 0
    assert 0.9 <= holds / trials <= 0.995, holds / trials
    assert seen / trials >= (0.75 if k == 3 and not moderated else 0.95), seen / trials


def test_one_slow_round_of_three_neither_moves_the_figure_nor_hides_a_change():
    """The figure is a median, and the interval's spread is robust like it: a round 30 % slow in
    A does not widen the interval over a +10 % change (a standard deviation would: about 17 %)."""
    a = [[6.00] * 10, [6.03] * 10, [7.80] * 10]
    b = [[6.61] * 10, [6.63] * 10, [6.66] * 10]
    change, lo, hi = ratio_interval(a, b)
    assert change == pytest.approx(6.63 / 6.03 - 1) and lo > 0.05 and hi < 0.15


def test_rounds_that_agree_exactly_still_get_their_samples_spread():
    """Identical round medians: the spread is at least a round median's own standard error."""
    rounds = [[9.0, 10.0, 11.0, 10.0, 10.5, 9.5]] * 3
    scale, df = pooled_scale(rounds, rounds)
    assert df == 4 and scale > 0.01
    change, lo, hi = ratio_interval(rounds, rounds)
    assert change == 0 and lo < 0 < hi


def test_moderated_spread_borrows_the_runs_typical_spread():
    """A cell whose 3+3 rounds happen to scatter widely: alone its interval spans zero for a
    +15 % change; lent the run's typical spread (2 %, ``PRIOR_DF`` degrees of freedom) it does not; a
    cell as quiet as the run gets a narrower interval (more degrees of freedom)."""
    a = [[6.01] * 10, [5.92] * 10, [5.87] * 10]
    b = [[6.82] * 10, [6.40] * 10, [7.38] * 10]
    _, lo, hi = ratio_interval(a, b)
    assert lo < 0 < hi
    _, lo2, hi2 = ratio_interval(a, b, prior=(0.02, PRIOR_DF))
    assert lo2 > 0 and hi2 - lo2 < hi - lo
    quiet_a = [[10.0] * 10, [10.2] * 10, [9.8] * 10]
    quiet_b = [[11.0] * 10, [11.22] * 10, [10.78] * 10]
    plain, moderated = ratio_interval(quiet_a, quiet_b), ratio_interval(quiet_a, quiet_b, prior=(0.02, PRIOR_DF))
    assert moderated[2] - moderated[1] < plain[2] - plain[1]  # more degrees of freedom, same spread
    assert moderated[1] > 0


def test_bootstrap_of_one_round_is_its_sample_spread():
    reps = hierarchical_bootstrap([[1.0, 2.0, 3.0, 4.0, 5.0]], n=500)
    assert reps.min() >= 1.0 and reps.max() <= 5.0 and np.median(reps) == pytest.approx(3.0, abs=0.5)


def rnd(i, samples, disturbed=None, status="ok", canary=1.0):
    return {"round": i, "status": status, "samples_ms": samples, "disturbed": disturbed,
            "interference": {"canary_before_ms": canary, "canary_after_ms": canary, "other_cpu": 0.0}}


def test_summary_over_rounds_leaves_disturbed_rounds_out():
    rounds = [rnd(0, [10.0, 10.1, 9.9]), rnd(1, [10.2, 10.3, 10.1]), rnd(2, [30.0, 31.0, 29.0], disturbed="x"),
              rnd(3, [9.8, 9.9, 9.7])]
    s = summarize(rounds)
    assert s["median_ms"] == pytest.approx(10.0)
    assert s["rounds_used"] == 3 and s["rounds_disturbed"] == 1 and s["rounds_measured"] == 4
    assert 30.0 not in s["samples_ms"]
    assert s["ci_low_ms"] <= s["median_ms"] <= s["ci_high_ms"] < 11
    assert s["unstable"] is None


def test_unstable_when_rounds_disagree_or_are_too_few():
    s = summarize([rnd(0, [10.0] * 5), rnd(1, [14.0] * 5), rnd(2, [10.5] * 5)])
    assert s["unstable"].startswith("interval +/-") and "wider than +/-5%" in s["unstable"]
    assert s["ci_half_pct"] > UNSTABLE_CI_PCT
    one = summarize([rnd(0, [10.0] * 5)])
    assert one["rounds_used"] < MIN_ROUNDS_FOR_VERDICT and "1 undisturbed round" in one["unstable"]


def test_unstable_means_an_interval_too_wide_and_more_rounds_narrow_it():
    """The one rule: the interval's half-width over UNSTABLE_CI_PCT. Round medians spread by about 10 %
    (coefficient of variation, each round a fresh process on a noisy machine): three of them leave the
    interval wide, twelve narrow it under the threshold though their spread is as large."""
    medians = [11.22, 8.47, 10.25, 9.66, 9.73, 9.87, 8.79, 9.86, 9.48, 11.99, 10.14, 9.79]
    few = summarize([rnd(i, [m] * 5) for i, m in enumerate(medians[:3])])
    many = summarize([rnd(i, [m] * 5) for i, m in enumerate(medians)])
    assert few["between_round_cv"] > 0.09 and many["between_round_cv"] > 0.09
    assert few["unstable"] and few["ci_half_pct"] > UNSTABLE_CI_PCT
    assert many["unstable"] is None and many["ci_half_pct"] <= UNSTABLE_CI_PCT


def test_between_round_cv_is_the_std_of_the_round_medians_over_the_figure():
    """Round medians 10, 11 and 13 ms: the figure 11 ms, the standard deviation (n - 1) sqrt(7/3),
    the between-round CV their ratio, 13.9 % (with n it would be 11.3 %, over the mean 13.5 %)."""
    s = summarize([rnd(0, [9.0, 10.0, 11.0]), rnd(1, [11.0] * 3), rnd(2, [12.0, 13.0, 14.0])])
    assert s["round_medians_ms"] == [10.0, 11.0, 13.0] and s["median_ms"] == 11.0
    assert s["between_round_cv"] == pytest.approx(np.sqrt(7 / 3) / 11)
    assert "coefficient of variation 13.9%" in s["unstable"]
    assert summarize([rnd(0, [10.0, 10.0])])["between_round_cv"] is None  # one round: no spread


def test_the_round_noise_diagnostic_prints_the_one_between_round_cv(tmp_path, capsys):
    """benchmarks/analyze_round_noise.py: cell a's round medians 10, 11, 13 ms (CV 13.9 %, as the
    report's), cell b's 20 ms each (0 %): the median over cells 6.9 % (with n: 5.7 %)."""
    import importlib.util
    from pathlib import Path

    from ios_bench.results import Store, cell_key

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("analyze_round_noise", root / "benchmarks" / "analyze_round_noise.py")
    noise = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noise)
    for fw, meds, canaries in (("a", [10.0, 11.0, 13.0], [1.0] * 3), ("b", [20.0] * 3, [0.9, 1.0, 1.1])):
        rounds = [{"round": i, "status": "ok", "samples_ms": [m] * 3, "median_ms": m, "disturbed": None,
                   "interference": {"canary_before_ms": c, "canary_after_ms": c}}
                  for i, (m, c) in enumerate(zip(meds, canaries))]
        Store(tmp_path).append({"schema": 2, "cell": cell_key("m", 1, fw, "cpu"), "model": "m", "batch_size": 1,
                                "framework": fw, "device": "cpu", "status": "ok", "rounds": rounds, **summarize(rounds),
                                "check": {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3,
                                          "reason": ""}})
    assert noise.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "between-round CV, median over cells: 6.9%;" in out
    assert out.splitlines()[-2].split()[:3] == ["a", "1", "13.9%"]  # a's row: 1 cell, its CV 13.9 %


def test_rounds_are_judged_against_the_usual_canary():
    rounds = [rnd(i, [10.0], canary=1.0) for i in range(6)] + [rnd(6, [10.0], canary=2.0)]
    rounds.append({**rnd(7, [10.0]), "interference": {"other_cpu": 0.4, "canary_before_ms": 1.0}})
    ref = usual_canary(rounds)
    assert ref == pytest.approx(1.0)
    judge_rounds(rounds, ref)
    assert [bool(r["disturbed"]) for r in rounds] == [False] * 6 + [True, True]
    assert "canary 2.00x" in rounds[6]["disturbed"] and "40%" in rounds[7]["disturbed"]


# ---- what the mutation sample of rounds.py found untested (make mutate SAMPLE=40 SEED=0)


def test_only_ok_rounds_count_as_measured_and_two_undisturbed_rounds_give_an_interval():
    """A failed round, one with a wrong output and one that went missing are not measured; two good
    rounds are enough for an interval (one is not: ``test_unstable_when_rounds_disagree_or_are_too_few``)."""
    rounds = [rnd(0, [10.0, 10.2, 9.9]), rnd(1, [10.4, 10.5, 10.3]), rnd(2, [10.0], status="wrong"),
              rnd(3, [], status="failed"), rnd(4, [], status="missing")]
    s = summarize(rounds)
    assert s["rounds_measured"] == 2 and s["rounds_used"] == 2
    assert s["ci_low_ms"] <= s["median_ms"] <= s["ci_high_ms"] and s["ci_half_pct"] > 0


def test_auto_rounds_stop_once_the_interval_is_no_wider_than_the_target():
    assert needs_more({"ci_half_pct": 2.0}, 2.0) is False  # reached: as wide as the target, not wider
    assert needs_more({"ci_half_pct": 2.01}, 2.0) is True
    assert needs_more({}, 2.0) is True and needs_more({"ci_half_pct": float("inf")}, 2.0) is True


def test_auto_rounds_start_with_the_documented_minimum():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "harness.md").read_text()
    documented = int(re.search(r"`--rounds auto` counts its minimum of (\d+) rounds", doc).group(1))
    assert planned_rounds(AUTO) == documented and planned_rounds(5) == 5


def _pairs(k, rng, change=1.1, between=0.02, n=8):
    a = synthetic_rounds(rng, 10.0, k, between, n=n)
    return a, [[v * change * np.exp(rng.normal(0, between)) for v in r] for r in a]


def test_paired_spread_has_a_degree_of_freedom_per_pair_but_one():
    rng = np.random.default_rng(5)
    for k in (2, 4, 5):
        assert paired_spread(*_pairs(k, rng))[1] == k - 1
    assert paired_spread(*_pairs(1, rng))[1] == 0  # one pair: no spread of its own, its samples' floor only
    with pytest.raises(ValueError, match="no paired rounds"):
        paired_half_width([], [])


def test_a_round_of_one_sample_adds_nothing_to_the_samples_floor():
    """Pairs whose log-ratios agree exactly: the spread is the floor from the rounds' own samples, and a
    pair with a single-sample round (no spread of its own) leaves it as the other pair alone sets it."""
    rng = np.random.default_rng(2)
    x = list(10.0 * np.exp(rng.normal(0, 0.01, 9)))
    y = [v * 1.1 for v in x]
    wide = [11.0 * math.exp(v) for v in (-0.4, -0.3, -0.2, -0.1, 0.0, 0.15, 0.25, 0.35, 0.5)]  # median 11.0:
    # this pair's log-ratio, 11.0 / 10.0, is the other pair's
    alone = paired_spread([x], [y])[0]
    assert alone > 0
    assert paired_spread([[10.0], x], [wide, y])[0] == pytest.approx(alone)


def test_the_prior_is_pooled_with_the_cells_spread_by_their_degrees_of_freedom():
    """limma's moderated spread: the variances averaged, weighted by degrees of freedom. A prior as wide
    as the cell only adds degrees of freedom (a narrower t); a prior of overwhelming weight is the spread;
    equal weights average the variances."""
    from scipy import stats as sps

    a, b = _pairs(4, np.random.default_rng(9), between=0.03)
    s, df = paired_spread(a, b)
    half, scale, n = paired_half_width(a, b)
    assert (scale, n) == (s, 4)
    half_p, scale_p, _ = paired_half_width(a, b, prior=(s, 8))
    assert scale_p == pytest.approx(s)
    assert half_p / half == pytest.approx(sps.t.ppf(0.975, df + 8) / sps.t.ppf(0.975, df))
    assert paired_half_width(a, b, prior=(0.05, 10**6))[1] == pytest.approx(0.05, rel=1e-4)
    assert paired_half_width(a, b, prior=(2 * s, df))[1] == pytest.approx(s * np.sqrt(2.5))
    change, lo, hi = paired_interval(a, b, prior=(s, 8))
    assert math.log1p(hi) - math.log1p(lo) == pytest.approx(2 * half_p)


def test_the_runs_typical_paired_spread_is_over_pairs_of_two_rounds_or_more():
    rng = np.random.default_rng(4)
    three, two, one = _pairs(3, rng), _pairs(2, rng), _pairs(1, rng)
    assert typical_paired_spread([three]) == pytest.approx(paired_spread(*three)[0])
    assert typical_paired_spread([one]) is None
    assert typical_paired_spread([two, three, one]) == pytest.approx(
        (paired_spread(*two)[0] + paired_spread(*three)[0]) / 2)
