"""The utilization sampler, the Plan fields ``sample_utilization`` and ``adapter_options``, and the
``utilization`` and ``intra-inter`` experiments (issue 13)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ios_bench.errors import InputError
from ios_bench.experiments.base import Context
from ios_bench.machine import utilization as util
from ios_bench.planning.plan import Plan, adapter_options
from ios_bench.running.sweep import Sweep

HAS_PROC = os.path.exists(util.PROC_STAT)


# ---- the sampler ------------------------------------------------------------------------------

@pytest.mark.skipif(not HAS_PROC, reason="no /proc/stat here")
def test_proc_stat_reading_is_real_and_monotonic():
    a = util.read_proc_stat()
    assert set(util.affinity()) <= set(a)  # every core of the mask has counters
    time.sleep(0.05)
    b = util.read_proc_stat()
    for cpu, (busy, total) in a.items():
        assert 0 <= busy <= total
        assert b[cpu][0] >= busy and b[cpu][1] >= total
    # the whole machine advanced by about (elapsed x clock ticks x cores), never backwards
    assert sum(v[1] for v in b.values()) > sum(v[1] for v in a.values())


def test_proc_stat_parsing_excludes_idle_and_iowait(tmp_path):
    f = tmp_path / "stat"
    f.write_text("cpu  9 9 9 9 9 9 9 9 9 9\ncpu0 10 1 5 100 4 0 2 0 3 0\ncpu1 0 0 0 50 0 0 0 0 0 0\nintr 1 2\n")
    got = util.read_proc_stat(str(f))
    assert got == {0: (18, 122), 1: (0, 50)}  # guest (3) is inside user: not counted again


@pytest.mark.skipif(not HAS_PROC or not hasattr(os, "sched_setaffinity"), reason="needs /proc/stat and affinity")
def test_a_busy_loop_makes_its_core_busy():
    core = util.affinity()[-1]
    code = f"import os,time\nos.sched_setaffinity(0,{{{core}}})\nt=time.time()\nwhile time.time()-t<0.8: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.15)  # the child is pinned and spinning
        with util.CpuSampler(period_s=0.01, cpus=[core]) as s:
            time.sleep(0.4)
    finally:
        proc.wait(timeout=30)
    summary = util.summarize(s.trace())
    assert summary["samples"] >= 10
    assert summary["mean_busy_pct"][str(core)] >= 70.0, summary


def test_process_share_tells_a_busy_thread_from_a_sleeping_one():
    cores = util.affinity()[:1]
    with util.CpuSampler(period_s=0.01, cpus=cores) as idle:
        time.sleep(0.3)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    t = threading.Thread(target=spin)
    with util.CpuSampler(period_s=0.01, cpus=cores) as busy:
        t.start()
        time.sleep(0.4)
        stop.set()
        t.join()
    if idle.reason:
        pytest.skip(idle.reason)
    assert util.summarize(idle.trace())["process_pct"] < 20.0
    assert util.summarize(busy.trace())["process_pct"] > 40.0  # one spinning thread on a one-core mask


def test_trace_shape_and_summary():
    with util.CpuSampler(period_s=0.005) as s:
        time.sleep(0.12)
    trace = json.loads(json.dumps(s.trace()))  # plain JSON
    if s.reason:
        pytest.skip(s.reason)
    assert trace["kind"] == "cpu" and trace["cpus"] == util.affinity()
    n = len(trace["t_s"])
    assert n >= 5
    assert trace["t_s"] == sorted(trace["t_s"]) and trace["t_s"][0] > 0
    assert len(trace["busy_pct"]) == len(trace["process_pct"]) == n
    assert all(len(row) == len(trace["cpus"]) and all(0 <= v <= 100 for v in row) for row in trace["busy_pct"])
    assert trace["notes"]
    summary = util.summarize(trace)
    assert summary["samples"] == n
    assert set(summary["mean_busy_pct"]) == {str(c) for c in trace["cpus"]}
    assert 0 <= summary["mean_busy_pct_all"] <= 100


def test_without_counters_the_sampler_says_so_and_records_nothing(monkeypatch):
    monkeypatch.setattr(util, "PROC_STAT", "/nonexistent/stat")
    monkeypatch.setattr(util, "read_proc_stat", lambda path="/nonexistent/stat": open(path).read())

    def no_psutil():
        raise RuntimeError("no per-cpu times")

    monkeypatch.setattr(util, "_read_psutil", no_psutil)
    with util.CpuSampler(period_s=0.01) as s:
        time.sleep(0.03)
    assert s.source is None and "cannot be sampled here" in s.reason
    trace = s.trace()
    assert trace["t_s"] == [] and trace["reason"] == s.reason
    assert util.summarize(trace) == {"kind": "cpu", "samples": 0, "reason": s.reason}


# ---- Plan fields ------------------------------------------------------------------------------

def test_the_cuda_sampler_without_nvml_says_why_once(monkeypatch):
    """No NVML here: the reason names NVML once (it read 'NVML: RuntimeError: ... (NVML: ...)')."""
    from ios_core.measurement import gpu

    class Broken:
        class NVMLError(Exception):
            pass

        def nvmlInit(self):
            raise self.NVMLError("Driver Not Loaded")

    broken = Broken()
    real = gpu.nvml_session
    monkeypatch.setattr(gpu, "nvml_session", lambda nvml=None: real(broken))
    with util.CudaSampler() as s:
        pass
    assert s.reason == "GPU utilization cannot be sampled (NVML: NVMLError: Driver Not Loaded)"
    assert s.reason.count("NVML") == 2  # the library's name, then its error's class


@pytest.mark.parametrize("value", [[], {"": {}}, {"tvm-tuned": 4}, {"tvm-tuned": {"": 1}},
                                   {"tvm-tuned": {"trials": float("nan")}}, "x"])
def test_adapter_options_are_type_checked(value):
    with pytest.raises(InputError, match="adapter_options"):
        Plan.from_dict({"adapter_options": value})


@pytest.mark.parametrize("value", [1, "yes", None])
def test_sample_utilization_is_type_checked(value):
    with pytest.raises(InputError, match="sample_utilization"):
        Plan.from_dict({"sample_utilization": value})


def test_plan_fields_round_trip_and_options_merge():
    opts = {"ios": {"a": 1, "b": 2}, "ios-both": {"b": 3}, "tvm-tuned": {"trials_per_task": 4, "db": "/x"}}
    plan = Plan.from_dict(json.loads(json.dumps(Plan(adapter_options=opts, sample_utilization=True).to_dict())))
    assert plan.adapter_options == opts and plan.sample_utilization is True
    assert adapter_options(plan, "ios-both", "ios") == {"a": 1, "b": 3}  # the schedule's own wins
    assert adapter_options(plan, "ios-sequential", "ios") == {"a": 1, "b": 2}
    assert adapter_options(plan, "tvm-tuned", "tvm-tuned") == {"trials_per_task": 4, "db": "/x"}
    assert adapter_options(plan, "torch", "torch") == {}
    assert Plan().adapter_options == {} and Plan().sample_utilization is False


def test_adapter_options_reach_the_adapter_and_the_record(tmp_path):
    """A cell's options go to adapter.build (an unknown one fails that cell with the adapter's
    own message) and are recorded; other cells are untouched."""
    plan = Plan(models=["sample"], frameworks=["torch", "onnxruntime"], schedules=[], warmup=0, repeat=1,
                min_sample_ms=None, rounds=1, adapter_options={"torch": {"no_such_option": 1}})
    Sweep(plan, tmp_path / "run", progress=False).run()
    recs = {r["framework"]: r for r in map(json.loads, (tmp_path / "run" / "results.jsonl").read_text().splitlines())}
    assert recs["torch"]["status"] == "failed" and "no_such_option" in recs["torch"]["reason"]
    assert recs["torch"]["options"] == {"no_such_option": 1}
    assert recs["onnxruntime"]["status"] == "ok" and "options" not in recs["onnxruntime"]
    assert json.loads((tmp_path / "run" / "plan.json").read_text())["adapter_options"] == plan.adapter_options


# ---- the experiments --------------------------------------------------------------------------

def run_experiment(exp, ctx: Context) -> tuple[dict, object]:
    """What the runner does: each sweep into <out>/runs/<name>, then the report."""
    folders = {}
    for run in exp.runs(ctx):
        folders[run.name] = Path(ctx.out) / "runs" / run.name
        Sweep(run.plan, folders[run.name], progress=False).run()
    return folders, exp.report(ctx, folders)


def test_utilization_quick_traces_each_cell_and_plots_them(tmp_path):
    from ios_bench.experiments.utilization import EXPERIMENT

    ctx = Context(out=tmp_path / "exp", quick=True)
    [run] = EXPERIMENT.runs(ctx)
    assert run.plan.repeat * run.plan.min_sample_ms >= 200  # a timed loop long enough for many samples
    assert run.plan.sample_utilization and run.plan.schedules == ["sequential", "both"] and run.plan.frameworks == []
    folders, report = run_experiment(EXPERIMENT, ctx)
    recs = [json.loads(line) for line in (folders["utilization"] / "results.jsonl").read_text().splitlines()]
    assert {r["framework"] for r in recs} == {"ios-sequential", "ios-both"}
    for r in recs:
        assert r["status"] == "ok", r.get("reason")
        u = r["utilization"]
        trace = json.loads((folders["utilization"] / u["trace"]).read_text())
        assert u["trace"] == f"util/sample-b1-{r['framework']}-cpu.json"
        if HAS_PROC:
            assert u["samples"] == len(trace["t_s"]) >= 5  # the timed loop lasts >= 10 x 20 ms
            assert set(u["mean_busy_pct"]) == {str(c) for c in trace["cpus"]}
    text = "\n".join(body for _, body in report.sections)
    assert "IOS-Sequential" in text and "IOS-Both" in text and "no published numbers" in text.lower()
    if HAS_PROC:
        assert [p.name for p in report.figures] == ["utilization-sample-cpu.png"]
        assert report.figures[0].stat().st_size > 5000
    assert not list(folders["utilization"].glob("util/*.tmp*"))  # written atomically


def test_intra_inter_plans(tmp_path):
    from ios_bench.experiments.intra_inter import BUDGETS, EXPERIMENT

    ctx = Context(out=tmp_path / "exp", quick=True)
    main, untuned = EXPERIMENT.runs(ctx)
    opts = main.plan.adapter_options["tvm-tuned"]
    assert main.plan.frameworks == ["tvm-tuned"] and main.plan.schedules == ["sequential", "both"]
    assert opts["trials_per_task"] == BUDGETS["quick"]
    assert Path(opts["db"]) == (tmp_path / "exp" / "tvm_db" / f"tpt{BUDGETS['quick']}").resolve()
    assert untuned.plan.frameworks == ["tvm"] and untuned.plan.models == ["sample"]
    Plan.from_dict(json.loads(json.dumps(main.plan.to_dict())))  # survives plan.json
    full = EXPERIMENT.runs(Context(out=tmp_path / "f"))
    assert full[0].plan.models == ["inception_v3", "randwire", "nasnet", "squeezenet"]
    assert full[1].plan.models == ["squeezenet"]  # untuned TVM only where it takes under seconds
    assert len(EXPERIMENT.runs(Context(out=tmp_path / "g", models=["inception_v3"]))) == 1
    published = EXPERIMENT._published()
    assert "4.95" in published and "4.03" in published and "not measured here" in published
    ref = EXPERIMENT.runs(Context(out=tmp_path / "r", reference=True))
    assert ref[0].plan.models == ["squeezenet", "inception_v3"]
    assert ref[0].plan.adapter_options["tvm-tuned"]["trials_per_task"] == BUDGETS["reference"]


@pytest.mark.slow
def test_intra_inter_quick_end_to_end(tmp_path):
    """Tuning included (about two minutes here, most of it MetaSchedule's one-time import)."""
    from ios_bench.experiments.intra_inter import EXPERIMENT

    ctx = Context(out=tmp_path / "exp", quick=True)
    folders, report = run_experiment(EXPERIMENT, ctx)
    recs = {r["framework"]: r for f in folders.values()
            for r in map(json.loads, (f / "results.jsonl").read_text().splitlines())}
    assert set(recs) == {"tvm-tuned", "ios-sequential", "ios-both", "tvm"}
    assert all(r["status"] == "ok" for r in recs.values()), {k: r.get("reason") for k, r in recs.items()}
    info = recs["tvm-tuned"]["info"]
    assert info["trials_per_task"] == 2 and info["tuning_trials"] > 0
    assert Path(info["database"]) == ctx.out.resolve() / "tvm_db" / "tpt2"
    text = "\n".join(body for _, body in report.sections)
    assert "TVM tuned (2 trials/task)" in text and "TVM-AutoTune" in text


def test_run_cli_adapter_option_parsing(run_cli, tmp_path):
    from ios_bench.commands.run import parse_adapter_options

    assert parse_adapter_options(("tvm-tuned:trials_per_task=4", "tvm-tuned:db=/x y", "ios:flag=true")) == {
        "tvm-tuned": {"trials_per_task": 4, "db": "/x y"}, "ios": {"flag": True}}
    for bad in ("tvm-tuned=4", "tvm-tuned:trials", ":a=1", "x:=1", "x:a=NaN"):
        code, _, err = run_cli(["run", "--adapter-option", bad, "--out", str(tmp_path / "r")])
        assert code == 2 and "--adapter-option" in err, err
        assert not (tmp_path / "r").exists()


def test_an_experiment_runs_only_the_sweeps_named(tmp_path):
    from ios_bench.errors import InputError
    from ios_bench.experiments import get
    from ios_bench.experiments.base import Context
    from ios_bench.experiments.runner import selected_runs

    exp = get("throughput")
    assert [r.name for r in selected_runs(exp, Context(out=tmp_path, quick=True))] == ["latency", "offline", "server"]
    only = selected_runs(exp, Context(out=tmp_path, quick=True, sweeps=["server", "latency"]))
    assert [r.name for r in only] == ["latency", "server"]
    with pytest.raises(InputError, match="unknown sweep 'nope'.*choose from: latency, offline, server"):
        selected_runs(exp, Context(out=tmp_path, quick=True, sweeps=["nope"]))
