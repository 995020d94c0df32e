"""One round of a scenario cell, inside its worker (``ios_bench.running.worker.task_cell`` hands over once
the graph or schedule is loaded): build the programs the framework's way for the cell's
configuration (:mod:`.concurrency`), check each against the oracle before timing, time one request
for LoadGen's hints, run the scenario through LoadGen inside the interference window (the Server
search: every try), then check the sampled responses against the oracle. A wrong response makes
the round (hence the cell) ``wrong``; a request that raises fails it.

The round's ``samples_ms`` are the SUT's own per-sample latencies of the test that gives the
figure (from LoadGen's IssueQuery to our completion); ``loadgen`` is LoadGen's own result of it,
read from its logs, which stay in the run folder (``loadgen/<cell>/r<round>/<test>/``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def _estimate_ms(program, prepared, calls: int = 5, warmup: int = 2) -> float:
    """One request's latency (median of a few back-to-back calls): LoadGen's hints only."""
    for _ in range(warmup):
        program.execute(prepared)
        program.sync()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        program.execute(prepared)
        program.sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def run_round(spec: dict, result: dict, adapter, graph, options: dict, tolerance: float, precision_problem) -> dict:
    """``precision_problem(adapter, info) -> str | None``: the worker's one precision rule."""
    from ios_bench.records.record import RoundResult, jsonable
    from ios_bench.scenarios.concurrency import build_engine
    from ios_bench.scenarios.loadgen import run_test
    from ios_bench.scenarios.server import bisect, floor_of, judged_key, loadgen_peak, try_record, verdict
    from ios_core.check import check_precision, combined_check

    precision = spec.get("precision") or "fp32"  # the cell's: its bound and, for int8, the arg-max rule
    from ios_core.measurement.interference import Window
    from ios_core.measurement.measure import Measurement
    from ios_core.measurement.threads import resolve_threads

    sc = spec["scenario"]
    name, settings, n = sc["name"], sc["settings"], int(sc["instances"])
    threads = resolve_threads(spec.get("threads"))
    outdir, rel = Path(spec["loadgen_path"]), sc["logs"]
    result["phase"] = "build"
    engine, how = build_engine(adapter, graph, spec["batch_size"], spec["device"], n, threads, options)
    first = engine.programs[0]
    info = {k: v for k, v in first.info.items() if jsonable(v)}
    result.update(info=info, build_seconds=info.get("build_seconds"), precision=info.get("precision"),
                  framework_version=info.get("framework_version"), concurrency=how)
    problem = precision_problem(adapter, info)
    if problem:
        result.pop("phase", None)
        result.update(status="failed", reason=problem)
        return result
    result["phase"] = "input"
    with np.load(spec["qsl_path"]) as data:
        inputs, outputs = data["inputs"], data["outputs"]
    engine.load(list(inputs))
    result["phase"] = "check"
    before = None
    for program in engine.programs:  # every program, before timing
        c = check_precision(program.run(inputs[0]), outputs[0], precision, tolerance)
        program.sync()
        if before is None or before.passed and (not c.passed or c.max_rel_err > before.max_rel_err):
            before = c  # the worst program's check; a failure is never replaced
    estimate = _estimate_ms(first, first.prepare(inputs[0]))
    result["estimate_ms"] = estimate
    result["phase"] = f"LoadGen {name}"
    qsl_size = len(inputs)
    seed = int(spec.get("input_seed") or 0)
    tests: list[dict] = []

    def test(scenario: str, folder: str, **kw) -> dict:
        res = run_test(engine, scenario, settings, outdir / folder, estimate, qsl_size, seed, **kw)
        res["loadgen"]["logs"] = f"{rel}/{folder}"
        tests.append(res)
        return res

    with Window() as window:
        if name != "server":
            main = test(name, name)
            lgr = main["loadgen"]
            if not lgr.get("valid") and (lgr.get("constraints") or {}).get("min duration") is False \
                    and lgr.get("duration_s"):
                # LoadGen pre-generates its queries from our hint; it ended too soon: once more, with
                # as many more queries as it lacked (and half again), as LoadGen's message recommends
                scale = 1.5 * settings["min_duration_ms"] / 1000 / max(lgr["duration_s"], 1e-3)
                result["first_try"] = {k: lgr.get(k) for k in ("validity", "invalid_reason", "duration_s", "logs")}
                main = test(name, f"{name}-longer", hint_scale=scale)
        else:
            bound = float(sc["latency_bound_ms"])
            capacity = n * 1000.0 / max(estimate, 1e-3)

            def run(qps: float, folder: str, peak: bool = False):
                res = test("server", folder, target_qps=qps, latency_bound_ms=bound, peak=peak)
                rec = try_record(qps, res, f"{rel}/{folder}")
                rec["logs_abs"] = str(outdir / folder)
                return rec, res

            floor, floor_from = floor_of(settings, capacity)
            key = judged_key(settings["server_percentile"])
            if settings.get("server_search") == "loadgen-peak":
                best, tries, main, ending = loadgen_peak(run, capacity)
            else:
                best, tries, main, ending = bisect(run, capacity, int(settings["server_tries"]), floor, key, bound)
            for t in tries:
                t.pop("logs_abs", None)
            result["server"] = {"search": settings.get("server_search", "bisect"), "latency_bound_ms": bound,
                                "bound_from": sc.get("bound_from"), "capacity_estimate_qps": capacity,
                                "floor_qps": floor, "floor_from": floor_from, "judged": key, **ending,
                                "verdict": verdict(ending["none_valid_above_qps"]),
                                "max_valid_qps": best["qps"] if best else None, "tries": tries}
    result["phase"] = "check"
    after = None
    checked = 0
    failed = sum(t["failed"] for t in tests)
    for t in tests:
        for sample, y in t["responses"]:
            c = check_precision(y, outputs[sample], precision, tolerance)
            checked += 1
            if after is None or (after.passed and not c.passed):
                after = c if c.passed else type(c)(False, c.max_abs_err, c.max_rel_err, c.tolerance,
                                                    f"response to QSL sample {sample}: {c.reason}")
    if after is None:
        after = type(before)(False, 0.0, 0.0, tolerance, "no response was checked")
    check = combined_check(before, after)
    check["responses_checked"] = checked
    result["loadgen"] = main["loadgen"]
    # the SUT's per-sample latencies of the test that gives the figure, as one measurement
    latencies = Measurement(samples_ms=[float(v) for v in main["latencies_ms"]], number=1, warmup=0)
    result.update(RoundResult.measured(latencies, check, window.figures))
    if failed:
        result.pop("phase", None)
        result.update(status="failed", reason=f"{failed} request(s) failed during the LoadGen test")
        return result
    result["status"] = "ok" if result["check"]["passed"] else "wrong"
    result.pop("phase", None)
    return result
