"""Precision on this CPU (issue 46 item 5): each framework's bf16 and int8 latency as a ratio to its own
fp32, their errors against the fp32 oracle, and IOS at its best against the best peer at each precision.

One sweep (``ios-bench run --precision fp32,bf16,int8``) measures every precision of a (model, batch) side
by side: the cells of one (model, batch, device) group are interleaved round by round, so a framework's
fp32 and bf16 cells share the machine's state, and each ratio comes with the paired interval of the two
cells' rounds of the same passes (``ios_bench.reporting.precision_tables``, the report's own tables and
formatter). A framework that does not offer a precision is a skipped cell, listed once with its reason.

    python benchmarks/bench_precision.py                      # squeezenet, resnet50, inception_v3 x batch 1, 16
    python benchmarks/bench_precision.py --smoke              # squeezenet, batch 1, one round (a smoke run)
    python benchmarks/bench_precision.py --from runs/prec     # print the tables of a run already measured
    python benchmarks/bench_precision.py --dry-run            # the sweep's command, nothing measured

Prints, per precision: the report's "IOS at its best against the best peer" and "Speedup over its own
fp32" tables, the combinations not given, and the fastest reduced-precision peer against the fastest
fp32 peer per (model, batch). Bad input is one line (exit 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._cli import run_sweep, script_parser  # noqa: E402

DEFAULT_MODELS = "squeezenet,resnet50,inception_v3"
DEFAULT_BATCH = "1,16"
DEFAULT_PRECISIONS = "fp32,bf16,int8"


def default_frameworks() -> str:
    """Every CPU peer but the slow ones (``planning.plan.SLOW_FRAMEWORKS``): the default sweep's, and the
    engines it leaves out because another engine of the same framework runs there already (TensorFlow
    Lite): here they are the point, TensorFlow's int8 being TFLite's, measured against TFLite's fp32."""
    import adapters
    from ios_bench.planning.plan import IOS_ADAPTER, SLOW_FRAMEWORKS

    return ",".join(n for n in adapters.names()
                    if n != IOS_ADAPTER and n not in SLOW_FRAMEWORKS and "cpu" in adapters.get(n).devices)


def sweep_command(args) -> list[str]:
    """The one sweep that measures every precision side by side."""
    cmd = [sys.executable, "-m", "ios_bench", "run", "--models", args.models, "--batch", args.batch,
           "--precision", args.precisions, "--rounds", str(args.rounds), "--out", str(args.out), "--no-progress",
           "--report-out", str(Path(args.out).with_name(Path(args.out).name + "-report")),
           "--frameworks", args.frameworks or default_frameworks()]
    if args.schedules:
        cmd += ["--schedules", args.schedules]
    return cmd


def fastest_ratio_rows(df) -> list[list[str]]:
    """Per (device, model, batch) and reduced precision: its fastest correct peer against the fastest
    correct fp32 peer (their figures and the ratio; no pairing: two different frameworks may win)."""
    from ios_bench.reporting.numbers import fmt
    from ios_bench.reporting.precision_tables import FP32, precision_of, reduced
    from ios_bench.reporting.report_tables import _correct, _label

    ok = _correct(df)
    ok = ok[~ok["framework"].str.startswith("ios-")]
    prec = precision_of(ok)
    rows = []
    for (device, model, bs), sub in ok.groupby(["device", "model", "batch_size"], sort=False):
        p_sub = prec[sub.index]
        base = sub[p_sub == FP32]
        if base.empty:
            continue
        top = base.loc[base["median_ms"].idxmin()]
        for p in reduced(df):
            other = sub[p_sub == p]
            if other.empty:
                continue
            best = other.loc[other["median_ms"].idxmin()]
            rows.append([str(device), model, str(bs), p, f"{_label(best['framework'])} {fmt(best['median_ms'])}",
                         f"{_label(top['framework'])} {fmt(top['median_ms'])}",
                         f"{top['median_ms'] / best['median_ms']:.2f}x"])
    return rows


def print_tables(folder: Path, label: str = "", per_cell: bool = False) -> int:
    from ios_bench.reporting.precision_tables import sections
    from ios_bench.reporting.report_tables import Table
    from ios_bench.results import load_run

    run = load_run(folder)
    df = run.frame()
    if df.empty:
        print(f"error: {folder}: no cell was recorded", file=sys.stderr)
        return 1
    if label:
        print(f"# {label}\n")
    secs = sections(df)
    if not secs:
        print("(only fp32 was measured: no precision tables)")
    for _, items in secs:
        for it in items:
            if isinstance(it, Table):
                for part in it.parts():
                    print(part.md())
            else:
                print(it[1] + "\n")
    rows = fastest_ratio_rows(df)
    if rows:
        print(Table("Fastest reduced-precision peer against the fastest fp32 peer",
                    ["device", "model", "batch", "precision", "fastest at it (ms)", "fastest fp32 (ms)",
                     "fp32 / it"], rows,
                    "two cells that may be different frameworks: a plain ratio of figures, no paired interval").md())
    if (folder / "env.json").is_file():  # the sweep's duration against its estimate, replayed from the records
        from ios_bench.planning.estimate import replay_lines

        print("\n".join(["", "Duration against the estimate (replayed from the run's records; nothing measured)",
                          *replay_lines(folder, per_cell=per_cell)]))
    return 0


def main(argv=None) -> int:
    p = script_parser(__doc__)
    p.add_argument("--models", default=DEFAULT_MODELS)
    p.add_argument("--batch", default=DEFAULT_BATCH)
    p.add_argument("--precisions", default=DEFAULT_PRECISIONS, help="comma list [default: fp32,bf16,int8]")
    p.add_argument("--frameworks", default=None,
                   help="[default: every CPU peer but the slow ones, tflite included (the default sweep leaves it "
                        "out): a peer not available here is a skipped cell with its reason]")
    p.add_argument("--schedules", default="both", help="IOS schedules [default: both, IOS at its best]")
    p.add_argument("--rounds", default="3")
    p.add_argument("--out", default=None, help="run folder [default: runs/bench-precision]")
    p.add_argument("--smoke", action="store_true", help="squeezenet, batch 1, one round: a smoke run, said so")
    p.add_argument("--from", dest="from_", default=None, metavar="RUN", help="print the tables of a measured run")
    p.add_argument("--estimate-per-cell", action="store_true",
                   help="with --from: each cell's round and first build, estimated against measured")
    p.add_argument("--dry-run", action="store_true", help="print the sweep's command and stop")
    args = p.parse_args(argv)
    if args.from_:
        folder = Path(args.from_)
        if not (folder / "results.jsonl").is_file():
            p.error(f"--from {args.from_}: not a run folder (no results.jsonl)")
        return print_tables(folder, per_cell=args.estimate_per_cell)
    if "fp32" not in [s.strip() for s in args.precisions.split(",")]:
        p.error("--precisions must include fp32 (every ratio is to a framework's own fp32)")
    if args.smoke:
        args.models, args.batch, args.rounds = "squeezenet", "1", "1"
    args.out = Path(args.out or (ROOT / "runs" / ("bench-precision-smoke" if args.smoke else "bench-precision")))
    cmd = sweep_command(args)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    if run_sweep(cmd, ROOT) == 2:
        return 2  # the sweep's own one-line error
    label = ("SMOKE RUN (squeezenet, batch 1, one round per cell): not the issue's measurement"
             if args.smoke else f"{args.models} x batch {args.batch}, {args.rounds} rounds per cell")
    return print_tables(args.out, label)


if __name__ == "__main__":
    sys.exit(main())
