"""The results store and the record (ios_bench.results, ios_bench.records.record): appends, corrupt lines, validation
derived from the one field declaration, schema versions and the schema-1 migration."""

import json
import shutil
import warnings

import pytest

from ios_bench import results
from ios_bench.errors import InputError
from ios_bench.records import record
from ios_bench.reporting.report import write_report
from ios_bench.results import Store, cell_key
from tests.harness_helpers import _rec, _store_lines, rec

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


def test_store_appends_whole_lines_and_loads_a_dataframe(tmp_path):
    store = Store(tmp_path)
    store.append(rec(fw="a"))
    store.append(rec(fw="b", median=5.0))
    data = (tmp_path / "results.jsonl").read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 2
    df = results.load(tmp_path)
    assert list(df["framework"]) == ["a", "b"]
    assert list(df["median_ms"]) == [10.0, 5.0]
    assert df["samples_ms"].iloc[1] == [4.8, 5.0, 5.2]
    assert bool(df["check_passed"].all())
    assert store.finished() == {cell_key("m", 1, "a", "cpu"), cell_key("m", 1, "b", "cpu")}


def test_store_refuses_invalid_records(tmp_path):
    with pytest.raises(ValueError):
        Store(tmp_path).append({"cell": "x", "model": "m"})
    bad = rec()
    bad["cell"] = "other"
    with pytest.raises(ValueError):
        Store(tmp_path).append(bad)
    assert not (tmp_path / "results.jsonl").exists()


def test_corrupt_line_reported_with_line_number_and_skipped(tmp_path):
    store = Store(tmp_path)
    store.append(rec(fw="a"))
    with open(store.path, "a") as f:
        f.write("{not json\n")
        f.write(json.dumps({"cell": "x"}) + "\n")
    store.append(rec(fw="b"))
    with pytest.warns(results.CorruptRecord) as caught:
        df = results.load(tmp_path)
    messages = [str(w.message) for w in caught]
    assert any(":2: corrupt record skipped: not valid JSON" in m for m in messages)
    assert any(":3: corrupt record skipped: missing" in m for m in messages)
    assert list(df["framework"]) == ["a", "b"]
    problems = []
    assert len(results.read_records(tmp_path, on_problem=problems.append)) == 2
    assert len(problems) == 2


