"""benchmarks/gpu_fidelity.py on the fake CUDA device (its figures meaningless and labelled so): it
runs, prints per stage the model's figure, the stage alone, alone with a cold L2, inside the whole
replay and the gap before it, a diagnosis per schedule and the critical-path bound per network."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.conftest import ROOT


@pytest.fixture
def fidelity(monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_fidelity", ROOT / "benchmarks" / "gpu_fidelity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    small = module.models.get  # a small sample: CPU kernels stand in for the GPU
    monkeypatch.setattr(module.models, "get", lambda name, **kw: small(name, input_shape=(8, 12, 12)))
    monkeypatch.setattr(module, "REPLAYS", 3)
    return module


def test_it_prints_every_stage_a_diagnosis_and_the_bound_on_the_fake_device(fidelity, capsys):
    assert fidelity.main(["--fake", "--models", "sample"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("FAKE DEVICE") and "MEANINGLESS" in lines[0]
    titles = [i for i, line in enumerate(lines) if line.startswith("sample IOS-")]
    assert len(titles) == 2 and all("[fake device: meaningless]" in lines[i] for i in titles)
    for i in titles:
        n = int(re.search(r": (\d+) stages;", lines[i]).group(1))
        rows = [line.split("|")[1:-1] for line in lines[i + 3:i + 3 + n]]
        assert [int(r[0]) for r in rows] == list(range(n))
        for r in rows:  # model, alone, cold L2 always measured; in replay wherever the stage launches a kernel
            assert all(float(c.replace(",", "")) > 0 for c in r[2:5]), r
        assert any(r[5].strip() != "-" for r in rows)
        diag = lines[i + 3 + n + 1]
        assert diag.startswith("diagnosis: measured ") and ". Largest: " in diag
    bound = next(line for line in lines if line.startswith("critical-path bound [fake device: meaningless]: "))
    assert re.search(r"IOS-Both [\d.,]+ ms = [\d.]+x the bound; with the per-graph replay cost each isolated "
                     r"figure carries \([\d.,]+ ms\) counted once: [\d.,]+ ms, IOS-Both = [\d.]+x$", bound), bound
    assert "kept" in next(line for line in lines if line.startswith("## sample"))


def test_bad_arguments_are_one_line_and_exit_2(fidelity, capsys):
    for argv in (["--models", "nope"], ["--budget", "0"], ["--models", ","]):
        with pytest.raises(SystemExit) as e:
            fidelity.main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ")


def test_a_network_past_the_budget_is_skipped_with_a_line(fidelity, capsys, monkeypatch):
    clock = iter([0.0, 1000.0, 1000.0, 1000.0])
    monkeypatch.setattr(fidelity, "_now", lambda: next(clock))
    assert fidelity.main(["--fake", "--models", "sample", "--budget", "10"]) == 0
    out = capsys.readouterr().out
    assert "## sample: skipped (the budget of 10 s was spent: 1000 s)" in out
