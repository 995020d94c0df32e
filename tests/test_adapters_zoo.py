"""Every zoo model at batch 1 under every available adapter (slow: run with -m slow)."""

from __future__ import annotations

import pytest

import adapters
from ios_core import models, reference
from ios_core.check import compare

FRAMEWORKS = ["torch", "torch-compile", "tensorflow", "tensorflow-xla", "onnxruntime", "onnxruntime-parallel",
              "openvino", "jax-xla"]


@pytest.fixture(scope="module")
def zoo():
    cache = {}

    def get(name):
        if name not in cache:
            graph = models.get(name)
            graph.init_weights(0)
            x = reference.random_input(graph, 1, seed=0)
            cache[name] = (graph, x, reference.run(graph, x))
        return cache[name]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("model", [m for m in models.default_names()
                                   if m not in ("vgg13", "vgg16", "vgg19", "resnet34")])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_zoo_model_matches_oracle(zoo, model, framework):
    adapter = adapters.get(framework)
    if adapter.available():
        pytest.skip(adapter.available())
    graph, x, ref = zoo(model)
    result = compare(adapter.build(graph, 1, threads=2).run(x), ref, adapter.tolerance)
    assert result.passed, f"{framework} on {model}: {result.reason}"
