"""Reports for a run folder: ``report.md``, ``report.html``, ``results.csv`` and PNG plots.

Contents: per device and batch size, the latency table (ms, model x framework, the paper's
layout, GeoMean row), the throughput table (images/s), the speedup of IOS-Both over each peer;
the normalized-throughput bar chart per model (the paper's figure), latency/throughput vs batch
size; every cell with its output check; failures with their reasons; the environment.

Figures: each cell's figure is the median of its undisturbed rounds' medians (``ios_bench.rounds``);
tables show it with ± the between-round spread (the coefficient of variation of the round
medians) and flag cells whose rounds disagree as ``unstable``; plots show the figure with the
p10-p90 range of the pooled samples (error bars / bands). A schema-1 run (one process per cell)
shows ± the standard deviation of its samples instead, as before.
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path

from ios_core.atomic import atomic_write_text
from ios_core.stats import geomean

from .escape import csv_cell, file_part, plot_text
from .escape import md as md_text
from .numbers import fmt, fmt_pm
from .plan import SCHEDULES
from .plotting import pyplot, save_png, series_styles
from .record import CellResult
from .results import load_run
from .runfolder import check_writable

IOS_BOTH = "ios-both"


# ---- small table model rendered to Markdown and HTML -------------------------------------------

class Table:
    def __init__(self, title: str, headers: list[str], rows: list[list[str]], note: str = ""):
        self.title, self.headers, self.rows, self.note = title, headers, rows, note

    def md(self) -> str:
        esc = md_text
        lines = [f"**{esc(self.title)}**", "", "| " + " | ".join(map(esc, self.headers)) + " |",
                 "|" + "|".join("---" if i == 0 else "---:" for i in range(len(self.headers))) + "|"]
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in self.rows]
        if self.note:
            lines += ["", f"_{esc(self.note)}_"]
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in self.headers)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in self.rows)
        note = f"<p class='note'>{html.escape(self.note)}</p>" if self.note else ""
        return (f"<h4>{html.escape(self.title)}</h4><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
                f"</table>{note}")


def _label(fw: str) -> str:
    from .cells import label

    return label(fw)


def _row_label(r) -> str:
    """A cell's framework label, with its LoadGen scenario configuration where it has one."""
    variant = r.get("variant")
    return _label(r["framework"]) + (f" [{variant}]" if isinstance(variant, str) and variant else "")


def framework_order(df) -> list[str]:
    """Peers in order of appearance, then IOS schedules in the optimizer's order."""
    seen = list(dict.fromkeys(df["framework"]))
    peers = [f for f in seen if not f.startswith("ios-")]
    ios = [f"ios-{s}" for s in SCHEDULES if f"ios-{s}" in seen] + [f for f in seen if f.startswith("ios-")
                                                                    and f[4:] not in SCHEDULES]
    return peers + ios


# ---- tables -------------------------------------------------------------------------------------

def _ok(df):
    return df[df["status"] == "ok"]


def _spread(r) -> str:
    """A cell's figure with its spread (:meth:`ios_bench.record.CellResult.figure_text`)."""
    return CellResult(_plain(r)).figure_text()


def _plain(r) -> dict:
    """A DataFrame row as a record dict (NaN: absent)."""
    items = r.items() if hasattr(r, "items") else dict(r).items()
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in items}


def _status_text(row) -> str:
    return "failed" if row["status"] == "failed" else "skipped"


TIMED = ("ok", "wrong")  # statuses that carry timings (a wrong cell is shown, never aggregated)


