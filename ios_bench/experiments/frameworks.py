"""Comparison of frameworks: IOS (IOS-Both on the IOS runtime, on the CPU on each of its kernel
providers) against every peer that runs on this machine, same weights, same input, same thread
budget (reference README section 4.2.2)."""

from __future__ import annotations

from pathlib import Path

from ios_bench.experiments import _common as c
from ios_bench.experiments import published as pub
from ios_bench.experiments.base import Context, Report, Run
from ios_bench.experiments.schedules import bars
from ios_bench.planning.cells import label

FULL_MODELS = ["inception_v3", "randwire", "nasnet", "squeezenet"]
REFERENCE_MODELS = ["inception_v3", "squeezenet"]
QUICK_MODELS = ["sample"]
# quick form: the two peers that build in seconds (the others import or compile for tens of seconds)
QUICK_PEERS = ["onnxruntime", "openvino"]
IOS = "ios-both"


class Frameworks:
    name = "frameworks"
    title = "IOS against the other frameworks"
    summary = "IOS-Both against every peer framework available here (same graph, weights, input and threads)"
    paper = "framework comparison table, batch 1 (reference README 4.2.2; paper: comparison of cuDNN-based frameworks)"

    def runs(self, ctx: Context) -> list[Run]:
        models = c.models(ctx, FULL_MODELS, REFERENCE_MODELS, QUICK_MODELS)
        # None: every available peer but those left out of the default sweep (planning.plan.OPT_IN_FRAMEWORKS)
        peers = QUICK_PEERS if ctx.quick else None
        plan = c.plan(ctx, models=models, batch_sizes=[1], frameworks=peers, schedules=["both"])
        if not ctx.quick and all(d == "cpu" for d in ctx.devices):
            # IOS on the fastest kernels this machine has, as a user would run it (docs/runtime.md)
            plan.ios_providers = None  # every provider available on the device
        return [Run("frameworks", plan, "every available peer and IOS-Both at batch 1")]

    def reduced(self, ctx: Context) -> list[str]:
        notes = c.form_notes(ctx)
        if ctx.quick:
            notes.append(f"quick form: peers {', '.join(QUICK_PEERS)} only")
        if ctx.form == "reference" and not ctx.models:
            notes.append("models: inception_v3 and squeezenet of the paper's four (randwire's and nasnet's IOS "
                         "search and every peer's build take minutes each on 2 cores)")
        notes.append("peers: every framework available on this machine except untuned TVM, tuned TVM and TFLite "
                     "(ios_bench.planning.plan.OPT_IN_FRAMEWORKS: untuned TVM is no fair peer, tuning takes hours, "
                     "TFLite is TensorFlow's second engine, named with --frameworks); the "
                     "`intra-inter` experiment compares tuned TVM. TASO has no adapter; TensorRT and TVM-cuDNN "
                     "need a GPU")
        return notes

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        recs = c.records(folders["frameworks"])
        device = ctx.devices[0]
        models = list(dict.fromkeys(r["model"] for r in recs))
        fws = list(dict.fromkeys(r["framework"] for r in recs if not r["framework"].startswith("ios-")))
        fws = [f for f in fws if any(c.find(recs, framework=f, status=s) for s in ("ok", "wrong", "failed"))]
        skipped = sorted({f"{r['framework']}: {r.get('reason')}" for r in recs if r.get("status") == "skipped"})
        ios_cols = list(dict.fromkeys(r["framework"] for r in recs if r["framework"].split("[")[0] == IOS))
        cols = fws + ios_cols
        rows = []
        for m in models:
            ios = min((v for v in (c.ms(c.find(recs, model=m, framework=f, device=device)) for f in ios_cols) if v),
                      default=None)  # IOS-Both on its best provider
            row = [m]
            for f in cols:
                r = c.find(recs, model=m, framework=f, device=device)
                row.append(c.cell(r))
            best_peer = min((v for v in (c.ms(c.find(recs, model=m, framework=f, device=device)) for f in fws) if v),
                            default=None)
            row.append(f"{best_peer / ios:.2f}x" if ios and best_peer else "-")
            rows.append(row)
        geo = ["GeoMean"]
        for f in cols:
            vals = [c.ms(c.find(recs, model=m, framework=f, device=device)) for m in models]
            geo.append(c.fmt(c.geomean(vals)) if all(vals) else "-")
        rows.append(geo + [""])
        labels = [label(f) if f in ios_cols else f for f in cols]
        main = c.table("Latency (ms), batch 1", ["model"] + labels + ["best IOS-Both speedup over the best peer"],
                       rows)
        pub_cols = list(next(iter(pub.FRAMEWORKS_MS.values())))
        pub_rows = [[m] + [c.published(pub.FRAMEWORKS_MS[m][k]) for k in pub_cols]
                    for m in models if m in pub.FRAMEWORKS_MS]
        side = ""
        if pub_rows:
            names = [f"{k} (ours: {pub.FRAMEWORK_ADAPTERS[k]})" if k in pub.FRAMEWORK_ADAPTERS else k
                     for k in pub_cols]
            side = c.table(f"{c.PUBLISHED_LABEL}: {pub.FRAMEWORKS_SOURCE}", ["model"] + names, pub_rows,
                           "the paper's peers are cuDNN-based GPU frameworks; on this CPU machine the peers are the "
                           "CPU frameworks above, so only the IOS column and the ratios compare in kind")
        sections = [("Latency of each framework", main)]
        if side:
            sections.append(("Published figures", side))
        if skipped:
            sections.append(("Frameworks that could not run here", "\n".join(f"- {x}" for x in skipped)))
        series = {}
        for f, lab in zip(cols, labels):
            pts = []
            for i, m in enumerate(models):
                r = c.find(recs, model=m, framework=f, device=device)
                best = min(c.ms(c.find(recs, model=m, framework=g, device=device)) or float("inf") for g in cols)
                if c.passed(r) and best != float("inf"):
                    _, v, lo, hi = c.latency_point(i, r)
                    pts.append((i, best / v, best / hi, best / lo))
            series[lab] = pts
        fig = bars(Path(ctx.out) / "frameworks.png", models, series,
                   "Normalized throughput of each framework (best = 1; bars: p10-p90), batch 1")
        return Report(self.title, sections, [fig] if fig else [], self.reduced(ctx))


EXPERIMENT = Frameworks()
