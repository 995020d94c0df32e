"""LoadGen scenarios (ios_bench.scenarios, docs/scenarios.md): each scenario's quick form through
the real MLPerf LoadGen on a tiny graph, its summary parsed into the record, a wrong response
failing the cell, the report's sections, and bad input refused in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ios_bench.results import read_records
from tests.harness_helpers import cli

pytest.importorskip("mlperf_loadgen", reason="the MLPerf LoadGen (mlcommons-loadgen, the loadgen extra)")

BASE = ["run", "--models", "tiny_a", "--schedules", "none", "--quick", "--rounds", "1", "--no-progress"]


def _summary(path: Path) -> dict:
    """The summary's ``label : value`` lines, read here independently of the code under test."""
    out = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.strip().partition(":")
        if sep and key.strip() not in out:
            out[key.strip()] = value.strip()
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each scenario's quick form, once per module: {scenario: (run folder, report folder, process)}."""
    root = tmp_path_factory.mktemp("scenarios")
    out = {}
    extra = {"single-stream": [], "multi-stream": ["--instances", "2"], "offline": ["--instances", "1,2"],
             # the bound from the single-stream cell of the same sweep, generous for a loaded test machine
             "server": ["--instances", "2", "--scenario-setting", "server_latency_factor=40",
                        "--scenario-setting", "server_tries=3"]}
    for scenario, more in extra.items():
        folder, report = root / f"run-{scenario}", root / f"report-{scenario}"
        p = cli(BASE + ["--frameworks", "test-ref", "--scenario", scenario, "--out", str(folder),
                        "--report-out", str(report)] + more, cwd=root)
        out[scenario] = (folder, report, p)
    return out


@pytest.mark.parametrize("scenario", ["single-stream", "multi-stream", "offline", "server"])
def test_quick_scenario_through_loadgen(runs, scenario):
    folder, _, p = runs[scenario]
    assert p.returncode == 0, p.stderr[-3000:]
    recs = [r for r in read_records(folder) if r["scenario"] == scenario]
    assert recs, p.stderr[-2000:]
    for rec in recs:
        assert rec["status"] == "ok", (rec.get("reason"), rec.get("stderr_tail"))
        assert rec["cell"].endswith(f"|{scenario}:{rec['instances']}x{rec['instance_threads']}")
        assert "reduced" in rec["reduced"] and rec["scenario_settings"]["min_duration_ms"] == 1000.0
        assert rec["check"]["passed"] and rec["check"]["responses_checked"] >= 1
        lg = rec["loadgen"]
        # LoadGen's own summary, in the run folder, is what the record says
        summary = _summary(folder / lg["logs"] / "mlperf_log_summary.txt")
        assert (folder / lg["logs"] / "mlperf_log_detail.txt").is_file()
        assert not list((folder / lg["logs"]).glob("mlperf_log_trace*"))
        assert lg["validity"] == summary["Result is"]
        assert lg["valid"] == (summary["Result is"] == "VALID")
        assert lg["p90_ms"] == pytest.approx(float(summary["90.00 percentile latency (ns)"]) / 1e6)
        assert lg["max_ms"] == pytest.approx(float(summary["Max latency (ns)"]) / 1e6)
        assert lg["query_count"] >= 1 and lg["duration_s"] > 0
        # the cell's figure: the median of its rounds' LoadGen figures (the undisturbed ones, as judged
        # when the record was made), and the record's `loadgen` is one of those rounds'
        used = [r for r in rec["rounds"] if r["status"] == "ok" and not r.get("disturbed")] or \
            [r for r in rec["rounds"] if r["status"] == "ok"]
        assert rec["loadgen"] in [r["loadgen"] for r in used]
        if scenario == "offline":
            assert lg["samples_per_s"] == pytest.approx(float(summary["Samples per second"]))
            figures = [r["loadgen"]["samples_per_s"] for r in used]
            assert rec["throughput"] == pytest.approx(rec["scenario_figure"])
        if scenario in ("single-stream", "multi-stream"):
            assert rec["scenario_unit"] == "ms"
            headline = next(k for k in summary if k.endswith("th percentile latency (ns)"))
            assert lg["target_latency_ms"] == pytest.approx(float(summary[headline]) / 1e6)
            figures = [r["loadgen"]["target_latency_ms"] for r in used]
        if scenario != "server":
            assert rec["scenario_figure"] == pytest.approx(float(np.median(figures)))
        if scenario != "server":
            assert rec["scenario_valid"] is True, lg.get("invalid_reason")
        assert len(rec["rounds"]) >= 1 and all("interference" in r for r in rec["rounds"])
        assert rec["samples_ms"] and rec["median_ms"] > 0