def metric_table(df, device: str, bs: int, metric: str) -> Table:
    """Latency ('latency', ms) or throughput ('throughput', images/s): models x frameworks."""
    sub = df[(df["device"] == device) & (df["batch_size"] == bs)]
    fws = framework_order(sub)
    models = list(dict.fromkeys(sub["model"]))
    rows, per_fw = [], {fw: {} for fw in fws}
    for m in models:
        row = [m]
        for fw in fws:
            cell = sub[(sub["model"] == m) & (sub["framework"] == fw)]
            if cell.empty:
                row.append("")
                continue
            r = cell.iloc[0]
            if r["status"] not in TIMED:
                row.append(_status_text(r))
                continue
            good = r["status"] == "ok" and r["check_passed"] == True  # noqa: E712
            bad = "" if good else " (wrong output)"
            if metric == "latency":
                val = r["median_ms"]
                same = f" (= {r['same_schedule_as']})" if isinstance(r.get("same_schedule_as"), str) else ""
                row.append(f"{_spread(r)}{same}{bad}")
            else:
                val = r["throughput"]
                row.append(f"{fmt(val)} [{fmt(r['throughput_p10'])}-{fmt(r['throughput_p90'])}]{bad}")
            if good:
                per_fw[fw][m] = val
        rows.append(row)
    geo = ["GeoMean"]
    for fw in fws:
        vals = per_fw[fw]
        geo.append(fmt(geomean(list(vals.values())))
                   if vals and len(vals) == len(models) else "-")
    rows.append(geo)
    if metric == "latency":
        title = f"Latency (ms), batch {bs}, {device}"
        note = ("median of the undisturbed rounds' medians ± the between-round spread (coefficient of variation "
                "of the round medians; each round a fresh process); (unstable): the rounds disagree, read the "
                "'Rounds' table; (= X): the same schedule as X, one measurement; GeoMean over models, only where "
                "every model ran with a correct output")
    else:
        title = f"Throughput (images/s), batch {bs}, {device}"
        note = "median [p10-p90] of the timing samples; GeoMean over models where every model ran correctly"
    return Table(title, ["model"] + [_label(f) for f in fws], rows, note)


def speedup_table(df, device: str, bs: int) -> Table | None:
    """IOS at its best (the fastest correct IOS cell of each model: any schedule, any kernel
    provider) against each peer and against the best peer."""
    sub = _correct(df[(df["device"] == device) & (df["batch_size"] == bs)])
    is_ios = sub["framework"].str.startswith("ios-")
    if not is_ios.any():
        return None
    peers = [f for f in framework_order(sub) if not f.startswith("ios-")]
    models = list(dict.fromkeys(sub["model"]))
    rows, per = [], {p: [] for p in peers + ["best peer"]}
    for m in models:
        ios = sub[(sub["model"] == m) & is_ios]
        if ios.empty:
            rows.append([m, "-"] + ["-"] * (len(peers) + 1))
            continue
        best = ios.loc[ios["median_ms"].idxmin()]
        row = [m, f"{_label(best['framework'])} {fmt(best['median_ms'])}"]
        peer_rows = sub[(sub["model"] == m) & ~is_ios]
        for p in peers:
            peer = peer_rows[peer_rows["framework"] == p]
            if peer.empty:
                row.append("-")
                continue
            s = peer.iloc[0]["median_ms"] / best["median_ms"]
            per[p].append(s)
            row.append(f"{s:.2f}x")
        if peer_rows.empty:
            row.append("-")
        else:
            top = peer_rows.loc[peer_rows["median_ms"].idxmin()]
            s = top["median_ms"] / best["median_ms"]
            per["best peer"].append(s)
            row.append(f"{s:.2f}x ({_label(top['framework'])})")
        rows.append(row)
    rows.append(["GeoMean", ""] + [f"{geomean(per[p]):.2f}x" if per[p] and len(per[p]) == len(models) else "-"
                                   for p in peers + ["best peer"]])
    note = ("IOS at its best: the fastest correct IOS cell of the model (any schedule, any kernel provider); "
            "peer figure / IOS figure; >1 means IOS is faster")
    if str(device).startswith("cuda"):
        note += "; " + _graph_replay_note(sub[is_ios], peers)
    return Table(f"IOS at its best against the peers (latency ratio), batch {bs}, {device}",
                 ["model", "IOS at its best (ms)"] + [_label(p) for p in peers] + ["best peer"], rows, note)


