"""tvm-tuned: MetaSchedule tuning with a tiny budget, a persistent database reused without tuning.

One module-scoped build pair keeps the cost down: MetaSchedule's first use in a process imports
TVM's tensor intrinsics (about a minute of CPU on the 2-core machines), then each trial takes
about a second. The two tuning tests are marked slow for that minute: run them with
``pytest -m slow tests/test_tvm_tuned.py``."""

from __future__ import annotations

import json

import pytest

import adapters
from adapters.tvm import DEFAULT_DB_ROOT, format_task_table, host_target, target_key
from ios_core import reference
from ios_core.check import compare
from ios_core.ir import GraphBuilder

TUNED = adapters.get("tvm-tuned")
pytestmark = pytest.mark.skipif(TUNED.available() is not None, reason=f"tvm unavailable: {TUNED.available()}")


def tiny_graph():
    b = GraphBuilder("tiny", (4, 8, 8))
    x = b.input
    a = b.conv(x, 8, 3, padding=1)
    c = b.conv(x, 8, 1)
    b.end_block(b.add([a, c]))
    return b.finish().init_weights(1)


def _count_records(db_dir) -> int:
    path = db_dir / "database_tuning_record.json"
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    graph = tiny_graph()
    db = tmp_path_factory.mktemp("tvm_db") / "tiny_b1"
    first = TUNED.build(graph, batch_size=1, threads=2, db=str(db), trials_per_task=2)
    after_first = _count_records(db)
    second = TUNED.build(graph, batch_size=1, threads=2, db=str(db), trials_per_task=2)
    return graph, db, first, after_first, second


@pytest.mark.slow
def test_tiny_budget_tunes_every_task_and_matches(builds):
    graph, db, first, after_first, _ = builds
    info = first.info
    assert info["tasks_total"] >= 2  # the two convolutions (+bias/relu fused), the add
    assert info["tuned_now"] == info["tasks_total"]
    assert after_first > 0 and info["database"] == str(db)
    rows = info["tasks"]
    assert len(rows) == info["tasks_total"]
    assert all(1 <= r["trials"] <= 2 for r in rows), rows
    assert all(r["best_ms"] is not None and r["best_ms"] > 0 for r in rows), rows
    assert info["tuning_seconds"] > 0 and info["trial_budget"] > 0
    # the budget is recorded and shown (the report's configuration table reads "tuning")
    assert info["tuning_trials"] == sum(r["trials"] for r in rows) > 0
    assert info["tuning"].startswith(f"MetaSchedule: {info['tuning_trials']} trials")
    assert info["execution_mode"] == "Relax VM, MetaSchedule-tuned kernels"
    assert info["precision"] == "fp32" and info["tvm_threads"] == 2
    x = reference.random_input(graph, 1)
    check = compare(first.run(x), reference.run(graph, x), TUNED.tolerance)
    assert check.passed, check
    table = format_task_table(rows)
    assert "Estimated total latency" in table and rows[0]["task"][:20] in table


@pytest.mark.slow
def test_second_build_reuses_database_without_tuning(builds):
    graph, db, first, after_first, second = builds
    info = second.info
    assert info["tuned_now"] == 0
    assert info["trial_budget"] == 0 and info["search_strategy"] is None
    assert _count_records(db) == after_first  # no new measurements
    assert [r["trials"] for r in info["tasks"]] == [r["trials"] for r in first.info["tasks"]]
    assert not any(r["tuned_now"] for r in info["tasks"])
    x = reference.random_input(graph, 1, seed=5)
    check = compare(second.run(x), reference.run(graph, x), TUNED.tolerance)
    assert check.passed, check
    # the info is JSON-serializable, as the results store needs
    json.dumps(info)


def test_default_database_location_is_keyed_by_target_and_model():
    target = host_target(2)
    assert len(target_key(target)) == 12
    assert target_key(target) == target_key(host_target(2))
    assert target_key(target) != target_key(host_target(1))
    assert DEFAULT_DB_ROOT.parts == ("runs", "tvm_db")


def test_unknown_option_is_rejected():
    with pytest.raises(ValueError, match="unknown options"):
        TUNED.build(tiny_graph(), batch_size=1, trails=3)


def test_known_bad_tvm_ffi_makes_tuned_unavailable(monkeypatch):
    import importlib.metadata

    import adapters.tvm as tvm_adapter

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda d: {"apache-tvm": "0.27.0.post1", "apache-tvm-ffi": "0.1.15.post2"}.get(d) or real(d))
    reason = tvm_adapter.ffi_incompatibility()
    assert reason and "0.1.14.post0" in reason
    assert TUNED.available() == reason
    assert adapters.get("tvm").available() is None  # the untuned build does not serialize TIR
