"""ios_core.measurement.measure: the one measurement function. Warmup, calibration of the calls per sample,
per-call times beside per-sample times, ``sync`` before every clock read, the device-timer path,
bad arguments; on a fake host clock, so every expected figure is exact."""

from __future__ import annotations

import pytest

from ios_core.measurement import measure as measure_mod
from ios_core.measurement.measure import Measurement, measure


class FakeClock:
    """``time.perf_counter_ns`` stand-in: a call of ``fn`` advances it by the next duration (ms)."""

    def __init__(self, durations_ms):
        self.now = 0
        self.durations = list(durations_ms)
        self.calls = 0

    def __call__(self):
        return self.now

    def fn(self):
        d = self.durations[self.calls % len(self.durations)]
        self.calls += 1
        self.now += int(d * 1e6)
        return self.calls


@pytest.fixture
def clock(monkeypatch):
    def make(durations_ms):
        c = FakeClock(durations_ms)
        monkeypatch.setattr(measure_mod.time, "perf_counter_ns", c)
        return c
    return make


def test_samples_and_calls_on_the_host_clock(clock):
    c = clock([1.0, 3.0])
    m = measure(c.fn, warmup=2, number=2, repeat=3)
    assert c.calls == 2 + 2 * 3
    assert m.samples_ms == [2.0, 2.0, 2.0]  # each sample: one 1 ms and one 3 ms call, per call 2 ms
    assert m.call_ms == [1.0, 3.0] * 3
    assert m.median == 2.0 and m.min == 1.0 and m.max == 3.0
    assert m.summary()["percentiles_over"] == "calls" and m.summary()["calls"] == 6
    assert m.last == c.calls  # what the last timed call returned
    assert m.meta["clock"] == "host"


def test_min_sample_ms_doubles_the_calls_per_sample(clock):
    c = clock([3.0])
    m = measure(c.fn, warmup=0, number=1, repeat=2, min_sample_ms=10.0)
    assert m.number == 4  # 3, 6 ms too short; 4 calls = 12 ms
    assert c.calls == 1 + 2 + 4 + 2 * 4  # the calibration's samples, then the timed ones
    assert m.samples_ms == [3.0, 3.0]


def test_sync_is_called_before_every_clock_read(clock):
    c = clock([1.0])
    synced = []
    m = measure(c.fn, warmup=1, number=2, repeat=2, sync=lambda: synced.append(c.calls))
    # after warmup, then after each of the 4 timed calls
    assert synced == [1, 2, 3, 4, 5]
    assert m.samples_ms == [1.0, 1.0]


def test_stage_times_are_read_per_sample_and_calibration_discarded(clock):
    c = clock([2.0])
    reads = []

    def stage_times():
        reads.append(c.calls)
        return [2.0 * 2, 1.0 * 2]  # what two calls accumulated

    m = measure(c.fn, warmup=1, number=2, repeat=3, stage_times=stage_times)
    assert len(reads) == 1 + 3  # once to discard warmup, once per sample
    assert m.stage_ms == [[2.0, 1.0]] * 3 and m.stage_mean_ms == [2.0, 1.0]


@pytest.mark.parametrize("kw", [dict(warmup=-1), dict(number=0), dict(repeat=0)])
def test_bad_arguments(kw):
    with pytest.raises(ValueError, match="warmup >= 0"):
        measure(lambda: None, **kw)


def test_round_trip_through_a_dict(clock):
    c = clock([1.0, 2.0])
    m = measure(c.fn, warmup=0, number=1, repeat=4)
    back = Measurement.from_dict(m.to_dict())
    assert back == m and back.summary() == m.summary()


class CountingTimer:
    """A device timer stand-in: each sample lasts 2 ms per call on the 'device clock'."""

    clock = "fake-device"

    def __init__(self):
        self.calls = 0
        self.started = 0

    def start(self):
        self.started = self.calls

    def stop(self):
        return 2.0 * (self.calls - self.started)


def test_measure_uses_the_device_timer_when_given():
    t = CountingTimer()

    def fn():
        t.calls += 1

    m = measure(fn, warmup=2, number=3, repeat=4, timer=t)
    assert m.samples_ms == [2.0] * 4 and m.number == 3
    assert m.meta["clock"] == "fake-device"
    assert t.calls == 2 + 3 * 4


