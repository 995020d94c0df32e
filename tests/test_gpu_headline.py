"""benchmarks/gpu_headline.py without a GPU: the plan and the dry run's one estimate line, the
packages it says are missing and the carried wheels, bad arguments, a window that ends early
(its sweep stopped, the journal and the report whole) and the next one resuming it, and the
report's headline against synthetic records (the published V100 ratios labelled beside ours)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from ios_bench.results import cell_key
from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("gpu_headline", ROOT / "benchmarks" / "gpu_headline.py")
gh = importlib.util.module_from_spec(_spec)
sys.modules["gpu_headline"] = gh
_spec.loader.exec_module(gh)

LINE = re.compile(r"^estimated duration (\d+) s on (NVIDIA H100|NVIDIA H200)$")


@pytest.mark.parametrize("gpu,name", [(None, "NVIDIA H100"), ("h200", "NVIDIA H200")])
def test_dry_run_prints_the_plan_and_ends_with_one_estimate_line(capsys, tmp_path, gpu, name):
    argv = ["--dry-run", "--root", str(tmp_path), "--wheels", str(tmp_path / "none")] + (["--gpu", gpu] if gpu else [])
    assert gh.main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    m = LINE.match(out[-1])
    assert m and m.group(2) == name, out[-1]
    assert sum(1 for line in out if line.startswith("estimated duration")) == 1
    total, _ = gh.estimate(gh.plan(gpu or "h100"))
    assert int(m.group(1)) == round(total)
    text = "\n".join(out)
    assert "assumptions, not measurements" in text and "pruned search r=1, s=3" in text
    assert "--max-time <left>" in text and "--device cuda" in text
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing


def test_the_plan_runs_the_four_networks_at_batch_1_first():
    p = gh.plan("h100", rest=("resnet18",))
    names = [s.name for s in p.steps]
    assert names[:2] == ["wheels", "doctor"]
    first = [s for s in p.steps if s.first_window]
    later = [s for s in p.steps if not s.first_window]
    assert names.index(later[0].name) == len(first)  # the first window's part comes first
    b1 = [s.sweep for s in first if s.sweep]
    assert all(sw.batches == (1,) for sw in b1)
    graph = [sw for sw in b1 if sw.graph and sw.rounds is None]
    assert sorted(m for sw in graph for m in sw.models) == sorted(gh.PAPER_NETS)
    # every network is seen with one round before any gets its third; the no-graph form after
    assert [sw.rounds for sw in b1] == [1, 1, None, None, None, None]
    assert [sw.graph for sw in b1] == [True, True, True, True, False, False]
    pruned = [sw for sw in b1 if sw.prune]
    assert {m for sw in pruned for m in sw.models} == set(gh.PRUNED_NETS)
    assert all("pruned search r=1, s=3" in sw.label() for sw in pruned)
    assert all(s.sweep.batches == (1, 16, 32) for s in later)
    assert later[-1].sweep.models == ("resnet18",)
    peers = graph[0].frameworks
    assert set(gh.GPU_PEERS) <= set(peers) and "tensorrt" in peers
    assert b1[-1].frameworks == ()  # the no-graph sweeps measure IOS only
    # a carried profile database: the full search everywhere
    full = gh.plan("h100", prune=None, rest=())
    assert all(s.sweep.prune is None for s in full.steps if s.sweep)


def test_run_commands_are_the_real_cli_with_max_time_and_resume(tmp_path):
    p = gh.plan("h100", rest=())
    sw = next(s.sweep for s in p.steps if s.name == "b1-graph-r1s3")
    cmd = gh.run_command(sw, tmp_path / "f", 3, max_time=123.4, resume=True)
    assert cmd[1:5] == ["-m", "ios_bench", "run", "--device"] and "--resume" in cmd
    joined = " ".join(cmd)
    assert "--max-time 123" in joined and "--ios-option max_group_size=1 --ios-option max_num_groups=3" in joined
    assert "--adapter-option ios:cuda_graph=true" in joined and "--sample-utilization" in joined
    from ios_bench.commands.run import command

    ctx = command.make_context("run", cmd[4:])  # the CLI accepts every option the window gives it
    assert ctx.params["device"] == "cuda" and ctx.params["resume"] is True


def test_the_estimate_counts_each_search_and_round_once():
    p = gh.plan("h100", rest=())
    total, parts = gh.estimate(p)
    assert [n for n, _, _ in parts] == [s.name for s in p.steps if s.first_window]
    assert total == pytest.approx(sum(s for _, s, _ in parts))
    by = {n: what for n, _, what in parts}
    assert by["b1-graph-full"].startswith("2 network(s) x batch 1: 0 search(es), 24 cell rounds")  # 2 more rounds
    assert "12 cell rounds" in by["b1-graph-full-first"]
    # one more second per worker start costs one second per cell round: 4 nets x (6 + 2 cells) x 3 rounds
    old = gh.ASSUMED["worker_s"]
    try:
        gh.ASSUMED["worker_s"] = (old[0] + 1, old[1])
        assert gh.estimate(p)[0] - total == pytest.approx(4 * 8 * 3)
    finally:
        gh.ASSUMED["worker_s"] = old


def test_missing_packages_say_whether_they_are_carried(tmp_path):
    (tmp_path / "nosuch_dist-1.0-py3-none-any.whl").write_bytes(b"")
    needs = (("json", "json", "x"), ("nosuchmod_xyz", "nosuch-dist", "y"), ("nosuch2_xyz", "other", "z"))
    lines, install, absent = gh.wheel_report(tmp_path, needs)
    assert lines == ["missing: nosuch-dist (import nosuchmod_xyz; y): carried as nosuch_dist-1.0-py3-none-any.whl",
                     f"missing: other (import nosuch2_xyz; z): NOT carried in {tmp_path}"]
    assert [w.name for w in install] == ["nosuch_dist-1.0-py3-none-any.whl"] and absent == ["other"]


@pytest.mark.parametrize("argv,message", [
    (["--prune", "x"], "bad --prune 'x'"), (["--prune", "0,3"], "bad --prune"), (["--window", "5"], "bad --window 5"),
    (["--rounds", "0"], "bad --rounds 0"), (["--first-rounds", "4"], "bad --first-rounds 4"),
    (["--resume-from", "/nonexistent/x"], "no such folder"),
    (["--profile-db", "/nonexistent/p.sqlite"], "no such file"),
])
def test_bad_arguments_are_one_line(capsys, argv, message):
    assert gh.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_gpu_kind_from_its_name():
    assert gh.gpu_kind_of("NVIDIA H100 80GB HBM3") == "h100"
    assert gh.gpu_kind_of("NVIDIA H200") == "h200"
    assert gh.gpu_kind_of("Tesla V100-SXM2-16GB") == "v100"


# ---- a window against fake sweeps ------------------------------------------------------------------
FAKE_SWEEP = textwrap.dedent("""
    import json, os, sys, time
    argv = sys.argv[1:]
    out = argv[argv.index("--out") + 1]
    models = argv[argv.index("--models") + 1].split(",")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "calls.txt"), "a") as f:
        f.write(" ".join(argv) + "\\n")
    if not os.path.exists(os.path.join(out, "plan.json")):
        json.dump({"models": models}, open(os.path.join(out, "plan.json"), "w"))
    if "nasnet" in models and "--resume" not in argv:
        time.sleep(60)  # over the window: stopped, resumed by the next one
    recs = json.loads(os.environ["FAKE_RECORDS"])
    with open(os.path.join(out, "results.jsonl"), "a") as f:
        for r in recs:
            if r["model"] in models and "--frameworks none" not in " ".join(argv):
                f.write(json.dumps(r) + "\\n")
