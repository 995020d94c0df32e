"""The learned cost model against the measured one: optimization time and schedule latency.

Steps, in one run:

1. (``--collect``) collect the operator dataset for ``--collect-models`` (excluded from every
   timing below; skipped for rows already in the dataset);
2. fit the predictor, printing its held-out error per network (leave one network out);
3. for each network: IOS-Both optimization with ``--cost learned`` and with the measured cost
   model (each with an empty, private profile database: cold), wall time and stages measured;
4. the two schedules and the sequential one timed side by side on the runtime, interleaved
   (A B C A B C ...), every output checked against the oracle.

    PYTHONPATH=. python benchmarks/bench_learned.py --collect
    PYTHONPATH=. python benchmarks/bench_learned.py --models inception_v3 --measured-mode composed

Run it on a quiet machine: every figure is a measurement and noise moves all of them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ios_core import models, optimize  # noqa: E402
from ios_core.check import compare  # noqa: E402
from ios_core.cost import make_cost_model  # noqa: E402
from ios_core.reference import random_input  # noqa: E402
from ios_core.reference import run as oracle  # noqa: E402
from ios_core.runtime import Runtime  # noqa: E402
from ios_core.threads import usable_cores  # noqa: E402

PAPER = "inception_v3,randwire,nasnet,squeezenet"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=PAPER, help="networks to optimize")
    p.add_argument("--collect", action="store_true", help="collect the dataset first (not timed)")
    p.add_argument("--collect-models", default=PAPER + ",resnet50,vgg11,alexnet,resnet18")
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
    if args.collect:
        names = [m for m in args.collect_models.split(",") if m]
        plan = CollectPlan({m: models.get(m) for m in names}, ["torch"], sorted({1, threads}), [args.batch])
        t0 = time.perf_counter()
        counts = collect(plan, ds.Writer(args.dataset), ds.keys(ds.read(args.dataset)), ds.machine_info())
        print(f"collect: {counts['measured']} stages measured in {time.perf_counter() - t0:.0f} s "
              f"({counts['skipped']} already present)", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-learned-"))
    model_file = tmp / "learned.json"
    doc = fit(ds.read(args.dataset), model_file)
    print("\n".join(format_report(doc)), flush=True)

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
            scheds[label] = optimize(graph, "both", cm, batch_size=args.batch)
            opt[label] = (time.perf_counter() - t0, cm.stats())
            st = opt[label][1]
            print(f"{name}: {label} optimization {opt[label][0]:.1f} s; {st}", flush=True)
        rts = {k: Runtime(s, args.batch, threads=threads) for k, s in scheds.items()}
        checks = {k: compare(rt.run(x), ref).passed for k, rt in rts.items()}
        samples = {k: [] for k in rts}
        for _ in range(args.repeat):  # interleaved, so drift hits every schedule alike
            for k, rt in rts.items():
                samples[k].append(rt.measure(warmup=1, number=1, repeat=1, x=x).median)
        med = {k: statistics.median(v) for k, v in samples.items()}
        rows.append((name, opt["learned"][0], opt["measured"][0], med["sequential"], med["learned"], med["measured"],
                     checks))
    print()
    print(f"{'network':<14} {'opt s learned':>13} {'opt s measured':>14} {'seq ms':>9} {'learned ms':>10} "
          f"{'measured ms':>11} {'learned/measured':>16}  checks")
    for name, tl, tm, seq, lm, mm, checks in rows:
        ok = "ok" if all(checks.values()) else "FAILED " + ",".join(k for k, v in checks.items() if not v)
        print(f"{name:<14} {tl:>13.1f} {tm:>14.1f} {seq:>9.2f} {lm:>10.2f} {mm:>11.2f} {lm / mm:>16.3f}  {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
