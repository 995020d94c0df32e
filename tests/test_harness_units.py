"""Harness pieces without worker processes: results store, compare, clock locking on a fake
sysfs, bad input on the command line."""

import json
import os
import warnings

import pytest

from ios_bench import clocks, results
from ios_bench.errors import InputError
from ios_bench.results import Store, cell_key


def rec(model="m", bs=1, fw="torch", device="cpu", median=10.0, spread=0.2, status="ok", passed=True, n=3):
    r = {"cell": cell_key(model, bs, fw, device), "model": model, "batch_size": bs, "framework": fw,
         "device": device, "status": status}
    if status == "ok":
        samples = [median + spread * (2 * i / (n - 1) - 1) for i in range(n)]
        r.update(median_ms=median, mean_ms=median, std_ms=spread, p10_ms=median - spread, p90_ms=median + spread,
                 samples_ms=samples, throughput=bs * 1000 / median,
                 check={"passed": passed, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""})
    else:
        r["reason"] = "crashed"
    return r


# ---- results store ------------------------------------------------------------------------------

def test_store_appends_whole_lines_and_loads_a_dataframe(tmp_path):
    store = Store(tmp_path)
    store.append(rec(fw="a"))
    store.append(rec(fw="b", median=5.0))
    data = (tmp_path / "results.jsonl").read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 2
    df = results.load(tmp_path)
    assert list(df["framework"]) == ["a", "b"]
    assert list(df["median_ms"]) == [10.0, 5.0]
    assert df["samples_ms"].iloc[1] == [4.8, 5.0, 5.2]
    assert bool(df["check_passed"].all())
    assert store.finished() == {cell_key("m", 1, "a", "cpu"), cell_key("m", 1, "b", "cpu")}


def test_store_refuses_invalid_records(tmp_path):
    with pytest.raises(ValueError):
        Store(tmp_path).append({"cell": "x", "model": "m"})
    bad = rec()
    bad["cell"] = "other"
    with pytest.raises(ValueError):
        Store(tmp_path).append(bad)
    assert not (tmp_path / "results.jsonl").exists()


def test_corrupt_line_reported_with_line_number_and_skipped(tmp_path):
    store = Store(tmp_path)
    store.append(rec(fw="a"))
    with open(store.path, "a") as f:
        f.write("{not json\n")
        f.write(json.dumps({"cell": "x"}) + "\n")
    store.append(rec(fw="b"))
    with pytest.warns(results.CorruptRecord) as caught:
        df = results.load(tmp_path)
    messages = [str(w.message) for w in caught]
    assert any(":2: corrupt record skipped: not valid JSON" in m for m in messages)
    assert any(":3: corrupt record skipped: missing" in m for m in messages)
    assert list(df["framework"]) == ["a", "b"]
    problems = []
    assert len(results.read_records(tmp_path, on_problem=problems.append)) == 2
    assert len(problems) == 2


def test_partial_last_record_is_never_kept(tmp_path):
    store = Store(tmp_path)
    store.append(rec(fw="a"))
    whole = store.path.read_bytes()
    line = json.dumps(rec(fw="b")).encode()
    with open(store.path, "ab") as f:
        f.write(line[: len(line) // 2])  # what a crash in the middle of a write could leave
    problems = []
    assert [r["framework"] for r in results.read_records(store.path, problems.append)] == ["a"]
    assert "unterminated" in problems[0] or "not valid JSON" in problems[0]
    msg = store.repair()
    assert msg and ":2:" in msg and store.path.read_bytes() == whole
    store.append(rec(fw="b"))
    assert [r["framework"] for r in store.records()] == ["a", "b"]


def test_wholly_corrupt_results_file_is_an_input_error(tmp_path):
    (tmp_path / "results.jsonl").write_bytes(b"\x00\x01garbage\nmore garbage\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InputError, match="corrupt results file"):
            results.load(tmp_path)
    with pytest.raises(InputError, match="no such results file"):
        results.load(tmp_path / "nothing")


# ---- compare ------------------------------------------------------------------------------------

# ---- clock locking on a fake machine ------------------------------------------------------------

def fake_sysfs(root, governor="powersave", no_turbo="0", cores=2):
    cpu = root / "devices" / "system" / "cpu"
    for i in range(cores):
        d = cpu / f"cpu{i}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(governor + "\n")
        (d / "scaling_available_governors").write_text("performance powersave\n")
        (d / "scaling_cur_freq").write_text("2000000\n")
    (cpu / "intel_pstate").mkdir()
    (cpu / "intel_pstate" / "no_turbo").write_text(no_turbo + "\n")
    return cpu


def test_cpu_clock_lock_and_restore(tmp_path, monkeypatch):
    cpu = fake_sysfs(tmp_path)
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))  # no nvidia-smi
    said = []
    with clocks.ClockLock(True, ["cpu"], echo=said.append) as lock:
        assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "performance"
        assert (cpu / "cpu1/cpufreq/scaling_governor").read_text() == "performance"
        assert (cpu / "intel_pstate/no_turbo").read_text() == "1"
        assert lock.state["clocks"] == "locked (CPU governor performance, turbo off)"
        assert lock.observe() == {"cpu_mhz": 2000.0}
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"
    assert (cpu / "intel_pstate/no_turbo").read_text() == "0"
    assert lock.state["restored"] is True
    assert len(said) == 1


def test_clock_lock_impossible_says_why_once(tmp_path, monkeypatch):
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))  # an empty sysfs: no cpufreq (like a VM)
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    said = []
    with clocks.ClockLock(True, ["cpu", "cuda"], echo=said.append) as lock:
        pass
    assert lock.state["clocks"].startswith("unlocked (CPU: no cpufreq interface")
    assert "GPU: no NVIDIA GPU (nvidia-smi not found)" in lock.state["clocks"]
    assert len(said) == 1
    with clocks.ClockLock(False) as lock:
        pass
    assert lock.state["clocks"].startswith("unlocked (not requested")