""")


def _rec(model, fw, median, schedule=None, status="ok", reason=None, batch=1):
    r = {"schema": 2, "cell": cell_key(model, batch, fw, "cuda"), "model": model, "batch_size": batch,
         "framework": fw, "device": "cuda", "status": status}
    if schedule:
        r.update(schedule=schedule, kind="ios")
    if status == "ok":
        r.update(median_ms=median, mean_ms=median, std_ms=0.01, p10_ms=median, p90_ms=median, samples_ms=[median],
                 rounds_used=3, check={"passed": True, "max_rel_err": 1e-7}, utilization={"mean_sm_pct": 40.0},
                 gpu_memory={"allocator_peak_mib": 100.0, "nvml_process_mib": 900.0})
    else:
        r["reason"] = reason
    return r


RECORDS = [_rec("inception_v3", "ios-sequential", 4.0, "sequential"), _rec("inception_v3", "ios-both", 2.0, "both"),
           _rec("inception_v3", "torch", 5.0), _rec("inception_v3", "torch-compile-cudagraphs", 3.0),
           _rec("inception_v3", "tensorrt", None, status="skipped", reason="TensorRT is not installed"),
           _rec("nasnet", "ios-sequential", 20.0, "sequential"), _rec("nasnet", "ios-both", 16.0, "both"),
           _rec("nasnet", "jax-xla", 19.0)]


@pytest.fixture
def window(tmp_path, monkeypatch):
    fake = tmp_path / "fake_sweep.py"
    fake.write_text(FAKE_SWEEP)
    monkeypatch.setenv("FAKE_RECORDS", json.dumps(RECORDS))
    monkeypatch.setattr(gh, "run_command", lambda sw, folder, rounds, max_time, resume:
                        [sys.executable, str(fake), "--models", ",".join(sw.models), "--frameworks",
                         ",".join(sw.frameworks) or "none", "--out", str(folder)] + (["--resume"] if resume else []))
    monkeypatch.setattr(gh, "doctor_command", lambda: [sys.executable, "-c", "print('doctor: cuda ok')"])
    monkeypatch.setattr(gh, "machine_facts", lambda env: {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580"})
    monkeypatch.setattr(gh, "_zoo", lambda: list(gh.PAPER_NETS))
    monkeypatch.setattr(gh, "REPORT_RESERVE_S", 1.0)
    monkeypatch.setattr(gh, "MIN_STEP_S", 1.0)
    monkeypatch.setattr(gh, "_stop", _quick_stop)
    out = tmp_path / "gpu-h100-2026-11-26"
    gh.write_report(tmp_path / "warm", gh.plan("h100", rest=()), echo=lambda s: None)  # imports paid before timing

    def run(seconds):
        args = gh.argparse.Namespace(wheels=str(tmp_path / "whl"), site=str(tmp_path / "site"), out=str(out),
                                     root=str(tmp_path), resume_from=None, profile_db=None, prune="auto", rounds=3,
                                     first_rounds=1, window=seconds)
        return gh.run_window(args)

    return run, out


def _quick_stop(proc):
    proc.kill()
    proc.wait()


def _no_temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


def test_a_window_that_ends_early_leaves_a_whole_report_and_the_next_resumes(window):
    run, out = window
    assert run(8.0) == 0  # nasnet's sweep sleeps past the window: stopped
    journal = json.loads((out / "window.json").read_text())
    steps = {s["step"]: s for s in journal["windows"][0]["steps"]}
    assert steps["doctor"]["rc"] == 0 and (out / "doctor.txt").read_text().startswith("doctor: cuda ok")
    assert steps["b1-graph-full-first"]["rc"] == 0
    assert steps["b1-graph-r1s3-first"]["stopped"] is True
    assert any(s.get("skipped", "").startswith("the window is spent") for s in journal["windows"][0]["steps"])
    readme = (out / "README.md").read_text()
    assert "| inception_v3 | 1 | full | 4.000 | 2.000 | 2.00x |" in readme
    assert "b1-graph-r1s3" in readme.split("## What is left")[1]
    assert json.loads((out / "headline.json").read_text())["rows"][0]["model"] == "inception_v3"
    assert _no_temporaries(out) == []
    # the next window: the finished steps are not run again, the stopped sweep resumes
    assert run(8.0) == 0
    calls = (out / "runs" / "graph-r1s3" / "calls.txt").read_text().splitlines()
    assert "--resume" not in calls[0] and "--resume" in calls[1]
    assert len((out / "runs" / "graph-full" / "calls.txt").read_text().splitlines()) >= 2
    journal = json.loads((out / "window.json").read_text())
    assert len(journal["windows"]) == 2 and journal["prune"] == [1, 3]
    assert "doctor" not in {s["step"] for s in journal["windows"][1]["steps"]}
    h = json.loads((out / "headline.json").read_text())
    nasnet = next(r for r in h["rows"] if r["model"] == "nasnet")
    assert nasnet["ios_both_ms"] == 16.0 and nasnet["search"] == "pruned r1s3"
    assert _no_temporaries(out) == []


def test_the_report_reads_like_the_headline(tmp_path):
    folder = tmp_path / "runs" / "graph-full"
    folder.mkdir(parents=True)
    recs = RECORDS + [_rec("inception_v3", "ios-both", 20.0, "both", batch=16),
                      _rec("inception_v3", "ios-sequential", 25.0, "sequential", batch=16),
                      _rec("inception_v3", "torch", 30.0, batch=16)]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    p = gh.plan("h100", rest=())
    h = gh.write_report(tmp_path, p, echo=lambda s: None)
    row = h["rows"][0]
    assert row["model"] == "inception_v3" and row["batch"] == 1
    assert row["schedule_gain"] == pytest.approx(2.0)
    assert row["best_peer"] == "torch-compile-cudagraphs" and row["vs_best_peer"] == pytest.approx(1.5)
    assert row["published_schedule_gain"] == pytest.approx(6.51 / 4.03)
    assert row["published_best_peer"] == "TVM-cuDNN" and row["published_vs_best_peer"] == pytest.approx(4.88 / 4.03)
    assert row["not_run"]["tensorrt"] == "skipped: TensorRT is not installed"
    assert row["utilization"]["IOS-Both"] == 40.0
    b16 = next(r for r in h["rows"] if r["batch"] == 16)
    assert b16["published_best_peer"] == "TensorRT" and b16["published_schedule_gain"] == pytest.approx(17.95 / 15.17)
    readme = (tmp_path / "README.md").read_text()
    assert "published (V100, not measured here)" in readme and "TensorRT is not installed" in readme
    assert "| 100 / 900 |" in readme  # GPU memory: the allocator's and NVML's view
    assert (tmp_path / "latency_vs_batch_inception_v3.png").read_bytes()[:4] == b"\x89PNG"
    goals = dict((g, v) for g, _, v in h["goals"])
    assert goals["IOS-Both (graph) vs the best GPU peer, batch 1"].startswith("inception_v3 1.50x")


def test_a_report_that_cannot_be_written_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    folder = tmp_path / "runs" / "graph-full"
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    p = gh.plan("h100", rest=())
    gh.write_report(tmp_path, p, echo=lambda s: None)
    before = (tmp_path / "README.md").read_bytes(), (tmp_path / "headline.json").read_bytes()
    (folder / "results.jsonl").write_text("")

    def broken(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(gh, "_markdown", broken)
    with pytest.raises(RuntimeError):
        gh.write_report(tmp_path, p, echo=lambda s: None)
    assert ((tmp_path / "README.md").read_bytes(), (tmp_path / "headline.json").read_bytes()) == before
    assert _no_temporaries(tmp_path) == []


def test_without_a_gpu_the_window_says_so_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gh, "machine_facts", lambda env: {"nvml": "NVMLError_LibraryNotFound"})
    args = gh.argparse.Namespace(wheels=str(tmp_path / "whl"), site=str(tmp_path / "site"), out=None,
                                 root=str(tmp_path / "results"), resume_from=None, profile_db=None, prune="auto",
                                 rounds=3, first_rounds=1, window=60.0)
    assert gh.run_window(args) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: no NVIDIA GPU here (NVMLError_LibraryNotFound)"
    assert not (tmp_path / "results").exists()


def test_a_previous_window_is_carried_in_once(tmp_path):
    prev, out = tmp_path / "prev", tmp_path / "out"
    (prev / "runs" / "graph-full").mkdir(parents=True)
    (prev / "runs" / "graph-full" / "results.jsonl").write_text("{}\n")
    (prev / "profiles.sqlite").write_bytes(b"db")
    (prev / "window.json").write_text('{"windows": [], "prune": null}')
    seen = []
    gh.carry_in(prev, out, seen.append)
    assert (out / "runs" / "graph-full" / "results.jsonl").read_text() == "{}\n"
    assert (out / "profiles.sqlite").read_bytes() == b"db" and len(seen) == 3
    (out / "profiles.sqlite").write_bytes(b"newer")
    gh.carry_in(prev, out, seen.append)  # what this window already has is never overwritten
    assert (out / "profiles.sqlite").read_bytes() == b"newer" and len(seen) == 3