def _graph_replay_note(ios, peers: list[str]) -> str:
    """On the GPU: what the IOS cells ran (a CUDA graph replayed, the default, or launches) and
    which peer compares like with like."""
    col = "config_execution"
    forms = sorted({str(v) for v in ios[col].dropna()}) if col in ios.columns else []
    what = ("IOS cells: " + " / ".join(forms)) if forms else \
        "IOS cells replay a CUDA graph unless run with ios:cuda_graph=false"
    if "torch-compile-cudagraphs" in peers:
        return (f"{what}; the {_label('torch-compile-cudagraphs')} column compares graph replay with graph replay, "
                "the other peers launch their kernels at every run")
    return f"{what}; no peer here replays a CUDA graph (torch-compile-cudagraphs is the one that does)"


def memory_table(df, device: str, bs: int) -> Table | None:
    """Peak resident memory of each cell's workers (MiB): models x frameworks."""
    sub = df[(df["device"] == device) & (df["batch_size"] == bs) & df["status"].isin(TIMED)]
    if sub.empty or sub["peak_rss_mib"].isna().all():
        return None
    fws = framework_order(sub)
    rows = []
    for m in dict.fromkeys(sub["model"]):
        row = [m]
        for fw in fws:
            cell = sub[(sub["model"] == m) & (sub["framework"] == fw)]
            v = _num(cell.iloc[0]["peak_rss_mib"]) if not cell.empty else None
            row.append(f"{v:,.0f}" if v is not None else "-")
        rows.append(row)
    return Table(f"Peak memory (MiB), batch {bs}, {device}", ["model"] + [_label(f) for f in fws], rows,
                 "the largest resident set of the cell's worker processes (its rounds), the Python process and "
                 "the framework together")


def by_place(df):
    """Cells grouped by where they ran: ``device`` becomes "cpu on NODE" when the run's cells ran on
    more than one node (a fleet sweep), so that no table or plot mixes machines."""
    if "node" not in df.columns or df["node"].nunique(dropna=True) <= 1:
        return df
    out = df.copy()
    out["device"] = [f"{d} on {n}" if isinstance(n, str) and n else d for d, n in zip(df["device"], df["node"])]
    return out


def across_table(df, bs: int) -> Table | None:
    """One cell (model, framework) measured on every device and node of the run, side by side:
    device specialization reads along a row. None when the run measured one place only."""
    sub = _correct(df[df["batch_size"] == bs])
    places = list(dict.fromkeys(sub["device"]))
    if len(places) < 2:
        return None
    rows = []
    for (m, fw), grp in sub.groupby(["model", "framework"], sort=False):
        by = {r["device"]: r for _, r in grp.iterrows()}
        rows.append([m, _label(fw)] + [fmt_pm(by[p]["median_ms"], by[p]["std_ms"]) if p in by else "-"
                                       for p in places])
    return Table(f"Latency (ms) across devices and nodes, batch {bs}", ["model", "framework"] + places, rows,
                 "median ± std; correct outputs only; each column one device kind on one node")


SLOWER_FLAG = "SLOWER THAN SEQUENTIAL"


