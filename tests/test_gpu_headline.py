"""benchmarks/gpu_headline.py without a GPU: only what a bare machine needs around the headline
experiment (tests/test_experiments_headline.py tests the experiment): a wheel too large for one
transfer split in parts and put together again, a missing part, a damaged wheel and one built for
another Python each one line naming it (the headline goes on without it), the window's one
command, and bad arguments."""

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
    text = gh.transfers(tmp_path)
    assert len(re.findall(r"\.part\dof3", text)) == 3 and "3 transfer(s)" in text and "parts.json" in text


def test_the_window_is_one_experiment_command_resumed_in_the_next(tmp_path):
    out = tmp_path / "headline"
    cmd = gh.headline_command(out, 512.7, ["--gpu", "h200"])
    assert cmd[1:8] == ["-m", "ios_bench", "experiment", "headline", "--device", "cuda", "--out"]
    assert "--deadline" in cmd and cmd[cmd.index("--deadline") + 1] == "512" and "--resume" not in cmd
    out.mkdir()
    (out / "experiment.json").write_text("{}")
    assert gh.headline_command(out, 300, [])[-1] == "--resume"
    env = gh.window_env(out, tmp_path / "site")
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(tmp_path / "site"), str(gh.ROOT)]
    assert env["IOS_BENCH_CACHE"] == str(out / "profiles.sqlite")


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


def test_the_dry_run_is_the_experiments_and_ends_with_its_one_line(tmp_path):
    import subprocess

    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_headline.py"), "--dry-run", "--wheels",
                        str(tmp_path), "--gpu", "h100"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.strip().splitlines()
    assert re.fullmatch(r"estimated duration \d+ s on NVIDIA H100", lines[-1]), lines[-1]
    assert "the batch-1 part" in p.stdout and "b1-graph-full" in p.stdout and "no wheels" in p.stdout
