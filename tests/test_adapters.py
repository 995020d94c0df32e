"""Every available adapter computes the oracle's output (within its documented tolerance) on
the sample network, squeezenet and a small inception-style graph, at batch 1 and 2; and it
records what it was built with (threads, precision, version, build/compile time, opset)."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
from ios_core import models, reference
from ios_core.check import compare, tolerance_for
from tests.adapter_graphs import imported_ops, mini_inception

ADAPTERS = ["torch", "torch-compile", "tensorflow", "tensorflow-xla", "tflite", "onnxruntime", "onnxruntime-parallel",
            "openvino"]
MODELS = {
    "sample": lambda: models.get("sample", input_shape=(32, 15, 15)),
    "squeezenet": lambda: models.get("squeezenet", image_size=64),  # same operators, smaller images
    "mini_inception": mini_inception,
    "imported_ops": imported_ops,  # the operators the ONNX importer added to the IR
}
# torch.compile takes ~50 s per cold compile (inductor builds C++ kernels; cached afterwards in
# the inductor cache): only the small graphs run by default, the rest with -m slow.
SLOW = {("torch-compile", "squeezenet", 1), ("torch-compile", "squeezenet", 2), ("torch-compile", "mini_inception", 2),
        ("torch-compile", "imported_ops", 1), ("torch-compile", "imported_ops", 2)}


def _cases():
    for name in ADAPTERS:
        for model in MODELS:
            for batch in (1, 2):
                marks = [pytest.mark.slow] if (name, model, batch) in SLOW else []
                yield pytest.param(name, model, batch, marks=marks, id=f"{name}-{model}-b{batch}")


@pytest.fixture(scope="module")
def cases():
    """(model, batch) -> (graph with weights, input, oracle output), built once per module."""
    cache: dict = {}

    def get(model: str, batch: int):
        if (model, batch) not in cache:
            graph = MODELS[model]()
            graph.init_weights(seed=7)
            x = reference.random_input(graph, batch, seed=batch)
            cache[model, batch] = (graph, x, reference.run(graph, x))
        return cache[model, batch]

    return get


@pytest.fixture(scope="module")
def built(cases):
    """(adapter, model, batch) -> Compiled, each built once per module (TF/XLA builds are slow)."""
    cache: dict = {}

    def get(name: str, model: str, batch: int):
        adapter = adapters.get(name)
        reason = adapter.available()
        if reason is not None:
            pytest.skip(f"{name} unavailable: {reason}")
        if (name, model, batch) not in cache:
            graph, _, _ = cases(model, batch)
            cache[name, model, batch] = adapter.build(graph, batch_size=batch, device="cpu", threads=2)
        return cache[name, model, batch]

    return get


def test_registry_lists_every_adapter():
    assert set(ADAPTERS) <= set(adapters.names())
    for name in ADAPTERS:
        adapter = adapters.get(name)
        assert isinstance(adapter, adapters.Adapter)
        assert adapter.name == name
        assert 0 < adapter.tolerance <= 1e-3
        assert adapter.precision == "fp32"


@pytest.mark.parametrize("name,model,batch", list(_cases()))
def test_adapter_matches_oracle(built, cases, name, model, batch):
    graph, x, ref = cases(model, batch)
    compiled = built(name, model, batch)
    out = compiled.run(x)
    assert out.dtype == np.float32 and out.shape == (batch, *graph.output_shape)
    result = compare(out, ref, adapters.get(name).tolerance)
    assert result.passed, f"{name} on {model} batch {batch}: {result.reason}"
    # The timed path (what the harness measures) gives the same answer, repeatedly.
    prepared = compiled.prepare(x)
    again = compiled.finish(compiled.execute(prepared))
    np.testing.assert_allclose(again, out, rtol=0, atol=1e-5 * float(np.abs(ref).max()))
    # The input is not modified by any framework.
    np.testing.assert_array_equal(x, reference.random_input(graph, batch, seed=batch))


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapter_records_its_build(built, name):
    compiled = built(name, "sample", 1)
    info = compiled.info
    assert info["threads"] == 2
    # how each pool was set, its size read back: within the budget (ios_core.measurement.threads.split_budget)
    sizes = [int(v.split(" ", 1)[0]) for v in info["thread_pools"].values() if v.split(" ", 1)[0].isdigit()]
    assert sizes and max(sizes) <= 2
    assert info["precision"] == "fp32"
    assert info["framework_version"]
    assert info["build_seconds"] > 0
    assert info["tolerance"] == adapters.get(name).tolerance
    if name.startswith("torch"):
        assert info["intra_op_threads"] == 2
    if name == "torch-compile":
        assert info["compile_seconds"] > 0 and info["backend"] == "inductor"
    if name.startswith("tensorflow"):
        assert info["layout"] == "NHWC" and info["jit_compile"] == name.endswith("xla")
        assert info["compile_seconds"] > 0
    assert info["execution_mode"] and info["execution_mode"] != "default"
    assert info["tuning"] == "none"
    if name.startswith("onnxruntime"):
        assert info["opset"] >= 13
        assert info["execution_mode"] == ("ORT_PARALLEL" if name.endswith("parallel") else "ORT_SEQUENTIAL")
        # one thread budget: the inter-op pool never comes on top of the intra-op threads
        assert info["intra_op_threads"] * info["inter_op_threads"] <= info["threads"] == 2
        if name.endswith("parallel"):
            assert info["inter_op_threads"] == 2 and info["intra_op_threads"] == 1
        else:
            assert info["intra_op_threads"] == 2
    if name == "openvino":
        # f32 forced and read back: this CPU's plugin would otherwise pick bf16.
        assert info["inference_precision"] == "f32"
        assert info["intra_op_threads"] == "2" and info["performance_hint"] == "LATENCY"
        assert info["opset"] >= 13


def test_batch_mismatch_is_refused(built, cases):
    """A program built for batch 1 is not silently run on a batch of 2 (static-shape engines)."""
    _, x2, _ = cases("sample", 2)
    compiled = built("onnxruntime", "sample", 1)
    with pytest.raises(Exception):  # noqa: B017 - each engine raises its own error type
        compiled.run(x2)


def test_openvino_bf16_variant_is_labelled(cases):
    adapter = adapters.get("openvino")
    if adapter.available():
        pytest.skip(adapter.available())
    graph, x, ref = cases("sample", 1)
    compiled = adapter.build(graph, 1, threads=1, precision="bf16")
    if compiled.info["inference_precision"] != "bf16":
        pytest.skip("this CPU has no bf16 inference in OpenVINO")
    assert compiled.info["precision"] == "bf16"
    assert compare(compiled.run(x), ref, tolerance_for("bf16")).passed


def test_build_without_weights_fails():
    graph = MODELS["sample"]()
    with pytest.raises(ValueError, match="no weights"):
        adapters.get("torch").build(graph, 1)


def test_unknown_build_option_fails(cases):
    graph, _, _ = cases("sample", 1)
    with pytest.raises(TypeError, match="unknown build options"):
        adapters.get("onnxruntime").build(graph, 1, threads=1, bogus=True)


def test_ios_cells_on_cuda_replay_a_cuda_graph_by_default(monkeypatch):
    """IOS on cuda replays the schedule as one CUDA graph unless ``cuda_graph=false`` (the
    variant launching every kernel at each run); the info says which ran. On the CPU the option
    is refused."""
    import types

    from adapters import ios

    built = []

    def make_runtime(graph, batch_size, device, cuda_graph, precision="fp32"):
        built.append(cuda_graph)
        return types.SimpleNamespace(stats={"streams": 1}, device=device,
                                     program=types.SimpleNamespace(stats={"precision": precision}))

    monkeypatch.setattr(ios, "make_runtime", make_runtime)
    g = models.get("sample").init_weights(0)
    default = ios.IOS._build(g, 1, "cuda", None)
    eager = ios.IOS._build(g, 1, "cuda", None, cuda_graph=False)
    assert built == [True, False]
    assert default.info["execution"] == "CUDA graph replay" and default.info["variant"] == "cuda_graph=True"
    assert eager.info["execution"] == "kernel launches, no CUDA graph"
    with pytest.raises(ValueError, match="needs device cuda"):
        ios.IOS._build(g, 1, "cpu", 1, cuda_graph=True)
    assert ios.IOS._build(g, 1, "cpu", 1).info["provider"] == "torch"  # no graph on the CPU, unasked


@pytest.mark.parametrize("framework, other", [("tensorflow-xla", "jax"), ("tensorflow", "keras"), ("tvm", "torch")])
def test_a_peer_imports_no_framework_its_cell_does_not_run(framework, other):
    """TensorFlow's tf.lite imports JAX, its __init__ Keras, and TVM's tvm_ffi imports torch where
    they are installed; a cell of theirs runs none of them, so the adapter's first import leaves
    them out (adapters.imports): a fresh process checks the adapter, builds tiny_a and runs it, and
    never imported the other."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("tvm" if framework == "tvm" else "tensorflow")
    code = ("import sys, numpy as np, adapters, tests.harness_plugin; from ios_core import models; "
            f"a = adapters.get({framework!r}); assert a.available('cpu') is None; "
            "g = models.get('tiny_a'); g.init_weights(0); "
            "y = a.build(g, 1, 'cpu', 1).run(np.zeros((1, *g.input_shape), np.float32)); "
            f"print({other!r} in sys.modules, y.shape == (1, *g.exit_node.output_shape))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       cwd=str(Path(__file__).resolve().parent.parent))
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split()[-2:] == ["False", "True"]
