"""Numbers that can be trusted (issue 16): every output check is exercised end to end (a wrong
adapter, a racy one that is right only once, one that ignores the requested precision), and a
wrong cell stays out of every GeoMean, speedup and plot; per-call percentiles; the thread budget
from the affinity mask; untuned TVM out of the default sweep; each peer's configuration shown."""

import json

import matplotlib.figure
import pytest
from test_harness_sweep import FAST, cli, ios_schedules_available

from ios_bench import report, results


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


def test_the_last_timed_call_is_checked_in_process():
    """The measurement keeps what the last timed call returned, so it can be checked."""
    from ios_core.measure import measure

    calls = []
    m = measure(lambda: calls.append(1) or len(calls), warmup=2, number=3, repeat=4)
    assert m.last == len(calls) == 2 + 12


def test_percentiles_are_over_single_calls():
    """A p90 is the tail of single calls: one slow call in ten shows in p90/max, not only in a
    mean of ten calls (all samples of ten calls have the same mean here)."""
    import time

    from ios_core.measure import measure

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

    from ios_bench.plan import Plan
    from ios_bench.sweep import busy_warnings
    from ios_core.threads import resolve_threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert resolve_threads(None) == 1
    assert Plan().threads == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert busy_warnings() and "1 cores" in busy_warnings()[0]


def test_untuned_tvm_is_not_in_the_default_sweep():
    from ios_bench.plan import SLOW_FRAMEWORKS

    assert "tvm" in SLOW_FRAMEWORKS and "tvm-tuned" in SLOW_FRAMEWORKS
    assert "hundreds of ms" in SLOW_FRAMEWORKS["tvm"]


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

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _sources(*folders, suffixes=(".py",)):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in suffixes and ".venv" not in path.parts:
                yield path


def test_one_atomic_writer():
    """Files are put in place only by ios_core.atomic: no other module renames temporary files."""
    offenders = []
    for path in _sources("ios_core", "ios_bench", "adapters"):
        if path.name == "atomic.py":
            continue
        text = path.read_text()
        for needle in ("os.replace(", "os.rename(", ".tmp.npz", ".tmp.npy"):
            if needle in text:
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path):
    from ios_core.atomic import atomic_write, atomic_write_json

    target = tmp_path / "x.json"
    atomic_write_json(target, {"a": 1})

    def boom(f):
        f.write(b"half")
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError):
        atomic_write(target, boom)
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temporary file left behind


def test_no_development_machine_paths():
    """Tests, benchmarks, docs and the README name no folder of a development machine."""
    bad = ["/" + "work/", "/" + "home/", "/" + "root/", "../" + "shared/"]
    found = []
    for path in [*_sources("tests", "benchmarks", "docs", "ios_bench", "ios_core", "adapters",
                           suffixes=(".py", ".md", ".toml")), ROOT / "README.md", ROOT / "Makefile"]:
        text = path.read_text(errors="replace")
        found += [f"{path.relative_to(ROOT)}: {b}" for b in bad if b in text]
    assert found == []


def test_readme_and_docs_point_only_at_files_in_the_repository():
    import re

    missing = []
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for ref in re.findall(r"`((?:docs|benchmarks|tests|ios_core|ios_bench|adapters)/[\w./-]+)`", path.read_text()):
            if "*" not in ref and "<" not in ref and not (ROOT / ref.rstrip("/")).exists():
                missing.append(f"{path.name}: {ref}")
    assert missing == []
    assert (ROOT / "docs" / "architecture.md").exists()



def test_cell_workers_start_without_preexec_fn(tmp_path, monkeypatch):
    """The worker gets its own session from start_new_session (a preexec_fn is unsafe while other
    threads are alive) and arranges to die with the sweep itself."""
    import os
    import subprocess

    from ios_bench import launch
    from ios_bench.worker import PARENT_ENV

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
from ios_bench.locks import FileLock
FileLock(sys.argv[1], "a test holder").acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_one_sweep_per_run_folder(tmp_path, run_cli):
    """While a process holds the run folder's lock, `run --resume` and `run` on it are refused in
    one line and write nothing; once the holder dies (SIGKILL), the lock is free again."""
    import subprocess
    import sys

    from ios_bench.locks import FileLock
    from ios_bench.runfolder import LOCK_FILE

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