def _num(v, default: float | None = None) -> float | None:
    """A number from a cell, or ``default`` where an older or partial record lacks it."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(f) else f


def slower_than_sequential(df) -> list:
    """IOS cells (other than the sequential schedule) measured slower than the sequential schedule
    on the same provider in the same worker (``sequential_ms``)."""
    out = []
    for _, r in _ok(df).iterrows():
        med, seq = _num(r.get("median_ms")), _num(r.get("sequential_ms"))
        if isinstance(r.get("same_schedule_as"), str):  # the same schedule: one measurement, never "slower"
            continue
        if not (r.get("schedule") and r.get("schedule") != "sequential" and med and seq):
            continue
        low = _num(r.get("ci_low_ms"))
        if (med > seq) if low is None else (low > seq):  # over rounds: only where the interval says so
            out.append(r)
    return out


def ios_table(df, device: str, bs: int) -> Table | None:
    """IOS cells: the optimizer's estimate against the measurement, and against sequential."""
    sub = _ok(df[(df["device"] == device) & (df["batch_size"] == bs)])
    sub = sub[sub["schedule"].notna()] if "schedule" in sub.columns else sub.iloc[0:0]
    if sub.empty:
        return None
    rows, errors = [], []
    for _, r in sub.iterrows():
        med, pred, seq = _num(r["median_ms"]), _num(r.get("predicted_ms")), _num(r.get("sequential_ms"))
        err = (pred - med) / med if pred and med else None
        if err is not None:
            errors.append(abs(err))
        flag = ""
        if isinstance(r.get("same_schedule_as"), str):
            flag = f"same schedule as {r['same_schedule_as']}"
        elif seq and med and r["schedule"] != "sequential":
            low = _num(r.get("ci_low_ms"))
            flag = SLOWER_FLAG if (med > seq if low is None else low > seq) else "ok"
        rows.append([r["model"], _row_label(r), r.get("provider") or "torch", fmt(med),
                     fmt(pred) if pred else "-", f"{err:+.1%}" if err is not None else "-",
                     fmt(seq) if seq else "-", f"{seq / med:.2f}x" if seq and med else "-", flag,
                     fmt(_num(r.get("optimize_seconds"))) if _num(r.get("optimize_seconds")) is not None else "-"])
    note = ("predicted: the optimizer's estimate (cost model, an estimate, not a measurement); error = "
            "(predicted - measured) / measured; sequential: the sequential schedule on the same provider, measured in "
            "the same interleaved rounds; vs sequential > 1 means the schedule is faster; SLOWER THAN SEQUENTIAL only "
            "where the schedule's interval lies above the sequential figure")
    if errors:
        note += f". Mean absolute prediction error: {sum(errors) / len(errors):.1%} over {len(errors)} cells"
    return Table(f"IOS schedules: prediction and validation, batch {bs}, {device}",
                 ["model", "schedule", "provider", "measured ms", "predicted ms (estimate)", "prediction error",
                  "sequential ms", "vs sequential", "flag", "optimize s"], rows, note)


def rounds_table(df) -> Table | None:
    """Every timed cell's rounds: the figure's interval, the spread between rounds, the rounds used,
    the disturbed ones and why, and whether the figure is stable."""
    ran = df[df["status"].isin(TIMED)]
    if ran.empty or ran["rounds_used"].isna().all():
        return None
    rows = []
    for _, r in ran.iterrows():
        rounds = r.get("rounds") if isinstance(r.get("rounds"), list) else []
        why = "; ".join(dict.fromkeys(str(g.get("disturbed")) for g in rounds
                                      if isinstance(g, dict) and g.get("disturbed")))
        lo, hi = _num(r.get("ci_low_ms")), _num(r.get("ci_high_ms"))
        cv = _num(r.get("between_round_cv"))
        meds = r.get("round_medians_ms") if isinstance(r.get("round_medians_ms"), list) else []
        rows.append([r["model"], r["batch_size"], _row_label(r), fmt(r["median_ms"]),
                     f"{fmt(lo)}-{fmt(hi)}" if lo is not None else "-", f"{cv:.1%}" if cv is not None else "-",
                     " ".join(fmt(m) for m in meds) or "-",
                     f"{_int(r.get('rounds_used'))}/{_int(r.get('rounds_measured'))}",
                     f"{_int(r.get('rounds_disturbed'))}" + (f" ({why})" if why else ""),
                     r["unstable"] if isinstance(r.get("unstable"), str) and r["unstable"] else "stable"])
    return Table("Rounds", ["model", "batch", "framework", "figure ms", "95% CI ms", "between rounds",
                            "round medians ms", "rounds used/measured", "disturbed", "verdict"], rows,
                 "each round a fresh worker process; the figure is the median of the undisturbed rounds' medians, its "
                 "interval a hierarchical bootstrap (rounds, then samples); a disturbed round (other processes' CPU "
                 "time, steal, or a slow canary) is measured again and never pooled; docs/harness.md explains "
                 "'unstable' and 'disturbed'")


