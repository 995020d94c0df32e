"""benchmarks/gpu_headline.py without a GPU: the window's one command (its steps in order, a
report and an archive after each, the reserve before the deadline, resuming from the working
folder or a carried copy, a GPU that vanishes, the CUDA folder made for TVM given to the steps),
the dry run's steps, estimates and call, and bad arguments; the whole window end to end on the CPU
(--fake). Its parts have their own tests: tests/test_window_wheels.py (the wheels a bare machine
needs), tests/test_window_steps.py (a step's command, one that would outlive the window),
tests/test_window_machine.py (the GPU, the plan cache, TVM's CUDA folder); tests/test_window_records.py
(the state, report and archive); tests/test_experiments_headline.py tests the experiment."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

import pytest

from benchmarks import _window_steps as ws
from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("gpu_headline", ROOT / "benchmarks" / "gpu_headline.py")
gh = importlib.util.module_from_spec(_spec)
sys.modules["gpu_headline"] = gh
_spec.loader.exec_module(gh)


def _stub_steps(monkeypatch, tmp_path, codes: dict, rooms: dict | None = None):
    """Each step a small Python program: ``codes[name]`` (its source), and the room it was given."""
    ran = tmp_path / "ran.txt"

    def command(name, work, room, fake, extra):
        if rooms is not None:
            rooms[name] = room
        src = f"open({str(ran)!r}, 'a').write({name!r} + '\\n')\n" + codes.get(name, "")
        return [sys.executable, "-c", src]

    monkeypatch.setattr(gh, "step_command", command)
    # the toolchain's facts (a process importing TVM, a few seconds) are asked for real in the end-to-end test
    monkeypatch.setattr(gh, "toolchain_facts", lambda env: ["stubbed"])
    return ran


def _window(tmp_path, *extra, deadline="120"):
    return gh.main(["--fake", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--deadline", deadline,
                    "--wheels", str(tmp_path / "nowheels"), *extra])


def test_the_window_runs_its_steps_in_order_reports_after_each_and_resumes_from_a_carried_copy(tmp_path, monkeypatch,
                                                                                               capsys):
    import tarfile

    out, work = tmp_path / "out", tmp_path / "work"
    # the fidelity step sees the doctor reported done in the output folder already: a report after every step
    seen = f"import sys\nsys.exit(0 if '| doctor | done' in open({str(out / 'window.md')!r}).read() else 5)\n"
    first_headline = "import sys\nprint('headline stopped at its deadline')\nsys.exit(3)\n"
    ran = _stub_steps(monkeypatch, tmp_path, {"fidelity": seen, "headline": first_headline})
    # what a step leaves in the working folder: records and logs travel back, caches and heavy weights do not
    (work / "headline" / "runs" / "r" / "cache").mkdir(parents=True)
    (work / "headline" / "runs" / "r" / "cache" / "kernel.bin").write_bytes(b"\0" * 1000)
    (work / "headline" / "runs" / "r" / "results.jsonl").write_text("{}\n")
    sched = work / "headline" / "runs" / "r" / "schedules"
    sched.mkdir()
    (sched / "m-both.json").write_text("{}")
    (sched / "m-both.npz").write_bytes(os.urandom(2 * 2**20))
    assert _window(tmp_path) == 3  # the headline continues in the next call
    assert ran.read_text().split() == ["doctor", "fidelity", "search", "headline"]
    state = json.loads((out / "window.json").read_text())
    assert {k: v["status"] for k, v in state["steps"].items()} == {"doctor": "done", "fidelity": "done",
                                                                   "search": "done", "headline": "stopped"}
    with tarfile.open(out / "window.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"logs/doctor.txt", "logs/headline.txt", "window.json", "window.md",
            "headline/runs/r/results.jsonl"} <= names
    assert not any("cache" in n.split("/")[:-1] or n.endswith(".npz") or n.endswith("m-both.json") for n in names)
    assert "headline stopped at its deadline" in (work / "logs" / "headline.txt").read_text()
    assert len(list(out.iterdir())) <= 8
    text = capsys.readouterr().out
    assert "left for the next call: headline" in text and 'carry=[".whl"' in text
    # the next call on a fresh machine: the working folder is gone, the archive was carried back
    carried = tmp_path / "carried" / "window.tar.gz"
    carried.parent.mkdir()
    carried.write_bytes((out / "window.tar.gz").read_bytes())
    import shutil

    shutil.rmtree(work)
    shutil.rmtree(out)
    ran.unlink()
    _stub_steps(monkeypatch, tmp_path, {})
    assert _window(tmp_path, "--resume-from", str(carried)) == 0
    assert ran.read_text().split() == ["headline"]  # what was done stays done
    state = json.loads((out / "window.json").read_text())
    assert len(state["calls"]) == 2 and state["steps"]["headline"]["status"] == "done"
    assert f"resumed from the carried copy {carried}" in state["calls"][1]["lines"][0]
    assert (work / "logs" / "doctor.txt").is_file()  # the first call's logs came back with it
    assert "left alone" in (out / "window.md").read_text()


def test_the_window_keeps_its_reserve_and_interrupts_a_step_before_its_end(tmp_path, monkeypatch):
    """The headline gets the window less the reserve as its own deadline; one that runs over gets
    SIGINT before the window's end, leaving time to pack, and the window ends inside its deadline."""
    import argparse
    import time

    monkeypatch.setattr(gh, "RESERVE_S", 3.0)
    monkeypatch.setattr(gh, "PACK_S", 1.0)
    monkeypatch.setattr(gh, "KILL_AFTER_S", 1.0)  # the window's budget for a step
    monkeypatch.setattr(ws, "KILL_AFTER_S", 1.0)  # and run_until's wait between SIGINT and SIGKILL
    monkeypatch.setattr(gh, "FAKE_MIN_HEADLINE_S", 0.5)
    stamp = tmp_path / "interrupted.txt"
    rooms: dict = {}
    over = (f"import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
            f"    open({str(stamp)!r}, 'w').write(repr(time.monotonic()))\n    raise SystemExit(130)\n")
    _stub_steps(monkeypatch, tmp_path, {"headline": over}, rooms)
    args = argparse.Namespace(out=str(tmp_path / "out"), work=str(tmp_path / "work"), resume_from=None, deadline=8.0,
                              wheels=str(tmp_path / "none"), site=str(tmp_path / "site"), fake=True)
    t0 = time.monotonic()
    assert gh.run_window(args, []) == 3
    ended = time.monotonic()
    assert rooms["headline"] <= 8.0 - 3.0 and rooms["headline"] > 0  # the window less the reserve
    assert float(stamp.read_text()) <= t0 + 8.0 - gh.PACK_S + 0.5  # interrupted before the window's end
    assert ended - t0 < 8.0 + 1.0
    state = json.loads((tmp_path / "out" / "window.json").read_text())
    assert state["steps"]["headline"]["status"] == "stopped" and state["steps"]["headline"]["rc"] == 130