def _store_lines(folder, lines):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def _rec(fw="x", median=10.0, **extra):
    from ios_bench.results import cell_key

    r = {"schema": 1, "cell": cell_key("m", 1, fw, "cpu"), "model": "m", "batch_size": 1, "framework": fw,
         "device": "cpu", "status": "ok", "median_ms": median, "mean_ms": median, "std_ms": 0.1,
         "p10_ms": median - 0.1, "p90_ms": median + 0.1, "samples_ms": [median] * 5, "throughput": 1000 / median,
         "check": {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""}}
    r.update(extra)
    return r


def test_records_are_validated_on_read(tmp_path, run_cli):
    """Wrongly typed records are reported with their line and skipped; a cell recorded twice is
    reported; report and compare carry on with one warning per problem, never a traceback."""
    run = tmp_path / "runs" / "typed"
    bad = [_rec("a", batch_size="1", cell="m|b1|a|cpu"), _rec("b", median_ms="fast"), _rec("c", samples_ms=["x"]),
           _rec("d", check="yes"), _rec("e", status="great"), _rec("f", median_ms=None), _rec("g", info=[1]),
           _rec("h", reason=7), _rec("i", std_ms=float("nan"))]
    _store_lines(run, [_rec("ok"), *bad, _rec("ok", median=11.0)])
    problems = []
    recs = results.read_records(run, problems.append)
    assert [r["framework"] for r in recs] == ["ok", "ok"]
    assert len(problems) == len(bad) + 1
    for line, fragment in [(2, "batch_size"), (3, "median_ms"), (4, "samples_ms"), (5, "check"),
                           (6, "unknown status 'great'"), (7, "timed cell without median_ms"), (8, "info"),
                           (9, "reason"), (10, "std_ms")]:
        assert any(f":{line}: corrupt record skipped" in p and fragment in p for p in problems), (line, problems)
    assert any(":11: cell m|b1|ok|cpu recorded again (first at line 1)" in p for p in problems)
    code, out, err = run_cli(["report", str(run), "--out", str(tmp_path / "rep")])
    assert code == 0 and "Traceback" not in err
    assert err.count("warning:") == len(problems)
    code, out, err = run_cli(["compare", str(run), str(run)])
    assert code == 0 and "Traceback" not in err


def test_an_unknown_schema_version_is_refused_with_its_line(tmp_path, run_cli):
    run = tmp_path / "runs" / "future"
    _store_lines(run, [_rec("a"), _rec("b", schema=99)])
    for argv in (["report", str(run), "--out", str(tmp_path / "rep")], ["compare", str(run), str(run)]):
        code, out, err = run_cli(argv)
        assert code == 2, err
        assert err.count("\n") == 1 and "results.jsonl:2:" in err and "schema" in err
    assert not (tmp_path / "rep").exists() or not any((tmp_path / "rep").iterdir())


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


@pytest.mark.parametrize("content", ["[]", "{\"cpu\": \"fast\", \"plan\": 3, \"git\": [], \"notes\": 5}", "{bad"])
def test_a_corrupt_env_json_is_a_warning_in_the_report(tmp_path, run_cli, content):
    run = tmp_path / "runs" / "e"
    _store_lines(run, [_rec("a")])
    (run / "env.json").write_text(content)
    code, out, err = run_cli(["report", str(run), "--out", str(tmp_path / "rep")])
    assert code == 0 and "Traceback" not in err, err
    assert (tmp_path / "rep" / "report.md").exists()


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
    md = (elsewhere / "reports" / "r" / "report.md").read_text()
    assert "| mine | 1 | test-raise | cpu | ok |" in md


# ---- clock locking (item 16) ------------------------------------------------------------------------

LOCK_AND_DIE = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from ios_bench.clocks import ClockLock
lock = ClockLock(True, ["cpu"], echo=lambda s: None, state_path=sys.argv[1])
lock.__enter__()
print("locked", flush=True)
if sys.argv[3] == "die":
    os.kill(os.getpid(), signal.SIGKILL)