def _int(v) -> str:
    n = _num(v)
    return str(int(n)) if n is not None else "?"


def cells_table(df) -> Table:
    rows = []
    for _, r in df.sort_values(["device", "model", "batch_size"], kind="stable").iterrows():
        if r["status"] in TIMED:
            check = "ok" if r["status"] == "ok" else "WRONG"
            check += f" ({r['check_max_rel_err']:.1e})" if _num(r["check_max_rel_err"], None) is not None else ""
            check += "; oracle only" if _oracle_only(r) else ""
            rows.append([r["model"], r["batch_size"], _row_label(r), r["device"], r["status"],
                         fmt(r["median_ms"]), fmt(r["std_ms"]), f"{fmt(r['p10_ms'])}-{fmt(r['p90_ms'])}",
                         fmt(r["throughput"]), check, fmt(r["build_seconds"]), r.get("precision") or "",
                         _node(r)])
        else:
            rows.append([r["model"], r["batch_size"], _row_label(r), r["device"], r["status"],
                         "", "", "", "", "", "", "", _node(r)])
    return Table("Every cell", ["model", "batch", "framework", "device", "status", "median ms", "std ms",
                                "p10-p90 ms", "images/s", "output check (max rel err)", "build s", "precision",
                                "node"],
                 rows, "output check: the cell's output against the oracle (ios_core.reference) at the adapter's "
                 "tolerance (and, for an imported model, against onnxruntime on the original file; 'oracle only': "
                 "that independent check could not run, see Failures)")


def config_table(df) -> Table | None:
    """Each framework's configuration as it ran (from its build info): thread budget, the threads
    it used, precision, execution mode and tuning budget, so that no peer's setup is hidden."""
    ran = df[df["status"].isin(TIMED)]
    if ran.empty:
        return None
    rows = []

    def distinct(d, col) -> str:
        vals = [str(v) for v in d[col] if v is not None and not (isinstance(v, float) and math.isnan(v))] \
            if col in d.columns else []
        return ", ".join(dict.fromkeys(vals)) or "-"

    for (device, fw), d in ran.groupby(["device", "framework"], sort=False):
        def values(col, d=d):
            return distinct(d, col)

        threads = values("threads")
        used = values("config_threads")
        split = f"{values('config_intra_op_threads')} intra x {values('config_inter_op_threads')} inter" \
            if values("config_inter_op_threads") != "-" else ""
        rows.append([_label(fw), device, threads, used + (f" ({split})" if split else ""), values("precision"),
                     values("config_execution_mode"), values("config_tuning")])
    return Table("Configuration of each framework", ["framework", "device", "thread budget", "threads used",
                                                     "precision", "execution mode", "tuning budget"], rows,
                 "as each framework's build reported it; every cell gets the same thread budget and fp32 unless "
                 "a row says otherwise")


def _node(r) -> str:
    n = r.get("node")
    return n if isinstance(n, str) else ""


def _oracle_only(r) -> bool:
    """An imported model's cell whose independent check (onnxruntime on the original file) could
    not run (the record's ``independent_check``)."""
    ind = r.get("independent_check")
    return isinstance(ind, dict) and ind.get("ran") is False


def failures_table(df) -> Table | None:
    bad = df[~df["status"].isin(TIMED)]
    wrong = df[df["status"] == "wrong"]
    unchecked = [r for _, r in df[df["status"].isin(TIMED)].iterrows() if _oracle_only(r)]
    if bad.empty and wrong.empty and not unchecked:
        return None
    rows = [[r["model"], r["batch_size"], _row_label(r), r["device"], r["status"], r["reason"] or ""]
            for _, r in bad.iterrows()]
    rows += [[r["model"], r["batch_size"], _row_label(r), r["device"], "wrong output",
              r.get("check_reason") or ""] for _, r in wrong.iterrows()]
    rows += [[r["model"], r["batch_size"], _row_label(r), r["device"], f"{r['status']}, oracle only",
              r["independent_check"].get("reason") or ""] for r in unchecked]
    return Table("Failures", ["model", "batch", "framework", "device", "status", "reason"], rows,
                 "stderr tails are in the HTML report and in the run folder's logs/")


