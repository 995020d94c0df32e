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

from ..report import Table, _fmt
from ..sweep import Plan
from .base import Context, Report, Run
from .utilization import cell_records, check_text, latency_text

PAPER_MODELS = ["inception_v3", "randwire", "nasnet", "squeezenet"]
UNTUNED_MODELS = {"sample", "squeezenet"}  # where untuned TVM takes well under a second or two per run
# MetaSchedule trials per task, per form: quick is a smoke test; reference keeps the tuning of
# squeezenet and inception_v3 near ten minutes on a 2-core machine; full is still far below the
# paper's AutoTVM budget (26 hours on 8 V100s for four networks)
BUDGETS = {"quick": 2, "reference": 4, "full": 16}

# Published (V100, TVM v0.6 AutoTVM with the authors' tuned configs, batch 1): the seed README's
# "Intra- and Inter-Operator Parallelism" key output; IOS-Both and Sequential from its schedule table.
PUBLISHED_MS = {
    "inception_v3": {"TVM-AutoTune": 4.95, "IOS-Both": 4.03, "Sequential": 6.51},
    "randwire": {"TVM-AutoTune": 5.26, "IOS-Both": 6.02, "Sequential": 8.49},
    "nasnet": {"TVM-AutoTune": 14.67, "IOS-Both": 16.04, "Sequential": 22.95},
    "squeezenet": {"TVM-AutoTune": 0.75, "IOS-Both": 0.73, "Sequential": 0.86},
}


def _form(ctx: Context) -> str:
    return "quick" if ctx.quick else "reference" if getattr(ctx, "reference", False) else "full"


