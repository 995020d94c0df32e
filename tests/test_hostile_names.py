"""Names from files reach no sink unescaped (issue 16, item 9).

A model or node name may hold a path (``../x``, ``/``), rich markup (``[/]``, ``[red]``), HTML
(``<script>``), a spreadsheet formula (leading ``=``, ``@``, ``+``, ``-``) or a terminal escape
sequence; everywhere it shows up (file names, terminal, Markdown, CSV, HTML, plots) it is inert.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from ios_bench.planning.cells import describe, safe_name
from ios_bench.records.runfolder import LOCK_FILE
from ios_bench.reporting.escape import csv_cell, md, one_line, plain, plot_text, term
from ios_core.ir import Graph
from ios_core.names import file_part
from tests.conftest import DATA, ROOT

ESC = "\x1b]0;owned\x07\x1b[31m"
HOSTILE = f"=HYPERLINK(\"x\") [/][red]<script>alert(1)</script>{ESC}/../../evil"
NAMES = [HOSTILE, "../../etc/passwd", "/abs", "[/]", "[bold]x", "@SUM(A1)", "+1", "-1", "a|b", "x" * 1000,
         ".", "..", "", "\u202eevil", "a\nb", "$x$_"]
SAFE_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def hostile_graph_file(tmp_path, name=HOSTILE):
    cfg = json.loads((DATA / "tiny_schedule.json").read_text())
    cfg["name"] = name
    # a node name that is a terminal escape sequence and rich markup
    cfg["blocks"][0]["inner_nodes"][0]["hint_name"] = f"[/]{ESC}<b>"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(cfg))
    return path


def test_file_part_is_one_harmless_distinct_component():
    parts = [file_part(n) for n in NAMES]
    assert len(set(parts)) == len(parts)
    for p in parts:
        assert SAFE_FILE.match(p) and len(p) < 100, p
    assert file_part("inception_v3") == "inception_v3" == safe_name("inception_v3")


def test_text_escapers():
    for name in NAMES:
        for text in (plain(name), one_line(name), term(name), md(name), plot_text(name)):
            assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        assert "<script>" not in md(name) and "[/]" not in md(name)
        assert "\n" not in one_line(name) + md(name) + plot_text(name)
        cell = csv_cell(name)
        assert cell[:1] not in ("=", "+", "-", "@")
        # rich shows the name literally (no markup error, no style applied)
        console = Console(record=True, width=2000, color_system=None)
        console.print(term(name, newlines=False), highlight=False)
        assert console.export_text().rstrip("\n") == one_line(name)
    assert plot_text("$x$").count(r"\$") == 2


def test_describe_escapes_names_and_reasons():
    record = {"model": HOSTILE, "batch_size": 1, "framework": "[/]fw", "status": "failed",
              "reason": "[red]boom[/] <x>"}
    console = Console(record=True, width=4000, color_system=None)
    console.print(describe(record), highlight=False)
    text = console.export_text()
    assert "[red]boom[/]" in text and "[/]fw" in text and "\x1b" not in text


def test_show_prints_hostile_names_inertly(tmp_path, run_cli):
    code, out, err = run_cli(["show", str(hostile_graph_file(tmp_path))])
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b" in out  # shown, escaped


def _record(model, framework, device="cpu", median=1.0):
    from ios_bench.results import cell_key

    return {"cell": cell_key(model, 1, framework, device), "model": model, "batch_size": 1, "framework": framework,
            "device": device, "status": "ok", "label": framework, "median_ms": median, "std_ms": 0.1,
            "p10_ms": median * 0.9, "p90_ms": median * 1.1, "throughput": 1000 / median,
            "throughput_p10": 900 / median, "throughput_p90": 1100 / median, "samples_ms": [median] * 3,
            "check": {"passed": True, "max_rel_err": 1e-6}}


def test_report_with_hostile_names_in_the_store(tmp_path):
    from ios_bench.reporting.report import write_report
    from ios_bench.results import Store

    run, rep = tmp_path / "run", tmp_path / "rep"
    store = Store(run)
    for name in (HOSTILE, "-1", "@SUM(A1)", "$x"):
        store.append(_record(name, "ios-both", median=1.0))
        store.append(_record(name, f"=1+1[/]{ESC}", median=2.0))
    write_report(run, rep)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep", "run"]
    for p in rep.iterdir():
        assert SAFE_FILE.match(p.name), p
    text = (rep / "report.md").read_text()
    assert "<script>" not in text and "[/]" not in text and "\x1b" not in text
    assert "\\x1b" in text  # the escape sequence is shown, not sent
    with open(rep / "results.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert all(cell[:1] not in ("=", "+", "@") for row in rows for cell in row)
    assert {"'=1+1[/]\\x1b]0;owned\\x07\\x1b[31m", "'@SUM(A1)", "'-1"} <= {c for r in rows for c in r}


@pytest.mark.slow
def test_sweep_and_report_with_a_hostile_model_name(tmp_path):
    graph_file = hostile_graph_file(tmp_path)
    run, rep = tmp_path / "run", tmp_path / "rep"
    env = {"PYTHONPATH": str(ROOT), "IOS_BENCH_PLUGINS": "tests.harness_plugin", "PATH": "/usr/bin:/bin",
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "ios_bench", "run", "--models", str(graph_file), "--frameworks",
                           "test-ref", "--schedules", "none", "--warmup", "0", "--repeat", "2",
                           "--min-sample-ms", "0", "--no-progress", "--threads", "1", "--out", str(run),
                           "--report-out", str(rep)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr
    # nothing escaped the two folders, and every file name is harmless
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.json", "rep", "run"]
    for folder in (run, rep):
        for p in folder.rglob("*"):  # the run folder's lock has a fixed name of its own (runfolder.LOCK_FILE)
            assert SAFE_FILE.match(p.name) or p.relative_to(folder) == Path(LOCK_FILE), p
    assert not list(tmp_path.rglob("evil*"))
    g = Graph.load(graph_file)
    stored = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert [r["model"] for r in stored] == [g.name] and stored[0]["status"] == "ok"
    report_md = (rep / "report.md").read_text()
    assert "<script>" not in report_md and "[/]" not in report_md and "\x1b" not in report_md
    assert "&lt;script&gt;" in report_md
    assert "<script>" not in (rep / "report.html").read_text()
    with open(rep / "results.csv", newline="") as f:
        rows = list(csv.reader(f))
    for row in rows:
        for cell in row:
            assert cell[:1] not in ("=", "+", "@") and "\x1b" not in cell, cell
    model_col = rows[0].index("model")
    assert rows[1][model_col].startswith("'=HYPERLINK")
