"""``ios-bench experiment utilization``: device busy-ness over time, Sequential vs IOS-Both.

The paper profiles the active warps of its sample network on a V100 (CUPTI) under the
sequential schedule and the IOS-Both schedule, and shows IOS keeping the device busier. Here:
one sweep of IOS-Sequential and IOS-Both on the IOS runtime with ``sample_utilization`` on, so
every cell's worker samples per-core CPU busy-ness (and its own CPU share) during its timed loop
(:mod:`ios_bench.machine.utilization`; NVML SM utilization on ``cuda``), writes the trace to
``util/<cell>.json`` and its means to the record. The report plots the traces side by side on one
time axis and tables the means beside the latency.
"""

from __future__ import annotations

import json
from pathlib import Path

from ios_bench.experiments import _common as common
from ios_bench.experiments.base import Context, Report, Run
from ios_bench.experiments.published import UTILIZATION_NOTE
from ios_bench.machine.utilization import SMOOTH_MS
from ios_bench.planning.cells import label, safe_name
from ios_bench.reporting.escape import plot_text
from ios_bench.reporting.plotting import pyplot, save_png

SCHEDULES = ["sequential", "both"]


# the timed loop of each cell must last long enough for many 10 ms samples: these override the
# form's protocol (ios_bench.experiments._common.PROTOCOLS)
TIMED_LOOP = {"quick": {"repeat": 10, "min_sample_ms": 20.0}, "reference": {"repeat": 10, "min_sample_ms": 50.0},
              "full": {"repeat": 20, "min_sample_ms": 50.0}}


def check_text(r: dict) -> str:
    check = r.get("check") or {}
    if not check:
        return "-"
    return ("ok" if check.get("passed") else "WRONG") + f" (rel err {check.get('max_rel_err', float('nan')):.1e})"


def _smooth(values: list[float], t: list[float], window_s: float) -> list[float]:
    """Moving average over the samples of the last ``window_s`` seconds (the per-core series is
    quantized to clock ticks; see ios_bench.machine.utilization)."""
    out, lo, acc = [], 0, 0.0
    for i, v in enumerate(values):
        acc += v
        while t[i] - t[lo] >= window_s and lo < i:
            acc -= values[lo]
            lo += 1
        out.append(acc / (i - lo + 1))
    return out


