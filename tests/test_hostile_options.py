"""Hostile options and output paths (issue 16, items 5, 11 and 12): refused up front, in one
line on stderr with exit code 2, before anything is written."""

from __future__ import annotations

import json
import os

import pytest

from ios_core.measurement.threads import usable_cores


def one_line_error(code, out, err):
    lines = err.strip().splitlines()
    return code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in out + err


def _quiet_tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# ---- item 11: numeric options are bounded ---------------------------------------------------

TOO_MANY_THREADS = str(usable_cores() + 1)

BAD_OPTIONS = [
    (["run", "--timeout", "nan"], "--timeout"),
    (["run", "--timeout", "inf"], "--timeout"),
    (["run", "--timeout", "0"], "--timeout"),
    (["run", "--optimize-timeout", "nan"], "--optimize-timeout"),
    (["run", "--min-sample-ms", "nan"], "--min-sample-ms"),
    (["run", "--min-sample-ms", "-1"], "--min-sample-ms"),
    (["run", "--min-sample-ms", "1e300"], "--min-sample-ms"),
    (["run", "--threads", TOO_MANY_THREADS], "affinity"),
    (["run", "--threads", "0"], "--threads"),
    (["run", "--cost-model", "bogus"], "--cost-model"),
    (["run", "--seed", "-1"], "--seed"),
    (["profile", "--model", "sample", "--threads", TOO_MANY_THREADS], "affinity"),
    (["profile", "--model", "sample", "--seed", "-5"], "--seed"),
    (["compare", "a", "b", "--min-change", "nan"], "--min-change"),
    (["optimize", "-m", "sample", "--cost-option", "launch_ms=NaN"], "NaN"),
    (["optimize", "-m", "sample", "--cost-option", "launch_ms=-Infinity"], "Infinity"),
    (["optimize", "-m", "sample", "--weights-seed", "-1"], "--weights-seed"),
    (["optimize", "-m", "sample", "--cost", "bogus"], "--cost"),
]


