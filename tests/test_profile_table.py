"""The per-operator profile table of an imported model names each row's ONNX nodes (the model's own
names, ios_core.ir.meta), beside our operator: cut with an ellipsis in the console, whole in the JSON;
a graph without names (the zoo's) keeps the table it had."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from adapters.base import OpTime  # noqa: E402
from ios_bench.profiling import attribute  # noqa: E402
from ios_bench.reporting.profile_table import LABEL_WIDTH, render, table_rows  # noqa: E402
from ios_core.frontend import onnx as frontend  # noqa: E402

from .test_frontend_onnx_names import named_model  # noqa: E402
from .test_profile_frameworks import _cli, pair_graph  # noqa: E402

LONG = "encoder/stage.0/block.1/depthwise_separable/pointwise/Conv"  # longer than the column


def long_named_model():
    model = named_model()
    model.graph.node[6].name = LONG  # the 1x1 conv reading the Concat
    return model


def fake(graph) -> dict:
    """One framework's profile: the first conv alone, the second and third fused (one row)."""
    rows = [OpTime("1.conv:0", 1.0, ("1.conv:0",), "Conv"), OpTime("3.conv:1", 0.5, ("2.conv:1", "3.conv:2"), "Conv"),
            OpTime("5.gemm:3", 0.25, ("5.gemm:3",), "Gemm")]
    return {"framework": "onnxruntime", **attribute(graph, rows, latency_ms=2.0, profiled_ms=2.1)}


def test_an_imported_models_rows_carry_its_onnx_node_names():
    g = frontend.load(long_named_model())
    header, rows = table_rows(g, [fake(g)])
    assert header == ["operator", "ONNX nodes", "onnxruntime"]
    by_op = {r[0].split(" ")[0]: r for r in rows}
    assert by_op["1"][1:] == ["Conv_0, BatchNormalization_1, (unnamed Relu -> relu_out)"[:LABEL_WIDTH - 1] + "…",
                              "1.000 50.0%"]
    assert by_op["2"][1:] == ["Pad_2, Conv_3", "(in 3)"]  # where its time is, under its own names
    assert by_op["3"][1] == ("Concat_4, " + LONG)[:LABEL_WIDTH - 1] + "…" and by_op["3"][2].endswith("(with 2)")
    assert by_op["4"][1:] == ["GlobalAveragePool_6", "-"] and by_op["5"][1] == "MatMul_8, Add_9"
    assert by_op["end-to-end"][1:] == ["", "2.000 100%"]  # the footers leave the names column empty
    assert max(len(r[1]) for r in rows) == LABEL_WIDTH


def test_the_json_rows_keep_the_names_whole():
    g = frontend.load(long_named_model())
    rows = {r["name"]: r for r in fake(g)["rows"]}
    assert rows["1"]["source_nodes"] == ["Conv_0", "BatchNormalization_1", "(unnamed Relu -> relu_out)"]
    assert rows["2+3"]["source_nodes"] == ["Pad_2", "Conv_3", "Concat_4", LONG]
    assert rows["5"]["source_nodes"] == ["MatMul_8", "Add_9"]


def test_a_graph_without_names_keeps_its_table():
    pair = pair_graph()
    res = {"framework": "a", **attribute(pair, [OpTime("ios:1", 1.0, ("ios:1",))], 2.0, 2.1)}
    header, rows = table_rows(pair, [res])
    assert header == ["operator", "a"] and all(len(r) == 2 for r in rows)
    assert "source_nodes" not in res["rows"][0]
    assert "ONNX nodes" not in render(pair, [res]) and rows[0] == ["1 (conv 3x3)", "1.000 50.0%"]


def test_profile_of_an_onnx_file_names_its_nodes_in_the_table_and_the_json(tmp_path, capsys):
    path = tmp_path / "named.onnx"
    path.write_bytes(long_named_model().SerializeToString())
    args = ["profile", "--model", str(path), "--frameworks", "onnxruntime", "--threads", "1", "--warmup", "1",
            "--repeat", "2"]
    code, out, err = _cli(capsys, *args)
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("operator"))
    assert header.split()[:3] == ["operator", "ONNX", "nodes"]
    assert any(line.startswith("5 (other)") and "MatMul_8, Add_9" in line for line in out.splitlines())
    assert "…" in out and LONG not in out.split("ms per inference")[0]  # cut in the console
    code, out, err = _cli(capsys, *args, "--format", "json")
    assert code == 0, err
    names = [n for row in json.loads(out)[0]["rows"] for n in row.get("source_nodes", [])]
    assert LONG in names and "MatMul_8" in names  # whole in the JSON
