"""``ios-bench run ... --dry-run``: the sweep's plan and its estimate, broken down, without measuring a
cell and without writing a run folder or a report.

It plans as ``run`` does: the models are loaded and checked, a probe worker says which frameworks and
IOS kernel providers are available (in a temporary folder, removed after), the cells are planned by
:meth:`Sweep.plan_cells`, and the estimate's cost model is built by :meth:`Sweep.costs` (earlier runs
beside the run folder, the workers' starts the probe timed, the speed probe's canary). The run folder
is only read (with ``--resume``: its finished cells, rounds, reference outputs and schedules are
reused and not counted). The breakdown is :mod:`ios_bench.planning.estimate_breakdown`'s.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ios_bench.planning import estimate, probing
from ios_bench.planning.cells import ref_file
from ios_bench.planning.estimate_breakdown import KINDS, breakdown, rates, totals, under_budget
from ios_bench.planning.plan import Plan
from ios_bench.records.runfolder import RunFolder, npy_ok
from ios_bench.running.context import SweepContext
from ios_bench.running.rounds import AUTO
from ios_bench.running.schedules import schedule_path
from ios_bench.running.sweep import Sweep
from ios_core.measurement.protocol import protocol_fields

PROBE_NOTE = ("the probe worker ran (in a temporary folder, removed) to say which frameworks are available; "
              "no cell was measured, no run folder or report written")


def plan_and_estimate(plan: Plan, folder: Path, resume: bool = False, executor=None, quiet: bool = False,
                      probes: dict | None = None, probe_speed: bool = True) -> dict:
    """The dry run's figures (what :func:`lines` prints; ``--format json`` prints them as they are, less
    ``probes``: what the probe worker said, for another dry run of the same frameworks to reuse).
    ``probe_speed`` False: the figures at the speed they were measured at (``Sweep.costs``)."""
    from rich.console import Console

    from ios_bench.machine.envinfo import cpu_info
    from ios_bench.planning.loading import load_graph
    from ios_bench.running.worker import load_plugins

    load_plugins()
    graphs = {spec: load_graph(spec) for spec in plan.models}
    sweep = Sweep(plan, folder, console=Console(stderr=True, soft_wrap=True, quiet=quiet), resume=resume,
                  progress=False, executor=executor)
    sweep.name_graphs(graphs)
    for g in graphs.values():
        g.check_fits(max(plan.batch_sizes))
    with tempfile.TemporaryDirectory(prefix="ios-bench-dry-run-") as tmp:
        ctx = SweepContext(plan, RunFolder(tmp), sweep.executor, sweep.say)
        try:
            sweep.executor.open(Path(tmp), sweep.say)
            sweep.probes = probes if probes is not None else probing.probe(ctx, sweep.placement)
        finally:
            sweep.executor.close()
    cells = sweep.plan_cells(sweep.probes, graphs)
    latest = sweep.store.latest(on_problem=lambda m: None) if resume else {}
    todo = [c for c in cells if c.key not in latest]
    runnable = [c for c in todo if not c.skip_reason]
    got = sweep.costs(runnable, graphs, cpu_info(), probe_speed)
    model = got["model"]
    est = estimate.sweep_seconds(model, runnable, got["left"], got["refs"], got["searches"], fresh=got["fresh"])
    rows = breakdown(model, runnable, got["left"], got["refs"], got["searches"], fresh=got["fresh"])
    warm = [c for c in runnable if estimate.warm_build_cache(estimate.series(c.framework, c.precision), c.model,
                                                             c.batch_size)]
    here = Path(folder)  # what the run folder holds already (--resume), only read
    refs_here = {(c.model, c.batch_size) for c in cells if npy_ok(here / ref_file(c.model, c.batch_size))}
    schedules_here = {path for c in cells if c.schedule and (here / (path := schedule_path(plan, c))).exists()}
    byname = {c.key: c for c in runnable}
    budget = None
    if plan.time_budget is not None:
        budget = {"budget_s": plan.time_budget,
                  **under_budget(model, runnable, got["left"], got["refs"], got["searches"], plan.time_budget,
                                 fresh=got["fresh"])}
    return {
        "dry_run": True, "note": PROBE_NOTE, "seconds": est["seconds"], "human": estimate.human(est["seconds"]),
        "protocol": protocol_fields(plan), "rounds_per_cell": got["rounds"], "rounds_auto": plan.rounds == AUTO,
        "cells": len(cells), "skipped": len([c for c in todo if c.skip_reason]), "finished": len(cells) - len(todo),
        "to_measure": len(runnable), "rounds": sum(got["left"].values()),
        "searches": len(got["searches"]), "references": len(got["refs"]),
        "capped": [{"cell": k, "framework": byname[k].framework, "model": byname[k].model,
                    "batch": byname[k].batch_size, "ratio": round(v["ratio"], 2), "best": v["best"]}
                   for k, v in got["caps"].items()],
        "same_schedule": [{"cell": k, "model": byname[k].model, "as": byname[v].framework}
                          for k, v in got["same"].items()],
        "reused": {"cells finished": len(cells) - len(todo),
                   "reference outputs in the run folder": len(refs_here),
                   "schedules in the run folder": len(schedules_here),
                   "builds warm in the build cache": len(warm)},
        "by_batch": totals(rows, "batch"), "by_model": totals(rows, "model"),
        "by_framework": totals(rows, "framework"), "by_kind": totals(rows, "kind"),
        "latencies_from": est["from"], "rates": rates(model, runnable), "speed": model.speed_note(),
        "notes": list(sweep.notes), "rows": rows, "probes": sweep.probes, "time_budget": budget,
    }


def _table(title: str, parts: dict, total: float, name=str) -> list[str]:
    out = [f"by {title}:", f"  {title:<48} {'hours':>7} {'share':>6}"]
    for key, seconds in parts.items():
        out.append(f"  {name(key):<48} {seconds / 3600:>7.2f} {seconds / total if total else 0:>6.0%}")
    return out


def lines(got: dict) -> list[str]:
    """The dry run as text: the plan, the estimate by batch, model, framework and kind of cost, each
    row's hours and share, and which figures are measured and which assumed."""
    p = got["protocol"]
    if p["sample_s"] is None:
        protocol = (f"fixed: {p['warmup']} warmup calls, {p['repeat']} samples"
                    + (f", calls per sample raised to last {p['min_sample_ms']:g} ms" if p["min_sample_ms"] else ""))
    else:
        protocol = (f"time-bounded: warmup up to {p['warmup']} calls or {p['warmup_s']} s, samples for "
                    f"{p['sample_s']} s ({p['min_repeat']} to {p['repeat']}) of at least "
                    f"{p['min_sample_ms'] or 0:g} ms")
    capping = "off" if p["cap_factor"] is None else f"a peer over {p['cap_factor']:g}x its group's best gets 1 round"
    total = got["seconds"]
    more = " (at least: --rounds auto may add rounds)" if got["rounds_auto"] else ""
    out = [f"dry run: {got['note']}",
           f"plan: {got['cells']} cells ({got['to_measure']} to measure, {got['finished']} finished, "
           f"{got['skipped']} skipped), {got['rounds_per_cell']} rounds each, {got['rounds']} rounds in all; "
           f"{got['searches']} schedule searches, {got['references']} reference outputs",
           f"protocol: {protocol}; capping: {capping}",
           "reused: " + ", ".join(f"{n} {what}" for what, n in got["reused"].items())]
    if got.get("same_schedule"):
        models = sorted({c["model"] for c in got["same_schedule"]})
        out.append(f"measured once: {len(got['same_schedule'])} IOS cells whose schedule is certainly their "
                   f"group's IOS-Sequential (every block a chain: {', '.join(models)}); more may be found after the "
                   "searches")
    if got["capped"]:
        out.append(f"predicted capped (a prediction from the estimate's latencies; the sweep caps by what its first "
                   f"round measures): {len(got['capped'])} cells, 1 round each")
        for c in got["capped"][:12]:
            out.append(f"  {c['framework']} {c['model']} b{c['batch']}: {c['ratio']:.1f}x {c['best']}")
        if len(got["capped"]) > 12:
            out.append(f"  ... {len(got['capped']) - 12} more")
    out.append(f"estimated duration: about {got['human']}{more} ({total / 3600:.2f} h; an estimate: docs/harness.md)")
    b = got.get("time_budget")
    if b:
        out.append(f"with --time-budget {b['budget_s']:g} s: about {estimate.human(b['seconds'])} "
                   f"({b['seconds'] / 3600:.2f} h): the searches, reference outputs and every cell's first round "
                   f"{b['first'] / 3600:.2f} h (made whatever the budget), later rounds {b['later'] / 3600:.2f} h of "
                   f"{b['later_planned'] / 3600:.2f} h planned; {b['cut_rounds']} rounds left out, "
                   f"{b['one_round_groups']} of {b['groups']} groups one round a cell (no interval: unstable); "
                   "the breakdown below is of the whole plan")
    out += _table("batch", got["by_batch"], total, lambda b: f"batch {b}")
    out += _table("model", got["by_model"], total)
    out += _table("framework", got["by_framework"], total)
    out += _table("kind of cost", got["by_kind"], total, lambda k: KINDS.get(k, k))
    out.append("figures: latencies from " + ", ".join(f"{src} ({n} cells)" for src, n in got["latencies_from"].items()))
    for r in got["rates"]:
        out.append(f"  {r['framework']:<30} {r['gmacs_per_s']:>7.1f} GMAC/s  {r['source']}")
    out.append("  worker starts: measured now by the probe where it timed them, else earlier runs' or stated; "
               "builds, searches and reference outputs: earlier runs' where they measured them, else stated "
               "(ios_bench/planning/estimate_stated.py says where each comes from)")
    if got["speed"]:
        out.append(f"  {got['speed']}")
    return out


def show(got: dict, fmt: str, echo) -> None:
    """Print the dry run: ``fmt`` text (:func:`lines`) or json (the figures, one object)."""
    if fmt == "json":
        echo(json.dumps({k: v for k, v in got.items() if k != "probes"}, default=str, indent=1))
    else:
        for line in lines(got):
            echo(line)
