"""ios_core.quantize's calibration inputs: reproducible, distinct batches, and never a measured input."""

from __future__ import annotations

import numpy as np

from ios_bench.planning.options import MAX_SEED
from ios_core.inputs import random_input
from ios_core.quantize import CALIBRATION_SEED, calibration_inputs
from tests.adapter_graphs import mini_inception


def test_calibration_inputs_are_never_a_measured_input():
    g = mini_inception()
    calib = calibration_inputs(g, 1, 16)
    assert len(calib) == 16 and all(c.shape == (1, *g.input_shape) and c.dtype == np.float32 for c in calib)
    # every measured seed near the calibration root (the integers 1000..1015 were the calibration seeds
    # themselves), the ends of the CLI's range, and the sample inputs a scenario draws (input_seed + k)
    seeds = [*range(CALIBRATION_SEED - 4, CALIBRATION_SEED + 40), 0, 1, MAX_SEED, MAX_SEED + 1, MAX_SEED + 15]
    for seed in seeds:
        x = random_input(g, 1, seed)
        assert not any(np.array_equal(x, c) for c in calib), seed


def test_the_calibration_stream_is_reproducible_and_its_batches_differ():
    g = mini_inception()
    a, b = calibration_inputs(g, 2, 6), calibration_inputs(g, 2, 6)
    assert len(a) == 3 and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], a[1]) and not np.array_equal(a[1], a[2])


def test_the_nncf_record_names_what_nncf_quantize_was_called_with(monkeypatch):
    """The OpenVINO int8 record is made from the settings the call is given (NNCF's default for a CNN
    is the performance preset with fast bias correction, not the 'mixed preset' once recorded)."""
    import pytest

    nncf = pytest.importorskip("nncf")
    from ios_core import quantize

    called = {}

    def spy(model, dataset, **kwargs):
        called.update(kwargs)
        return model

    monkeypatch.setattr(nncf, "quantize", spy)
    _, record = quantize.nncf_quantize("model", [[np.zeros((1, 3, 4, 4), np.float32)]])
    assert called["preset"] == nncf.QuantizationPreset.PERFORMANCE and called["fast_bias_correction"] is True
    assert called["target_device"] == nncf.TargetDevice.ANY and called["subset_size"] == 1
    assert "preset performance" in record["method"] and "fast bias correction on" in record["method"]
    assert "mixed" not in record["method"]
    other = {**quantize.NNCF_SETTINGS, "preset": "mixed", "fast_bias_correction": False}
    _, record = quantize.nncf_quantize("model", [[np.zeros((1, 3, 4, 4), np.float32)]], other)
    assert called["preset"] == nncf.QuantizationPreset.MIXED and called["fast_bias_correction"] is False
    assert "preset mixed (symmetric weights, asymmetric activations)" in record["method"]
    assert "fast bias correction off" in record["method"]


def test_openvinos_float_precision_is_read_from_its_runtime_model_not_its_hint():
    """The runtime model's convolutions and matrix products decide (a plugin that reports the bf16 hint
    but runs f32 layers is fp32); layers that are neither (reorders, constants) do not count."""
    from ios_core.quantize import runtime_float_precision

    layers = {("Input", "f32"): 1, ("Reorder", "bf16"): 4, ("Const", "i32"): 9}
    assert runtime_float_precision({**layers, ("Convolution", "f32"): 10, ("FullyConnected", "f32"): 2}) == "fp32"
    assert runtime_float_precision({**layers, ("Convolution", "bf16"): 10, ("FullyConnected", "bf16"): 2}) == "bf16"
    assert runtime_float_precision({**layers, ("Convolution", "bf16"): 9, ("Convolution", "f32"): 1}) == \
        "mixed (bf16, fp32)"
    assert runtime_float_precision(layers) == "fp32"


def test_the_openvino_cell_reads_its_precision_from_the_runtime_model(monkeypatch):
    import pytest

    import adapters
    import adapters.openvino as ov_adapter

    ov = adapters.get("openvino")
    if ov.available("cpu"):
        pytest.skip(ov.available("cpu"))
    g = mini_inception().init_weights(0)
    info = ov.build(g, 1, "cpu", 1).info
    assert info["precision"] == "fp32" and info["precision_source"].startswith("read back")
    # a runtime model whose convolutions run in bf16 under an f32 hint: the cell says what runs
    real = ov_adapter.runtime_precisions
    monkeypatch.setattr(ov_adapter, "runtime_precisions", lambda cm: {
        (k, "bf16" if k == "Convolution" else p): n for (k, p), n in real(cm).items()})
    info = ov.build(g, 1, "cpu", 1).info
    assert info["inference_precision"] == "f32" and info["precision"] == "mixed (bf16, fp32)"
    assert "run in mixed (bf16, fp32)" in info["precision_note"]
