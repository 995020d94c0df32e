"""ios_bench.running.references: the oracle's outputs, one worker per (model, batch), reused when whole."""

import json

import numpy as np

from ios_bench.planning.cells import ref_file
from ios_bench.running.references import model_inputs, references
from tests.round_fakes import FakeExecutor, context


def _ok(task):
    return {"status": "ok", "batches": {str(task.payload[1]): {"sha1": "abc", "max_abs": 1.0}},
            "activation_mib": 2.0}


def test_a_whole_reference_is_reused_and_a_missing_one_computed(tmp_path):
    ex = FakeExecutor(_ok)
    ctx, _ = context(tmp_path, ex)
    (tmp_path / "refs").mkdir()
    np.save(tmp_path / ref_file("sample", 1), np.zeros(3, np.float32))
    np.save(tmp_path / ref_file("sample", 1, "input.npy"), np.zeros(3, np.float32))
    (tmp_path / ref_file("sample", 1, "json")).write_text(json.dumps({"status": "ok", "sha1": "old"}))
    got = references(ctx, {("sample", 1): "sample", ("sample", 2): "sample"})
    assert got[("sample", 1)]["sha1"] == "old"  # reused: no worker for it
    assert [t.payload for t in ex.seen] == [("sample", 2)]
    assert got[("sample", 2)]["sha1"] == "abc" and got[("sample", 2)]["activation_mib"] == 2.0
    spec = ex.seen[0].spec
    assert spec["task"] == "reference" and spec["batch_sizes"] == [2] and spec["ref_paths"] == [ref_file("sample", 2)]
    assert json.loads((tmp_path / ref_file("sample", 2, "json")).read_text())["status"] == "ok"


def test_a_truncated_output_is_computed_again_and_a_failure_kept(tmp_path):
    ex = FakeExecutor(lambda t: {"status": "failed", "reason": "MemoryError", "peak_rss_mib": 9.0})
    ctx, _ = context(tmp_path, ex)
    (tmp_path / "refs").mkdir()
    (tmp_path / ref_file("sample", 1)).write_bytes(b"\x93NUMPY trunc")
    (tmp_path / ref_file("sample", 1, "json")).write_text(json.dumps({"status": "ok"}))
    got = references(ctx, {("sample", 1): "sample"})
    assert len(ex.seen) == 1 and got[("sample", 1)] == {"status": "failed", "reason": "MemoryError",
                                                         "stderr_tail": "", "peak_rss_mib": 9.0}


def test_model_inputs_name_a_files_copy_and_nothing_for_a_zoo_model(tmp_path):
    spec: dict = {}
    assert model_inputs(tmp_path, spec, "sample") == [] and "model_path" not in spec
