"""Every IR op type and attribute value through the GPU paths, against the oracle, without a
GPU: the CUDA executor on the fake device (tests/stream_fakes.py, whose kernels implement the
device's explicit parameters independently) and the TensorRT lowering on the stand-in held to
TensorRT 10's and 11's API (tests/fake_tensorrt.py, from tests/data/tensorrt_api.json).

The graph is ``ios_core.models.coverage.coverage_graph`` (also what ``ios-bench doctor`` runs);
the first test fails when the IR gains an op type or attribute value the graph lacks."""

from __future__ import annotations

import sys

import pytest

from ios_core import reference
from ios_core.check import compare
from ios_core.ir import ACTIVATIONS, FUSED_ACTIVATIONS
from ios_core.ir.nodes import ELEMENT_OPS, POOL_TYPES, RESIZE_MODES
from ios_core.ir.tensor_nodes import TENSOR_TYPES
from ios_core.lowering.walk import SUPPORTED_TYPES
from ios_core.models.coverage import coverage_graph, level_schedule
from ios_core.reference import random_input
from tests import fake_tensorrt
from tests.stream_fakes import TorchQueueDevice


@pytest.fixture(scope="module")
def graph():
    return coverage_graph().init_weights(4)


def gpu_types() -> set[str]:
    """The types both GPU backends lower and this graph covers: every feature-map type. The general
    tensors of issue 56 are lowered by both too, and checked on transformer graphs (a ViT block, a
    ConvNeXt block, cosine attention) rather than here: by tests/test_tensorrt_tensors.py on the
    TensorRT stand-in and by tests/test_runtime_cuda_tensors_fake.py on the CUDA executor; the
    coverage graph (doctor's model) stays a feature-map graph."""
    from adapters.tensorrt import NetworkBuilder
    from ios_core.ir import NODE_TYPES
    from ios_core.ir.visitor import OPERATOR_TYPES
    from ios_core.runtime.cuda import CudaLaunchers

    # composed types (identity, element) are never launched by the CUDA runtime: the program writes them
    refused = {t for t in SUPPORTED_TYPES if not CudaLaunchers.handles(t) and t in CudaLaunchers.REFUSES
               and not NODE_TYPES[t].COMPOSED}
    assert refused == set()  # the CUDA runtime lowers every type
    assert [t for t in OPERATOR_TYPES if not NetworkBuilder.handles(t)] == []  # TensorRT lowers every type
    return set(SUPPORTED_TYPES) - set(TENSOR_TYPES)


def test_coverage_graph_has_every_op_type_and_attribute_value(graph):
    ops = list(graph.operators())
    assert {n.TYPE for n in ops} | {"sequential"} >= gpu_types()
    assert any(n.TYPE == "sequential" for b in graph.blocks for n in b.nodes)
    used_acts = {n.act for n in ops if hasattr(n, "act") and n.TYPE != "element"}
    used_acts |= {n.act_type for n in ops if n.TYPE in ("activation", "relu")}
    assert used_acts >= set(ACTIVATIONS), set(ACTIVATIONS) - used_acts
    assert {n.act for n in ops if n.TYPE == "conv"} >= set(FUSED_ACTIVATIONS)
    pools = [n for n in ops if n.TYPE == "pool"]
    assert {p.pool_type for p in pools} >= set(POOL_TYPES)
    avg = [p for p in pools if p.pool_type == "avg"]
    assert {p.count_include_pad for p in avg} == {True, False}
    assert any(not p.symmetric for p in avg) and any(not p.symmetric for p in pools if p.pool_type == "max")
    convs = [n for n in ops if n.TYPE == "conv"]
    assert any(not c.symmetric for c in convs) and any(c.groups > 1 for c in convs)
    assert any(max(c.dilation) > 1 for c in convs) and any(max(c.stride) > 1 for c in convs)
    assert {n.op_type for n in ops if n.TYPE == "element"} >= set(ELEMENT_OPS)
    assert any(n.broadcasts for n in ops if n.TYPE == "element")
    resizes = [n for n in ops if n.TYPE == "resize"]
    assert {r.mode for r in resizes} >= set(RESIZE_MODES) and {r.align_corners for r in resizes} == {True, False}
    assert any(r.size[0] < r.input_shape[1] for r in resizes) and any(r.size[0] > r.input_shape[1] for r in resizes)


