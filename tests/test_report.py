"""Reports (ios_bench.reporting.report): tables, the identical-schedule rule, wrong cells kept out of aggregates, plots,
each peer's configuration."""

import json

import matplotlib.figure
import pandas as pd
import pytest

from ios_bench import results
from ios_bench.reporting import report
from ios_bench.reporting.report import slower_than_sequential, write_report
from ios_bench.results import Store, cell_key
from tests.harness_helpers import FAST, _rec, _store_lines, cli, ios_schedules_available


def _ios(fw, median, sequential, **extra):
    rec = {"schema": 2, "cell": cell_key("m", 1, fw, "cpu"), "model": "m", "batch_size": 1, "framework": fw,
           "device": "cpu", "status": "ok", "kind": "ios", "schedule": fw[4:], "provider": "torch", "label": fw,
           "median_ms": median, "std_ms": 0.1, "p10_ms": median, "p90_ms": median, "samples_ms": [median] * 3,
           "sequential_ms": sequential, "between_round_cv": 0.01, "rounds_used": 3, "rounds_measured": 3,
           "rounds_disturbed": 0, "check": {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0,
                                            "tolerance": 1e-3, "reason": ""}}
    rec.update(extra)
    return rec


def _passes(levels, start=0, **extra):
    """Rounds measured in passes ``start``, ``start + 1``, ... at the given levels (ms)."""
    return [{"round": i, "pass": start + i, "position": 0, "status": "ok", "disturbed": None,
             "samples_ms": [v * (1 + 0.002 * j) for j in range(5)], **extra} for i, v in enumerate(levels)]


DRIFT = [10.0, 13.0, 9.0, 11.0, 10.5]  # the machine's speed per pass: every cell of the group shares it


def test_schedules_are_called_slower_or_faster_than_sequential_only_on_the_paired_verdict(tmp_path):
    run = tmp_path / "run"
    store = Store(run)
    store.append(_ios("ios-sequential", 10.5, None, rounds=_passes(DRIFT)))
    # the same schedule measured once: figures equal, said so; never "slower than sequential"
    store.append(_ios("ios-both", 10.5, 10.5, same_schedule_as="IOS-Sequential", rounds=_passes(DRIFT)))
    # the case: a figure well above sequential's (12.8 against 10.5) but the pairs disagree
    # (+35 % in one pass, -12 % in the next): no verdict on a raw difference
    greedy = [d * f for d, f in zip(DRIFT, (1.35, 0.88, 1.30, 0.90, 1.22))]
    store.append(_ios("ios-greedy", 12.8, 10.5, rounds=_passes(greedy)))
    store.append(_ios("ios-merge", 12.6, 10.5, rounds=_passes([d * 1.2 for d in DRIFT])))  # 20 % slower each pass
    store.append(_ios("ios-parallel", 8.9, 10.5, rounds=_passes([d * 0.85 for d in DRIFT])))
    # no sequential cell on its provider: the sequential schedule timed beside it in each round
    own = [{**g, "sequential_ms": d} for g, d in zip(_passes([d * 1.15 for d in DRIFT], start=10), DRIFT)]
    store.append(_ios("ios-both[openvino]", 12.0, 10.5, provider="openvino",
                      cell=cell_key("m", 1, "ios-both[openvino]", "cpu"), rounds=own))
    from ios_bench.reporting.report_tables import sequential_verdict
    from ios_bench.results import load_run

    df = load_run(run).frame()
    assert [r["framework"] for r in slower_than_sequential(df)] == ["ios-merge", "ios-both[openvino]"]
    v = {r["framework"]: sequential_verdict(r, df) for _, r in df.iterrows()}
    assert v["ios-sequential"] is None and v["ios-both"] is None
    assert v["ios-greedy"]["verdict"] == "no clear difference from sequential" and v["ios-greedy"]["low"] < 0
    assert v["ios-merge"]["verdict"] == "slower than sequential" and abs(v["ios-merge"]["change"] - 0.2) < 0.01
    assert v["ios-parallel"]["verdict"] == "faster than sequential" and v["ios-parallel"]["high"] < 0
    assert v["ios-both[openvino]"]["verdict"] == "slower than sequential" and v["ios-both[openvino]"]["n"] == 5
    md = write_report(run, tmp_path / "rep")["md"].read_text()
    assert "same schedule as IOS-Sequential" in md and "(= IOS-Sequential)" in md
    assert "SLOWER THAN SEQUENTIAL" not in md  # no warning line on a raw difference any more
    row = next(line for line in md.splitlines() if line.startswith("| m | IOS-Merge |"))
    assert r"slower than sequential +20.0% \[+" in row and "5 pairs" in row  # (Markdown-escaped brackets)
    row = next(line for line in md.splitlines() if line.startswith("| m | IOS-Greedy |"))
    assert "no clear difference from sequential +" in row


