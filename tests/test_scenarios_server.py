"""The Server search's stopping rule (ios_bench.scenarios.server, docs/scenarios.md) on synthetic
LoadGen tries: a plateau (halving the load no longer lowers the judged latency), the floor, the
answer "none valid above X QPS" in the round, the cell record, its line and the report, and the
duration model's count of tries. No LoadGen is needed: the search only sees try records."""

from __future__ import annotations

import pytest

from ios_bench.scenarios.server import bisect, floor_of, judged_key, plateau, verdict


def fake_loadgen(latency_at, bound_ms: float, key: str = "p99_ms"):
    """A ``run(qps, name)`` whose tries' judged latency is ``latency_at(qps)``, judged VALID when it
    meets the bound, as LoadGen's verdict would be; records every QPS offered."""
    offered: list[float] = []

    def run(qps: float, name: str):
        offered.append(qps)
        lat = latency_at(qps)
        valid = lat <= bound_ms
        rec = {"qps": qps, "valid": valid, "reason": None if valid else f"{key[:-3]} over the bound",
               key: lat, "logs": name}
        return rec, {"loadgen": {"valid": valid, key: lat}, "name": name}

    return run, offered


def test_the_search_stops_at_a_plateau():
    """The threads park between sparse queries: below 40 QPS the p99 stays near 18 ms against a
    12 ms bound (onnxruntime on squeezenet here, docs/scenarios.md). Halving from 100 to 50 QPS
    lowered it (30 -> 20 ms), 50 -> 25 did too (20 -> 18.5, 7.5 %), 25 -> 12.5 did not (-1 %):
    four tries instead of eight, and the answer is none valid above 12.5 QPS."""
    run, offered = fake_loadgen(lambda q: 30.0 if q > 60 else 20.0 if q > 40 else 18.5 if q > 20 else 18.3,
                                bound_ms=12.0)
    best, tries, last, ending = bisect(run, 200.0, 8, key="p99_ms", bound_ms=12.0)
    assert offered == [100.0, 50.0, 25.0, 12.5]
    assert best is None and len(tries) == 4 and last["name"] == "try4"
    assert ending == {"stopped": "plateau", "none_valid_above_qps": 12.5}
    assert verdict(ending["none_valid_above_qps"]) == "none valid above 12.50 QPS"


def test_a_latency_that_still_falls_is_searched_down_to_a_valid_load():
    """A p99 that keeps falling as the load halves is no plateau: the search goes on, finds a VALID
    load and bisects as before; the answer is the highest VALID QPS."""
    run, offered = fake_loadgen(lambda q: 5.0 + q / 5, bound_ms=12.0)  # VALID up to 35 QPS
    best, tries, _, ending = bisect(run, 400.0, 8, floor_qps=20.0, key="p99_ms", bound_ms=12.0)
    assert offered[:4] == [200.0, 100.0, 50.0, 25.0]
    assert best is not None and 25.0 <= best["qps"] <= 35.0
    assert ending["stopped"] in ("close", "tries") and ending["none_valid_above_qps"] is None
    assert best["qps"] == max(t["qps"] for t in tries if t["valid"])


def test_the_search_never_halves_below_its_floor():
    """A latency that keeps falling but never meets the bound: the load is clamped to the floor
    (30 QPS, not 25), tried once there, and the search stops: none valid above the floor."""
    run, offered = fake_loadgen(lambda q: 20.0 + q / 2, bound_ms=12.0)
    best, tries, _, ending = bisect(run, 400.0, 8, floor_qps=30.0, key="p99_ms", bound_ms=12.0)
    assert offered == [200.0, 100.0, 50.0, 30.0]
    assert best is None and min(offered) >= 30.0
    assert ending == {"stopped": "floor", "none_valid_above_qps": 30.0}
    # a floor above half the capacity: one try, at the floor
    run, offered = fake_loadgen(lambda q: 50.0, bound_ms=12.0)
    assert bisect(run, 100.0, 8, floor_qps=80.0)[3] == {"stopped": "floor", "none_valid_above_qps": 80.0}
    assert offered == [80.0]


def test_without_floor_or_plateau_the_tries_bound_the_search():
    run, offered = fake_loadgen(lambda q: 20.0 + q, bound_ms=12.0)  # falls 2x per halving, never valid
    best, _, _, ending = bisect(run, 64.0, 5)
    assert offered == [32.0, 16.0, 8.0, 4.0, 2.0]
    assert best is None and ending == {"stopped": "tries", "none_valid_above_qps": 2.0}


