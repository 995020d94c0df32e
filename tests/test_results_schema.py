"""The record, declared once (ios_bench.record), schema 2 with its rounds, and the migration that
reads schema-1 run folders (a committed one: tests/data/schema1_run, cut from docs/results)."""

import shutil

from ios_bench import record, results
from ios_bench.report import write_report

OLD = "schema1_run"


def test_a_schema_1_run_folder_is_read_as_one_round_per_cell(data_dir):
    recs = results.read_records(data_dir / OLD)
    assert len(recs) == 4
    for r in recs:
        assert r["schema"] == record.SCHEMA and r["migrated_from"] == 1
        assert len(r["rounds"]) == 1 and r["rounds"][0]["samples_ms"] == r["samples_ms"]
        assert r["rounds_used"] == 1 and "one process" in r["unstable"]
        assert results.check_record(r) is None


def test_a_schema_1_run_still_reports(data_dir, tmp_path):
    run = tmp_path / "old"
    shutil.copytree(data_dir / OLD, run)
    paths = write_report(run, tmp_path / "rep")
    md = paths["md"].read_text()
    assert "come from an older run (schema 1)" in md
    assert "| inception_v3 |" in md and "IOS-Both" in md


def test_columns_check_and_flatten_derive_from_one_declaration():
    assert results.COLUMNS == record.columns()
    assert results.REQUIRED == record.required() and results.TIMING_FIELDS == record.timed()
    cols = set(record.columns())
    for f in record.FIELDS:
        if f.column and f.kind != "object":
            assert f.name in cols
        for _, col in f.flatten:
            assert col in cols
    # a declared field of the wrong type is refused by check_record, named
    rec = {"cell": results.cell_key("m", 1, "x", "cpu"), "model": "m", "batch_size": 1, "framework": "x",
           "device": "cpu", "status": "skipped", "rounds_used": "three"}
    assert "rounds_used" in results.check_record(rec)
    rec.update(rounds_used=3, rounds=[{"round": "0", "status": "ok"}])
    assert "rounds[0]" in results.check_record(rec)


def test_flatten_expands_declared_objects():
    rec = {"cell": "c", "check": {"passed": True, "max_rel_err": 1e-6}, "info": {"threads": 2, "precision": "fp32"},
           "rounds": [{"round": 0, "status": "ok", "pid": 42}], "median_ms": 1.0}
    row = record.flatten(rec)
    assert row["check_passed"] is True and row["check_max_rel_err"] == 1e-6
    assert row["config_threads"] == 2 and row["config_precision"] == "fp32"
    assert row["rounds_pids"] == [42] and "check" not in row
