"""Replay: what the estimate (``ios_bench.planning.estimate``) says now of a finished run folder, from its
own records only, against what its sweep took."""

from __future__ import annotations

import json
from pathlib import Path

from ios_bench.planning.estimate_history import _span, earlier_runs, history_macs, history_sizes, learn
from ios_bench.planning.estimate_model import Model, human, int8_references, search_states, sweep_seconds
from ios_bench.planning.estimate_stated import series
from ios_core.measurement.protocol import protocol_fields
from ios_core.measurement.stats import median


def replay(folder: Path, learn_from: list[Path] | None = None, graphs: dict | None = None) -> dict:
    """The estimate a run folder's sweep gets from this module now, from its own records only (no
    process started, nothing measured): its plan (``plan.json``), the cells it measured
    (``results.jsonl``, skipped ones left out, as the sweep leaves them out), the schedule searches
    they needed, the workers' starts and the canary its sweep measured (``env.json``'s
    ``estimate``), earlier runs' figures from ``learn_from`` (none: the stated model only). Returns
    {"estimated_s", "measured_s" (the sweep's ``duration_s``), "parts": {"rounds", "first_builds",
    "searches", "references"}, "measured_parts": {"rounds", "searches"}, "recorded_s" (what its sweep
    printed), "graphs" (what it used of the models)}. ``graphs``: {model: (macs, operators, DP states,
    parameters)}, loaded from the zoo when not given."""
    from types import SimpleNamespace

    from ios_bench.results import read_records

    folder = Path(folder)
    plan = json.loads((folder / "plan.json").read_bytes())
    env = json.loads((folder / "env.json").read_bytes())
    recs = [r for r in read_records(folder / "results.jsonl", on_problem=lambda m: None)
            if r.get("status") != "skipped"]
    if graphs is None:
        from ios_bench.planning.loading import load_graph

        graphs = {}
        for name in dict.fromkeys(r["model"] for r in recs):
            g = load_graph(name)
            graphs[name] = (g.macs(), g.num_operators(), search_states(g), g.params())
    recorded = env.get("estimate") or {}
    given = plan.get("models") or []  # a record's model came from the zoo where its name was given as it is
    hist = learn(list(learn_from or []), env.get("cpu") or {}, plan.get("threads"),
                 {r["model"]: r["model"] in given for r in recs})
    macs = {m: v[0] for m, v in graphs.items()}
    sizes = {**history_sizes(hist, graphs), **{m: (v[1], v[3]) for m, v in graphs.items() if len(v) > 3}}
    model = Model(hist, {**history_macs(hist, macs), **macs},
                  {**{m: v[0] for m, v in sizes.items()}, **{m: v[1] for m, v in graphs.items()}},
                  {m: v[2] for m, v in graphs.items() if len(v) > 2},
                  warmup=plan.get("warmup", 3), repeat=plan.get("repeat", 10) * plan.get("number", 1),
                  min_sample_ms=plan.get("min_sample_ms") or 0.0, protocol=protocol_fields(plan),
                  params={m: v[1] for m, v in sizes.items()})
    model.calibrated = {k: float(v) for k, v in (recorded.get("workers_start_s") or {}).items()}
    model.probe_ms = recorded.get("canary_ms")
    model.isa = (env.get("cpu") or {}).get("isa_flags")
    model.max_reruns = int(plan.get("max_reruns") or 0)
    # the build cache as its sweep found it: a cell whose first round reused a build it did not make (fp32
    # cells only, as before: a reduced-precision record's state is not taken to say its calibration was reused)
    warm = {(series(r["framework"], r.get("precision")), r["model"], int(r["batch_size"])) for r in recs
            if (r.get("precision") or "fp32") == "fp32" for x in (r.get("rounds") or [])[:1]
            if ((x.get("info") or {}).get("build_cache") or {}).get("state") == "warm"}
    model.warm_cache = lambda framework, m, b: (framework, m, b) in warm
    rounds = int(plan["rounds"]) if str(plan.get("rounds")).isdigit() else 1
    cells = [SimpleNamespace(key=r["cell"], model=r["model"], model_spec=r["model"], batch_size=int(r["batch_size"]),
                             framework=r["framework"], precision=r.get("precision") or "fp32",
                             provider=r.get("provider"), device=r.get("device") or "cpu") for r in recs]
    # one search worker per search key (as the sweep counts them), each searching the schedule files its
    # cells were measured with, less those the folder held already (schedule_reused)
    from ios_bench.running.schedules import search_key

    files: dict[tuple, set] = {}
    for c, r in zip(cells, recs):
        if r.get("schedule") and not r.get("schedule_reused"):
            files.setdefault(search_key(c, plan.get("ios_options")), set()).add(r.get("schedule_file") or r["schedule"])
    searches = {key: len(v) for key, v in files.items()}  # its model spec is the record's model name
    refs = {(r["model"], int(r["batch_size"])) for r in recs}
    est = sweep_seconds(model, cells, {c.key: rounds for c in cells}, refs, searches)
    first = sum(model.first_build_s(series(c.framework, c.precision), c.model, c.batch_size) for c in cells)
    search_s = sum(model.optimize_s(m, b, p, n, precision=q) for (m, b, p, q, _), n in searches.items())
    int8 = int8_references(cells)
    ref_s = sum(model.reference_s(m, b, (m, b) in int8) for m, b in refs)
    # a round measured once for several cells (their schedules identical: ios_bench.running.schedules.
    # same_schedules) is in each of their records: counted once (by its worker's process and start)
    walls, seen = [], set()
    for r in recs:
        for x in r.get("rounds") or []:
            once = (x.get("pid"), x.get("started")) if x.get("pid") else None
            if once is None or once not in seen:
                seen.add(once)
                walls.append(x.get("wall_seconds") or _span(x.get("started"), x.get("finished")) or 0.0)
    measured_search = sum(float(r["optimize_seconds"]) for r in recs
                          if isinstance(r.get("optimize_seconds"), (int, float)) and not r.get("schedule_reused"))
    # per cell: a round and its first build, estimated against measured (the median of its later rounds;
    # its first round less that)
    per_cell = []
    for c, r in zip(cells, recs):
        got = {x.get("round"): x.get("wall_seconds") or _span(x.get("started"), x.get("finished"))
               for x in r.get("rounds") or []}
        later = [w for k, w in got.items() if k != 0 and isinstance(w, (int, float))]
        first_wall = got.get(0) if isinstance(got.get(0), (int, float)) else None
        per_cell.append({"series": series(c.framework, c.precision), "model": c.model, "batch": c.batch_size,
                         "round_s": model.cell_s(c), "measured_round_s": median(later) if later else None,
                         "first_build_s": model.first_build_s(series(c.framework, c.precision), c.model, c.batch_size),
                         "measured_first_build_s": first_wall - median(later) if later and first_wall is not None
                         else None})
    return {"estimated_s": est["seconds"], "measured_s": env.get("duration_s"), "recorded_s": recorded.get("seconds"),
            "graphs": graphs, "cells": per_cell,
            "parts": {"rounds": est["seconds"] - first - search_s - ref_s, "first_builds": first, "searches": search_s,
                      "references": ref_s},
            "measured_parts": {"rounds": sum(walls), "searches": measured_search}}