def test_partial_last_record_is_never_kept(tmp_path):
    store = Store(tmp_path)
    store.append(rec(fw="a"))
    whole = store.path.read_bytes()
    line = json.dumps(rec(fw="b")).encode()
    with open(store.path, "ab") as f:
        f.write(line[: len(line) // 2])  # what a crash in the middle of a write could leave
    problems = []
    assert [r["framework"] for r in results.read_records(store.path, problems.append)] == ["a"]
    assert "unterminated" in problems[0] or "not valid JSON" in problems[0]
    msg = store.repair()
    assert msg and ":2:" in msg and store.path.read_bytes() == whole
    store.append(rec(fw="b"))
    assert [r["framework"] for r in store.records()] == ["a", "b"]


def test_wholly_corrupt_results_file_is_an_input_error(tmp_path):
    (tmp_path / "results.jsonl").write_bytes(b"\x00\x01garbage\nmore garbage\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InputError, match="corrupt results file"):
            results.load(tmp_path)
    with pytest.raises(InputError, match="no such results file"):
        results.load(tmp_path / "nothing")


# ---- compare ------------------------------------------------------------------------------------

# ---- clock locking on a fake machine ------------------------------------------------------------


def test_report_from_a_store_with_a_corrupt_line(tmp_path, capsys):
    from ios_bench.cli import main

    run = tmp_path / "runs" / "r"
    store = Store(run)
    for model in ("m1", "m2"):
        for fw, median in (("torch", 10.0), ("ios-both", 5.0)):
            store.append({**rec(model=model, fw=fw, median=median), "label": fw, "p10_ms": median * 0.9,
                          "p90_ms": median * 1.1, "throughput_p10": 1000 / (median * 1.1),
                          "throughput_p90": 1000 / (median * 0.9)})
    with open(store.path, "a") as f:
        f.write("{broken\n")
    store.append(rec(model="m1", fw="crashy", status="failed"))
    (run / "env.json").write_text(json.dumps({"clocks": "unlocked (test)", "cpu": {"model": "Test CPU"}}))
    with pytest.raises(SystemExit) as e:
        main(["report", str(run), "--out", str(tmp_path / "rep")])
    assert e.value.code == 0
    out = capsys.readouterr()
    assert "results.jsonl:5: corrupt record skipped" in out.err
    md = (tmp_path / "rep" / "report.md").read_text()
    # three frameworks, two models: frameworks as rows, the GeoMean a column (issue 42)
    assert "| framework | m1 | m2 | GeoMean |" in md
    assert "| torch | 10.00 ±0.20 | 10.00 ±0.20 | 10.00 |" in md
    assert "| crashy | failed |  | - |" in md
    assert "| IOS-Both | 5.000 ±0.200 | 5.000 ±0.200 | 5.000 |" in md
    assert "| torch | 100.0 [90.91-111.1] |" in md and "| IOS-Both | 200.0 [181.8-222.2] |" in md
    # IOS at its best (IOS-Both) over torch, the one peer and so the best one
    assert "| m1 | IOS-Both 5.000 | 2.00x | 2.00x (torch) |" in md and "| GeoMean |  | 2.00x | 2.00x |" in md
    assert "| m1 | 1 | crashy | cpu | failed | crashed |" in md
    assert "results.jsonl:5: corrupt record skipped" in md  # the report says so too
    assert "Test CPU" in md and "unlocked (test)" in md
    assert (tmp_path / "rep" / "normalized_throughput_cpu_b1.png").stat().st_size > 1000
    assert not (tmp_path / "rep" / "vs_batch_m1_cpu.png").exists()  # one batch size: no curve to draw


def test_records_are_validated_on_read(tmp_path, run_cli):
    """Wrongly typed records are reported with their line and skipped; a cell recorded twice is
    reported; report and compare carry on with one warning per problem, never a traceback."""
    run = tmp_path / "runs" / "typed"
    bad = [_rec("a", batch_size="1", cell="m|b1|a|cpu"), _rec("b", median_ms="fast"), _rec("c", samples_ms=["x"]),
           _rec("d", check="yes"), _rec("e", status="great"), _rec("f", median_ms=None), _rec("g", info=[1]),
           _rec("h", reason=7), _rec("i", std_ms=float("nan"))]
    _store_lines(run, [_rec("ok"), *bad, _rec("ok", median=11.0)])
    problems = []
    recs = results.read_records(run, problems.append)
    assert [r["framework"] for r in recs] == ["ok", "ok"]
    assert len(problems) == len(bad) + 1
    for line, fragment in [(2, "batch_size"), (3, "median_ms"), (4, "samples_ms"), (5, "check"),
                           (6, "unknown status 'great'"), (7, "timed cell without median_ms"), (8, "info"),
                           (9, "reason"), (10, "std_ms")]:
        assert any(f":{line}: corrupt record skipped" in p and fragment in p for p in problems), (line, problems)
    assert any(":11: cell m|b1|ok|cpu recorded again (first at line 1)" in p for p in problems)
    code, out, err = run_cli(["report", str(run), "--out", str(tmp_path / "rep")])
    assert code == 0 and "Traceback" not in err
    assert err.count("warning:") == len(problems)
    code, out, err = run_cli(["compare", str(run), str(run)])
    assert code == 0 and "Traceback" not in err


def test_an_unknown_schema_version_is_refused_with_its_line(tmp_path, run_cli):
    run = tmp_path / "runs" / "future"
    _store_lines(run, [_rec("a"), _rec("b", schema=99)])
    for argv in (["report", str(run), "--out", str(tmp_path / "rep")], ["compare", str(run), str(run)]):
        code, out, err = run_cli(argv)
        assert code == 2, err
        assert err.count("\n") == 1 and "results.jsonl:2:" in err and "schema" in err
    assert not (tmp_path / "rep").exists() or not any((tmp_path / "rep").iterdir())
