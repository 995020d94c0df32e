"""Reports for a run folder: ``report.md``, ``report.html``, ``results.csv`` and PNG plots.

Contents, in this order (this module writes them; the tables come from
:mod:`ios_bench.reporting.report_tables`): **At a glance**, IOS at its best against the best peer per
device, batch and model (figures with intervals, the ratio with its paired interval and verdict),
then one line of counts linking to the unstable cells and the failures; per device and batch size
the latency and throughput tables (models x frameworks, turned when frameworks outnumber models),
IOS against the peers, memory, build time, the IOS schedules against sequential (paired verdicts
only) and the normalized-throughput bar chart; latency/throughput vs batch size; the unstable
cells; the run notes (warnings); configuration, rounds, every cell with its output check,
failures with their reasons, the environment. No table is wider than
:data:`~ios_bench.reporting.report_tables.MAX_COLUMNS` columns.

Figures: each cell's figure is the median of its undisturbed rounds' medians (``ios_bench.running.rounds``);
tables show it with ± the between-round spread in ms (the coefficient of variation of the round
medians times the figure; ``ios_bench.records.record.CellResult.figure_text``) and flag cells whose
interval is too wide as ``unstable``; the tables are built in :mod:`ios_bench.reporting.report_tables`;
plots show the figure with the p10-p90 range of the pooled samples (error bars / bands). A
schema-1 run (one process per cell) shows ± the standard deviation of its samples instead.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from ios_bench.records.runfolder import check_writable
from ios_bench.reporting.escape import csv_cell, file_part, plot_text
from ios_bench.reporting.escape import md as md_text
from ios_bench.reporting.plotting import pyplot, save_png, series_styles
from ios_bench.reporting.report_tables import (  # noqa: F401 - the tables, re-exported for callers of ios_bench.reporting.report
    IOS_BOTH,
    SLOWER_FLAG,
    TIMED,
    Table,
    _correct,
    _label,
    _num,
    _ok,
    _plan_threads,
    _policy_text,
    _row_label,
    across_table,
    build_table,
    by_place,
    cell_counts,
    cells_table,
    config_table,
    env_table,
    failures_table,
    framework_order,
    headline_table,
    ios_table,
    load_note,
    memory_table,
    metric_table,
    outside_writes_table,
    protocol_note,
    rounds_table,
    slower_than_sequential,
    speedup_table,
    unstable_table,
)
from ios_bench.results import load_run
from ios_core.atomic import atomic_write_text

# ---- plots --------------------------------------------------------------------------------------

def plot_normalized(df, device: str, bs: int, path: Path, styles: dict | None = None) -> bool:
    sub = _correct(df[(df["device"] == device) & (df["batch_size"] == bs)])
    if sub.empty:
        return False
    plt = pyplot()
    fws = framework_order(sub)
    styles = styles or series_styles(fws)
    models = list(dict.fromkeys(sub["model"]))
    width = 0.8 / max(len(fws), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(models) * max(1, len(fws)) * 0.35 + 3), 4))
    for i, fw in enumerate(fws):
        xs, ys, lo, hi = [], [], [], []
        for j, m in enumerate(models):
            best = sub[sub["model"] == m]["throughput"].max()
            cell = sub[(sub["model"] == m) & (sub["framework"] == fw)]
            if cell.empty or not best:
                continue
            r = cell.iloc[0]
            xs.append(j + (i - (len(fws) - 1) / 2) * width)
            ys.append(r["throughput"] / best)
            lo.append(max(0.0, (r["throughput"] - _num(r["throughput_p10"], r["throughput"])) / best))
            hi.append(max(0.0, (_num(r["throughput_p90"], r["throughput"]) - r["throughput"]) / best))
        st = styles[fw]
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=st["color"], hatch=st["hatch"], edgecolor="0.25",
               linewidth=0.5)
        # the series' marker on top of each bar, so the legend tells series apart without colour
        ax.plot(xs, ys, linestyle="none", marker=st["marker"], color=st["color"], markeredgecolor="black",
                markersize=6, label=plot_text(_label(fw)))
    ax.set_xticks(range(len(models)), [plot_text(m) for m in models])
    ax.set_ylabel("normalized throughput (best = 1)")
    ax.set_title(f"Normalized throughput, batch {bs}, {plot_text(device)}\n(error bars: p10-p90; correct outputs only)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside the data
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)
    return True


def plot_vs_batch(df, model: str, device: str, path: Path, styles: dict | None = None) -> bool:
    sub = _correct(df[(df["device"] == device) & (df["model"] == model)])
    if sub.empty or sub["batch_size"].nunique() < 2:  # a curve needs two batch sizes
        return False
    plt = pyplot()
    styles = styles or series_styles(framework_order(sub))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for fw in framework_order(sub):
        d = sub[sub["framework"] == fw].sort_values("batch_size")
        bs = d["batch_size"].tolist()
        color, marker = styles[fw]["color"], styles[fw]["marker"]
        a1.plot(bs, d["median_ms"], marker=marker, color=color, label=plot_text(_label(fw)))
        a1.fill_between(bs, d["p10_ms"].fillna(d["median_ms"]), d["p90_ms"].fillna(d["median_ms"]), color=color,
                        alpha=0.2)
        a2.plot(bs, d["throughput"], marker=marker, color=color, label=plot_text(_label(fw)))
        a2.fill_between(bs, d["throughput_p10"].fillna(d["throughput"]), d["throughput_p90"].fillna(d["throughput"]),
                        color=color, alpha=0.2)
    for ax, ylabel in ((a1, "latency (ms)"), (a2, "throughput (images/s)")):
        ax.set_xlabel("batch size")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        batches = sorted(set(sub["batch_size"]))
        ax.set_xticks(batches)
    a1.set_title(f"{plot_text(model)}, {plot_text(device)}: latency vs batch (band: p10-p90)")
    a2.set_title("throughput vs batch (band: p10-p90)")
    a2.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    save_png(fig, path)
    return True


# ---- the report ---------------------------------------------------------------------------------


def anchor(heading: str) -> str:
    """A section's anchor, as Markdown renderers derive it from the heading (lower case, spaces as
    hyphens, other punctuation dropped); the HTML report gives its headings the same ids."""
    return "-".join("".join(ch for ch in heading.lower() if ch.isalnum() or ch in " -_").split())


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;
margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child
{text-align:left}th{background:#f0f0f0}.note{color:#555;font-size:90%}.warn{color:#a40}img{max-width:100%}
pre{background:#f7f7f7;padding:6px;overflow-x:auto;font-size:85%}"""