def test_report_of_corrupt_or_missing_run(tmp_path, capsys):
    from ios_bench.cli import main

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.jsonl").write_text("garbage\n")
    for target in (tmp_path / "run", tmp_path / "missing"):
        with pytest.raises(SystemExit) as e:
            main(["report", str(target), "--out", str(tmp_path / "rep")])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("error:")


@pytest.fixture(scope="module")
def checked_run(tmp_path_factory):
    """One sweep with a correct peer and four that must not pass their check."""
    tmp = tmp_path_factory.mktemp("trust")
    schedules = "both" if ios_schedules_available() else "none"
    args = ["run", "--models", "tiny_a", "--batch", "1", "--frameworks",
            "test-ref,test-wrong,test-racy,test-lowprec,test-loose", "--schedules", schedules,
            "--cost-model", "synthetic", "--out", "runs/c", "--timeout", "120", *FAST]
    p = cli(args, tmp)
    assert p.returncode == 0, p.stderr[-3000:]
    return tmp, p, schedules


def test_wrong_racy_and_loose_cells_are_marked_wrong(checked_run):
    tmp, p, _ = checked_run
    recs = {(r["model"], r["framework"]): r for r in results.read_records(tmp / "runs" / "c")}
    for model in ("tiny_a",):
        assert recs[(model, "test-ref")]["status"] == "ok"
        assert recs[(model, "test-ref")]["check"]["passed"]
        wrong = recs[(model, "test-wrong")]
        assert wrong["status"] == "wrong" and not wrong["check"]["passed"]
        assert wrong["median_ms"] > 0  # timed, shown, but never aggregated
        # right before timing, wrong in the timed calls: only the check after timing sees it
        racy = recs[(model, "test-racy")]
        assert racy["status"] == "wrong"
        assert racy["check"]["before"]["passed"] and not racy["check"]["after"]["passed"]
        assert racy["check"]["reason"].startswith("after timing")
        # an engine computing in bf16 when fp32 was asked fails; a declared loose tolerance is ignored
        low = recs[(model, "test-lowprec")]
        assert low["status"] == "failed" and "asked for fp32" in low["reason"] and "bf16" in low["reason"]
        loose = recs[(model, "test-loose")]
        assert loose["status"] == "wrong" and loose["check"]["tolerance"] == 1e-3
    assert "WRONG OUTPUT" in p.stderr


