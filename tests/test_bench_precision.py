"""benchmarks/bench_precision.py: the one sweep it runs, and which frameworks it names by default."""

from __future__ import annotations

import pytest

from tests.conftest import benchmark_module


@pytest.fixture(scope="module")
def bench():
    return benchmark_module("bench_precision")


def _frameworks(capsys, bench, *argv) -> list[str]:
    assert bench.main(["--dry-run", *argv]) == 0
    cmd = capsys.readouterr().out.split()
    return cmd[cmd.index("--frameworks") + 1].split(",")


def test_the_default_names_tflite_which_the_default_sweep_leaves_out_and_never_the_slow_ones(bench, capsys):
    """TensorFlow's int8 is TFLite's (tensorflow refuses int8): a precision bench without tflite would
    have no TensorFlow int8 cell at all."""
    from ios_bench.planning.plan import OPT_IN_FRAMEWORKS, SLOW_FRAMEWORKS

    names = _frameworks(capsys, bench)
    assert "tflite" in names and "tflite" in OPT_IN_FRAMEWORKS
    assert not set(names) & set(SLOW_FRAMEWORKS)
    assert {"torch", "tensorflow", "onnxruntime", "openvino"} <= set(names)
    assert "ios" not in names and "tensorrt" not in names  # IOS comes as schedules; tensorrt runs on cuda only


def test_the_users_frameworks_are_the_sweeps(bench, capsys):
    assert _frameworks(capsys, bench, "--frameworks", "openvino,tflite") == ["openvino", "tflite"]
