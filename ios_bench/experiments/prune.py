"""Schedule pruning: IOS-Both's search time and its schedule's latency over the pruning
parameters r (most operators per group) and s (most groups per stage) (reference README
section 4.2.5).

One sweep per (r, s) (``Plan.ios_options`` ``max_group_size``/``max_num_groups``), each with a
fresh profile database of its own (``cost_cache: private``), so that every search is a cold one:
its time includes timing the stages it needs, as the paper's optimization cost does, and no
block schedule comes from an earlier search.
"""

from __future__ import annotations

from pathlib import Path

from ios_bench.experiments import _common as c
from ios_bench.experiments import published as pub
from ios_bench.experiments.base import Context, Report, Run

SETTINGS = [(1, 3), (1, 8), (2, 3), (2, 8), (3, 3), (3, 8)]  # the paper's (r, s)
FULL_MODELS = ["inception_v3", "nasnet"]
REFERENCE_MODELS = ["inception_v3"]
QUICK_MODELS = ["sample"]
QUICK_SETTINGS = [(1, 3), (3, 8)]


def settings(ctx: Context) -> list[tuple[int, int]]:
    return QUICK_SETTINGS if ctx.quick else SETTINGS


class Prune:
    name = "prune"
    title = "Schedule pruning: search time against schedule latency"
    summary = "IOS-Both search time and schedule latency over the pruning parameters r and s"
    paper = "pruning trade-off, r in 1..3 x s in 3, 8 (reference README 4.2.5; paper: schedule pruning)"

    def runs(self, ctx: Context) -> list[Run]:
        models = c.models(ctx, FULL_MODELS, REFERENCE_MODELS, QUICK_MODELS)
        runs = []
        for r, s in settings(ctx):
            plan = c.plan(ctx, models=list(models), batch_sizes=[1], frameworks=[], schedules=["both"],
                          ios_options={"max_group_size": r, "max_num_groups": s, "cost_cache": "private"})
            runs.append(Run(f"r{r}-s{s}", plan, f"IOS-Both pruned to r={r}, s={s}, cold search"))
        return runs

    def reduced(self, ctx: Context) -> list[str]:
        notes = c.form_notes(ctx)
        if ctx.quick:
            notes.append("quick form: (r, s) = (1, 3) and (3, 8) only")
        if ctx.form == "reference" and not ctx.models:
            notes.append("models: inception_v3 only (nasnet's search takes several minutes per setting on 2 cores: "
                         "six cold searches are over this machine's budget)")
        return notes

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        device = ctx.devices[0]
        recs = {rs: c.records(folders[f"r{rs[0]}-s{rs[1]}"]) for rs in settings(ctx)}
        models = list(dict.fromkeys(r["model"] for rows in recs.values() for r in rows))
        sections, figures = [], []
        for m in models:
            rows, pts = [], []
            for rs in settings(ctx):
                r = c.find(recs[rs], model=m, framework="ios-both", device=device)
                fig = (r or {}).get("optimize_figures") or {}
                cm = (r or {}).get("cost_model_stats") or {}
                search = c.search_seconds(r)
                p = pub.PRUNE.get(m, {}).get(rs)
                rows.append([f"r={rs[0]}, s={rs[1]}", c.fmt(search, 1), c.fmt(cm.get("measure_seconds"), 1),
                             str(fig.get("transitions", "-")), str(fig.get("stages_costed", "-")),
                             str(fig.get("num_stages", r.get("stages", "-") if r else "-")), c.cell(r),
                             c.published(p[0], " s") if p else "-", c.published(p[1], " ms") if p else "-"])
                if c.passed(r) and search is not None:
                    _, v, lo, hi = c.latency_point(0, r)
                    pts.append((search, v, lo, hi, rs))
            body = c.table(f"{m}: IOS-Both at batch 1 under each pruning setting",
                           ["(r, s)", "search (s)", "of which timing stages (s)", "DP transitions",
                            "stages costed", "stages", "latency (ms)", f"cost, {c.PUBLISHED_LABEL}",
                            f"latency, {c.PUBLISHED_LABEL}"], rows,
                           "search: wall time of the cold search (a fresh profile database per setting), including "
                           "the time the measured cost model spent timing stages (next column) and the end-of-search "
                           "validation; r: most operators per group, s: most groups per stage")
            sections.append((m, body))
            path = _tradeoff(Path(ctx.out) / f"prune-{c.file_part(m)}.png", m, pts)
            if path:
                figures.append(path)
        return Report(self.title, sections, figures, self.reduced(ctx))


def _tradeoff(path: Path, model: str, pts: list[tuple]) -> Path | None:
    """Latency against search time, one labelled point per (r, s) (the paper's trade-off plot)."""
    from ios_bench.reporting.escape import plot_text
    from ios_bench.reporting.plotting import pyplot, save_png

    if not pts:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for x, v, lo, hi, (r, s) in pts:
        ax.errorbar([x], [v], yerr=[[max(0.0, v - lo)], [max(0.0, hi - v)]], marker="o", capsize=3, color="tab:blue")
        ax.annotate(f"r={r}, s={s}", (x, v), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel("search time (s, cold)")
    ax.set_ylabel("schedule latency (ms; bars: p10-p90)")
    ax.set_title(plot_text(f"{model}: pruning trade-off (IOS-Both, batch 1)"), fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)
    return path


EXPERIMENT = Prune()
