"""Scenario cells of a sweep: each (model, batch, framework or IOS schedule, device) cell of a
LoadGen scenario becomes one cell per instance/thread configuration searched
(:func:`~.concurrency.configurations`), each measured in rounds like any cell. A Server sweep
without an explicit latency bound also measures, per framework, the single-stream cell (one
instance, every thread) whose p90 sets its bound (``server_latency_factor`` x that p90): those run
first, in a phase of their own.

:func:`expand` plans them (the sweep calls it from ``plan_cells``), :func:`round_spec` adds a
round's scenario part to its worker spec, :func:`bounds_from` reads the single-stream figures.
"""

from __future__ import annotations

from dataclasses import replace

from ios_bench.planning.cells import Cell, safe_name
from ios_bench.scenarios.concurrency import configurations
from ios_bench.scenarios.settings import QUICK_NOTE, settings_for

LOGS_DIR = "loadgen"


def needs_bound_cells(plan) -> bool:
    return plan.scenario == "server" and "server_latency_ms" not in (plan.scenario_settings or {})


def expand(cells: list[Cell], plan, adapters_info: dict) -> tuple[list[Cell], list[str], list[str]]:
    """The scenario cells of ``cells`` (the sweep's latency cells as planned for the device), with
    notes (frameworks left out of a default sweep) and refusals (frameworks named explicitly that
    cannot run the scenario: bad input). ``adapters_info``: {device: the probe's adapters}."""
    out: list[Cell] = []
    notes: list[str] = []
    refusals: list[str] = []
    threads = plan.threads or 1
    for cell in cells:
        info = (adapters_info.get(cell.device) or {}).get(cell.adapter) or {}
        if not cell.skip_reason and "concurrency" in info and info.get("concurrency") is None:
            note = info.get("concurrency_note") or "no way to keep several requests in flight"
            why = f"{cell.framework} cannot run the {plan.scenario} scenario: {note}"
            if plan.frameworks is not None and cell.framework in plan.frameworks:
                refusals.append(why)
            elif why not in notes:
                notes.append(why)
            continue
        configs = configurations(plan.scenario, threads, plan.instances)
        if cell.skip_reason:
            configs = configs[:1]
        if needs_bound_cells(plan):
            out.append(replace(cell, scenario="single-stream", instances=1, instance_threads=threads))
        for n, t in configs:
            out.append(replace(cell, scenario=plan.scenario, instances=n, instance_threads=t,
                               weight=cell.weight * (int(settings_for(plan.scenario, plan.quick).get(
                                   "server_tries", 1)) if plan.scenario == "server" else 1)))
    return out, notes, refusals


def settings_of(plan, scenario: str) -> dict:
    """A cell's LoadGen settings: the plan's scenario with the user's overrides; the single-stream
    cells that bound a Server sweep take single-stream's own (quick or default) settings."""
    if scenario == plan.scenario:
        return settings_for(scenario, plan.quick, plan.scenario_settings)
    return settings_for(scenario, plan.quick)