def test_plateau_rule_needs_a_judged_latency_above_the_bound():
    hi = {"qps": 20.0, "valid": False, "p99_ms": 18.0}
    assert plateau(hi, {"qps": 10.0, "valid": False, "p99_ms": 17.5}, "p99_ms", 12.0)  # -2.8 %
    assert not plateau(hi, {"qps": 10.0, "valid": False, "p99_ms": 16.0}, "p99_ms", 12.0)  # -11 %: it falls
    # INVALID for another reason (too short a run) with the latency within the bound: not a plateau
    assert not plateau({"p99_ms": 10.0}, {"p99_ms": 10.0}, "p99_ms", 12.0)
    assert not plateau(hi, {"qps": 10.0, "valid": False}, "p99_ms", 12.0)  # no figure: no plateau
    # tries INVALID on something else (the latency flat and within the bound) never end it early
    offered = []

    def run(qps, name):
        offered.append(qps)
        return {"qps": qps, "valid": qps <= 9, "p99_ms": 11.0}, {}

    best, _, _, ending = bisect(run, 64.0, 5, key="p99_ms", bound_ms=12.0)
    assert offered[:3] == [32.0, 16.0, 8.0] and best is not None and ending["none_valid_above_qps"] is None


def test_floor_and_judged_latency_from_the_settings():
    assert floor_of({"server_floor_qps": 3.0}, 500.0) == (3.0, "the server_floor_qps setting")
    value, why = floor_of({}, 500.0)
    assert value == pytest.approx(100.0) and "a fifth of the capacity" in why  # (a tenth until issue 42)
    assert (judged_key(0.99), judged_key(0.9), judged_key(0.5)) == ("p99_ms", "p90_ms", "p50_ms")


def test_floor_setting_is_checked():
    from ios_bench.errors import InputError
    from ios_bench.scenarios.settings import settings_for

    assert settings_for("server", overrides={"server_floor_qps": 2})["server_floor_qps"] == 2.0
    assert "server_floor_qps" not in settings_for("server")
    for bad in (0, -1, "x", float("nan"), True):
        with pytest.raises(InputError, match="server_floor_qps"):
            settings_for("server", overrides={"server_floor_qps": bad})
    with pytest.raises(InputError, match="does not apply"):
        settings_for("offline", overrides={"server_floor_qps": 2})


def _round(i: int, qps: float | None, none_above: float | None) -> dict:
    return {"round": i, "status": "ok", "disturbed": None, "samples_ms": [1.0, 2.0],
            "loadgen": {"valid": qps is not None, "invalid_reason": "99th percentile latency over the bound"},
            "server": {"max_valid_qps": qps, "none_valid_above_qps": none_above, "stopped": "plateau",
                       "verdict": verdict(none_above), "tries": []}}


def test_a_cell_without_a_valid_load_says_none_valid_above_in_record_line_and_report(tmp_path):
    from ios_bench.reporting.report import Table
    from ios_bench.scenarios.report import sections
    from ios_bench.scenarios.summary import describe_scenario, scenario_fields

    fields = scenario_fields("server", [_round(0, None, 4.0), _round(1, None, 6.25), _round(2, 9.0, None)], 1)
    assert fields["scenario_valid"] is False and "scenario_figure" not in fields
    server = fields["server"]
    assert server["none_valid_above_qps"] == 6.25 and server["none_valid_above_qps_per_round"] == [4.0, 6.25]
    assert server["verdict"] == "none valid above 6.250 QPS"
    record = {"status": "ok", "rounds_used": 3, "rounds_measured": 3, "scenario": "server", "model": "m",
              "framework": "onnxruntime", "device": "cpu", "batch_size": 1, "instances": 1, "instance_threads": 2,
              **fields}
    assert "none valid above 6.250 QPS" in describe_scenario(record, "[1/1] m b1 onnxruntime 1x2")
    found = scenario_fields("server", [_round(0, 10.0, None), _round(1, 30.0, None)], 1)
    assert found["scenario_figure"] == 20.0 and found["server"].get("verdict") is None
    items = [it for _, its in sections([record], tmp_path, {}, Table) for it in its]
    tables = [it for it in items if isinstance(it, Table)]
    cells = [c for t in tables for row in t.rows for c in row]
    assert cells.count("none valid above 6.250 QPS") == 2  # every configuration, and the framework's winner row


def test_the_duration_model_counts_tries_down_to_the_floor():
    from ios_bench.scenarios.cells import server_loads

    assert server_loads({"server_tries": 8}, 0.01) == [2, 4, 5]  # default floor: a fifth of the capacity
    assert server_loads({"server_tries": 2}, 0.01) == [2, 4]
    assert server_loads({"server_tries": 8, "server_floor_qps": 25.0}, 0.01) == [2, 4]  # 100 QPS / 25
    assert server_loads({"server_tries": 8, "server_floor_qps": 80.0}, 0.01) == [2]  # above half: one try
