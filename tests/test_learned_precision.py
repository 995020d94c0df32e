"""The learned cost model at reduced precision (issue 46): it is fitted on fp32 operator timings
(``ios-bench ops collect`` measures at fp32), so a bf16 or int8 search is refused with one line,
never ranked by fp32 predictions under the cell's precision: the model and the factory refuse it,
a sweep's search worker gets the refusal, the sweep skips the IOS cell with the reason, and a
request only IOS could give is refused whole (exit 2)."""

from __future__ import annotations

import json

import pytest

from ios_core.cost import make_cost_model
from ios_core.cost.learned import LearnedCostModel, precision_reason

REASON = "fitted on fp32 operator timings"


def test_the_learned_model_refuses_a_precision_it_is_not_fitted_at(tmp_path):
    assert precision_reason("fp32") is None and precision_reason(None) is None
    for p in ("bf16", "int8", "fp16"):
        why = precision_reason(p)
        assert REASON in why and f"a {p} search" in why and "\n" not in why
    # refused before any model file is read: no file would make fp32 timings bf16 ones
    with pytest.raises(ValueError, match=REASON):
        make_cost_model("learned", model=str(tmp_path / "none.json"), precision="bf16")
    with pytest.raises(ValueError, match=REASON):
        LearnedCostModel({"providers": ["torch"], "peaks": {}}, precision="int8")
    # fp32 goes on to the model file as before
    with pytest.raises(ValueError, match="not a learned cost model"):
        make_cost_model("learned", model=str(tmp_path / "none.json"), precision="fp32")


def test_a_sweeps_search_worker_at_bf16_never_gets_fp32_predictions(tmp_path, monkeypatch):
    from ios_bench.running.task_optimize import _cost_model_for, optimize_target

    monkeypatch.setenv("IOS_BENCH_CACHE", str(tmp_path / "cache"))  # no learned model file there
    spec = {"cost_model": "learned", "device": "cpu", "provider": "openvino", "batch_size": 1, "threads": 1}
    for p in ("bf16", "int8"):
        with pytest.raises(ValueError, match=REASON):
            _cost_model_for({**spec, "precision": p}, optimize_target(spec))
    with pytest.raises(ValueError, match="no learned model at"):  # fp32: looks for its model file, as before
        _cost_model_for({**spec, "precision": "fp32"}, optimize_target(spec))


def test_the_plan_skips_a_learned_search_at_another_precision_and_refuses_a_request_only_it_could_give():
    from ios_bench.commands.run import precision_offer_problem
    from ios_bench.planning.probing import search_precision_reason

    assert search_precision_reason("learned", "fp32") is None
    assert REASON in search_precision_reason("learned", "bf16")
    assert search_precision_reason("measured", "bf16") is None and search_precision_reason("synthetic", "int8") is None
    # IOS on openvino offers bf16 and int8; with the learned cost model no IOS cell can be searched at them
    for p in ("bf16", "int8"):
        problem = precision_offer_problem([p], [], None, ["cpu"], ["openvino"], "learned")
        assert "only IOS offers it" in problem and REASON in problem
        assert precision_offer_problem([p], [], None, ["cpu"], ["openvino"], "measured") is None
    # a peer that offers it: the request stands (the IOS cells are skipped with their reason)
    assert precision_offer_problem(["bf16"], ["torch"], None, ["cpu"], ["openvino"], "learned") is None
    assert precision_offer_problem(["fp32"], [], None, ["cpu"], ["openvino"], "learned") is None


def test_a_sweep_skips_the_ios_cell_with_the_reason_and_a_request_only_ios_could_give_is_one_line(tmp_path):
    from tests.harness_helpers import FAST, cli

    res = cli(["run", "--models", "sample", "--frameworks", "none", "--schedules", "both", "--precision", "bf16",
               "--cost-model", "learned", *FAST, "--out", "runs/none"], tmp_path)
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    assert REASON in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs/none").exists()
    res = cli(["run", "--models", "sample", "--frameworks", "torch", "--schedules", "both", "--precision", "bf16",
               "--cost-model", "learned", *FAST, "--out", "runs/p", "--no-report"], tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    recs = {r["cell"]: r for r in map(json.loads, (tmp_path / "runs/p/results.jsonl").read_text().splitlines())}
    ios = recs["sample|b1|ios-both|cpu|bf16"]
    assert ios["status"] == "skipped" and REASON in ios["reason"]
    assert recs["sample|b1|torch|cpu|bf16"]["status"] == "ok"
    assert not list((tmp_path / "runs/p").glob("schedules/*.json"))  # never searched


def test_optimize_with_the_learned_model_at_bf16_is_one_line(run_cli):
    code, out, err = run_cli(["optimize", "--model", "sample", "--cost", "learned", "--cost-option", "precision=bf16"])
    assert code == 2 and REASON in err and len(err.strip().splitlines()) == 1


def test_a_sweeps_learned_search_predicts_for_the_cells_provider_threads_and_device(tmp_path, monkeypatch):
    """The search worker's learned model is the cell's: its provider's and thread budget's predictions
    (a model fitted without them refuses), refined on its device with the sweep's profile database;
    never torch's figures at the default thread count under an openvino cell's label."""
    import numpy as np

    from ios_bench.running.task_optimize import _cost_model_for, optimize_target
    from ios_core.cost.features import ROOF_NAMES, feature_names
    from ios_core.cost.learned import FORMAT, TARGET

    lgb = pytest.importorskip("lightgbm")
    monkeypatch.setenv("IOS_BENCH_CACHE", str(tmp_path / "cache"))
    names = feature_names() + ROOF_NAMES
    rng = np.random.default_rng(0)
    x, y = rng.random((40, len(names) + 1)), rng.random(40)  # + one provider column (torch)
    booster = lgb.train({"verbose": -1, "min_data_in_leaf": 5}, lgb.Dataset(x, y), num_boost_round=2)
    doc = {"format": FORMAT, "features": names, "target": TARGET, "providers": ["torch"],
           "peaks": {"torch/1": [1e6, 1e6], "torch/2": [2e6, 2e6]}, "booster": booster.model_to_string()}
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache/learned_cost.json").write_text(json.dumps(doc))
    spec = {"cost_model": "learned", "device": "cuda:0", "provider": "torch", "batch_size": 1, "threads": 1,
            "precision": "fp32", "profile_db_path": str(tmp_path / "p.sqlite"),
            "ios_options": {"cost_cache": "run"}}
    cm = _cost_model_for(spec, optimize_target(spec))
    assert (cm.provider, cm.threads, cm.device) == ("torch", 1, "cuda:0")
    assert cm._measured_options["cache"] == str(tmp_path / "p.sqlite")
    with pytest.raises(ValueError, match="not 'openvino'"):
        _cost_model_for({**spec, "provider": "openvino"}, optimize_target(spec))
