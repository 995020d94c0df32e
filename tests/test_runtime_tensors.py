"""A cell imports what it uses (ios_core.runtime.tensors, issue 36): a program on ONNX Runtime or
OpenVINO kernels keeps its values in numpy arrays and its pool has no torch thread control, so an
IOS worker on those kernels never imports torch. Checked in fresh processes (``sys.modules``): the
runtime on a tiny graph, and a real worker (``python -m ios_bench.running.worker``) measuring one round of
an IOS cell with a searched schedule."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.harness_helpers import ROOT, env_for

ort = pytest.importorskip("onnxruntime")


def _fresh(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (the test plugin's models registered); its last stdout
    line is JSON."""
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env_for(), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_numpy_and_torch_tensors_agree():
    from ios_core.runtime.tensors import NUMPY, TORCH, for_provider

    for tn in (NUMPY, TORCH):
        flat = tn.empty((2 * 3 * 4 * 4 + 5,))
        v = tn.reshape(flat, 5, 2 * 3 * 4 * 4, (2, 3, 4, 4))
        tn.copy(v, tn.from_numpy(np.arange(96, dtype=np.float32).reshape(2, 3, 4, 4)))
        s = tn.narrow(v, 1, 2)
        assert tuple(s.shape) == (2, 2, 4, 4) and not tn.is_contiguous(s) and tn.is_contiguous(v)
        assert np.array_equal(tn.to_numpy(s), np.arange(96, dtype=np.float32).reshape(2, 3, 4, 4)[:, 1:3])
        assert tn.address(v) == tn.array(v).ctypes.data  # the memory a library is bound to
    assert NUMPY.threads() is None and TORCH.threads() >= 1
    assert for_provider("torch") is TORCH and for_provider("onnxruntime") is for_provider("openvino") is NUMPY


PROVIDER_RUN = """
import json, sys
import numpy as np
import tests.harness_plugin
from ios_core import models, optimize
from ios_core.cost import make_cost_model
from ios_core.runtime import Runtime
g = models.get("tiny_a"); g.init_weights(0)
sched = optimize(g, "greedy", make_cost_model("synthetic"))  # two groups side by side in its first stage
x = np.random.default_rng(0).standard_normal((1, *g.input_shape)).astype(np.float32)
rt = Runtime(sched, 1, provider=PROVIDER, threads=2)
y = rt.run(x)
m = rt.measure(warmup=1, repeat=2)
print(json.dumps({"torch": "torch" in sys.modules, "y": y.ravel()[:8].tolist(), "workers": rt.stats["max_workers"],
                  "samples": len(m.samples_ms)}))
"""


@pytest.mark.parametrize("provider", ["onnxruntime", "openvino"])
def test_a_runtime_on_another_providers_kernels_imports_no_torch(provider):
    pytest.importorskip(provider)
    got = _fresh(PROVIDER_RUN.replace("PROVIDER", repr(provider)))
    assert got["torch"] is False
    assert got["workers"] == 2 and got["samples"] == 2  # concurrent groups on the worker pool, measured
    # and its output is the oracle's (computed here, where torch may be imported)
    import tests.harness_plugin  # noqa: F401
    from ios_core import models
    from ios_core.reference import run

    g = models.get("tiny_a")
    g.init_weights(0)
    x = np.random.default_rng(0).standard_normal((1, *g.input_shape)).astype(np.float32)
    assert np.allclose(got["y"], run(g, x).ravel()[:8], rtol=1e-4, atol=1e-4)


def test_an_ios_worker_on_onnxruntime_kernels_imports_no_torch(tmp_path):
    """One round of an IOS cell (a searched greedy schedule on ONNX Runtime kernels) in a real
    worker: output checked against the oracle, timed, and the worker imported onnxruntime only."""
    import tests.harness_plugin  # noqa: F401
    from ios_core import models, optimize
    from ios_core.cost import make_cost_model
    from ios_core.reference import run

    g = models.get("tiny_a")
    g.init_weights(0)
    sched = optimize(g, "greedy", make_cost_model("synthetic"))
    assert sched.has_stages
    sched.save(str(tmp_path / "sched.json"))
    x = np.random.default_rng(0).standard_normal((1, *g.input_shape)).astype(np.float32)
    np.save(tmp_path / "input.npy", x)
    np.save(tmp_path / "ref.npy", run(g, x))
    spec = {"model_spec": "tiny_a", "batch_size": 1, "device": "cpu", "adapter": "ios", "threads": 2, "seed": 0,
            "input_seed": 0, "ref_path": str(tmp_path / "ref.npy"), "input_path": str(tmp_path / "input.npy"),
            "result_path": str(tmp_path / "result.json"), "warmup": 1, "number": 1, "repeat": 3,
            "min_sample_ms": None, "schedule": "greedy", "provider": "onnxruntime",
            "schedule_path": str(tmp_path / "sched.json"), "task": "cell"}
    p = subprocess.run([sys.executable, "-m", "ios_bench.running.worker", json.dumps(spec)], cwd=ROOT, env=env_for(),
                       capture_output=True, text=True, timeout=300)
    result = json.loads((tmp_path / "result.json").read_text())
    assert p.returncode == 0 and result["status"] == "ok", (result.get("reason"), p.stderr[-2000:])
    assert result["check"]["passed"] and len(result["samples_ms"]) == 3
    assert result["provider"] == "onnxruntime" and result["info"]["provider"] == "onnxruntime"
    assert result["frameworks_imported"] == ["onnxruntime"]  # no torch, nothing else


def test_a_schedule_search_on_onnxruntime_kernels_imports_no_torch(tmp_path):
    """The measured cost model times stages in the kernels' own tensors and thread control (no torch
    primer, inputs or pool for ONNX Runtime's): an optimize worker searching greedy on ONNX Runtime
    kernels with a fresh profile database imports onnxruntime and nothing else."""
    pytest.importorskip("onnxruntime")
    spec = {"task": "optimize", "model_spec": "tiny_a", "batch_size": 1, "device": "cpu", "schedules": ["greedy"],
            "schedule_paths": [str(tmp_path / "greedy.json")], "provider": "onnxruntime", "threads": 2, "seed": 0,
            "cost_model": "measured", "result_path": str(tmp_path / "result.json")}
    p = subprocess.run([sys.executable, "-m", "ios_bench.running.worker", json.dumps(spec)], cwd=ROOT,
                       env=env_for({"IOS_BENCH_CACHE": str(tmp_path / "profiles.sqlite")}),
                       capture_output=True, text=True, timeout=300)
    result = json.loads((tmp_path / "result.json").read_text())
    assert p.returncode == 0 and result["status"] == "ok", (result, p.stderr[-2000:])
    one = result["schedules"][0]
    assert one["status"] == "ok" and one["cost_model_stats"]["measured"] > 0  # stages were timed here
    assert result["frameworks_imported"] == ["onnxruntime"]
