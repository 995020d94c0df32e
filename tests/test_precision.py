"""Precision as a sweep axis (issue 46; docs/precision.md): the cell's key, record, label and resume,
ab's pairing, the estimate, bad input; each adapter's precisions on small graphs; the check's bounds,
a quantized model with one corrupted scale failing its check; the report's Precision section."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import adapters
from ios_bench.errors import InputError
from ios_core.check import ARGMAX_AGREEMENT, ARGMAX_SAMPLES, check_precision, tolerance_for
from ios_core.inputs import random_input
from tests.adapter_graphs import mini_inception
from tests.harness_helpers import FAST, cli

# ---- the axis ------------------------------------------------------------------------------------


def test_a_precision_is_part_of_the_key_files_and_label_and_fp32_keeps_its_old_key():
    from ios_bench.planning.cells import Cell, label
    from ios_bench.results import cell_key

    fp32 = Cell("m", "m", 1, "onnxruntime", "cpu")
    int8 = Cell("m", "m", 1, "onnxruntime", "cpu", precision="int8")
    assert fp32.key == "m|b1|onnxruntime|cpu" == cell_key("m", 1, "onnxruntime", "cpu")
    assert int8.key == "m|b1|onnxruntime|cpu|int8" != fp32.key
    assert int8.file_stem.endswith("-int8") and not fp32.file_stem.endswith("fp32")
    assert label("onnxruntime", "int8") == "onnxruntime int8" and label("ios-both", "bf16") == "IOS-Both bf16"
    assert label("onnxruntime", "fp32") == "onnxruntime"


def test_the_plan_reads_an_older_single_precision_and_refuses_unknown_ones():
    from ios_bench.planning.plan import Plan

    assert Plan().precisions == ["fp32"]
    assert Plan.from_dict({"precision": "fp32"}).precisions == ["fp32"]  # a plan.json written before the axis
    assert Plan.from_dict({"precision": "bf16"}).precisions == ["bf16"]  # (its one precision, whichever it was)
    assert Plan.from_dict({"precisions": ["fp32", "int8"]}).precisions == ["fp32", "int8"]
    for bad in (["fp64"], ["int8", "int8"], [], "int8"):
        with pytest.raises(InputError, match="precisions"):
            Plan.from_dict({"precisions": bad})


def test_records_say_the_asked_precision_and_the_engines_and_older_ones_migrate():
    from ios_bench.records.record import SCHEMA, migrate
    from ios_bench.results import check_record

    old = {"schema": 2, "cell": "m|b1|openvino|cpu", "model": "m", "batch_size": 1, "framework": "openvino",
           "device": "cpu", "status": "failed", "reason": "x", "precision": "bf16"}
    new = migrate(old)
    assert new["schema"] == SCHEMA and new["precision"] == "fp32" and new["engine_precision"] == "bf16"
    assert "migrated_from" not in new  # no "measured in one process" warning for a schema-2 record
    assert check_record(new) is None
    # the key follows the asked precision: a record whose key lacks it is refused
    assert "cell key" in check_record({**new, "precision": "int8"})
    assert check_record({**new, "precision": "int8", "cell": "m|b1|openvino|cpu|int8"}) is None


def test_ab_pairs_cells_of_one_precision_only():
    from ios_bench.running.ab import pair_id

    ab = {"a": {}, "b": {}}
    assert pair_id("onnxruntime", None, None, 1, "cpu", ab) == "onnxruntime|b1|cpu"
    assert pair_id("onnxruntime", None, None, 1, "cpu", ab, "fp32") == "onnxruntime|b1|cpu"
    assert pair_id("onnxruntime", None, None, 1, "cpu", ab, "int8") == "onnxruntime|b1|cpu|int8"


def test_the_estimate_keeps_a_reduced_precision_figure_apart_from_fp32():
    from ios_bench.planning import estimate

    hist = estimate.History()
    ok = {"status": "ok", "model": "m", "batch_size": 1, "framework": "openvino"}
    hist.add({**ok, "median_ms": 10.0})
    hist.add({**ok, "median_ms": 4.0, "precision": "bf16"})
    assert hist.latency_ms[("m", 1, "openvino")] == 10.0  # the bf16 figure did not overwrite fp32's
    model = estimate.Model(hist, {"m": 1e9}, {"m": 10}, warmup=0, repeat=1, min_sample_ms=0.0)
    assert model.latency_s("m", 1, estimate.series("openvino", "bf16")) == pytest.approx(0.004)
    assert model.latency_s("m", 1, estimate.series("openvino", "int8")) == pytest.approx(0.010)  # its fp32 figure
    assert estimate.series("openvino", "fp32") == "openvino"


def test_precision_list_errors_are_one_line(tmp_path):
    from ios_bench.commands.run import parse_precisions, precision_offer_problem

    with pytest.raises(InputError, match="unknown precision fp64"):
        parse_precisions("fp32,fp64")
    assert parse_precisions("fp32,int8") == ["fp32", "int8"]
    assert "no framework" in precision_offer_problem(["int8"], ["torch-compile"], [], ["cpu"])
    assert precision_offer_problem(["int8"], ["torch-compile", "onnxruntime"], [], ["cpu"]) is None
    assert precision_offer_problem(["fp32"], ["torch"], [], ["cpu"]) is None


# ---- the check's bounds --------------------------------------------------------------------------


def test_each_precision_has_its_bound_and_int8_also_needs_the_arg_max():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((8, 10)).astype(np.float32)
    near = ref + 0.01 * np.abs(ref).max() * rng.standard_normal(ref.shape).astype(np.float32)
    assert not check_precision(near, ref, "fp32").passed  # fp32's bound is tight
    assert check_precision(near, ref, "bf16").passed
    assert check_precision(near, ref, "int8").passed and check_precision(near, ref, "int8").argmax_agreement == 1.0
    # within int8's error bound, yet the arg-max of most samples moved (two near-equal top scores): fails
    ref = 0.1 * rng.standard_normal((8, 10)).astype(np.float32)
    ref[:, 0], ref[:, 1] = 1.0, 0.999
    shifted = ref.copy()
    shifted[:6, 1] = 1.001
    res = check_precision(shifted, ref, "int8")
    assert np.abs(shifted - ref).max() / np.abs(ref).max() < tolerance_for("int8")
    assert not res.passed and res.argmax_agreement == 2 / 8 < ARGMAX_AGREEMENT["int8"]
    assert "arg-max" in res.reason


# ---- each adapter's precisions, on small graphs --------------------------------------------------


def _case(batch=4):
    from ios_core import reference

    g = mini_inception()
    g.init_weights(0)
    x = random_input(g, batch, seed=0)
    return g, x, reference.run(g, x)


def test_each_adapter_declares_its_precisions_on_itself():
    ort, ov, torch_ = adapters.get("onnxruntime"), adapters.get("openvino"), adapters.get("torch")
    assert set(ort.precisions("cpu")) >= {"fp32", "int8", "bf16"}
    assert ort.precision_reason("int8", "cpu") is None
    assert ort.precision_reason("bf16", "cpu").startswith("onnxruntime bf16 on cpu: no:")
    assert ov.precision_reason("bf16", "cpu") is None and "f32" in ov.precisions("cpu")["fp32"]
    assert torch_.precision_reason("bf16", "cpu") is None
    assert torch_.precision_reason("int8", "cpu") is None  # FX graph mode quantization: tests/test_precision_torch.py
    assert torch_.precision_reason("int8", "cuda") == "torch does not offer int8 on cuda"
    assert adapters.get("tvm").precision_reason("bf16", "cpu") is not None


def test_an_adapter_refuses_a_precision_it_does_not_offer():
    g, _, _ = _case(1)
    with pytest.raises(ValueError, match="bf16"):
        adapters.get("onnxruntime").build(g, 1, threads=1, precision="bf16")


def _skip_unavailable(name):
    reason = adapters.get(name).available()
    if reason:
        pytest.skip(reason)


def test_onnxruntime_int8_is_quantized_calibrated_and_checked():
    _skip_unavailable("onnxruntime")
    g, x, ref = _case(8)
    c = adapters.get("onnxruntime").build(g, 8, threads=1, precision="int8")
    assert c.info["precision"] == "int8" and c.info["integer_kernels"]["conv"] > 0
    calib = c.info["calibration"]
    assert calib["method"] == "minmax" and calib["samples"] >= 16 and "quantize_static" in calib["tool"]
    res = check_precision(c.run(x), ref, "int8")
    assert res.passed, res.reason
    assert res.max_rel_err > tolerance_for("fp32")  # it really computed in int8: fp32's bound would fail it


def test_a_quantized_model_with_one_corrupted_scale_fails_its_check():
    _skip_unavailable("onnxruntime")
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    from adapters.onnxruntime import quantize
    from ios_core.lowering.onnx import export

    g, x, ref = _case(8)
    model, _ = quantize(export(g, 8), g, 8)

    def run(m):
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, {sess.get_inputs()[0].name: x})[0]

    assert check_precision(run(model), ref, "int8").passed
    inits = {i.name: i for i in model.graph.initializer}
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    deq = next(n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == conv.input[1])
    bad = onnx.ModelProto()
    bad.CopyFrom(model)
    scale = next(i for i in bad.graph.initializer if i.name == deq.input[1])
    assert deq.input[1] in inits
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * 10, scale.name))
    res = check_precision(run(bad), ref, "int8")
    assert not res.passed, "a weight scale 10x off passed the int8 check"


def test_openvino_int8_is_quantized_by_nncf_and_runs_its_convolutions_in_integers():
    _skip_unavailable("openvino")
    pytest.importorskip("nncf")
    g, x, ref = _case(4)
    c = adapters.get("openvino").build(g, 4, threads=1, precision="int8")
    assert c.info["precision"] == "int8" and c.info["integer_convolutions"] > 0
    assert c.info["inference_precision"] == "f32"  # what is not quantized stays f32 (not the plugin's bf16)
    assert "nncf.quantize" in c.info["calibration"]["tool"] and c.info["calibration"]["samples"] >= 16
    res = check_precision(c.run(x), ref, "int8")
    assert res.passed and res.max_rel_err > tolerance_for("fp32")


def test_openvino_int8_without_its_quantizer_is_a_reason_not_a_crash(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "nncf" else real(n, *a))
    reason = adapters.get("openvino").precision_reason("int8", "cpu")
    assert reason is not None and "NNCF" in reason


@pytest.mark.parametrize("name", ["torch", "openvino"])
def test_bf16_builds_compute_in_bf16_within_its_bound(name):
    _skip_unavailable(name)
    g, x, ref = _case(2)
    c = adapters.get(name).build(g, 2, threads=1, precision="bf16")
    if name == "openvino" and c.info.get("inference_precision") != "bf16":
        pytest.skip("this CPU's OpenVINO plugin has no bf16 inference")
    assert c.info["precision"] == "bf16"
    out = c.run(x)
    assert out.dtype == np.float32
    res = check_precision(out, ref, "bf16")
    assert res.passed and res.max_rel_err > tolerance_for("fp32") / 100  # not an fp32 result relabelled


def test_openvino_records_what_its_runtime_model_runs_not_the_hint(monkeypatch):
    """The openvino cell's precision is the CPU plugin's runtime model's (its convolutions' and matrix
    products' runtime precision), not the INFERENCE_PRECISION_HINT asked for or echoed back."""
    _skip_unavailable("openvino")
    import adapters.openvino as aov

    g, _, _ = _case(1)
    c = adapters.get("openvino").build(g, 1, threads=1, precision="bf16")
    if c.info["inference_precision"] != "bf16":  # a CPU without bf16 (this one): asked bf16, runs f32
        assert c.info["precision"] == "fp32" and "bf16" in c.info["precision_note"]
    layers = {("Convolution", "bf16"): 3, ("Convolution", "f32"): 1, ("Relu", "f32"): 4}
    monkeypatch.setattr(aov, "runtime_precisions", lambda compiled_model: layers)
    c = adapters.get("openvino").build(g, 1, threads=1)  # asked f32; the runtime model (as read) says otherwise
    assert c.info["precision"] == "mixed (bf16, fp32)" and "mixed (bf16, fp32)" in c.info["precision_note"]