def write_report(run_folder: str | os.PathLike, out: str | os.PathLike) -> dict:
    """Write report.md, report.html, results.csv and PNG plots into ``out``; returns their paths."""
    run_folder, out = Path(run_folder), Path(out)
    run = load_run(run_folder)
    df, env, problems = run.frame(), run.env, run.problems
    check_writable(out)
    from ios_bench.reporting import precision_tables
    from ios_bench.scenarios import report as scenario_report
    name = run_folder.name
    sections: list[tuple[str, list]] = []  # (heading, [Table | ("img", path, caption) | ("text", str) | ...])
    # what a reader came for first: IOS at its best against the best peer, then one line of counts
    # (the unstable cells and failures linked below); notes and warnings follow the results
    timed = df if "scenario" not in df.columns else df[df["scenario"].isna()]
    timed = precision_tables.fp32_rows(timed)  # every table outside the Precision section is fp32's
    others = precision_tables.reduced(df)
    at = ", fp32" if others else ""  # the precision of the tables, said where the run has others
    glance: list = []
    head = headline_table(by_place(timed).reset_index(drop=True)) if not timed.empty else None
    glance.append(head if head is not None else ("text", "No latency cell was timed."))
    counts = cell_counts(df)
    glance.append(("links", [(f"{len(df)} cells: {counts['ok']} ok, {counts['wrong']} with a wrong output (shown, "
                              "never in a GeoMean, speedup or plot), ", None),
                             (f"{counts['unstable']} unstable", "unstable-cells" if counts["unstable"] else None),
                             (f", {counts['skipped']} skipped, ", None),
                             (f"{counts['failed']} failed", "failures" if counts["failed"] else None),
                             ((f", {counts['capped']} capped after one round (too slow against the best peer "
                               "to change the answer; shown, in no GeoMean or verdict)") if counts["capped"] else "",
                              None),
                             (f". Run folder: {run_folder}." + (f" {len(problems)} problem(s) reading it: see "
                                                                "Run notes." if problems else ""), None)]))
    loaded = load_note(df)
    if loaded:
        glance.append(("text", loaded))
    sections.append(("At a glance", glance))
    notes: list = []
    if env.get("clocks"):
        notes.append(("text", f"Clocks: {env['clocks']}."))
    notes.append(("text", f"Threads per cell: {_plan_threads(env)}; spin/wait policy "
                          f"for every cell: {_policy_text(env)}."))
    timing = protocol_note(df)
    if timing:
        notes.append(("text", timing))
    for note in env.get("notes") if isinstance(env.get("notes"), list) else []:
        notes.append(("text", f"Note: {note}."))
    for w in env.get("warnings") if isinstance(env.get("warnings"), list) else []:
        notes.append(("warn", f"when the run started: {w}"))
    for p in problems:
        notes.append(("warn", p))
    old = int(df["migrated_from"].notna().sum()) if "migrated_from" in df.columns else 0
    if old:
        notes.append(("warn", f"{old} cell(s) come from an older run (schema 1): each was measured in one process, "
                              "one round, so its spread says nothing of between-process noise; measure again with "
                              "rounds for figures that repeat"))
    styles = series_styles(framework_order(df))  # one style per series across every plot
    full = df
    if "scenario" in df.columns:  # LoadGen scenario cells have their own sections; the tables below are latency's
        df = df[df["scenario"].isna()].reset_index(drop=True)
    latency = df
    df = precision_tables.fp32_rows(df)  # nothing reduced-precision in an fp32 table, GeoMean or plot
    places = by_place(df)  # device kind, and node when the run used more than one
    across = [t for bs in sorted(set(places["batch_size"])) if (t := across_table(places, bs))]
    if across:
        sections.append(("Across devices and nodes", across))
    for device in dict.fromkeys(places["device"]):
        batches = sorted(set(places[places["device"] == device]["batch_size"]))
        for bs in batches:
            items: list = [metric_table(places, device, bs, "latency"), metric_table(places, device, bs, "throughput")]
            sp = speedup_table(places, device, bs)
            items.append(sp if sp else ("text", "No IOS result with a correct output: no IOS-versus-peers table."))
            mem = memory_table(places, device, bs)
            if mem is not None:
                items.append(mem)
            builds = build_table(places, device, bs)
            if builds is not None:
                items.append(builds)
            it = ios_table(places, device, bs)
            if it is not None:
                items.append(it)
            png = out / f"normalized_throughput_{file_part(device)}_b{bs}.png"
            if plot_normalized(places, device, bs, png, styles):
                items.append(("img", png.name, f"Normalized throughput per model, batch {bs} (p10-p90 error bars)"))
            sections.append((f"{device}, batch size {bs}{at}", items))
        items = []
        for model in dict.fromkeys(places[places["device"] == device]["model"]):
            png = out / f"vs_batch_{file_part(model)}_{file_part(device)}.png"
            if plot_vs_batch(places, model, device, png, styles):
                items.append(("img", png.name, f"{model}: latency and throughput vs batch size (p10-p90 bands)"))
        if items:
            sections.append((f"{device}: latency and throughput vs batch size{at}", items))
    sections += precision_tables.sections(by_place(latency))
    if "scenario" in full.columns:  # LoadGen scenario cells: their own sections
        # a reduced-precision scenario cell is its own series there (never a configuration of the fp32 one)
        scen = [{**r, "framework": f"{r['framework']} {r['precision']}"} if r.get("precision") not in (None, "fp32")
                else r for r in run.records if r.get("scenario")]
        sections += scenario_report.sections(scen, out, styles, Table)
    from ios_bench.reporting.profile_table import report_sections as profile_sections

    sections += profile_sections(run_folder, out, Table)  # `run --profile`: where the time goes
    df = full  # every cell from here on
    unstable = unstable_table(df)
    if unstable is not None:
        sections.append(("Unstable cells", [unstable]))
    sections.append(("Run notes", notes))
    config = config_table(df)
    if config:
        sections.append(("Configuration", [config]))
    rt = rounds_table(df)
    if rt is not None:
        sections.append(("Rounds", [rt]))
    sections.append(("Every cell", [cells_table(df)]))
    fails = failures_table(df)
    if fails:
        tails = [("pre", f"{r['model']} b{r['batch_size']} {_row_label(r)}: {r['reason']}\n"
                         f"{r['stderr_tail']}") for _, r in df.iterrows()
                 if r["status"] == "failed" and isinstance(r.get("stderr_tail"), str) and r["stderr_tail"]]
        sections.append(("Failures", [fails] + tails))
    sections.append(("Environment", [env_table(env), outside_writes_table()]))

    lines = [f"# ios-bench report: {md_text(name)}", ""]
    body = [f"<h1>ios-bench report: {html.escape(name)}</h1>"]
    for heading, items in sections:
        lines += [f"## {md_text(heading)}", ""]
        body.append(f"<h2 id='{anchor(heading)}'>{html.escape(heading)}</h2>")
        for it in items:
            if isinstance(it, Table):
                for part in it.parts():  # at most MAX_COLUMNS columns each
                    lines.append(part.md())
                    body.append(part.html())
            elif it[0] == "links":  # text with links to the report's sections: [(text, anchor or None)]
                lines += ["".join(f"[{md_text(t)}](#{a})" if a else md_text(t) for t, a in it[1]), ""]
                body.append("<p>" + "".join(f"<a href='#{a}'>{html.escape(t)}</a>" if a else html.escape(t)
                                            for t, a in it[1]) + "</p>")
            elif it[0] == "img":
                lines += [f"![{md_text(it[2])}]({it[1]})", ""]
                body.append(f"<figure><img src='{html.escape(it[1])}' alt='{html.escape(it[2])}'>"
                            f"<figcaption>{html.escape(it[2])}</figcaption></figure>")
            elif it[0] == "warn":
                lines += [f"> warning: {md_text(it[1])}", ""]
                body.append(f"<p class='warn'>warning: {html.escape(it[1])}</p>")
            elif it[0] == "pre":
                body.append(f"<details><summary>{html.escape(it[1].splitlines()[0])}</summary>"
                            f"<pre>{html.escape(it[1])}</pre></details>")
            else:
                lines += [md_text(it[1]), ""]
                body.append(f"<p>{html.escape(it[1])}</p>")
    md_path, html_path, csv_path = out / "report.md", out / "report.html", out / "results.csv"
    atomic_write_text(md_path, "\n".join(lines) + "\n")
    atomic_write_text(html_path, "<!doctype html><html><head><meta charset='utf-8'><title>ios-bench "
                      f"{html.escape(name)}</title><style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")
    csv = df.drop(columns=[c for c in ("stderr_tail", "rounds", "round_medians_ms", "rounds_pids", "optimize_stats",
                                       "optimize_figures", "validation", "cost_model_stats", "interference")
                           if c in df.columns]).copy()
    if "samples_ms" in csv.columns:
        csv["samples_ms"] = csv["samples_ms"].map(lambda s: " ".join(f"{x:.6g}" for x in s)
                                                  if isinstance(s, list) else "")
    csv = csv.map(csv_cell) if hasattr(csv, "map") else csv.applymap(csv_cell)
    csv.columns = [csv_cell(c) for c in csv.columns]
    atomic_write_text(csv_path, csv.to_csv(index=False))
    return {"md": md_path, "html": html_path, "csv": csv_path, "problems": problems}
