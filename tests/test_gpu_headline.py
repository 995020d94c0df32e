"""benchmarks/gpu_headline.py without a GPU: the window's one command (its steps in order, a
report and an archive after each, the reserve before the deadline, resuming from the working
folder or a carried copy, a GPU that vanishes, a plan cache from another cuDNN, a step that would
outlive the command), the wheels a bare machine needs (a wheel too large for one transfer beside
the working tree split in parts and put together again, a missing part, a damaged wheel and one
built for another Python each one line naming it), and bad arguments; the whole window end to end
on the CPU (--fake). tests/test_experiments_headline.py tests the experiment."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
import sys
import zipfile

import pytest

from tests.conftest import ROOT
from tests.cuda_folders import cuda_headers, cuda_toolkit

_spec = importlib.util.spec_from_file_location("gpu_headline", ROOT / "benchmarks" / "gpu_headline.py")
gh = importlib.util.module_from_spec(_spec)
sys.modules["gpu_headline"] = gh
_spec.loader.exec_module(gh)

NEED = (("ios_bench_test_absent_module", "fake-pkg", "a test"),)


def _wheel(folder, name="fake_pkg-1.0-py3-none-any.whl", mib=2.5):
    """A real wheel (a zip) of about ``mib`` MiB of incompressible bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("ios_bench_test_absent_module/__init__.py", "X = 1\n")
        z.writestr("ios_bench_test_absent_module/blob.bin", os.urandom(int(mib * 2**20)))
        z.writestr("fake_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                   "Tag: py3-none-any\n")
        z.writestr("fake_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fake-pkg\nVersion: 1.0\n")
        z.writestr("fake_pkg-1.0.dist-info/RECORD", "")
    path = folder / name
    path.write_bytes(buf.getvalue())
    return path


def test_a_large_wheel_travels_in_parts_and_is_put_together_again(tmp_path):
    wheel = _wheel(tmp_path / "whl")
    whole = wheel.read_bytes()
    parts = gh.split_wheel(wheel, part_mib=1)
    assert [p.name for p in parts] == [f"{wheel.name}.part{i}of3" for i in (1, 2, 3)]
    assert not wheel.exists() and all(p.stat().st_size <= 2**20 for p in parts)
    manifest = json.loads((tmp_path / "whl" / f"{wheel.name}.parts.json").read_text())
    assert manifest["sha256"] == hashlib.sha256(whole).hexdigest() and manifest["size"] == len(whole)
    # here (--check): the parts are checked and stay parts
    lines, install, absent = gh.wheel_report(tmp_path / "whl", NEED, join=False)
    assert lines == ["missing: fake-pkg (import ios_bench_test_absent_module; a test): carried in parts, all of "
                     "them here"] and all(p.exists() for p in parts)
    # there: put together, checked, the parts removed, installable
    lines, install, absent = gh.wheel_report(tmp_path / "whl", NEED)
    assert install == [wheel] and wheel.read_bytes() == whole and not any(p.exists() for p in parts)
    assert absent == [] and "carried as fake_pkg-1.0-py3-none-any.whl" in lines[0]
    assert gh.wheel_problem(wheel) is None
    assert gh.install_wheels(install, tmp_path / "site") == []
    assert (tmp_path / "site" / "ios_bench_test_absent_module" / "__init__.py").is_file()
    assert gh.split_wheel(_wheel(tmp_path / "small", mib=0.1), part_mib=1) == []  # one transfer: left whole


def test_a_missing_part_or_a_damaged_wheel_is_one_line_and_the_headline_goes_on(tmp_path):
    folder = tmp_path / "whl"
    parts = gh.split_wheel(_wheel(folder), part_mib=1)
    parts[1].unlink()  # the second call never came
    lines, install, absent = gh.wheel_report(folder, NEED)
    assert install == [] and absent == ["fake-pkg"] and len(lines) == 1 and "\n" not in lines[0]
    assert "part fake_pkg-1.0-py3-none-any.whl.part2of3 not carried (2 of 3 here)" in lines[0]
    assert "the headline goes on without it" in lines[0]
    parts[1].write_bytes(b"\0" * parts[0].stat().st_size)  # a damaged part
    lines, install, _ = gh.wheel_report(folder, NEED)
    assert install == [] and "damaged, not installed" in lines[0] and parts[0].exists()
    bad = _wheel(tmp_path / "b")
    bad.write_bytes(bad.read_bytes()[:1000])  # a truncated wheel
    assert "damaged" in gh.wheel_problem(bad) and bad.name in gh.wheel_problem(bad)
    other = _wheel(tmp_path / "o", name="fake_pkg-1.0-cp27-cp27mu-manylinux1_x86_64.whl", mib=0.01)
    lines, install, _ = gh.wheel_report(tmp_path / "o", NEED)
    assert install == [] and "built for cp27" in lines[0] and other.name in lines[0]
    lines, _, absent = gh.wheel_report(tmp_path / "nothing", NEED)
    assert absent == ["fake-pkg"] and "NOT carried in" in lines[0]


def test_the_parts_travel_in_separate_transfers(tmp_path, monkeypatch):
    monkeypatch.setattr(gh, "CARRY_LIMIT_MIB", 1.5)
    gh.split_wheel(_wheel(tmp_path), part_mib=1)
    text = gh.transfers(tmp_path, tree=0.0)
    assert len(re.findall(r"\.part\dof3", text)) == 3 and "3 transfer(s)" in text and "parts.json" in text


def _git(root, *args):
    import subprocess

    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_wheel_parts_are_sized_from_the_limit_less_the_tree_that_travels_with_them(tmp_path, monkeypatch):
    """The device tool's 64 MiB count the working tree (tracked files, untracked ones git does not
    ignore, the carried paths) with the wheels: a part of the whole limit is refused."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / ".gitignore").write_text("ignored/\ncarried/\n")
    (root / "tracked.bin").write_bytes(b"\0" * 2**20)
    _git(root, "add", "tracked.bin", ".gitignore")
    (root / "untracked.bin").write_bytes(b"\0" * 2**19)  # travels: not ignored
    (root / "ignored").mkdir()
    (root / "ignored" / "big.bin").write_bytes(b"\0" * 2**21)  # stays here
    (root / "carried").mkdir()
    (root / "carried" / "c.bin").write_bytes(b"\0" * 2**18)  # travels when carried
    assert gh.tree_mib(root) == pytest.approx(1.5, abs=0.01)
    assert gh.tree_mib(root, carry=("carried",)) == pytest.approx(1.75, abs=0.01)
    assert gh.part_mib_for(10.0) == gh.CARRY_LIMIT_MIB - 10.0 - gh.MARGIN_MIB  # 64 MiB less the tree less a margin
    monkeypatch.setattr(gh, "CARRY_LIMIT_MIB", 3.0)
    whl = tmp_path / "whl"
    whl.mkdir()
    (whl / "a.whl.part1of2").write_bytes(b"\0" * int(1.2 * 2**20))
    (whl / "a.whl.part2of2").write_bytes(b"\0" * int(1.2 * 2**20))
    alone = gh.transfers(whl, tree=0.0)
    assert "1 transfer(s)" in alone  # 2.4 MiB fit 3 MiB alone
    beside = gh.transfers(whl, tree=1.5)  # but not beside 1.5 MiB of tree
    assert "2 transfer(s)" in beside and "1.5 MiB of 3 for wheels" in beside
    assert "TOO LARGE" in gh.transfers(whl, tree=2.0) and "a.whl.part1of2" in gh.transfers(whl, tree=2.0)


def test_a_newer_wheel_replaces_an_older_ones_files(tmp_path):
    """``pip install --target`` without ``--upgrade`` keeps what an older wheel installed there."""
    site = tmp_path / "site"
    old = _wheel(tmp_path / "v1", mib=0.01)
    assert gh.install_wheels([old], site) == []
    new = tmp_path / "v2" / "fake_pkg-2.0-py3-none-any.whl"
    new.parent.mkdir()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("ios_bench_test_absent_module/__init__.py", "X = 2\n")
        z.writestr("fake_pkg-2.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                   "Tag: py3-none-any\n")
        z.writestr("fake_pkg-2.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fake-pkg\nVersion: 2.0\n")
        z.writestr("fake_pkg-2.0.dist-info/RECORD", "")
    new.write_bytes(buf.getvalue())
    assert gh.install_wheels([new], site) == []
    assert (site / "ios_bench_test_absent_module" / "__init__.py").read_text() == "X = 2\n"


def test_the_headline_step_is_one_experiment_command_resumed_in_the_next(tmp_path):
    out = tmp_path / "headline"
    cmd = gh.headline_command(out, 512.7, ["--gpu", "h200"])
    assert cmd[1:8] == ["-m", "ios_bench", "experiment", "headline", "--device", "cuda", "--out"]
    assert "--deadline" in cmd and cmd[cmd.index("--deadline") + 1] == "512" and "--resume" not in cmd
    out.mkdir()
    (out / "experiment.json").write_text("{}")
    assert gh.headline_command(out, 300, [])[-1] == "--resume"
    env = gh.window_env(tmp_path, tmp_path / "site")
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(tmp_path / "site"), str(gh.ROOT)]
    assert env["IOS_BENCH_CACHE"] == str(tmp_path / "profiles.sqlite")  # in the working folder, packed


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
    monkeypatch.setattr(gh, "KILL_AFTER_S", 1.0)
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


def test_a_plan_cache_from_another_cudnn_is_one_line(tmp_path):
    from ios_core.cost.cache import CudnnPlanCache

    db = tmp_path / "profiles.sqlite"
    assert gh.plan_cache_problem(db, "9.19.0") is None  # nothing yet
    cache = CudnnPlanCache({"gpu": "NVIDIA H200", "cudnn": "9.10.2"}, db)
    cache.put("conv a", {"plan": 1})
    cache.put("conv b", {"plan": 2})
    cache.close()
    line = gh.plan_cache_problem(db, "9.19.0")
    assert line == (f"plan cache {db}: 2 plan(s) from cuDNN 9.10.2, this machine has cuDNN 9.19.0: not used here "
                    "(rebuilt and stored under this cuDNN)")
    assert gh.plan_cache_problem(db, "9.10.2") is None


def test_a_step_dies_with_the_window_and_takes_sigint_even_when_the_window_ignores_it(tmp_path):
    """The step runs in its own session (so its group can be killed): without a parent-death
    signal it would outlive a killed window and keep the GPU busy into the next call; and an
    ignored SIGINT would be inherited, turning the window's interrupt into a 30 s wait for SIGKILL."""
    import signal
    import subprocess
    import time

    pid_file = tmp_path / "child.pid"
    child = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    parent = (f"import importlib.util, sys, signal\nsys.path.insert(0, {str(ROOT)!r})\n"
              f"spec = importlib.util.spec_from_file_location('g', {str(ROOT / 'benchmarks' / 'gpu_headline.py')!r})\n"
              "g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)\n"
              f"print(g.run_until([sys.executable, '-c', {child!r}], {{}}, 120))\n")
    p = subprocess.Popen([sys.executable, "-c", parent])
    try:
        for _ in range(200):
            if pid_file.is_file() and pid_file.read_text():
                break
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        p.kill()  # the window killed outright (the device tool's end of a command)
        p.wait()
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the step outlived the window that started it")
    finally:
        p.kill()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a window started with SIGINT ignored
    try:
        t0 = time.monotonic()
        rc = gh.run_until([sys.executable, "-c", "import time\ntime.sleep(60)\n"], dict(os.environ), 1.0)
    finally:
        signal.signal(signal.SIGINT, old)
    assert rc == -signal.SIGINT and time.monotonic() - t0 < gh.KILL_AFTER_S  # SIGINT ended it, not SIGKILL


@pytest.mark.parametrize("argv,message", [(["--deadline", "5", "--out", "x"], "bad --deadline 5"),
                                          (["--part-mib", "64"], "bad --part-mib 64"),
                                          ([], "--out is required")])
def test_bad_arguments_are_one_line(capsys, argv, message):
    assert gh.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_step_that_runs_past_the_window_is_interrupted_then_killed(monkeypatch):
    import time

    t0 = time.monotonic()
    code = "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    raise SystemExit(130)\n"
    assert gh.run_until([sys.executable, "-c", code], dict(os.environ), 1.0) == 130  # SIGINT: the ^C path
    monkeypatch.setattr(gh, "KILL_AFTER_S", 1.0)
    stubborn = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)\n"
    assert gh.run_until([sys.executable, "-c", stubborn], dict(os.environ), 1.0) == -9  # then SIGKILL
    assert time.monotonic() - t0 < 30
    assert gh.run_until([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ), 30) == 3


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
                        "--work", str(work), "--deadline", "60", "--wheels", str(tmp_path / "none")],
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


