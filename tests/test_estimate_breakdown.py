"""ios_bench.planning.estimate_breakdown: a sweep's estimate attributed to batch, model, framework and kind of
cost, and the cells predicted capped, on a plan whose costs are known (every figure learnt, none stated)."""

import pytest

from ios_bench.planning import estimate
from ios_bench.planning.cells import Cell
from ios_bench.planning.estimate_breakdown import breakdown, capped_rounds, predicted_caps, totals, under_budget

FIXED = {"warmup": 3, "repeat": 10, "number": 1, "min_sample_ms": 10.0, "sample_s": None, "cap_factor": 3.0}


def _known_model(protocol=FIXED):
    """Latencies, rounds' fixed parts, first builds and the search all learnt: torch 100 ms, openvino 20 ms,
    IOS-Both 30 ms at batch 1 (openvino 40 ms, torch 200 ms at 2); fixed parts 1.0, 0.5, 2.0 s; torch's first
    build 3 s; the search 10 s and its worker's start 1 s; no speed probe (figures as they are)."""
    h = estimate.History()
    h.latency_ms.update({("m", 1, "torch"): 100.0, ("m", 1, "openvino"): 20.0, ("m", 1, "ios-both"): 30.0,
                         ("m", 2, "torch"): 200.0, ("m", 2, "openvino"): 40.0})
    for key, fixed in (("torch", 1.0), ("openvino", 0.5), ("ios[torch]", 2.0)):
        h.fixed_s[key] = [fixed]
        h.fixed_by_model[(key, "m")] = [fixed]
    h.first_build_s.update({"torch": [("m", 3.0)], "openvino": [("m", 0.0)], "ios[torch]": [("m", 0.0)]})
    h.optimize_s[("m", 1, "torch", "fp32")] = {"both": 10.0}
    m = estimate.Model(h, {"m": 1_000_000_000}, {"m": 10}, protocol=protocol)
    m.calibrated = {"ios-sequential": 1.0}
    return m


CELLS = [Cell("m", "m", 1, "torch", "cpu", None, "torch", 1.0), Cell("m", "m", 1, "openvino", "cpu", None, "openvino"),
         Cell("m", "m", 1, "ios-both", "cpu", "both", "ios", provider="torch"),
         Cell("m", "m", 2, "openvino", "cpu", None, "openvino")]


def test_the_breakdown_of_a_plan_whose_costs_are_known():
    m = _known_model()
    caps = predicted_caps(m, CELLS, 3.0)
    assert list(caps) == [CELLS[0].key] and caps[CELLS[0].key]["ratio"] == pytest.approx(5.0)  # 100 ms vs 20
    left = capped_rounds({c.key: 3 for c in CELLS}, caps, 3)
    assert [left[c.key] for c in CELLS] == [1, 3, 3, 3]
    refs, searches = {("m", 1), ("m", 2)}, {("m", 1, "torch", "fp32"): 1}
    rows = breakdown(m, CELLS, left, refs, searches)
    # a round, by hand (1 check, 3 warmup, 1 calibration, 10 timed calls; canaries 2 x 0.05 s):
    # torch b1 (capped, 1 round): timed 1.0, warmup 0.3, check+calibration 0.2, start 1.1, first build 3.0
    # openvino b1 (3 rounds of: 0.2, 0.06, 0.04, 0.6), IOS-Both b1 (3 of: 0.3, 0.09, 0.06, 2.1),
    # openvino b2 (3 of: 0.4, 0.12, 0.08, 0.6); references 1.2 + 2 x torch's latency: 1.4 and 1.6;
    # the search: its worker's start 1.0 + 10.0
    kinds = totals(rows, "kind")
    assert kinds == pytest.approx({"timed": 1.0 + 0.6 + 0.9 + 1.2, "warmup": 0.3 + 0.18 + 0.27 + 0.36,
                                   "check_calibration": 0.2 + 0.12 + 0.18 + 0.24, "start": 1.1 + 1.8 + 6.3 + 1.8,
                                   "first_build": 3.0, "reference": 3.0, "search": 11.0})
    assert totals(rows, "batch") == pytest.approx({1: 5.6 + 2.7 + 7.65 + 1.4 + 11.0, 2: 3.6 + 1.6})
    assert totals(rows, "framework") == pytest.approx({"torch": 5.6, "openvino": 2.7 + 3.6, "ios-both": 7.65,
                                                       "(IOS schedule searches)": 11.0, "(reference outputs)": 3.0})
    total = estimate.sweep_seconds(m, CELLS, left, refs, searches)["seconds"]
    assert total == pytest.approx(33.55) and sum(r["seconds"] for r in rows) == pytest.approx(total)


def test_a_time_bounded_round_is_costed_by_its_own_calls():
    m = _known_model({**FIXED, "sample_s": 1.0, "warmup_s": 0.5, "min_repeat": 3})
    # torch b1, 100 ms: 3 warmup calls (0.5 s would take 5), no calibration call, 10 samples (1 s: 10)
    assert m.round_parts("m", 1, "torch") == pytest.approx({"timed": 1.0, "warmup": 0.3, "check_calibration": 0.1,
                                                            "start": 1.1, "build": 0.0})


def test_capping_spares_the_best_peer_ios_cells_and_a_plan_without_it():
    m = _known_model()
    slow_ios = Cell("m", "m", 1, "ios-greedy", "cpu", "greedy", "ios", provider="torch")
    m.history.latency_ms[("m", 1, "ios-greedy")] = 1000.0  # 50x the best peer: an IOS cell is never capped
    caps = predicted_caps(m, [*CELLS, slow_ios], 3.0)
    assert set(caps) == {CELLS[0].key}  # not openvino (the best peer), not the IOS cells, not b2's lone peer
    assert predicted_caps(m, CELLS, 6.0) == {}  # 5x is under a factor of 6
    assert predicted_caps(m, CELLS, None) == {}  # capping off


def test_a_time_budget_keeps_every_first_round_and_cuts_later_rounds_group_by_group():
    """--time-budget on the known plan: group b1 (searches 11.0, reference 1.4, first rounds torch 5.6 with its
    cold build, openvino 0.9, IOS-Both 2.55: 21.45 s; later rounds 2 x 0.9 + 2 x 2.55 = 6.9 s), then group b2
    (reference 1.6, first round 1.2: 2.8 s; later 2.4 s)."""
    m = _known_model()
    left = capped_rounds({c.key: 3 for c in CELLS}, predicted_caps(m, CELLS, 3.0), 3)
    refs, searches = {("m", 1), ("m", 2)}, {("m", 1, "torch", "fp32"): 1}
    whole = under_budget(m, CELLS, left, refs, searches, 1000.0)
    assert whole["seconds"] == pytest.approx(estimate.sweep_seconds(m, CELLS, left, refs, searches)["seconds"])
    assert (whole["cut_rounds"], whole["one_round_groups"], whole["groups"]) == (0, 0, 2)
    # 1.05 s left after b1's first pass: openvino's second round (0.9) and IOS-Both's (2.55, started with 0.15 s
    # left) run, their third rounds do not; b2 gets its first round only
    tight = under_budget(m, CELLS, left, refs, searches, 22.5)
    assert tight["first"] == pytest.approx(21.45 + 2.8) and tight["later"] == pytest.approx(3.45)
    assert tight["seconds"] == pytest.approx(27.7)
    assert (tight["cut_rounds"], tight["one_round_groups"]) == (4, 1)
    none = under_budget(m, CELLS, left, refs, searches, 1.0)
    assert none["seconds"] == pytest.approx(24.25) and (none["cut_rounds"], none["one_round_groups"]) == (6, 2)
