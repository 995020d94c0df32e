"""Specialization for devices: IOS-Both schedules optimized on each device, executed on every
device (the 2x2 matrix; reference README section 4.2.4).

On one CPU machine the two "devices" are two thread budgets (1 and 2 threads): a schedule is
optimized with stages timed under one budget (``Plan.ios_options["optimize_threads"]``) and
executed under each. One sweep per (optimized for, executed on) pair, since the thread budget is
a sweep's. With ``--device cuda`` (a GPU and its libraries present) the GPU adds a run optimized
and executed on it; a schedule optimized on the GPU is not executed on the CPU (nor the
reverse) by this recipe.
"""

from __future__ import annotations

from pathlib import Path

from ios_bench.experiments import _common as c
from ios_bench.experiments import published as pub
from ios_bench.experiments.base import Context, Report, Run
from ios_bench.running.executors import device_kind
from ios_core.measurement.threads import usable_cores

FULL_MODELS = ["inception_v3"]
REFERENCE_MODELS = ["inception_v3"]
QUICK_MODELS = ["sample"]


def budgets(ctx: Context) -> list[int]:
    """The thread budgets that play the two devices: 1 and 2 (or the user's --threads and 1)."""
    top = ctx.threads or min(2, usable_cores())
    return sorted({1, top})


class SpecDevice:
    name = "spec-device"
    title = "Specialized schedules for devices"
    summary = ("IOS-Both optimized for each device and executed on every device; on one CPU, thread budgets 1 and "
               "2 are the two devices (plus cuda where there is one)")
    paper = "device specialization matrix, K80 x V100 (reference README 4.2.4; paper: specialized scheduling)"

    def runs(self, ctx: Context) -> list[Run]:
        models = c.models(ctx, FULL_MODELS, REFERENCE_MODELS, QUICK_MODELS)
        runs = []
        cpu = [d for d in ctx.devices if device_kind(d) == "cpu"] or []
        gpus = [d for d in ctx.devices if device_kind(d) != "cpu"]
        if cpu:
            for ex in budgets(ctx):
                for opt in budgets(ctx):
                    plan = c.plan(ctx, models=list(models), batch_sizes=[1], frameworks=[], schedules=["both"],
                                  devices=[cpu[0]], threads=ex, ios_options={"optimize_threads": opt})
                    runs.append(Run(f"optimized-t{opt}-executed-t{ex}", plan,
                                    f"optimized with {opt} thread(s), executed with {ex}"))
        for g in gpus:
            plan = c.plan(ctx, models=list(models), batch_sizes=[1], frameworks=[], schedules=["both"], devices=[g])
            runs.append(Run(f"optimized-{c.file_part(g)}-executed-{c.file_part(g)}", plan,
                            f"optimized and executed on {g}"))
        return runs

    def reduced(self, ctx: Context) -> list[str]:
        notes = c.form_notes(ctx)
        notes.append("devices: this machine has no second device; thread budgets 1 and 2 of its CPU stand in for the "
                     "paper's K80 and V100")
        if len(budgets(ctx)) < 2:
            notes.append("only one core is usable here: a single thread budget, no matrix")
        return notes

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        bs = budgets(ctx)
        recs = {name: c.records(f) for name, f in folders.items()}
        models = list(dict.fromkeys(r["model"] for rs in recs.values() for r in rs))
        sections, figures = [], []
        for m in models:
            rows, values, texts = [], [], []
            for ex in bs:
                cells = [c.find(recs.get(f"optimized-t{opt}-executed-t{ex}", []), model=m, framework="ios-both")
                         for opt in bs]
                vals = [c.ms(r) for r in cells]
                best = min((v for v in vals if v), default=None)
                row = [f"executed with {ex} thread(s)"]
                row += [c.cell(r) + (" (best)" if v is not None and v == best and len(bs) > 1 else "")
                        for r, v in zip(cells, vals)]
                row.append(c.sequential(next((r for r in cells if c.passed(r) and r.get("sequential_ms")), None)))
                rows.append(row)
                values.append(vals)
                texts.append([c.fmt(v) if v else "-" for v in vals])
            body = c.table(f"{m}: latency (ms) of IOS-Both, batch 1; rows: executed with; columns: optimized for",
                           [""] + [f"optimized for {t} thread(s)" for t in bs] + ["sequential (ms, same worker)"],
                           rows, "each schedule's stages were timed by the measured cost model under the thread "
                           "budget it is optimized for; the two columns differ only where the budgets lead to "
                           "different schedules")
            stages = []
            for opt in bs:
                r = next((x for x in recs.get(f"optimized-t{opt}-executed-t{bs[-1]}", []) if x.get("model") == m), None)
                if r and r.get("stages") is not None:
                    stages.append(f"optimized for {opt} thread(s): {r['stages']} stages")
            if stages:
                body += "\nSchedules: " + "; ".join(stages) + "\n"
            for g in [d for d in ctx.devices if device_kind(d) != "cpu"]:
                r = c.find(recs.get(f"optimized-{c.file_part(g)}-executed-{c.file_part(g)}", []), model=m)
                body += f"\n{g}: optimized and executed there: {c.cell(r)}\n"
            if m == "inception_v3":
                devs = ["k80", "v100"]
                prow = [[f"executed on {ex}"] + [c.published(pub.SPEC_DEVICE_MS[opt][ex]) for opt in devs]
                        for ex in devs]
                body += "\n" + c.table(f"published (K80 and V100, not measured here): {pub.SPEC_DEVICE_SOURCE}",
                                       [""] + [f"optimized for {d}" for d in devs], prow)
            sections.append((m, body))
            fig = c.heatmap(Path(ctx.out) / f"spec-device-{c.file_part(m)}.png", values,
                            [f"exec {t}T" for t in bs], [f"opt {t}T" for t in bs],
                            f"{m}: IOS-Both latency (ms); colour: latency / row's best", "optimized for",
                            "executed with", texts)
            if fig:
                figures.append(fig)
        return Report(self.title, sections, figures, self.reduced(ctx))


EXPERIMENT = SpecDevice()
