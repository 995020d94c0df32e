"""benchmarks/bench_adapters.py: one cell in-process, the table, and the ios-sequential path."""

from __future__ import annotations

import types

import pytest

import adapters
from adapters.base import Adapter, Compiled
from tests.conftest import benchmark_module


@pytest.fixture(scope="module")
def bench():
    return benchmark_module("bench_adapters")


def _args(**kw):
    return types.SimpleNamespace(batch=1, threads=1, warmup=0, repeat=2, number=1, **kw)


def test_cell_and_table(bench):
    rows = [bench.run_cell("squeezenet", fw, 1, 1, 0, 2, 1, None, 0) for fw in ("torch", "onnxruntime")]
    for row in rows:
        assert row["status"] == "ok" and row["check"]["passed"]
        assert len(row["measurement"]["samples_ms"]) == 2 and row["info"]["threads"] == 1
    rows.append({"model": "squeezenet", "framework": "nosuch", "status": "failed", "reason": "exit 1: boom"})
    table = bench.format_table("squeezenet", rows, _args())
    assert "1.00x" in table and "torch" in table and "onnxruntime" in table
    assert "nosuch" in table and "failed: exit 1: boom" in table


class _SeqCompiled(Compiled):
    def __init__(self, graph):
        super().__init__({"stages": [len(b.stages) for b in graph.blocks]})
        from ios_core import reference

        self.graph, self.reference = graph, reference

    def execute(self, prepared):
        return self.reference.run(self.graph, prepared)


class _FakeIOS(Adapter):
    def _build(self, graph, batch_size, device, threads, **options):
        assert graph.has_stages
        assert all(stage == [[node.name]] for b in graph.blocks for stage, node in zip(b.stages, b.nodes))
        return _SeqCompiled(graph)


FAKE_IOS = _FakeIOS(name="ios", requires=("torch",))


def test_ios_sequential_cell_uses_a_sequential_schedule(bench, monkeypatch):
    monkeypatch.setitem(adapters._REGISTRY, "ios", f"{__name__}:FAKE_IOS")
    row = bench.run_cell("sample", "ios-sequential", 1, 1, 0, 1, 1, None, 0)
    assert row["status"] == "ok" and row["check"]["passed"] and row["framework"] == "ios-sequential"
