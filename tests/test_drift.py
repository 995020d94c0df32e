"""compare between two separate runs says what it cannot know (ios_bench.reporting.drift): the time between
the runs, each run's canary, and 'drift possible' on verdicts within the drift an ab run measured."""

import json

from ios_bench.reporting.compare import compare_runs
from ios_bench.reporting.drift import DRIFT_FILE, DRIFT_MARK, between_runs, find_drift
from ios_bench.results import Store, cell_key


def _record(fw, level, hour, canary_ms):
    rounds = [{"round": i, "pass": i, "status": "ok", "disturbed": None,
               "started": f"2026-11-26T{hour:02d}:0{i}:00+00:00", "finished": f"2026-11-26T{hour:02d}:0{i}:30+00:00",
               "interference": {"canary_before_ms": canary_ms, "canary_after_ms": canary_ms},
               "samples_ms": [level * (1 + 0.001 * j) * (1 + 0.002 * i) for j in range(5)]} for i in range(3)]
    pooled = [s for g in rounds for s in g["samples_ms"]]
    return {"schema": 2, "cell": cell_key("m", 1, fw, "cpu"), "model": "m", "batch_size": 1, "framework": fw,
            "device": "cpu", "status": "ok", "rounds": rounds, "median_ms": level, "std_ms": 0.01,
            "p10_ms": min(pooled), "p90_ms": max(pooled), "samples_ms": pooled, "rounds_used": 3,
            "rounds_measured": 3, "rounds_disturbed": 0,
            "check": {"passed": True, "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-3, "reason": ""}}


def _runs(tmp_path):
    a, b = tmp_path / "runs" / "a", tmp_path / "runs" / "b"
    for folder, hour, canary, levels in ((a, 7, 1.0, (10.0, 10.0)), (b, 9, 1.2, (10.6, 14.0))):
        for fw, level in zip(("small", "large"), levels):
            Store(folder).append(_record(fw, level, hour, canary))
        (folder / "env.json").write_text(json.dumps({"hostname": "here"}))
    return a, b


def test_compare_says_the_time_between_the_runs_and_their_canaries(tmp_path):
    a, b = _runs(tmp_path)
    result = compare_runs(a, b, threshold=0.02)
    between_runs(result, a, b)
    text = " ".join(result.notes)
    assert "118 min apart (A then B)" in text  # A's last round finished 07:02:30, B's first started 09:00
    assert "canary: A 1.000 ms, B 1.200 ms (+20.0%)" in text
    assert "drift is unknown" in text and "ios-bench ab A B" in text  # no ab run: nothing marked
    assert not any(DRIFT_MARK in c.verdict for c in result.changes)


def test_verdicts_within_the_measured_drift_are_marked(tmp_path):
    a, b = _runs(tmp_path)
    ab = tmp_path / "runs" / "ab"
    ab.mkdir()
    (ab / DRIFT_FILE).write_text(json.dumps({"hostname": "here", "measured": "2026-11-26T08:00:00+00:00",
                                             "between_run_spread": 0.04}))  # ±8.3 % at 2 spreads
    assert find_drift(a, b)[1] == ab / DRIFT_FILE
    result = compare_runs(a, b, threshold=0.02)
    between_runs(result, a, b)
    verdicts = {c.framework: c.verdict for c in result.changes}
    assert verdicts["small"] == f"regression ({DRIFT_MARK})"  # +6 %, within the drift
    assert verdicts["large"] == "regression"  # +40 %: drift cannot explain it
    assert result.counts()["regression"] == 2
    assert any("±8.3%" in n and "ios-bench ab" in n for n in result.notes)
    # a drift file from another host is not this machine's
    (ab / DRIFT_FILE).write_text(json.dumps({"hostname": "elsewhere", "between_run_spread": 0.04}))
    assert find_drift(a, b) is None
