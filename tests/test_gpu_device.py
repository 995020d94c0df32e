"""Tests that need an NVIDIA GPU (marker ``gpu``; ``make test-gpu``). Without one each skips
with what is missing. None of these has run in this project's development: no GPU was
available (see README). ``ios-bench doctor`` runs the same paths with one line each."""

from __future__ import annotations

import numpy as np
import pytest

from ios_core import models, reference
from ios_core.check import compare
from ios_core.reference import random_input
from tests.runtime_helpers import mixed_graph

pytestmark = pytest.mark.gpu


def _need(reason):
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def cuda_runtime_ok():
    from ios_core.measurement.gpu import cuda_missing

    _need(cuda_missing())


def _parallel(graph):
    from ios_core import optimize
    from ios_core.cost.synthetic import SyntheticCostModel

    return optimize(graph, "parallel", SyntheticCostModel(), batch_size=1)


@pytest.mark.parametrize("cuda_graph", [False, True])
@pytest.mark.parametrize("which", ["mixed", "coverage", "sample", "inception_v3"])
def test_cuda_runtime_matches_the_oracle(cuda_runtime_ok, which, cuda_graph):
    from ios_core.models.coverage import coverage_graph, level_schedule
    from ios_core.runtime import make_runtime

    g = mixed_graph() if which == "mixed" else coverage_graph() if which == "coverage" else models.get(which)
    g.init_weights(0)
    if which == "coverage":
        g = level_schedule(g)  # every op type and attribute, on many streams
    elif which != "mixed":
        g = _parallel(g)
    for batch in (1, 2):
        rt = make_runtime(g, batch, device="cuda", cuda_graph=cuda_graph)
        x = random_input(g, batch, seed=3)
        for _ in range(2):  # a replay, too
            out = rt.run(x)
        chk = compare(out, reference.run(g, x), 1e-3)
        assert chk.passed, chk
        assert rt.stats["tf32"] is False
        m = rt.measure(warmup=2, repeat=3)
        assert m.meta["clock"] == "cuda-events" and m.median > 0


def test_cuda_measured_cost_model(cuda_runtime_ok, tmp_path):
    from ios_core import optimize
    from ios_core.cost.measured import MeasuredCostModel

    g = models.get("sample").init_weights(0)
    cm = MeasuredCostModel(device="cuda", cache=tmp_path / "db.sqlite", repeat=3)
    sched = optimize(g, "both", cm, batch_size=1)
    assert sched.has_stages and cm.measured > 0
    import json

    gpu = json.loads(cm.cache.device_description)["gpu"]
    assert gpu["name"] and gpu["driver"] and gpu["cudnn"]


@pytest.mark.parametrize("which", ["sample", "coverage"])
@pytest.mark.parametrize("name", ["tensorrt", "tensorrt-noaux", "torch", "torch-compile", "torch-compile-cudagraphs",
                                  "onnxruntime", "tensorflow", "tensorflow-xla", "tvm", "tvm-cudnn"])
def test_peers_on_cuda_match_the_oracle(name, which):
    import adapters
    from ios_core.models.coverage import coverage_graph

    adapter = adapters.get(name)
    _need(adapter.available("cuda"))
    g = (coverage_graph() if which == "coverage" else models.get("sample")).init_weights(0)
    compiled = adapter.build(g, 2, "cuda")
    x = random_input(g, 2, seed=1)
    chk = compare(compiled.run(x), reference.run(g, x), adapter.tolerance)
    assert chk.passed, chk
    assert compiled.info.get("precision", "fp32") == "fp32"
    assert compiled.info.get("tf32") in (False, None)


def test_cuda_event_timer_measures_device_time():
    from ios_core.measurement.gpu import CudaEventTimer, cupy_missing

    _need(cupy_missing())
    import cupy

    s = cupy.cuda.Stream(non_blocking=True)
    a = cupy.ones((2048, 2048), dtype=cupy.float32)
    t = CudaEventTimer(s)
    with s:
        t.start()
        for _ in range(5):
            a = a @ a / 2048
        ms = t.stop()
    assert ms > 0
    assert np.isfinite(float(a[0, 0].get()))