def test_offline_searches_every_split(runs):
    folder, report, _ = runs["offline"]
    recs = read_records(folder)
    assert sorted((r["instances"], r["instance_threads"]) for r in recs) == [(1, 2), (2, 1)]
    assert {r["concurrency"]["kind"] for r in recs} == {"instances"}
    md = (report / "report.md").read_text()
    assert "Offline: every configuration" in md and "Offline: winning configuration per framework" in md
    assert "reduced (--quick)" in md
    # the latency tables are not fed scenario cells
    assert "Latency (ms), batch 1" not in md


def test_server_bound_from_single_stream_and_every_try(runs):
    folder, report, _ = runs["server"]
    recs = {r["scenario"]: r for r in read_records(folder)}
    ss, srv = recs["single-stream"], recs["server"]
    assert ss["status"] == "ok" and srv["status"] == "ok"
    server = srv["server"]
    assert server["latency_bound_ms"] == pytest.approx(40 * ss["scenario_figure"])
    assert ss["cell"] in server["bound_from"]
    tries = server["tries"]
    assert 1 <= len(tries) <= 3
    for t in tries:
        assert (folder / t["logs"] / "mlperf_log_summary.txt").is_file()
        assert isinstance(t["valid"], bool) and t["qps"] > 0
    valid = [t["qps"] for t in tries if t["valid"]]
    assert server["max_valid_qps"] == (max(valid) if valid else None)  # this round's answer
    if srv.get("scenario_figure") is not None:  # the cell's: the median of its rounds' answers
        assert srv["scenario_figure"] == pytest.approx(float(np.median(server["max_valid_qps_per_round"])))
        assert server["max_valid_qps"] in server["max_valid_qps_per_round"]
    assert list(report.glob("server_p99_*.png"))


