"""IOS at a reduced precision on the CPU (issue 46; docs/precision.md): every piece of a schedule compiled
at the cell's precision by its kernel provider (ONNX Runtime int8, OpenVINO int8 and bf16), int8
calibrated per piece on the activations the seeded calibration inputs produce there in the fp32 graph,
the precision read back from the libraries, the search's stage costs measured at it (never fp32's
figures), and a corrupted quantization failing the check."""

from __future__ import annotations

import numpy as np
import pytest

import adapters
from ios_core.check import check_precision, tolerance_for
from ios_core.inputs import random_input
from ios_core.models.coverage import level_schedule
from ios_core.runtime import providers
from tests.adapter_graphs import mini_inception
from tests.runtime_helpers import sequential_schedule

IOS = adapters.get("ios")


def _need(provider: str, quantizer: str | None = None) -> None:
    reason = providers.get(provider).available()
    if reason:
        pytest.skip(reason)
    if quantizer:
        pytest.importorskip(quantizer)


@pytest.fixture(scope="module")
def case():
    """mini_inception (branches, slices, grouped and depthwise convs) with a parallel schedule, a
    batch of 4 seeded inputs and the oracle's output."""
    from ios_core import reference

    g = mini_inception()
    g.init_weights(0)
    x = random_input(g, 4, seed=0)
    return g, level_schedule(g), x, reference.run(g, x)


# ---- what IOS offers, per provider -------------------------------------------------------------


def test_ios_declares_each_precision_per_kernel_provider():
    table = IOS.precisions("cpu")
    assert not table["int8"].startswith(("no:", "not yet:")) and "onnxruntime:" in table["int8"]
    assert not table["bf16"].startswith(("no:", "not yet:")) and "openvino:" in table["bf16"]
    assert IOS.precision_reason("int8", "cpu", provider="onnxruntime") is None
    assert IOS.precision_reason("bf16", "cpu", provider="openvino") is None
    assert "no:" in IOS.precision_reason("bf16", "cpu", provider="onnxruntime")
    assert IOS.precision_reason("bf16", "cpu", provider="torch") is None  # tests/test_precision_ios_torch.py
    assert IOS.precision_reason("int8", "cpu", provider="torch") is not None


def test_a_provider_that_cannot_give_a_precision_refuses_the_build_and_the_sweep_skips_it(case):
    from ios_bench.planning.probing import provider_precision_reason

    g, s, _, _ = case
    with pytest.raises(ValueError, match="bf16"):
        IOS.build(s, 1, threads=1, provider="onnxruntime", precision="bf16")
    with pytest.raises(ValueError, match="int8"):
        IOS.build(s, 1, threads=1, provider="torch", precision="int8")
    probe = {"provider_precisions": {n: providers.get(n).precisions() for n in providers.names()}}
    assert "no:" in provider_precision_reason(probe, "onnxruntime", "bf16", "cpu")
    assert provider_precision_reason(probe, "onnxruntime", "int8", "cpu") is None
    assert provider_precision_reason(probe, "torch", "int8", "cpu") is not None
    assert provider_precision_reason(probe, "torch", "fp32", "cpu") is None


def test_a_request_no_ios_provider_of_the_sweep_can_give_is_one_line():
    from ios_bench.commands.run import precision_offer_problem

    assert "no framework" in precision_offer_problem(["int8"], [], None, ["cpu"], ["torch"])
    assert "no framework" in precision_offer_problem(["bf16"], [], None, ["cpu"], ["onnxruntime"])
    assert precision_offer_problem(["int8"], [], None, ["cpu"], ["torch", "onnxruntime"]) is None
    assert precision_offer_problem(["int8"], [], None, ["cpu"]) is None  # every provider: one offers it