# ---- the CUDA executor on the fake device ----------------------------------------------------

@pytest.mark.parametrize("cuda_graph", [False, True])
@pytest.mark.parametrize("schedule", ["sequential", "levels"])
def test_cuda_executor_runs_every_op_and_attribute_like_the_oracle(graph, schedule, cuda_graph):
    from ios_core.runtime.cuda import CudaRuntime

    g = level_schedule(graph) if schedule == "levels" else graph
    x = random_input(graph, 2, seed=7)
    ref = reference.run(graph, x)
    for seed in range(3):
        dev = TorchQueueDevice(seed)
        rt = CudaRuntime(g, 2, "cuda", backend=dev, cuda_graph=cuda_graph)
        for _ in range(2):
            chk = compare(rt.run(x), ref, 1e-4)
            assert chk.passed, (schedule, cuda_graph, seed, chk.reason)
    if schedule == "levels":
        assert rt.stats["streams"] >= 2 and rt.stats["events"] >= 1
    assert rt.stats["aligned_copies"] > 0  # misaligned concatenation slices went through an aligned buffer
    assert all(i % 16 == 0 and o % 16 == 0 for i, o in dev.convs)


def test_the_fake_device_catches_a_dropped_attribute(graph, monkeypatch):
    """The check can fail: an executor that forgets ``count_include_pad`` computes another result."""
    from ios_core.runtime import cuda
    from ios_core.runtime.cuda import CudaRuntime

    real = cuda.PoolSpec

    def forgetful(kind, kernel, stride, pads, count_include_pad):
        return real(kind, kernel, stride, pads, True)

    monkeypatch.setattr(cuda, "PoolSpec", forgetful)
    x = random_input(graph, 1, seed=1)
    rt = CudaRuntime(graph, 1, "cuda", backend=TorchQueueDevice(0))
    assert not compare(rt.run(x), reference.run(graph, x), 1e-4).passed


# ---- TensorRT on the stand-in ----------------------------------------------------------------

def test_tensorrt_lowers_every_op_and_attribute_like_the_oracle(graph, trt):
    from adapters.tensorrt import build_engine

    x = random_input(graph, 2, seed=3)
    fake_tensorrt.FEED["input"] = x
    engine, info = build_engine(graph, 2, max_aux_streams=0)
    network, config = fake_tensorrt.Builder.built[-1]
    chk = compare(network._outputs[0].value.numpy(), reference.run(graph, x), 1e-4)
    assert chk.passed, chk.reason
    assert info["tf32"] is False and info["fp16"] is False
    assert info["strongly_typed"] is (trt.__version__.startswith("11"))