def test_wrong_cells_stay_out_of_geomeans_speedups_and_plots(checked_run, tmp_path, monkeypatch):
    tmp, _, schedules = checked_run
    md = (tmp / "reports" / "c" / "report.md").read_text()
    latency = md.split("**Latency (ms), batch 1, cpu**")[1].split("**Throughput")[0]
    # more frameworks than models: the table turns (frameworks as rows, the GeoMean a column)
    header = next(line for line in latency.splitlines() if line.startswith("| framework"))
    assert [c.strip() for c in header.strip("|").split("|")] == ["framework", "tiny_a", "GeoMean"]
    rows = {cols[0]: cols for line in latency.splitlines() if line.startswith("| ") and line != header
            for cols in [[c.strip() for c in line.strip("|").split("|")]]}
    assert rows["test-ref"][-1] != "-"
    for fw in ("test-wrong", "test-racy", "test-loose"):
        assert rows[fw][-1] == "-", (fw, rows[fw])
        assert "(wrong output)" in latency
    if schedules != "none":
        speedup = md.split("IOS at its best against the peers")[1].split("\n\n")[1]
        assert "test-ref" in speedup
        for fw in ("test-wrong", "test-racy", "test-loose"):
            assert fw not in speedup
    # every plotted series is a correct cell
    figures = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda self, *a, **k: figures.append(self))
    report.write_report(tmp / "runs" / "c", tmp_path / "rep")
    assert figures
    for fig in figures:
        for ax in fig.axes:
            legend = ax.get_legend()
            names = [t.get_text() for t in legend.get_texts()] if legend else []
            assert not {"test-wrong", "test-racy", "test-loose", "test-lowprec"} & set(names), names
    assert any("test-ref" in [t.get_text() for t in ax.get_legend().get_texts()]
               for fig in figures for ax in fig.axes if ax.get_legend())


def test_report_shows_each_peers_configuration(checked_run):
    tmp, _, _ = checked_run
    md = (tmp / "reports" / "c" / "report.md").read_text()
    config = md.split("**Configuration of each framework**")[1].split("\n\n")[1]
    assert "| framework | device | thread budget | threads used | precision | execution mode | tuning budget |" \
        in config
    row = next(line for line in config.splitlines() if line.startswith("| test-ref |"))
    assert "fp32" in row and "test (ok)" in row and "none" in row


def test_env_records_are_json(checked_run):
    tmp, _, _ = checked_run
    env = json.loads((tmp / "runs" / "c" / "env.json").read_text())
    assert env["plan"]["precisions"] == ["fp32"]


def _fake_cells(frameworks, batches=(1, 2), models=("m1", "m2")):
    import pandas as pd

    rows = []
    for fw in frameworks:
        for m in models:
            for bs in batches:
                ms = 1.0 + len(fw) * 0.1 + bs
                rows.append({"cell": f"{m}|b{bs}|{fw}|cpu", "model": m, "batch_size": bs, "framework": fw,
                             "device": "cpu", "status": "ok", "check_passed": True, "median_ms": ms,
                             "p10_ms": ms * 0.9, "p90_ms": ms * 1.1, "throughput": bs * 1000 / ms,
                             "throughput_p10": bs * 900 / ms, "throughput_p90": bs * 1100 / ms})
    return pd.DataFrame(rows)


def test_every_plotted_series_has_its_own_colour_and_marker(tmp_path, monkeypatch):
    """With 11 series (the full sweep's count) no two share a colour or a marker."""
    from matplotlib.colors import to_hex

    peers = ["torch", "torch-compile", "tensorflow", "tensorflow-xla", "onnxruntime", "onnxruntime-parallel",
             "openvino", "tvm-tuned"]
    fws = peers + ["ios-sequential", "ios-greedy", "ios-both"]
    df = _fake_cells(fws)
    figures = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda self, *a, **k: figures.append(self))
    styles = report.series_styles(report.framework_order(df))
    assert report.plot_vs_batch(df, "m1", "cpu", tmp_path / "a.png", styles)
    assert report.plot_normalized(df, "cpu", 1, tmp_path / "b.png", styles)
    lines_fig, bars_fig = figures
    for ax in lines_fig.axes:
        lines = ax.get_lines()
        assert len(lines) == 11
        assert len({to_hex(line.get_color()) for line in lines}) == 11
        assert len({line.get_marker() for line in lines}) == 11
    ax = bars_fig.axes[0]
    marks = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert len({to_hex(line.get_color()) for line in marks}) == 11
    assert len({line.get_marker() for line in marks}) == 11
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [report._label(f) for f in report.framework_order(df)]


