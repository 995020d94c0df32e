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


def test_same_schedule_is_never_called_slower(tmp_path):
    run = tmp_path / "run"
    store = Store(run)
    store.append(_ios("ios-sequential", 10.0, 10.0))
    # the same schedule measured once: figures equal, said so; never "slower than sequential"
    store.append(_ios("ios-both", 10.0, 10.0, same_schedule_as="IOS-Sequential"))
    # a different schedule slower only inside its interval: not flagged; clearly slower: flagged
    store.append(_ios("ios-greedy", 10.3, 10.0, ci_low_ms=9.9, ci_high_ms=10.6))
    store.append(_ios("ios-merge", 12.0, 10.0, ci_low_ms=11.5, ci_high_ms=12.5))
    from ios_bench.results import load_run

    df = load_run(run).frame()
    assert [r["framework"] for r in slower_than_sequential(df)] == ["ios-merge"]
    md = write_report(run, tmp_path / "rep")["md"].read_text()
    assert "same schedule as IOS-Sequential" in md and "(= IOS-Sequential)" in md
    assert "IOS-Both on cpu: SLOWER" not in md and "IOS-Merge on cpu: SLOWER THAN SEQUENTIAL" in md


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
    header = next(line for line in latency.splitlines() if line.startswith("| model"))
    geo = next(line for line in latency.splitlines() if line.startswith("| GeoMean"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    vals = dict(zip(cols, [c.strip() for c in geo.strip("|").split("|")]))
    assert vals["test-ref"] != "-"
    for fw in ("test-wrong", "test-racy", "test-loose"):
        assert vals[fw] == "-", (fw, geo)
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
    assert env["plan"]["precision"] == "fp32"


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
    flagged = slower_than_sequential(df)
    assert [r["framework"] for r in flagged] == ["ios-both"]
    md = ios_table(df, "cpu", 1).md()
    assert "| m | IOS-Both | torch | 12.00 | 8.000 | -33.3% | 10.00 | 0.83x | " + SLOWER_FLAG in md
    # Markdown cells escape Markdown syntax (ios_bench/escape.md): the brackets render as [openvino]
    assert r"| m | IOS-Both\[openvino\] | openvino | 5.000 | 5.500 | +10.0% | 6.000 | 1.20x | ok |" in md
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
    assert "| m | 14.00 / 3.000 | 0.200 |" in md  # a single round has no 'later'
    assert build_table(pd.DataFrame(rows).assign(first_build_seconds=None), "cpu", 1) is None