def test_the_tensorrt_adapter_builds_caches_and_runs_on_the_standin(graph, trt, monkeypatch, tmp_path):
    """The whole adapter (build, engine cache, deserialize, tensor addresses, execute_async_v3)
    on the stand-in of each TensorRT version and a host-memory CuPy, against the oracle."""
    import adapters

    monkeypatch.setitem(sys.modules, "cupy", fake_tensorrt.fake_cupy())
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: fingerprint() from the fake CuPy only
    adapter = adapters.get("tensorrt")
    assert adapter.available("cuda") is None
    x = random_input(graph, 2, seed=9)
    fake_tensorrt.FEED["input"] = x
    ref = reference.run(graph, x)
    for cached in (False, True):
        compiled = adapter.build(graph, 2, "cuda", cache=tmp_path)
        assert compiled.info["engine_cached"] is cached and compiled.info["tf32"] is False
        chk = compare(compiled.run(x), ref, 1e-4)
        assert chk.passed, chk.reason
    assert len(list(tmp_path.glob("*.engine"))) == 1


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_tensorrt_reduced_precision_is_its_builder_flag(graph, trt, monkeypatch, tmp_path, precision):
    """fp16/bf16 cells (issue 46): on TensorRT 10 the engine is built with BuilderFlag.FP16/BF16 set (as
    trtexec --fp16/--bf16), TF32 still cleared, no other reduced-precision flag, the precision recorded
    and the engine cached apart from fp32's; TensorRT 11 has no such flag and the build is refused with
    that reason. The stand-in computes in fp32 (it checks the API and the flags, not the numbers)."""
    import adapters

    monkeypatch.setitem(sys.modules, "cupy", fake_tensorrt.fake_cupy())
    monkeypatch.setitem(sys.modules, "pynvml", None)
    adapter = adapters.get("tensorrt")
    assert adapter.precision_reason(precision, "cuda") is None
    assert "not yet" in adapter.precision_reason("int8", "cuda") and "calibrat" in adapter.precision_reason(
        "int8", "cuda")
    x = random_input(graph, 1, seed=2)
    fake_tensorrt.FEED["input"] = x
    if trt.__version__.startswith("11"):
        with pytest.raises(RuntimeError, match=f"strongly typed and has no BuilderFlag.{precision.upper()}"):
            adapter.build(graph, 1, "cuda", cache=tmp_path, precision=precision)
        return
    adapter.build(graph, 1, "cuda", cache=tmp_path)  # the fp32 engine
    compiled = adapter.build(graph, 1, "cuda", cache=tmp_path, precision=precision)
    _, config = fake_tensorrt.Builder.built[-1]
    flags = {f: config.get_flag(getattr(trt.BuilderFlag, f)) for f in ("FP16", "BF16", "INT8", "FP8", "TF32")}
    assert flags == {"FP16": precision == "fp16", "BF16": precision == "bf16", "INT8": False, "FP8": False,
                     "TF32": False}
    info = compiled.info
    assert info["precision"] == precision and info["reduced_precision_flags"][precision] is True
    # the flag allows the precision per layer and the engine's layers are not read: the record says so
    assert info["precision_source"].startswith("requested, not read back")
    assert f"BuilderFlag.{precision.upper()}" in info["precision_note"]
    assert len(list(tmp_path.glob("*.engine"))) == 2  # its own engine beside the fp32 one
    again = adapter.build(graph, 1, "cuda", cache=tmp_path, precision=precision)
    assert again.info["engine_cached"] is True and again.info["precision"] == precision
    assert compare(again.run(x), reference.run(graph, x), 1e-4).passed
    fp32 = adapter.build(graph, 1, "cuda", cache=tmp_path)
    assert fp32.info["precision"] == "fp32" and fp32.info["engine_cached"] is True
    assert fp32.info["precision_source"].startswith("read back")


@pytest.mark.parametrize("cc,refused", [("7.5", True), ("8.0", False)])
def test_tensorrt_bf16_is_refused_before_compute_capability_8(graph, trt, monkeypatch, tmp_path, cc, refused):
    """A bf16 cell on a GPU older than compute capability 8.0 (a T4: 7.5) is refused in one line before
    any engine is built: TensorRT has no bf16 kernel there, and the weakly typed BF16 flag only allows
    the precision, so the engine could be fp32 under a bf16 label. fp16 builds there; 8.0 builds bf16."""
    import adapters
    from ios_core.measurement import gpu

    if trt.__version__.startswith("11"):
        pytest.skip("TensorRT 11 has no BF16 flag (the test above)")
    monkeypatch.setitem(sys.modules, "cupy", fake_tensorrt.fake_cupy())
    monkeypatch.setitem(sys.modules, "pynvml", None)
    real = gpu.fingerprint
    monkeypatch.setattr(gpu, "fingerprint", lambda *a, **k: {**real(*a, **k), "compute_capability": cc})
    fake_tensorrt.FEED["input"] = random_input(graph, 1, seed=2)
    adapter = adapters.get("tensorrt")
    built = len(fake_tensorrt.Builder.built)
    if refused:
        with pytest.raises(RuntimeError) as e:
            adapter.build(graph, 1, "cuda", cache=tmp_path, precision="bf16")
        assert str(e.value) == ("tensorrt: bf16 needs a GPU of compute capability 8.0 or later (TensorRT's bf16 "
                                "kernels); this one is 7.5")
        assert len(fake_tensorrt.Builder.built) == built  # nothing built
    else:
        assert adapter.build(graph, 1, "cuda", cache=tmp_path, precision="bf16").info["precision"] == "bf16"
    assert adapter.build(graph, 1, "cuda", cache=tmp_path, precision="fp16").info["precision"] == "fp16"