# ---- code health (item 18) ------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["[]", "{\"cpu\": \"fast\", \"plan\": 3, \"git\": [], \"notes\": 5}", "{bad"])
def test_a_corrupt_env_json_is_a_warning_in_the_report(tmp_path, run_cli, content):
    run = tmp_path / "runs" / "e"
    _store_lines(run, [_rec("a")])
    (run / "env.json").write_text(content)
    code, out, err = run_cli(["report", str(run), "--out", str(tmp_path / "rep")])
    assert code == 0 and "Traceback" not in err, err
    assert (tmp_path / "rep" / "report.md").exists()


def test_report_shows_prediction_error_and_flags_slower_schedules(tmp_path):
    from ios_bench.reporting.report import SLOWER_FLAG, ios_table, slower_than_sequential

    rows = [dict(model="m", batch_size=1, framework="ios-sequential", device="cpu", status="ok", schedule="sequential",
                 provider="torch", median_ms=10.0, predicted_ms=9.0, sequential_ms=10.0, optimize_seconds=1.0),
            dict(model="m", batch_size=1, framework="ios-both", device="cpu", status="ok", schedule="both",
                 provider="torch", median_ms=12.0, predicted_ms=8.0, sequential_ms=10.0, optimize_seconds=2.0),
            dict(model="m", batch_size=1, framework="ios-both[openvino]", device="cpu", status="ok", schedule="both",
                 provider="openvino", median_ms=5.0, predicted_ms=5.5, sequential_ms=6.0, optimize_seconds=2.0)]
    df = pd.DataFrame(rows)
    assert slower_than_sequential(df) == []  # 12 ms against 10 ms without rounds: a raw difference, no verdict
    md = ios_table(df, "cpu", 1).md()
    assert "| m | IOS-Both | torch | 12.00 | 8.000 | -33.3% | 10.00 | 0.83x | 0 paired rounds: no verdict |" in md
    assert SLOWER_FLAG not in md
    # Markdown cells escape Markdown syntax (ios_bench/escape.md): the brackets render as [openvino]
    assert r"| m | IOS-Both\[openvino\] | openvino | 5.000 | 5.500 | +10.0% | 6.000 | 1.20x | 0 paired" in md
    assert "Mean absolute prediction error: 17.8% over 3 cells" in md


def test_ios_against_peers_on_cuda_says_what_compares_graph_replay_with_graph_replay():
    rows = [{"model": "squeezenet", "framework": fw, "device": "cuda", "batch_size": 1, "median_ms": ms,
             "status": "ok", "check_passed": True, **extra}
            for fw, ms, extra in (("ios-both", 0.42, {"config_execution": "CUDA graph replay"}),
                                  ("torch", 1.84, {}), ("torch-compile-cudagraphs", 0.5, {}))]
    table = report.speedup_table(pd.DataFrame(rows), "cuda", 1)
    assert "IOS cells: CUDA graph replay" in table.note
    assert "column compares graph replay with graph replay" in table.note
    no_graph_peer = report.speedup_table(pd.DataFrame(rows[:2]), "cuda", 1)
    assert "no peer here replays a CUDA graph" in no_graph_peer.note
    assert "graph" not in report.speedup_table(pd.DataFrame([{**r, "device": "cpu"} for r in rows[:2]]), "cpu", 1).note


def test_build_time_is_reported_per_framework_first_round_apart():
    """The build table: the first round's build (cold) and the later rounds' median (from the run's
    build cache), per model and framework; a framework without build figures shows none."""
    from ios_bench.reporting.report_tables import build_table

    def rounds(*builds):
        return [{"status": "ok", "build_seconds": b} for b in builds]

    rows = [dict(model="m", batch_size=1, framework="torch-compile", device="cpu", status="ok",
                 first_build_seconds=14.0, rounds=rounds(14.0, 3.0, 2.0, 4.0)),
            dict(model="m", batch_size=1, framework="onnxruntime", device="cpu", status="ok",
                 first_build_seconds=0.2, rounds=rounds(0.2)),
            dict(model="n", batch_size=1, framework="torch-compile", device="cpu", status="failed",
                 first_build_seconds=None, rounds=[])]
    md = build_table(pd.DataFrame(rows), "cpu", 1).md()
    assert "Build time (s), batch 1, cpu" in md
    # two frameworks, one model: frameworks as rows
    assert "| framework | m |" in md and "| torch-compile | 14.00 / 3.000 |" in md
    assert "| onnxruntime | 0.200 |" in md  # a single round has no 'later'
    assert build_table(pd.DataFrame(rows).assign(first_build_seconds=None), "cpu", 1) is None


