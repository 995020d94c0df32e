"""What the experiment recipes share: the protocol of each form, plans, reading the run
folders back, and showing a measured figure with its spread and output check.

Every measured figure a report shows is ``median ±std`` of the cell's timing samples followed by
its output check (``✓`` matched the oracle before and after timing, ``✗`` wrong output), or the
reason it has none (``failed``, ``skipped``). Published figures are shown in their own column,
labelled :data:`PUBLISHED_LABEL`.
"""

from __future__ import annotations

from pathlib import Path

from ios_bench.experiments.base import Context
from ios_bench.planning.plan import Plan
from ios_bench.records.record import CellResult
from ios_bench.reporting.escape import file_part  # noqa: F401 - for the recipes' figure names
from ios_bench.reporting.numbers import decimals, fmt  # noqa: F401 - fmt: for the recipes
from ios_bench.reporting.report import Table
from ios_bench.results import load_run
from ios_core.measurement.stats import geomean  # noqa: F401 - for the recipes

PUBLISHED_LABEL = "published (V100, not measured here)"
LEGEND = ("Measured figures: median ±standard deviation of the timing samples, then the output check "
          "(✓: the output matched the oracle before and after timing; ✗: wrong output, left out of every "
          "comparison). `failed`/`skipped` cells say why in the run's report and results.jsonl.")
OK_MARK, WRONG_MARK = "✓", "✗"

# the measurement protocol of each form (Plan fields); full = ios-bench run's defaults. Every form's rounds
# are time-bounded (Plan.warmup_s, sample_s, min_repeat at their defaults): warmup and repeat are the most calls
PROTOCOLS = {
    "full": {"warmup": 3, "number": 1, "repeat": 10, "min_sample_ms": 10.0, "rounds": 3},
    # reference: fewer samples so that every experiment fits this machine's budget (see docs/experiments.md)
    "reference": {"warmup": 2, "number": 1, "repeat": 7, "min_sample_ms": 10.0, "rounds": 3},
    "quick": {"warmup": 1, "number": 1, "repeat": 3, "min_sample_ms": None, "rounds": 1},
}
PROTOCOL_NOTES = {
    "reference": "protocol: 3 rounds per cell (each a fresh process), each at most 2 warmup calls and 3 to 7 timing "
                 "samples of at least 10 ms, as many as about 1 s holds (the full form: at most 3 and 10), to fit "
                 "every experiment into this 2-core machine's budget",
    "quick": "quick form: one round, one warmup call, 3 timing samples, small inputs; a smoke test of the recipe, not "
             "a result",
}
QUICK_COST_NOTE = ("quick form: IOS schedules are searched with the synthetic (analytical) cost model, so no stage "
                   "is timed during the search; every latency shown is still measured")


def plan(ctx: Context, **fields) -> Plan:
    """A sweep plan for this experiment context: the form's protocol, the user's devices and
    thread budget, and the recipe's ``fields`` (models, batch_sizes, frameworks, schedules, ...)."""
    base = dict(PROTOCOLS[ctx.form])
    base["devices"] = list(ctx.devices)
    base["ios_providers"] = ["torch"]  # the paper's experiments run IOS on its own runtime's torch kernels
    if ctx.threads is not None:
        base["threads"] = ctx.threads
    if ctx.quick:
        base["cost_model"] = "synthetic"
        base["timeout"] = 300.0
        base["optimize_timeout"] = 300.0
    base.update(fields)
    return Plan(**base)


def form_notes(ctx: Context) -> list[str]:
    """The reduced-form notes every experiment of this form shares."""
    notes = []
    if ctx.form in PROTOCOL_NOTES:
        notes.append(PROTOCOL_NOTES[ctx.form])
    if ctx.quick:
        notes.append(QUICK_COST_NOTE)
    return notes


def models(ctx: Context, full: list[str], reference: list[str], quick: list[str]) -> list[str]:
    """The user's ``--models``, else the form's default."""
    if ctx.models:
        return list(ctx.models)
    return list({"full": full, "reference": reference, "quick": quick}[ctx.form])


def records(folder: Path) -> list[dict]:
    """Each cell's latest record in a run folder (in the order they finished)."""
    return load_run(folder).records


def find(recs: list[dict], **match) -> dict | None:
    """The record whose fields equal ``match`` (``None`` if none)."""
    for r in recs:
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def passed(rec: dict | None) -> bool:
    return bool(rec) and CellResult(rec).passed


def ms(rec: dict | None) -> float | None:
    """A correct cell's median latency (ms); None for anything else."""
    return CellResult(rec).median_ms if rec else None


