"""Specialization for batch sizes: IOS-Both schedules optimized for each batch size, each
executed at every batch size (the 5x5 matrix; reference README section 4.2.4).

One sweep per optimized-for batch size (``Plan.ios_options["optimize_batch"]``): its cells
execute that one schedule at every batch size of the experiment.
"""

from __future__ import annotations

from pathlib import Path

from ios_bench.experiments import _common as c
from ios_bench.experiments import published as pub
from ios_bench.experiments.base import Context, Report, Run

FULL = {"models": ["inception_v3"], "batches": [1, 16, 32, 64, 128]}
REFERENCE = {"models": ["inception_v3"], "batches": [1, 4, 16]}
QUICK = {"models": ["sample"], "batches": [1, 2]}


def _form(ctx: Context) -> dict:
    return {"full": FULL, "reference": REFERENCE, "quick": QUICK}[ctx.form]


class SpecBatch:
    name = "spec-batch"
    title = "Specialized schedules for batch sizes"
    summary = ("IOS-Both optimized for each batch size and executed at every batch size (optimized-for x "
               "executed-at matrix)")
    paper = "batch-size specialization matrix (reference README 4.2.4; paper: specialized scheduling is beneficial)"

    def runs(self, ctx: Context) -> list[Run]:
        form = _form(ctx)
        models = ctx.models or form["models"]
        runs = []
        for ob in form["batches"]:
            plan = c.plan(ctx, models=list(models), batch_sizes=list(form["batches"]), frameworks=[],
                          schedules=["both"], ios_options={"optimize_batch": ob})
            runs.append(Run(f"optimized-b{ob}", plan, f"IOS-Both optimized for batch {ob}, executed at every batch"))
        return runs

    def reduced(self, ctx: Context) -> list[str]:
        notes = c.form_notes(ctx)
        if ctx.form == "reference":
            notes.append("batch sizes 1, 4 and 16 instead of 1, 16, 32, 64 and 128 (a 3x3 matrix, not 5x5): one "
                         "inception_v3 run at batch 32 takes seconds on 2 cores, every cell is timed twice (its "
                         "schedule and the sequential baseline) and each optimized-for batch size is a search of its "
                         "own")
        return notes

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        batches = _form(ctx)["batches"]
        device = ctx.devices[0]
        recs = {ob: c.records(folders[f"optimized-b{ob}"]) for ob in batches}
        models = list(dict.fromkeys(r["model"] for rs in recs.values() for r in rs))
        sections, figures = [], []
        for m in models:
            rows, values, texts = [], [], []
            for eb in batches:
                cells = [c.find(recs[ob], model=m, batch_size=eb, framework="ios-both", device=device)
                         for ob in batches]
                vals = [c.ms(r) for r in cells]
                best = min((v for v in vals if v), default=None)
                row = [f"executed at {eb}"]
                for r, v in zip(cells, vals):
                    row.append(c.cell(r) + (" (best)" if v is not None and v == best else ""))
                diag = vals[batches.index(eb)]
                row.append(f"{diag / best:.2f}" if diag and best else "-")
                row.append(c.sequential(next((r for r in cells if c.passed(r) and r.get("sequential_ms")), None)))
                rows.append(row)
                values.append(vals)
                texts.append([c.fmt(v) if v else "-" for v in vals])
            body = c.table(f"{m}: latency (ms) of IOS-Both; rows: executed at batch; columns: optimized for batch",
                           [""] + [f"optimized for {ob}" for ob in batches]
                           + ["specialized / row's best", "sequential (ms, same worker)"], rows,
                           "specialized / row's best: the schedule optimized for the batch size it runs at, over the "
                           "fastest schedule of its row (1.00: the specialized schedule is the fastest, as the paper "
                           "finds; above 1: another one measured faster, by noise or a cost-model miss); "
                           "sequential: the unscheduled network's median, timed in the same worker as the first "
                           "correct cell of the row")
            searches = []
            for ob in batches:
                r = next((x for x in recs[ob] if x.get("model") == m and x.get("schedule_search_seconds")), None)
                if r:
                    searches.append(f"optimized for {ob}: {c.fmt(r['schedule_search_seconds'], 1)} s search, "
                                    f"{(r.get('optimize_figures') or {}).get('num_stages', r.get('stages', '?'))} "
                                    "stages")
            if searches:
                body += "\nSearch: " + "; ".join(searches) + "\n"
            if m == "inception_v3":
                pb = sorted(pub.SPEC_BATCH_MS)
                prow = [[f"executed at {eb}"] + [c.published(pub.SPEC_BATCH_MS[ob][eb]) for ob in pb] for eb in pb]
                body += "\n" + c.table(f"{c.PUBLISHED_LABEL}: {pub.SPEC_BATCH_SOURCE} (the README gives batch 1, "
                                       "32 and 128 only)", [""] + [f"optimized for {ob}" for ob in pb], prow)
            sections.append((m, body))
            fig = c.heatmap(Path(ctx.out) / f"spec-batch-{c.file_part(m)}.png", values,
                            [f"exec {eb}" for eb in batches], [f"opt {ob}" for ob in batches],
                            f"{m}: IOS-Both latency (ms); colour: latency / row's best", "optimized for batch",
                            "executed at batch", texts)
            if fig:
                figures.append(fig)
        return Report(self.title, sections, figures, self.reduced(ctx))


EXPERIMENT = SpecBatch()
