"""The learned cost model against the measured one: optimization time and schedule latency.

Steps, in one run:

1. (``--collect``) collect the operator dataset for ``--collect-models`` (default: the whole
   zoo; excluded from every timing below; skipped for rows already in the dataset);
2. (``--retest N``) the noise floor: N rows of the dataset, drawn at random, measured again now;
   the run-to-run change |again / first - 1| is what no predictor can beat;
3. fit the predictor and print its HELD-OUT error: leave one network out, i.e. for each network
   a model trained on the other networks' rows only, tested on that network's rows;
4. for each of ``--models``: IOS-Both optimization with ``--cost learned`` and with the measured
   cost model (each with an empty, private profile database: cold), wall time and stages
   measured. The learned model used here is fitted on EVERY row of the dataset, the optimized
   network's included (the issue's "dataset collected once, then excluded from the timing");
5. the two schedules and the sequential one timed side by side on the runtime, interleaved
   (A B C A B C ...), every output checked against the oracle.

    PYTHONPATH=. python benchmarks/bench_learned.py --collect --retest 200
    PYTHONPATH=. python benchmarks/bench_learned.py --models inception_v3 --measured-mode composed

Run it on a quiet machine: every figure is a measurement and noise moves all of them.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ios_core import models  # noqa: E402
from ios_core.check import compare  # noqa: E402
from ios_core.cost import make_cost_model  # noqa: E402
from ios_core.measurement.stats import median  # noqa: E402 - the one median
from ios_core.measurement.threads import usable_cores  # noqa: E402
from ios_core.optimizer.optimize import schedule  # noqa: E402
from ios_core.reference import random_input  # noqa: E402
from ios_core.reference import run as oracle  # noqa: E402
from ios_core.runtime import Runtime  # noqa: E402

PAPER = "inception_v3,randwire,nasnet,squeezenet"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=PAPER, help="networks to optimize")
    p.add_argument("--collect", action="store_true", help="collect the dataset first (not timed)")
    p.add_argument("--collect-models", default="all", help="networks to collect ('all': the zoo)")
    p.add_argument("--max-stages", type=int, default=300, help="multi-group stages kept per network when collecting")
    p.add_argument("--retest", type=int, default=0, help="rows of the dataset measured again (the noise floor)")
    p.add_argument("-r", type=int, default=3, help="IOS pruning r (most operators in a group)")
    p.add_argument("-s", type=int, default=8, help="IOS pruning s (most groups in a stage)")
    p.add_argument("--dataset", default="datasets/ops")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--measured-mode", default=None, help="measured cost model mode (default: its default)")
    p.add_argument("--repeat", type=int, default=10, help="samples per schedule when timing them")
    args = p.parse_args(argv)

    from ios_bench.ops import dataset as ds
    from ios_bench.ops.collect import CollectPlan, collect
    from ios_bench.ops.fit import fit, format_report

    threads = args.threads or usable_cores()
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), " ".join(sys.argv), flush=True)
    names = models.names() if args.collect_models == "all" else [m for m in args.collect_models.split(",") if m]
    plan = CollectPlan({m: models.get(m) for m in names}, ["torch"], sorted({1, threads}), [args.batch],
                       max_stages=args.max_stages)
    if args.collect:
        t0 = time.perf_counter()
        counts = collect(plan, ds.Writer(args.dataset), ds.keys(ds.read(args.dataset)), ds.machine_info())
        print(f"collect ({', '.join(names)}): {counts['measured']} stages measured in {time.perf_counter() - t0:.0f} s "
              f"({counts['skipped']} already present)", flush=True)
    if args.retest:
        retest(plan, ds.read(args.dataset), args.retest)
    tmp = Path(tempfile.mkdtemp(prefix="bench-learned-"))
    model_file = tmp / "learned.json"
    print("\nHELD-OUT error (leave one network out: each row below is a model trained WITHOUT that network's rows,"
          " tested on them):", flush=True)
    doc = fit(ds.read(args.dataset), model_file)
    print("\n".join(format_report(doc)), flush=True)
    print("\nOptimization with the learned model fitted on EVERY row (the optimized networks' own rows included; "
          "collected once, not timed):", flush=True)

    rows = []
    for name in [m for m in args.models.split(",") if m]:
        graph = models.get(name).init_weights(0)
        x = random_input(graph, args.batch)
        ref = oracle(graph, x)
        scheds, opt = {"sequential": graph}, {}
        measured_opts = {"threads": threads, "cache": str(tmp / f"{name}-measured.sqlite")}
        if args.measured_mode:
            measured_opts["mode"] = args.measured_mode
        for label, kind, opts in (
                ("learned", "learned", {"model": str(model_file), "threads": threads,
                                        "cache": str(tmp / f"{name}-learned.sqlite")}),
                ("measured", "measured", measured_opts)):
            cm = make_cost_model(kind, **opts)
            t0 = time.perf_counter()
            res = schedule(graph, "both", cm, batch_size=args.batch, max_group_size=args.r, max_num_groups=args.s)
            scheds[label] = res.graph
            opt[label] = (time.perf_counter() - t0, cm.stats())
            print(f"{name}: {label} optimization {opt[label][0]:.1f} s, {res.stats.rounds} search round(s), "
                  f"schedule cost {res.stats.cost_ms:.2f} ms; {opt[label][1]}", flush=True)
        rts = {k: Runtime(s, args.batch, threads=threads) for k, s in scheds.items()}
        checks = {k: compare(rt.run(x), ref).passed for k, rt in rts.items()}
        samples = {k: [] for k in rts}
        for _ in range(args.repeat):  # interleaved, so drift hits every schedule alike
            for k, rt in rts.items():
                samples[k].append(rt.measure(warmup=1, number=1, repeat=1, x=x).median)
        med = {k: median(v) for k, v in samples.items()}
        rows.append((name, opt["learned"][0], opt["measured"][0], med["sequential"], med["learned"], med["measured"],
                     checks))
        print(_line(rows[-1]), flush=True)
    print()
    print(HEADER)
    for row in rows:
        print(_line(row))
    return 0


HEADER = (f"{'network':<14} {'opt s learned':>13} {'opt s measured':>14} {'seq ms':>9} {'learned ms':>10} "
          f"{'measured ms':>11} {'learned/measured':>16}  checks")


def _line(row) -> str:
    name, tl, tm, seq, lm, mm, checks = row
    ok = "ok" if all(checks.values()) else "FAILED " + ",".join(k for k, v in checks.items() if not v)
    return f"{name:<14} {tl:>13.1f} {tm:>14.1f} {seq:>9.2f} {lm:>10.2f} {mm:>11.2f} {lm / mm:>16.3f}  {ok}"


def retest(plan, df, n: int, seed: int = 0) -> None:
    """Measure ``n`` random rows of the dataset again with the collect protocol; print the
    run-to-run change per thread budget (the noise floor of any predictor of these rows)."""
    from ios_bench.ops.collect import candidates
    from ios_core.cost.measured import make_measured_cost_model

    stages = {}
    for name, graph in plan.graphs.items():
        for b in plan.batches:
            for c in candidates(graph, name, b, plan.r, plan.s, plan.max_stages):
                stages.setdefault(c.signature, c.stage)
    rows = [r for r in df.itertuples(index=False) if r.signature in stages and r.provider == "torch"]
    rows = random.Random(seed).sample(rows, min(n, len(rows)))
    change: dict[int, list[float]] = {}
    t0 = time.perf_counter()
    measurers = {}
    for r in rows:
        m = measurers.get(int(r.threads))
        if m is None:
            m = measurers[int(r.threads)] = make_measured_cost_model(
                threads=int(r.threads), cache=False, warmup=plan.warmup, repeat=plan.repeat,
                min_sample_ms=plan.min_sample_ms)
        again = m.measure_stage(stages[r.signature], int(r.batch)).median
        change.setdefault(int(r.threads), []).append(abs(again / r.latency_ms - 1.0))
    every = [x for v in change.values() for x in v]
    print(f"noise floor: {len(rows)} dataset rows measured again ({time.perf_counter() - t0:.0f} s): "
          f"median |again/first - 1| {median(every):.1%} (" + ", ".join(
              f"{t} thread(s) {median(v):.1%} over {len(v)}" for t, v in sorted(change.items())) + ")",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
