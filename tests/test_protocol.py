"""ios_core.measurement.protocol: the calls one round makes, by kind, under both protocols (expected counts
worked out by hand from the protocol's statement, not from the function)."""

from dataclasses import asdict

import pytest

from ios_core.measurement.protocol import FIXED, TIME_BOUNDED, protocol_fields, recorded_total, round_calls

NEW = {"warmup": 3, "warmup_s": 0.5, "repeat": 10, "min_repeat": 3, "sample_s": 1.0, "number": 1,
       "min_sample_ms": 10.0}


@pytest.mark.parametrize("latency_ms, want", [
    # (check, warmup, calibration, samples, calls per sample, total)
    (12_700.0, (1, 3, 1, 10, 1, 15)),  # nasnet at batch 32: the 15 calls
    (5.0, (1, 3, 3, 10, 2, 27)),  # 1 + 2 calls to reach 10 ms, then 10 samples of 2
    (0.5, (1, 3, 63, 10, 32, 387)),  # 1+2+4+8+16+32 calls to reach 10 ms
])
def test_an_older_plan_is_the_fixed_protocol_and_counts_every_call(latency_ms, want):
    for plan in ({}, {"warmup": 3, "repeat": 10, "number": 1, "min_sample_ms": 10.0}):
        got = round_calls(latency_ms, plan)
        assert got.mode == FIXED
        assert (got.check, got.warmup, got.calibration, got.samples, got.number, got.total) == want


@pytest.mark.parametrize("latency_ms, want", [
    (12_700.0, (1, 0, 0, 3, 1, 4)),  # the check call outlasts 0.5 s: it is the warmup; the minimum 3 samples
    (500.0, (1, 0, 0, 3, 1, 4)),
    (499.0, (1, 2, 0, 3, 1, 6)),  # a check call under 0.5 s is no warmup: 2 warmup calls
    (300.0, (1, 2, 0, 4, 1, 7)),  # ceil(500/300) = 2 warmup calls, ceil(1000/300) = 4 samples
    (200.0, (1, 3, 0, 5, 1, 9)),
    (40.0, (1, 3, 0, 10, 1, 14)),  # 25 samples would fill 1 s: the most, 10
    (0.5, (1, 3, 63, 10, 32, 387)),  # calibrated to 32 calls (16 ms), ceil(1000/16) = 63 samples: 10
])
def test_a_time_bounded_round_takes_what_its_budgets_buy_between_its_counts(latency_ms, want):
    got = round_calls(latency_ms, NEW)
    assert got.mode == TIME_BOUNDED
    assert (got.check, got.warmup, got.calibration, got.samples, got.number, got.total) == want


def test_calls_per_sample_double_from_number_and_warmup_can_be_off_or_fixed():
    got = round_calls(3.0, {**NEW, "number": 2})  # 2 calls: 6 ms, 4: 12 ms; calibration 2 + 4
    assert (got.calibration, got.number, got.timed) == (6, 4, 40)
    assert round_calls(3.0, {**NEW, "warmup": 0}).warmup == 0
    assert round_calls(12_700.0, {**NEW, "warmup_s": None}).warmup == 3  # the old fixed count of warmup calls
    assert round_calls(12_700.0, NEW, check_warms=False).warmup == 1  # a GPU round: its check call is no warmup
    zero = round_calls(12_700.0, {**NEW, "warmup": 0})  # no warmup at all: the check call calibrates nothing
    assert (zero.warmup, zero.calibration) == (0, 1)
    assert round_calls(12_700.0, {**NEW, "min_sample_ms": None}).calibration == 0
    assert round_calls(1.0, {**NEW, "min_repeat": 20, "repeat": 5}).samples == 5  # repeat is the most


class _Plan:  # a Plan-like object: its attributes, a missing one at its default
    warmup, repeat, sample_s = 2, 4, 0.1