class _Flipped:
    """A compiled model whose output is the oracle's on the cell's own input but swaps the two top scores
    of every further input (a quantization that is right on one sample and wrong on the rest)."""

    def __init__(self, x, ref, inputs, outputs):
        self.x, self.ref, self.table = x, ref, [(i, o) for i, o in zip(inputs, outputs)]
        self.prepared = []

    def prepare(self, x):
        self.prepared.append(x)
        return x

    def execute(self, x):
        if np.array_equal(x, self.x):
            return self.ref.copy()
        out = next(o for i, o in self.table if np.array_equal(i, x)).copy()
        top = out.argmax(axis=1)
        out[np.arange(len(out)), top] = out.min(axis=1) - 1  # every further sample's arg-max moves
        return out

    def finish(self, y):
        return y

    def sync(self):
        pass


def test_an_int8_cell_of_batch_1_is_checked_on_16_seeded_samples(tmp_path):
    """issue 57: at batch 1 the arg-max rule was one sample's yes or no. A cell right on its own input and
    wrong on the further seeded ones fails; the cell's input is prepared again for timing."""
    from ios_bench.running.task_cell import _check_batches
    from ios_core.check import check_batches

    assert check_batches(1, "int8") == 16 and check_batches(4, "int8") == 4 and check_batches(32, "int8") == 1
    assert check_batches(1, "fp32") == 1 and check_batches(1, "bf16") == 1
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((16, 1, 3)).astype(np.float32)
    outputs = rng.standard_normal((16, 1, 10)).astype(np.float32)
    np.savez(tmp_path / "c.npz", inputs=inputs, outputs=outputs)
    x, ref = inputs[0], outputs[0]
    c = _Flipped(x, ref, inputs, outputs)
    assert check_precision(c.execute(x), ref, "int8").passed  # its own sample alone: passes
    checks = _check_batches(c, {"check_path": str(tmp_path / "c.npz")}, x, c.execute(x), ref)
    assert len(checks[0]) == 15 and len(c.prepared) == 15
    res = check_precision(ref, ref, "int8", more=checks)
    assert not res.passed and res.argmax_agreement == 1 / 16 and res.samples == 16
    assert res.max_rel_err == 0  # the bound is the cell's own output's; the further batches count in the arg-max
    assert _check_batches(c, {}, x, ref, ref) is None
    with pytest.raises(RuntimeError, match="not the cell's seeded input"):
        _check_batches(c, {"check_path": str(tmp_path / "c.npz")}, x + 1, ref, ref)


