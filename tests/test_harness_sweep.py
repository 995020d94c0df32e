"""End-to-end sweeps through the real CLI, each cell in its own worker process.

Test models (tiny_a, tiny_b) and adapters (test-ref, test-crash, test-hang, ...) come from
tests/harness_plugin.py through IOS_BENCH_PLUGINS; real adapters and IOS schedules join the
end-to-end sweep when they are installed.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ios_bench import results
from ios_core.threads import usable_cores

ROOT = Path(__file__).resolve().parent.parent


def env_for(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env["IOS_BENCH_PLUGINS"] = "tests.harness_plugin"
    env.update(extra or {})
    return env


def cli(args, cwd, extra=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "ios_bench", *args], cwd=cwd, env=env_for(extra),
                          capture_output=True, text=True, timeout=timeout)


def start(args, cwd, extra=None):
    return subprocess.Popen([sys.executable, "-m", "ios_bench", *args], cwd=cwd, env=env_for(extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ios_schedules_available() -> bool:
    try:
        from ios_core.optimizer import optimize  # noqa: F401
    except ImportError:
        return False
    found = importlib.util.find_spec
    return found("ios_core.cost") is not None and found("adapters.ios") is not None


def real_frameworks() -> list[str]:
    import adapters

    return [n for n in ("onnxruntime",) if n in adapters.names() and adapters.get(n).available() is None]


def workers_of(folder: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "ios_bench.worker" in cmd and str(folder) in cmd:
            found.append(p)
    return found


def wait_for(pred, timeout=120.0, what="condition"):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# one round per cell (the round protocol has its own tests), IOS on the torch kernels only
FAST = ["--warmup", "0", "--repeat", "2", "--min-sample-ms", "0", "--no-progress", "--rounds", "1",
        "--ios-providers", "torch"]


def test_sweep_end_to_end_writes_a_report_with_every_cell(tmp_path):
    frameworks = ["test-ref"] + (real_frameworks()[:1] or ["test-ref2"])
    schedules = ["sequential", "both"] if ios_schedules_available() else []
    args = ["run", "--models", "tiny_a,tiny_b", "--batch", "1,2", "--frameworks", ",".join(frameworks),
            "--schedules", ",".join(schedules) or "none", "--cost-model", "synthetic", "--out", "runs/e2e",
            "--timeout", "180", *FAST, "--rounds", "2"]  # the last --rounds wins: two rounds per cell
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
    from tests.test_harness_units import fake_sysfs

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
