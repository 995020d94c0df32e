"""ios_bench.running.dry_run: `ios-bench run ... --dry-run` plans and estimates a sweep (its probe worker in a
temporary folder), prints the breakdown naming each batch size, and writes nothing where it runs."""

import json

from ios_bench.running.dry_run import lines
from tests.harness_helpers import cli

ARGS = ["run", "--models", "tiny_a,tiny_b", "--batch", "1,2", "--frameworks", "test-ref,test-ref2",
        "--schedules", "none", "--no-progress", "--out", "runs/dry"]


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_dry_run_prints_the_plan_and_its_estimate_and_writes_nothing(tmp_path):
    cache = tmp_path / "cache"  # the user build cache the rounds would use: its own folder, outside the check
    before = _files(tmp_path)
    p = cli(ARGS + ["--dry-run"], tmp_path, {"IOS_BENCH_BUILD_CACHE": str(cache)}, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "estimated duration: about" in out
    assert "plan: 8 cells (8 to measure, 0 finished, 0 skipped), 3 rounds each, 24 rounds in all" in out
    assert "batch 1" in out and "batch 2" in out and "by kind of cost:" in out and "timed samples" in out
    assert "by framework:" in out and "test-ref2" in out
    assert "assumed: no committed figure" in out  # the test adapters have no rate of their own: said so
    assert _files(tmp_path) == before  # no run folder, no report, no runs/ or reports/
    got = json.loads(cli(ARGS + ["--dry-run", "--format", "json"], tmp_path,
                         {"IOS_BENCH_BUILD_CACHE": str(cache)}, timeout=300).stdout)
    assert got["cells"] == 8 and got["rounds"] == 24 and set(got["by_batch"]) == {"1", "2"}
    assert sum(got["by_kind"].values()) == __import__("pytest").approx(got["seconds"])
    assert got["time_budget"] is None
    assert _files(tmp_path) == before


def test_json_output_needs_a_dry_run(tmp_path):
    p = cli(ARGS + ["--format", "json"], tmp_path, timeout=120)
    assert p.returncode == 2 and "--format json needs --dry-run" in p.stderr
    assert _files(tmp_path) == []


def test_the_text_names_predicted_caps_and_the_protocol():
    got = {"note": "n", "seconds": 7200.0, "human": "2 h 00 min", "rounds_auto": False, "cells": 3, "to_measure": 3,
           "finished": 0, "skipped": 0, "rounds_per_cell": 3, "rounds": 7, "searches": 0, "references": 1,
           "protocol": {"warmup": 3, "warmup_s": 0.5, "repeat": 10, "min_repeat": 3, "sample_s": 1.0, "number": 1,
                        "min_sample_ms": 10.0, "cap_factor": 3.0},
           "capped": [{"framework": "torch", "model": "m", "batch": 32, "ratio": 4.2, "best": "openvino"}],
           "reused": {"cells finished": 0}, "by_batch": {32: 7200.0}, "by_model": {"m": 7200.0},
           "by_framework": {"torch": 3600.0, "openvino": 3600.0}, "by_kind": {"timed": 5400.0, "start": 1800.0},
           "latencies_from": {"stated rate (measured)": 2}, "rates": [], "speed": ""}
    assert "measured once" not in "\n".join(lines(got))
    got["same_schedule"] = [{"cell": "k", "model": "vgg11", "as": "ios-sequential"}]
    text = "\n".join(lines(got))
    assert "measured once: 1 IOS cells" in text and "(every block a chain: vgg11)" in text
    assert "time-bounded: warmup up to 3 calls or 0.5 s, samples for 1.0 s (3 to 10)" in text
    assert "predicted capped (a prediction" in text and "torch m b32: 4.2x openvino" in text
    assert "batch 32" in text and "2.00   100%" in text and "1.50    75%" in text
    assert "--time-budget" not in text
    got["time_budget"] = {"budget_s": 3600.0, "seconds": 5400.0, "first": 3000.0, "later": 2400.0,
                          "later_planned": 4200.0, "cut_rounds": 3, "one_round_groups": 0, "groups": 1}
    text = "\n".join(lines(got))
    assert ("with --time-budget 3600 s: about 1 h 30 min (1.50 h): the searches, reference outputs and every cell's "
            "first round 0.83 h (made whatever the budget), later rounds 0.67 h of 1.17 h planned; 3 rounds left "
            "out, 0 of 1 groups one round a cell") in text


def test_a_resumed_dry_run_reuses_what_the_run_folder_holds_and_leaves_it_as_it_was(tmp_path):
    from tests.harness_helpers import FAST

    first = cli(["run", "--models", "tiny_a", "--batch", "1", "--frameworks", "test-ref", "--schedules", "none",
                 "--out", "runs/r", "--no-report", *FAST], tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    folder = tmp_path / "runs" / "r"
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    p = cli(["run", "--resume", "--out", "runs/r", "--batch", "1,2", "--dry-run"], tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    # batch 1's cell and reference output are the folder's already: only batch 2's are counted
    assert "plan: 2 cells (1 to measure, 1 finished, 0 skipped)" in p.stdout
    assert "1 cells finished, 1 reference outputs in the run folder" in p.stdout
    assert "batch 2" in p.stdout and "batch 1 " not in p.stdout
    assert {q: q.stat().st_mtime_ns for q in folder.rglob("*")} == before  # nothing written, nothing touched