def test_an_engine_that_computes_in_another_precision_fails_the_cell():
    from ios_bench.running.task_cell import precision_problem

    ov = adapters.get("openvino")
    assert precision_problem(ov, {"precision": "fp32"}, "bf16").startswith("precision: asked for bf16")
    assert precision_problem(ov, {"precision": "bf16"}, "bf16") is None


# ---- end to end: a sweep over precisions, its record, resume, report -----------------------------


@pytest.fixture(scope="module")
def precision_run(tmp_path_factory):
    if adapters.get("onnxruntime").available():
        pytest.skip("onnxruntime is not installed")
    tmp = tmp_path_factory.mktemp("prec")
    args = ["run", "--models", "sample", "--frameworks", "onnxruntime,torch", "--schedules", "none",
            "--precision", "fp32,int8,bf16", *FAST, "--out", "runs/p", "--report-out", "rep"]
    res = cli(args, tmp)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return tmp, args, res


def test_a_sweep_has_one_cell_per_precision_and_skips_what_an_adapter_cannot_give(precision_run):
    tmp, _, _ = precision_run
    recs = {r["cell"]: r for r in map(json.loads, (tmp / "runs/p/results.jsonl").read_text().splitlines())}
    assert set(recs) == {"sample|b1|onnxruntime|cpu", "sample|b1|onnxruntime|cpu|int8",
                         "sample|b1|onnxruntime|cpu|bf16", "sample|b1|torch|cpu", "sample|b1|torch|cpu|int8",
                         "sample|b1|torch|cpu|bf16"}
    int8 = recs["sample|b1|onnxruntime|cpu|int8"]
    assert int8["status"] == "ok" and int8["precision"] == "int8" and int8["engine_precision"] == "int8"
    assert int8["calibration"]["method"] == "minmax" and int8["label"] == "onnxruntime int8"
    assert int8["check"]["tolerance"] == tolerance_for("int8") and "argmax_agreement" in int8["check"]
    from ios_bench.planning.loading import load_graph

    # batch 1: the arg-max share over 16 seeded samples (the cell's input and 15 more), not over its one
    assert int8["check"]["before"]["samples"] == int8["check"]["after"]["samples"] == ARGMAX_SAMPLES
    assert int8["check"]["samples"] == ARGMAX_SAMPLES and "samples" not in recs["sample|b1|onnxruntime|cpu"]["check"]
    with np.load(tmp / "runs/p/refs/sample-b1.check.npz") as checks:
        assert checks["inputs"].shape[:2] == (ARGMAX_SAMPLES, 1)
        assert np.array_equal(checks["inputs"][0], np.load(tmp / "runs/p/refs/sample-b1.input.npy"))
        assert np.array_equal(checks["inputs"][3], random_input(load_graph("sample"), 1, seed=3))  # input_seed 0 + i
    # and its RMS error under the bound the oracle's int8 simulation of the same 16 samples gives
    from ios_core import reference
    from ios_core.check import rms_rel_err
    from ios_core.quantize import calibration_feeds

    g = load_graph("sample").init_weights(0)
    sim = np.load(tmp / "runs/p/refs/sample-b1.int8sim.npy")
    with np.load(tmp / "runs/p/refs/sample-b1.check.npz") as checks:
        xs, ys = checks["inputs"], checks["outputs"]
    assert sim.shape == ys.shape and sim.shape[0] == ARGMAX_SAMPLES
    simulate = reference.int8_simulation(g, calibration_feeds(g, 1)[0])  # calibrated as the int8 cells are
    assert np.allclose(simulate(np.concatenate(xs)).reshape(sim.shape), sim, rtol=0, atol=1e-6)
    assert not np.allclose(sim, ys, rtol=0, atol=1e-4)  # quantized: not the oracle's
    meta = json.loads((tmp / "runs/p/refs/sample-b1.json").read_text())["int8_simulated"]
    assert meta["batches"] == ARGMAX_SAMPLES and meta["calibration_data"] is None
    for cell in ("sample|b1|onnxruntime|cpu|int8", "sample|b1|torch|cpu|int8"):
        chk = recs[cell]["check"]
        assert chk["simulated_rms_rel_err"] == pytest.approx(rms_rel_err(sim, ys), rel=1e-9)
        assert chk["simulated_rms_rel_err"] > 0
        assert chk["rms_rel_err"] <= chk["rms_bound"] == pytest.approx(max(6 * chk["simulated_rms_rel_err"], 0.03))
    assert "rms_bound" not in recs["sample|b1|onnxruntime|cpu"]["check"]
    assert recs["sample|b1|torch|cpu|bf16"]["engine_precision"] == "bf16"
    torch_int8 = recs["sample|b1|torch|cpu|int8"]  # FX graph mode quantization, calibrated like onnxruntime's
    assert torch_int8["status"] == "ok" and torch_int8["engine_precision"] == "int8", torch_int8.get("reason")
    assert "prepare_fx" in torch_int8["calibration"]["tool"] and torch_int8["calibration"]["samples"] == 16
    assert recs["sample|b1|onnxruntime|cpu"]["precision"] == "fp32"
    assert recs["sample|b1|onnxruntime|cpu|bf16"]["status"] == "skipped"
    assert "no:" in recs["sample|b1|onnxruntime|cpu|bf16"]["reason"]


