"""``ios-bench experiment intra-inter``: TVM's tuned kernels (intra-operator) vs IOS (inter-operator).

The paper compares TVM with AutoTVM-tuned kernels against IOS on cuDNN (V100). Here, on the same
networks, batch 1, one thread budget:

- ``tvm-tuned``: TVM's MetaSchedule tunes every fused kernel of the network (intra-operator
  parallelism and loop schedules), then the network runs on TVM's Relax VM; its trial budget is
  the experiment's setting (``trials_per_task``), passed as the sweep's ``adapter_options``;
- IOS-Sequential and IOS-Both on the IOS runtime (inter-operator parallelism over library kernels);
- ``tvm`` untuned (TVM's default build: no TIR schedule), for reference, in its own sweep with a
  short protocol and only on small networks (it takes seconds per run on the large ones).

Tuning databases live in the experiment folder (``tvm_db/tpt<budget>/``), one per budget, so a
rerun (or ``--resume``) reuses them and a different budget never reuses another's records. The
networks of one budget share the database: a kernel tuned for one network is reused by the next
(the tuning time of each network is what it added).
"""

from __future__ import annotations

from pathlib import Path

from ios_bench.experiments import _common as common
from ios_bench.experiments.base import Context, Report, Run
from ios_bench.experiments.published import AUTOTVM_MS, AUTOTVM_SOURCE, SCHEDULES_MS, SCHEDULES_SOURCE

PAPER_MODELS = ["inception_v3", "randwire", "nasnet", "squeezenet"]
UNTUNED_MODELS = {"sample", "squeezenet"}  # where untuned TVM takes well under a second or two per run
# MetaSchedule trials per task, per form: quick is a smoke test; reference keeps the tuning of
# squeezenet and inception_v3 near ten minutes on a 2-core machine; full is still far below the
# paper's AutoTVM budget (26 hours on 8 V100s for four networks)
BUDGETS = {"quick": 2, "reference": 4, "full": 16}