def _plan_threads(env: dict):
    plan = env.get("plan")
    return plan.get("threads", "?") if isinstance(plan, dict) else "?"


def _policy_text(env: dict) -> str:
    """The run's spin/wait policy (ios_core.threads), as the header and environment table show it."""
    pol = env.get("spin_policy") if isinstance(env.get("spin_policy"), dict) else {}
    if not pol:
        return "not recorded (a run from before the policy existed: library defaults)"
    tenv = env.get("thread_env") if isinstance(env.get("thread_env"), dict) else {}
    vars_ = ", ".join(f"{k}={v}" for k, v in tenv.items() if k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"))
    return f"{pol.get('name')}: {pol.get('description', '')}" + (f" ({vars_})" if vars_ else "")


def outside_writes_table() -> Table:
    """What the frameworks write outside the run folder during a run, and the switch for each
    (ios_bench.sideeffects)."""
    from .sideeffects import OUTSIDE_WRITES

    return Table("Files written outside the run folder", ["library", "writes", "switch"],
                 [list(row) for row in OUTSIDE_WRITES],
                 "where a library gives a switch that stops the write, ios-bench sets it; the others are listed "
                 "here")


def env_table(env: dict) -> Table:
    def part(key) -> dict:  # a hand-edited env.json may hold anything: show '?' rather than fail
        value = env.get(key)
        return value if isinstance(value, dict) else {}

    cpu, mem, osi, py = part("cpu"), part("memory"), part("os"), part("python")
    fw = part("frameworks")
    fw_text = []
    for _dev, adapters in fw.items():
        for name, info in (adapters if isinstance(adapters, dict) else {}).items():
            if isinstance(info, dict):
                fw_text.append(f"{name} {info.get('version') or ''}".strip() + ("" if not info.get("reason") else
                                                                                 " (unavailable)"))
    plan = part("plan")
    rows = [
        ["CPU", f"{cpu.get('model', '?')}, {cpu.get('physical_cores', '?')} cores / {cpu.get('logical_cores', '?')} "
                f"threads"],
        ["memory", f"{mem.get('total_gib', '?')} GiB"],
        ["OS", osi.get("distribution") or osi.get("platform", "?")],
        ["Python", py.get("version", "?")],
        ["packages", ", ".join(f"{k} {v}" for k, v in part("packages").items())],
        ["frameworks", ", ".join(sorted(set(fw_text)))],
        ["GPU", json.dumps(env.get("gpu")) if isinstance(env.get("gpu"), list) else str(env.get("gpu", "?"))],
        ["clocks", str(env.get("clocks", "?"))],
        ["threads per cell", str(plan.get("threads", "?"))],
        ["spin/wait policy", _policy_text(env)],
        ["protocol", f"{plan.get('rounds', 1)} round(s) per cell, each a fresh process, interleaved (round seed "
                     f"{plan.get('round_seed', '-')}); per round warmup {plan.get('warmup')}, repeat "
                     f"{plan.get('repeat')} samples of number {plan.get('number')} (min {plan.get('min_sample_ms')} "
                     "ms per sample)"],
        ["git commit", str(part("git").get("commit", "?")) + (" (dirty)" if part("git").get("dirty") else "")],
        ["command line", " ".join(map(str, env.get("command_line") or [])) if isinstance(env.get("command_line"),
                                                                                           list) else "?"],
        ["captured", str(env.get("captured", "?"))],
    ]
    return Table("Environment", ["", ""], rows)


# ---- plots --------------------------------------------------------------------------------------

def _correct(df):
    """Cells that ran and computed the right output (the only ones plotted)."""
    ok = _ok(df)
    return ok[ok["check_passed"] == True]  # noqa: E712 - pandas


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
    from .scenarios import report as scenario_report
    name = run_folder.name
    sections: list[tuple[str, list]] = []  # (heading, [Table | ("img", path, caption) | ("text", str)])
    summary = (f"{len(df)} cells: {int((df['status'] == 'ok').sum())} ok, {int((df['status'] == 'failed').sum())} "
               f"failed, {int((df['status'] == 'skipped').sum())} skipped; "
               f"{int((df['status'] == 'wrong').sum())} with a wrong output (shown, never in a GeoMean, speedup "
               "or plot)")
    intro = [("text", f"Run folder: {run_folder}. {summary}.")]
    if env.get("clocks"):
        intro.append(("text", f"Clocks: {env['clocks']}."))
    intro.append(("text", f"Threads per cell: {_plan_threads(env)}; spin/wait policy "
                          f"for every cell: {_policy_text(env)}."))
    for note in env.get("notes") if isinstance(env.get("notes"), list) else []:
        intro.append(("text", f"Note: {note}."))
    for w in env.get("warnings") if isinstance(env.get("warnings"), list) else []:
        intro.append(("warn", f"when the run started: {w}"))
    for p in problems:
        intro.append(("warn", p))
    old = int(df["migrated_from"].notna().sum()) if "migrated_from" in df.columns else 0
    if old:
        intro.append(("warn", f"{old} cell(s) come from an older run (schema 1): each was measured in one process, "
                              "one round, so its spread says nothing of between-process noise; measure again with "
                              "rounds for figures that repeat"))
    for _, r in df[df["status"].isin(TIMED)].iterrows():
        if "migrated_from" in df.columns and r.get("migrated_from") == r.get("migrated_from") \
                and r.get("migrated_from") is not None:
            continue  # said once above
        if isinstance(r.get("unstable"), str) and r["unstable"]:
            intro.append(("warn", f"{r['model']} b{r['batch_size']} {_row_label(r)} on {r['device']}: "
                                  f"UNSTABLE ({r['unstable']})"))
    for r in slower_than_sequential(df):
        intro.append(("warn", f"{r['model']} b{r['batch_size']} {_row_label(r)} on {r['device']}: "
                              f"{SLOWER_FLAG} ({fmt(_num(r['median_ms']))} ms vs "
                              f"{fmt(_num(r['sequential_ms']))} ms sequential)"))
    sections.append(("Summary", intro))
    styles = series_styles(framework_order(df))  # one style per series across every plot
    full = df
    if "scenario" in df.columns:  # LoadGen scenario cells have their own sections; the tables below are latency's
        df = df[df["scenario"].isna()].reset_index(drop=True)
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
            it = ios_table(places, device, bs)
            if it is not None:
                items.append(it)
            png = out / f"normalized_throughput_{file_part(device)}_b{bs}.png"
            if plot_normalized(places, device, bs, png, styles):
                items.append(("img", png.name, f"Normalized throughput per model, batch {bs} (p10-p90 error bars)"))
            sections.append((f"{device}, batch size {bs}", items))
        items = []
        for model in dict.fromkeys(places[places["device"] == device]["model"]):
            png = out / f"vs_batch_{file_part(model)}_{file_part(device)}.png"
            if plot_vs_batch(places, model, device, png, styles):
                items.append(("img", png.name, f"{model}: latency and throughput vs batch size (p10-p90 bands)"))
        if items:
            sections.append((f"{device}: latency and throughput vs batch size", items))
    if full is not df:
        scen = [r for r in run.records if r.get("scenario")]
        sections += scenario_report.sections(scen, out, styles, Table)
    df = full  # every cell from here on
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
        body.append(f"<h2>{html.escape(heading)}</h2>")
        for it in items:
            if isinstance(it, Table):
                lines.append(it.md())
                body.append(it.html())
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
