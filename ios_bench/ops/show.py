"""``ios-bench ops show``: the dataset as a table and two plots.

* ``latency_vs_macs.png``: each operator measured alone, latency against multiply-accumulates
  (log-log), one colour and marker per operator type and conv kind, one panel per thread budget.
* ``pair_speedup.png``: for each measured combination of 2 or 3 groups, its speedup over running
  its groups one after another (the sum of each group measured alone, same provider, thread
  budget and batch) against the thread share each concurrent worker gets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ios_bench.reporting.plotting import pyplot, save_png

MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">")


def summary(df):
    """Rows per (provider, threads, batch, kind of stage), with the median latency."""
    d = df.assign(stage=np.where(df["kind"] == "merge", "merge",
                                 np.where(df["n_groups"] > 1, df["n_groups"].astype(str) + " groups",
                                          np.where(df["n_ops"] > 1, "group", "operator"))))
    g = d.groupby(["provider", "threads", "batch", "stage"])
    return g.agg(rows=("latency_ms", "size"), median_ms=("latency_ms", "median"),
                 median_spread=("std_ms", "median")).reset_index()


def op_label(row) -> str:
    types = row["op_types"]
    if types == "conv":
        for k in ("depthwise", "grouped", "pointwise", "spatial"):
            if row.get(f"f_conv_{k}", 0):
                return f"conv ({k})"
    return types


def pair_speedups(df):
    """One row per multi-group stage whose groups were all measured alone: speedup and thread share."""
    alone = {(r.machine, r.provider, r.threads, r.batch, r.signature): r.latency_ms
             for r in df[df["n_groups"] == 1].itertuples()}
    out = []
    for r in df[(df["n_groups"] > 1) & (df["kind"] == "parallel")].itertuples():
        sigs = [s for s in str(r.group_signatures).split(",") if s]
        parts = [alone.get((r.machine, r.provider, r.threads, r.batch, s)) for s in sigs]
        if not sigs or any(p is None for p in parts):
            continue
        out.append({"provider": r.provider, "threads": r.threads, "batch": r.batch, "groups": r.n_groups,
                    "thread_share": r.f_thread_share, "sequential_ms": sum(parts), "concurrent_ms": r.latency_ms,
                    "speedup": sum(parts) / r.latency_ms})
    import pandas as pd

    return pd.DataFrame(out)


def plots(df, folder: Path) -> list[Path]:
    plt = pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    ops = df[(df["n_ops"] == 1) & (df["kind"] == "parallel")]
    if not ops.empty:
        ops = ops.assign(label=[op_label(r) for _, r in ops.iterrows()])
        threads = sorted(ops["threads"].unique())
        fig, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4.5), squeeze=False)
        labels = sorted(ops["label"].unique())
        cmap = plt.get_cmap("tab10")
        for ax, t in zip(axes[0], threads):
            for i, lab in enumerate(labels):
                d = ops[(ops["threads"] == t) & (ops["label"] == lab)]
                if d.empty:
                    continue
                ax.scatter(np.maximum(d["f_macs"], 1), d["latency_ms"], s=14, color=cmap(i % 10),
                           marker=MARKERS[i % len(MARKERS)], label=lab, alpha=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("multiply-accumulates (batch included; 1 for none)")
            ax.set_ylabel("measured latency, ms (median)")
            ax.set_title(f"operators alone, {t} thread{'s' if t > 1 else ''}")
            ax.grid(True, which="both", alpha=0.3)
        axes[0][-1].legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        written.append(save_png(fig, folder / "latency_vs_macs.png"))
    sp = pair_speedups(df)
    if not sp.empty:
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        cmap = plt.get_cmap("tab10")
        for i, ((prov, groups), d) in enumerate(sp.groupby(["provider", "groups"])):
            jitter = (np.random.default_rng(i).random(len(d)) - 0.5) * 0.08
            ax.scatter(d["thread_share"] + jitter, d["speedup"], s=14, color=cmap(i % 10),
                       marker=MARKERS[i % len(MARKERS)], label=f"{prov}, {groups} groups", alpha=0.8)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xlabel("threads per concurrent worker")
        ax.set_ylabel("speedup over its groups run one after another")
        ax.set_title("concurrency speedup of measured combinations")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        written.append(save_png(fig, folder / "pair_speedup.png"))
    return written
