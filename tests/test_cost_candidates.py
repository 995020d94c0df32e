"""The end of a measured search (ios_core/cost/candidates.py, ios_core/cost/timing_cpu.py): whole
schedules raced end to end, the race and the warmup bounded by time as a cell's round is."""

from __future__ import annotations

import pytest

from ios_core.cost import candidates, timing_cpu


class FakeClock:
    def __init__(self):
        self.t = 1000.0  # not 0: the rounds' budget is counted from their start, not from the clock's zero

    def __call__(self) -> float:
        return self.t


class FakeTiming:
    """Each candidate's call lasts ``ms[name]``; a sample advances the fake clock by that much."""

    clock = "host"

    def __init__(self, ms: dict, clock: FakeClock):
        self.ms, self.clk, self.calls = ms, clock, []

    def candidate(self, graph, batch_size):
        return graph  # the "runtime" is the candidate's name

    def sample(self, rt):
        self.calls.append(rt)
        self.clk.t += self.ms[rt] / 1000.0
        return self.ms[rt]


def race(ms: dict, repeat: int = 7, **kw):
    clk = FakeClock()
    # a stand-in scheduled graph per candidate (it has weights: candidate() gets it as is and returns it)
    graphs = {k: type("G", (), {"has_weights": True})() for k in ms}
    timing = FakeTiming({graphs[k]: v for k, v in ms.items()}, clk)
    out = candidates.time_candidates(timing, graphs, 1, repeat, race=True, clock=clk, **kw)
    return out, timing


def test_short_calls_take_every_round_asked_for():
    out, _ = race({"schedule": 50.0, "sequential": 52.0, "greedy": 51.0, "parallel": 53.0})
    assert out["rounds"] == 7
    assert out["samples_by"] == {"schedule": 7, "sequential": 7, "greedy": 7, "parallel": 7}
    assert "asked for" in out["stopped"]


def test_long_calls_stop_at_the_fewest_rounds_once_the_budget_is_spent():
    # four candidates of 1.6 s: one round is 6.4 s, past the 2 s budget: RACE_ROUNDS rounds, not 7
    out, timing = race({"schedule": 1600.0, "sequential": 1650.0, "greedy": 1620.0, "parallel": 1700.0})
    assert out["rounds"] == candidates.RACE_ROUNDS == 3
    assert len(timing.calls) == 4 * 3
    assert out["samples_by"]["schedule"] == 3
    assert "2 s of rounds spent after 3 rounds" in out["stopped"]
    assert out["budget_s"] == candidates.RACE_S


def test_rounds_in_between_stop_when_the_budget_is_spent():
    # two candidates of 150 ms: 0.3 s a round; the 4th round starts at 0.9 s, ... the 7th at 1.8 s,
    # the 8th would start at 2.1 s: all 7 asked for run; of 250 ms, a round is 0.5 s: rounds 1-4
    # spend 2.0 s, so the 5th does not start
    out, _ = race({"schedule": 150.0, "sequential": 160.0})
    assert out["rounds"] == 7
    out, _ = race({"schedule": 250.0, "sequential": 250.0})
    assert out["rounds"] == 4


def test_no_budget_is_every_round_and_fewer_asked_than_the_minimum_are_kept():
    out, _ = race({"schedule": 1600.0, "sequential": 1650.0}, budget_s=None)
    assert out["rounds"] == 7 and out["samples_by"]["schedule"] == 7
    out, _ = race({"schedule": 1600.0, "sequential": 1650.0}, repeat=2)
    assert out["rounds"] == 2


def test_the_race_still_drops_a_slow_candidate_after_the_fewest_rounds():
    out, _ = race({"schedule": 10.0, "sequential": 10.5, "greedy": 20.0}, repeat=7)
    assert out["samples_by"] == {"schedule": 7, "sequential": 7, "greedy": 3}


class _Rt:
    pass


@pytest.mark.parametrize("provider,call_s,runs", [
    ("onnxruntime", 0.001, 250),  # short calls: 5 runs and 0.25 s (0.001 s calls: 250 runs; capped at 50)
    ("onnxruntime", 1.6, 2),      # a call of seconds: 2 runs, not 5
    ("onnxruntime", 0.3, 4),      # 0.3 s calls: the 4th run ends past 1 s
    ("torch", 1.6, 2),
    ("torch", 0.03, 4),           # torch: 2 runs and 0.1 s
])
def test_a_candidates_warmup_is_bounded_by_time(monkeypatch, provider, call_s, runs):
    clk = FakeClock()
    monkeypatch.setattr(timing_cpu.time, "perf_counter", clk)
    import ios_core.runtime as runtime_pkg

    monkeypatch.setattr(runtime_pkg, "make_runtime", lambda *a, **k: _Rt())
    t = timing_cpu.CpuTiming(provider, None, {}, threads=1)
    made = []

    def sample(rt, warmup=0):
        made.append(rt)
        clk.t += call_s
        return call_s * 1000.0

    monkeypatch.setattr(t, "sample", sample)
    t.candidate(object(), 1)
    assert len(made) == min(runs, 50)