# ---- issue 42: a report that reads at a glance ------------------------------------------------------


def _cell(model, fw, level, status="ok", unstable=None, **extra):
    """A timed cell of a synthetic sweep: its rounds in passes 0-4 of its group at ``level`` x the
    machine's speed per pass (DRIFT / 10)."""
    levels = [level * d / 10 for d in DRIFT]
    rec = {"schema": 2, "cell": cell_key(model, 1, fw, "cpu"), "model": model, "batch_size": 1, "framework": fw,
           "device": "cpu", "status": status, "label": fw}
    if status not in ("ok", "wrong"):
        return {**rec, "reason": "it crashed" if status == "failed" else "no such thing here", **extra}
    rounds = _passes(levels)
    pooled = [v for g in rounds for v in g["samples_ms"]]
    rec.update(rounds=rounds, median_ms=level * 1.05, std_ms=0.2, p10_ms=min(pooled), p90_ms=max(pooled),
               samples_ms=pooled, throughput=1000 / level, throughput_p10=900 / level, throughput_p90=1100 / level,
               ci_low_ms=level * 0.98, ci_high_ms=level * 1.12, between_round_cv=0.01, rounds_used=5,
               rounds_measured=5, rounds_disturbed=0, unstable=unstable, peak_rss_mib=300.0,
               check={"passed": status == "ok", "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3,
                      "reason": "" if status == "ok" else "max rel err 1.0"})
    if fw.startswith("ios-"):
        rec.update(kind="ios", schedule=fw[4:], provider="torch")
    rec.update(extra)
    return rec


@pytest.fixture
def wide_run(tmp_path):
    """Two models under 14 peers and two IOS schedules (16 frameworks): IOS-Both 20 % faster than the
    best peer in every pass; two unstable cells, one failed, one skipped, one wrong."""
    run = tmp_path / "runs" / "wide"
    store = Store(run)
    peers = [f"p{i:02d}" for i in range(1, 15)]
    for model in ("m1", "m2"):
        for i, fw in enumerate(peers):
            status = {("m2", "p13"): "failed", ("m2", "p14"): "skipped", ("m1", "p12"): "wrong"}.get((model, fw), "ok")
            unstable = "rounds differ by 7.0% (coefficient of variation)" if (model, fw) in (("m1", "p05"),
                                                                                            ("m2", "p06")) else None
            store.append(_cell(model, fw, 10.0 + i, status, unstable))
        store.append(_cell(model, "ios-sequential", 11.0))
        store.append(_cell(model, "ios-both", 8.0))
    (run / "env.json").write_text(json.dumps({"warnings": ["load average 3.1 on 2 cores"], "plan": {"threads": 2}}))
    return run


