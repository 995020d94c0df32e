"""Throughput as services measure it: MLPerf LoadGen scenarios (docs/scenarios.md).

``ios-bench run --scenario latency|single-stream|multi-stream|offline|server``. ``latency`` is the
harness's own protocol (``ios_core.measurement.measure``); every other scenario drives the compiled model
through the real MLPerf LoadGen (``mlperf_loadgen``, the ``mlcommons-loadgen`` distribution),
which generates the queries, times them and judges the run valid or not. Scenario cells are cells
of the one sweep (``ios_bench.running.sweep``): measured in rounds, each round a fresh worker, with
disturbance detection; only what runs inside a round differs.

Modules: :mod:`.settings` (scenario settings, defaults, ``--quick``, validation, LoadGen's
``TestSettings``), :mod:`.concurrency` (each framework's way to keep several requests in flight,
and the instance/thread configurations searched), :mod:`.loadgen` (the SUT and QSL around an
engine, one LoadGen test, its logs parsed), :mod:`.server` (the bounded search for the highest
QPS that meets the latency bound), :mod:`.round` (one round in a worker), :mod:`.summary` (a
cell's scenario figures over rounds), :mod:`.report` (tables and the server plot).
"""

from __future__ import annotations

LATENCY = "latency"
SCENARIOS = (LATENCY, "single-stream", "multi-stream", "offline", "server")
LOADGEN_SCENARIOS = SCENARIOS[1:]
# LoadGen's own names (mlperf_loadgen.TestScenario)
LOADGEN_NAMES = {"single-stream": "SingleStream", "multi-stream": "MultiStream", "offline": "Offline",
                 "server": "Server"}


def loadgen_problem() -> str | None:
    """Why the MLPerf LoadGen cannot be used here (not installed), or None."""
    try:
        import mlperf_loadgen  # noqa: F401
    except Exception as e:  # ImportError, or a broken binary wheel
        return (f"the MLPerf LoadGen is not installed ({type(e).__name__}: {str(e).splitlines()[0][:120]}); "
                "install the loadgen extra: pip install 'ios-bench[loadgen]'")
    return None
