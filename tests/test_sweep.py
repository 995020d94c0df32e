"""The sweep (ios_bench.running.sweep, plan, cells, runfolder, launch) through the real CLI: end-to-end runs,
crashes and hangs, kills and resumes, the round protocol's options and identical schedules, bad input."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ios_bench import results
from ios_bench.planning.cells import Cell, schedule_key
from ios_bench.results import Store, cell_key
from ios_bench.running.schedules import same_schedules
from ios_bench.running.sweep import schedule_hash
from ios_core.measurement.threads import usable_cores
from tests.harness_helpers import (
    FAST,
    ROOT,
    cli,
    ios_schedules_available,
    real_frameworks,
    rec,
    start,
    wait_for,
    workers_of,
)


def test_sweep_end_to_end_writes_a_report_with_every_cell(tmp_path):
    frameworks = ["test-ref"] + (real_frameworks()[:1] or ["test-ref2"])
    schedules = ["sequential", "both"] if ios_schedules_available() else []
    args = ["run", "--models", "tiny_a,tiny_b", "--batch", "1,2", "--frameworks", ",".join(frameworks),
            "--schedules", ",".join(schedules) or "none", "--cost-model", "synthetic", "--out", "runs/e2e",
            "--timeout", "180", *FAST, "--rounds", "2",  # the last --rounds wins: two rounds per cell
            "--no-cap"]  # the test adapter computes with the oracle, 6x onnxruntime: every cell measured here
    p = cli(args, tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "report: reports/e2e/report.html" in p.stdout
    run = tmp_path / "runs" / "e2e"
    df = results.load(run)
    labels = frameworks + [f"IOS-{s.capitalize()}" for s in schedules]
    assert len(df) == 2 * 2 * len(labels)
    assert df["cell"].is_unique
    assert set(df["status"]) == {"ok"}, df[["cell", "reason"]].to_string()
    assert df["check_passed"].all()
    # two rounds of two samples each; a round the machine disturbed is measured again, and left out
    assert all(len(r) >= 2 for r in df["rounds"]) and (df["rounds_measured"] >= 2).all()
    for _, r in df.iterrows():
        used = [g for g in r["rounds"] if g["status"] == "ok" and not g["disturbed"]]
        assert r["rounds_used"] == len(used)
        assert len(r["samples_ms"]) == 2 * (len(used) or len(r["rounds"]))
    assert (df["median_ms"] > 0).all() and (df["throughput"] > 0).all()
    assert set(df["threads"]) == {usable_cores()}  # the affinity mask, not os.cpu_count()
    # the oracle ran once per model and batch size, in its own worker
    assert sorted(p.name for p in (run / "logs").glob("*.reference.log")) == [
        f"tiny_{m}-b{b}.reference.log" for m in "ab" for b in (1, 2)]
    env = json.loads((run / "env.json").read_text())
    for key in ("cpu", "memory", "os", "python", "packages", "git", "command_line", "clocks", "frameworks"):
        assert key in env
    assert env["clocks"].startswith("unlocked")

    report = tmp_path / "reports" / "e2e"
    md = (report / "report.md").read_text()
    html = (report / "report.html").read_text()
    for model in ("tiny_a", "tiny_b"):
        for bs in (1, 2):
            for lab in labels:
                row = f"| {model} | {bs} | {lab} | cpu | ok |"
                assert row in md, row
                assert f"<td>{model}</td><td>{bs}</td><td>{lab}</td>" in html
    for bs in (1, 2):
        assert f"**Latency (ms), batch {bs}, cpu**" in md and f"**Throughput (images/s), batch {bs}, cpu**" in md
        assert (report / f"normalized_throughput_cpu_b{bs}.png").stat().st_size > 1000
    assert "| GeoMean |" in md
    for model in ("tiny_a", "tiny_b"):
        assert (report / f"vs_batch_{model}_cpu.png").stat().st_size > 1000
    csv = (report / "results.csv").read_text().splitlines()
    assert len(csv) == 1 + len(df)
    if schedules:
        assert "IOS at its best against the peers" in md
        assert len(list((run / "schedules").glob("*.json"))) == 2 * 2 * len(schedules)
        # every IOS record: provider, the optimizer's estimate and the sequential schedule's time
        ios = df[df["kind"] == "ios"]
        assert set(ios["provider"]) == {"torch"}
        assert (ios["predicted_ms"] > 0).all() and (ios["sequential_ms"] > 0).all()
        seq = ios[ios["schedule"] == "sequential"]
        assert (seq["sequential_ms"] == seq["median_ms"]).all()
        assert "IOS schedules: prediction and validation, batch 1, cpu" in md
        assert "prediction error" in md and "Mean absolute prediction error" in md


def test_crashing_and_hanging_cells_fail_and_the_sweep_goes_on(tmp_path):
    args = ["run", "--models", "tiny_a", "--batch", "1", "--frameworks",
            "test-crash,test-hang,test-raise,test-probecrash", "--schedules", "none", "--out", "runs/bad",
            "--timeout", "12", *FAST]
    p = cli(args, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    run = tmp_path / "runs" / "bad"
    recs = {r["framework"]: r for r in results.read_records(run)}
    assert set(recs) == {"test-crash", "test-hang", "test-raise", "test-probecrash"}
    assert "probing them one by one" in p.stderr
    probe = recs["test-probecrash"]
    assert probe["status"] == "skipped" and probe["reason"].startswith("probe failed: crashed")
    crash, hang, raised = recs["test-crash"], recs["test-hang"], recs["test-raise"]
    assert crash["status"] == "failed" and "SIGSEGV" in crash["reason"]
    assert "Segmentation fault" in crash["stderr_tail"]
    assert hang["status"] == "failed" and hang["reason"].startswith("timeout")
    assert raised["status"] == "failed" and raised["reason"].startswith("build: RuntimeError")
    assert "Traceback" in raised["stderr_tail"]
    assert workers_of(run) == []  # the hung worker was killed
    md = (tmp_path / "reports" / "bad" / "report.md").read_text()
    failures = md.split("## Failures")[1]
    for fw in ("test-crash", "test-hang", "test-raise"):
        assert f"| {fw} | cpu | failed |" in failures


def test_sigkill_mid_sweep_then_resume_runs_every_cell_exactly_once(tmp_path):
    args = ["run", "--models", "tiny_a", "--batch", "1", "--frameworks", "test-ref,test-ref2", "--schedules", "none",
            "--out", "runs/k",
            "--timeout", "120", "--no-report", *FAST]
    extra = {"TEST_SLOW_EXECUTE_S": "0.3"}
    run = tmp_path / "runs" / "k"
    store = run / "results.jsonl"
    proc = start(args, tmp_path, extra)
    try:
        # kill while the second cell is in flight (its worker has started)
        wait_for(lambda: (run / "logs" / "tiny_a-b1-test-ref2-cpu.r0.log").exists(), what="the second cell")
        proc.kill()  # SIGKILL: no cleanup at all
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: workers_of(run) == [], timeout=15, what="the orphaned worker to die with its parent")
    # the group's records are stored when its rounds are done; the round that finished is kept
    assert store.read_bytes() == b""
    kept = [json.loads(line) for line in (run / "rounds" / "tiny_a-b1-test-ref-cpu.jsonl").read_bytes().splitlines()]
    assert len(kept) == 1 and kept[0]["status"] == "ok"
    p = cli(["run", "--resume", "--out", "runs/k", "--no-progress"], tmp_path, extra)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "resuming: 1 round(s) of 2 cell(s) already measured" in p.stderr
    after = results.read_records(run)
    cells = [r["cell"] for r in after]
    assert sorted(cells) == ["tiny_a|b1|test-ref2|cpu", "tiny_a|b1|test-ref|cpu"]  # every cell exactly once
    ref = next(r for r in after if r["framework"] == "test-ref")
    assert ref["rounds"][0]["pid"] == kept[0]["pid"]  # the round measured before the kill, not again
    assert all(r["status"] == "ok" for r in after)
    assert not list((run / "rounds").glob("*.jsonl"))  # stored records take their rounds along
    assert (tmp_path / "reports" / "k" / "report.md").exists()


@pytest.mark.skipif(not ios_schedules_available(), reason="IOS optimizer/runtime not installed")
def test_resumed_ios_cell_reuses_its_schedule_with_the_models_own_weights(tmp_path):
    """A graph file with its own weights (not the sweep's seed): the schedules stored by the first
    run (merged weights included) and reused on --resume keep them (Graph.save/load only; nothing
    is re-seeded), so the reused IOS cells still match the oracle."""
    from ios_core.ir import GraphBuilder

    b = GraphBuilder("mine", (4, 6, 6))
    x = b.input
    a = b.conv(b.conv(x, 4, 3, padding=1), 4, 3, padding=1)
    c = b.conv(x, 4, 1)
    b.end_block(b.concat([a, c]))
    b.finish().init_weights(seed=1234).save(tmp_path / "mine.json")
    args = ["run", "--models", "mine.json", "--batch", "1", "--frameworks", "test-ref", "--schedules", "merge,both",
            "--cost-model", "synthetic", "--out", "runs/s", "--no-report", *FAST]
    p = cli(args, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    run = tmp_path / "runs" / "s"
    # Graph.save's JSON and weights (.npz), and the optimizer's figures (.stats) beside them
    assert sorted(f.name for f in (run / "schedules").iterdir()) == [
        f"mine-b1-cpu-{s}.{ext}" for s in ("both", "merge") for ext in ("json", "npz", "stats")]
    store = run / "results.jsonl"
    lines = store.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    store.write_bytes(b"".join(line for line in lines if b'"ios-' not in line))  # as if killed before storing
    p = cli(["run", "--resume", "--out", "runs/s", "--no-report", "--no-progress"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    recs = {r["framework"]: r for r in results.read_records(run)}
    assert recs["test-ref"]["status"] == "ok"
    for fw in ("ios-merge", "ios-both"):
        assert recs[fw]["status"] == "ok" and recs[fw]["schedule_reused"] is True
        assert recs[fw]["check"]["passed"], recs[fw]["check"]


FAKE_NVIDIA_SMI = """#!/bin/sh
echo "$@" >> "$FAKE_NVSMI_LOG"
case "$*" in
  *--query-gpu*) echo "0, Fake GPU, 1200, 1980, 555.42" ;;