class IntraInter:
    name = "intra-inter"
    title = "Intra- and inter-operator parallelism: TVM tuned kernels vs IOS"
    summary = "tvm-tuned (MetaSchedule) vs IOS-Sequential and IOS-Both on the same networks; untuned tvm for reference"
    paper = "the IOS paper's TVM-AutoTune comparison (AutoTVM-tuned TVM vs IOS, V100)"

    def __init__(self, trials_per_task: int | None = None):
        self.trials_per_task = trials_per_task  # None: BUDGETS[form]

    def budget(self, ctx: Context) -> int:
        return self.trials_per_task or BUDGETS[_form(ctx)]

    def models(self, ctx: Context) -> list[str]:
        if ctx.models:
            return list(ctx.models)
        return {"quick": ["sample"], "reference": ["squeezenet", "inception_v3"], "full": PAPER_MODELS}[_form(ctx)]

    def runs(self, ctx: Context) -> list[Run]:
        quick = ctx.quick
        models = self.models(ctx)
        budget = self.budget(ctx)
        db = (Path(ctx.out) / "tvm_db" / f"tpt{budget}").resolve()
        threads = {"threads": ctx.threads} if ctx.threads else {}
        protocol = dict(warmup=2, repeat=5, min_sample_ms=None) if quick else dict(warmup=3, repeat=20)
        main = Plan(models=models, batch_sizes=[1], frameworks=["tvm-tuned"], schedules=["sequential", "both"],
                    devices=list(ctx.devices), adapter_options={"tvm-tuned": {"trials_per_task": budget,
                                                                              "db": str(db)}},
                    timeout=1800.0 if quick else 4 * 3600.0, **protocol, **threads)
        runs = [Run("main", main, f"tvm-tuned ({budget} MetaSchedule trials per task) and IOS-Sequential, "
                                  "IOS-Both on the IOS runtime")]
        small = [m for m in models if m in UNTUNED_MODELS]
        if small:
            untuned = Plan(models=small, batch_sizes=[1], frameworks=["tvm"], schedules=[], devices=list(ctx.devices),
                           warmup=1, repeat=3, min_sample_ms=None, timeout=1800.0, **threads)
            runs.append(Run("untuned", untuned, "untuned tvm (default build, no TIR schedule), short protocol"))
        return runs

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        main = cell_records(folders["main"]) if "main" in folders else []
        untuned = cell_records(folders["untuned"]) if "untuned" in folders else []
        by = {(r["model"], r["device"], r["framework"]): r for r in main + untuned}
        places = list(dict.fromkeys((r["model"], r["device"]) for r in main + untuned))
        budget = self.budget(ctx)
        rows, cost_rows = [], []
        for model, device in places:
            seq, both = by.get((model, device, "ios-sequential")), by.get((model, device, "ios-both"))
            tuned, plain = by.get((model, device, "tvm-tuned")), by.get((model, device, "tvm"))
            rows.append([model, device] + [latency_text(r) if r else "-" for r in (seq, both, tuned)]
                        + [_ratio(tuned, both), latency_text(plain) if plain else "not run (too slow)"]
                        + [", ".join(check_text(r).split(" ")[0] for r in (seq, both, tuned, plain) if r)])
            info = (tuned or {}).get("info") or {}
            cost_rows.append([model, device, _fmt((both or {}).get("optimize_seconds")),
                              _fmt(info.get("tuning_seconds")), _fmt(info.get("compile_seconds")),
                              str(info.get("tuning_trials", "-")), str(info.get("tasks_total", "-")),
                              str(info.get("tasks_untuned", "-")), _fmt(info.get("estimated_latency_ms"))])
        sections = [
            ("Latency (measured)", Table(
                "Latency, ms (median ±std), batch 1", ["Model", "Device", "IOS-Sequential", "IOS-Both",
                                                       f"TVM tuned ({budget} trials/task)", "TVM tuned / IOS-Both",
                                                       "TVM untuned", "Output checks (in column order)"], rows,
                "TVM tuned: MetaSchedule on the Relax VM; IOS: the IOS runtime (torch kernels). TVM untuned is "
                "TVM's default CPU build without any schedule (naive loops), shown for reference only.").md()),
            ("Optimization cost (measured)", Table(
                "Search and tuning time, s", ["Model", "Device", "IOS-Both search", "TVM tuning",
                                              "TVM compile", "TVM trials in database", "TVM tasks",
                                              "TVM tasks untuned", "TVM estimate, ms (estimate)"], cost_rows,
                "IOS-Both search: the DP over the measured cost model (a reused schedule shows '-'). TVM tuning: "
                "this build's MetaSchedule time, including its one-time import of tensor intrinsics (about a "
                "minute here); 0 when the database already held every task.").md()),
            ("Published (V100, not measured here)", self._published()),
        ]
        reduced = [f"MetaSchedule with {budget} trials per task (the paper: AutoTVM, 26 hours on an 8-V100 server "
                   "for four networks); meaningful CPU tuning needs ~1000 trials per network and xgboost",
                   "CPU instead of V100: IOS runs torch's CPU kernels, not cuDNN; TVM targets LLVM, not CUDA",
                   "untuned tvm only on " + (", ".join(sorted(UNTUNED_MODELS)) + " with 3 samples: it takes "
                                             "seconds per run on the larger networks")]
        if not ctx.models and _form(ctx) != "full":
            reduced.append("models: " + ", ".join(self.models(ctx)) + " (the paper: " + ", ".join(PAPER_MODELS) + ")")
        return Report(self.title, sections, [], reduced)

    @staticmethod
    def _published() -> str:
        rows = [[m, _fmt(v["Sequential"]), _fmt(v["IOS-Both"]), _fmt(v["TVM-AutoTune"]),
                 f"{v['TVM-AutoTune'] / v['IOS-Both']:.2f}"] for m, v in PUBLISHED_MS.items()]
        return Table("Published latency, ms (NVIDIA V100, batch 1; published, not measured)",
                     ["Model", "Sequential", "IOS-Both", "TVM-AutoTune", "TVM-AutoTune / IOS-Both"], rows,
                     "from the IOS reference README: TVM v0.6 with the authors' AutoTVM configs; IOS-Both and "
                     "Sequential from its schedule comparison").md()


def _ratio(a: dict | None, b: dict | None) -> str:
    if not (a and b and a.get("status") == "ok" and b.get("status") == "ok"):
        return "-"
    return f"{a['median_ms'] / b['median_ms']:.2f}"


EXPERIMENT = IntraInter()