def test_tvm_is_pointed_at_a_cuda_folder_with_its_headers(tmp_path, monkeypatch):
    """TVM's own pick (here a wrapper nvcc outside the CUDA folder, as on the development machines)
    lacks the headers: CUDA_HOME, /usr/local/cuda, the machine's CUDA 13 wheels, then the carried header
    wheels are tried, and the steps get CUDA_PATH; a CUDA_PATH already set is left alone."""
    import site

    from adapters import tvm as tvm_adapter

    wrap = tmp_path / "wrap" / "bin"
    wrap.mkdir(parents=True)
    (wrap / "nvcc").write_text("#!/bin/sh\nexec /opt/cuda/bin/nvcc \"$@\"\n")
    (wrap / "nvcc").chmod(0o755)
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(tmp_path / "site-packages")])
    monkeypatch.setattr(tvm_adapter, "DEFAULT_CUDA", tmp_path / "usr-local-cuda")
    env = {"PATH": str(wrap)}
    dest = tmp_path / "made"
    assert gh.tvm_cuda_path({**env, "CUDA_PATH": "/x"}, None, dest) == (
        None, "CUDA_PATH=/x is set here: TVM uses it, left as it is")
    path, why = gh.tvm_cuda_path(env, None, dest)
    assert path is None and why.startswith(f"TVM's own pick, {tmp_path / 'wrap'} (nvcc on PATH ({wrap / 'nvcc'})), "
                                           "lacks cuda_runtime.h, ")
    assert "no CUDA folder here or carried has them (carry nvidia-cuda-runtime and nvidia-cuda-cccl" in why
    # the carried header wheels' include folder: a CUDA folder made of it
    carried = cuda_headers(tmp_path / "carried" / "nvidia" / "cu13" / "include")
    path, why = gh.tvm_cuda_path(env, carried, dest)
    assert path and tvm_adapter.missing_headers(gh.Path(path), "fp16") == [] and f"made of {carried}" in why
    # the machine's own CUDA 13 wheels come before the carried ones, if they hold CCCL too
    own = cuda_headers(tmp_path / "site-packages" / "nvidia" / "cu13" / "include")
    path, why = gh.tvm_cuda_path(env, carried, dest)
    assert f"made of {own}: this machine's CUDA 13 wheels" in why
    # a toolkit at /usr/local/cuda comes before those; CUDA_HOME before it
    cuda_headers(tmp_path / "usr-local-cuda" / "include")  # CCCL in include/cccl only: TVM does not look there
    assert gh.tvm_cuda_path(env, carried, dest)[0] != str(tmp_path / "usr-local-cuda")
    (tmp_path / "usr-local-cuda" / "include").rename(tmp_path / "old")
    cuda_toolkit(tmp_path / "usr-local-cuda")
    assert gh.tvm_cuda_path(env, carried, dest)[0] == str(tmp_path / "usr-local-cuda")
    cuda_toolkit(tmp_path / "home")
    path, why = gh.tvm_cuda_path({**env, "CUDA_HOME": str(tmp_path / "home")}, carried, dest)
    assert path == str(tmp_path / "home") and why.endswith("(CUDA_HOME has them)")
    # TVM's own pick holding them: nothing set
    cuda_toolkit(tmp_path / "wrap")
    assert gh.tvm_cuda_path(env, carried, dest) == (None, f"TVM finds its CUDA headers in {tmp_path / 'wrap'} "
                                                          f"(nvcc on PATH ({wrap / 'nvcc'}))")


