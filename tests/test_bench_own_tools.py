"""benchmarks/bench_own_tools.py: ONNX Runtime's own int8 recipe as the script builds it, what its
summary of a QDQ model counts, and bad input."""

from __future__ import annotations

import pytest

from tests.conftest import benchmark_module

from .adapter_graphs import mini_inception


@pytest.fixture(scope="module")
def bench():
    return benchmark_module("bench_own_tools")


def test_the_recipe_quantizes_every_convolution_with_s8_or_u8_activations_as_asked(bench):
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto

    from ios_core.lowering.onnx import export
    from ios_core.quantize import calibration_feeds

    g = mini_inception().init_weights(0)
    feeds, _, _ = calibration_feeds(g, 1, samples=2)
    convs = sum(op.TYPE == "conv" for op in g.operators())
    for u8, dtype in ((False, TensorProto.INT8), (True, TensorProto.UINT8)):
        model = bench.ort_recipe(export(g, 1), list(feeds), u8_activations=u8)
        summary = bench.qdq_summary(model)
        assert summary["wrapped"]["Conv"] == convs and summary["Q"] > 0 and summary["DQ"] > summary["Q"]
        zero_points = {i.data_type for i in model.graph.initializer if i.name == "input_zero_point"}
        assert zero_points == {dtype}, (u8, zero_points)


@pytest.mark.parametrize("argv", [["--what", "tvm"], ["--rounds", "0"], ["--models", "no_such_net"]])
def test_bad_input_is_one_line_exit_2(bench, capsys, argv):
    with pytest.raises(SystemExit) as e:
        bench.main(argv)
    assert e.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
