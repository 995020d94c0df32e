"""What a schedule search costs at batch 16 and 32 (issue 55 item 3), with the end of the search (whole
schedules raced end to end, `ios_core.cost.candidates`) bounded by time against the same search without that
bound, side by side in one process: per (model, batch, provider) one search worker's strategies (greedy, then
both), sharing one measured cost model as a sweep's search worker does, in both arms; the arms alternate and
each gets a fresh cost model with the profile database off (every stage timed in both).

    python benchmarks/bench_search_cost.py                          # resnet50 and inception_v3 at batch 16
    python benchmarks/bench_search_cost.py --models squeezenet --batch 1,16 --provider onnxruntime

"untimed" is the race before it was bounded: 7 rounds whatever a call costs, and a candidate's warmup of 5
runs (2 with torch kernels) however long; "time-bounded" is today's (candidates.RACE_S, timing_cpu.WARM_LONG_S).
Printed: each arm's seconds in all and in the race, its rounds, the schedule each strategy kept and its
measured latency, and the ratio of the two arms' seconds. It measures: run it on a quiet machine and say
under what load it ran. Bad input is one line (exit 2).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._cli import script_parser  # noqa: E402

ARMS = ("untimed", "time-bounded")
STRATEGIES = ("greedy", "both")


def _arm(name: str):
    """Set the module constants of ``name``'s race; returns a function that restores them."""
    from ios_core.cost import candidates, timing_cpu

    saved = (candidates.RACE_S, timing_cpu.WARM_LONG_S)
    if name == "untimed":
        candidates.RACE_S, timing_cpu.WARM_LONG_S = None, math.inf

    def restore():
        candidates.RACE_S, timing_cpu.WARM_LONG_S = saved
    return restore


def one_search(model: str, batch: int, provider: str, threads: int) -> dict:
    """One search worker's strategies with one fresh measured cost model, timed."""
    from ios_core.cost import make_cost_model
    from ios_core.models import get
    from ios_core.optimizer import schedule

    graph = get(model)
    cost = make_cost_model("measured", threads=threads, provider=provider, cache=False)
    out, t0 = {"strategies": {}}, time.perf_counter()
    race_s = 0.0
    for strategy in STRATEGIES:
        res = schedule(graph, strategy, cost, batch_size=batch)
        v = res.stats.validation or {}
        race_s += float(v.get("seconds") or 0.0)
        rows = {r["name"]: r for r in v.get("candidates", [])}
        kept = v.get("kept", "schedule")
        out["strategies"][strategy] = {"kept": kept, "measured_ms": rows.get(kept, {}).get("measured_ms"),
                                       "rounds": v.get("rounds", v.get("samples"))}
    out["seconds"], out["race_seconds"] = time.perf_counter() - t0, race_s
    return out


def main(argv=None) -> int:
    p = script_parser(__doc__)
    p.add_argument("--models", default="resnet50,inception_v3", help="zoo models, comma-separated")
    p.add_argument("--batch", default="16", help="batch sizes, comma-separated (positive integers)")
    p.add_argument("--provider", default="torch", choices=("torch", "onnxruntime", "openvino"),
                   help="the IOS kernel provider the stages and candidates are timed with")
    p.add_argument("--threads", type=int, default=None, help="thread budget (default: the cores available)")
    args = p.parse_args(argv)
    import os

    from ios_core.models import names

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in names()]
    if not models or unknown:
        p.error(f"--models: unknown {', '.join(unknown) or '(none given)'} (ios-bench list models)")
    try:
        batches = [int(b) for b in args.batch.split(",")]
        if not batches or min(batches) < 1:
            raise ValueError
    except ValueError:
        p.error(f"--batch: positive integers, comma-separated, not {args.batch!r}")
    threads = args.threads or len(os.sched_getaffinity(0))
    if threads < 1 or threads > len(os.sched_getaffinity(0)):
        p.error(f"--threads: 1 to {len(os.sched_getaffinity(0))}, not {threads}")
    print("| model | batch | arm | seconds | race s | " + " | ".join(f"{s}: kept, ms, rounds" for s in STRATEGIES)
          + " |")
    print("|---|---:|---|---:|---:|" + "---|" * len(STRATEGIES))
    ratios = []
    for model in models:
        for batch in batches:
            got = {}
            # the arms alternate which goes first from one (model, batch) to the next
            order = ARMS if len(ratios) % 2 == 0 else ARMS[::-1]
            for arm in order:
                restore = _arm(arm)
                try:
                    got[arm] = one_search(model, batch, args.provider, threads)
                finally:
                    restore()
            for arm in ARMS:
                g = got[arm]
                cols = [f"{v['kept']}, {v['measured_ms']:.1f}, {v['rounds']}" if v["measured_ms"] is not None
                        else f"{v['kept']}, -, -" for v in g["strategies"].values()]
                print(f"| {model} | {batch} | {arm} | {g['seconds']:.1f} | {g['race_seconds']:.1f} | "
                      + " | ".join(cols) + " |", flush=True)
            ratios.append(got["time-bounded"]["seconds"] / got["untimed"]["seconds"])
            print(f"| {model} | {batch} | time-bounded / untimed | {ratios[-1]:.2f}x | | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
