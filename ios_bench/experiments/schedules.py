"""Comparison of schedules: Sequential, Greedy, IOS-Merge, IOS-Parallel and IOS-Both, all on
the IOS runtime (the paper's schedule table; reference README section 4.2.1)."""

from __future__ import annotations

from pathlib import Path

from ios_bench.experiments import _common as c
from ios_bench.experiments import published as pub
from ios_bench.experiments.base import Context, Report, Run

STRATEGIES = ("sequential", "greedy", "merge", "parallel", "both")
LABELS = {"sequential": "Sequential", "greedy": "Greedy", "merge": "IOS-Merge", "parallel": "IOS-Parallel",
          "both": "IOS-Both"}
FULL_MODELS = ["inception_v3", "randwire", "nasnet", "squeezenet"]
REFERENCE_MODELS = ["inception_v3", "squeezenet"]
QUICK_MODELS = ["sample"]


class Schedules:
    name = "schedules"
    title = "Comparison of schedules on the IOS runtime"
    summary = "Sequential, Greedy, IOS-Merge, IOS-Parallel and IOS-Both schedules, all executed by the IOS runtime"
    paper = "schedule comparison table, batch 1 (reference README 4.2.1; paper: comparison of different schedules)"

    def runs(self, ctx: Context) -> list[Run]:
        models = c.models(ctx, FULL_MODELS, REFERENCE_MODELS, QUICK_MODELS)
        plan = c.plan(ctx, models=models, batch_sizes=[1], frameworks=[], schedules=list(STRATEGIES))
        return [Run("schedules", plan, "every schedule of every model at batch 1, on the IOS runtime")]

    def reduced(self, ctx: Context) -> list[str]:
        notes = c.form_notes(ctx)
        if ctx.form == "reference" and not ctx.models:
            notes.append("models: inception_v3 and squeezenet of the paper's four (randwire and nasnet take "
                         "several minutes each to search and to time on 2 cores: over this machine's budget)")
        return notes

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        recs = c.records(folders["schedules"])
        device = ctx.devices[0]
        models = list(dict.fromkeys(r["model"] for r in recs))
        rows, norm = [], {}
        for m in models:
            seq = c.ms(c.find(recs, model=m, framework="ios-sequential", device=device))
            for s in STRATEGIES:
                r = c.find(recs, model=m, framework=f"ios-{s}", device=device)
                v = c.ms(r)
                speed = f"{seq / v:.2f}x" if v and seq else "-"
                norm.setdefault(m, {})[s] = v
                search = c.search_seconds(r)
                rows.append([m, LABELS[s], c.cell(r), speed, c.fmt(search, 1) if search is not None else "-",
                             str(r.get("stages", "-")) if r else "-",
                             c.published(pub.SCHEDULES_MS.get(m, {}).get(LABELS[s]), " ms")])
        main = c.table("Latency (ms) of each schedule, batch 1, IOS runtime",
                       ["model", "schedule", "latency (ms, ours)", "speedup over Sequential", "search (s)", "stages",
                        c.PUBLISHED_LABEL], rows,
                       "search (s): the optimizer's wall time for this schedule, including timing stages with the "
                       "measured cost model (near 0 when its block schedules came from the profile database)")
        # the paper's layout: models x schedules, GeoMean row
        grid_rows = []
        for m in models:
            grid_rows.append([m] + [c.fmt(norm[m].get(s)) for s in STRATEGIES])
        geo = [c.geomean([norm[m].get(s) for m in models]) if all(norm[m].get(s) for m in models) else None
               for s in STRATEGIES]
        grid_rows.append(["GeoMean"] + [c.fmt(g) for g in geo])
        pub_rows = [[m] + [c.published(pub.SCHEDULES_MS[m][LABELS[s]]) for s in STRATEGIES]
                    for m in models if m in pub.SCHEDULES_MS]
        grid = c.table("Our latency (ms, medians; spreads and checks above) in the paper's layout",
                       ["model"] + [LABELS[s] for s in STRATEGIES], grid_rows)
        if pub_rows:
            grid += "\n" + c.table(f"{c.PUBLISHED_LABEL}: {pub.SCHEDULES_SOURCE}",
                                   ["model"] + [LABELS[s] for s in STRATEGIES], pub_rows)
        figure = self._figure(ctx, models, recs, device)
        return Report(self.title, [("Latency of each schedule", main), ("The paper's table", grid)],
                      [figure] if figure else [], self.reduced(ctx))

    def _figure(self, ctx, models, recs, device):
        series = {}
        for s in STRATEGIES:
            pts = []
            for i, m in enumerate(models):
                r = c.find(recs, model=m, framework=f"ios-{s}", device=device)
                best = min((c.ms(c.find(recs, model=m, framework=f"ios-{t}", device=device)) or float("inf")
                            for t in STRATEGIES), default=None)
                if c.passed(r) and best and best != float("inf"):
                    # normalized throughput (best = 1), the paper's figure
                    x, v, lo, hi = c.latency_point(i, r)
                    pts.append((i, best / v, best / hi, best / lo))
            series[LABELS[s]] = pts
        return bars(Path(ctx.out) / "schedules.png", models, series,
                    "Normalized throughput of each schedule (best = 1; bars: p10-p90), batch 1")


def bars(path: Path, groups: list[str], series: dict[str, list[tuple]], title: str) -> Path | None:
    """Grouped bars (PNG): ``series`` {label: [(group index, y, y_low, y_high)]}."""
    from ios_bench.reporting.escape import plot_text
    from ios_bench.reporting.plotting import pyplot, save_png, series_styles

    if not any(series.values()):
        return None
    plt = pyplot()
    styles = series_styles(list(series))
    width = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) + 3), 4))
    for k, (name, pts) in enumerate(series.items()):
        xs = [p[0] + (k - (len(series) - 1) / 2) * width for p in pts]
        ys = [p[1] for p in pts]
        err = [[max(0.0, p[1] - p[2]) for p in pts], [max(0.0, p[3] - p[1]) for p in pts]]
        st = styles[name]
        ax.bar(xs, ys, width, yerr=err, capsize=2, color=st["color"], hatch=st["hatch"], edgecolor="0.25",
               linewidth=0.5, label=plot_text(name))
    ax.set_xticks(range(len(groups)), [plot_text(g) for g in groups])
    ax.set_ylabel("normalized throughput (best = 1)")
    ax.set_title(plot_text(title), fontsize=10)
    ax.legend(fontsize="small", ncol=min(5, len(series)))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)
    return path


EXPERIMENT = Schedules()