def test_clock_restore_on_exception(tmp_path, monkeypatch):
    cpu = fake_sysfs(tmp_path)
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    with pytest.raises(RuntimeError):
        with clocks.ClockLock(True, ["cpu"], echo=lambda s: None):
            assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "performance"
            raise RuntimeError("boom")
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text() == "powersave"


# ---- bad input: one line, exit 2 ----------------------------------------------------------------

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


def test_report_from_a_store_with_a_corrupt_line(tmp_path, capsys):
    from ios_bench.cli import main

    run = tmp_path / "runs" / "r"
    store = Store(run)
    for model in ("m1", "m2"):
        for fw, median in (("torch", 10.0), ("ios-both", 5.0)):
            store.append({**rec(model=model, fw=fw, median=median), "label": fw, "p10_ms": median * 0.9,
                          "p90_ms": median * 1.1, "throughput_p10": 1000 / (median * 1.1),
                          "throughput_p90": 1000 / (median * 0.9)})
    with open(store.path, "a") as f:
        f.write("{broken\n")
    store.append(rec(model="m1", fw="crashy", status="failed"))
    (run / "env.json").write_text(json.dumps({"clocks": "unlocked (test)", "cpu": {"model": "Test CPU"}}))
    with pytest.raises(SystemExit) as e:
        main(["report", str(run), "--out", str(tmp_path / "rep")])
    assert e.value.code == 0
    out = capsys.readouterr()
    assert "results.jsonl:5: corrupt record skipped" in out.err
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| model | torch | crashy | IOS-Both |" in md
    assert "| m1 | 10.000 ±0.200 | failed | 5.000 ±0.200 |" in md
    assert "| m2 | 10.000 ±0.200 |  | 5.000 ±0.200 |" in md
    assert "| GeoMean | 10.000 | - | 5.000 |" in md
    assert "| m1 | 100.0 [90.9-111.1] | failed | 200.0 [181.8-222.2] |" in md
    # IOS at its best (IOS-Both) over torch, the one peer and so the best one
    assert "| m1 | IOS-Both 5.000 | 2.00x | 2.00x (torch) |" in md and "| GeoMean |  | 2.00x | 2.00x |" in md
    assert "| m1 | 1 | crashy | cpu | failed | crashed |" in md
    assert "results.jsonl:5: corrupt record skipped" in md  # the report says so too
    assert "Test CPU" in md and "unlocked (test)" in md
    assert (tmp_path / "rep" / "normalized_throughput_cpu_b1.png").stat().st_size > 1000
    assert not (tmp_path / "rep" / "vs_batch_m1_cpu.png").exists()  # one batch size: no curve to draw


def test_env_command_prints_json(capsys):
    from ios_bench.cli import main

    with pytest.raises(SystemExit) as e:
        main(["env", "--no-frameworks"])
    assert e.value.code == 0
    env = json.loads(capsys.readouterr().out)
    for key in ("cpu", "memory", "os", "python", "packages", "git", "clocks", "clock_settings", "thread_env"):
        assert key in env
    assert env["cpu"]["logical_cores"] == os.cpu_count()