def test_resume_finds_every_precision_cell_done(precision_run):
    tmp, args, _ = precision_run
    before = (tmp / "runs/p/results.jsonl").read_text()
    res = cli(["run", "--resume", "--out", "runs/p", "--no-report", "--no-progress"], tmp)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (tmp / "runs/p/results.jsonl").read_text() == before


def test_the_report_answers_per_precision_and_keeps_fp32_tables_fp32(precision_run):
    tmp, _, _ = precision_run
    md = (tmp / "rep/report.md").read_text()
    main, _, prec = md.partition("## Precision")
    assert prec, "no Precision section"
    latency = main.split("**Latency (ms), batch 1, cpu**")[1].split("**")[0]
    assert "int8" not in latency and "bf16" not in latency  # nothing reduced-precision in an fp32 table
    from ios_bench.records.record import CellResult

    recs = {r["cell"]: r for r in map(json.loads, (tmp / "runs/p/results.jsonl").read_text().splitlines())}
    fp32, int8 = (CellResult(recs[k]).figure_text() for k in ("sample|b1|onnxruntime|cpu",
                                                              "sample|b1|onnxruntime|cpu|int8"))
    assert fp32 != int8 and fp32 in latency and int8 not in latency  # the fp32 figure, not the int8 one
    assert "## cpu, batch size 1, fp32" in main
    assert "Speedup over its own fp32 at int8" in prec and "err " in prec
    assert "IOS at its best against the best peer at int8" in prec
    gaps = prec.split("**Precisions not given**")[1].split("## ")[0]
    assert gaps.count("| onnxruntime | cpu | bf16 |") == 1 and "| torch | cpu | int8 |" not in gaps
    header = (tmp / "rep/results.csv").read_text().splitlines()[0].split(",")
    assert "precision" in header and "engine_precision" in header
    assert "onnxruntime int8" in md.split("## Every cell")[1]


