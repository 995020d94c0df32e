"""Do verdicts repeat? A/A and A/B pairs of real sweeps, on a quiet machine and beside a co-tenant.

    PYTHONPATH=. python benchmarks/bench_repeatability.py [--rounds 3] [--out DIR] [--baseline-tree DIR]

What it runs (each sweep is a real ``ios-bench run`` in its own process):

- **A**: two networks (squeezenet, resnet18 from the zoo, saved as graph files with their weights)
  under three peers (onnxruntime, openvino, torch) and IOS-Sequential on two kernel providers
  (onnxruntime, openvino): 10 cells.
- **B**: the same networks under the same names with about 10 % more real work: the input image
  is enlarged until the network's multiply-accumulates grow by the closest to 10 % (the benchmark
  prints the ratio it got).
- quiet: A, A', B; with a co-tenant: A, A', B again while a CPU-burning process (started and
  stopped here; bursts of ``--burst`` seconds on one core, then as long idle, bounded) runs beside.
  The co-tenant's bursts are logged, and every round whose timed window overlaps one must be
  marked disturbed.
- ``--auto``: one more quiet sweep of A with ``--rounds auto``: the rounds each cell needed.
- ``--baseline-tree DIR`` (a checkout of the commit before rounds, e.g. ``git worktree add
  /tmp/base a0040e0``): the quick default sweep (``ios-bench run``, what ``make run`` runs) timed
  with this tree and with that one, each with a fresh profile database.

It prints the goals of the repeatability issue with the measured figures. Run it on a machine
where nothing else runs (it checks the load average before it starts and says so).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PEERS = "onnxruntime,openvino,torch"
PROVIDERS = "onnxruntime,openvino"
NETWORKS = ("squeezenet", "resnet18")


def save_variants(folder: Path) -> dict:
    """Graph files of A (the zoo's networks) and B (~10 % more work, same names)."""
    from ios_core import models

    out = {"a": [], "b": [], "ratios": {}}
    for name in NETWORKS:
        g = models.get(name)
        base = g.macs()
        size = g.input_shape[1]
        best = min(range(size + 1, int(size * 1.2)), key=lambda s: abs(models.get(name, image_size=s).macs() / base
                                                                        - 1.10))
        for kind, graph in (("a", g), ("b", models.get(name, image_size=best))):
            graph.init_weights(0)
            path = folder / kind / f"{name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            graph.save(path)
            out[kind].append(str(path))
        out["ratios"][name] = {"image_size": best, "macs_ratio": models.get(name, image_size=best).macs() / base}
    return out


def sweep(models: list[str], out: Path, rounds: str, extra: list[str] = (), tree: Path = ROOT,
          env: dict | None = None) -> float:
    cmd = [sys.executable, "-m", "ios_bench", "run", "--models", ",".join(models), "--frameworks", PEERS,
           "--schedules", "sequential", "--ios-providers", PROVIDERS, "--rounds", rounds, "--out", str(out),
           "--no-report", "--no-progress", *extra]
    t0 = time.monotonic()
    e = {**os.environ, **(env or {}), "PYTHONPATH": str(tree)}
    p = subprocess.run(cmd, cwd=out.parent, env=e, capture_output=True, text=True)
    took = time.monotonic() - t0
    (out.parent / f"{out.name}.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        raise SystemExit(f"sweep {out.name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return took


BURNER = """
import json, sys, time
burst, total, log = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
spans, t_end = [], time.time() + total
while time.time() < t_end:
    t0 = time.time()
    while time.time() - t0 < burst:
        pass
    spans.append([t0, time.time()])
    with open(log, "w") as f:
        json.dump(spans, f)
    time.sleep(burst)
"""


class CoTenant:
    """A process burning one core in bursts (``burst`` s on, ``burst`` s off), for at most
    ``limit`` seconds; its bursts are logged to ``log``."""

    def __init__(self, log: Path, burst: float, limit: float):
        self.log, self.burst, self.limit = log, burst, limit

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", BURNER, str(self.burst), str(self.limit), str(self.log)])
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def spans(self) -> list[list[float]]:
        try:
            return json.loads(self.log.read_text())
        except (OSError, ValueError):
            return []


def records(run: Path) -> list[dict]:
    from ios_bench.results import read_records

    return read_records(run)


def aa_figures(a: Path, b: Path) -> dict:
    from ios_bench.compare import compare_runs

    cmp = compare_runs(a, b)
    n = len(cmp.changes)
    flagged = [c for c in cmp.changes if c.verdict.startswith(("regression", "improvement"))]
    within = [c for c in cmp.changes if c.median_a and c.median_b and abs(c.median_b / c.median_a - 1) <= 0.05]
    regress = [c for c in cmp.changes if c.verdict.startswith("regression")]
    unstable = [c for c in cmp.changes if c.verdict == "unstable"]
    return {"cells": n, "flagged": len(flagged), "within5": len(within), "regressions": len(regress),
            "unstable": len(unstable), "threshold": cmp.threshold,
            "changes": {c.cell: (c.change, c.ci_low, c.ci_high, c.verdict) for c in cmp.changes}}


def disturbance_coverage(runs: list[Path], spans: list[list[float]]) -> dict:
    """Rounds whose timed window overlaps a co-tenant burst, and how many were marked disturbed;
    and that no disturbed round was pooled into a figure."""
    overlap = marked = pooled = total = 0
    for run in runs:
        for rec in records(run):
            used = 0
            for r in rec.get("rounds") or []:
                f = r.get("interference") or {}
                if r.get("status") != "ok" or "start_unix" not in f:
                    continue
                total += 1
                hit = any(s0 < f["end_unix"] and f["start_unix"] < s1 for s0, s1 in spans)
                if hit:
                    overlap += 1
                    marked += bool(r.get("disturbed"))
                used += not r.get("disturbed")
            if rec.get("rounds_used") is not None and rec["rounds_used"] != used and rec.get("rounds_used") != 0:
                pooled += 1
            if rec.get("rounds_used") == 0 and "disturbed" not in (rec.get("unstable") or ""):
                pooled += 1
    return {"rounds": total, "overlapping": overlap, "marked": marked, "pooled_silently": pooled}


def auto_rounds(run: Path) -> dict:
    return {r["cell"]: (r.get("rounds_measured"), r.get("rounds_used"), r.get("ci_half_pct"))
            for r in records(run)}


def default_sweep_time(tree: Path, work: Path, name: str, extra: list[str] = ()) -> float:
    out = work / name
    env = {**os.environ, "PYTHONPATH": str(tree), "IOS_BENCH_CACHE": str(work / f"{name}-profiles.sqlite")}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "ios_bench", "run", "--out", str(out), "--no-progress",
                        "--report-out", str(work / f"{name}-report"), *extra], cwd=work, env=env,
                       capture_output=True, text=True)
    took = time.monotonic() - t0
    (work / f"{name}.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        raise SystemExit(f"default sweep with {tree} failed:\n{p.stderr[-2000:]}")
    return took


def default_times(args, work: Path) -> int:
    """``--only-default``: the default sweep of the baseline tree, of this tree, and of its variants."""
    if not args.baseline_tree:
        raise SystemExit("--only-default needs --baseline-tree")
    before = default_sweep_time(Path(args.baseline_tree).resolve(), work, "default-before")
    print(f"default sweep before: {before:.0f} s", flush=True)
    for i, extra in enumerate(["", *args.default_variant]):
        took = default_sweep_time(ROOT, work, f"default-variant{i}", extra.split())
        print(f"default sweep now{f' with {extra}' if extra else ''}: {took:.0f} s = {took / before:.2f}x",
              flush=True)
    print(f"load average after: {os.getloadavg()}")
    return 0


def pct(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.0%})" if n else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", default="5", help="rounds per cell of the pairs [default: 5]")
    ap.add_argument("--out", default=None, help="work folder [default: a temporary one]")
    ap.add_argument("--burst", type=float, default=4.0, help="co-tenant burst (and pause) length, seconds")
    ap.add_argument("--no-cotenant", action="store_true")
    ap.add_argument("--no-auto", action="store_true")
    ap.add_argument("--baseline-tree", default=None, help="a checkout of the commit before rounds")
    ap.add_argument("--default-variant", action="append", default=[], metavar="ARGS",
                    help="also time the default sweep of this tree with these extra arguments (quoted; "
                         "repeatable), e.g. --default-variant='--rounds 2'")
    ap.add_argument("--only-default", action="store_true", help="time the default sweeps only (no pairs)")
    args = ap.parse_args(argv)
    work = Path(args.out or tempfile.mkdtemp(prefix="bench-repeat-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder: {work}; load average before: {os.getloadavg()}", flush=True)
    if args.only_default:
        return default_times(args, work)
    files = save_variants(work / "models")
    for name, r in files["ratios"].items():
        print(f"B variant of {name}: image {r['image_size']}, {r['macs_ratio']:.3f}x the MACs", flush=True)
    took = {}
    for name, which in (("A1", "a"), ("A2", "a"), ("B1", "b")):
        took[name] = sweep(files[which], work / name, args.rounds)
        print(f"  sweep {name}: {took[name]:.0f} s", flush=True)
    quiet_aa, quiet_ab = aa_figures(work / "A1", work / "A2"), aa_figures(work / "A1", work / "B1")
    co = None
    if not args.no_cotenant:
        tenant = CoTenant(work / "cotenant.json", args.burst, limit=3600)
        with tenant:
            for name, which in (("A3", "a"), ("A4", "a"), ("B2", "b")):
                took[name] = sweep(files[which], work / name, args.rounds)
                print(f"  sweep {name} (co-tenant): {took[name]:.0f} s", flush=True)
        co = {"aa": aa_figures(work / "A3", work / "A4"), "ab": aa_figures(work / "A3", work / "B2"),
              "cover": disturbance_coverage([work / n for n in ("A3", "A4", "B2")], tenant.spans())}
    auto = None
    if not args.no_auto:
        took["AUTO"] = sweep(files["a"], work / "AUTO", "auto", ["--target-ci", "2", "--time-budget", "600"])
        auto = auto_rounds(work / "AUTO")
    base = None
    if args.baseline_tree:
        base = {"before": default_sweep_time(Path(args.baseline_tree).resolve(), work, "default-before"),
                "after": default_sweep_time(ROOT, work, "default-after")}
        for i, extra in enumerate(args.default_variant):
            base[extra] = default_sweep_time(ROOT, work, f"default-variant{i}", extra.split())

    print(f"\nload average after: {os.getloadavg()}\n")
    print("| goal | quiet | with co-tenant |\n|---|---|---|")
    cot = co or {}
    print(f"| A/A: cells compare flags (goal <= 5%) | {pct(quiet_aa['flagged'], quiet_aa['cells'])} | "
          f"{pct(cot['aa']['flagged'], cot['aa']['cells']) if co else '-'} |")
    print(f"| A/A: figures within 5% (goal >= 90% / 80%) | {pct(quiet_aa['within5'], quiet_aa['cells'])} | "
          f"{pct(cot['aa']['within5'], cot['aa']['cells']) if co else '-'} |")
    print(f"| A/B (+10% work): flagged as regression (goal >= 90% / 80%) | "
          f"{pct(quiet_ab['regressions'], quiet_ab['cells'])} | "
          f"{pct(cot['ab']['regressions'], cot['ab']['cells']) if co else '-'} |")
    if co:
        c = co["cover"]
        print(f"| rounds overlapping the co-tenant marked disturbed (goal >= 90%, none pooled) | - | "
              f"{pct(c['marked'], c['overlapping'])} of {c['rounds']} rounds; pooled silently: "
              f"{c['pooled_silently']} |")
    if base:
        print(f"| quick default sweep time vs before (goal <= 1.5x) | {base['after']:.0f} s vs {base['before']:.0f} s "
              f"= {base['after'] / base['before']:.2f}x | - |")
        for extra in args.default_variant:
            print(f"| ... with `{extra}` | {base[extra]:.0f} s = {base[extra] / base['before']:.2f}x | - |")
    print(f"\nnoise threshold measured: A/A quiet {quiet_aa['threshold']:.1%}, A/B quiet {quiet_ab['threshold']:.1%}"
          + (f", A/A co-tenant {cot['aa']['threshold']:.1%}, A/B co-tenant {cot['ab']['threshold']:.1%}" if co else ""))
    print("sweep durations (s): " + ", ".join(f"{k} {v:.0f}" for k, v in took.items()))
    for title, figs in (("A/A quiet", quiet_aa), ("A/B quiet", quiet_ab)) + (
            (("A/A co-tenant", cot["aa"]), ("A/B co-tenant", cot["ab"])) if co else ()):
        print(f"\n{title}: unstable {figs['unstable']}")
        for cell, (ch, lo, hi, v) in figs["changes"].items():
            text = f"{ch:+.1%} [{lo:+.1%}, {hi:+.1%}]" if ch is not None else "-"
            print(f"  {cell:45s} {text:28s} {v}")
    if auto:
        print("\n--rounds auto (target 2%): rounds measured / used / interval half-width per cell")
        for cell, (m, u, h) in auto.items():
            print(f"  {cell:45s} {m} / {u} / {h:.2f}%" if h is not None else f"  {cell:45s} {m} / {u} / -")
    return 0


if __name__ == "__main__":
    sys.exit(main())
