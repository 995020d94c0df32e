"""The sweep's round protocol: identical schedules are one measurement, bad round options are one
line, and a real sweep of a tiny graph measures each cell in interleaved fresh processes."""

import json

import pytest

from ios_bench.cells import Cell, schedule_key
from ios_bench.plan import Plan
from ios_bench.report import slower_than_sequential, write_report
from ios_bench.results import Store, cell_key
from ios_bench.sweep import Sweep, schedule_hash


def test_identical_schedules_are_one_measurement(tmp_path):
    sweep = Sweep(Plan(), tmp_path / "run")
    cells = [Cell("m", "m", 1, schedule_key(s, p), "cpu", s, "ios", provider=p)
             for s in ("sequential", "greedy", "both") for p in ("torch", "onnxruntime")]
    same_hash = {"sequential": "aaaa", "greedy": "bbbb", "both": "aaaa"}  # validation kept sequential for Both
    scheds = {c.key: {"hash": same_hash[c.schedule], "path": f"schedules/{c.framework}.json"} for c in cells}
    same = sweep._same_schedules(cells, scheds)
    assert same == {cell_key("m", 1, "ios-both", "cpu"): cell_key("m", 1, "ios-sequential", "cpu"),
                    cell_key("m", 1, "ios-both[onnxruntime]", "cpu"):
                        cell_key("m", 1, "ios-sequential[onnxruntime]", "cpu")}  # per provider, never across


def test_schedule_hash_is_the_stages_identity(tmp_path):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps({"name": "x", "blocks": [{"stages": [[["n1"]], [["n2"]]]}]}))
    b.write_text(json.dumps({"name": "y", "blocks": [{"stages": [[["n1"]], [["n2"]]]}]}))
    c.write_text(json.dumps({"name": "x", "blocks": [{"stages": [[["n1"], ["n2"]]]}]}))
    assert schedule_hash(a) == schedule_hash(b) != schedule_hash(c)
    assert schedule_hash(tmp_path / "missing.json") is None


def _ios(fw, median, sequential, **extra):
    rec = {"schema": 2, "cell": cell_key("m", 1, fw, "cpu"), "model": "m", "batch_size": 1, "framework": fw,
           "device": "cpu", "status": "ok", "kind": "ios", "schedule": fw[4:], "provider": "torch", "label": fw,
           "median_ms": median, "std_ms": 0.1, "p10_ms": median, "p90_ms": median, "samples_ms": [median] * 3,
           "sequential_ms": sequential, "between_round_cv": 0.01, "rounds_used": 3, "rounds_measured": 3,
           "rounds_disturbed": 0, "check": {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0,
                                            "tolerance": 1e-3, "reason": ""}}
    rec.update(extra)
    return rec


def test_same_schedule_is_never_called_slower(tmp_path):
    run = tmp_path / "run"
    store = Store(run)
    store.append(_ios("ios-sequential", 10.0, 10.0))
    # the same schedule measured once: figures equal, said so; never "slower than sequential"
    store.append(_ios("ios-both", 10.0, 10.0, same_schedule_as="IOS-Sequential"))
    # a different schedule slower only inside its interval: not flagged; clearly slower: flagged
    store.append(_ios("ios-greedy", 10.3, 10.0, ci_low_ms=9.9, ci_high_ms=10.6))
    store.append(_ios("ios-merge", 12.0, 10.0, ci_low_ms=11.5, ci_high_ms=12.5))
    from ios_bench.report import load_run

    df, _, _ = load_run(run)
    assert [r["framework"] for r in slower_than_sequential(df)] == ["ios-merge"]
    md = write_report(run, tmp_path / "rep")["md"].read_text()
    assert "same schedule as IOS-Sequential" in md and "(= IOS-Sequential)" in md
    assert "IOS-Both on cpu: SLOWER" not in md and "IOS-Merge on cpu: SLOWER THAN SEQUENTIAL" in md


@pytest.mark.parametrize("args", [["--rounds", "0"], ["--rounds", "-2"], ["--rounds", "nan"], ["--rounds", "1e9"],
                                  ["--rounds", "101"], ["--rounds", "three"], ["--target-ci", "0"],
                                  ["--target-ci", "100"], ["--target-ci", "-5"], ["--target-ci", "nan"],
                                  ["--time-budget", "nan"], ["--time-budget", "0"], ["--round-seed", "-1"],
                                  ["--time-budget", "1.5", "--min-sample-ms", "100", "--repeat", "20"]])
def test_bad_round_options_are_one_line_and_write_nothing(tmp_path, run_cli, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["run", "--models", "sample", "--out", "runs/x", "--no-progress", *args])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "runs").exists()
