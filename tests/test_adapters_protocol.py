"""The adapter protocol around the conversions: lazy imports, availability reasons, the CLI's
framework listing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import adapters
from ios_bench.cli import main
from tests.conftest import ROOT

MINE = ["torch", "torch-compile", "tensorflow", "tensorflow-xla", "tflite", "onnxruntime", "onnxruntime-parallel",
        "openvino"]
HEAVY = ["tensorflow", "tvm", "torch._dynamo", "torch._inductor", "onnxruntime", "openvino", "onnx"]


def test_importing_adapters_imports_no_framework():
    """``import adapters``, listing names and fetching the adapter objects (without building)
    must not import TensorFlow, TVM, torch.compile's machinery, ONNX Runtime or OpenVINO."""
    code = textwrap.dedent(f"""
        import json, sys
        import adapters
        names = adapters.names()
        for name in {MINE!r}:
            adapters.get(name)
        print(json.dumps({{"names": names, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(MINE) <= set(result["names"])
    assert result["loaded"] == []


@pytest.mark.parametrize("name,module", [
    ("tensorflow", "tensorflow"), ("tensorflow-xla", "tensorflow"), ("tflite", "tensorflow"),
    ("onnxruntime", "onnxruntime"), ("onnxruntime-parallel", "onnx"), ("openvino", "openvino"), ("openvino", "onnx"),
    ("torch", "torch"),
])
def test_missing_package_is_a_reason(monkeypatch, name, module):
    adapter = adapters.get(name)
    monkeypatch.setitem(sys.modules, module, None)  # makes ``import module`` raise ImportError
    reason = adapter.available()
    assert reason is not None and module in reason
    with pytest.raises(RuntimeError, match="cannot run"):
        adapter.build(object(), 1)  # refused before the graph is even looked at


def test_torch_compile_without_a_compiler_is_a_reason(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    reason = adapters.get("torch-compile").available()
    assert reason is not None and "C++ compiler" in reason


def test_cpu_only_adapters_refuse_cuda():
    for name in ("onnxruntime-parallel", "openvino", "tflite"):
        assert "cuda" in adapters.get(name).available("cuda")


def test_gpu_capable_adapters_say_why_not_on_cuda():
    from ios_core.measurement.gpu import gpu_missing

    if gpu_missing() is None:
        pytest.skip("this machine has a GPU")
    for name in ("ios", "torch", "torch-compile-cudagraphs", "onnxruntime", "tensorrt", "tensorrt-noaux"):
        reason = adapters.get(name).available("cuda")
        assert reason and "\n" not in reason, (name, reason)
    assert "GPUs only" in adapters.get("tensorrt").available("cpu")


def test_unknown_adapter_name():
    with pytest.raises(adapters.UnknownFramework, match="unknown framework"):
        adapters.get("nosuch")


def test_list_frameworks_shows_every_adapter(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    with pytest.raises(SystemExit) as e:
        main(["list", "frameworks"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for name in adapters.names():
        line = next(ln for ln in out.splitlines() if f" {name} " in ln)
        adapter = adapters.get(name)
        reason = adapter.available()
        assert ("available" in line and "unavailable" not in line) if reason is None else "unavailable" in line


def test_list_frameworks_reports_a_missing_package(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setitem(sys.modules, "openvino", None)
    with pytest.raises(SystemExit) as e:
        main(["list", "frameworks"])
    assert e.value.code == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if " openvino " in ln)
    assert "unavailable" in line and "openvino is not importable" in line


def test_framework_rows_survive_a_broken_adapter(monkeypatch):
    from ios_bench.commands.list import framework_rows

    monkeypatch.setitem(adapters._REGISTRY, "broken", "adapters.base:NO_SUCH_ATTRIBUTE")
    rows = {r["name"]: r for r in framework_rows()}
    assert rows["broken"]["available"] is False and "failed to load" in rows["broken"]["reason"]
    assert rows["torch"]["available"] is True