esac
exit 0
"""


def test_sigterm_resets_locked_clocks(tmp_path):
    from tests.test_clocks import fake_sysfs

    sysfs = tmp_path / "sys"
    cpu = fake_sysfs(sysfs)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (bindir / "nvidia-smi").chmod(0o755)
    log = tmp_path / "nvidia-smi.log"
    extra = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "IOS_BENCH_SYSFS": str(sysfs),
             "FAKE_NVSMI_LOG": str(log)}
    run = tmp_path / "runs" / "t"
    args = ["run", "--lock-clocks", "--device", "cuda", "--models", "tiny_a", "--batch", "1", "--frameworks",
            "test-hang", "--schedules", "none", "--out", "runs/t", "--timeout", "300", *FAST]
    proc = start(args, tmp_path, extra)
    try:
        wait_for(lambda: (run / "logs" / "tiny_a-b1-test-hang-cuda.r0.log").exists(), what="the hanging cell")
        assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "performance"
        assert (cpu / "intel_pstate/no_turbo").read_text() == "1"
        assert "-i 0 --lock-gpu-clocks=1980,1980" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    calls = log.read_text().splitlines()
    assert calls.count("-i 0 --reset-gpu-clocks") == 1
    assert calls.index("-i 0 --reset-gpu-clocks") > calls.index("-i 0 --lock-gpu-clocks=1980,1980")
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"
    assert (cpu / "cpu1/cpufreq/scaling_governor").read_text() == "powersave"
    assert (cpu / "intel_pstate/no_turbo").read_text() == "0"
    env = json.loads((run / "env.json").read_text())
    assert env["clocks"].startswith("locked (CPU governor performance, turbo off; GPU 0 at 1980 MHz")
    assert env["clock_settings"]["restored"] is True
    assert workers_of(run) == []
    assert not (run / "results.jsonl").exists() or b"test-hang" not in (run / "results.jsonl").read_bytes()


def test_identical_schedules_are_one_measurement():
    cells = [Cell("m", "m", 1, schedule_key(s, p), "cpu", s, "ios", provider=p)
             for s in ("sequential", "greedy", "both") for p in ("torch", "onnxruntime")]
    same_hash = {"sequential": "aaaa", "greedy": "bbbb", "both": "aaaa"}  # validation kept sequential for Both
    scheds = {c.key: {"hash": same_hash[c.schedule], "path": f"schedules/{c.framework}.json"} for c in cells}
    same = same_schedules(cells, scheds)
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


@pytest.mark.parametrize("args", [["--rounds", "0"], ["--rounds", "-2"], ["--rounds", "nan"], ["--rounds", "1e9"],
                                  ["--rounds", "101"], ["--rounds", "three"], ["--target-ci", "0"],
                                  ["--target-ci", "100"], ["--target-ci", "-5"], ["--target-ci", "nan"],
                                  ["--time-budget", "nan"], ["--time-budget", "0"], ["--round-seed", "-1"],
                                  ["--time-budget", "1.5", "--min-sample-ms", "100", "--repeat", "20",
                                   "--min-repeat", "20"],
                                  ["--time-budget", "1.5", "--min-sample-ms", "100", "--repeat", "20",
                                   "--fixed-counts"]])
def test_bad_round_options_are_one_line_and_write_nothing(tmp_path, run_cli, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["run", "--models", "sample", "--out", "runs/x", "--no-progress", *args])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("args, message", [
    (["run", "--models", "nonesuch"], "unknown model nonesuch"),
    (["run", "--models", "sample", "--frameworks", "nonesuch"], "unknown framework nonesuch"),
    (["run", "--batch", "1,,x"], "bad batch size list '1,,x'"),
    (["run", "--batch", "1,x"], "'x' is not a positive integer"),
    (["run", "--schedules", "fastest"], "unknown schedule fastest"),
    (["run", "--frameworks", "ios"], "--schedules"),
])
def test_bad_run_input(args, message, capsys):
    from ios_bench.cli import main

    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_unwritable_out_folder(tmp_path, capsys):
    from ios_bench.cli import main

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as e:
        main(["run", "--models", "sample", "--frameworks", "all", "--out", str(blocker / "run"), "--no-report"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot write to") and len(err.splitlines()) == 1


def test_resume_needs_a_run_folder(tmp_path, capsys, monkeypatch):
    from ios_bench.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["run", "--resume"])
    assert e.value.code == 2
    assert "no run folder" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "runs")


def test_run_refuses_a_folder_with_results_unless_resumed(tmp_path, capsys):
    from ios_bench.cli import main

    Store(tmp_path / "old").append(rec())
    with pytest.raises(SystemExit) as e:
        main(["run", "--models", "sample", "--frameworks", "all", "--out", str(tmp_path / "old"), "--no-report"])
    assert e.value.code == 2
    assert "already holds results; use --resume" in capsys.readouterr().err


def test_env_command_prints_json(capsys):
    from ios_bench.cli import main

    with pytest.raises(SystemExit) as e:
        main(["env", "--no-frameworks"])
    assert e.value.code == 0
    env = json.loads(capsys.readouterr().out)
    for key in ("cpu", "memory", "os", "python", "packages", "git", "clocks", "clock_settings", "thread_env"):
        assert key in env
    assert env["cpu"]["logical_cores"] == os.cpu_count()


def test_the_last_timed_call_is_checked_in_process():
    """The measurement keeps what the last timed call returned, so it can be checked."""
    from ios_core.measurement.measure import measure

    calls = []
    m = measure(lambda: calls.append(1) or len(calls), warmup=2, number=3, repeat=4)
    assert m.last == len(calls) == 2 + 12


def test_percentiles_are_over_single_calls():
    """A p90 is the tail of single calls: one slow call in ten shows in p90/max, not only in a
    mean of ten calls (all samples of ten calls have the same mean here)."""

    from ios_core.measurement.measure import measure

    n = [0]

    def fn():
        n[0] += 1
        time.sleep(0.004 if n[0] % 10 == 0 else 0.0002)

    m = measure(fn, warmup=0, number=10, repeat=5)
    assert len(m.call_ms) == 50
    s = m.summary()
    assert s["percentiles_over"] == "calls" and s["calls"] == 50
    assert s["median_ms"] < 1.5
    assert s["max_ms"] >= 4.0
    assert s["p99_ms"] > 3.0
    assert min(m.samples_ms) > 0.5  # every ten-call sample holds one slow call
    assert s["p10_ms"] < 1.0


def test_thread_budget_comes_from_the_affinity_mask(monkeypatch):
    import os

    from ios_bench.planning.plan import Plan
    from ios_bench.running.sweep import busy_warnings
    from ios_core.measurement.threads import resolve_threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert resolve_threads(None) == 1
    assert Plan().threads == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert busy_warnings() and "1 cores" in busy_warnings()[0]


def test_untuned_tvm_is_not_in_the_default_sweep():
    from ios_bench.planning.plan import SLOW_FRAMEWORKS

    assert "tvm" in SLOW_FRAMEWORKS and "tvm-tuned" in SLOW_FRAMEWORKS
    assert "hundreds of ms" in SLOW_FRAMEWORKS["tvm"]


def test_the_default_sweep_leaves_tflite_out_and_refuses_tensorflows_int8_with_the_reason(tmp_path):
    """issue 57: TensorFlow Lite is a framework of its own, named with --frameworks; the default sweep (the
    headline's) keeps its cells: tensorflow, whose int8 is a skipped cell saying whose int8 it is."""
    import adapters
    from ios_bench.planning.plan import Plan
    from ios_bench.running.sweep import Sweep
    from ios_core import models

    names = ["tensorflow", "tensorflow-xla", "tflite"]
    avail = {n: {"reason": None, "devices": ["cpu"], "precisions": adapters.get(n).precisions("cpu")} for n in names}
    probes = {"cpu": {"status": "ok", "adapters": avail, "optimize": False}}
    graphs = {"sample": models.get("sample")}

    def cells(frameworks):
        plan = Plan(models=["sample"], frameworks=frameworks, schedules=[], precisions=["fp32", "int8"])
        sweep = Sweep(plan, tmp_path / "run", progress=False)
        return sweep, {(c.framework, c.precision): c.skip_reason for c in sweep.plan_cells(probes, graphs)}

    sweep, got = cells(None)
    assert not any(fw == "tflite" for fw, _ in got), got
    assert any(n.startswith("tflite: left out of the default sweep (TensorFlow Lite") for n in sweep.notes), sweep.notes
    assert got[("tensorflow", "fp32")] is None
    assert got[("tensorflow", "int8")] == ("tensorflow int8 on cpu: no: int8 is the tflite framework's: TensorFlow's "
                                           "graph runtime has no int8 kernels here")
    _, named = cells(["tflite"])
    assert named == {("tflite", "fp32"): None, ("tflite", "int8"): None}


def test_cell_workers_start_without_preexec_fn(tmp_path, monkeypatch):
    """The worker gets its own session from start_new_session (a preexec_fn is unsafe while other
    threads are alive) and arranges to die with the sweep itself."""
    import os

    from ios_bench.running import launch
    from ios_bench.running.worker import PARENT_ENV

    seen = {}

    class Stop(Exception):
        pass

    def fake_popen(args, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(subprocess, "Popen", fake_popen)
    with pytest.raises(Stop):
        launch.run_worker({"task": "probe", "result_path": str(tmp_path / "r.json")}, 5, tmp_path / "log", 1)
    assert seen.get("preexec_fn") is None
    assert seen["start_new_session"] is True
    assert seen["env"][PARENT_ENV] == str(os.getpid())


# ---- the run folder (items 13-17) -------------------------------------------------------------------


HOLD_LOCK = """
import sys, time
sys.path.insert(0, sys.argv[2])
from ios_bench.running.locks import FileLock
FileLock(sys.argv[1], "a test holder").acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_one_sweep_per_run_folder(tmp_path, run_cli):
    """While a process holds the run folder's lock, `run --resume` and `run` on it are refused in
    one line and write nothing; once the holder dies (SIGKILL), the lock is free again."""

    from ios_bench.records.runfolder import LOCK_FILE
    from ios_bench.running.locks import FileLock

    folder = tmp_path / "runs" / "busy"
    folder.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(folder / LOCK_FILE), str(ROOT)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for args in (["run", "--resume"], ["run"]):
            code, out, err = run_cli([*args, "--out", str(folder), "--models", "sample", "--frameworks", "torch",
                                      "--schedules", "none", "--no-progress"])
            assert code == 2, err
            assert len(err.strip().splitlines()) == 1 and "busy" in err and "a test holder" in err
            assert "Traceback" not in err
            assert sorted(p.name for p in folder.iterdir()) == [LOCK_FILE]
    finally:
        holder.kill()
        holder.wait()
    with FileLock(folder / LOCK_FILE, "this test"):  # released by the holder's death
        pass


@pytest.mark.parametrize("content", ["[1, 2]", "{\"models\": \"sample\"}", "{\"repeat\": 0}", "\x00\xff",
                                     "[" * 100000, "{\"batch_sizes\": [1.5]}"])
def test_a_corrupt_plan_is_one_line(tmp_path, run_cli, content):
    run = tmp_path / "runs" / "p"
    run.mkdir(parents=True)
    (run / "plan.json").write_bytes(content.encode("utf-8", "surrogateescape") if content != "\x00\xff"
                                    else b"\x00\xff")
    code, out, err = run_cli(["run", "--resume", "--out", str(run), "--no-progress"])
    assert code == 2, err
    assert err.count("\n") == 1 and "plan.json: corrupt plan" in err and "Traceback" not in err
    assert sorted(p.name for p in run.iterdir()) == ["plan.json"]


def test_resume_from_another_folder_and_retry_failed(tmp_path):
    """plan.json names model files by absolute path, so --resume works from any folder; with
    --retry-failed the failed cell runs again (its new record supersedes the failed one)."""
    from ios_core.ir import GraphBuilder

    a, elsewhere = tmp_path / "a", tmp_path / "elsewhere"
    (a / "graphs").mkdir(parents=True)
    elsewhere.mkdir()
    b = GraphBuilder("mine", (3, 5, 5))
    b.end_block(b.conv(b.input, 4, 3, padding=1))
    b.finish().init_weights(seed=7).save(a / "graphs" / "mine.json")
    args = ["run", "--models", "graphs/mine.json", "--batch", "1", "--frameworks", "test-ref,test-raise",
            "--schedules", "none", "--out", "runs/r", "--no-report", *FAST]
    p = cli(args, a)
    assert p.returncode == 0, p.stderr[-3000:]
    run = a / "runs" / "r"
    plan = json.loads((run / "plan.json").read_text())
    assert plan["models"] == [str(a / "graphs" / "mine.json")]
    (run / "refs" / "mine-b1.json").write_text("[corrupt")  # a reference file gone bad: computed again
    p = cli(["run", "--retry-failed", "--out", str(run), "--no-progress"], elsewhere, {"TEST_RAISE_OK": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert "retrying 1 failed cell" in p.stderr and "refs/mine-b1.json: corrupt" in p.stderr
    recs = results.read_records(run)
    assert [(r["framework"], r["status"], r.get("attempt")) for r in recs] == [
        ("test-ref", "ok", None), ("test-raise", "failed", None), ("test-raise", "ok", 2)]
    md = (a / "reports" / "r" / "report.md").read_text()  # beside the run, not under the current folder
    assert not (elsewhere / "reports").exists()
    assert "| mine | 1 | test-raise | cpu | ok |" in md


# ---- clock locking (item 16) ------------------------------------------------------------------------


@pytest.mark.parametrize("option, value", [("--models", "sample,sample"), ("--batch", "1,2,1"), ("--batch", "1,01"),
                                           ("--frameworks", "torch,onnxruntime,torch"),
                                           ("--schedules", "both,both")])
def test_a_repeated_list_item_is_refused(tmp_path, run_cli, option, value):
    out = tmp_path / "runs" / "r"
    code, _, err = run_cli(["run", option, value, "--out", str(out), "--no-progress"])
    assert code == 2 and err.count("\n") == 1 and "listed twice" in err, err
    assert not out.exists()


def test_two_graphs_with_one_name_are_refused(tmp_path, run_cli, monkeypatch):
    from ios_core import models

    monkeypatch.chdir(tmp_path)
    g = models.get("sample")
    g.save(tmp_path / "a.json", weights=False)
    (tmp_path / "b.json").write_text((tmp_path / "a.json").read_text())
    for specs in ("a.json,b.json", "sample,a.json", "a.json,./a.json"):
        code, _, err = run_cli(["run", "--models", specs, "--frameworks", "torch", "--schedules", "none",
                                "--out", "runs/r", "--no-progress"])
        assert code == 2 and err.count("\n") == 1, err
        assert "both named 'sample'" in err or "listed twice" in err
        assert not (tmp_path / "runs").exists()


def test_a_reference_failure_at_one_batch_size_fails_only_its_cells(tmp_path):
    p = cli(["run", "--models", "tiny_a", "--batch", "1,2", "--frameworks", "test-ref", "--schedules", "none",
             "--out", "runs/r", "--no-report", *FAST], tmp_path, {"TEST_REFERENCE_FAIL_BATCH": "2"})
    assert p.returncode == 0, p.stderr[-3000:]
    recs = {r["batch_size"]: r for r in results.read_records(tmp_path / "runs" / "r")}
    assert recs[1]["status"] == "ok"
    assert recs[2]["status"] == "failed"
    assert recs[2]["reason"].startswith("reference output failed") and "batch 2" in recs[2]["stderr_tail"]


def test_the_plan_line_is_followed_by_an_estimated_duration(tmp_path):
    p = cli(["run", "--models", "tiny_a", "--frameworks", "test-ref", "--schedules", "none", "--out", "runs/r",
             "--no-report", *FAST], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("1 cells to run"))
    assert lines[at + 1].startswith("estimated duration: about ") and "stated rate (assumed)" in lines[at + 1]
    env = json.loads((tmp_path / "runs" / "r" / "env.json").read_text())
    assert env["estimate"]["seconds"] > 0 and env["estimate"]["cells"] == 1 and env["duration_s"] > 0
    # no earlier run: a fresh worker's start was measured in the first seconds (estimate.calibrate)
    assert "workers' start measured now for 1 frameworks" in lines[at + 1]
    assert 0 < env["estimate"]["workers_start_s"]["test-ref"] < 120
    # scaled by this machine's speed now (the canary at plan time), and it says by how much
    assert "scaled by " in lines[at + 1] and "for this machine's speed now (canary " in lines[at + 1]
    assert env["estimate"]["canary_ms"] > 0 and 0.5 <= env["estimate"]["speed_factor"]["stated"] <= 2.0
    # a second run beside it learns from the first one's record
    p = cli(["run", "--models", "tiny_a", "--frameworks", "test-ref", "--schedules", "none", "--out", "runs/r2",
             "--no-report", *FAST], tmp_path)
    assert "latencies from earlier runs for 1" in p.stderr and "workers' start measured" not in p.stderr
    assert json.loads((tmp_path / "runs" / "r2" / "env.json").read_text())["estimate"]["earlier_runs"] == ["r"]


def test_a_cell_that_cannot_fit_is_skipped_before_it_starts(tmp_path):
    p = cli(["run", "--models", "tiny_a", "--batch", "1", "--frameworks", "test-ref", "--schedules", "none",
             "--out", "runs/r", "--no-report", *FAST], tmp_path, {"TEST_AVAILABLE_MIB": "64"})
    assert p.returncode == 0, p.stderr[-3000:]
    (r,) = results.read_records(tmp_path / "runs" / "r")
    assert r["status"] == "skipped"
    assert r["reason"].startswith("not enough memory: the cell needs about") and "64 MiB are available" in r["reason"]
    assert not list((tmp_path / "runs" / "r" / "logs").glob("*test-ref*"))  # no worker was started for it
    p = cli(["run", "--models", "tiny_a", "--batch", "1", "--frameworks", "test-ref", "--schedules", "none",
             "--out", "runs/r2", "--no-report", *FAST], tmp_path, {"TEST_AVAILABLE_MIB": "100000"})
    assert [r["status"] for r in results.read_records(tmp_path / "runs" / "r2")] == ["ok"]


def test_max_time_stops_cleanly_and_leaves_a_resumable_folder(tmp_path):
    args = ["run", "--models", "tiny_a,tiny_b", "--batch", "1", "--frameworks", "test-ref,test-ref2",
            "--schedules", "none", "--out", "runs/r", "--no-report", *FAST, "--rounds", "2", "--no-cap"]
    # each round sleeps 2 x 2 s in its timed calls: the budget is spent within the first rounds (the resumed
    # sweep's calls do not sleep: --no-cap, or a cell whose first round slept would be capped against them)
    p = cli([*args, "--max-time", "6"], tmp_path, {"TEST_SLOW_EXECUTE_S": "2"})
    assert p.returncode == 3, p.stderr[-3000:]
    # stopped once spent, or before a step its estimate says cannot finish in what is left
    assert re.search(r"--max-time 6 s( spent before|: .* left, .* needs about)", p.stderr), p.stderr[-2000:]
    assert "ios-bench run --resume --out runs/r" in p.stderr
    run = tmp_path / "runs" / "r"
    env = json.loads((run / "env.json").read_text())
    assert env["stopped"].startswith("--max-time 6 s") and "interrupted" not in env
    assert len(results.read_records(run)) < 4  # stopped before the end
    kept = sum(len(f.read_text().splitlines()) for f in (run / "rounds").glob("*.jsonl"))
    assert workers_of(run) == []
    p = cli(["run", "--resume", "--out", "runs/r", "--no-progress"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    if kept:  # the rounds that finished before the stop are not measured again
        assert f"resuming: {kept} round(s)" in p.stderr
    recs = results.read_records(run)
    assert len(recs) == 4 and len({r["cell"] for r in recs}) == 4  # each cell once
    # every cell has its two rounds (more where one was disturbed and measured again: a loaded machine)
    assert all(r["status"] == "ok" and len(r["rounds"]) >= 2 for r in recs)


def test_provider_labels_and_keys():
    from ios_bench.planning.cells import label, schedule_key, split_framework

    assert schedule_key("both") == "ios-both" and label("ios-both") == "IOS-Both"
    assert schedule_key("both", "onnxruntime") == "ios-both[onnxruntime]"
    assert label("ios-both[onnxruntime]") == "IOS-Both[onnxruntime]"
    assert split_framework("ios-both[openvino]") == ("ios-both", "openvino")
    assert split_framework("ios-greedy") == ("ios-greedy", "torch")
    assert split_framework("onnxruntime") == ("onnxruntime", None)


def test_a_step_that_cannot_finish_before_max_time_is_not_started(monkeypatch):
    """check_time: a step estimated to need more than what is left of --max-time is not started (in a lent
    GPU window it would be killed at the window's end and lost); one that fits, or that could never fit
    the whole limit, starts while time is left."""
    from types import SimpleNamespace

    from ios_bench.running import sweep as sweep_mod

    now = [100.0]
    monkeypatch.setattr(sweep_mod.time, "monotonic", lambda: now[0])
    s = SimpleNamespace(max_time=60.0, _t_start=50.0, _setup_s=5.0)  # 50 s spent (5 s of setup), 10 s left
    check = sweep_mod.Sweep.check_time
    check(s, "a round", 9.0)  # fits
    check(s, "a search longer than the whole limit", 120.0)  # could never fit: not held back
    check(s, "a search longer than a session's room", 56.0)  # 60 - 5 s of setup: never fits, not held back
    with pytest.raises(sweep_mod.MaxTimeReached, match="needs about 15 s"):
        check(s, "a search", 15.0)  # fits a fresh session: waits for it
    check(SimpleNamespace(max_time=None, _t_start=0.0), "anything", 1e9)
    now[0] = 110.0  # all spent: nothing starts, however short
    with pytest.raises(sweep_mod.MaxTimeReached, match="spent before a round"):
        check(s, "a round", 0.0)

    # a sweep handed the last 10 s of an experiment's 270 s deadline (a GPU window's second call): the
    # searches that fit the next call's 270 s wait for it instead of starting and being cut off
    now[0] = 100.0
    handed = SimpleNamespace(max_time=10.0, session_s=270.0, _t_start=99.0, _setup_s=1.0)
    with pytest.raises(sweep_mod.MaxTimeReached, match="needs about 4 min"):
        check(handed, "the searches", 234.0)
    check(handed, "a round", 5.0)  # fits what is left
    check(handed, "a search longer than any session", 400.0)  # never fits: not held back
    check(SimpleNamespace(max_time=10.0, session_s=None, _t_start=99.0, _setup_s=1.0), "the searches", 234.0)


def test_a_chain_graphs_ios_cells_are_known_to_share_one_schedule_before_any_search():
    from ios_bench.running.schedules import predicted_same
    from tests.runtime_helpers import fan_graph
    from tests.test_optimizer_optimize import _residual_chain

    graphs = {"chain": _residual_chain(), "fan": fan_graph()[0]}
    cells = [Cell(m, m, 1, schedule_key(s, p), "cpu", s, "ios", provider=p)
             for m in graphs for s in ("sequential", "greedy", "both") for p in ("torch", "onnxruntime")]
    cells += [Cell("chain", "chain", 1, "torch", "cpu", None, "torch")]  # a peer: never a twin
    # the greedy cell of the chain graph, per provider (the DP's may group the chain: another schedule; the
    # fan graph has a choice)
    assert predicted_same(cells, graphs) == {
        cell_key("chain", 1, f"ios-greedy{p}", "cpu"): cell_key("chain", 1, f"ios-sequential{p}", "cpu")
        for p in ("", "[onnxruntime]")}
    assert predicted_same([c for c in cells if c.schedule != "sequential"], graphs) == {}
    # with a composed cost model (the measured one on the CPU) the DP's cell of the chain too
    both = {cell_key("chain", 1, f"ios-both{p}", "cpu"): cell_key("chain", 1, f"ios-sequential{p}", "cpu")
            for p in ("", "[onnxruntime]")}
    assert predicted_same(cells, graphs, composed=True) == {**predicted_same(cells, graphs), **both}