@pytest.mark.parametrize("args,word", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_numeric_options_are_bounded(tmp_path, monkeypatch, run_cli, args, word):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(args)
    assert one_line_error(code, out, err), (code, out, err)
    assert word in err
    assert _quiet_tree(tmp_path) == []  # nothing written: no runs/, no reports/


def test_threads_up_to_the_affinity_mask_are_accepted(run_cli):
    code, out, err = run_cli(["profile", "--model", "sample", "--threads", str(usable_cores()), "--repeat", "1",
                              "--warmup", "0", "--no-show-graph"])
    assert code == 0, err


def test_threads_limit_follows_the_affinity_mask(monkeypatch, run_cli):
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    code, out, err = run_cli(["run", "--threads", "2"])
    assert one_line_error(code, out, err) and "only 1 core" in err


# ---- item 12: output paths --------------------------------------------------------------------

def _user_folder(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    return folder


@pytest.mark.parametrize("where", ["/", "/etc", "/usr/lib", "/tmp", "home", "user folder", "a file",
                                   "under a file"])
def test_run_out_refuses_system_and_foreign_folders(tmp_path, monkeypatch, run_cli, where):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".bashrc").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    target = {"home": str(tmp_path / "home"), "user folder": str(_user_folder(tmp_path)),
              "a file": str(tmp_path / "notes.txt"), "under a file": str(tmp_path / "notes.txt" / "run")}.get(where,
                                                                                                          where)
    before = _quiet_tree(tmp_path)
    code, out, err = run_cli(["run", "--models", "sample", "--out", target, "--no-progress"])
    assert one_line_error(code, out, err), (code, out, err)
    assert "--out" in err
    assert _quiet_tree(tmp_path) == before
    if where == "user folder":
        assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"


@pytest.mark.parametrize("where", ["/proc/x", "user folder", "a file", "under a file"])
def test_report_out_is_checked_before_the_sweep(tmp_path, monkeypatch, run_cli, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    target = {"user folder": str(_user_folder(tmp_path)), "a file": str(tmp_path / "notes.txt"),
              "under a file": str(tmp_path / "notes.txt" / "rep")}.get(where, where)
    before = _quiet_tree(tmp_path)
    code, out, err = run_cli(["run", "--models", "sample", "--out", str(tmp_path / "run"), "--report-out", target,
                              "--no-progress"])
    assert one_line_error(code, out, err), (code, out, err)
    assert "--report-out" in err
    assert _quiet_tree(tmp_path) == before  # the run folder was not even created


def test_report_command_refuses_a_foreign_out_folder(tmp_path, run_cli):
    from ios_bench.results import Store

    run = tmp_path / "run"
    Store(run).append({"cell": "m|b1|f|cpu", "model": "m", "batch_size": 1, "framework": "f", "device": "cpu",
                       "status": "skipped", "reason": "test"})
    folder = _user_folder(tmp_path)
    code, out, err = run_cli(["report", str(run), "--out", str(folder)])
    assert one_line_error(code, out, err) and "--out" in err
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.tex"]


def test_existing_run_and_report_folders_are_accepted(tmp_path):
    from ios_bench.running.outputs import check_report_folder, check_run_folder

    run = tmp_path / "run"
    run.mkdir()
    (run / "plan.json").write_text("{}")
    (run / "logs").mkdir()
    check_run_folder(run)
    check_run_folder(tmp_path / "empty")
    (tmp_path / "empty").mkdir()
    check_run_folder(tmp_path / "empty")
    rep = tmp_path / "rep"
    rep.mkdir()
    for name in ("report.md", "report.html", "results.csv", "vs_batch_x_cpu.png"):
        (rep / name).write_text("")
    check_report_folder(rep)
    check_report_folder(tmp_path / "new" / "deeper")


@pytest.mark.parametrize("option", ["-o", "--stats-json"])
@pytest.mark.parametrize("where", ["/etc/ios.json", "/dev/null", "a folder", "under a file"])
def test_optimize_outputs_are_checked_before_work(tmp_path, monkeypatch, run_cli, option, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "folder").mkdir()
    target = {"a folder": str(tmp_path / "folder"), "under a file": str(tmp_path / "notes.txt" / "s.json")}.get(
        where, where)
    before = _quiet_tree(tmp_path)
    code, out, err = run_cli(["optimize", "-m", "sample", option, target])
    assert one_line_error(code, out, err), (code, out, err)
    assert out == ""  # refused before the search ran
    assert _quiet_tree(tmp_path) == before


@pytest.mark.parametrize("where", ["/etc/m.onnx", "a folder.onnx", "under a file"])
def test_export_output_is_checked_before_work(tmp_path, monkeypatch, run_cli, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "a folder.onnx").mkdir()
    target = {"a folder.onnx": str(tmp_path / "a folder.onnx"),
              "under a file": str(tmp_path / "notes.txt" / "m.onnx")}.get(where, where)
    before = _quiet_tree(tmp_path)
    code, out, err = run_cli(["export", "sample", "-o", target])
    assert one_line_error(code, out, err), (code, out, err)
    assert _quiet_tree(tmp_path) == before


def test_optimize_writes_where_allowed(tmp_path, run_cli):
    out_file, stats = tmp_path / "new" / "s.json", tmp_path / "stats.json"
    code, out, err = run_cli(["optimize", "-m", "sample", "-o", str(out_file), "--stats-json", str(stats)])
    assert code == 0, err
    assert out_file.is_file() and json.loads(stats.read_text())["cost_ms"] > 0


# ---- item 5: a cost model's figure is an estimate ----------------------------------------------

def test_optimize_labels_the_synthetic_figure_as_an_uncalibrated_estimate(tmp_path, run_cli):
    stats = tmp_path / "stats.json"
    code, out, err = run_cli(["optimize", "-m", "sample", "--cost", "synthetic", "--stats-json", str(stats)])
    assert code == 0, err
    figure = [line for line in out.splitlines() if " ms" in line and "search" not in line]
    assert len(figure) == 1
    assert "estimate" in figure[0] and "uncalibrated" in figure[0] and "not a measured latency" in figure[0]
    assert "latency" not in figure[0].split(":")[0]  # never called a latency
    assert "not calibrated" in json.loads(stats.read_text())["cost_ms_is"]


@pytest.mark.parametrize("args", [
    ["profile", "--model", "sample", "--batch", "100000000"],
    ["optimize", "-m", "sample", "--batch", "100000000"],
    ["export", "sample", "-o", "m.onnx", "--batch", "100000000"],
    ["run", "--models", "sample", "--batch", "100000000", "--no-progress"],
])
def test_a_batch_that_cannot_fit_in_memory_is_refused_before_allocating(tmp_path, monkeypatch, run_cli, args):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(args)
    assert one_line_error(code, out, err), (code, out, err)
    assert "GiB" in err and _quiet_tree(tmp_path) == []


def test_bad_ios_provider_is_a_one_line_error(run_cli, tmp_path):
    code, out, err = run_cli(["run", "--models", "sample", "--ios-providers", "torch,cuda-magic",
                              "--out", str(tmp_path / "r")])
    assert code == 2 and "unknown IOS provider cuda-magic" in err
