"""int8 on the ``torch`` adapter: post-training static quantization in FX graph mode (prepare_fx /
convert_fx, the x86 backend's default qconfig mapping), calibrated on the harness's seeded inputs,
read back from the converted module and checked against the fp32 oracle at int8's bound."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
from ios_core.check import check_precision, tolerance_for
from ios_core.inputs import random_input
from ios_core.quantize import CALIBRATION_SAMPLES, calibration_inputs, inputs_note
from tests.adapter_graphs import mini_inception

# quantized cat with inputs of different scales warns once per call site: the check judges the output
pytestmark = pytest.mark.filterwarnings("ignore:All inputs of this cat operator:UserWarning")


def _case(batch=8):
    from ios_core import reference

    g = mini_inception()
    g.init_weights(0)
    x = random_input(g, batch, seed=0)
    return g, x, reference.run(g, x)


def _convs(graph) -> int:
    from ios_core.ir import Conv

    return sum(isinstance(op, Conv) for op in graph.operators())


def test_a_torch_int8_cell_is_calibrated_read_back_checked_and_kept_by_the_build_cache(tmp_path):
    import torch

    from adapters.pytorch import to_module
    from ios_bench.running.task_cell import precision_problem
    from ios_core.quantize import torch_quantize

    torch_ = adapters.get("torch")
    g, x, ref = _case(8)
    c = torch_.build(g, 8, threads=1, precision="int8", cache_dir=str(tmp_path))
    assert c.info["precision"] == "int8" and precision_problem(torch_, c.info, "int8") is None
    kernels = c.info["integer_kernels"]
    assert kernels["conv"] == _convs(g) and kernels["float_conv"] == 0 and kernels["other"] > 0
    calib = c.info["calibration"]
    assert "prepare_fx" in calib["tool"] and calib["backend"] == "x86" and "HistogramObserver" in calib["method"]
    # the one calibration source every int8 model uses: 16 seeded inputs in batches of the cell's size
    assert calib["samples"] == CALIBRATION_SAMPLES
    assert calib["inputs"] == inputs_note(len(calibration_inputs(g, 8))) and calib["cache"] == "cold"
    out = c.run(x)
    # calibrated on exactly those inputs: the quantizer over calibration_inputs gives the same module
    direct, _, _ = torch_quantize(to_module(g), [[f] for f in calibration_inputs(g, 8)])
    # ... and the comparison tells calibrations apart: the same quantizer over other inputs (the
    # measured one, or the calibration inputs scaled) gives another module, so a quantizer that ignored
    # its feeds, or an adapter that calibrated on anything else, fails here
    measured, _, _ = torch_quantize(to_module(g), [[x]])
    scaled, _, _ = torch_quantize(to_module(g), [[3 * f] for f in calibration_inputs(g, 8)])
    with torch.inference_mode():
        assert np.array_equal(direct(torch.from_numpy(x)).numpy(), out)
        for other in (measured, scaled):
            assert not np.array_equal(other(torch.from_numpy(x)).numpy(), out)
    res = check_precision(out, ref, "int8")
    assert res.passed, res.reason
    assert res.max_rel_err > tolerance_for("fp32")  # it really computed in int8: fp32's bound would fail it
    # a later round: the calibration's observers come from the cache, the same module bit for bit
    warm = torch_.build(g, 8, threads=1, precision="int8", cache_dir=str(tmp_path))
    assert warm.info["calibration"]["cache"] == "warm" and warm.info["integer_kernels"] == kernels
    assert np.array_equal(warm.run(x), out)


def test_a_torch_int8_model_with_one_conv_scale_corrupted_fails_its_check():
    import torch
    from torch.ao.nn.quantized.modules.conv import _ConvNd

    g, x, ref = _case(8)
    c = adapters.get("torch").build(g, 8, threads=1, precision="int8", cache_dir="off")
    assert check_precision(c.run(x), ref, "int8").passed
    name, conv = next((n, m) for n, m in c.fn.named_modules() if isinstance(m, _ConvNd))
    w = conv.weight()
    bad = torch._make_per_channel_quantized_tensor(w.int_repr(), w.q_per_channel_scales() * 10,
                                                   w.q_per_channel_zero_points(), w.q_per_channel_axis())
    conv.set_weight_bias(bad, conv.bias())  # one layer's weight scale 10x off, repacked as convert_fx packs it
    res = check_precision(c.run(x), ref, "int8")
    assert not res.passed, f"{name}: a weight scale 10x off passed the int8 check"


def test_a_torch_model_whose_quantization_left_no_integer_convolution_is_not_recorded_int8(monkeypatch):
    from torch.ao.quantization import QConfigMapping

    import ios_core.quantize as quantize
    from ios_bench.running.task_cell import precision_problem

    default = quantize.torch_qconfig_mapping

    # a mapping that quantizes the linear layers (and their relu), no convolution
    def linear_only(backend="x86", weights_only=False):
        return QConfigMapping().set_module_name_regex(r".*\.(linear|act)$", default(backend).global_qconfig)

    monkeypatch.setattr(quantize, "torch_qconfig_mapping", linear_only)
    torch_ = adapters.get("torch")
    g, x, ref = _case(4)
    c = torch_.build(g, 4, threads=1, precision="int8", cache_dir="off")
    kernels = c.info["integer_kernels"]
    assert kernels["conv"] == 0 and kernels["float_conv"] == _convs(g) and kernels["other"] > 0
    assert c.info["precision"] == "fp32"  # integer linears do not make it int8
    assert check_precision(c.run(x), ref, "int8").passed  # the check alone would not see it: the read-back does
    reason = precision_problem(torch_, c.info, "int8")
    assert reason.startswith("precision: asked for int8, torch computes in fp32") and "no convolution" in reason


def test_torch_compile_int8_is_refused_with_its_reason_and_list_shows_how_torch_gets_int8():
    from ios_bench.commands.list import framework_rows

    tc = adapters.get("torch-compile")
    reason = tc.precision_reason("int8", "cpu")
    assert reason.startswith("torch-compile int8 on cpu: no:") and "torchao" in reason
    with pytest.raises(ValueError, match="torchao"):
        tc.build(_case(1)[0], 1, threads=1, precision="int8")
    rows = {r["name"]: r for r in framework_rows()}
    assert "prepare_fx" in rows["torch"]["precisions"]["cpu"]["int8"]
    assert adapters.get("torch").precision_reason("int8", "cuda") is not None  # CPU only


@pytest.mark.parametrize("capability, refused", [((7, 5), True), ((8, 0), False), ((9, 0), False)])
def test_torch_bf16_on_a_gpu_before_ampere_is_refused_in_one_line(monkeypatch, capability, refused):
    """bf16 below compute capability 8.0 has no cuDNN kernels: PyTorch would fall back to slow
    convolutions outside cuDNN (pytorch/pytorch#81139); the cell is refused, never run so. fp16 runs there."""
    import torch

    from adapters import pytorch

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "a GPU")
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91900)
    flags = [(torch.backends.cuda.matmul, "allow_tf32"), (torch.backends.cudnn, "allow_tf32"),
             (torch.backends.cudnn, "benchmark")]
    before = [getattr(module, name) for module, name in flags]
    try:
        assert pytorch._cuda_setup("fp16")["tf32"] is False
        if refused:
            wanted = r"^torch: bf16 needs a GPU of compute capability 8\.0 .* this one is 7\.5$"
            with pytest.raises(RuntimeError, match=wanted):
                pytorch._cuda_setup("bf16")
        else:
            assert pytorch._cuda_setup("bf16")["cudnn_benchmark"] is True
    finally:  # the process's flags as they were
        for (module, name), value in zip(flags, before):
            setattr(module, name, value)


