"""benchmarks/bench_gpu_search.py: its last line on the fake device, and its GPU path (the goal
table) run end to end with the fake device standing in for the GPU, on the small sample model."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from ios_core.measurement import gpu
from tests.conftest import ROOT
from tests.stream_fakes import TorchQueueDevice

LAST = re.compile(r"^per-stage overhead (\d+\.\d{3}) ms over (\d+) stages; NVML sessions (\d+); weight draws (\d+); "
                  r"plans reused (\d+) of (\d+); candidates timed (\d+)$")


@pytest.fixture
def bench():
    spec = importlib.util.spec_from_file_location("bench_gpu_search", ROOT / "benchmarks" / "bench_gpu_search.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_on_the_fake_device_it_ends_with_the_overhead_line(bench, capsys, monkeypatch):
    from ios_core import models

    small = models.get
    monkeypatch.setattr(bench.models, "get", lambda name, **kw: small(name, input_shape=(8, 12, 12)))
    assert bench.main(["--fake", "--models", "sample"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    m = LAST.match(out[-1])
    assert m, out[-1]
    assert int(m.group(2)) > 0 and int(m.group(3)) >= 1 and int(m.group(4)) > 0
    # searched twice: cold (no plan reused), then with only the plan cache warm (the geometries seen before
    # reused; a candidate schedule of the second search may merge convolutions into a geometry not seen yet)
    per = [tuple(map(int, re.search(r"plans reused (\d+) of (\d+)", line).groups())) for line in out
           if line.startswith("sample (fake device")]
    assert len(per) == 2 and per[0][0] == 0 and 0 < per[1][0] <= per[1][1]
    assert (int(m.group(5)), int(m.group(6))) == (per[1][0], per[0][1] + per[1][1])
    # each search timed its distinct candidates end to end (one identical to another is timed and counted once)
    per_search = [tuple(map(int, re.search(r"kept of (\d+) candidates timed \((\d+) considered\)", line).groups()))
                  for line in out if line.startswith("sample (fake device")]
    assert len(per_search) == 2 and all(1 <= timed <= considered == 5 for timed, considered in per_search)
    assert int(m.group(7)) == sum(timed for timed, _ in per_search)
    assert any(line.startswith("sample (fake device") and "stages measured as cuda-graph replay" in line
               for line in out)


def test_the_gpu_path_prints_the_goal_table(bench, capsys, monkeypatch):
    from ios_core import models

    monkeypatch.setattr(bench, "_device", lambda fake, seed=1: TorchQueueDevice(seed))
    monkeypatch.setattr(gpu, "cuda_missing", lambda cudnn=True: None)
    small, run_ms, side = models.get, bench.run_ms, bench.side_by_side  # a small sample, short runs
    monkeypatch.setattr(bench.models, "get", lambda name, **kw: small(name, input_shape=(8, 12, 12)))
    timed = []

    def attached(dev):
        """The device's plan cache still exists while the device times a schedule: a search's plan
        cache in a folder deleted at the search's end loses plan reuse silently."""
        store = dev.plans.store
        assert store is not None and Path(store.path).is_file(), f"plan cache {store and store.path} is gone"

    def checked_run_ms(graph, dev, cuda_graph):
        attached(dev)
        timed.append("run")
        return run_ms(graph, dev, cuda_graph, repeat=3)

    def checked_side(graphs, dev):
        attached(dev)
        timed.append(len(graphs))
        return side(graphs, dev, rounds=2, repeat=2)

    monkeypatch.setattr(bench, "run_ms", checked_run_ms)
    monkeypatch.setattr(bench, "side_by_side", checked_side)
    assert bench.main(["--models", "sample", "--pruned", "sample", "--pruned-rs", "1,2", "--warmup", "0",
                       "--repeat", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("GPU: ") and "clocks left alone" in out[0]
    assert LAST.match(out[-1]), out[-1]
    header = next(i for i, line in enumerate(out) if line.startswith("| network |"))
    assert "pruned r=1 s=2" in out[header] and "IOS-Both speedup (paper)" in out[header]
    row = out[header + 2].split("|")[1:-1]
    assert row[0].strip() == "sample" and len(row) == 15
    assert all(cell.strip() not in ("", "-") for cell in row if cell.strip() != "sample"), row
    assert any("only the plan cache warm" in line and "plans reused" in line for line in out)
    # a third, independent cold search; the two cold searches' schedules timed side by side
    indep = next(line for line in out if "an independent cold search" in line)
    assert "plans reused 0 of" in indep  # cold: its own plan cache
    assert timed.count(2) == 1 and timed[-1] == "run"  # the pruned schedule timed after it, still attached
    side_line = next(line for line in out if "timed side by side (2 rounds" in line or "timed side by side" in line)
    assert re.search(r"[\d.]+ / [\d.]+ \([\d.]+%\)$", side_line), side_line
    assert "two cold searches' IOS-Both ms, side by side" in out[header]
    assert re.fullmatch(r" [\d.]+ / [\d.]+ \([\d.]+%\) ", row[13]), row


def test_bad_arguments_are_one_line_and_exit_2(bench, capsys):
    for argv in (["--models", "nope"], ["--pruned-rs", "3"], ["--pruned-rs", "0,2"]):
        with pytest.raises(SystemExit) as e:
            bench.main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ")