def _md_tables(md: str) -> list[list[list[str]]]:
    import re

    tables, cur = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cur.append([c.strip().replace("\\", "") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def test_report_opens_with_ios_against_the_best_peer_then_the_counts(wide_run, tmp_path):
    md = write_report(wide_run, tmp_path / "rep")["md"].read_text()
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert headings == ["At a glance", "cpu, batch size 1", "Unstable cells", "Run notes", "Configuration", "Rounds",
                        "Every cell", "Failures", "Environment"]
    glance = md.split("## At a glance")[1].split("## cpu, batch size 1")[0]
    lines = [line for line in glance.splitlines() if line.strip()]
    assert lines[0] == "**IOS at its best against the best peer**"
    first = _md_tables(glance)[0]
    assert first[0] == ["device", "batch", "model", "IOS at its best", "ms [95% CI]", "best peer", "ms [95% CI]",
                        "peer / IOS [95% CI]", "verdict"]
    m1 = next(r for r in first if r[2] == "m1")
    assert m1[3] == "IOS-Both" and m1[5] == "p01" and m1[8] == "IOS faster (5 pairs)"
    assert m1[7] == "1.25x [1.24-1.26]" and m1[4] == "8.400 [7.840-8.960]"  # figure [its interval]
    counts = next(line for line in lines if line.startswith("32 cells:"))
    assert "27 ok, 1 with a wrong output" in counts and "[2 unstable](#unstable-cells)" in counts
    assert "1 skipped" in counts and "[1 failed](#failures)" in counts
    # no wall of warnings before the results: they follow them, in the run notes
    assert "warning" not in md.split("## cpu, batch size 1")[0]
    assert "> warning: when the run started: load average 3.1" in md.split("## Run notes")[1]
    unstable = _md_tables(md.split("## Unstable cells")[1].split("## Run notes")[0])[0]
    assert [r[:3] for r in unstable[2:]] == [["m1", "1", "p05"], ["m2", "1", "p06"]]
    assert all("rounds differ by 7.0%" in r[4] for r in unstable[2:])


def test_wide_tables_turn_and_no_table_is_wider_than_twelve_columns(wide_run, tmp_path):
    from ios_bench.reporting.report_tables import MAX_COLUMNS, Table

    md = write_report(wide_run, tmp_path / "rep")["md"].read_text()
    tables = _md_tables(md)
    assert len(tables) > 10 and max(len(t[0]) for t in tables) <= MAX_COLUMNS
    assert all(len(row) == len(t[0]) for t in tables for row in t)
    latency = _md_tables(md.split("**Latency (ms), batch 1, cpu**")[1])[0]
    assert latency[0] == ["framework", "m1", "m2", "GeoMean"] and len(latency) == 2 + 16
    assert [r[0] for r in latency[2:4]] == ["p01", "p02"] and latency[-1][0] == "IOS-Both"
    for title in ("Throughput (images/s)", "Peak memory (MiB)"):
        assert _md_tables(md.split(f"**{title}, batch 1, cpu**")[1])[0][0][:3] == ["framework", "m1", "m2"]
    speedup = _md_tables(md.split("**IOS at its best against the peers (latency ratio), batch 1, cpu**")[1])[0]
    assert speedup[0] == ["peer", "m1", "m2", "GeoMean"] and speedup[2][0] == "IOS at its best (ms)"
    # a table wider than 12 columns is split, its key columns repeated in every part
    wide = Table("t", ["k1", "k2"] + [f"c{i}" for i in range(25)], [["a", "b"] + [str(i) for i in range(25)]],
                 "n", keep=2)
    parts = wide.parts()
    assert [p.title for p in parts] == ["t (1/3)", "t (2/3)", "t (3/3)"] and [p.note for p in parts] == ["", "", "n"]
    assert all(len(p.headers) <= MAX_COLUMNS and p.headers[:2] == ["k1", "k2"] for p in parts)
    assert [h for p in parts for h in p.headers[2:]] == [f"c{i}" for i in range(25)]
    assert [v for p in parts for v in p.rows[0][2:]] == [str(i) for i in range(25)]
    # models as rows while the frameworks are not more than the models
    narrow = report.metric_table(_fake_cells(["torch", "onnxruntime"], batches=(1,), models=("m1", "m2", "m3")),
                                 "cpu", 1, "latency")
    assert narrow.headers == ["model", "torch", "onnxruntime"] and [r[0] for r in narrow.rows] == \
        ["m1", "m2", "m3", "GeoMean"]


def _browser() -> str | None:
    import shutil

    return next((b for b in ("chromium", "chromium-browser", "google-chrome", "chrome") if shutil.which(b)), None)


def test_html_report_shows_the_same_in_the_same_order_and_parses_strictly(wide_run, tmp_path):
    """The HTML report: the same sections in the same order as the Markdown one, its links pointing
    at ids it has; a strict HTML5 parse (html5lib, the dev extra) finds no error, and where a
    headless browser is installed it renders the file too."""
    import html5lib

    paths = write_report(wide_run, tmp_path / "rep")
    md, page = paths["md"].read_text(), paths["html"].read_text()
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    doc = parser.parse(page)  # raises on any parse error
    assert not parser.errors
    h2 = [(e.get("id"), e.text) for e in doc.iter("h2")]
    assert [t for _, t in h2] == [line[3:] for line in md.splitlines() if line.startswith("## ")]
    ids = {i for i, _ in h2}
    links = [a.get("href") for a in doc.iter("a")]
    assert links == ["#unstable-cells", "#failures"] and all(h[1:] in ids for h in links)
    h4 = [e.text for e in doc.iter("h4")]
    assert h4[0] == "IOS at its best against the best peer"
    body = list(doc.find("body"))
    assert [e.tag for e in body[:4]] == ["h1", "h2", "h4", "table"]
    tables = list(doc.iter("table"))
    assert max(len(list(t.find("thead").iter("th"))) for t in tables) <= 12
    browser = _browser()
    if browser:  # a real render where a headless browser is installed (none is on the development VMs)
        import subprocess

        p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                            paths["html"].as_uri()], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "IOS at its best against the best peer" in p.stdout and "id=\"unstable-cells\"" in p.stdout


def test_the_headline_says_whether_ios_was_not_run_or_not_correct(tmp_path):
    """A model whose IOS cell computed a wrong output has 'no IOS cell with a correct output'; a model the
    run measured no IOS cell of (run --schedules none) says so, not that IOS was wrong."""
    run = tmp_path / "runs" / "noios"
    store = Store(run)
    for model in ("m1", "m2"):
        store.append(_cell(model, "p01", 10.0))
    store.append(_cell("m1", "ios-both", 8.0, "wrong"))
    md = write_report(run, tmp_path / "rep")["md"].read_text()
    first = _md_tables(md.split("## At a glance")[1])[0]
    verdicts = {r[2]: r[8] for r in first[2:]}
    assert verdicts == {"m1": "no IOS cell with a correct output", "m2": "no IOS cell in this run"}


def test_a_run_without_ios_cells_leads_with_the_fastest_framework_per_model(tmp_path):
    """run --schedules none: no table of '-' rows saying 'no IOS cell'; per model the fastest correct
    framework, the next, the margin with its paired interval and the verdict, and once that no IOS cell ran."""
    run = tmp_path / "runs" / "peers"
    store = Store(run)
    for model, (a, b) in (("m1", (10.0, 12.0)), ("m2", (9.0, 5.0))):
        store.append(_cell(model, "p01", a))
        store.append(_cell(model, "p02", b))
        store.append(_cell(model, "p03", 4.0, "wrong"))  # fastest, but wrong: never the fastest
    md = write_report(run, tmp_path / "rep")["md"].read_text()
    glance = md.split("## At a glance")[1].split("\n## ")[0]
    assert "no IOS cell ran in this run" in glance and "no IOS cell in this run" not in glance
    first = _md_tables(glance)[0]
    assert first[0][3:6] == ["fastest", "ms [95% CI]", "next fastest"]
    rows = {r[2]: r for r in first[2:]}
    assert (rows["m1"][3], rows["m1"][5]) == ("p01", "p02") and (rows["m2"][3], rows["m2"][5]) == ("p02", "p01")
    assert rows["m1"][7].startswith("1.20x [") and rows["m1"][8] == "faster (5 pairs)"
    assert rows["m2"][7].startswith("1.80x [") and rows["m2"][8] == "faster (5 pairs)"
