"""ios_core.optimizer.optimize: a schedule validated against the sequential one (kept only when it
measures faster), with a judge that says what to keep and with the measured cost model."""

from __future__ import annotations

import pytest

from ios_core.cost.measured import MeasuredCostModel
from ios_core.optimizer import schedule
from tests.runtime_helpers import fan_graph

FAST = dict(warmup=1, number=1, repeat=2, min_sample_ms=None)


class _Judge:
    """A deterministic cost model that claims parallel stages are free and whose validation
    reports what the test tells it."""

    def __init__(self, kept):
        self.kept = kept
        self.asked = []

    def stage_latency(self, stage, batch_size):
        return 1.0 if len(stage.groups) == 1 else 0.1

    def validate_schedule(self, schedule, sequential, batch_size):
        self.asked.append((schedule, sequential))
        return {"schedule_ms": 2.0 if self.kept == "sequential" else 1.0, "sequential_ms": 1.5, "kept": self.kept}


def test_optimizer_returns_sequential_when_the_schedule_measures_slower():
    g, _ = fan_graph()
    judge = _Judge("sequential")
    res = schedule(g, "both", judge)
    out, st = res.graph, res.stats
    assert st.validation["kept"] == "sequential" and st.validation["schedule_ms"] == 2.0
    assert all(len(stage) == 1 and len(stage[0]) == 1 for b in out.blocks for stage in b.stages)
    assert st.cost_ms == pytest.approx(st.validation["sequential_cost_ms"])
    assert st.validation["schedule_cost_ms"] < st.validation["sequential_cost_ms"]
    assert "SEQUENTIAL schedule is returned" in st.summary()
    kept = schedule(g, "both", _Judge("schedule"))
    assert kept.stats.validation["kept"] == "schedule"
    assert any(len(stage) > 1 for b in kept.graph.blocks for stage in b.stages)
    assert schedule(g, "both", _Judge("schedule"), validate=False).stats.validation is None
    j = _Judge("schedule")
    schedule(g, "sequential", j)
    assert j.asked == []  # nothing to validate


def test_measured_validation_times_both_with_the_runtime():
    g, _ = fan_graph()
    g.init_weights(0)
    cm = MeasuredCostModel(threads=2, cache=False, **FAST)
    v = schedule(g, "parallel", cm).stats.validation
    assert v["schedule_ms"] > 0 and v["sequential_ms"] > 0 and v["kept"] in ("schedule", "sequential")
    assert (v["kept"] == "schedule") == (v["schedule_ms"] < v["sequential_ms"])
    assert v["provider"] == "torch"


class _Device:
    """A cost model whose end-to-end 'device' runs a schedule in the sum of its stages' figures plus
    a hidden 0.5 ms per stage (what the stage figures miss), counting what it is asked to time."""

    candidates = ("schedule", "sequential", "greedy", "parallel", "overhead")

    def __init__(self):
        from ios_core.cost.synthetic import SyntheticCostModel

        self.base = SyntheticCostModel()
        self.timed: list[list[str]] = []
        self.noted = None

    def stage_latency(self, stage, batch_size):
        return self.base.stage_latency(stage, batch_size)

    def time_candidates(self, graphs, batch_size):
        from ios_core.optimizer import Schedule, schedule_cost

        self.timed.append(list(graphs))
        return {"measured_ms": {k: schedule_cost(g, self.base, batch_size) + 0.5 * len(Schedule.of(g))
                                for k, g in graphs.items()}, "failed": {}, "seconds": 0.0, "form": "test"}

    def note_candidates(self, validation):
        self.noted = validation


def test_the_search_keeps_the_candidate_that_measures_fastest_and_fits_the_per_stage_cost():
    from ios_core.models import get

    g = get("sample", input_shape=(8, 12, 12)).init_weights(0)
    dev = _Device()
    res = schedule(g, "both", dev, batch_size=1)
    v = res.stats.validation
    rows = {c["name"]: c for c in v["candidates"]}
    assert list(rows) == ["schedule", "sequential", "greedy", "parallel", "overhead"]
    # identical schedules are timed once; every candidate has both figures
    assert all(name not in dev.timed[0] for name, c in rows.items() if "same_as" in c)
    assert all(c["predicted_ms"] > 0 and c["measured_ms"] > 0 for c in rows.values())
    # measured = predicted + 0.5 per stage, exactly: the fit finds it
    assert v["per_stage_ms"] == pytest.approx(0.5)
    for c in rows.values():
        assert c["measured_ms"] == pytest.approx(c["predicted_ms"] + 0.5 * c["stages"])
    best = min(c["measured_ms"] for c in rows.values())
    assert rows[v["kept"]]["measured_ms"] == best and res.stats.num_stages == rows[v["kept"]]["stages"]
    assert dev.noted is v


def test_validation_text_names_each_candidate():
    from ios_core.optimizer.optimize import fit_per_stage_ms, validation_text

    text = validation_text({"candidates": [{"name": "schedule", "measured_ms": 1.25},
                                           {"name": "greedy", "same_as": "schedule", "measured_ms": 1.25},
                                           {"name": "overhead", "reason": "RuntimeError: gone"}],
                            "kept": "greedy", "form": "cuda-graph replay"})
    assert text == ("candidates timed end to end (cuda-graph replay, ms): schedule 1.250, greedy (= schedule), "
                    "overhead - -> GREEDY kept")
    assert fit_per_stage_ms([{"measured_ms": 1.0, "predicted_ms": 2.0, "stages": 4}]) == 0.0  # never negative
    assert fit_per_stage_ms([{"measured_ms": 1.0, "predicted_ms": None, "stages": 4}]) is None