class Utilization:
    name = "utilization"
    title = "Utilization profiling: Sequential vs IOS-Both"
    summary = "per-core CPU busy-ness over time (SM utilization on cuda) during the timed loop, beside latency"
    paper = "the IOS paper's utilization profiling (active warps over time, sample network, V100)"

    def models(self, ctx: Context) -> list[str]:
        return common.models(ctx, full=["sample", "squeezenet"], reference=["sample", "squeezenet"], quick=["sample"])

    def runs(self, ctx: Context) -> list[Run]:
        plan = common.plan(ctx, models=self.models(ctx), batch_sizes=[1], frameworks=[], schedules=list(SCHEDULES),
                           sample_utilization=True, **TIMED_LOOP[ctx.form])
        return [Run("utilization", plan, "IOS-Sequential and IOS-Both on the IOS runtime, busy-ness sampled "
                                         "during each cell's timed loop")]

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        folder = Path(folders["utilization"])
        records = common.records(folder) if (folder / "results.jsonl").exists() else []
        cores = sorted({int(c) for r in records for c in ((r.get("utilization") or {}).get("mean_busy_pct") or {})})
        headers = ["Model", "Device", "Schedule", "Latency ms", "Output check"]
        headers += [f"core {c} busy %" for c in cores] + ["all cores busy %", "this process %", "SM %", "samples"]
        rows, figures, notes = [], [], []
        for r in records:
            u = r.get("utilization") or {}
            per = u.get("mean_busy_pct") or {}
            rows.append([r["model"], r["device"], r.get("label") or label(r["framework"]), common.cell(r),
                         check_text(r)] + [_pct(per.get(str(c))) for c in cores]
                        + [_pct(u.get("mean_busy_pct_all")), _pct(u.get("process_pct")), _pct(u.get("mean_sm_pct")),
                           str(u.get("samples", "-"))])
            if u.get("reason"):
                notes.append(f"{r['model']} {r.get('label')}: {u['reason']}")
        keys = list(dict.fromkeys((r["model"], r["device"]) for r in records))
        for model, device in keys:
            cells = {r.get("schedule"): r for r in records if r["model"] == model and r["device"] == device}
            path = Path(ctx.out) / f"utilization-{safe_name(model)}-{safe_name(device)}.png"
            if plot_traces(folder, [cells.get(s) for s in SCHEDULES], f"{model}, batch 1, {device}", path):
                figures.append(path)
        sections = [("Mean utilization during the timed loop",
                     common.table("Utilization and latency (measured)", headers, rows,
                           "busy % per core: the whole core (other processes on this shared machine included), "
                           "from /proc/stat; this process %: the cell's own CPU time over all cores of its mask; "
                           "sampled every 10 ms during warmup and timed runs"))]
        if figures:  # the runner shows the figures after the sections
            sections.append(("Utilization over time", f"One figure per model below: Sequential and IOS-Both side by "
                             f"side on one time axis. Per-core lines are moving averages over {SMOOTH_MS:g} ms (the "
                             "counters tick every 10 ms); the dashed line is this process's share of all cores."))
        sections.append(("Published", f"No published numbers in the seeds: {UTILIZATION_NOTE}."))
        if notes:
            sections.append(("Notes", "\n".join(f"- {n}" for n in notes)))
        # this recipe's timed loop replaces the form's protocol (its note would be wrong here)
        reduced = [n for n in common.form_notes(ctx) if n != common.PROTOCOL_NOTES.get(ctx.form)] + [
            "CPU instead of GPU: per-core busy % and process CPU share stand for active warps; the CUDA path "
            "(NVML SM utilization) exists but was not run on these machines"]
        if not ctx.models:
            reduced.append("models: " + ", ".join(self.models(ctx)) + " (the paper profiles its sample network)")
        loop = TIMED_LOOP[ctx.form]
        reduced.append(f"protocol: warmup {common.PROTOCOLS[ctx.form]['warmup']}, {loop['repeat']} timing samples of "
                       f"at least {loop['min_sample_ms']:g} ms per cell, so that each trace holds many 10 ms samples")
        return Report(self.title, sections, figures, reduced)


def _pct(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def load_trace(folder: Path, record: dict | None) -> dict | None:
    rel = ((record or {}).get("utilization") or {}).get("trace")
    if not rel:
        return None
    try:
        return json.loads((Path(folder) / rel).read_text())
    except (OSError, ValueError):
        return None


def plot_traces(folder: Path, records: list[dict | None], title: str, path: Path) -> bool:
    """Side by side, one panel per schedule, on one time axis: per-core busy % (smoothed) and the
    process's share (dashed); SM % for a cuda trace. False when no trace is there."""
    traces = [(r, load_trace(folder, r)) for r in records]
    if not any(t and t.get("t_s") for _, t in traces):
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(traces), figsize=(5.5 * len(traces), 3.2), sharex=True, sharey=True,
                             squeeze=False)
    for ax, (r, t) in zip(axes[0], traces):
        name = (r or {}).get("label") or "?"
        ax.set_title(plot_text(f"{name}: {common.cell(r)} ms") if r else "(no cell)", fontsize=9)
        ax.set_xlabel("time in the timed loop (s)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        if not t or not t.get("t_s"):
            ax.text(0.5, 0.5, plot_text((t or {}).get("reason", "no trace")), ha="center", va="center",
                    transform=ax.transAxes, fontsize=8, wrap=True)
            continue
        ts = t["t_s"]
        if t.get("kind") == "cuda-sm":
            ax.plot(ts, t["sm_pct"], lw=1, label="SM utilization (NVML)")
        else:
            for i, c in enumerate(t["cpus"]):
                ax.plot(ts, _smooth([row[i] for row in t["busy_pct"]], ts, SMOOTH_MS / 1000), lw=1,
                        label=f"core {c} busy")
            ax.plot(ts, t["process_pct"], lw=1, ls="--", color="black", label="this process (all cores)")
        ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel("utilization (%)")
    fig.suptitle(plot_text(f"{title} (measured)"), fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_png(fig, path)
    return True


EXPERIMENT = Utilization()