def test_wrong_response_fails_the_cell(tmp_path):
    """test-racy is right on each program's first call only: the check before timing passes, the
    responses LoadGen collects are wrong, and the cell is 'wrong' with the reason."""
    p = cli(BASE + ["--frameworks", "test-racy", "--scenario", "offline", "--instances", "1", "--out", "run",
                    "--no-report"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    (rec,) = read_records(tmp_path / "run")
    assert rec["status"] == "wrong"
    assert rec["check"]["before"]["passed"] is True
    assert rec["check"]["after"]["passed"] is False
    assert "response to QSL sample" in rec["check"]["reason"]
    assert rec["loadgen"]["validity"] in ("VALID", "INVALID")  # LoadGen's verdict is kept either way


@pytest.mark.parametrize("args, message", [
    (["--scenario", "throughput"], "--scenario"),
    (["--scenario", "offline", "--scenario-setting", "min_query_count=0"], "min_query_count"),
    (["--scenario", "server", "--scenario-setting", "server_latency_ms=-5"], "server_latency_ms"),
    (["--scenario", "server", "--scenario-setting", "server_latency_ms=nan"], "server_latency_ms"),
    (["--scenario", "offline", "--scenario-setting", "server_latency_ms=5"], "does not apply"),
    (["--scenario", "offline", "--scenario-setting", "bogus=1"], "unknown scenario setting"),
    (["--scenario", "offline", "--instances", "0"], "instance count"),
    (["--scenario", "offline", "--instances", "9", "--threads", "1"], "--instances"),
    (["--quick"], "needs a LoadGen scenario"),
    (["--scenario-setting", "min_query_count=5"], "needs a LoadGen scenario"),
])
def test_bad_scenario_input(run_cli, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["run", "--models", "sample", "--out", "runs/x"] + args)
    assert code == 2
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1 and message in err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_loadgen_missing_is_bad_input(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "mlperf_loadgen", None)  # import fails as if not installed
    code, _, err = run_cli(["run", "--models", "sample", "--out", "runs/x", "--scenario", "offline"])
    assert code == 2 and "LoadGen is not installed" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_adapter_that_cannot_run_the_scenario(tmp_path):
    p = cli(BASE + ["--frameworks", "test-noflight", "--scenario", "offline", "--out", "runs/x"], cwd=tmp_path)
    assert p.returncode == 2, p.stderr[-2000:]
    lines = [x for x in p.stderr.strip().splitlines() if x.startswith("error:")]
    assert lines and "test-noflight cannot run the offline scenario" in lines[0]
    assert not (tmp_path / "runs").exists()


def test_configurations_and_settings():
    from ios_bench.errors import InputError
    from ios_bench.scenarios.concurrency import configurations
    from ios_bench.scenarios.settings import DEFAULTS, QUICK, settings_for

    assert configurations("offline", 2) == [(1, 2), (2, 1)]
    assert configurations("server", 4) == [(1, 4), (2, 2), (3, 1), (4, 1)]
    assert configurations("offline", 4, [2, 8]) == [(2, 2)]
    assert configurations("single-stream", 4) == [(1, 4)]
    assert settings_for("server", quick=True)["server_percentile"] == 0.9
    assert settings_for("server")["server_percentile"] == 0.99
    assert settings_for("offline", False, {"min_query_count": 256})["min_query_count"] == 256
    for table in (DEFAULTS, QUICK):
        assert set(table) == {"single-stream", "multi-stream", "offline", "server"}
    with pytest.raises(InputError, match="min_duration_ms"):
        settings_for("offline", False, {"min_duration_ms": 0})
    with pytest.raises(InputError, match="target_percentile"):
        settings_for("single-stream", False, {"target_percentile": 1.5})


def test_plan_json_scenario_settings_are_checked(tmp_path):
    from ios_bench.errors import InputError
    from ios_bench.planning.plan import Plan

    ok = Plan.from_dict({"scenario": "offline", "scenario_settings": {"min_query_count": 8}, "quick": True})
    assert ok.scenario == "offline" and ok.quick
    with pytest.raises(InputError, match="scenario"):
        Plan.from_dict({"scenario": "nope"})
    with pytest.raises(InputError, match="min_query_count"):
        Plan.from_dict({"scenario": "offline", "scenario_settings": {"min_query_count": -1}})
    assert json.loads(json.dumps(ok.to_dict()))["scenario_settings"] == {"min_query_count": 8}


def _scen(fw, scenario, n, figure, valid=True, tp=None, **extra):
    return {"cell": f"m|b1|{fw}|cpu|{scenario}:{n}x{2 // n}", "model": "m", "batch_size": 1, "framework": fw,
            "device": "cpu", "status": "ok", "scenario": scenario, "instances": n, "instance_threads": 2 // n,
            "scenario_figure": figure, "scenario_valid": valid, "throughput": tp if tp is not None else figure,
            "check": {"passed": True}, **extra}


def test_goal_figures_pick_valid_winners():
    from ios_bench.experiments.throughput import goal_figures

    lat = [{"model": "m", "batch_size": 1, "framework": fw, "device": "cpu", "status": "ok", "median_ms": ms,
            "check": {"passed": True}} for fw, ms in (("onnxruntime", 10.0), ("ios-sequential", 20.0),
                                                      ("ios-both", 12.5))]
    off = [_scen("onnxruntime", "offline", 1, 100.0), _scen("onnxruntime", "offline", 2, 150.0),
           _scen("onnxruntime", "offline", 2, 900.0, valid=False) | {"cell": "x"},  # INVALID never wins
           _scen("ios-sequential", "offline", 1, 50.0), _scen("ios-sequential", "offline", 2, 90.0),
           _scen("ios-both", "offline", 1, 80.0), _scen("ios-both", "offline", 2, 85.0)]
    srv = [_scen("onnxruntime", "server", 1, 40.0, server={"latency_bound_ms": 20.0}),
           _scen("onnxruntime", "server", 2, None, valid=False, server={"latency_bound_ms": 20.0}),
           # a framework without a valid load: its answer says from which load up none was found
           *(_scen("torch", "server", n, None, valid=False, server={"latency_bound_ms": 9.0, "none_valid_above_qps": x})
             for n, x in ((1, 3.0), (2, 4.5)))]
    figs = goal_figures({"latency": lat, "offline": off, "server": srv})
    ort = next(r for r in figs["offline"] if r["framework"] == "onnxruntime")
    assert ort["offline_rate"] == 150.0 and ort["config"] == "2x1" and ort["ratio"] == pytest.approx(1.5)
    (ios,) = figs["ios"]
    assert ios["provider"] == "torch" and ios["sequential_config"] == "2x1"
    assert ios["ratio"] == pytest.approx(90.0 / 80.0)  # N x IOS-Sequential against ONE IOS-Both instance
    s, t = figs["server"]
    assert s["qps"] == 40.0 and s["config"] == "1x2" and s["bound_ms"] == 20.0 and s["none_valid"] is None
    assert t["qps"] is None and t["none_valid"] == "none valid above 4.500 QPS"  # holds for both configurations
    assert figs["judged"] == 11 and figs["valid"] == 7 and figs["verdicts"]["server"] == [1, 4]


@pytest.mark.parametrize("version", ["10", "11"])
def test_tensorrt_contexts_engine_on_the_standin(version, monkeypatch):
    """The GPU variant's code path without a GPU: TensorRT's `contexts` engine (one engine, one
    execution context, stream and buffers per request in flight) on the TensorRT stand-in and a
    host-memory CuPy (tests/fake_tensorrt.py), each context's response against the oracle. The
    stand-in evaluates one request at a time, so requests are submitted one after another."""
    import threading

    import adapters
    from ios_bench.scenarios.concurrency import build_engine
    from ios_core import models, reference
    from ios_core.check import compare
    from ios_core.reference import random_input
    from tests import fake_tensorrt

    if version not in fake_tensorrt.VERSIONS:
        pytest.skip(f"the stand-in has no TensorRT {version}")
    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt.module(version))
    monkeypatch.setitem(sys.modules, "cupy", fake_tensorrt.fake_cupy())
    monkeypatch.setitem(sys.modules, "pynvml", None)
    graph = models.get("sample").init_weights(0)
    xs = [random_input(graph, 1, seed=s) for s in (1, 2, 3)]
    fake_tensorrt.FEED["input"] = xs[0]
    engine, how = build_engine(adapters.get("tensorrt"), graph, 1, "cuda", 2, 2, {"cache": False})
    assert how["kind"] == "contexts" and len(engine.programs) == 2
    a, b = engine.programs
    assert a.engine is b.engine and a.context is not b.context and a.stream is not b.stream
    engine.load(xs)
    got: dict = {}
    done = threading.Event()

    def finished(token, sample, y):
        got[token] = (sample, y)
        done.set()

    engine.start(finished)
    try:
        for token, sample in enumerate([0, 1, 2, 1]):
            done.clear()
            engine.submit(sample, token)
            assert done.wait(60)
    finally:
        engine.stop()
    assert engine.error is None
    for sample, y in got.values():
        chk = compare(y, reference.run(graph, xs[sample]), 1e-4)
        assert chk.passed, chk.reason


def test_server_loadgen_peak_search(tmp_path):
    """server_search=loadgen-peak: LoadGen's own FindPeakPerformance, then one confirming run whose
    verdict is the answer's; its tries (QPS only) and the confirming run are recorded."""
    p = cli(BASE + ["--frameworks", "test-ref", "--scenario", "server", "--instances", "1", "--out", "run",
                    "--no-report", "--scenario-setting", "server_search=loadgen-peak",
                    "--scenario-setting", "server_latency_ms=50", "--scenario-setting", "min_duration_ms=300"],
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    (rec,) = read_records(tmp_path / "run")
    assert rec["status"] == "ok", rec.get("reason")
    server = rec["server"]
    assert server["search"] == "loadgen-peak" and server["bound_from"] == "the server_latency_ms setting"
    tries = server["tries"]
    assert len(tries) >= 2 and all(t["qps"] > 0 for t in tries)
    confirm = tries[-1]
    assert confirm["logs"].endswith("/confirm") and isinstance(confirm["valid"], bool)
    assert (tmp_path / "run" / confirm["logs"] / "mlperf_log_summary.txt").is_file()
    assert server["max_valid_qps"] == (confirm["qps"] if confirm["valid"] else None)


def test_server_bounds_come_from_single_stream_records():
    from ios_bench.planning.plan import Plan
    from ios_bench.scenarios.cells import bounds_from, needs_bound_cells

    plan = Plan(scenario="server", quick=True)
    assert needs_bound_cells(plan)
    assert not needs_bound_cells(Plan(scenario="server", scenario_settings={"server_latency_ms": 9.0}))
    ok = {"cell": "m|b1|onnxruntime|cpu|single-stream:1x2", "model": "m", "batch_size": 1, "framework": "onnxruntime",
          "device": "cpu", "status": "ok", "scenario": "single-stream", "scenario_figure": 4.0}
    bad = {**ok, "cell": "m|b1|torch|cpu|single-stream:1x2", "framework": "torch", "status": "failed",
           "reason": "build: boom", "scenario_figure": None}
    other = {**ok, "cell": "m|b1|onnxruntime|cpu|server:1x2", "scenario": "server"}
    got = bounds_from({r["cell"]: r for r in (ok, bad, other)}, plan)
    assert got[("m", 1, "onnxruntime", "cpu")] == (8.0, "2 x the single-stream p90 of "
                                                         "m|b1|onnxruntime|cpu|single-stream:1x2 (4.000 ms)")
    assert "build: boom" in got[("m", 1, "torch", "cpu")]
    assert len(got) == 2


def test_list_frameworks_says_how_each_keeps_requests_in_flight():
    from ios_bench.commands.list import framework_rows

    rows = {r["name"]: r for r in framework_rows()}
    assert rows["openvino"]["in_flight"] == "async" and rows["onnxruntime"]["in_flight"] == "shared"
    assert rows["torch"]["in_flight"] == "instances" and rows["ios"]["in_flight"] == "instances"
    assert rows["tensorrt"]["in_flight"] == "contexts"
    assert rows["torch-compile-cudagraphs"]["in_flight"] == "cannot"


def test_server_cell_needs_half_its_rounds_valid():
    from ios_bench.scenarios.summary import scenario_fields

    def rnd(i, qps):
        return {"round": i, "status": "ok", "disturbed": None, "samples_ms": [1.0, 2.0],
                "loadgen": {"valid": qps is not None}, "server": {"max_valid_qps": qps, "tries": []}}

    two_of_three = scenario_fields("server", [rnd(0, 10.0), rnd(1, None), rnd(2, 30.0)], 1)
    assert two_of_three["scenario_valid"] is True and two_of_three["scenario_figure"] == 20.0
    # 10 and 30 QPS: the standard deviation (n - 1) sqrt(200) over the figure 20 (with n it would be 0.5)
    assert two_of_three["scenario_cv"] == pytest.approx(200 ** 0.5 / 20)
    three = scenario_fields("server", [rnd(0, 10.0), rnd(1, 12.0), rnd(2, 20.0)], 1)
    assert three["scenario_cv"] == pytest.approx(((4 ** 2 + 2 ** 2 + 6 ** 2) / 2) ** 0.5 / 12)  # over the median
    one_of_three = scenario_fields("server", [rnd(0, 10.0), rnd(1, None), rnd(2, None)], 1)
    assert one_of_three["scenario_valid"] is False and "scenario_figure" not in one_of_three
    offline = scenario_fields("offline", [{**rnd(0, None), "loadgen": {"valid": True, "samples_per_s": 5.0}},
                                          {**rnd(1, None), "loadgen": {"valid": False, "samples_per_s": 7.0}}], 2)
    assert offline["scenario_valid"] is False and offline["throughput"] == 12.0  # every round must be VALID


def test_server_round_estimate_counts_a_search_that_halves_its_load():
    """The duration model of a Server round: its tries last 2, 4, 8, 10 times the queries at one
    request's latency (an upper bound, the search halving after every invalid try down to its
    floor), against one
    test's length for Offline, and for the single-stream cells that bound a Server sweep."""
    from ios_bench.planning.plan import Plan
    from ios_bench.scenarios.cells import RoundEstimate
    from ios_bench.scenarios.settings import settings_for

    class Flat:  # the wrapped estimate.Model: 10 ms a request, 2 s of fixed cost a round
        def latency_s(self, model, batch, framework, count=False):
            return 0.010

        def fixed_s(self, framework):
            return 2.0

    server = settings_for("server", quick=True)
    q, tries = server["min_query_count"], server["server_tries"]
    got = RoundEstimate(Flat(), Plan(scenario="server", quick=True)).round_s("m", 1, "onnxruntime")
    # halving from half the capacity down to its floor (a fifth of the capacity), within its tries
    loads = [2, 4, 5][:tries]
    want = 2.0 + 7 * 0.010 + sum(max(server["min_duration_ms"] / 1000, q * 0.010 * m) for m in loads)
    assert got == pytest.approx(want)
    assert got > 2.0 + tries * q * 0.010 * 2  # well above every try at the full load
    # a Server sweep's single-stream cells (its latency bounds) are counted as single-stream
    from ios_bench.planning.cells import Cell

    single = settings_for("single-stream", quick=True)
    bound_cell = Cell(model="m", model_spec="m", batch_size=1, framework="onnxruntime", device="cpu",
                      adapter="onnxruntime", scenario="single-stream")
    got = RoundEstimate(Flat(), Plan(scenario="server", quick=True)).cell_s(bound_cell)
    assert got == pytest.approx(2.0 + 0.07 + 1.5 * max(single["min_duration_ms"] / 1000,
                                                       single["min_query_count"] * 0.010))
    offline = settings_for("offline", quick=True)
    got = RoundEstimate(Flat(), Plan(scenario="offline", quick=True)).round_s("m", 1, "onnxruntime")
    assert got == pytest.approx(2.0 + 0.07 + 1.5 * max(offline["min_duration_ms"] / 1000,
                                                       offline["min_query_count"] * 0.010))


def test_the_cell_line_writes_long_latencies_in_whole_milliseconds():
    from ios_bench.scenarios.summary import describe_scenario

    rec = {"status": "ok", "scenario_figure": 12.7, "scenario_unit": "samples/s", "scenario_valid": True,
           "rounds_used": 3, "rounds_measured": 3, "scenario_cv": 0.03,
           "loadgen": {"p50_ms": 2549.6, "p90_ms": 4580.2, "p99_ms": 12.345}}
    line = describe_scenario(rec, "[1/1] m b1 torch 2x1")
    assert "p50/p90/p99 2,550/4,580/12.35 ms" in line, line
    assert "e+0" not in line
