"""``ios-bench doctor`` on a GPU, without one: its IOS paths (sequential, a forced parallel
schedule, CUDA-graph replay, a cost-model stage, a clock lock and reset) run in the doctor's
worker on the fake CUDA device and fake NVML (tests/gpu_doctor_plugin.py), on the coverage
graph, each printing one line against the oracle."""

from __future__ import annotations

import re
from pathlib import Path

from ios_core.measurement import gpu

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("sequential", "parallel schedule", "CUDA graph", "CUDA graph fp16", "CUDA graph bf16", "cost-model stage",
         "host overhead", "clock lock")


def _doctor(run_cli, monkeypatch, tmp_path, *args):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("IOS_BENCH_PLUGINS", "tests.gpu_doctor_plugin")
    monkeypatch.setenv("IOS_BENCH_SYSFS", str(tmp_path))  # the clock lock's machine-wide files
    monkeypatch.setattr(gpu, "gpu_missing", lambda: None)
    return run_cli(["doctor", "--device", "cuda", "--frameworks", "ios", *args])


def test_doctor_runs_every_ios_gpu_path_against_the_oracle(run_cli, monkeypatch, tmp_path):
    code, out, err = _doctor(run_cli, monkeypatch, tmp_path, "--lock-clocks")
    assert code == 0, (out, err)
    assert "cuda paths on coverage, batch 1, against the oracle:" in out
    rows = {}
    for line in out.splitlines():
        m = re.match(r"  ios (.+?)\s{2,}(ok|WRONG|FAIL|skip)\s+(.*)", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    assert set(rows) == set(PATHS), out
    for name, (status, detail) in rows.items():
        assert status == "ok", (name, detail)
        assert "max rel err" in detail
    assert re.search(r"(\d+) stream\(s\), (\d+) event", rows["parallel schedule"][1])
    streams = int(re.search(r"(\d+) stream\(s\)", rows["parallel schedule"][1]).group(1))
    assert streams >= 2 and "aligned copies" in rows["parallel schedule"][1]
    assert "replayed" in rows["CUDA graph"][1]
    # fp16 and bf16 (issue 46): the schedule replayed at that precision, checked at its bound
    assert "replayed, fp16 (bound 0.05, cuDNN HALF/FLOAT)" in rows["CUDA graph fp16"][1]
    assert "replayed, bf16 (bound 0.05, cuDNN BFLOAT16/FLOAT)" in rows["CUDA graph bf16"][1]
    assert "estimate" in rows["cost-model stage"][1]
    assert "locked (GPU 0 at 1410 MHz" in rows["clock lock"][1] and "reset ok" in rows["clock lock"][1]
    assert "SM clock locked at 1410 MHz (--lock-clocks)" in rows["clock lock"][1]  # its figure's clock state
    host = re.search(r"([\d.]+) us of host time per operator launch \((\d+) per run, no CUDA graph",
                     rows["host overhead"][1])
    assert host and float(host.group(1)) > 0 and int(host.group(2)) > 0, rows["host overhead"]
    for name in ("sequential", "CUDA graph", "host overhead"):  # every time says the clocks it ran under
        assert "clocks left alone (" in rows[name][1], (name, rows[name])


def test_doctor_leaves_clocks_alone_by_default(run_cli, monkeypatch, tmp_path):
    code, out, err = _doctor(run_cli, monkeypatch, tmp_path)
    assert code == 0, (out, err)
    assert re.search(r"ios clock lock\s+skip\s+not asked \(clocks are left alone unless --lock-clocks\)", out), out
    assert "locked" not in out.replace("clocks are left alone", "")


def test_doctor_fails_when_a_path_is_wrong(run_cli, monkeypatch, tmp_path):
    """The check can fail: a fake device whose pooling forgets count_include_pad."""
    monkeypatch.setenv("TEST_GPU_DOCTOR_BREAK", "1")
    code, out, err = _doctor(run_cli, monkeypatch, tmp_path)
    assert code == 1, out
    assert re.search(r"ios parallel schedule\s+WRONG", out), out
    assert re.search(r"ios clock lock\s+skip\s+not asked", out), out


def test_a_failing_path_keeps_its_traceback_in_the_report(run_cli, monkeypatch, tmp_path):
    """The worker's log lives in the doctor's temporary folder, gone when it ends: a path that
    raises, and a worker that fails, each show their traceback under their FAIL line."""
    monkeypatch.setenv("TEST_GPU_DOCTOR_BREAK", "raise")
    code, out, err = _doctor(run_cli, monkeypatch, tmp_path)
    assert code == 1, out
    lines = out.splitlines()
    fail = next(i for i, line in enumerate(lines) if re.match(r"  ios \S.*\s+FAIL\s+RuntimeError: the fake device's "
                                                                 r"pooling broke", line))
    shown = []
    for line in lines[fail + 1:]:
        if not line.startswith("      | "):
            break
        shown.append(line[8:])
    assert shown and shown[-1] == "RuntimeError: the fake device's pooling broke", shown
    assert any("in pool" in line for line in shown) and len(shown) <= 14
    monkeypatch.setenv("TEST_GPU_DOCTOR_BREAK", "crash")
    code, out, err = _doctor(run_cli, monkeypatch, tmp_path)
    assert code == 1 and re.search(r"  ios\s+FAIL\s+RuntimeError: the doctor's worker broke", out), out
    assert "      | RuntimeError: the doctor's worker broke" in out
    assert "      | Traceback (most recent call last):" in out


def test_a_precision_the_gpu_is_too_old_for_is_skipped_not_failed(run_cli, monkeypatch, tmp_path):
    """On a GPU of compute capability 7.5 (a T4) cuDNN has no bf16 convolution (PSEUDO_BFLOAT16_CONFIG needs
    8.0; the fake device refuses it as cuDNN would) and CupyDevice refuses to be built at bf16: the doctor's
    bf16 path is skipped with that reason and the doctor passes; fp16 still runs and is checked there."""
    monkeypatch.setenv("TEST_GPU_DOCTOR_CC", "75")
    code, out, err = _doctor(run_cli, monkeypatch, tmp_path)
    assert code == 0, out
    assert re.search(r"ios CUDA graph bf16\s+skip\s+not on this GPU: bf16 needs a GPU of compute capability 8.0 or "
                     r"later \(cuDNN's PSEUDO_BFLOAT16_CONFIG\); this one is 7.5", out), out
    assert re.search(r"ios CUDA graph fp16\s+ok\s+max rel err .*replayed, fp16", out), out
