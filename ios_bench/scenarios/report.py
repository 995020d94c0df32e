"""The report's scenario sections (``ios_bench.reporting.report.write_report`` calls :func:`sections`):

- per scenario, **every configuration** tried: its figure over rounds ± the between-round spread,
  LoadGen's verdict (and why it is invalid), samples/s or QPS, LoadGen's p50/p90/p99/max latency,
  queries, duration, the output check;
- the **winning configuration per framework** (model x framework): the best configuration LoadGen
  judged VALID with a correct output (highest samples/s or QPS; lowest latency for single-stream
  and multi-stream), against the worst valid one;
- for Server, **p99 latency against offered QPS** per framework (its winning configuration's
  tries), with the latency bound, one plot per model and device.

Reduced (``--quick``) runs say so in every table's note.
"""

from __future__ import annotations

from pathlib import Path

from ios_bench.planning.cells import label
from ios_bench.reporting.escape import file_part, plot_text
from ios_bench.reporting.numbers import fmt
from ios_bench.scenarios.summary import HIGHER_IS_BETTER

TITLES = {"single-stream": "SingleStream", "multi-stream": "MultiStream", "offline": "Offline", "server": "Server"}


def _figure(r: dict) -> str:
    fig = r.get("scenario_figure")
    if fig is None:
        return ((r.get("server") or {}).get("verdict") or "no valid QPS") if r.get("scenario") == "server" else "-"
    cv = r.get("scenario_cv")
    text = f"{fmt(fig)} {r.get('scenario_unit', '')}" + (f" ±{cv:.1%}" if isinstance(cv, (int, float)) else "")
    return text + (" (unstable)" if r.get("unstable") else "")


def _verdict(r: dict) -> str:
    if r.get("status") not in ("ok", "wrong"):
        return r.get("status", "?")
    lgr = r.get("loadgen") or {}
    if r.get("scenario_valid"):
        return "VALID"
    return "INVALID" + (f": {lgr['invalid_reason'][:90]}" if lgr.get("invalid_reason") else "")


def _config(r: dict) -> str:
    kind = (r.get("concurrency") or {}).get("kind")
    return f"{r.get('instances')}x{r.get('instance_threads')}" + (f" ({kind})" if kind else "")


def winners(records: list[dict]) -> dict[tuple, dict]:
    """{(scenario, device, batch, model, framework): the winning record} over the configurations
    with a correct output that LoadGen judged VALID."""
    best: dict[tuple, dict] = {}
    for r in records:
        if r.get("status") != "ok" or not r.get("scenario_valid") or r.get("scenario_figure") is None:
            continue
        key = (r["scenario"], r["device"], r["batch_size"], r["model"], r["framework"])
        higher = HIGHER_IS_BETTER[r["scenario"]]
        cur = best.get(key)
        if cur is None or (r["scenario_figure"] > cur["scenario_figure"]) == higher:
            best[key] = r
    return best


def sections(records: list[dict], out: Path, styles: dict, table_cls) -> list[tuple[str, list]]:
    """The report's sections for the scenario records of a run (``table_cls``: the report's Table)."""
    scen = [r for r in records if r.get("scenario")]
    if not scen:
        return []
    out_sections = []
    wins = winners(scen)
    for scenario in [s for s in TITLES if any(r["scenario"] == s for r in scen)]:
        rows_of = [r for r in scen if r["scenario"] == scenario]
        reduced = next((r["reduced"] for r in rows_of if r.get("reduced")), None)
        unit = next((r.get("scenario_unit") for r in rows_of if r.get("scenario_unit")), "")
        items: list = []
        for device in dict.fromkeys(r["device"] for r in rows_of):
            for bs in sorted({r["batch_size"] for r in rows_of if r["device"] == device}):
                sub = [r for r in rows_of if r["device"] == device and r["batch_size"] == bs]
                items.append(_every_config(table_cls, scenario, device, bs, sub, unit, reduced))
                items.append(_winning(table_cls, scenario, device, bs, sub, wins))
                if scenario == "server":
                    for model in dict.fromkeys(r["model"] for r in sub):
                        png = out / f"server_p99_{file_part(model)}_{file_part(device)}_b{bs}.png"
                        if plot_server(sub, model, wins, png, styles):
                            items.append(("img", png.name, f"{model}, {device}, batch {bs}: LoadGen's judged "
                                                           "latency percentile against the offered QPS, each "
                                                           "framework's winning configuration, every try (the "
                                                           "bound dashed)"))
        out_sections.append((f"Scenario: {TITLES[scenario]} (MLPerf LoadGen)", items))
    return out_sections


