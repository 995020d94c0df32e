"""Consistent improvement across batch sizes: latency and throughput of the sequential
schedule, IOS-Both and the peers over batch sizes (reference README section 4.2.6)."""

from __future__ import annotations

from pathlib import Path

from ios_bench.experiments import _common as c
from ios_bench.experiments import published as pub
from ios_bench.experiments.base import Context, Report, Run

FULL = {"models": ["inception_v3"], "batches": [1, 16, 32, 64, 128], "peers": None}
# reference: the peers that build in seconds (every other one is in the frameworks experiment)
REFERENCE = {"models": ["inception_v3"], "batches": [1, 4, 16], "peers": ["torch", "onnxruntime", "openvino"]}
QUICK = {"models": ["sample"], "batches": [1, 2], "peers": ["onnxruntime"]}
SCHEDULES = ["sequential", "both"]


def _form(ctx: Context) -> dict:
    return {"full": FULL, "reference": REFERENCE, "quick": QUICK}[ctx.form]


class Batchsize:
    name = "batchsize"
    title = "Latency and throughput across batch sizes"
    summary = "latency and throughput over batch sizes for the sequential schedule, IOS-Both and the peers"
    paper = "throughput over batch sizes 1-128, Inception V3 (reference README 4.2.6; paper: consistent improvement)"

    def runs(self, ctx: Context) -> list[Run]:
        form = _form(ctx)
        plan = c.plan(ctx, models=list(ctx.models or form["models"]), batch_sizes=list(form["batches"]),
                      frameworks=form["peers"], schedules=list(SCHEDULES))
        return [Run("batchsize", plan, "IOS-Sequential, IOS-Both and peers at every batch size")]

    def reduced(self, ctx: Context) -> list[str]:
        notes = c.form_notes(ctx)
        form = _form(ctx)
        if ctx.form == "reference":
            notes.append("batch sizes 1, 4 and 16 instead of 1, 16, 32, 64 and 128, and peers torch, onnxruntime "
                         "and openvino only (the others are in the frameworks experiment): inception_v3 at batch 32 "
                         "and above takes seconds per run on 2 cores, and slow-building peers take minutes per batch "
                         "size")
        elif ctx.quick:
            notes.append(f"quick form: batch sizes {form['batches']}, peer {', '.join(form['peers'])} only")
        return notes

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        recs = c.records(folders["batchsize"])
        device = ctx.devices[0]
        batches = sorted({r["batch_size"] for r in recs})
        models = list(dict.fromkeys(r["model"] for r in recs))
        fws = list(dict.fromkeys(r["framework"] for r in recs if not r["framework"].startswith("ios-")))
        fws = [f for f in fws if any(c.find(recs, framework=f, status=s) for s in ("ok", "wrong", "failed"))]
        cols = ["ios-sequential", "ios-both"] + fws
        labels = {"ios-sequential": "Sequential", "ios-both": "IOS-Both"}
        sections, figures = [], []
        for m in models:
            lat, thr = [], []
            for b in batches:
                cells = [c.find(recs, model=m, batch_size=b, framework=f, device=device) for f in cols]
                seq, ios = c.ms(cells[0]), c.ms(cells[1])
                lat.append([str(b)] + [c.cell(r) for r in cells] + [f"{seq / ios:.2f}x" if seq and ios else "-"])
                thr.append([str(b)] + [c.cell(r, "throughput") for r in cells])
            heads = ["batch"] + [labels.get(f, f) for f in cols]
            body = c.table(f"{m}: latency (ms)", heads + ["IOS-Both speedup over Sequential"], lat)
            body += "\n" + c.table(f"{m}: throughput (images/s; p10-p90 of the samples in brackets)", heads, thr)
            if m == "inception_v3":
                pb = sorted(next(iter(pub.BATCHSIZE_MS.values())))
                prow = [[str(b)] + [c.published(pub.BATCHSIZE_MS[k][b]) for k in pub.BATCHSIZE_MS]
                        + [f"{1000 * b / pub.BATCHSIZE_MS['IOS-Both'][b]:,.0f}"] for b in pb]
                body += "\n" + c.table(f"{c.PUBLISHED_LABEL}: {pub.BATCHSIZE_SOURCE}",
                                       ["batch"] + [f"{k} (ms)" for k in pub.BATCHSIZE_MS]
                                       + ["IOS-Both throughput (images/s, derived)"], prow)
            sections.append((m, body))
            series = {}
            for f in cols:
                pts = [c.throughput_point(b, r) for b in batches
                       for r in [c.find(recs, model=m, batch_size=b, framework=f, device=device)] if c.passed(r)]
                series[labels.get(f, f)] = pts
            fig = c.curves(Path(ctx.out) / f"batchsize-{c.file_part(m)}.png", series,
                           f"{m}: throughput over batch size (band: p10-p90)", "batch size", "throughput (images/s)",
                           logx=len(batches) > 2)
            if fig:
                figures.append(fig)
        return Report(self.title, sections, figures, self.reduced(ctx))


EXPERIMENT = Batchsize()
