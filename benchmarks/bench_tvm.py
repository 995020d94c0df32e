"""TVM (untuned and MetaSchedule-tuned) against the IOS runtime's sequential schedule.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_tvm.py                 # inception_v3, squeezenet
    PYTHONPATH=. .venv/bin/python benchmarks/bench_tvm.py --models squeezenet --trials-per-task 4

Every framework gets the same graph, weights, input and thread budget; every output is checked
against the oracle; latencies come from ios_core.measurement.measure.measure on
``compiled.execute(compiled.prepare(x))`` (prepare outside the timed call). ``tvm-tuned`` states
its trial budget and tuning time; its database (runs/tvm_db/...) is reused by later runs, so a
second run tunes nothing unless ``--retune``. Ratios are from one run (same machine, same load).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import adapters  # noqa: E402
from ios_core import models, reference  # noqa: E402
from ios_core.check import compare  # noqa: E402
from ios_core.measurement.measure import measure  # noqa: E402


def load_model(name: str):
    if name in models.names():
        return models.get(name).init_weights(0)
    raise SystemExit(f"unknown model {name!r}")


def time_compiled(compiled, x, args):
    prepared = compiled.prepare(x)
    return measure(lambda: compiled.execute(prepared), warmup=args.warmup, number=args.number,
                   repeat=args.repeat, sync=compiled.sync)


def ios_sequential(graph, batch, threads):
    """The IOS runtime's sequential schedule, via the ``ios`` adapter when it has landed."""
    ios = adapters.get("ios")
    reason = ios.available()
    if reason:
        return None, reason
    # the ios adapter runs the graph's schedule; a zoo graph has none, so it runs sequentially
    return ios.build(graph, batch, threads=threads), None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="inception_v3,squeezenet")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--trials-per-task", type=int, default=None,
                   help="tvm-tuned trial budget per task (default: the adapter's, 8)")
    p.add_argument("--trials", type=int, default=None, help="tvm-tuned total trial budget (default per-task x tasks)")
    p.add_argument("--retune", action="store_true", help="tune again even if the database has records")
    p.add_argument("--db-root", default=None, help="database folder root (default runs/tvm_db/<target>/)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--number", type=int, default=1)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--skip-tuned", action="store_true")
    p.add_argument("--json", default=None, help="also write the rows here")
    args = p.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # tables appear as each model finishes

    rows = []
    for name in args.models.split(","):
        graph = load_model(name.strip())
        x = reference.random_input(graph, args.batch, seed=0)
        ref = reference.run(graph, x)
        entries = []
        for fw in ["tvm"] + ([] if args.skip_tuned else ["tvm-tuned"]):
            opts = {}
            if fw == "tvm-tuned":
                opts = {"retune": args.retune}
                if args.trials_per_task is not None:
                    opts["trials_per_task"] = args.trials_per_task
                if args.trials is not None:
                    opts["trials"] = args.trials
                if args.db_root:
                    opts["db"] = str(Path(args.db_root) / f"{graph.name}_b{args.batch}")
            t0 = time.perf_counter()
            compiled = adapters.get(fw).build(graph, args.batch, threads=args.threads, **opts)
            build_s = time.perf_counter() - t0
            entries.append((fw, compiled, build_s))
        ios, why = ios_sequential(graph, args.batch, args.threads)
        if ios is not None:
            entries.append(("ios-sequential", ios, ios.info.get("build_seconds", 0.0)))
        else:
            print(f"[{name}] ios-sequential skipped: {why}")

        results = {}
        for fw, compiled, build_s in entries:
            check = compare(compiled.run(x), ref, getattr(compiled, "tolerance", None) or 1e-3)
            m = time_compiled(compiled, x, args)
            info = compiled.info
            results[fw] = m.median
            row = {"model": graph.name, "batch": args.batch, "framework": fw, "threads": args.threads,
                   "median_ms": m.median, "mean_ms": m.mean, "std_ms": m.std, "min_ms": m.min,
                   "check": check.passed, "max_rel_err": check.max_rel_err, "build_s": build_s,
                   "tuning_s": info.get("tuning_seconds"), "trial_budget": info.get("trial_budget"),
                   "trials_in_db": sum(r["trials"] for r in info.get("tasks", [])) or None,
                   "tasks": info.get("tasks_total"), "tuned_now": info.get("tuned_now"),
                   "target": info.get("target"), "samples_ms": m.samples_ms}
            rows.append(row)
        base = results.get("ios-sequential") or results.get("tvm")
        base_name = "ios-sequential" if "ios-sequential" in results else "tvm"
        print(f"\n{graph.name} batch {args.batch}, {args.threads} threads "
              f"(warmup {args.warmup}, {args.repeat} x {args.number} runs); ratio = median / {base_name}")
        print(f"{'framework':<16}{'median ms':>11}{'std ms':>9}{'ratio':>8}{'check':>7}{'build s':>9}"
              f"{'tuning s':>10}{'trials':>8}{'tasks':>7}")
        for row in rows:
            if row["model"] != graph.name:
                continue
            tun = f"{row['tuning_s']:.1f}" if row["tuning_s"] is not None else "-"
            tr = f"{row['trials_in_db']}" if row["trials_in_db"] else "-"
            tk = f"{row['tasks']}" if row["tasks"] else "-"
            print(f"{row['framework']:<16}{row['median_ms']:>11.2f}{row['std_ms']:>9.2f}"
                  f"{row['median_ms'] / base:>8.2f}{'ok' if row['check'] else 'FAIL':>7}{row['build_s']:>9.1f}"
                  f"{tun:>10}{tr:>8}{tk:>7}")
        for fw, compiled, _ in entries:
            if fw == "tvm-tuned":
                from adapters.tvm import format_task_table

                i = compiled.info
                print(f"\ntvm-tuned tasks ({graph.name}): budget {i['trial_budget']} trials this build "
                      f"({i['trials_per_task']} per task, {i['search_strategy'] or 'no tuning'}, cost model "
                      f"{i['cost_model']}), tuning {i['tuning_seconds']:.1f} s, database {i['database']}")
                print(format_task_table(i["tasks"]))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
