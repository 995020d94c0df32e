"""Real networks nobody here wrote, through every framework (issue 56, item 4): timm's vision
transformers and ConvNeXt (random weights, small configurations of timm's own models), exported to
ONNX and imported (ios_core/frontend, tests/test_import_timm.py checks the import against torch), then
built at fp32 by every CPU adapter and run on the seeded input, and by IOS: the DP scheduler's
schedule on the CPU runtime's three kernel providers, and on the CUDA runtime on the strict fake
device (tests/stream_fakes.py) replayed as one CUDA graph; each output checked against the oracle.

What timm's graphs hold that the zoo's vit_tiny and convnext_tiny do not: Swin's shifted windows
(rolls as slices and concatenations, the attention masks' arithmetic, a channels-last token map),
Swin V2's cosine attention and its continuous position bias (an MLP on log-spaced coordinates),
MaxViT's MBConv and grid attention, DeiT's distillation token and its two heads' mean, ConvNeXt's
LayerNorm2d (permute, layer norm, permute back).

Quick (``make test``): every network at its smallest configuration on the adapters that build in a
fraction of a second (PyTorch eager, ONNX Runtime in both modes, OpenVINO, IOS), and the adapters that
compile (JAX/XLA, TensorFlow with and without XLA, TensorFlow Lite, TVM, torch.compile) on one
network, Swin V2 at one stage (its shifted block, cosine attention and position-bias MLP). Slow
(``-m slow``): every network at the configurations of tests/test_import_timm.py on every adapter.
Skipped when timm is not installed (the dev extra brings it)."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
import tests.torchvision_models as tv

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from ios_core import optimize, reference  # noqa: E402
from ios_core.check import compare, tolerance_for  # noqa: E402
from ios_core.cost import SyntheticCostModel  # noqa: E402
from ios_core.frontend import onnx as frontend  # noqa: E402
from tests.lively_weights import lively  # noqa: E402
from tests.test_import_timm import _build  # noqa: E402

BATCH = 2
FP32 = tolerance_for("fp32")
SWIN = dict(img_size=32, window_size=2, embed_dim=8, depths=(2, 2), num_heads=(1, 2))
ONE_STAGE = dict(img_size=16, window_size=2, embed_dim=8, depths=(2,), num_heads=(2,))

# name -> (timm's model, its keyword arguments, the image size): the smallest configurations
QUICK = {
    "vit": ("vit_tiny_patch16_224", dict(img_size=32, depth=1), 32),
    "deit_distilled": ("deit_tiny_distilled_patch16_224", dict(img_size=32, depth=1), 32),
    "convnext_atto": ("convnext_atto", dict(depths=(1, 1, 1, 1)), 32),
    "swin": ("swin_tiny_patch4_window7_224", SWIN, 32),
    "swinv2": ("swinv2_tiny_window8_256", SWIN, 32),
    "maxvit_pico": ("maxvit_pico_rw_256", dict(img_size=64, depths=(1, 1, 1, 1)), 64),
    "swinv2_one_stage": ("swinv2_tiny_window8_256", ONE_STAGE, 16),
}
# tests/test_import_timm.py's configurations (ConvNeXt-atto's 12 blocks, MaxViT-pico's 11)
SLOW = {
    "vit": ("vit_tiny_patch16_224", dict(img_size=32, depth=2), 32),
    "deit_distilled": ("deit_tiny_distilled_patch16_224", dict(img_size=32, depth=1), 32),
    "convnext_atto": ("convnext_atto", {}, 32),
    "convnext_atto_linear_mlp": ("convnext_atto", dict(conv_mlp=False), 32),
    "swin": ("swin_tiny_patch4_window7_224", SWIN, 32),
    "swinv2": ("swinv2_tiny_window8_256", SWIN, 32),
    "maxvit_pico": ("maxvit_pico_rw_256", dict(img_size=64), 64),
}

FAST = ["torch", "onnxruntime", "onnxruntime-parallel", "openvino", "ios"]
COMPILING = ["jax-xla", "tensorflow", "tensorflow-xla", "tflite", "tvm", "torch-compile"]
PROVIDERS = ["torch", "onnxruntime", "openvino"]


@pytest.fixture(scope="module")
def nets():
    """``nets(key, table)``: the imported graph, the seeded input and the oracle's output, built once."""
    tv.models()  # timm imports torchvision: its models without the compiled ops the CPU torch lacks
    timm = pytest.importorskip("timm", reason="timm is not installed (pip install 'ios-bench[dev]')")
    cache = {}

    def get(key, table):
        name, kwargs, image = table[key]
        if (name, repr(kwargs)) not in cache:
            net = lively(_build(timm, name, **kwargs))
            graph = frontend.load(tv.export(net, image), name=key)
            x = np.random.default_rng(0).standard_normal((BATCH, 3, image, image), dtype=np.float32)
            ref = reference.run(graph, x)
            with torch.no_grad():  # the import at these configurations (test_import_timm checks its own)
                want = net(torch.from_numpy(x)).numpy()
            result = compare(ref.reshape(want.shape), want, FP32)
            assert result.passed, f"the oracle on timm's {key} against torch: {result.reason}"
            cache[name, repr(kwargs)] = (graph, x, ref)
        return cache[name, repr(kwargs)]

    return get