def test_a_plan_object_is_read_by_its_attributes_with_defaults():
    fields = protocol_fields(_Plan())
    assert (fields["warmup"], fields["repeat"], fields["sample_s"], fields["min_repeat"]) == (2, 4, 0.1, 3)
    assert protocol_fields(object())["sample_s"] is None  # no such field: the fixed protocol
    assert protocol_fields({})["cap_factor"] is None  # a plan written before capping caps nothing
    got = round_calls(50.0, _Plan())  # ceil(100/50) = 2 samples, below min_repeat 3
    assert (got.warmup, got.samples) == (2, 3)


def test_a_rounds_record_of_its_calls_is_read_as_a_count_or_as_its_kinds():
    # a worker's round: "calls" counts its timed calls only (what its percentiles are over); its protocol says
    # the warmup and calibration calls, and the output check is one more
    worker = {"calls": 10, "protocol": {"mode": "time-bounded", "warmup_calls": 3, "calibration_calls": 0,
                                        "samples": 10, "number": 1}}
    assert recorded_total(worker) == 14
    assert recorded_total({"calls": 7}) is None  # the timed calls alone: the round's total is not known
    assert recorded_total({"calls": asdict(round_calls(5.0, {}))}) == 27  # 1 check, 3 warmup, 3 calibration, 10 x 2
    assert recorded_total({"calls": {"check": 1}}) is None and recorded_total({}) is None
    assert recorded_total({"protocol": {"samples": 3}}) is None and recorded_total(None) is None


def test_a_long_output_check_call_is_the_warmup_of_a_time_bounded_round():
    """measure(checked_ms=...): a check call that alone lasted warmup_s is the warmup (no warmup call), its
    time the expected call's (no calibration call); a shorter one warms nothing; the fixed protocol ignores it."""
    from ios_core.measurement.measure import measure

    t = [0]

    def now():
        return t[0]

    def call():  # each call takes 600 ms on the fake clock
        t[0] += 600_000_000

    kw = dict(warmup=3, repeat=10, min_sample_ms=10.0, warmup_s=0.5, sample_s=1.0, min_repeat=3, now=now)
    long = measure(call, checked_ms=600.0, **kw).meta["protocol"]
    assert (long["warmup_calls"], long["calibration_calls"], long["samples"]) == (0, 0, 3)
    assert long["warmup_by_check_ms"] == 600.0
    short = measure(call, checked_ms=100.0, **kw).meta["protocol"]
    assert short["warmup_calls"] == 1 and "warmup_by_check_ms" not in short
    fixed = measure(call, checked_ms=600.0, warmup=2, repeat=3, now=now).meta["protocol"]
    assert fixed["warmup_calls"] == 2


def test_a_check_call_that_was_cold_is_not_taken_for_warmup():
    """A fast call whose check call was slow (a JIT's first call, lazy imports): the first timed call, under
    half the check's, says so; the calls made become warmup and the round is the usual one (calibrated, as
    many samples as fill the budget), not 3 samples of one 2 ms call."""
    from ios_core.measurement.measure import measure

    t = [0]

    def now():
        return t[0]

    def call():  # 2 ms a call on the fake clock
        t[0] += 2_000_000

    kw = dict(warmup=3, repeat=10, min_sample_ms=10.0, warmup_s=0.5, sample_s=1.0, min_repeat=3, now=now)
    m = measure(call, checked_ms=800.0, **kw)
    p = m.meta["protocol"]
    assert "warmup_by_check_ms" not in p
    assert p["cold_check"] == {"check_ms": 800.0, "first_call_ms": 2.0, "calls": 3}
    assert p["warmup_calls"] == 3 and p["number"] == 8 and p["samples"] == 10  # 8 calls make a 16 ms sample
    assert len(m.samples_ms) == 10 and m.median == 2.0
    # a call as long as half the check's confirms it: the first timed call is a sample
    t[0] = 0

    def slower():
        t[0] += 400_000_000

    p = measure(slower, checked_ms=800.0, **kw).meta["protocol"]
    assert p["warmup_by_check_ms"] == 800.0 and p["warmup_calls"] == 0 and "cold_check" not in p