def test_the_standin_raises_for_what_a_version_lacks():
    t11, t10 = fake_tensorrt.module("11"), fake_tensorrt.module("10")
    assert t10.BuilderFlag.FP16.name == "FP16"
    with pytest.raises(AttributeError, match="FP16"):
        t11.BuilderFlag.FP16  # noqa: B018 - TensorRT 11 is strongly typed
    net = t10.Builder(t10.Logger(t10.Logger.WARNING)).create_network(0)
    fake_tensorrt.FEED["i"] = __import__("numpy").zeros((1, 2, 3, 3), "float32")
    x = net.add_input("i", t10.float32, (1, 2, 3, 3))
    import numpy as np

    conv = net.add_convolution_nd(x, 2, (1, 1), t10.Weights(np.ones((2, 2, 1, 1), "float32")),
                                  t10.Weights(np.zeros(2, "float32")))
    with pytest.raises(AttributeError, match="padding"):
        conv.padding = (1, 1)  # TensorRT 7's name: not in 10's bindings
    with pytest.raises(AttributeError):
        conv.not_an_attribute  # noqa: B018
    conv.pre_padding, conv.post_padding = (0, 1), (1, 0)
    assert tuple(conv.get_output(0).shape) == (1, 2, 4, 4)


def test_tensorrt_runtime_names_exist_in_both_versions():
    """What TRTCompiled calls (it needs a GPU to run): in the manifest of every version."""
    needed = {"Runtime": ["deserialize_cuda_engine"], "ICudaEngine": ["num_io_tensors", "get_tensor_name",
              "get_tensor_shape", "get_tensor_mode", "create_execution_context", "num_aux_streams"],
              "IExecutionContext": ["set_tensor_address", "execute_async_v3"]}
    for v, api in fake_tensorrt.MANIFEST["versions"].items():
        for cls, names in needed.items():
            missing = [n for n in names if n not in api["classes"][cls]]
            assert not missing, (v, cls, missing)
        assert "INPUT" in api["enums"]["TensorIOMode"] and "Runtime" in api["module"]


def test_the_manifest_is_what_the_script_extracts():
    """Re-extract from NVIDIA/TensorRT's sources where a clone is at hand (IOS_TRT_SOURCES: its
    git directory); the committed data is otherwise checked for its shape."""
    import json
    import os
    import subprocess

    m = fake_tensorrt.MANIFEST
    assert set(m["versions"]) == {"10", "11"}
    for v, api in m["versions"].items():
        assert len(api["classes"]) > 100 and "INetworkDefinition" in api["classes"], v
        assert "add_convolution_nd" in api["classes"]["INetworkDefinition"]
    git_dir = os.environ.get("IOS_TRT_SOURCES")
    if not git_dir:
        pytest.skip("IOS_TRT_SOURCES not set: no TensorRT source clone to re-extract the manifest from")
    from pathlib import Path

    script = Path(__file__).with_name("tensorrt_manifest.py")
    tags = [m["versions"][v]["tag"] for v in sorted(m["versions"])]
    out = subprocess.run([sys.executable, str(script), git_dir, *tags], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == m
