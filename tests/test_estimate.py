"""ios_bench.estimate: the stated model of a sweep's duration and a cell's memory, and what earlier
runs on this machine replace in it."""

import json

import pytest

from ios_bench import estimate
from ios_bench.cells import Cell
from tests.harness_helpers import rec


def _model(history=None, **kw):
    return estimate.Model(history or estimate.History(), {"m": 2_000_000_000, "n": 1_000_000_000}, {"m": 40, "n": 20},
                          **kw)


def test_the_stated_model_is_used_where_no_earlier_run_measured():
    m = _model(warmup=3, repeat=10, min_sample_ms=10)
    rate = estimate.STATED["gmacs_per_s"]["default"] * 1e9
    lat = 2e9 * 4 / rate
    assert m.latency_s("m", 4, "torch") == pytest.approx(lat)
    assert m.sources == {"stated model": 1}
    fixed = estimate.STATED["fixed_s"]["default"]
    assert m.round_s("m", 4, "torch") == pytest.approx(fixed + 3 * lat + 10 * max(lat, 0.01)
                                                       + 2 * estimate.STATED["canary_s"])
    assert m.fixed_s("tensorflow") == estimate.STATED["fixed_s"]["tensorflow"]


def test_earlier_records_replace_the_stated_figures():
    h = estimate.History()
    r = rec("m", 1, "torch", median=40.0)
    r.update(repeat=10, warmup=3, number=1,
             rounds=[{"wall_seconds": 2.52, "repeat": 10, "warmup": 3, "number": 1}])
    h.add(r, "run1")
    m = _model(h)
    assert m.latency_s("m", 1, "torch") == pytest.approx(0.040)  # the same cell
    assert m.latency_s("m", 8, "torch") == pytest.approx(0.320)  # another batch size: scaled
    assert m.latency_s("n", 1, "torch") == pytest.approx(0.020)  # another model: the framework's rate
    assert m.fixed_s("torch") == pytest.approx(2.52 - 13 * 0.040)
    assert set(m.sources) == {"earlier runs", "earlier runs (another batch size)",
                              "earlier runs (the framework's rate)"}
    assert h.runs == ["run1"]
    failed = estimate.History()
    failed.add(rec("m", 1, "torch", status="failed"))
    assert failed.latency_ms == {}


def test_the_sweep_estimate_counts_rounds_left_references_and_searches():
    m = _model()
    cells = [Cell("m", "m", 1, "torch", "cpu", None, "torch", 1.0), Cell("n", "n", 1, "onnxruntime", "cpu", None,
                                                                           "onnxruntime", 1.0)]
    est = estimate.sweep_seconds(m, cells, {cells[0].key: 3, cells[1].key: 0}, {("m", 1)}, {("m", 1, "torch")})
    assert est["per_cell"][cells[1].key] == 0  # its rounds are measured already
    one = m.round_s("m", 1, "torch")
    assert est["seconds"] == pytest.approx(3 * one + m.reference_s("m", 1) + m.optimize_s("m", 1, "torch"))


def test_only_runs_of_a_machine_like_this_one_are_learned_from(tmp_path):
    cpu = {"model": "CPU X", "usable_cores": 2}
    for name, their_cpu, median in [("same", cpu, 40.0), ("other", {"model": "CPU Y", "usable_cores": 2}, 5.0)]:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "env.json").write_text(json.dumps({"cpu": their_cpu}))
        (folder / "results.jsonl").write_text(json.dumps(rec("m", 1, "torch", median=median)) + "\n")
    found = estimate.earlier_runs(tmp_path / "new")
    assert {p.name for p in found} == {"same", "other"}
    h = estimate.learn(found, cpu)
    assert h.latency_ms == {("m", 1, "torch"): 40.0} and h.runs == ["same"]
    assert not estimate.same_machine({}, cpu)


def test_cell_memory_and_the_fit_check():
    h = estimate.History()
    stated = estimate.cell_memory_mib("torch", 100.0, 10.0, 4, h)
    assert stated == pytest.approx(estimate.STATED["base_mib"]["default"] + 2 * 100 + 2 * 10 * 4)
    # an earlier record's peak replaces the stated base
    h.peak.append(("torch", "m", 1, 700.0))
    learned = estimate.cell_memory_mib("torch", 100.0, 10.0, 4, h, {"m": 10.0}, {"m": 100.0})
    assert learned == pytest.approx((700 - 200 - 20) + 200 + 80)
    assert estimate.too_big(1000, 2000) is None
    why = estimate.too_big(1900, 2000)
    assert why.startswith("not enough memory") and "1,900 MiB" in why and "2,000 MiB" in why


@pytest.mark.parametrize("seconds,text", [(5, "5 s"), (89.2, "90 s"), (600, "10 min"), (3 * 3600 + 300, "3 h 05 min")])
def test_durations_read_as_people_write_them(seconds, text):
    assert estimate.human(seconds) == text


def test_available_memory_is_a_positive_figure():
    assert estimate.available_mib() > 0
