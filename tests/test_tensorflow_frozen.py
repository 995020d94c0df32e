"""The tensorflow adapter freezes its CPU builds (issue 46: why its bf16 was slower than its fp32 on
randwire; docs/results/precision/tensorflow-bf16-randwire-2026-11-27.md). A captured filter (a
placeholder fed at each call, as a Keras model's variables) is reordered by TensorFlow's oneDNN
convolutions into their blocked layout at every call; a frozen one (a ``Const`` node) once. These
tests build the adapter on small graphs: the filters are constants of the graph, the output is the
same as the captured build's, a steady-state call of a frozen build reorders no filter while the
captured build does (oneDNN's own verbose log, in a subprocess), and bad values are one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import adapters
from ios_core import reference
from ios_core.check import check_precision
from ios_core.inputs import random_input
from ios_core.models.randwire import build_randwire, watts_strogatz

ROOT = Path(__file__).resolve().parents[1]
_FILTERED = ("Conv2D", "DepthwiseConv2dNative", "MatMul")


def _skip_unavailable():
    reason = adapters.get("tensorflow").available()
    if reason:
        pytest.skip(reason)


def mini_randwire():
    """RandWire's structure (relu -> depthwise 3x3 -> 1x1 per node, sums of several inputs, four
    stages, the 1x1 head and the classifier) at 16 channels, 5 nodes per stage, 32x32."""
    graphs = [(5, watts_strogatz(5, 2, 0.75, np.random.default_rng([3, i]))) for i in range(4)]
    return build_randwire("mini_randwire", graphs, channels=16, num_classes=10, image_size=32).init_weights(1)


@pytest.fixture(scope="module")
def case():
    g = mini_randwire()
    x = random_input(g, 1, seed=0)
    return g, x, reference.run(g, x)


def _filter_sources(compiled) -> set[str]:
    graph = compiled.fn.get_concrete_function().graph
    return {op.inputs[1].op.type for op in graph.get_operations() if op.type in _FILTERED}


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_cpu_build_is_frozen_its_filters_constants_and_its_output_the_captured_builds(case, precision):
    _skip_unavailable()
    g, x, ref = case
    a = adapters.get("tensorflow")
    frozen = a.build(g, 1, threads=1, precision=precision)
    captured = a.build(g, 1, threads=1, precision=precision, frozen=False)
    assert frozen.info["frozen"] is True and captured.info["frozen"] is False
    assert _filter_sources(frozen) == {"Const"}  # every filter a constant of the graph, none captured
    assert not frozen.fn.get_concrete_function().captured_inputs
    assert "Placeholder" in _filter_sources(captured)  # (a filter of at most 128 values is inlined as a Const)
    assert frozen.info["precision"] == captured.info["precision"] == precision
    out, out_captured = frozen.run(x), captured.run(x)
    assert out.dtype == np.float32 and check_precision(out, ref, precision).passed
    assert check_precision(out, out_captured, precision).passed


def test_frozen_takes_true_or_false_and_not_with_xla(case):
    _skip_unavailable()
    g, _, _ = case
    with pytest.raises(ValueError, match=r"^frozen='no': tensorflow takes true or false$"):
        adapters.get("tensorflow").build(g, 1, threads=1, frozen="no")
    with pytest.raises(ValueError, match="^frozen=true: tensorflow-xla compiles with XLA"):
        adapters.get("tensorflow-xla").build(g, 1, threads=1, frozen=True)


_VERBOSE_CALL = """
import json, sys
import adapters
from ios_core.inputs import random_input
from tests.test_tensorflow_frozen import mini_randwire
g = mini_randwire()
x = random_input(g, 1, seed=0)
for precision, frozen in json.loads(sys.argv[1]):
    c = adapters.get("tensorflow").build(g, 1, threads=1, precision=precision, frozen=frozen)
    p = c.prepare(x)
    for _ in range(3):
        c.finish(c.execute(p))
    print("ios-bench-call-start", precision, frozen, flush=True)
    c.finish(c.execute(p))
    print("ios-bench-call-end", flush=True)
"""


def _filter_reorders(sides) -> dict[tuple[str, bool], int]:
    """Per (precision, frozen), the reorders of one steady-state call whose source is in TensorFlow's
    filter layout (HWIO: oneDNN's ``cdba``; depthwise H, W, C, multiplier: ``decab``), from oneDNN's
    verbose log."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", _VERBOSE_CALL, json.dumps(sides)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    counts, side = {}, None
    for line in run.stdout.splitlines():
        if line.startswith("ios-bench-call-start"):
            _, precision, frozen = line.split()
            side = (precision, frozen == "True")
            counts[side] = 0
        elif line.startswith("ios-bench-call-end"):
            side = None
        elif side and line.startswith("onednn_verbose") and ",exec,cpu,reorder," in line:
            if any(f"src:{t}::blocked:{layout}:" in line for t in ("f32", "bf16") for layout in ("cdba", "decab")):
                counts[side] += 1
    return counts


def test_a_frozen_builds_call_reorders_no_filter_where_the_captured_builds_does():
    _skip_unavailable()
    from adapters.tensorflow import _onednn

    if not _onednn():
        pytest.skip("this TensorFlow runs its own kernels, not oneDNN's")
    precisions = ["fp32"] + (["bf16"] if "avx512_bf16" in Path("/proc/cpuinfo").read_text() else [])
    counts = _filter_reorders([[p, f] for p in precisions for f in (True, False)])
    if not any(counts[(p, False)] for p in precisions):
        pytest.skip(f"this CPU's oneDNN kernels reorder no captured filter either ({counts})")
    for p in precisions:
        assert counts[(p, True)] == 0, counts
    if "bf16" in precisions:  # every 1x1 filter into the VNNI pair-interleaved layout, at every call
        assert counts[("bf16", False)] > 0, counts
