"""``ios-bench ab --precision`` (issue 46): a pair at a precision its framework (or IOS's kernel
provider) does not offer is left out with its reason, once, and the pairs that can be given run; an ab
left with no pair at all is one line, exit 2, nothing written (never "cannot run here", which says
a framework is missing)."""

import json

from tests.harness_helpers import cli

FAST = ["--warmup", "0", "--repeat", "2", "--min-sample-ms", "0", "--no-progress", "--no-report", "--rounds", "1"]


def _refused(args: list[str], tmp_path) -> str:
    """The one line an ab given ``args`` is refused with (exit 2, nothing written)."""
    p = cli(["ab", "tiny_a", *args, "--out", str(tmp_path / "runs" / "x"), *FAST], tmp_path)
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert not (tmp_path / "runs").exists()
    return line


def test_an_ab_with_no_pair_at_the_precision_is_one_line_and_writes_nothing(tmp_path):
    line = _refused(["--frameworks", "none", "--a-option", "schedule=sequential", "--b-option", "schedule=greedy",
                     "--ios-providers", "onnxruntime", "--precision", "bf16"], tmp_path)
    assert "--precision bf16" in line
    assert "cannot run here" not in line  # (was: "ios-sequential cannot run here: ...", one per cell)


def test_only_the_cells_whose_precision_is_not_offered_are_left_out():
    from ios_bench.planning.cells import Cell
    from ios_bench.running.ab import leave_out_unoffered

    probes = {"cpu": {"adapters": {"torch": {"precisions": {"fp32": "", "bf16": "model in bf16"}},
                                   "onnxruntime": {"precisions": {"fp32": "", "bf16": "no: no bf16 kernels"}},
                                   "ios": {"precisions": {"fp32": "", "bf16": "openvino: hint"}}},
                      "provider_precisions": {"torch": {"bf16": "not yet: float32 arena"}}}}
    ort_why = "onnxruntime bf16 on cpu: no: no bf16 kernels"
    ios_why = "IOS on torch kernels bf16 on cpu: not yet: float32 arena"
    cells = [Cell("m", "m", 1, "torch", "cpu", None, "torch", precision="bf16"),
             Cell("m", "m", 1, "onnxruntime", "cpu", None, "onnxruntime", 1.0, ort_why, precision="bf16"),
             Cell("m", "m", 1, "onnxruntime", "cpu", None, "onnxruntime", 1.0, "onnxruntime is not installed"),
             Cell("m", "m", 1, "ios-sequential", "cpu", "sequential", "ios", 1.0, ios_why, provider="torch",
                  precision="bf16"),
             Cell("m", "m", 1, "ios-greedy", "cpu", "greedy", "ios", 1.0, ios_why, provider="torch", precision="bf16")]
    kept, why = leave_out_unoffered(cells, probes)
    assert kept == cells[:1] + cells[2:3]  # a framework missing stays (refused as "cannot run here")
    assert why == f"{ort_why}; {ios_why}"  # each reason once
    assert leave_out_unoffered(cells[:1], probes) == (cells[:1], "")


def test_an_ab_at_a_precision_runs_the_pairs_that_offer_it_and_says_which_were_left_out(tmp_path):
    out = tmp_path / "runs" / "ab"
    p = cli(["ab", "tiny_a", "--frameworks", "torch", "--a-option", "torch:inter_op_threads=1", "--b-option",
             "torch:inter_op_threads=2", "--schedules", "sequential", "--ios-providers", "onnxruntime", "--precision",
             "bf16", "--out", str(out), "--format", "json", *FAST], tmp_path)
    assert p.returncode == 0, p.stderr
    assert ("pairs left out, their precision not offered: IOS on onnxruntime kernels bf16 on cpu"
            in " ".join(p.stderr.split()))
    (cell,) = json.loads(p.stdout)["cells"]  # torch's pair only: IOS on onnxruntime kernels has no bf16
    assert cell["framework"] == "torch" and cell["precision"] == "bf16"
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["variant"] for r in recs) == ["A", "B"]
    assert all(r["precision"] == "bf16" and r["engine_precision"] == "bf16" for r in recs)


def test_an_ab_at_a_precision_no_framework_of_it_offers_is_one_line(tmp_path):
    line = _refused(["--frameworks", "test-delay", "--a-option", "test-delay:delay_ms=0", "--b-option",
                     "test-delay:delay_ms=1", "--schedules", "none", "--precision", "fp16"], tmp_path)
    assert "--precision fp16: no framework of this sweep offers it on cpu" in line