def _header_wheel(folder, dist, files):
    folder.mkdir(parents=True, exist_ok=True)
    name = dist.replace("-", "_")
    path = folder / f"{name}-13.0.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for f in files:
            z.writestr(f"nvidia/cu13/include/{f}", "")
        z.writestr(f"{name}-13.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                    "Tag: py3-none-any\n")
        z.writestr(f"{name}-13.0.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: 13.0.0\n")
        z.writestr(f"{name}-13.0.0.dist-info/RECORD", "")
    return path


def test_the_carried_header_wheels_are_installed_apart_and_make_tvms_cuda_folder(tmp_path):
    wheels = tmp_path / "whl"
    assert gh.install_header_wheels(wheels, tmp_path / "h") == (None, [])  # none carried
    _header_wheel(wheels, "nvidia-cuda-runtime", ["cuda_runtime.h", "cuda_fp16.h"])
    assert gh.install_header_wheels(wheels, tmp_path / "h")[0] == tmp_path / "h" / "nvidia" / "cu13" / "include"
    _header_wheel(wheels, "nvidia-cuda-cccl", [f"cccl/cuda/std/{h}" for h in ("cstdint", "type_traits", "limits")])
    include, problems = gh.install_header_wheels(wheels, tmp_path / "h")
    assert problems == [] and (include / "cccl" / "cuda" / "std" / "cstdint").is_file()
    from adapters import tvm as tvm_adapter

    made = tvm_adapter.cuda_folder_from(include, tmp_path / "cuda")
    assert tvm_adapter.missing_headers(made, "fp16") == []


def test_the_steps_get_the_cuda_path_made_for_tvm(tmp_path, monkeypatch, capsys):
    seen = tmp_path / "cuda_path.txt"
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(gh, "tvm_cuda_path", lambda env, carried, dest: (str(tmp_path / "cuda"), "made for the test"))
    doctor = f"import os\nopen({str(seen)!r}, 'w').write(os.environ['CUDA_PATH'])\n"
    _stub_steps(monkeypatch, tmp_path, {"doctor": doctor})
    _window(tmp_path)
    assert seen.read_text() == str(tmp_path / "cuda")
    assert "tvm's CUDA compile: made for the test" in capsys.readouterr().out.splitlines()