def _every_config(table_cls, scenario, device, bs, sub, unit, reduced):
    headers = ["model", "framework", "config", f"figure ({unit})", "LoadGen", "samples/s", "p50 ms", "p90 ms",
               "p99 ms", "max ms", "queries", "duration s", "output"]
    rows = []
    for r in sorted(sub, key=lambda r: (r["model"], r["framework"], r.get("instances") or 0)):
        lgr = r.get("loadgen") or {}
        out = {"ok": "ok", "wrong": "WRONG"}.get(r["status"], r["status"])
        if r["status"] in ("failed", "skipped"):
            out += f": {str(r.get('reason') or '')[:80]}"
        rows.append([r["model"], label(r["framework"]), _config(r), _figure(r) if r["status"] in ("ok", "wrong")
                     else "-", _verdict(r), fmt(lgr.get("samples_per_s")), fmt(lgr.get("p50_ms")),
                     fmt(lgr.get("p90_ms")), fmt(lgr.get("p99_ms")), fmt(lgr.get("max_ms")),
                     str(lgr.get("query_count") or "-"), fmt(lgr.get("duration_s")), out])
    what = {"single-stream": "the p90 latency of one request at a time",
            "multi-stream": "the target-percentile latency of a query of several samples",
            "offline": "samples per second with every sample in one query",
            "server": "the highest offered QPS LoadGen judged VALID (latency percentile within the bound)"}[scenario]
    note = (f"{TITLES[scenario]}: figure = {what}, the median over undisturbed rounds ± their spread; config = "
            "instances x threads each (how requests are kept in flight); percentiles, queries and duration are "
            "LoadGen's, of the round nearest the median (multi-stream: per query)")
    if reduced:
        note += f"; {reduced}"
    return table_cls(f"{TITLES[scenario]}: every configuration, batch {bs}, {device}", headers, rows, note)


def _winning(table_cls, scenario, device, bs, sub, wins):
    headers = ["model", "framework", "winning config", "figure", "worst valid config", "figure", "winner / worst"]
    rows = []
    higher = HIGHER_IS_BETTER[scenario]
    for model in dict.fromkeys(r["model"] for r in sub):
        for fw in dict.fromkeys(r["framework"] for r in sub if r["model"] == model):
            w = wins.get((scenario, device, bs, model, fw))
            if w is None:
                none = none_valid_text(sub, model, fw)
                rows.append([model, label(fw), "no valid configuration", none, "-", "-", "-"])
                continue
            valid = [r for r in sub if r["model"] == model and r["framework"] == fw and r["status"] == "ok"
                     and r.get("scenario_valid") and r.get("scenario_figure") is not None]
            worst = (min if higher else max)(valid, key=lambda r: r["scenario_figure"])
            ratio = w["scenario_figure"] / worst["scenario_figure"] if worst["scenario_figure"] else None
            if ratio is not None and not higher:
                ratio = 1 / ratio
            rows.append([model, label(fw), _config(w), _figure(w), _config(worst), _figure(worst),
                         f"{ratio:.2f}x" if ratio else "-"])
    return table_cls(f"{TITLES[scenario]}: winning configuration per framework, batch {bs}, {device}", headers, rows,
                     "the best configuration with a correct output that LoadGen judged VALID; winner / worst: how "
                     "much the search over instances and threads gained (>1 is better)")


def none_valid_text(sub: list[dict], model: str, fw: str, empty: str = "-") -> str:
    """A framework with no valid Server configuration: ``none valid above X QPS``, X the highest of
    its measured configurations' (so that it holds for each), or ``empty`` where none says it."""
    from ios_bench.scenarios.server import verdict

    lows = [x for r in sub if r["model"] == model and r["framework"] == fw and r["status"] in ("ok", "wrong")
            and isinstance(x := (r.get("server") or {}).get("none_valid_above_qps"), (int, float))]
    return verdict(max(lows)) if lows else empty


def _judged(rec: dict | None) -> str:
    """The latency a Server run is judged on (its percentile: p99 by default, p90 when reduced)."""
    from ios_bench.scenarios.server import judged_key

    return judged_key(((rec or {}).get("scenario_settings") or {}).get("server_percentile", 0.99))


def plot_server(sub: list[dict], model: str, wins: dict, path: Path, styles: dict) -> bool:
    from ios_bench.reporting.plotting import pyplot, save_png

    series = []
    for fw in dict.fromkeys(r["framework"] for r in sub if r["model"] == model):
        cands = [r for r in sub if r["model"] == model and r["framework"] == fw and r["status"] == "ok"]
        w = next((r for r in cands if wins.get(("server", r["device"], r["batch_size"], model, fw)) is r), None)
        pick = w or (cands[0] if cands else None)
        key = _judged(pick)
        tries = sorted((t["qps"], t[key]) for t in ((pick or {}).get("server") or {}).get("tries", [])
                        if isinstance(t.get("qps"), (int, float)) and isinstance(t.get(key), (int, float)))
        if tries:
            series.append((fw, pick, tries))
    if not series:
        return False
    pct = _judged(series[0][1])[:-3]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bounds = set()
    for fw, rec, tries in series:
        st = styles.get(fw) or {}
        ax.plot([q for q, _ in tries], [p for _, p in tries], marker=st.get("marker", "o"), color=st.get("color"),
                label=plot_text(f"{label(fw)} {rec.get('instances')}x{rec.get('instance_threads')}"))
        b = (rec.get("server") or {}).get("latency_bound_ms")
        if isinstance(b, (int, float)):
            bounds.add(round(b, 6))
            ax.axhline(b, color=st.get("color"), linestyle="--", linewidth=0.8)
    ax.set_xlabel("offered QPS (LoadGen Server target)")
    ax.set_ylabel(f"{pct} latency (ms)")
    ax.set_yscale("log")
    ax.set_title(plot_text(f"Server: {pct} latency vs offered QPS, {model}\n(dashed: each framework's latency bound)"))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    save_png(fig, path)
    return True