def test_bad_precision_requests_exit_2_in_one_line(tmp_path):
    for extra, what in ((["--precision", "fp64"], "unknown precision fp64"),
                        (["--precision", "int8", "--frameworks", "torch-compile", "--schedules", "none"],
                         "no framework")):
        res = cli(["run", "--models", "sample", *extra, "--out", "runs/x", "--no-report"], tmp_path)
        assert res.returncode == 2 and what in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs/x").exists()


def test_list_frameworks_shows_each_adapters_precisions_per_device():
    from ios_bench.commands.list import framework_rows, precisions_table

    rows = {r["name"]: r for r in framework_rows()}
    assert "bf16" in rows["openvino"]["precisions"]["cpu"] and "int8" in rows["onnxruntime"]["precisions"]["cpu"]
    assert rows["torch"]["precisions"]["cuda"]["fp16"]
    assert precisions_table(list(rows.values())).row_count > len(rows)


def test_a_scenario_cell_at_a_precision_says_it_in_its_label_and_key():
    from ios_bench.planning.cells import Cell
    from ios_bench.planning.plan import Plan
    from ios_bench.scenarios import cells as scenario_cells

    cell = Cell("m", "m", 1, "onnxruntime", "cpu", scenario="offline", instances=1, instance_threads=2,
                precision="int8")
    assert cell.key == "m|b1|onnxruntime|cpu|offline:1x2|int8"
    assert scenario_cells.record_fields(cell, Plan(scenario="offline"))["label"] == "onnxruntime int8 1x2"