def test_the_quantized_engine_is_a_build_option_kept_apart_by_the_cache_and_ignored_at_other_precisions(tmp_path):
    """``torch:quantized_engine=onednn``: the engine and its default qconfig (randwire's depthwise convolutions
    ran 16x faster on onednn than on x86's choice, docs/precision.md), recorded, cached under its own key; an
    fp32 cell of the same sweep takes the option and ignores it, as every int8-only option."""
    import torch

    torch_ = adapters.get("torch")
    g, x, ref = _case(4)
    engine = torch.backends.quantized.engine
    try:
        x86 = torch_.build(g, 4, threads=1, precision="int8", cache_dir=str(tmp_path))
        c = torch_.build(g, 4, threads=1, precision="int8", cache_dir=str(tmp_path), quantized_engine="onednn")
        assert x86.info["quantized_engine"] == "x86"
        assert c.info["quantized_engine"] == "onednn" and c.info["calibration"]["backend"] == "onednn"
        assert c.info["calibration"]["cache"] == "cold"  # not x86's observers: its own key
        assert c.info["precision"] == "int8" and check_precision(c.run(x), ref, "int8").passed
        with pytest.raises(ValueError, match="no quantized engine 'qnnpackx'"):
            torch_.build(g, 4, threads=1, precision="int8", cache_dir="off", quantized_engine="qnnpackx")
    finally:
        torch.backends.quantized.engine = engine
    fp32 = torch_.build(g, 4, threads=1, cache_dir="off", quantized_engine="onednn", calibration_samples=8)
    assert fp32.info["precision"] == "fp32" and check_precision(fp32.run(x), ref, "fp32").passed


