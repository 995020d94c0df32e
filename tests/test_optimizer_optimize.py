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