def round_spec(cell: Cell, plan, index: int, bound: tuple[float, str] | None) -> dict:
    """The scenario part of a round's worker spec (``CellSpec.scenario``, ``loadgen_path``) and the
    LoadGen log files the round may write (for executors that ship files back)."""
    settings = settings_of(plan, cell.scenario)
    logs = f"{LOGS_DIR}/{cell.file_stem}/r{index}"
    sc = {"name": cell.scenario, "settings": settings, "instances": cell.instances,
          "instance_threads": cell.instance_threads, "logs": logs}
    tests = [cell.scenario, f"{cell.scenario}-longer"]
    if cell.scenario == "server":
        if bound is None and "server_latency_ms" in settings:
            bound = (float(settings["server_latency_ms"]), "the server_latency_ms setting")
        if bound is not None:
            sc["latency_bound_ms"], sc["bound_from"] = bound
        tries = int(settings["server_tries"])
        tests = [f"try{i + 1}" for i in range(tries)] + ["peak", "confirm"]
    outputs = [f"{logs}/{t}/{name}" for t in tests for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt")]
    return {"scenario": sc, "loadgen_path": logs, "outputs": outputs}


def record_fields(cell: Cell, plan) -> dict:
    """What every record of a scenario cell says of its scenario (also a skipped or failed one)."""
    if not cell.scenario:
        return {}
    from ios_bench.planning.cells import label

    return {"label": f"{label(cell.framework, cell.precision)} {cell.instances}x{cell.instance_threads}",
            "scenario": cell.scenario, "variant": cell.variant, "instances": cell.instances,
            "instance_threads": cell.instance_threads, "scenario_settings": settings_of(plan, cell.scenario),
            **({"reduced": QUICK_NOTE} if plan.quick else {})}


def bounds_from(records: dict[str, dict], plan) -> dict[tuple, tuple[float, str] | str]:
    """{(model, batch, framework, device): (bound ms, where it came from) or why there is none}
    from the single-stream cells of a Server sweep."""
    factor = float(settings_for("server", plan.quick, plan.scenario_settings)["server_latency_factor"])
    out: dict = {}
    for rec in records.values():
        if rec.get("scenario") != "single-stream":
            continue
        key = (rec["model"], rec["batch_size"], rec["framework"], rec["device"])
        p90 = (rec.get("loadgen") or {}).get("p90_ms") if rec.get("status") == "ok" else None
        fig = rec.get("scenario_figure") if rec.get("status") == "ok" else None
        if fig is None and p90 is None:
            why = rec.get("reason") or "no figure"
            out[key] = f"no single-stream p90 to bound the latency ({rec['status']}: {why})"
            continue
        base = fig if fig is not None else p90
        out[key] = (factor * base, f"{factor:g} x the single-stream p90 of {rec['cell']} ({base:.3f} ms)")
    return out


def bound_key(cell: Cell) -> tuple:
    return (cell.model, cell.batch_size, cell.framework, cell.device)


def qsl_file(model: str, batch_size: int) -> str:
    return f"refs/{safe_name(f'{model}-b{batch_size}')}.qsl.npz"


class RoundEstimate:
    """The sweep's duration model (``ios_bench.planning.estimate.Model``) for a LoadGen scenario's rounds: a
    worker's fixed part, a few calls to time one request, then each LoadGen test, which lasts its
    minimum duration or its minimum query count of requests, whichever is longer (a run that ended
    too soon once more). Server: every try of the search (``ios_bench.scenarios.server.bisect``),
    counted as if each were invalid: the search starts at half the capacity (one request's latency)
    and halves its offered load after an invalid try, so its tries last 2, 4, 8, ... times the
    queries' latency. That is an upper bound (a search that finds a valid load early takes less),
    and what this 2-core machine needed: on squeezenet every framework's p99 at low load stayed
    above 2x its single-stream p90, and its searches halved down to a few QPS: onnxruntime's
    round took 242 s, counted here as 181 s (at one request's latency per query, as before: 15 s).
    The search stops at its floor (:func:`server_loads`): by default a fifth of the capacity, so a
    round is at most tries at 2, 4 and 5 times the latency (a plateau may end it sooner).
    A cell is counted under its own scenario (a Server sweep's single-stream cells as single-stream).
    Everything else is the wrapped model's."""

    def __init__(self, model, plan):
        self.model, self.plan = model, plan

    def __getattr__(self, name):
        return getattr(self.model, name)

    def cell_s(self, cell, count: bool = False) -> float:
        return self.round_s(cell.model, cell.batch_size, cell.framework, count, cell.scenario or self.plan.scenario)

    def round_s(self, model: str, batch: int, framework: str, count: bool = False,
                scenario: str | None = None) -> float:
        scenario = scenario or self.plan.scenario
        s = settings_of(self.plan, scenario)
        lat = self.model.latency_s(model, batch, framework, count)
        queries = int(s["min_query_count"]) * int(s.get("samples_per_query", 1))
        least = s["min_duration_ms"] / 1000
        if scenario == "server":
            tests = sum(max(least, queries * lat * m) for m in server_loads(s, lat))
        else:
            tests = 1.5 * max(least, queries * lat)
        return self.model.fixed_s(framework) + 7 * lat + tests


def server_loads(settings: dict, latency_s: float) -> list[float]:
    """How many times one request's latency each try of a Server search that finds nothing valid
    spends per query (the duration model's upper bound): it halves its load from half the capacity
    (one instance: 1 / latency) down to its floor (``ios_bench.scenarios.server.floor_of``), where
    it stops, within ``server_tries``."""
    from ios_bench.scenarios.server import FLOOR_SHARE

    floor = settings.get("server_floor_qps")
    cap = 1 / FLOOR_SHARE if floor is None else max(2.0, 1 / max(latency_s * float(floor), 1e-12))
    out: list[float] = []
    for i in range(int(settings["server_tries"])):
        out.append(min(2.0 ** (i + 1), cap))
        if out[-1] >= cap:
            break
    return out
