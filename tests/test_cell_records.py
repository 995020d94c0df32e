"""ios_bench.records.cell_records: what every record of a cell says, and its record built from its rounds
(through ios_bench.records.record.CellResult)."""

from ios_bench.planning.cells import Cell
from ios_bench.planning.plan import Plan
from ios_bench.records.cell_records import CellRecords, round_record, sequential_figures
from ios_bench.results import check_record
from ios_bench.running.executors import Task

CHECK = {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""}


def _cell(fw="torch", schedule=None, provider=None):
    return Cell("m", "m", 1, fw, "cpu", schedule=schedule, adapter="ios" if schedule else fw, provider=provider)


def _round(i, samples, **more):
    return {"round": i, "status": "ok", "samples_ms": samples, "median_ms": samples[0], "p10_ms": samples[0],
            "p90_ms": samples[-1], "check": dict(CHECK), "disturbed": None, "repeat": 1, "number": 1,
            "warmup": 0, **more}


def test_base_says_what_every_record_of_the_cell_says():
    recs = CellRecords(Plan(threads=2, seed=3, round_seed=7), local=True, attempts={"m|b1|torch|cpu": 1})
    base = recs.base(_cell())
    assert base["cell"] == "m|b1|torch|cpu" and base["kind"] == "framework" and base["threads"] == 2
    assert base["seed"] == 3 and base["round_seed"] == 7 and base["attempt"] == 2 and "provider" not in base
    ios = recs.base(_cell("ios-both", "both"))
    assert ios["kind"] == "ios" and ios["provider"] == "torch" and ios["label"] == "IOS-Both"


def test_from_rounds_is_the_record_a_local_run_stores():
    recs = CellRecords(Plan(threads=2), local=True)
    rounds = [_round(0, [2.0], node="local"), _round(1, [4.0], node="local"), _round(2, [3.0], node="local")]
    rec = recs.from_rounds(_cell(), rounds, None, None)
    assert rec["median_ms"] == 3.0 and rec["node_env"] == "env.json" and check_record(rec) is None
    remote = CellRecords(Plan(threads=2), local=False).from_rounds(_cell(), rounds, None, None)
    assert remote["node_env"] == "nodes/local/env.json"
    failed = recs.unmeasured(_cell(), "failed", "schedule search failed", stderr_tail="tb")
    assert failed["status"] == "failed" and failed["stderr_tail"] == "tb" and check_record(failed) is None


def test_round_record_takes_the_task_log_and_its_utilization_trace():
    task = Task("k", {"util_path": "util/k.json"}, "logs/k.log", 1.0, "cpu", 2)
    r = round_record(task, {"status": "ok", "check": dict(CHECK), "utilization": {"mean": 50}}, 1, 0, "t", 0)
    assert r["log"] == "logs/k.log" and r["utilization"]["trace"] == "util/k.json" and r["round"] == 1


def test_sequential_figures_pair_an_ios_cell_with_its_providers_sequential_cell():
    recs = CellRecords(Plan(threads=2), local=True)
    rounds = [_round(i, [v]) for i, v in enumerate((10.0, 12.0, 11.0))]
    seq = recs.from_rounds(_cell("ios-sequential[onnxruntime]", "sequential", "onnxruntime"), rounds, None, None)
    fast = [_round(i, [v]) for i, v in enumerate((5.0, 6.0, 5.5))]
    both = recs.from_rounds(_cell("ios-both[onnxruntime]", "both", "onnxruntime"), fast, None, None)
    other = recs.from_rounds(_cell("ios-both", "both"), fast, None, None)  # torch provider: no sequential cell
    records = {r["cell"]: r for r in (seq, both, other)}
    sequential_figures(records)
    assert both["sequential_ms"] == 11.0 and both["speedup_over_sequential"] == 11.0 / 5.5
    assert "sequential_ms" not in other