def test_an_int8_schedule_is_searched_and_kept_apart_from_the_fp32_one():
    from ios_bench.planning.cells import Cell
    from ios_bench.planning.plan import Plan
    from ios_bench.running.schedules import schedule_path

    plan = Plan()
    fp32 = Cell("m", "m", 1, "ios-both-onnxruntime", "cpu", "both", "ios", provider="onnxruntime")
    int8 = Cell("m", "m", 1, "ios-both-onnxruntime", "cpu", "both", "ios", provider="onnxruntime", precision="int8")
    assert schedule_path(plan, int8) != schedule_path(plan, fp32) and schedule_path(plan, int8).endswith("-int8.json")
    assert not schedule_path(plan, fp32).endswith("fp32.json")  # an fp32 cell keeps the path it always had


def test_the_same_schedule_at_two_precisions_is_two_measurements():
    from ios_bench.planning.cells import Cell, schedule_key
    from ios_bench.running.schedules import same_schedules

    cells = [Cell("m", "m", 1, schedule_key(s, "onnxruntime"), "cpu", s, "ios", provider="onnxruntime", precision=p)
             for s in ("sequential", "both") for p in ("fp32", "int8")]
    scheds = {c.key: {"hash": "aaaa", "path": f"schedules/{c.framework}-{c.precision}.json"} for c in cells}
    same = same_schedules(cells, scheds)
    assert len(same) == 2 and all(k.endswith("|int8") == v.endswith("|int8") for k, v in same.items())


# ---- int8 and bf16 cells on each provider ------------------------------------------------------


@pytest.mark.parametrize("provider,quantizer", [("onnxruntime", None), ("openvino", "nncf")])
def test_an_ios_int8_cell_computes_in_int8_and_passes_its_check(case, provider, quantizer):
    from ios_bench.running.task_cell import precision_problem

    _need(provider, quantizer)
    g, s, x, ref = case
    c = IOS.build(s, 4, threads=2, provider=provider, precision="int8")
    assert c.info["pieces"] > 3  # a parallel schedule: many pieces, each quantized
    assert c.info["precision"] == "int8" and precision_problem(IOS, c.info, "int8") is None
    calib = c.info["calibration"]
    assert calib["samples"] == 16 and "SeedSequence(1000, spawn_key=(i,))" in calib["inputs"] and calib["method"]
    assert ("quantize_static" if provider == "onnxruntime" else "nncf.quantize") in calib["tool"]
    assert "fp32 graph" in calib["stage_inputs"]
    kernels = c.runtime.program.kernels
    assert all(k.info.get("calibration") for k in kernels)
    res = check_precision(c.run(x), ref, "int8")
    assert res.passed, res.reason
    assert res.max_rel_err > tolerance_for("fp32")  # it really computed in int8: fp32's bound would fail it


@pytest.mark.parametrize("provider,quantizer", [("onnxruntime", None), ("openvino", "nncf")])
def test_an_ios_int8_cell_records_the_heavy_operators_its_pieces_left_in_float(case, provider, quantizer):
    """issue 57: "int8" means at least one integer convolution; how many stayed in float is recorded for IOS
    as for every whole-model adapter: every convolution of the graph an integer kernel of some piece or
    counted in float (OpenVINO's CPU plugin keeps mini_inception's grouped/depthwise ones in f32)."""
    from ios_core.ir import Conv

    _need(provider, quantizer)
    g, s, _, _ = case
    c = IOS.build(s, 4, threads=1, provider=provider, precision="int8")
    got = c.info["float_ops"]
    assert set(got) == {"conv", "matmul"} and all(isinstance(v, int) and v >= 0 for v in got.values())
    kernels = c.runtime.program.kernels
    integer = sum(k.info["integer_convolutions"] if provider == "openvino" else k.info["integer_kernels"]["conv"]
                  for k in kernels)
    assert integer > 0 and integer + got["conv"] == sum(isinstance(op, Conv) for op in g.operators())


def test_a_programs_float_ops_sum_its_pieces_and_count_a_silent_piece_as_float():
    from types import SimpleNamespace

    from ios_core.runtime.emit_provider import float_ops

    pieces = [SimpleNamespace(info={"float_ops": {"conv": 2, "matmul": 1}, "convolutions": 5}),
              SimpleNamespace(info={"float_ops": {"conv": 0, "matmul": 3}, "convolutions": 4}),
              SimpleNamespace(info={"convolutions": 3})]  # no read-back: it computes in float
    assert float_ops(pieces) == {"conv": 5, "matmul": 4}
    assert float_ops([]) == {"conv": 0, "matmul": 0}