def test_measure_calibrates_number_with_the_device_timer():
    t = CountingTimer()

    def fn():
        t.calls += 1

    m = measure(fn, warmup=0, number=1, repeat=2, min_sample_ms=7.0, timer=t)
    assert m.number == 4  # 2 ms per call: 1, 2 too short, 4 calls = 8 ms


def test_host_clock_is_labelled():
    m = measure(lambda: None, warmup=0, repeat=2)
    assert m.meta["clock"] == "host"


# Time-bounded rounds (sample_s): warmup by time, the last warmup call as the calibration, the sample
# count chosen before the first timed sample. Expected counts are worked out by hand in each comment.

def test_a_long_call_takes_one_warmup_call_and_the_fewest_samples(clock):
    c = clock([12_700.0])  # nasnet at batch 32 on this machine: 12.7 s a call
    m = measure(c.fn, warmup=3, repeat=10, min_sample_ms=10.0, warmup_s=0.5, sample_s=1.0, min_repeat=3)
    # 1 warmup call (12.7 s > 0.5 s), no calibration call (12.7 s > 10 ms), 3 samples (the minimum)
    assert c.calls == 1 + 3
    assert m.warmup == 1 and m.number == 1 and m.repeat == 3
    p = m.meta["protocol"]
    assert (p["mode"], p["warmup_calls"], p["calibration_calls"], p["samples"]) == ("time-bounded", 1, 0, 3)
    assert "fewest" in p["why"]


def test_a_middle_call_fills_the_sample_budget(clock):
    c = clock([300.0])
    m = measure(c.fn, warmup=3, repeat=10, min_sample_ms=10.0, warmup_s=0.5, sample_s=1.0, min_repeat=3)
    # warmup: 300 ms, then 600 ms >= 500 ms: 2 calls; samples: ceil(1000 / 300) = 4
    assert c.calls == 2 + 4
    assert m.meta["protocol"]["warmup_calls"] == 2 and m.repeat == 4
    assert m.meta["protocol"]["warmup_ms"] == 600.0


def test_a_short_call_is_calibrated_and_takes_the_most_samples(clock):
    c = clock([1.0])
    m = measure(c.fn, warmup=3, repeat=10, min_sample_ms=10.0, warmup_s=0.5, sample_s=1.0, min_repeat=3)
    # warmup: 3 calls (3 ms < 500 ms: the most); 1 ms < 10 ms: calibration 1+2+4+8+16 calls -> 16 per
    # sample; ceil(1000 / 16) = 63 samples wanted, 10 at most
    assert m.number == 16 and m.repeat == 10
    assert c.calls == 3 + 31 + 10 * 16
    assert m.meta["protocol"]["calibration_calls"] == 31 and "most" in m.meta["protocol"]["why"]


def test_the_sample_count_is_fixed_before_the_timed_samples(clock):
    # the warmup calls take 250 ms, every timed one 2 s: the count comes from the warmup (ceil(1000/250)
    # = 4), not from the slow samples (which would have stopped a budget rule after the minimum)
    c = clock([250.0, 250.0] + [2000.0] * 20)
    m = measure(c.fn, warmup=3, repeat=10, min_sample_ms=10.0, warmup_s=0.5, sample_s=1.0, min_repeat=3)
    assert m.meta["protocol"]["warmup_calls"] == 2
    assert m.repeat == 4 and m.samples_ms == [2000.0] * 4


def test_no_warmup_asked_means_none_in_the_time_bounded_protocol_too(clock):
    c = clock([300.0])
    m = measure(c.fn, warmup=0, repeat=10, min_sample_ms=10.0, warmup_s=0.5, sample_s=1.0, min_repeat=3)
    # no warmup call, so one calibration call (300 ms >= 10 ms at once), then ceil(1000/300) = 4 samples
    assert c.calls == 1 + 4 and m.meta["protocol"]["calibration_calls"] == 1


def test_the_fixed_protocol_is_what_it_was(clock):
    c = clock([300.0])
    m = measure(c.fn, warmup=3, repeat=10, min_sample_ms=10.0)
    assert c.calls == 3 + 1 + 10  # 3 warmup, 1 calibration, 10 samples, whatever a call costs
    assert m.meta["protocol"]["mode"] == "fixed" and m.repeat == 10 and m.warmup == 3


@pytest.mark.parametrize("kw", [{"sample_s": -1.0}, {"warmup_s": float("nan")}, {"min_repeat": 0}])
def test_bad_time_bounds(kw):
    with pytest.raises(ValueError):
        measure(lambda: None, **kw)
