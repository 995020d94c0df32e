"""The IR -> ONNX exporter on its own, and ``ios-bench export``."""

from __future__ import annotations

import numpy as np
import pytest

from ios_core import models, reference
from ios_core.check import compare
from ios_core.ir import GraphBuilder, Value
from tests.adapter_graphs import mini_inception

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ios_core.lowering.onnx import DEFAULT_OPSET, export, opset_of  # noqa: E402


def _run(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["output"], {"input": x})[0]


@pytest.fixture(scope="module")
def graph():
    g = mini_inception()
    g.init_weights(3)
    return g


def test_export_records_opset_and_checks(graph):
    model = export(graph, batch_size=2)
    onnx.checker.check_model(model)
    assert opset_of(model) == DEFAULT_OPSET
    props = {p.key: p.value for p in model.metadata_props}
    assert props["ios_bench.opset"] == str(DEFAULT_OPSET) and props["ios_bench.batch_size"] == "2"
    assert [i.name for i in model.graph.input] == ["input"]
    assert [o.name for o in model.graph.output] == ["output"]
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, *graph.input_shape]
    ops = {n.op_type for n in model.graph.node}
    assert {"Conv", "Slice", "Concat", "Add", "Mul", "AveragePool", "MaxPool", "Gemm", "Reshape", "Tanh", "Sigmoid",
            "GlobalMaxPool", "GlobalAveragePool"} <= ops
    for node in (n for n in model.graph.node if n.op_type == "AveragePool"):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attrs["count_include_pad"] == 1


@pytest.mark.parametrize("opset", [13, 17, 19])
def test_export_opsets_run(graph, opset):
    x = reference.random_input(graph, 1, seed=0)
    model = export(graph, batch_size=1, opset=opset)
    assert opset_of(model) == opset
    assert compare(_run(model, x), reference.run(graph, x)).passed


def test_dynamic_batch(graph):
    model = export(graph, batch_size=None)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    for batch in (1, 3):
        x = reference.random_input(graph, batch, seed=batch)
        assert compare(_run(model, x), reference.run(graph, x)).passed


def test_export_saves_file(graph, tmp_path):
    path = tmp_path / "g.onnx"
    model = export(graph, path=path)
    assert onnx.load(str(path)) == model


def test_exit_node_that_passes_its_input_through():
    """A graph whose output is the input itself and one whose exit is a channel slice."""
    b = GraphBuilder("passthrough", (4, 3, 3))
    b.end_block(b.identity(b.input))
    g = b.finish()
    x = reference.random_input(g, 1)
    model = export(g)
    assert [n.op_type for n in model.graph.node] == ["Identity"]
    assert compare(_run(model, x), x).passed
    b = GraphBuilder("slice_exit", (4, 3, 3))
    c = b.conv(b.input, 6, 1)
    b.end_block(Value(c.node, 2, 5))
    g = b.finish()
    g.init_weights(0)
    x = reference.random_input(g, 2)
    assert compare(_run(export(g, 2), x), reference.run(g, x)).passed


def test_bad_arguments(graph):
    with pytest.raises(ValueError, match="opset"):
        export(graph, opset=9)
    with pytest.raises(ValueError, match="batch_size"):
        export(graph, batch_size=0)
    with pytest.raises(ValueError, match="no weights"):
        export(models.get("sample", input_shape=(8, 5, 5)))




def test_cli_export(tmp_path, run_cli):
    path = tmp_path / "sample.onnx"
    code, out, _ = run_cli(["export", "sample", "-o", str(path), "--batch", "2"])
    assert code == 0 and "opset 17" in out and "batch 2" in out
    model = onnx.load(str(path))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2
    # The exported weights are the seeded ones every framework gets.
    g = models.get("sample")
    g.init_weights(0)
    x = reference.random_input(g, 2, seed=1)
    assert compare(_run(model, x), reference.run(g, x)).passed


def test_cli_export_graph_json_with_saved_weights(tmp_path, run_cli, graph):
    graph.save(tmp_path / "g.json")
    code, out, _ = run_cli(["export", str(tmp_path / "g.json"), "-o", str(tmp_path / "g.onnx"), "--dynamic-batch"])
    assert code == 0 and "saved weights" in out and "dynamic" in out
    x = reference.random_input(graph, 2)
    np.testing.assert_allclose(_run(onnx.load(str(tmp_path / "g.onnx")), x), reference.run(graph, x), atol=1e-4)


@pytest.mark.parametrize("args,message", [
    (["export", "nosuch", "-o", "x.onnx"], "unknown model"),
    (["export", "sample"], "missing -o"),
    (["export", "sample", "-o", "x.onnx", "--batch", "0"], "--batch"),
    (["export", "sample", "-o", "x.onnx", "--batch", "two"], "--batch"),
    (["export", "sample", "-o", "x.onnx", "--opset", "9"], "--opset"),
    (["export", "sample", "-o", "/nonexistent-dir/x.onnx"], "does not exist"),
    (["export", "sample", "-o", "x.txt"], ".onnx"),
    (["export", "missing.json", "-o", "x.onnx"], "no such file"),
])
def test_cli_export_bad_input(tmp_path, run_cli, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("error:")
    assert not list(tmp_path.iterdir())