@pytest.mark.parametrize("provider,quantizer", [("onnxruntime", None), ("openvino", "nncf")])
def test_the_quantized_pieces_are_kept_in_the_build_cache_and_reused(case, provider, quantizer, tmp_path):
    _need(provider, quantizer)
    g, s, x, _ = case
    cold = IOS.build(s, 4, threads=1, provider=provider, precision="int8", cache_dir=str(tmp_path))
    warm = IOS.build(s, 4, threads=1, provider=provider, precision="int8", cache_dir=str(tmp_path))
    assert cold.info["calibration"]["cache"] == "cold" and warm.info["calibration"]["cache"] == "warm"
    assert warm.info["build_cache"]["reused"] and warm.info["precision"] == "int8"
    models = list((tmp_path / f"ios-int8-{provider}").glob("*.onnx" if provider == "onnxruntime" else "*.xml"))
    assert len(models) == cold.info["pieces"]  # one quantized model per piece
    np.testing.assert_array_equal(warm.run(x), cold.run(x))


def test_a_changed_onnxruntime_setting_quantizes_the_pieces_again(case, tmp_path, monkeypatch):
    """The ONNX Runtime provider's stored pieces are keyed by every setting quantize_static is given
    (ORT_SETTINGS), a CNN's too: a changed setting never reuses a piece quantized otherwise."""
    _need("onnxruntime")
    import ios_core.quantize as q

    g, s, x, _ = case

    def calibration():
        return IOS.build(s, 4, threads=1, provider="onnxruntime", precision="int8",
                         cache_dir=str(tmp_path)).info["calibration"]

    assert calibration()["cache"] == "cold" and calibration()["cache"] == "warm"
    monkeypatch.setitem(q.ORT_SETTINGS, "per_channel", False)
    assert calibration()["cache"] == "cold"  # per tensor now: quantized again, not the per-channel pieces
    monkeypatch.undo()
    assert calibration()["cache"] == "warm"


def test_openvino_bf16_compiles_every_piece_in_bf16(case):
    _need("openvino")
    g, s, x, ref = case
    from ios_core.runtime.providers.openvino import core

    if "BF16" not in core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        pytest.skip("this CPU's OpenVINO plugin has no bf16 inference")
    c = IOS.build(s, 4, threads=2, provider="openvino", precision="bf16")
    assert {k.info["inference_precision"] for k in c.runtime.program.kernels} == {"bf16"}
    assert c.info["precision"] == "bf16" and c.info["provider_settings"]["INFERENCE_PRECISION_HINT"] == "bf16"
    res = check_precision(c.run(x), ref, "bf16")
    assert res.passed and res.max_rel_err > tolerance_for("fp32") / 100  # not an fp32 result relabelled


def test_a_piece_is_calibrated_on_what_reaches_it_in_the_fp32_graph(case):
    """Each piece's calibration feeds are the fp32 graph's activations at its inputs for the seeded
    calibration inputs; a one-piece (sequential) schedule is quantized exactly as the onnxruntime
    adapter quantizes the whole model."""
    _need("onnxruntime")
    from ios_core.quantize import calibration_inputs
    from ios_core.runtime.emit_provider import plan_for_provider, stage_calibration
    from ios_core.runtime.program import graph_stages
    from tests.test_runtime_providers import _values

    g, s, x, _ = case
    plan = plan_for_provider(graph_stages(s), [s.input], [s.exit_node], 4)
    batches = calibration_inputs(s, 4)
    feeds = stage_calibration(plan, providers.get("onnxruntime"), 1, batches)
    inner = [p for p in plan.pieces() if any(i.name != s.input.name for i in p.inputs)]
    assert inner
    for b, xb in enumerate(batches):
        want = _values(s, xb)
        for piece in inner:
            for node, got in zip(piece.inputs, feeds[piece.name][b]):
                np.testing.assert_allclose(got, want[node.name], rtol=1e-4, atol=1e-4 * np.abs(want[node.name]).max())
    whole = adapters.get("onnxruntime").build(g, 4, threads=1, precision="int8").run(x)
    one = IOS.build(sequential_schedule(g), 4, threads=1, provider="onnxruntime", precision="int8")
    assert one.info["pieces"] == 1
    np.testing.assert_array_equal(one.run(x), whole)


