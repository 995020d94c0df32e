"""Real architectures: torchvision's classification families, built with random weights,
exported to ONNX by torch and imported; the imported graph reproduces the source network
(relative error <= 1e-4). Then the whole pipeline on imported models: `ios-bench import`,
`ios-bench run --models net.onnx` / `imported.json` (every framework, every IOS schedule, the
output checked against the oracle and onnxruntime on the original file), optimize, profile,
show, export.

Small images keep three families in the default run; every family at its real size, and the
full-pipeline sweeps, are slow tests (``pytest -m slow tests/test_frontend_torchvision.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tests.torchvision_models as tv

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ios_core import reference  # noqa: E402
from ios_core.frontend import onnx as frontend  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _import_and_compare(name: str, image_size: int, batch: int = 2, tmp_path=None):
    import torch

    net = tv.build(name)
    data = tv.export(net, image_size, path=None if tmp_path is None else tmp_path / f"{name}.onnx")
    graph = frontend.load(data, name=name)
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((batch, 3, image_size, image_size),
                                                                   dtype=np.float32))
    with torch.no_grad():
        want = net(x).numpy()
    got = reference.run(graph, x.numpy()).reshape(want.shape)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    assert err <= 1e-4, f"{name}: max rel error {err:.2e}"
    return graph


@pytest.mark.parametrize("name", ["resnet18", "shufflenet_v2_x0_5"])
def test_small_images_import_exactly(name):
    graph = _import_and_compare(name, 64)
    kinds = {op.TYPE for op in graph.operators()}
    assert "conv" in kinds and "linear" in kinds
    if name == "shufflenet_v2_x0_5":
        assert "shuffle" in kinds


@pytest.mark.slow
@pytest.mark.parametrize("name", list(tv.FAMILIES))
def test_family_imports_exactly(name):
    _import_and_compare(name, tv.FAMILIES[name][1])


# ---- the pipeline ------------------------------------------------------------------------------------
def _cli(args, cwd, timeout=3000):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "ios_bench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]


FAST = ["--warmup", "0", "--repeat", "1", "--min-sample-ms", "0", "--no-progress", "--no-report", "--rounds", "1",
        "--ios-providers", "torch"]


def _available(names):
    import adapters

    return [n for n in names if n in adapters.names() and adapters.get(n).available() is None]


def _assert_all_correct(records, expect_cells):
    assert len(records) == expect_cells, [r.get("cell") for r in records]
    for r in records:
        assert r["status"] == "ok", (r["cell"], r.get("reason"), r.get("stderr_tail", "")[-2000:])
        assert r["check"]["passed"], (r["cell"], r["check"])
        assert r["check"]["source"]["passed"], (r["cell"], r["check"]["source"])


@pytest.mark.slow
def test_run_imported_onnx_with_schedules(tmp_path, run_cli):
    """`run --models net.onnx` on a small torchvision network: a framework and IOS schedules,
    each checked against the oracle and onnxruntime on the original file; then import, show,
    optimize, profile and export on the same file. (The default run has the same on a tiny
    ONNX model: tests/test_frontend_onnx.py.)"""
    net = tv.build("resnet18")
    onnx_path = tmp_path / "resnet18.onnx"
    tv.export(net, 32, path=onnx_path)
    frameworks = _available(["onnxruntime"]) or ["torch"]
    p = _cli(["run", "--models", str(onnx_path), "--batch", "1,2", "--frameworks", ",".join(frameworks),
              "--schedules", "sequential,greedy", "--out", "runs/r", *FAST], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    _assert_all_correct(_records(tmp_path / "runs" / "r"), 2 * (len(frameworks) + 2))
    ref = json.loads((tmp_path / "runs" / "r" / "refs" / "resnet18-b2.json").read_text())
    assert ref["source_check"]["passed"] and ref["source"] == str(onnx_path)

    code, out, err = run_cli(["import", str(onnx_path), "-o", str(tmp_path / "r18.json")])
    assert code == 0, err
    code, out, err = run_cli(["show", str(tmp_path / "r18.json")])
    assert code == 0 and "resnet18" in out
    sched = tmp_path / "sched.json"
    code, out, err = run_cli(["optimize", "--model", str(onnx_path), "--batch", "1", "--strategy", "both",
                              "-o", str(sched)])
    assert code == 0, err
    code, out, err = run_cli(["profile", "--model", str(onnx_path), "--schedule", str(sched), "--repeat", "2",
                              "--warmup", "0", "--no-show-graph"])
    assert code == 0, err
    code, out, err = run_cli(["export", str(sched), "-o", str(tmp_path / "again.onnx"), "--dynamic-batch"])
    assert code == 0, err
    # the re-exported schedule computes what the original file computes, with the file's weights
    x = np.random.default_rng(3).standard_normal((2, 3, 32, 32)).astype(np.float32)
    a = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    b = ort.InferenceSession(str(tmp_path / "again.onnx"), providers=["CPUExecutionProvider"]).run(None,
                                                                                                   {"input": x})[0]
    np.testing.assert_allclose(b.reshape(a.shape), a, rtol=0, atol=1e-4 * np.abs(a).max())


FRAMEWORKS = ["torch", "torch-compile", "tensorflow", "tensorflow-xla", "onnxruntime", "onnxruntime-parallel",
              "openvino", "tvm"]
SCHEDULES = ["sequential", "greedy", "merge", "parallel", "both"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "googlenet", "mobilenet_v2", "efficientnet_b0"])
def test_every_framework_and_schedule_on_imported_network(tmp_path, name):
    """The issue's bar: every framework and IOS schedule computes the imported network's output
    (the file's weights), checked against the oracle and onnxruntime on the original file;
    `--models net.onnx` directly and `--models imported.json` after `ios-bench import`. Images
    are 96x96 to keep the sweep short: the architectures are the full ones."""
    net = tv.build(name)
    onnx_path = tmp_path / f"{name}.onnx"
    tv.export(net, 96, path=onnx_path)
    p = _cli(["import", str(onnx_path), "-o", str(tmp_path / "imported.json"), "--name", f"{name}-json"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    frameworks = _available(FRAMEWORKS)
    p = _cli(["run", "--models", f"{onnx_path},{tmp_path / 'imported.json'}", "--batch", "1,2", "--frameworks",
              ",".join(frameworks), "--schedules", ",".join(SCHEDULES), "--out", "runs/all", *FAST,
              "--timeout", "1200"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    _assert_all_correct(_records(tmp_path / "runs" / "all"), 2 * 2 * (len(frameworks) + len(SCHEDULES)))