def replay_lines(folder: Path, graphs: dict | None = None, per_cell: bool = False) -> list[str]:
    """What :func:`replay` says of a run folder, as lines to print: its measured duration, what its
    sweep estimated then, and what the estimate says now from the stated model only, learning from
    the runs beside it that started before it, and as a rerun of it (learning from it too); ``graphs``
    as :func:`replay`'s. ``per_cell``: after each, a line per cell: a round and its first build,
    estimated against measured."""
    folder = Path(folder)
    env = json.loads((folder / "env.json").read_bytes())
    if not isinstance(env.get("duration_s"), (int, float)):
        return [f"{folder.name}: no measured duration (env.json has no duration_s: the sweep did not finish)"]
    started = env.get("captured") or ""
    before = []
    for p in earlier_runs(folder):
        if p.resolve() == folder.resolve():
            continue
        try:
            if (json.loads((p / "env.json").read_bytes()).get("captured") or "") < started:
                before.append(p)
        except (OSError, ValueError):
            continue

    def pct(est: float) -> str:
        return f"{human(est)} ({est / env['duration_s'] - 1:+.0%})"

    def sec(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} s"

    out = [f"{folder.name}: took {human(env['duration_s'])}; its sweep estimated "
           f"{human(env['estimate']['seconds']) if (env.get('estimate') or {}).get('seconds') else '-'}"]
    for what, learn_from in (("the stated model only", []),
                             (f"earlier runs beside it ({', '.join(p.name for p in before) or 'none'})", before),
                             ("a rerun of it (its own records too)", [*before, folder])):
        got = replay(folder, learn_from, graphs)
        graphs = graphs or got["graphs"]
        parts, measured = got["parts"], got["measured_parts"]
        out.append(f"  estimate now from {what}: {pct(got['estimated_s'])}; searches {human(parts['searches'])} "
                   f"(measured {human(measured['searches'])}), rounds {human(parts['rounds'] + parts['first_builds'])} "
                   f"with {human(parts['first_builds'])} of first builds (measured {human(measured['rounds'])})")
        for c in got["cells"] if per_cell else []:
            out.append(f"    {c['series']} {c['model']} b{c['batch']}: a round {sec(c['round_s'])} (measured "
                       f"{sec(c['measured_round_s'])}), its first build {sec(c['first_build_s'])} (measured "
                       f"{sec(c['measured_first_build_s'])})")
    return out