def test_a_step_stopped_in_two_windows_is_not_started_a_third_time(tmp_path, monkeypatch):
    import argparse

    monkeypatch.setattr(gh, "RESERVE_S", 2.0)
    monkeypatch.setattr(gh, "PACK_S", 0.5)
    monkeypatch.setattr(gh, "KILL_AFTER_S", 0.5)
    monkeypatch.setattr(ws, "KILL_AFTER_S", 0.5)
    ran = _stub_steps(monkeypatch, tmp_path, {"fidelity": "import time\ntime.sleep(60)\n"})
    args = argparse.Namespace(out=str(tmp_path / "out"), work=str(tmp_path / "work"), resume_from=None, deadline=4.0,
                              wheels=str(tmp_path / "none"), site=str(tmp_path / "site"), fake=True)
    for _ in range(3):
        gh.run_window(args, [])
    state = json.loads((tmp_path / "out" / "window.json").read_text())
    assert state["steps"]["fidelity"]["status"] == "failed" and "twice" in state["steps"]["fidelity"]["note"]
    assert ran.read_text().split().count("fidelity") == 2 and "search" in ran.read_text().split()


def test_a_gpu_that_vanishes_mid_window_is_one_line_and_the_window_goes_on(tmp_path, monkeypatch, capsys):
    probes = iter([{"missing": None, "name": "GPU", "cudnn": "9", "clocks": "clocks left alone"},
                   {"missing": None}, {"missing": "NVMLError_GpuIsLost: GPU is lost"}])
    monkeypatch.setattr(gh, "probe_gpu", lambda fake, env=None: next(probes, {"missing": "gone"}))
    ran = _stub_steps(monkeypatch, tmp_path, {})
    assert _window(tmp_path) == 3
    assert ran.read_text().split() == ["doctor", "fidelity"]
    text = capsys.readouterr().out
    gone = [line for line in text.splitlines() if "vanished" in line]
    assert gone == ["the GPU vanished before step search (NVMLError_GpuIsLost: GPU is lost): the steps left wait for "
                    "the next call"]
    state = json.loads((tmp_path / "out" / "window.json").read_text())
    assert state["steps"]["search"]["status"] == "waiting" and state["steps"]["headline"]["status"] == "waiting"
    assert (tmp_path / "out" / "window.tar.gz").is_file()


@pytest.mark.parametrize("argv,message", [(["--deadline", "5", "--out", "x"], "bad --deadline 5"),
                                          (["--part-mib", "64"], "bad --part-mib 64"),
                                          ([], "--out is required")])