def _adapter_cell(nets, table, key, framework):
    adapter = adapters.get(framework)
    if adapter.available():
        pytest.skip(adapter.available())
    graph, x, ref = nets(key, table)
    result = compare(adapter.build(graph, BATCH, threads=1).run(x), ref, adapter.tolerance)
    assert result.passed, f"{framework} on timm's {key}: {result.reason}"


def _ios_cells(nets, table, key):
    """The DP scheduler's schedule (merge and parallel) on the CPU runtime's three kernel providers and
    on the CUDA runtime (the strict fake device, one CUDA graph), against the oracle at fp32."""
    from ios_core.runtime import Runtime, providers
    from ios_core.runtime.cuda import CudaRuntime
    from tests.stream_fakes import TorchQueueDevice

    graph, x, ref = nets(key, table)
    scheduled = optimize(graph, "both", SyntheticCostModel(), batch_size=BATCH)
    for provider in PROVIDERS:
        if providers.get(provider).available() is not None:
            continue
        result = compare(Runtime(scheduled, BATCH, provider=provider).run(x), ref, FP32)
        assert result.passed, f"IOS on {provider}, timm's {key}: {result.reason}"
    rt = CudaRuntime(scheduled, BATCH, "cuda", backend=TorchQueueDevice(0), cuda_graph=True)
    result = compare(rt.run(x), ref, FP32)
    assert result.passed, f"IOS's CUDA runtime (fake device), timm's {key}: {result.reason}"
    assert rt.dev.captured == 1


def test_the_quick_networks_hold_what_the_zoo_does_not(nets):
    kinds = {key: {op.TYPE for op in nets(key, QUICK)[0].operators()} for key in QUICK}
    assert all({"matmul", "softmax", "layernorm"} <= k for key, k in kinds.items() if key != "convnext_atto")
    assert "l2norm" in kinds["swinv2"] and "conv" in kinds["maxvit_pico"] and "prepend" in kinds["deit_distilled"]
    assert "layernorm" in kinds["convnext_atto"] and "transpose" in kinds["swin"]


@pytest.mark.parametrize("framework", FAST)
@pytest.mark.parametrize("key", [k for k in QUICK if k != "swinv2_one_stage"])
def test_each_network_on_the_quick_adapters(nets, key, framework):
    _adapter_cell(nets, QUICK, key, framework)


@pytest.mark.parametrize("framework", COMPILING)
def test_swin_v2_at_one_stage_on_the_compiling_adapters(nets, framework):
    _adapter_cell(nets, QUICK, "swinv2_one_stage", framework)


@pytest.mark.parametrize("key", [k for k in QUICK if k != "swinv2_one_stage"])
def test_ios_schedules_each_network_and_runs_it_on_every_provider_and_the_cuda_fake(nets, key):
    _ios_cells(nets, QUICK, key)


@pytest.mark.slow
@pytest.mark.parametrize("framework", FAST + COMPILING)
@pytest.mark.parametrize("key", sorted(SLOW))
def test_each_network_on_every_adapter(nets, key, framework):
    _adapter_cell(nets, SLOW, key, framework)


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(SLOW))
def test_ios_on_each_network(nets, key):
    _ios_cells(nets, SLOW, key)
