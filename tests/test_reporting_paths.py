"""ios_bench.reporting.paths: a report goes beside its run, never under the current folder for a run
that --out put elsewhere (run, ab and report alike)."""

from __future__ import annotations

from pathlib import Path

from ios_bench.reporting.paths import default_report_folder


def test_the_default_report_folder_is_beside_the_run(tmp_path):
    assert default_report_folder("runs/sweep") == Path("reports/sweep")  # the layout of the README: unchanged
    assert default_report_folder(tmp_path / "data" / "runs" / "x") == tmp_path / "data" / "reports" / "x"
    assert default_report_folder(tmp_path / "elsewhere" / "x") == tmp_path / "elsewhere" / "reports" / "x"
    assert default_report_folder("x") == Path("reports/x")


def test_report_writes_beside_a_run_kept_elsewhere(tmp_path, monkeypatch, capsys):
    from ios_bench.cli import main
    from ios_bench.results import Store
    from tests.test_report import _cell

    run = tmp_path / "far" / "runs" / "x"
    Store(run).append(_cell("m", "p01", 10.0))
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    try:
        main(["report", str(run)])
    except SystemExit as e:
        assert not e.code
    assert (tmp_path / "far" / "reports" / "x" / "report.md").is_file()
    assert not (here / "reports").exists()
    assert f"report: {tmp_path / 'far' / 'reports' / 'x' / 'report.html'}" in capsys.readouterr().out