def test_a_bad_calibration_folder_exits_2_in_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "wrong").mkdir()
    np.save(tmp_path / "wrong/a.npy", np.zeros((3, 8, 8), np.float32))  # not the sample model's input
    (tmp_path / "ints").mkdir()
    np.save(tmp_path / "ints/a.npy", np.zeros((375, 15, 15), np.int64))
    for folder, what in (("missing", "not a folder"), ("empty", "no .npy files"),
                         ("wrong", "shape (3, 8, 8)"), ("ints", "dtype int64")):
        res = cli(["run", "--models", "sample", "--frameworks", "onnxruntime", "--schedules", "none",
                   "--precision", "int8", "--calibration-data", folder, "--out", "runs/x", "--no-report"], tmp_path)
        assert res.returncode == 2 and what in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "runs").exists()
    res = cli(["run", "--models", "sample", "--precision", "fp32", "--calibration-data", "wrong", "--out", "runs/x",
               "--no-report"], tmp_path)
    assert res.returncode == 2 and "--precision int8" in res.stderr


def test_a_sweep_calibrates_its_int8_cells_on_the_folder_and_records_it(tmp_path):
    if adapters.get("onnxruntime").available():
        pytest.skip("onnxruntime is not installed")
    (tmp_path / "calib").mkdir()
    rng = np.random.default_rng(1)
    np.save(tmp_path / "calib/a.npy", rng.standard_normal((8, 375, 15, 15)).astype(np.float32))
    res = cli(["run", "--models", "sample", "--frameworks", "onnxruntime", "--schedules", "none",
               "--precision", "fp32,int8", "--calibration-data", "calib", *FAST, "--out", "runs/c", "--no-report"],
              tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    recs = {r["cell"]: r for r in map(json.loads, (tmp_path / "runs/c/results.jsonl").read_text().splitlines())}
    int8 = recs["sample|b1|onnxruntime|cpu|int8"]
    assert int8["status"] == "ok" and int8["calibration"]["data"]["samples"] == 8
    assert int8["calibration"]["data"]["sha1"] and int8["calibration"]["samples"] == 8
    assert "calibration" not in recs["sample|b1|onnxruntime|cpu"]
    assert int8["float_ops"] == {"conv": 0, "matmul": int8["float_ops"]["matmul"]}  # read back, every conv int8
    from ios_bench.results import flatten

    assert flatten(int8)["float_conv"] == 0  # the CSV's and the report's column
    # the oracle's int8 simulation is calibrated on the folder too, as the cells are
    meta = json.loads((tmp_path / "runs/c/refs/sample-b1.json").read_text())["int8_simulated"]
    assert Path(meta["calibration_data"]).resolve() == (tmp_path / "calib").resolve()
    from ios_bench.planning.loading import load_graph
    from ios_core import reference
    from ios_core.quantize import calibration_feeds

    g = load_graph("sample").init_weights(0)
    x = np.load(tmp_path / "runs/c/refs/sample-b1.input.npy")
    sim = np.load(tmp_path / "runs/c/refs/sample-b1.int8sim.npy")[0]
    assert np.allclose(reference.int8_simulation(g, calibration_feeds(g, 1, data=tmp_path / "calib")[0])(x), sim,
                       rtol=0, atol=1e-6)
    assert not np.allclose(reference.int8_simulation(g, calibration_feeds(g, 1)[0])(x), sim, rtol=0, atol=1e-4)


def test_an_int8_figure_says_beside_it_what_its_engine_left_in_float():
    from ios_bench.reporting.precision_tables import error_text

    row = {"check_max_rel_err": 0.02, "check_argmax_agreement": 1.0, "float_conv": 2, "float_matmul": 1}
    assert error_text(row) == "err 2.0e-02, arg-max 100%; in float: 2 conv, 1 matmul"
    row.update(check_rms_rel_err=0.031, check_rms_bound=0.12)  # int8 with the oracle's simulation's bound
    assert error_text(row) == "err 2.0e-02, RMS 3.1e-02 (bound 1.2e-01), arg-max 100%; in float: 2 conv, 1 matmul"
    assert "in float" not in error_text({"check_max_rel_err": 0.004})  # bf16: nothing to say


def test_a_speedup_over_its_own_fp32_pairs_one_engine_only():
    """issue 57: a framework's int8 speedup compares its engine with itself. Two cells whose records name
    different execution modes (an older run's tensorflow int8, TFLite's interpreter, against TensorFlow's
    graph runtime at fp32) get no ratio, with the reason; tflite's two cells, one engine, get theirs."""
    import pandas as pd

    from ios_bench.reporting.precision_tables import speedup_table

    def cell(fw, precision, ms, mode):
        return {"model": "m", "batch_size": 1, "device": "cpu", "framework": fw, "precision": precision,
                "status": "ok", "check_passed": True, "median_ms": ms, "check_max_rel_err": 0.02,
                "config_execution_mode": mode}

    df = pd.DataFrame([cell("tensorflow", "fp32", 30.0, "tf.function graph"),
                       cell("tensorflow", "int8", 10.0, "tf.lite.Interpreter (TFLite int8 flatbuffer)"),
                       cell("tflite", "fp32", 20.0, "tf.lite.Interpreter"),
                       cell("tflite", "int8", 10.0, "tf.lite.Interpreter")])
    rows = {r[0]: r for r in speedup_table(df, "cpu", 1, "int8").rows}
    assert rows["tensorflow"][4] == "-"
    assert rows["tensorflow"][5].startswith("no ratio: another engine at fp32 (tf.function graph) than at int8 "
                                            "(tf.lite.Interpreter (TFLite int8 flatbuffer))")
    assert rows["tflite"][4] == "2.00x" and rows["tflite"][5].startswith("no verdict")
