"""Transformers on this CPU (issue 56 item 6): vit_tiny and convnext_tiny at batch 1 and 16, every framework
that runs them and IOS-Sequential and IOS-Both on each kernel provider, in one interleaved sweep.

One sweep (``ios-bench run --models vit_tiny,convnext_tiny --batch 1,16``) measures every cell of a (model,
batch) group round by round in fresh processes, each output checked against the oracle, so the figures
below are the report's own (``ios_bench.reporting.report_tables``: one formatter, the paired intervals).

    python benchmarks/bench_transformers.py                   # vit_tiny, convnext_tiny x batch 1, 16
    python benchmarks/bench_transformers.py --smoke           # vit_tiny, batch 1, one round (a smoke run)
    python benchmarks/bench_transformers.py --from runs/tf    # print the tables of a run already measured
    python benchmarks/bench_transformers.py --dry-run         # the sweep's command, nothing measured

Prints: IOS at its best against the best peer (the report's headline table, with the paired interval);
each framework's latency with its interval per batch; the IOS cells' predicted and measured figures
against sequential; and each IOS schedule's stages (how many, the widest stage's groups and operators).
A framework that cannot run a network is a skipped cell, listed with its reason. Bad input is one line
(exit 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._cli import run_sweep, script_parser  # noqa: E402

DEFAULT_MODELS = "vit_tiny,convnext_tiny"
DEFAULT_BATCH = "1,16"


def sweep_command(args) -> list[str]:
    """The one sweep: the default CPU peers, IOS-Sequential and IOS-Both on every provider."""
    cmd = [sys.executable, "-m", "ios_bench", "run", "--models", args.models, "--batch", args.batch,
           "--schedules", args.schedules, "--ios-providers", args.providers, "--rounds", str(args.rounds),
           "--out", str(args.out), "--no-progress",
           "--report-out", str(Path(args.out).with_name(Path(args.out).name + "-report"))]
    if args.frameworks:
        cmd += ["--frameworks", args.frameworks]
    return cmd


def stage_shape(path: Path) -> tuple[int, int, int] | None:
    """(stages, the widest stage's groups, its operators) of a schedule file (the reference layout:
    blocks of stages of groups of operator names), or None where it cannot be read."""
    try:
        blocks = json.loads(path.read_text()).get("blocks") or []
    except (OSError, ValueError, AttributeError):
        return None
    stages = [st for b in blocks for st in (b.get("stages") or [])]
    if not stages:
        return None
    widest = max(stages, key=lambda st: (len(st), sum(len(g) for g in st)))
    return len(stages), len(widest), sum(len(g) for g in widest)


def stage_rows(df, folder: Path) -> list[list[str]]:
    """One row per IOS cell with a schedule file: its model, batch, schedule, provider and stage shape."""
    from ios_bench.reporting.report_tables import _ok, _row_label

    sub = _ok(df)
    sub = sub[sub["schedule"].notna()] if "schedule" in sub.columns else sub.iloc[0:0]
    rows = []
    for _, r in sub.iterrows():
        f = r.get("schedule_file")
        shape = stage_shape(folder / f) if isinstance(f, str) else None
        rows.append([r["model"], str(r["batch_size"]), _row_label(r), r.get("provider") or "torch",
                     *([str(v) for v in shape] if shape else ["-", "-", "-"])])
    return rows


def print_tables(folder: Path, label: str = "") -> int:
    from ios_bench.reporting.report_tables import Table, failures_table, headline_table, ios_table, metric_table
    from ios_bench.results import load_run

    df = load_run(folder).frame()
    if df.empty:
        print(f"error: {folder}: no cell was recorded", file=sys.stderr)
        return 1
    if label:
        print(f"# {label}\n")
    tables = [headline_table(df)]
    for device in sorted(df["device"].dropna().unique()):
        for bs in sorted(df[df["device"] == device]["batch_size"].dropna().unique()):
            tables += [metric_table(df, device, int(bs), "latency"), ios_table(df, device, int(bs))]
    rows = stage_rows(df, folder)
    if rows:
        tables.append(Table("IOS schedules: their stages", ["model", "batch", "schedule", "provider", "stages",
                                                             "widest stage: groups", "its operators"], rows,
                            "a stage's groups run concurrently; a group's operators one after another"))
    tables.append(failures_table(df))
    for t in tables:
        if t is not None:
            for part in t.parts():
                print(part.md())
    return 0


def main(argv=None) -> int:
    p = script_parser(__doc__)
    p.add_argument("--models", default=DEFAULT_MODELS)
    p.add_argument("--batch", default=DEFAULT_BATCH)
    p.add_argument("--frameworks", default=None, help="[default: every available CPU peer but the slow ones]")
    p.add_argument("--schedules", default="sequential,both")
    p.add_argument("--providers", default="torch,onnxruntime,openvino", help="IOS kernel providers")
    p.add_argument("--rounds", default="3")
    p.add_argument("--out", default=None, help="run folder [default: runs/bench-transformers]")
    p.add_argument("--smoke", action="store_true", help="vit_tiny, batch 1, one round: a smoke run, said so")
    p.add_argument("--from", dest="from_", default=None, metavar="RUN", help="print the tables of a measured run")
    p.add_argument("--dry-run", action="store_true", help="print the sweep's command and stop")
    args = p.parse_args(argv)
    if args.from_:
        folder = Path(args.from_)
        if not (folder / "results.jsonl").is_file():
            p.error(f"--from {args.from_}: not a run folder (no results.jsonl)")
        return print_tables(folder)
    if args.smoke:
        args.models, args.batch, args.rounds = "vit_tiny", "1", "1"
    args.out = Path(args.out or (ROOT / "runs" / ("bench-transformers-smoke" if args.smoke else "bench-transformers")))
    cmd = sweep_command(args)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    if run_sweep(cmd, ROOT) == 2:
        return 2  # the sweep's own one-line error
    label = ("SMOKE RUN (vit_tiny, batch 1, one round per cell): not the issue's measurement"
             if args.smoke else f"{args.models} x batch {args.batch}, {args.rounds} rounds per cell")
    return print_tables(args.out, label)


if __name__ == "__main__":
    sys.exit(main())