import time
time.sleep(120)
"""


def _fake_machine(tmp_path, monkeypatch):
    from test_harness_units import fake_sysfs

    cpu = fake_sysfs(tmp_path / "sys")
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path / "sys"))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))  # no nvidia-smi
    return cpu


def test_clocks_reset_after_a_sigkill(tmp_path, monkeypatch, run_cli):
    import subprocess
    import sys

    cpu = _fake_machine(tmp_path, monkeypatch)
    run = tmp_path / "runs" / "k"
    run.mkdir(parents=True)
    p = subprocess.run([sys.executable, "-c", LOCK_AND_DIE, str(run / "clocks.json"), str(ROOT), "die"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -9 and "locked" in p.stdout
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "performance"  # left locked by the dead sweep
    saved = json.loads((run / "clocks.json").read_text())
    assert [v for _, v in saved["cpu"]] == ["powersave", "powersave", "0"]
    code, out, err = run_cli(["clocks", "reset", str(run)])
    assert code == 0, err
    assert "restored 3 clock setting(s)" in out
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"
    assert (cpu / "cpu1/cpufreq/scaling_governor").read_text() == "powersave"
    assert (cpu / "intel_pstate/no_turbo").read_text() == "0"
    assert not (run / "clocks.json").exists()
    code, out, err = run_cli(["clocks", "reset", str(run)])
    assert code == 0 and "nothing to restore" in out


def test_the_next_lock_restores_what_a_killed_sweep_left(tmp_path, monkeypatch):
    import subprocess
    import sys

    from ios_bench.clocks import ClockLock

    cpu = _fake_machine(tmp_path, monkeypatch)
    p = subprocess.run([sys.executable, "-c", LOCK_AND_DIE, str(tmp_path / "c.json"), str(ROOT), "die"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -9
    said = []
    with ClockLock(True, ["cpu"], echo=said.append) as lock:
        assert lock.state["before"]["cpu"]["governors"] == ["powersave"]  # the real previous value
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"
    assert any("restored 3 setting(s)" in s for s in said)


def test_two_sweeps_cannot_lock_clocks_at_once(tmp_path, monkeypatch, run_cli):
    import subprocess
    import sys

    from ios_bench.clocks import ClockLock
    from ios_bench.errors import InputError

    _fake_machine(tmp_path, monkeypatch)
    holder = subprocess.Popen([sys.executable, "-c", LOCK_AND_DIE, str(tmp_path / "c.json"), str(ROOT), "hold"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(InputError, match="locked by another sweep"):
            ClockLock(True, ["cpu"], echo=lambda s: None).__enter__()
        code, out, err = run_cli(["clocks", "reset"])
        assert code == 2 and "running sweep holds the clocks" in err
        folder = tmp_path / "runs" / "second"
        code, out, err = run_cli(["run", "--lock-clocks", "--out", str(folder), "--models", "sample",
                                  "--frameworks", "torch", "--schedules", "none", "--no-progress"])
        assert code == 2 and err.count("\n") == 1 and "locked by another sweep" in err
        assert not (folder / "results.jsonl").exists() and not (folder / "plan.json").exists()
    finally:
        holder.kill()
        holder.wait()
    with ClockLock(False, ["cpu"]):  # not locking needs no machine lock
        pass


def test_a_failing_restore_is_retried(tmp_path, monkeypatch):
    from ios_bench import clocks as clk
    from ios_bench import system

    cpu = _fake_machine(tmp_path, monkeypatch)
    real_write, failures = system.write, {"n": 0}

    def flaky(path, value):
        if value == "powersave" and failures["n"] < 2:  # the first two restores of a governor fail
            failures["n"] += 1
            return f"{path}: Device or resource busy"
        return real_write(path, value)

    monkeypatch.setattr(system, "write", flaky)
    with clk.ClockLock(True, ["cpu"], echo=lambda s: None, state_path=tmp_path / "clocks.json") as lock:
        assert (tmp_path / "clocks.json").exists()
    assert failures["n"] == 2
    assert lock.state["restored"] is True
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"
    assert not (tmp_path / "clocks.json").exists()


# ---- one graph, one name, one cell (item 10) ----------------------------------------------------------

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
