"""torchvision's classification architectures, built with random weights, for the import tests.

The registry's torchvision wheel links CUDA libraries the CPU torch build lacks, so
``import torchvision`` fails there ("operator torchvision::nms does not exist": its
``__init__`` loads the compiled ops). The architectures themselves are plain torch code in
``torchvision/models/*.py``. :func:`models` imports the real package when it loads, and
otherwise imports only ``torchvision.models`` from the installed wheel, skipping the package's
``__init__`` (the compiled ops are used by detection models, not by these classifiers).
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import sys
import types
import warnings

import pytest

# name -> (constructor keyword arguments, image size)
FAMILIES = {
    "resnet18": ({}, 224),
    "resnet50": ({}, 224),
    "googlenet": ({"aux_logits": False, "init_weights": True}, 224),
    "inception_v3": ({"aux_logits": False, "init_weights": True}, 299),
    "densenet121": ({}, 224),
    "mobilenet_v2": ({}, 224),
    "mobilenet_v3_small": ({}, 224),
    "mobilenet_v3_large": ({}, 224),
    "efficientnet_b0": ({}, 224),
    "mnasnet0_5": ({}, 224),
    "regnet_y_400mf": ({}, 224),
    "regnet_x_400mf": ({}, 224),
    "shufflenet_v2_x0_5": ({}, 224),
    "squeezenet1_1": ({}, 224),
}


def models():
    """The ``torchvision.models`` module (skips the test when torchvision is not installed)."""
    try:
        return importlib.import_module("torchvision.models")
    except Exception:  # the package __init__ failed (its compiled ops): load the models alone
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torchvision is not installed (pip install 'ios-bench[dev]')")
    package = types.ModuleType("torchvision")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules["torchvision"] = package
    return importlib.import_module("torchvision.models")


def build(name: str, seed: int = 0):
    """The network in eval mode with seeded random weights and non-trivial batch-norm
    statistics (so that folding them is tested)."""
    import torch

    kwargs, _ = FAMILIES[name]
    torch.manual_seed(seed)
    net = getattr(models(), name)(weights=None, **kwargs).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                c = m.num_features
                m.running_mean.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(c, generator=gen) + 0.5)
                m.bias.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)
    return net


def export(net, image_size: int, path=None, batch: int | None = None, opset: int = 17) -> bytes:
    """``net`` as ONNX (TorchScript exporter), batch dynamic unless ``batch`` is given."""
    import torch

    x = torch.zeros(batch or 2, 3, image_size, image_size)
    f = io.BytesIO()
    dynamic = None if batch else {"input": {0: "N"}, "output": {0: "N"}}
    with warnings.catch_warnings():  # the TorchScript exporter is deprecated, and still the one that
        warnings.simplefilter("ignore", DeprecationWarning)  # needs no onnxscript
        torch.onnx.export(net, (x,), f, dynamo=False, opset_version=opset, input_names=["input"],
                          output_names=["output"], dynamic_axes=dynamic)
    data = f.getvalue()
    if path is not None:
        with open(path, "wb") as out:
            out.write(data)
    return data
