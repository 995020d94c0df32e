"""Scenario settings: defaults per scenario, the reduced ``--quick`` form, a user's overrides
(``--scenario-setting KEY=VALUE``), their validation, and LoadGen's ``TestSettings`` from them.

Every setting is a plain JSON value kept in ``plan.json`` and in each record (``scenario_settings``),
so a run says what it asked LoadGen for. The defaults follow LoadGen's own rules where they bind:
LoadGen judges a run VALID only when its early-stopping estimate has enough queries (at 99 %
confidence: 64 queries for a p90, 662 for a p99 in SingleStream/MultiStream; 459 queries for a
Server p99 with no query over the bound), its minimum duration and its minimum query count.
"""

from __future__ import annotations

import math

from ios_bench.errors import InputError
from ios_bench.scenarios import LOADGEN_SCENARIOS

# key -> (what it is, its check)
_POSITIVE_INT = ("a positive integer", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
_POSITIVE = ("a positive number", lambda v: _num(v) and v > 0)
_FRACTION = ("a fraction between 0 and 1 (exclusive)", lambda v: _num(v) and 0 < v < 1)
_SEARCH = ("bisect or loadgen-peak", lambda v: v in SERVER_SEARCHES)

SETTINGS = {
    "min_query_count": (*_POSITIVE_INT, "LoadGen's minimum query count (Offline: samples in its one query)"),
    "min_duration_ms": (*_POSITIVE, "LoadGen's minimum test duration, ms"),
    "target_percentile": (*_FRACTION, "the latency percentile SingleStream/MultiStream report (LoadGen's target)"),
    "samples_per_query": (*_POSITIVE_INT, "MultiStream: samples in each query"),
    "server_percentile": (*_FRACTION, "Server: the percentile whose latency must meet the bound"),
    "server_latency_ms": (*_POSITIVE, "Server: the latency bound, ms (default: server_latency_factor x the "
                                      "single-stream p90 measured in the same worker)"),
    "server_latency_factor": (*_POSITIVE, "Server: the bound as a multiple of the single-stream p90"),
    "server_tries": (*_POSITIVE_INT, "Server: LoadGen runs the QPS search may make (each one recorded)"),
    "server_floor_qps": (*_POSITIVE, "Server: the lowest offered load worth serving, QPS: the search never halves "
                                     "below it and stops at it (default: a fifth of the capacity measured in "
                                     "the round, instances x 1000 / one request's ms)"),
    "server_search": (*_SEARCH, "Server: bisect (our bounded search over LoadGen runs) or loadgen-peak "
                                "(LoadGen's FindPeakPerformance, then one confirming run)"),
    "qsl_size": (*_POSITIVE_INT, "inputs in the query sample library (seeded; sample i uses seed + i)"),
    "checked_responses": (*_POSITIVE_INT, "responses checked against the oracle per LoadGen run (sampled)"),
}
SERVER_SEARCHES = ("bisect", "loadgen-peak")
OPTIONAL_SERVER = {"server_latency_ms", "server_floor_qps"}  # Server settings unset by default

_COMMON = {"min_duration_ms": 10_000.0, "qsl_size": 16, "checked_responses": 32}
DEFAULTS = {
    "single-stream": {**_COMMON, "min_query_count": 1024, "target_percentile": 0.9},
    "multi-stream": {**_COMMON, "min_query_count": 662, "target_percentile": 0.99, "samples_per_query": 8},
    "offline": {**_COMMON, "min_query_count": 1024},
    "server": {**_COMMON, "min_query_count": 1024, "server_percentile": 0.99, "server_latency_factor": 2.0,
               "server_tries": 8, "server_search": "bisect"},
}
# --quick: what fits a 2-core machine in minutes. Reduced, and labelled so in records and reports;
# LoadGen's verdict is still its own. MultiStream and Server judge a p90 (64 queries suffice for
# LoadGen's early stopping) instead of a p99 (662 / 459 queries at least).
_QUICK_COMMON = {"min_duration_ms": 1000.0, "qsl_size": 4, "checked_responses": 8}
QUICK = {
    "single-stream": {**_QUICK_COMMON, "min_query_count": 64, "target_percentile": 0.9},
    "multi-stream": {**_QUICK_COMMON, "min_query_count": 64, "target_percentile": 0.9, "samples_per_query": 2},
    "offline": {**_QUICK_COMMON, "min_query_count": 64},
    "server": {**_QUICK_COMMON, "min_query_count": 64, "server_percentile": 0.9, "server_latency_factor": 2.0,
               "server_tries": 5, "server_search": "bisect"},
}
QUICK_NOTE = ("reduced (--quick): minimum duration 1 s, 64 queries, 4 inputs in the sample library; MultiStream "
              "and Server judge a p90 instead of a p99")


def json_text(v) -> str:
    """A setting's value as it would be written (``0``, ``"abc"``, ``[1]``)."""
    import json

    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return repr(v)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def settings_for(scenario: str, quick: bool = False, overrides: dict | None = None) -> dict:
    """The settings of a scenario: its defaults (or the quick ones), then the user's overrides, each
    checked (``InputError`` naming the setting). Keys a scenario does not use are refused."""
    if scenario not in LOADGEN_SCENARIOS:
        raise InputError(f"unknown scenario {str(scenario)[:40]!r}; choose from: latency, "
                         + ", ".join(LOADGEN_SCENARIOS))
    base = dict((QUICK if quick else DEFAULTS)[scenario])
    for key, value in (overrides or {}).items():
        problem = setting_problem(scenario, key, value)
        if problem:
            raise InputError(problem)
        base[key] = float(value) if key in ("min_duration_ms", "server_latency_ms", "server_latency_factor",
                                            "server_floor_qps") else value
    return base


def setting_problem(scenario: str, key, value) -> str | None:
    """Why ``key=value`` is not a setting of ``scenario`` (one line), or None."""
    if key not in SETTINGS:
        return f"unknown scenario setting {str(key)[:40]!r}; choose from: {', '.join(SETTINGS)}"
    used = set(DEFAULTS[scenario]) | (OPTIONAL_SERVER if scenario == "server" else set())
    if key not in used:
        return f"scenario setting {key} does not apply to {scenario} (it uses: {', '.join(sorted(used))})"
    what, check, _ = SETTINGS[key]
    if not check(value):
        return f"scenario setting {key}={json_text(value)[:40]}: expected {what}"
    return None


def settings_problem(scenario: str, overrides) -> str | None:
    """Why a plan's ``scenario_settings`` cannot be used with ``scenario`` (one line), or None."""
    if not isinstance(overrides, dict):
        return f"scenario settings must be an object, not {type(overrides).__name__}"
    if scenario not in LOADGEN_SCENARIOS:
        return "scenario settings given without a LoadGen scenario" if overrides else None
    for key, value in overrides.items():
        problem = setting_problem(scenario, key, value)
        if problem:
            return problem
    return None


def test_settings(lg, scenario: str, settings: dict, estimate_ms: float, instances: int, seed: int = 0,
                  target_qps: float | None = None, latency_bound_ms: float | None = None, peak: bool = False,
                  hint_scale: float = 1.0):
    """LoadGen's ``TestSettings`` for one run. ``estimate_ms``: one request's latency measured just
    before (LoadGen's hints to pre-generate enough queries: SingleStream/MultiStream expected
    latency, Offline expected QPS, taken generously so that the minimum duration is met);
    ``hint_scale`` > 1 asks for that many times more queries (a run that ended before its minimum
    duration is run again with it)."""
    from ios_bench.scenarios import LOADGEN_NAMES

    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, LOADGEN_NAMES[scenario])
    ts.mode = lg.TestMode.FindPeakPerformance if peak else lg.TestMode.PerformanceOnly
    ts.min_query_count = int(settings["min_query_count"])
    ts.min_duration_ms = int(math.ceil(settings["min_duration_ms"]))
    ts.qsl_rng_seed = ts.sample_index_rng_seed = ts.schedule_rng_seed = int(seed)
    est_ns = max(1_000.0, estimate_ms * 1e6) / hint_scale
    if scenario == "single-stream":
        ts.single_stream_expected_latency_ns = int(est_ns / 2)  # more queries than needed, never fewer
        ts.single_stream_target_latency_percentile = float(settings["target_percentile"])
    elif scenario == "multi-stream":
        spq = int(settings["samples_per_query"])
        ts.multi_stream_samples_per_query = spq
        ts.multi_stream_expected_latency_ns = int(est_ns * math.ceil(spq / max(1, instances)) / 2)
        ts.multi_stream_target_latency_percentile = float(settings["target_percentile"])
    elif scenario == "offline":
        ts.offline_expected_qps = 2.0 * instances * 1e9 / est_ns
    else:
        ts.server_target_qps = float(target_qps)
        ts.server_target_latency_ns = int(latency_bound_ms * 1e6)
        ts.server_target_latency_percentile = float(settings["server_percentile"])
        if peak:
            ts.server_find_peak_qps_decimals_of_precision = 0
    return ts