def test_bad_arguments_are_one_line(capsys, argv, message):
    assert gh.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_the_dry_run_prints_the_steps_in_order_with_estimates_and_the_call_to_make(tmp_path):
    import subprocess

    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_headline.py"), "--dry-run", "--wheels",
                        str(tmp_path), "--gpu", "h100"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.strip().splitlines()
    steps = [re.match(r"  (\d)\. (\w+) +(\d+) s  ", x) for x in lines]
    steps = [(int(m.group(1)), m.group(2), int(m.group(3))) for m in steps if m]
    assert [s[1] for s in steps] == ["doctor", "fidelity", "search", "headline"] and all(s[2] > 0 for s in steps)
    text = p.stdout
    assert "measured (gpu-h200-2026-11-28: window.json's doctor step)" in text and "assumed" in text
    assert "no wheels" in text
    # the wheels the tvm peer's CUDA compile needs, each with its size, before they are fetched
    for spec, mib in (("cuda-bindings==13.0.3", 11.6), ("nvidia-cuda-runtime==13.0.96", 2.1),
                      ("nvidia-cuda-cccl==13.0.85", 3.0)):
        assert f"for tvm on cuda: {spec}, {mib} MiB (as downloaded 2026-11-27), not fetched yet" in text
    assert re.search(r"doctor +36 s", text)  # the newest committed window's doctor step (35.8 s)
    assert re.search(r"fidelity +46 s .*measured", text) and re.search(r"search +118 s .*measured", text)
    # the headline's batch-1 part includes its fp16 step (issue 46), costed as fp32's figures
    assert "fp16 step (b1-fp16-graph-full, b1-fp16-graph-r1s3) costed as fp32's figures, assumed" in text
    call = next(x for x in lines if x.strip().startswith("run("))
    assert '--out $OUT --deadline 540' in call and '"carry": ' not in call and 'carry=[".whl"' in call
    assert "timeout_s=600" in call
    m = re.fullmatch(r"estimated duration (\d+) s on NVIDIA H100 \(([\d.]+) windows of 540 s\)", lines[-1])
    assert m and abs(int(m.group(1)) - sum(s[2] for s in steps)) <= 4  # the steps' sum (each rounded)


def test_the_whole_window_on_the_cpu_end_to_end(tmp_path):
    """The one command as a lent window runs it, the steps' real programs in their CPU forms (the
    fake device, the quick headline): its first call on a GPU is not its first run."""
    import subprocess
    import tarfile

    out, work = tmp_path / "out", tmp_path / "work"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_headline.py"), "--fake", "--out", str(out),
                        "--work", str(work), "--deadline", "120", "--wheels", str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode in (0, 3), p.stdout[-3000:] + p.stderr[-3000:]
    # before the steps: where TVM's CUDA compile finds its headers, and the toolchain's facts
    assert re.search(r"^tvm's CUDA compile: ", p.stdout, re.M)
    for fact in ("nvcc on PATH: ", "CUDA_PATH: ", "CUDA_HOME: ", "/usr/local/cuda/include: ", "cuda_fp16.h found in: ",
                 "cuda-bindings: ", "TVM's CUDA compile at fp32: ", "TVM's CUDA compile at fp16: "):
        assert re.search("^toolchain: " + re.escape(fact), p.stdout, re.M), fact
    state = json.loads((out / "window.json").read_text())
    for name in ("doctor", "fidelity", "search"):
        assert state["steps"][name]["status"] == "done", (name, p.stdout[-3000:])
    assert state["steps"]["headline"]["status"] in ("done", "stopped", "waiting")
    assert "ios " in (work / "logs" / "doctor.txt").read_text()
    assert "critical-path bound" in (work / "logs" / "fidelity.txt").read_text() or \
        "## sample: failed" in (work / "logs" / "fidelity.txt").read_text()
    assert "per-stage overhead" in (work / "logs" / "search.txt").read_text()
    with tarfile.open(out / "window.tar.gz") as tar:
        assert {"logs/doctor.txt", "logs/fidelity.txt", "logs/search.txt", "window.md"} <= set(tar.getnames())
    assert {f.name for f in out.iterdir()} <= {"headline-report.md", "window.json", "window.md", "window.tar.gz"}


# ---- the tvm peer's CUDA compile on the GPU machine (adapters/tvm.py: what TVM 0.27 needs) ----------


def test_the_steps_get_the_cuda_path_made_for_tvm(tmp_path, monkeypatch, capsys):
    seen = tmp_path / "cuda_path.txt"
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(gh, "tvm_cuda_path", lambda env, carried, dest: (str(tmp_path / "cuda"), "made for the test"))
    doctor = f"import os\nopen({str(seen)!r}, 'w').write(os.environ['CUDA_PATH'])\n"
    _stub_steps(monkeypatch, tmp_path, {"doctor": doctor})
    _window(tmp_path)
    assert seen.read_text() == str(tmp_path / "cuda")
    assert "tvm's CUDA compile: made for the test" in capsys.readouterr().out.splitlines()