# ---- never a silent fallback, and a broken quantization fails ----------------------------------


def test_a_piece_whose_library_computes_in_float_is_read_back_and_fails_the_cell(case, monkeypatch):
    from ios_bench.running.task_cell import precision_problem
    from ios_core import quantize

    _need("onnxruntime")
    g, s, x, _ = case
    real = quantize.ort_quantize

    def did_nothing(model, feeds, method="minmax", **kw):  # a quantizer that hands back the float model
        _, calib = real(model, feeds, method, **kw)
        return model, calib

    # the real read-back (ONNX Runtime's optimized graph of each piece, ios_core.quantize.integer_kernels)
    # finds no integer convolution: not a stubbed read-back
    monkeypatch.setattr(quantize, "ort_quantize", did_nothing)
    c = IOS.build(s, 4, threads=1, provider="onnxruntime", precision="int8")
    assert c.info["precision"] == "fp32" and "pieces" in c.info["precision_note"]
    assert precision_problem(IOS, c.info, "int8").startswith("precision: asked for int8, ios computes in fp32")


def test_an_ios_int8_cell_with_one_stages_scale_corrupted_fails_its_check(case, monkeypatch):
    """The corrupted-scale case of tests/test_precision.py on one piece of a schedule: the weight scale
    of the first convolution of one piece multiplied by 10 (its QDQ model, as the quantizer wrote it)."""
    import onnx
    from onnx import numpy_helper

    from ios_core import quantize

    _need("onnxruntime")
    g, s, x, ref = case
    real = quantize.ort_quantize
    hit = []

    def corrupted(model, feeds, method="minmax", **kw):
        out, calib = real(model, feeds, method, **kw)
        conv = next((n for n in out.graph.node if n.op_type == "Conv"), None)
        if conv is None or hit:
            return out, calib
        deq = next(n for n in out.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == conv.input[1])
        bad = onnx.ModelProto()
        bad.CopyFrom(out)
        scale = next(i for i in bad.graph.initializer if i.name == deq.input[1])
        scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * 10, scale.name))
        hit.append(conv.name)
        return bad, calib

    good = IOS.build(s, 4, threads=1, provider="onnxruntime", precision="int8")
    assert check_precision(good.run(x), ref, "int8").passed
    monkeypatch.setattr(quantize, "ort_quantize", corrupted)
    c = IOS.build(s, 4, threads=1, provider="onnxruntime", precision="int8")
    assert hit and c.info["precision"] == "int8"  # still int8 kernels: only the check can tell
    res = check_precision(c.run(x), ref, "int8")
    assert not res.passed, "a piece's weight scale 10x off passed the int8 check"


# ---- the search measures at the cell's precision -------------------------------------------------


def test_the_cost_model_times_stages_at_the_cells_precision_and_never_reuses_fp32_figures(tmp_path, monkeypatch):
    _need("onnxruntime")
    from ios_core.cost.measured import MeasuredCostModel
    from tests.runtime_helpers import fan_stage_timed_at_fp32

    stage, db, fp32, fast = fan_stage_timed_at_fp32(tmp_path / "p.sqlite", "onnxruntime")
    assert fp32.measured == 1
    asked = []
    prov = providers.get("onnxruntime")
    real = type(prov).compile

    def spy(self, piece, *a, **kw):
        asked.append(kw.get("precision", "fp32"))
        return real(self, piece, *a, **kw)

    monkeypatch.setattr(type(prov), "compile", spy)
    # a quiet machine: a stage measured while the machine was busy is stored marked disturbed and never reused
    # (tests/test_cost_measured.py, its disturbance rule), which made the reuse below fail under load; this
    # test is about the key
    from ios_core.measurement import interference

    monkeypatch.setattr(interference.CanaryReference, "judge", lambda self, figures, *a, **kw: None)
    int8 = MeasuredCostModel(cache=db, precision="int8", **fast)
    int8.stage_latency(stage, 1)
    assert int8.measured == 1 and int8.hits == 0, "an int8 search reused the fp32 figure of the same stage"
    assert asked and set(asked) == {"int8"}  # every piece of the stage compiled at int8
    assert int8.plan_store()[1] != fp32.plan_store()[1]  # the stored schedules' key too
    again = MeasuredCostModel(cache=db, precision="int8", **fast)
    again.stage_latency(stage, 1)
    assert again.hits == 1 and again.measured == 0  # its own figure is reused
    with pytest.raises(ValueError, match="int8"):
        MeasuredCostModel(cache=False, precision="int8", **{**fast, "provider": "torch"})