def cell(rec: dict | None, metric: str = "ms") -> str:
    """A measured figure as the report shows it: ``12.35 ±0.21 ✓``; ``metric`` ``ms`` (latency)
    or ``throughput`` (images/s, spread from the p10-p90 samples)."""
    if rec is None:
        return "not run"
    status = rec.get("status")
    if status not in ("ok", "wrong") or rec.get("median_ms") is None:
        return str(status or "?")
    mark = OK_MARK if passed(rec) else WRONG_MARK
    if metric == "throughput":
        tp = rec.get("throughput")
        if tp is None:
            return f"- {mark}"
        lo, hi = rec.get("throughput_p10", tp), rec.get("throughput_p90", tp)
        d = decimals(tp)
        return f"{tp:,.{d}f} ({lo:,.{d}f}-{hi:,.{d}f}) {mark}"
    # over rounds: ± the spread between rounds (fresh processes); one round: ± the samples' std
    return f"{CellResult(rec).figure_text()} {mark}"


def sequential(rec: dict | None) -> str:
    """An IOS cell's sequential baseline (the sequential cell's figure over the same rounds, or timed
    in the same workers) as ``median ±spread`` (its interval's half-width where it has one)."""
    if not passed(rec) or rec.get("sequential_ms") is None:
        return "-"
    ci = rec.get("sequential_ci_ms")
    v = float(rec["sequential_ms"])
    sd = (ci[1] - ci[0]) / 2 if isinstance(ci, list) and len(ci) == 2 else float(rec.get("sequential_std_ms") or 0.0)
    d = decimals(v)
    return f"{v:,.{d}f} ±{sd:,.{d}f}"


def search_seconds(rec: dict | None) -> float | None:
    """Seconds the schedule's search took (also for a cell that reused its run's schedule)."""
    if not rec:
        return None
    v = rec.get("schedule_search_seconds", rec.get("optimize_seconds"))
    return float(v) if v is not None else None


def published(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:g}{unit}"


def table(title: str, headers: list[str], rows: list[list[str]], note: str = "") -> str:
    return Table(title, headers, rows, note).md()


# ---- figures --------------------------------------------------------------------------------------

def heatmap(path: Path, values: list[list[float | None]], rows: list[str], cols: list[str], title: str,
            xlabel: str, ylabel: str, texts: list[list[str]] | None = None) -> Path | None:
    """A heat map (PNG) of ``values`` (rows x cols; None: not measured); each cell annotated with
    ``texts`` (default: the value). Colour: value / the row's best (1 = best)."""
    from ios_bench.reporting.escape import plot_text
    from ios_bench.reporting.plotting import pyplot, save_png

    if not any(v is not None for row in values for v in row):
        return None
    plt = pyplot()
    import numpy as np

    norm = np.full((len(rows), len(cols)), np.nan)
    for i, row in enumerate(values):
        best = min((v for v in row if v is not None), default=None)
        for j, v in enumerate(row):
            if v is not None and best:
                norm[i, j] = v / best
    fig, ax = plt.subplots(figsize=(1.6 * len(cols) + 2.5, 0.8 * len(rows) + 1.8))
    im = ax.imshow(np.ma.masked_invalid(norm), cmap="RdYlGn_r", vmin=1.0, vmax=max(1.1, np.nanmax(norm)))
    for i in range(len(rows)):
        for j in range(len(cols)):
            text = texts[i][j] if texts else fmt(values[i][j])
            ax.text(j, i, plot_text(text), ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(cols)), [plot_text(c) for c in cols])
    ax.set_yticks(range(len(rows)), [plot_text(r) for r in rows])
    ax.set_xlabel(plot_text(xlabel))
    ax.set_ylabel(plot_text(ylabel))
    ax.set_title(plot_text(title), fontsize=10)
    fig.colorbar(im, ax=ax, label="latency / row's best")
    fig.tight_layout()
    save_png(fig, path)
    return path


def curves(path: Path, series: dict[str, list[tuple[float, float, float, float]]], title: str, xlabel: str,
           ylabel: str, logx: bool = False) -> Path | None:
    """Lines (PNG): ``series`` {label: [(x, y, y_low, y_high), ...]}, the band the spread."""
    from ios_bench.reporting.escape import plot_text
    from ios_bench.reporting.plotting import pyplot, save_png, series_styles

    series = {k: sorted(v) for k, v in series.items() if v}
    if not series:
        return None
    plt = pyplot()
    styles = series_styles(list(series))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, pts in series.items():
        xs = [p[0] for p in pts]
        st = styles[name]
        ax.plot(xs, [p[1] for p in pts], marker=st["marker"], color=st["color"], label=plot_text(name))
        ax.fill_between(xs, [p[2] for p in pts], [p[3] for p in pts], color=st["color"], alpha=0.2)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(plot_text(xlabel))
    ax.set_ylabel(plot_text(ylabel))
    ax.set_title(plot_text(title), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_png(fig, path)
    return path


def latency_point(x: float, rec: dict) -> tuple[float, float, float, float]:
    """(x, median, p10, p90) of a correct cell's latency."""
    v = float(rec["median_ms"])
    return (x, v, float(rec.get("p10_ms") or v), float(rec.get("p90_ms") or v))


def throughput_point(x: float, rec: dict) -> tuple[float, float, float, float]:
    v = float(rec["throughput"])
    return (x, v, float(rec.get("throughput_p10") or v), float(rec.get("throughput_p90") or v))
