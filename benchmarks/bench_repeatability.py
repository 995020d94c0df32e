"""Do verdicts repeat? A/A and A/B pairs of real sweeps, on a quiet machine and beside a co-tenant.

    PYTHONPATH=. python benchmarks/bench_repeatability.py [--ab-rounds auto|N] [--again-after 30] [--out DIR]
        [--protocols paired,sequential] [--cotenant] [--auto] [--rounds 5] [--baseline-tree DIR]
        [--networks squeezenet,resnet18] [--peers ...] [--providers ...]

By default (issue 42's goals) it runs the **paired protocol with ab's defaults** (``--rounds auto``,
``--target-ci 2``, ``--min-change 2``), quiet: per network A/A and A/B, the same A/B pair with 5
pairs (the time reference), and the A/B pair again at least ``--again-after`` minutes (30) after the
first; then it prints the goals: A/A at most 1/10 flagged and at least 9/10 within 3 %; A/B at
least 9/10 flagged as regressions; the A/B pair measured twice agreeing within 3 points in at
least 9/10; the A/B run's time at most 2x that of 5 pairs; and what stopped each cell's pairs.
``--protocols sequential,paired``, ``--cotenant`` and ``--auto`` add the earlier issues' parts.

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
- **paired** (``ios-bench ab``, issue 35), beside the sequential protocol on the same files: per
  network one ``ab`` run of A against A' (a copy of A's file: an A/A pair) and one of A against B,
  quiet and with the co-tenant; at the end (after everything else) the quiet sequential A/B pair and
  the paired A/B run once more, so that "the same A/B pair measured twice" compares two
  measurements the benchmark's whole duration apart.
- ``--auto``: one more quiet sweep of A with ``--rounds auto``: the rounds each cell needed.
- ``--baseline-tree DIR`` (a checkout of the commit before rounds, e.g. ``git worktree add
  /tmp/base a0040e0``): the quick default sweep (``ios-bench run``, what ``make run`` runs) timed
  with this tree and with that one, each with a fresh profile database.

It prints the goals of the repeatability issues with the measured figures, both protocols side by
side (issue 35's table). Run it on a machine
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
PROTOCOLS = ("sequential", "paired")


def save_variants(folder: Path, networks=NETWORKS) -> dict:
    """Graph files of A (the zoo's networks), A' (a copy of A's: an A/A pair for ``ab``, which
    refuses one file against itself) and B (~10 % more work, same names)."""
    import shutil

    from ios_core import models

    out = {"a": [], "a2": [], "b": [], "ratios": {}}
    for name in networks:
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
            if kind == "a":
                copy = folder / "a2" / f"{name}.json"
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, copy)
                shutil.copyfile(path.with_suffix(".npz"), copy.with_suffix(".npz"))
                out["a2"].append(str(copy))
        out["ratios"][name] = {"image_size": best, "macs_ratio": models.get(name, image_size=best).macs() / base}
    return out


def cell_options() -> list[str]:
    """The frameworks and IOS cells of every sweep and ab run (``--peers``, ``--providers``)."""
    return ["--frameworks", PEERS] + (["--schedules", "sequential", "--ios-providers", PROVIDERS] if PROVIDERS
                                      else ["--schedules", "none"])


def sweep(models: list[str], out: Path, rounds: str, extra: list[str] = (), tree: Path = ROOT,
          env: dict | None = None) -> float:
    cmd = [sys.executable, "-m", "ios_bench", "run", "--models", ",".join(models), *cell_options(),
           "--rounds", rounds, "--out", str(out), "--no-report", "--no-progress", *extra]
    t0 = time.monotonic()
    e = {**os.environ, **(env or {}), "PYTHONPATH": str(tree)}
    p = subprocess.run(cmd, cwd=out.parent, env=e, capture_output=True, text=True)
    took = time.monotonic() - t0
    (out.parent / f"{out.name}.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        raise SystemExit(f"sweep {out.name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return took


BURNER = """
import json, os, sys, time
burst, total, log = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
pause = float(sys.argv[4]) if len(sys.argv) > 4 else burst
if len(sys.argv) > 5 and sys.argv[5]:
    os.sched_setaffinity(0, {int(sys.argv[5])})
spans, t_end = [], time.time() + total
while time.time() < t_end:
    t0 = time.time()
    while time.time() - t0 < burst and time.time() < t_end:
        pass
    if log:
        spans.append([t0, time.time()])
        with open(log, "w") as f:
            json.dump(spans, f)
    if pause:
        time.sleep(pause)
"""


class CoTenant:
    """A process burning one core in bursts (``burst`` s on, ``pause`` s off: ``burst`` by default),
    for at most ``limit`` seconds; its bursts are logged to ``log`` (None: not logged), and it is
    pinned to CPU ``cpu`` where given. ``burst=limit, pause=0``: a busy loop; short equal bursts and
    pauses: a co-tenant at 50 % duty (benchmarks/bench_busy.py)."""

    def __init__(self, log: Path | None, burst: float, limit: float, pause: float | None = None,
                 cpu: int | None = None):
        self.log, self.burst, self.limit = log, burst, limit
        self.pause = burst if pause is None else pause
        self.cpu = cpu

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", BURNER, str(self.burst), str(self.limit),
                                      str(self.log or ""), str(self.pause), "" if self.cpu is None else str(self.cpu)])
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def spans(self) -> list[list[float]]:
        if self.log is None:
            return []
        try:
            return json.loads(self.log.read_text())
        except (OSError, ValueError):
            return []


def records(run: Path) -> list[dict]:
    from ios_bench.results import read_records

    return read_records(run)


def aa_figures(a: Path, b: Path) -> dict:
    from ios_bench.reporting.compare import compare_runs

    cmp = compare_runs(a, b)
    return summary_of([(f"{c.model}:{c.framework}|b{c.batch_size}|{c.device}", c) for c in cmp.changes],
                      cmp.threshold)


def ab_runs(a: list[str], b: list[str], out: Path, rounds: str | None) -> float:
    """``ios-bench ab`` of each network's A file against its B file (one run folder per network,
    ``OUT-<network>``), with ``--rounds rounds`` or (None) ab's defaults; returns the seconds they
    took together."""
    took = 0.0
    for fa, fb in zip(a, b):
        folder = out.parent / f"{out.name}-{Path(fa).stem}"
        cmd = [sys.executable, "-m", "ios_bench", "ab", fa, fb, "--other-input", *cell_options(),
               *(["--rounds", rounds] if rounds else []),
               "--out", str(folder), "--no-report", "--no-progress", "--format", "json"]
        t0 = time.monotonic()
        p = subprocess.run(cmd, cwd=out.parent, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                           text=True)
        took += time.monotonic() - t0
        (out.parent / f"{folder.name}.log").write_text(p.stdout + p.stderr)
        if p.returncode != 0:
            raise SystemExit(f"ab run {folder.name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return took


def ab_figures(out: Path, networks) -> dict:
    """The A/A and A/B figures of the paired protocol (``ios_bench.running.ab.paired_comparison`` over the
    networks' ab runs), in :func:`aa_figures`' form; ``within3``: cells whose change is within 3 %."""
    from ios_bench.running.ab import paired_comparison

    changes, thresholds = [], []
    for name in networks:
        cmp = paired_comparison(out.parent / f"{out.name}-{name}")
        changes += [(f"{name}:{c.cell}", c) for c in cmp.changes]
        thresholds.append(cmp.threshold)
    out_ = summary_of(changes, max(thresholds) if thresholds else 0.0)
    out_["pairs"] = {cell: (c.rounds_a, c.stopped_by, c.detectable) for cell, c in changes}
    return out_


def summary_of(changes: list, threshold: float) -> dict:
    """Counts over ``(cell, Change)`` pairs, for either protocol."""
    cs = [c for _, c in changes]
    return {"cells": len(cs), "flagged": sum(c.verdict.startswith(("regression", "improvement")) for c in cs),
            "within5": sum(c.change is not None and abs(c.change) <= 0.05 for c in cs),
            "within3": sum(c.change is not None and abs(c.change) <= 0.03 for c in cs),
            "regressions": sum(c.verdict.startswith("regression") for c in cs),
            "unstable": sum(c.verdict == "unstable" for c in cs), "threshold": threshold,
            "changes": {cell: (c.change, c.ci_low, c.ci_high, c.verdict) for cell, c in changes}}


def agree(first: dict, second: dict, points: float = 0.03) -> tuple[int, int]:
    """Cells whose measured change in two measurements of one A/B pair agree within ``points``."""
    both = [k for k in first["changes"] if k in second["changes"] and first["changes"][k][0] is not None
            and second["changes"][k][0] is not None]
    return sum(abs(first["changes"][k][0] - second["changes"][k][0]) <= points for k in both), len(both)


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
    global PEERS, PROVIDERS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", default="5",
                    help="rounds per cell of the sequential sweeps, and pairs of the time reference [default: 5]")
    ap.add_argument("--ab-rounds", default="default",
                    help="--rounds of the ab runs: 'default' (ab's own, auto), auto or a number [default: default]")
    ap.add_argument("--again-after", type=float, default=30.0, metavar="MIN",
                    help="the A/B pair is measured again at least this many minutes after the first [default: 30]")
    ap.add_argument("--out", default=None, help="work folder [default: a temporary one]")
    ap.add_argument("--burst", type=float, default=4.0, help="co-tenant burst (and pause) length, seconds")
    ap.add_argument("--cotenant", action="store_true", help="also measure beside a CPU-burning co-tenant")
    ap.add_argument("--no-cotenant", action="store_true", help="(the default; kept for earlier command lines)")
    ap.add_argument("--auto", action="store_true", help="also one `run --rounds auto` sweep of A")
    ap.add_argument("--no-auto", action="store_true", help="(the default; kept for earlier command lines)")
    ap.add_argument("--baseline-tree", default=None, help="a checkout of the commit before rounds")
    ap.add_argument("--default-variant", action="append", default=[], metavar="ARGS",
                    help="also time the default sweep of this tree with these extra arguments (quoted; "
                         "repeatable), e.g. --default-variant='--rounds 2'")
    ap.add_argument("--only-default", action="store_true", help="time the default sweeps only (no pairs)")
    ap.add_argument("--protocols", default="paired",
                    help="sequential (separate sweeps + compare), paired (ios-bench ab), or both [default: paired]")
    ap.add_argument("--networks", default=",".join(NETWORKS), help=f"zoo networks [default: {','.join(NETWORKS)}]")
    ap.add_argument("--peers", default=PEERS, help=f"peer frameworks [default: {PEERS}]")
    ap.add_argument("--providers", default=PROVIDERS,
                    help=f"IOS-Sequential's kernel providers, or '' for no IOS cell [default: {PROVIDERS}]")
    ap.add_argument("--no-repeat", action="store_true",
                    help="skip the A/B pair measured again at the end (the agreement goal)")
    args = ap.parse_args(argv)
    PEERS, PROVIDERS = args.peers, args.providers
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if not protocols or set(protocols) - set(PROTOCOLS):
        raise SystemExit(f"--protocols: choose from {', '.join(PROTOCOLS)}")
    networks = [n.strip() for n in args.networks.split(",") if n.strip()]
    seq, paired = "sequential" in protocols, "paired" in protocols
    work = Path(args.out or tempfile.mkdtemp(prefix="bench-repeat-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder: {work}; load average before: {os.getloadavg()}", flush=True)
    if args.only_default:
        return default_times(args, work)
    files = save_variants(work / "models", networks)
    for name, r in files["ratios"].items():
        print(f"B variant of {name}: image {r['image_size']}, {r['macs_ratio']:.3f}x the MACs", flush=True)
    took = {}
    quiet_aa = quiet_ab = p_aa = p_ab = None
    if seq:
        for name, which in (("A1", "a"), ("A2", "a"), ("B1", "b")):
            took[name] = sweep(files[which], work / name, args.rounds)
            print(f"  sweep {name}: {took[name]:.0f} s", flush=True)
        quiet_aa, quiet_ab = aa_figures(work / "A1", work / "A2"), aa_figures(work / "A1", work / "B1")
    ab_rounds = None if args.ab_rounds == "default" else args.ab_rounds
    ab_done = p_ab5 = None
    if paired:
        for name, other in (("AA1", "a2"), ("AB1", "b")):
            took[name] = ab_runs(files["a"], files[other], work / name, ab_rounds)
            print(f"  ab {name} ({len(networks)} run(s)): {took[name]:.0f} s", flush=True)
        ab_done = time.monotonic()
        p_aa, p_ab = ab_figures(work / "AA1", networks), ab_figures(work / "AB1", networks)
        if ab_rounds != args.rounds:  # the time reference: the same A/B pair with a fixed number of pairs
            took["AB5"] = ab_runs(files["a"], files["b"], work / "AB5", args.rounds)
            print(f"  ab AB5 (--rounds {args.rounds}): {took['AB5']:.0f} s", flush=True)
            p_ab5 = ab_figures(work / "AB5", networks)
    co = None
    if args.cotenant and not args.no_cotenant:
        tenant = CoTenant(work / "cotenant.json", args.burst, limit=3600)
        co = {}
        with tenant:
            if seq:
                for name, which in (("A3", "a"), ("A4", "a"), ("B2", "b")):
                    took[name] = sweep(files[which], work / name, args.rounds)
                    print(f"  sweep {name} (co-tenant): {took[name]:.0f} s", flush=True)
            if paired:
                for name, other in (("AA2", "a2"), ("AB2", "b")):
                    took[name] = ab_runs(files["a"], files[other], work / name, ab_rounds)
                    print(f"  ab {name} (co-tenant): {took[name]:.0f} s", flush=True)
        if seq:
            co.update(aa=aa_figures(work / "A3", work / "A4"), ab=aa_figures(work / "A3", work / "B2"),
                      cover=disturbance_coverage([work / n for n in ("A3", "A4", "B2")], tenant.spans()))
        if paired:
            co.update(p_aa=ab_figures(work / "AA2", networks), p_ab=ab_figures(work / "AB2", networks))
    auto = None
    if args.auto and not args.no_auto:
        took["AUTO"] = sweep(files["a"], work / "AUTO", "auto", ["--target-ci", "2", "--time-budget", "600"])
        # (ab --rounds auto is the paired form: pairs added until the paired interval is under --target-ci)
        auto = auto_rounds(work / "AUTO")
    base = None
    if args.baseline_tree:
        base = {"before": default_sweep_time(Path(args.baseline_tree).resolve(), work, "default-before"),
                "after": default_sweep_time(ROOT, work, "default-after")}
        for i, extra in enumerate(args.default_variant):
            base[extra] = default_sweep_time(ROOT, work, f"default-variant{i}", extra.split())

    again = {}
    if not args.no_repeat:  # the same A/B pair once more, the benchmark's duration after the first
        if seq:
            took["A5"] = sweep(files["a"], work / "A5", args.rounds)
            took["B3"] = sweep(files["b"], work / "B3", args.rounds)
            again["seq"] = aa_figures(work / "A5", work / "B3")
        if paired:
            wait = args.again_after * 60 - (time.monotonic() - ab_done)
            if wait > 0:
                print(f"  waiting {wait / 60:.0f} min: the A/B pair again {args.again_after:g} min after the first",
                      flush=True)
                time.sleep(wait)
            took["AB3"] = ab_runs(files["a"], files["b"], work / "AB3", ab_rounds)
            took["AB3 gap"] = time.monotonic() - took["AB3"] - ab_done
            again["paired"] = ab_figures(work / "AB3", networks)

    print(f"\nload average after: {os.getloadavg()}\n")
    cot = co or {}

    def show(figs, key):
        return pct(figs[key], figs["cells"]) if figs else "-"

    if paired:  # issue 42: the paired protocol with ab's defaults
        mode = f"--rounds {ab_rounds}" if ab_rounds else "ab's defaults (--rounds auto, --target-ci 2, --min-change 2)"
        print(f"issue 42 goals, `ios-bench ab` with {mode}, quiet:\n| goal | measured |\n|---|---|")
        print(f"| A/A: at most 1/10 flagged | {show(p_aa, 'flagged')} |")
        print(f"| A/A: at least 9/10 within 3 % | {show(p_aa, 'within3')} |")
        print(f"| A/B (+9-17 % work): at least 9/10 flagged as regressions | {show(p_ab, 'regressions')} |")
        if "paired" in again:
            k, n = agree(p_ab, again["paired"])
            print(f"| the same A/B pair measured twice, {took['AB3 gap'] / 60:.0f} min apart: at least 9/10 within "
                  f"3 points | {pct(k, n)} |")
        if "AB5" in took:
            print(f"| time: at most 2x the time of {args.rounds} pairs | A/B {took['AB1']:.0f} s against "
                  f"{took['AB5']:.0f} s = {took['AB1'] / took['AB5']:.2f}x |")
            print(f"| (the A/B pair with {args.rounds} pairs: flagged as regressions) | {show(p_ab5, 'regressions')} |")
        print()

    print("| goal | sequential + compare: quiet | co-tenant | ab: quiet | co-tenant |\n|---|---|---|---|---|")
    print(f"| A/A: cells flagged (goal: ab at most 1/10) | {show(quiet_aa, 'flagged')} | "
          f"{show(cot.get('aa'), 'flagged')} | {show(p_aa, 'flagged')} | {show(cot.get('p_aa'), 'flagged')} |")
    print(f"| A/A: cells whose two figures agree within 3 % (goal: ab at least 9/10) | {show(quiet_aa, 'within3')} | "
          f"{show(cot.get('aa'), 'within3')} | {show(p_aa, 'within3')} | {show(cot.get('p_aa'), 'within3')} |")
    print(f"| A/A: within 5 % | {show(quiet_aa, 'within5')} | {show(cot.get('aa'), 'within5')} | "
          f"{show(p_aa, 'within5')} | {show(cot.get('p_aa'), 'within5')} |")
    print(f"| A/B (+10 % work): flagged as regression (goal: ab at least 9/10, quiet and co-tenant) | "
          f"{show(quiet_ab, 'regressions')} | {show(cot.get('ab'), 'regressions')} | {show(p_ab, 'regressions')} | "
          f"{show(cot.get('p_ab'), 'regressions')} |")
    if again:
        gap = "the benchmark's duration"
        seq_agree = agree(quiet_ab, again["seq"]) if quiet_ab and "seq" in again else None
        p_agree = agree(p_ab, again["paired"]) if p_ab and "paired" in again else None
        print(f"| the same A/B pair measured twice ({gap} apart): changes agree within 3 points (goal: ab at least "
              f"9/10) | {pct(*seq_agree) if seq_agree else '-'} | - | {pct(*p_agree) if p_agree else '-'} | - |")
    if seq and paired:
        two = took["A1"] + took["B1"]
        print(f"| time for both sides (goal: ab at most 1.1x the two sweeps) | A1 + B1: {two:.0f} s | - | "
              f"AB1: {took['AB1']:.0f} s = {took['AB1'] / two:.2f}x | - |")
    if co and "cover" in co:
        c = co["cover"]
        print(f"| rounds overlapping the co-tenant marked disturbed (goal >= 90%, none pooled) | - | "
              f"{pct(c['marked'], c['overlapping'])} of {c['rounds']} rounds; pooled silently: "
              f"{c['pooled_silently']} |")
    if base:
        print(f"| quick default sweep time vs before (goal <= 1.5x) | {base['after']:.0f} s vs {base['before']:.0f} s "
              f"= {base['after'] / base['before']:.2f}x | - |")
        for extra in args.default_variant:
            print(f"| ... with `{extra}` | {base[extra]:.0f} s = {base[extra] / base['before']:.2f}x | - |")
    thresholds = [(f"{t} {p}", figs["threshold"]) for t, p, figs in (
        ("A/A", "quiet", quiet_aa), ("A/B", "quiet", quiet_ab), ("A/A", "co-tenant", cot.get("aa")),
        ("A/B", "co-tenant", cot.get("ab")), ("ab A/A", "quiet", p_aa), ("ab A/B", "quiet", p_ab),
        ("ab A/A", "co-tenant", cot.get("p_aa")), ("ab A/B", "co-tenant", cot.get("p_ab"))) if figs]
    print("\nnoise threshold measured (ab: its floor, --min-change): "
          + ", ".join(f"{k} {v:.1%}" for k, v in thresholds))
    print("sweep durations (s): " + ", ".join(f"{k} {v:.0f}" for k, v in took.items()))
    for title, figs in (("A/A quiet", quiet_aa), ("A/B quiet", quiet_ab), ("A/A co-tenant", cot.get("aa")),
                        ("A/B co-tenant", cot.get("ab")), ("ab A/A quiet", p_aa), ("ab A/B quiet", p_ab),
                        ("ab A/A co-tenant", cot.get("p_aa")), ("ab A/B co-tenant", cot.get("p_ab")),
                        ("A/B again", again.get("seq")), ("ab A/B again", again.get("paired")),
                        (f"ab A/B, {args.rounds} pairs", p_ab5)):
        if not figs:
            continue
        print(f"\n{title}: unstable {figs['unstable']}")
        for cell, (ch, lo, hi, v) in figs["changes"].items():
            text = f"{ch:+.1%} [{lo:+.1%}, {hi:+.1%}]" if ch is not None else "-"
            n, stop, det = (figs.get("pairs") or {}).get(cell, (None, None, None))
            pairs = (f"  {n} pairs, stopped by {stop or '-'}" + (f", detectable ±{det:.1%}" if det else "")
                     if n is not None else "")
            print(f"  {cell:45s} {text:28s} {v}{pairs}")
    if auto:
        print("\n--rounds auto (target 2%): rounds measured / used / interval half-width per cell")
        for cell, (m, u, h) in auto.items():
            print(f"  {cell:45s} {m} / {u} / {h:.2f}%" if h is not None else f"  {cell:45s} {m} / {u} / -")
    return 0


if __name__ == "__main__":
    sys.exit(main())