class IntraInter:
    name = "intra-inter"
    title = "Intra- and inter-operator parallelism: TVM tuned kernels vs IOS"
    summary = "tvm-tuned (MetaSchedule) vs IOS-Sequential and IOS-Both on the same networks; untuned tvm for reference"
    paper = "the IOS paper's TVM-AutoTune comparison (AutoTVM-tuned TVM vs IOS, V100)"

    def __init__(self, trials_per_task: int | None = None):
        self.trials_per_task = trials_per_task  # None: BUDGETS[form]

    def budget(self, ctx: Context) -> int:
        return self.trials_per_task or BUDGETS[ctx.form]

    def models(self, ctx: Context) -> list[str]:
        return common.models(ctx, full=PAPER_MODELS, reference=["squeezenet", "inception_v3"], quick=["sample"])

    def runs(self, ctx: Context) -> list[Run]:
        models = self.models(ctx)
        budget = self.budget(ctx)
        db = (Path(ctx.out) / "tvm_db" / f"tpt{budget}").resolve()
        # the cell's timeout covers its tuning (tvm-tuned tunes inside adapter.build)
        main = common.plan(ctx, models=models, batch_sizes=[1], frameworks=["tvm-tuned"],
                           schedules=["sequential", "both"],
                           adapter_options={"tvm-tuned": {"trials_per_task": budget, "db": str(db)}},
                           timeout=1800.0 if ctx.quick else 4 * 3600.0)
        runs = [Run("main", main, f"tvm-tuned ({budget} MetaSchedule trials per task) and IOS-Sequential, "
                                  "IOS-Both on the IOS runtime")]
        small = [m for m in models if m in UNTUNED_MODELS]
        if small:
            untuned = common.plan(ctx, models=small, batch_sizes=[1], frameworks=["tvm"], schedules=[],
                                  warmup=1, repeat=3, min_sample_ms=None, timeout=1800.0)
            runs.append(Run("untuned", untuned, "untuned tvm (default build, no TIR schedule), short protocol"))
        return runs

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        main, untuned = (common.records(folders[k]) if k in folders and (Path(folders[k]) / "results.jsonl").exists()
                         else [] for k in ("main", "untuned"))
        by = {(r["model"], r["device"], r["framework"]): r for r in main + untuned}
        places = list(dict.fromkeys((r["model"], r["device"]) for r in main + untuned))
        budget = self.budget(ctx)
        rows, cost_rows = [], []
        for model, device in places:
            seq, both = by.get((model, device, "ios-sequential")), by.get((model, device, "ios-both"))
            tuned, plain = by.get((model, device, "tvm-tuned")), by.get((model, device, "tvm"))
            rows.append([model, device] + [common.cell(r) for r in (seq, both, tuned)]
                        + [_ratio(tuned, both), common.cell(plain) if plain else "not run (too slow)"])
            info = (tuned or {}).get("info") or {}
            cost_rows.append([model, device, common.fmt(common.search_seconds(both)),
                              common.fmt(info.get("tuning_seconds")), common.fmt(info.get("compile_seconds")),
                              str(info.get("tuning_trials", "-")), str(info.get("tasks_total", "-")),
                              str(info.get("tasks_untuned", "-")), common.fmt(info.get("estimated_latency_ms"))])
        sections = [
            ("Latency (measured)", common.table(
                "Latency, ms (median ±std), batch 1", ["Model", "Device", "IOS-Sequential", "IOS-Both",
                                                       f"TVM tuned ({budget} trials/task)", "TVM tuned / IOS-Both",
                                                       "TVM untuned"], rows,
                "TVM tuned: MetaSchedule on the Relax VM; IOS: the IOS runtime (torch kernels). TVM untuned is "
                "TVM's default CPU build without any schedule (naive loops), shown for reference only.")),
            ("Optimization cost (measured)", common.table(
                "Search and tuning time, s", ["Model", "Device", "IOS-Both search", "TVM tuning",
                                              "TVM compile", "TVM trials in database", "TVM tasks",
                                              "TVM tasks untuned", "TVM estimate, ms (estimate)"], cost_rows,
                "IOS-Both search: the DP over the sweep's cost model. TVM tuning: "
                "this build's MetaSchedule time, including its one-time import of tensor intrinsics (about a "
                "minute here); 0 when the database already held every task.")),
            (common.PUBLISHED_LABEL.capitalize(), self._published()),
        ]
        reduced = common.form_notes(ctx) + [
            f"MetaSchedule with {budget} trials per task (the paper: AutoTVM, 26 hours on an 8-V100 server for four "
            "networks); meaningful CPU tuning needs ~1000 trials per network and xgboost",
            "CPU instead of V100: IOS runs torch's CPU kernels, not cuDNN; TVM targets LLVM, not CUDA",
            "untuned tvm only on " + ", ".join(sorted(UNTUNED_MODELS)) + ", with 3 samples: it takes seconds per "
            "run on the larger networks"]
        if not ctx.models and ctx.form != "full":
            reduced.append("models: " + ", ".join(self.models(ctx)) + " (the paper: " + ", ".join(PAPER_MODELS) + ")")
        return Report(self.title, sections, [], reduced)

    @staticmethod
    def _published() -> str:
        rows = []
        for m, tvm in AUTOTVM_MS.items():
            sched = SCHEDULES_MS.get(m, {})
            both = sched.get("IOS-Both")
            rows.append([m, common.published(sched.get("Sequential")), common.published(both), common.published(tvm),
                         f"{tvm / both:.2f}" if both else "-"])
        return common.table(f"Latency, ms, batch 1: {common.PUBLISHED_LABEL}",
                            ["Model", "Sequential", "IOS-Both", "TVM-AutoTune", "TVM-AutoTune / IOS-Both"], rows,
                            f"TVM-AutoTune: {AUTOTVM_SOURCE} (TVM v0.6 with the authors' AutoTVM configs); "
                            f"Sequential and IOS-Both: {SCHEDULES_SOURCE}")


def _ratio(a: dict | None, b: dict | None) -> str:
    if not (common.passed(a) and common.passed(b)):
        return "-"
    return f"{common.ms(a) / common.ms(b):.2f}"


EXPERIMENT = IntraInter()
