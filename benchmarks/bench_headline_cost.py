"""The headline's cost before it runs (issue 55): the dry-run estimate of `ios-bench run --models all --batch
1,16,32` and of `--batch 1` (default frameworks and schedules), under the time-bounded protocol with capping
and under the old fixed counts (3 warmup calls, 10 samples, no capping), side by side, with the breakdown
by batch, model, framework and kind of cost.

    python benchmarks/bench_headline_cost.py                 # both sweeps, both protocols
    python benchmarks/bench_headline_cost.py --batch 1       # one sweep
    python benchmarks/bench_headline_cost.py --models squeezenet,resnet50 --json
    python benchmarks/bench_headline_cost.py --options --batch 1,16,32 --stated-speed   # what each option costs

Nothing is measured: one probe worker says which frameworks are available (shared by the four estimates),
then each estimate is `run --dry-run`'s (``ios_bench.running.dry_run``), learning from the run folders
under --runs as a sweep there would. Its first rows print within a minute on the 2-core VM. Bad input is
one line (exit 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._cli import script_parser  # noqa: E402

# the two protocols compared: the plan's fields (ios_core.measurement.protocol)
PROTOCOLS = {"time-bounded": {"sample_s": 1.0, "warmup_s": 0.5, "min_repeat": 3, "cap_factor": 3.0},
             "fixed": {"sample_s": None, "warmup_s": None, "cap_factor": None}}


# what the 3-hour goal could cost (issue 55): each option a decision about the headline could take, as the
# plan fields it sets on top of today's time-bounded protocol; "all four" is every one of them together
OPTIONS = {"today": {},
           "search at batch 1, reused at 16 and 32": {"ios_options": {"optimize_batch": 1}},
           "1 sample at least (calls over --sample-time)": {"min_repeat": 1},
           "cap factor 2": {"cap_factor": 2.0},
           "2 rounds a cell": {"rounds": 2},
           "all four": {"ios_options": {"optimize_batch": 1}, "min_repeat": 1, "cap_factor": 2.0, "rounds": 2},
           "1 round a cell (no interval at all)": {"rounds": 1}}


def headline_plan(models: list[str], batches: list[int], protocol: dict):
    """The plan `run --models ... --batch ...` makes with its defaults, under ``protocol``'s fields."""
    from ios_bench.planning.plan import Plan

    plan = Plan(models=list(models), batch_sizes=list(batches))
    for name, value in protocol.items():
        setattr(plan, name, value)
    return plan


def side_by_side(title: str, got: dict[str, dict]) -> list[str]:
    """One table per breakdown, one column pair (hours, share) per protocol."""
    names = list(got)
    out = [f"## {title}", "", "| part | " + " | ".join(f"{n} h | share" for n in names) + " |",
           "|---|" + "---:|---:|" * len(names)]

    def row(label, values):
        out.append(f"| {label} | " + " | ".join(f"{v / 3600:.2f} | {v / got[n]['seconds']:.0%}" if v is not None
                                                 else "- | -" for n, v in zip(names, values)) + " |")

    row("**total**", [got[n]["seconds"] for n in names])
    from ios_bench.planning.estimate_breakdown import KINDS

    for key, label in (("by_batch", "batch {}"), ("by_kind", "{}"), ("by_model", "{}"), ("by_framework", "{}")):
        seen = list(dict.fromkeys(k for n in names for k in got[n][key]))
        for k in seen:
            row(label.format(KINDS.get(k, k)), [got[n][key].get(k) for n in names])
    caps = {n: len(got[n]["capped"]) for n in names}
    out += ["", f"cells {got[names[0]]['cells']}; rounds " + ", ".join(f"{n} {got[n]['rounds']}" for n in names)
            + "; cells predicted capped (a prediction) " + ", ".join(f"{n} {c}" for n, c in caps.items())
            + f"; searches {got[names[0]]['searches']}, reference outputs {got[names[0]]['references']}", ""]
    return out


def main(argv=None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--models", default="all", help="zoo models, comma-separated, or all [default: all]")
    parser.add_argument("--batch", action="append", default=None, metavar="B,B",
                        help="a sweep's batch sizes (repeatable) [default: 1,16,32 and 1]")
    parser.add_argument("--runs", default="runs", help="where earlier run folders are learnt from [default: runs]")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the tables")
    parser.add_argument("--options", action="store_true",
                        help="instead of the two protocols: today's protocol and each option a decision about the "
                             "headline could take (OPTIONS: search once at batch 1, fewer samples, a lower cap "
                             "factor, fewer rounds), one column each")
    parser.add_argument("--stated-speed", action="store_true",
                        help="no speed probe: every figure at the speed it was measured at (the stated figures: this "
                             "2-core VM's usual speed, STATED['canary_ms'])")
    args = parser.parse_args(argv)
    from ios_bench.commands.run import parse_models
    from ios_bench.errors import InputError
    from ios_bench.planning.loading import parse_int_list
    from ios_bench.running.dry_run import plan_and_estimate

    try:
        models = parse_models(args.models)
        sweeps = [parse_int_list(b, "batch size") for b in (args.batch or ["1,16,32", "1"])]
    except InputError as e:
        parser.error(str(e))
    probes, results = None, {}
    for batches in sweeps:
        got = {}
        compared = ({n: {**PROTOCOLS["time-bounded"], **o} for n, o in OPTIONS.items()} if args.options
                    else PROTOCOLS)
        for name, protocol in compared.items():  # the folder is only read (earlier runs beside it): not made
            got[name] = plan_and_estimate(headline_plan(models, batches, protocol),
                                          Path(args.runs) / "headline-cost-dry-run", quiet=True, probes=probes,
                                          probe_speed=not args.stated_speed)
            probes = got[name]["probes"]
        speed = got[next(iter(got))]["speed"] or "not scaled: every figure at the speed it was measured at"
        title = f"run --models {args.models} --batch {','.join(map(str, batches))} ({speed})"
        if args.json:
            results[title] = {n: {k: v for k, v in g.items() if k not in ("probes", "rows")} for n, g in got.items()}
        else:
            print("\n".join(side_by_side(title, got)), flush=True)
    if args.json:
        print(json.dumps(results, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