# ---- end to end: a sweep's IOS int8 cells ------------------------------------------------------


def test_a_sweep_runs_ios_int8_on_its_provider_and_skips_the_one_that_cannot(tmp_path):
    import json

    from tests.harness_helpers import FAST, cli

    _need("onnxruntime")
    res = cli(["run", "--models", "sample", "--frameworks", "none", "--schedules", "both", "--precision", "int8",
               *FAST, "--ios-providers", "onnxruntime,torch", "--out", "runs/p", "--report-out", "rep"], tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    run = tmp_path / "runs/p"
    recs = {r["cell"]: r for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}
    on_ort, on_torch = recs["sample|b1|ios-both[onnxruntime]|cpu|int8"], recs["sample|b1|ios-both|cpu|int8"]
    assert on_torch["status"] == "skipped" and "torch kernels int8 on cpu: no:" in on_torch["reason"]
    assert on_ort["status"] == "ok" and on_ort["precision"] == on_ort["engine_precision"] == "int8"
    assert on_ort["check"]["tolerance"] == tolerance_for("int8") and "argmax_agreement" in on_ort["check"]
    calib = on_ort["calibration"]
    assert calib["samples"] == 16 and calib["method"] == "minmax" and "fp32 graph" in calib["stage_inputs"]
    # the schedule was searched with its stages timed at int8, and kept apart from any fp32 one
    assert on_ort["cost_model_stats"]["method"].split(":")[-2:] == ["int8", "unprimed"]
    assert [p.name for p in (run / "schedules").glob("*.json")] == ["sample-b1-cpu-both-onnxruntime-int8.json"]
    header = (tmp_path / "rep/results.csv").read_text().splitlines()[0].split(",")
    assert {"calibration_method", "calibration_samples", "calibration_tool"} <= set(header)


@pytest.mark.parametrize("provider,quantizer", [("onnxruntime", None), ("openvino", "nncf")])
def test_every_piece_of_a_transformer_is_quantized_as_one(provider, quantizer):
    """A one-layer vit_tiny (224x224, 192 features) on a parallel schedule: every piece, a dense layer alone
    included (no layer norm in it to tell), is quantized with its provider's transformer settings (ONNX
    Runtime: weights only, pre-processed, 7 bits; NNCF: model type transformer, overflow fix, constants
    folded), and the output holds the int8 bound. vit_tiny at 3 layers on 31 pieces: ONNX Runtime 0.146 ->
    0.034, OpenVINO 0.470 -> 0.062 with these settings (2026-11-29, this VM: no VNNI)."""
    from ios_core import reference
    from ios_core.models.vit import vit

    _need(provider, quantizer)
    g = vit("vit_1", depth=1).init_weights(0)
    x = random_input(g, 1, seed=0)
    c = IOS.build(level_schedule(g), 1, threads=2, provider=provider, precision="int8")
    assert c.info["pieces"] > 3
    marker = "reduce_range" if provider == "onnxruntime" else "overflow_fix"
    settings = [k.info["calibration"]["settings"] for k in c.runtime.program.kernels]
    assert all(s.get(marker) for s in settings), [sorted(s) for s in settings]
    res = check_precision(c.run(x), reference.run(g, x), "int8")
    assert res.passed, res.reason
