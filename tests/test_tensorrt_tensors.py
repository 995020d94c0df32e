"""adapters/tensorrt_tensors.py: the general tensors (issue 56) lowered to TensorRT layers, checked on
the CPU stand-in held to TensorRT 10.16's and 11.1's API (tests/fake_tensorrt.py, from the committed
manifest; never on a GPU).

* the small graphs of tests/test_ops_transformer.py (a one-block ViT, a ConvNeXt block, a
  cosine-attention block) and one of general shapes (rank-4 values, layer norm over two axes, softmax
  and l2norm along inner axes, a broadcast product) against the oracle, through ``build_engine`` and
  through the whole adapter (engine cache, ``execute_async_v3`` on a host-memory CuPy); the zoo's
  ``vit_tiny`` and ``convnext_tiny`` at batch 1 (slow);
* the stand-in refusing what TensorRT refuses (wrong ranks, an axes mask outside the tensor, inner
  dimensions that differ, ...);
* a graph needing a call the bindings lack refused in one line naming the node, before any layer;
  GELU composed of element-wise layers where the bindings lack ``GELU_ERF``/``GELU_TANH``;
* the CNN lowering layer for layer what it was: ``tests/data/tensorrt_cnn_layers.json`` was recorded
  by :func:`cnn_layer_lists` with the lowering before issue 56 (commit 328ac0f, this stand-in);
  ``python -m tests.test_tensorrt_tensors`` rewrites it, for a deliberate change of the CNN lowering only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ios_core import reference
from ios_core.check import compare
from ios_core.ir import GraphBuilder
from ios_core.reference import random_input
from tests import fake_tensorrt
from tests.test_ops_transformer import GRAPHS

BATCH = 2
GOLDEN = Path(__file__).resolve().parent / "data" / "tensorrt_cnn_layers.json"


def general_shapes():
    """Values of rank 4 (with the batch: 5): a layer norm over the last two axes, a softmax along a
    middle axis, an l2norm along the first, a dense and a matrix product of rank-4 operands, a
    lower-rank constant, two class-token rows, a product broadcast along tokens, a slice and a
    concatenation of token sequences, a flatten and a linear layer."""
    b = GraphBuilder("general_shapes", (3, 4, 4))
    t = b.reshape(b.conv(b.input, 8, 1, act="identity"), (2, 4, 4, 4))
    q = b.l2norm(b.softmax(b.layernorm(t, axes=2, eps=1e-3), axis=1), axis=0, eps=1e-2)
    d = b.dense(q, 6, act="gelu_tanh")  # 2, 4, 4, 6
    m = b.constant(b.matmul(d, b.transpose(d, (0, 1, 3, 2))), (4, 1), "mul")  # 2, 4, 4, 4
    p = b.prepend(b.reshape(m, (32, 4)), rows=2)  # 34, 4
    gated = b.mul([p, b.dense(p, 1, act="sigmoid")])  # (34, 4) * (34, 1)
    cat = b.concat([gated.narrow(0, 3), p.narrow(30, 34)])  # 7, 4
    b.end_block(b.linear(b.flatten(cat), 5))
    return b.finish().init_weights(0)


CASES = {**GRAPHS, "general_shapes": general_shapes}


def build(graph, batch: int = BATCH, seed: int = 1):
    """The stand-in network ``build_engine`` makes of ``graph``, and the input it was fed."""
    from adapters.tensorrt import build_engine

    x = random_input(graph, batch, seed=seed)
    fake_tensorrt.FEED["input"] = x
    build_engine(graph, batch, max_aux_streams=0)
    network, _ = fake_tensorrt.Builder.built[-1]
    return network, x


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_transformer_graphs_match_the_oracle(trt, name):
    g = CASES[name]()
    network, x = build(g)
    chk = compare(network._outputs[0].value.numpy(), reference.run(g, x), 1e-4)
    assert chk.passed, f"TensorRT {trt.__version__} on {name}: {chk.reason}"
    layers = fake_tensorrt.describe(network)
    kinds = {layer["layer"] for layer in layers}
    assert {"IMatrixMultiplyLayer", "INormalizationLayer", "IShuffleLayer"} <= kinds  # TensorRT's own layers
    norms = [layer["attrs"] for layer in layers if layer["layer"] == "INormalizationLayer"]
    eps = sorted({op.eps for op in g.operators() if op.TYPE == "layernorm"})
    assert sorted({a["epsilon"] for a in norms}) == eps
    if trt.__version__.startswith("10"):  # fp32 statistics asked for where the bindings have the attribute
        assert {a["compute_precision"] for a in norms} == {"DataType.FLOAT"}
    else:
        assert all("compute_precision" not in a for a in norms)


def test_the_vit_runs_through_the_whole_adapter(trt, monkeypatch, tmp_path):
    """Build, engine cache, deserialize, tensor addresses and ``execute_async_v3`` on the stand-in and
    a host-memory CuPy, against the oracle (what a GPU cell does, short of the GPU)."""
    import adapters

    monkeypatch.setitem(sys.modules, "cupy", fake_tensorrt.fake_cupy())
    monkeypatch.setitem(sys.modules, "pynvml", None)
    g = GRAPHS["vit"]()
    x = random_input(g, BATCH, seed=5)
    fake_tensorrt.FEED["input"] = x
    for cached in (False, True):
        compiled = adapters.get("tensorrt").build(g, BATCH, "cuda", cache=tmp_path)
        assert compiled.info["engine_cached"] is cached
        chk = compare(compiled.run(x), reference.run(g, x), 1e-4)
        assert chk.passed, chk.reason


@pytest.mark.slow
@pytest.mark.parametrize("model", ["vit_tiny", "convnext_tiny"])
def test_the_zoo_transformers_match_the_oracle_at_batch_1(trt, model):
    from ios_core import models

    g = models.get(model).init_weights(0)
    network, x = build(g, batch=1, seed=0)
    chk = compare(network._outputs[0].value.numpy(), reference.run(g, x), 1e-4)
    assert chk.passed, f"TensorRT {trt.__version__} on {model}: {chk.reason}"


# ---- what the stand-in refuses, as TensorRT does -------------------------------------------------

def _net(version: str = "10"):
    m = fake_tensorrt.module(version)
    net = m.Builder(m.Logger()).create_network(0)
    fake_tensorrt.FEED["i"] = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) / 100
    return m, net, net.add_input("i", m.float32, (2, 3, 4, 5))


def _const(m, net, shape):
    return net.add_constant(shape, m.Weights(np.ones(shape, np.float32))).get_output(0)


def _softmax(m, net, x, axes):
    layer = net.add_softmax(x)
    layer.axes = axes
    return layer


def _shuffle(m, net, x, dims):
    layer = net.add_shuffle(x)
    layer.reshape_dims = dims
    return layer


def _concat(m, net, x, axis):
    layer = net.add_concatenation([x, _const(m, net, (2, 3, 4, 6))])
    layer.axis = axis
    return layer


def _norm(m, net, x, shape, axes):
    return net.add_normalization(x, _const(m, net, shape), _const(m, net, shape), axes)


REFUSED = {
    "matmul inner dimensions differ": lambda m, net, x: net.add_matrix_multiply(
        x, m.MatrixOperation.NONE, _const(m, net, (1, 3, 4, 5)), m.MatrixOperation.NONE),
    "matmul ranks differ": lambda m, net, x: net.add_matrix_multiply(
        x, m.MatrixOperation.NONE, _const(m, net, (5, 2)), m.MatrixOperation.NONE),
    "matmul batch axes neither equal nor 1": lambda m, net, x: net.add_matrix_multiply(
        x, m.MatrixOperation.NONE, _const(m, net, (1, 2, 5, 7)), m.MatrixOperation.NONE),
    "softmax axes mask outside the tensor": lambda m, net, x: _softmax(m, net, x, 1 << 4),
    "softmax of two axes": lambda m, net, x: _softmax(m, net, x, 0b1100),
    "normalization axes mask outside the tensor": lambda m, net, x: _norm(m, net, x, (1, 1, 1, 5), 1 << 5),
    "normalization scale of the wrong shape": lambda m, net, x: _norm(m, net, x, (1, 1, 1, 4), 1 << 3),
    "normalization scale of another rank": lambda m, net, x: _norm(m, net, x, (5,), 1 << 3),
    "elementwise of two ranks": lambda m, net, x: net.add_elementwise(x, _const(m, net, (4, 5)),
                                                                       m.ElementWiseOperation.SUM),
    "elementwise not broadcastable": lambda m, net, x: net.add_elementwise(x, _const(m, net, (1, 3, 2, 5)),
                                                                            m.ElementWiseOperation.SUM),
    "reshape to another volume": lambda m, net, x: _shuffle(m, net, x, (2, 3, 21)),
    "reduce axes mask outside the tensor": lambda m, net, x: net.add_reduce(x, m.ReduceOperation.SUM, 1 << 4, True),
    "slice outside the tensor": lambda m, net, x: net.add_slice(x, (0, 2, 0, 0), (2, 2, 4, 5), (1, 1, 1, 1)),
    "slice of another rank": lambda m, net, x: net.add_slice(x, (0, 0, 0), (2, 3, 4), (1, 1, 1)),
    "concatenation differing off its axis": lambda m, net, x: _concat(m, net, x, 1),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_the_standin_refuses_what_tensorrt_refuses(what):
    m, net, x = _net()
    with pytest.raises(fake_tensorrt.LayerError, match="refused"):
        REFUSED[what](m, net, x).get_output(0).value  # noqa: B018


def test_the_standin_computes_the_documented_defaults_and_transposes():
    m, net, x = _net("11")
    v = x.value
    assert np.allclose(net.add_softmax(x).get_output(0).value, v.softmax(1))  # default: the rank minus 3
    cat = net.add_concatenation([x, x]).get_output(0)
    assert tuple(cat.shape) == (2, 6, 4, 5)  # default axis: the rank minus 3
    assert tuple(_shuffle(m, net, x, (0, 0, -1)).get_output(0).shape) == (2, 3, 20)  # 0 copies, -1 infers
    w = _const(m, net, (1, 1, 6, 5))  # (.., 6, 5) transposed: a dense layer's weight
    mm = net.add_matrix_multiply(x, m.MatrixOperation.NONE, w, m.MatrixOperation.TRANSPOSE).get_output(0)
    assert tuple(mm.shape) == (2, 3, 4, 6) and np.allclose(mm.value, v.sum(-1, keepdim=True).expand(2, 3, 4, 6))
    norm = _norm(m, net, x, (1, 1, 4, 5), 0b1100).get_output(0).value  # the last two axes
    flat = v.reshape(2, 3, 20)
    want = (flat - flat.mean(-1, keepdim=True)) / (flat.var(-1, unbiased=False, keepdim=True) + 1e-5).sqrt()
    assert np.allclose(norm, want.reshape(2, 3, 4, 5) + 1, atol=1e-5)


def test_the_standin_refuses_repeated_layer_names():
    m, net, x = _net()
    for _ in range(2):
        layer = net.add_activation(x, m.ActivationType.RELU)
        layer.name = "same"
    builder = m.Builder(m.Logger())
    with pytest.raises(fake_tensorrt.LayerError, match=r"repeated layer names \['same'\]"):
        builder.build_serialized_network(net, builder.create_builder_config())


# ---- what the bindings have and lack -----------------------------------------------------------------

def test_every_call_the_lowering_needs_is_in_both_manifests():
    """The lowering uses only what TensorRT 10.16's and 11.1's bindings have (compute_precision, absent
    from 11, only where the layer has it)."""
    from adapters.tensorrt_tensors import GELU, GELU_COMPOSED, NEEDS

    names = {n for needs in NEEDS.values() for n in needs} | set(GELU_COMPOSED)
    names |= {n for own, composed in GELU.values() for n in (own, *composed)}
    for version, api in fake_tensorrt.MANIFEST["versions"].items():
        for name in sorted(names):
            owner, member = name.split(".") if "." in name else ("INetworkDefinition", name)
            table = api["classes"] if owner in api["classes"] else api["enums"]
            assert member in table[owner], (version, name)
    assert "compute_precision" in fake_tensorrt.MANIFEST["versions"]["10"]["classes"]["INormalizationLayer"]
    assert "compute_precision" not in fake_tensorrt.MANIFEST["versions"]["11"]["classes"]["INormalizationLayer"]


@pytest.mark.parametrize("missing,kind", [("INetworkDefinition.add_normalization", "layernorm"),
                                          ("INetworkDefinition.add_softmax", "softmax"),
                                          ("MatrixOperation.TRANSPOSE", "dense"),
                                          ("INetworkDefinition.add_matrix_multiply", "dense")])
def test_a_call_the_bindings_lack_refuses_the_graph_in_one_line(monkeypatch, missing, kind):
    from adapters.tensorrt import build_engine

    m = fake_tensorrt.module("11", without=(missing,))
    monkeypatch.setitem(sys.modules, "tensorrt", m)
    monkeypatch.setattr(m.Builder._classes["INetworkDefinition"], "_layer",
                        lambda *a, **k: pytest.fail("a layer was added before the refusal"))
    g = GRAPHS["vit"]()
    fake_tensorrt.FEED["input"] = random_input(g, 1, seed=0)
    with pytest.raises(NotImplementedError) as e:
        build_engine(g, 1, max_aux_streams=0)
    first = next(op for op in g.operators() if op.TYPE == kind)
    assert str(e.value) == (f"tensorrt: node {first.name!r} ({kind}) needs {missing}, which TensorRT "
                            f"{m.__version__} does not have")


def gelu_graph(kind: str):
    b = GraphBuilder(f"{kind}_block", (3, 4, 4))
    tokens = b.transpose(b.reshape(b.conv(b.input, 8, 1, act="identity"), (8, 16)), (1, 0))
    b.end_block(b.activation(b.dense(tokens, 8, act=kind), kind))
    return b.finish().init_weights(2)


@pytest.mark.parametrize("kind,own", [("gelu", "GELU_ERF"), ("gelu_tanh", "GELU_TANH")])
def test_gelu_is_composed_where_the_bindings_lack_it(monkeypatch, kind, own):
    for without, composed in (((), False), ((f"ActivationType.{own}",), True)):
        monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt.module("10", without=without))
        g = gelu_graph(kind)
        network, x = build(g)
        chk = compare(network._outputs[0].value.numpy(), reference.run(g, x), 1e-5)
        assert chk.passed, (without, chk.reason)
        acts = [layer["args"]["type"] for layer in fake_tensorrt.describe(network)
                if layer["layer"] == "IActivationLayer"]
        assert (f"ActivationType.{own}" in acts) is not composed
    if kind == "gelu":  # neither GELU_ERF nor ERF: refused, naming the node
        monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt.module("10", without=(
            "ActivationType.GELU_ERF", "UnaryOperation.ERF")))
        with pytest.raises(NotImplementedError, match=r"node '\d+' \(dense\) needs UnaryOperation.ERF"):
            build(gelu_graph(kind))


# ---- the CNN lowering, layer for layer ---------------------------------------------------------------

def cnn_graphs() -> dict:
    from ios_core import models
    from ios_core.models.coverage import coverage_graph
    from tests.runtime_helpers import mixed_graph

    return {"coverage": coverage_graph().init_weights(4), "mixed": mixed_graph().init_weights(3),
            "sample": models.get("sample").init_weights(3)}


def cnn_layer_lists() -> dict:
    """Each CNN graph's network at batch 2, layer by layer (``fake_tensorrt.describe``; weights by shape
    and digest), built on the current stand-in of TensorRT 10 (``tensorrt`` must be it)."""
    return {name: fake_tensorrt.describe(build(g)[0]) for name, g in cnn_graphs().items()}


def test_the_cnn_lowering_is_layer_for_layer_what_it_was(trt):
    golden = json.loads(GOLDEN.read_text())
    now = json.loads(json.dumps(cnn_layer_lists()))
    for name in golden:
        assert len(now[name]) == len(golden[name]), name
        for i, (a, b) in enumerate(zip(now[name], golden[name])):
            assert a == b, f"{name}: layer {i} differs"


def write_golden(path: Path = GOLDEN) -> None:
    lists = cnn_layer_lists()
    lines = ["{"]
    for k, (name, layers) in enumerate(lists.items()):
        body = ",\n".join("  " + json.dumps(layer, sort_keys=True) for layer in layers)
        lines.append(f"{json.dumps(name)}: [\n{body}\n]" + ("," if k < len(lists) - 1 else ""))
    lines.append("}")
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.modules["tensorrt"] = fake_tensorrt.module("10")
    write_golden(Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN)