def test_torch_bf16_is_read_back_from_the_kernels_one_call_dispatched():
    """The eager cell's precision is what its convolutions and matrix products were given in a call,
    counted: every one of the graph's (counted from the IR, not from the module) on bfloat16."""
    g, _, _ = _case(batch=1)
    info = adapters.get("torch").build(g, 1, "cpu", 1, precision="bf16").info
    heavy = _convs(g) + sum(1 for op in g.operators() if op.TYPE == "linear")
    assert info["precision"] == "bf16" and info["heavy_op_dtypes"] == {"bfloat16": heavy}
    assert info["precision_source"].startswith("read back")
    fp32 = adapters.get("torch").build(g, 1, "cpu", 1).info
    assert fp32["precision"] == "fp32" and fp32["heavy_op_dtypes"] == {"float32": heavy}


def test_torch_compile_says_its_precision_is_requested_not_read_back(monkeypatch):
    """torch-compile's precision is the dtype its module was cast to (inductor's kernels are not read):
    labelled as requested, as every path that does not read its engine back is (issue 57)."""
    import torch

    monkeypatch.setattr(torch, "compile", lambda module, **kw: module)  # the label, not inductor's build
    g, _, _ = _case(batch=1)
    info = adapters.get("torch-compile").build(g, 1, "cpu", 1, precision="bf16", cache_dir="off").info
    assert info["precision"] == "bf16" and info["precision_source"].startswith("requested, not read back")


def test_a_module_holding_bf16_weights_that_computes_in_fp32_reads_fp32():
    """Parameters cast to bfloat16 say nothing of what runs: a forward that casts back to float32
    before its convolution is read as fp32 (the parameters alone would have said bf16)."""
    import torch

    from adapters.pytorch import _computes_in, computes_in_dispatched

    class CastsBack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)

        def forward(self, x):
            return torch.nn.functional.conv2d(x.float(), self.conv.weight.float(), self.conv.bias.float())

    m = CastsBack().to(torch.bfloat16)
    x = torch.zeros((1, 3, 8, 8), dtype=torch.bfloat16)
    assert _computes_in(m) == "bf16"  # what the parameters say
    assert computes_in_dispatched(m, x) == ("fp32", {"float32": 1})
    assert computes_in_dispatched(m.conv, x) == ("bf16", {"bfloat16": 1})
