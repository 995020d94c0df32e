"""The optimize worker's task (ios_bench.running.task_optimize) on cuda, with the fake CUDA device
standing in for the GPU: the end-to-end candidates every search ends with reach the schedule's
saved figures (the ``.stats`` file a reused cell reads) and the task's result, from which the
sweep builds the cell record."""

from __future__ import annotations

import json

from ios_bench.running import task_optimize
from tests.runtime_helpers import mixed_graph
from tests.stream_fakes import TorchQueueDevice


def test_every_candidate_reaches_the_saved_figures_and_the_result(tmp_path, monkeypatch):
    from ios_core.cost.measured import MeasuredCostModel

    made = []

    def fake_cost_model(kind, device, threads, provider="torch", cache=True):
        assert kind == "measured" and device == "cuda"
        cm = MeasuredCostModel(device="cuda", backend=TorchQueueDevice(1), cache=tmp_path / "p.sqlite", warmup=1,
                               number=1, repeat=2)
        made.append(cm)
        return cm

    monkeypatch.setattr(task_optimize, "_make_cost_model", fake_cost_model)
    model = tmp_path / "mixed.json"
    mixed_graph().init_weights(0).save(str(model))
    spec = {"task": "optimize", "model_spec": "mixed", "model_path": str(model), "batch_size": 1, "device": "cuda",
            "seed": 0, "schedules": ["both", "sequential"], "cost_model": "measured",
            "schedule_paths": [str(tmp_path / "both.json"), str(tmp_path / "seq.json")]}
    out = task_optimize.task_optimize(spec)
    both, seq = out["schedules"]
    assert both["status"] == "ok" and seq["status"] == "ok" and len(made) == 1
    cands = both["validation"]["candidates"]
    assert [c["name"] for c in cands] == ["schedule", "sequential", "greedy", "parallel", "overhead"]
    assert all(c["predicted_ms"] > 0 and (c.get("measured_ms") or 0) > 0 for c in cands), cands
    assert both["validation"]["kept"] in {c["name"] for c in cands}
    # the distinct schedules timed (a row identical to another carries its figure: it ran nothing)
    distinct = sum(not c.get("same_as") for c in cands)
    assert both["cost_model_stats"]["candidates_timed"] == distinct >= 1 and both["cost_model_stats"]["correction"]
    assert both["cost_model_stats"]["candidates_considered"] == len(cands) == 5
    saved = json.loads((tmp_path / "both.stats").read_text())
    assert saved["validation"]["candidates"] == cands  # a cell reusing the schedule reports them too
    assert "validation" not in seq  # sequential: nothing to choose


def test_a_search_budget_is_an_ios_option_with_its_own_schedule_files():
    from ios_bench.planning.plan import ios_options_problem, ios_options_tag
    from ios_bench.running.task_optimize import optimize_target

    assert ios_options_problem({"search_seconds": 60}) is None
    assert ios_options_problem({"search_seconds": 0}) is not None
    assert ios_options_problem({"search_seconds": 1.5}) is not None
    assert ios_options_tag({"search_seconds": 60}) == "-b60"  # never the full search's file
    assert optimize_target({"batch_size": 16, "ios_options": {"search_seconds": 60}})["search_seconds"] == 60
    assert "search_seconds" not in optimize_target({"batch_size": 16})
