"""Verdicts on a machine that is never quiet (issue 48): the A/A/B protocol of bench_repeatability.py
with ``ios-bench ab``, quiet and beside a co-tenant this script starts itself.

    PYTHONPATH=. python benchmarks/bench_busy.py [--loads quiet,busy,duty50] [--cells NET:FW,...] [--quick]
        [--ab-rounds default|auto|N] [--cpu N] [--period 0.1] [--out DIR] [--estimate-only] [--from DIR]

Per load (``quiet``: nothing started; ``busy``: a Python busy loop pinned to one CPU, ``--cpu``, the
last by default; ``duty50``: the same loop at 50 % duty, ``--period`` seconds per on/off cycle, short
enough that every round's window sees about half a core of it), and per network: one ``ab`` run of A
against A' (a copy of A's file: an A/A pair) and one of A against B (the same network with about
10 % more multiply-adds), the files and runs of bench_repeatability.py (:func:`save_variants`,
:func:`ab_runs`, :func:`ab_figures`, its :class:`CoTenant`). It prints, per load, the counts of
today's quiet run (docs/results/repeatability/2026-11-27-paired.txt) and issue 48's: A/A cells
flagged, A/B cells flagged as regressions and each miss with the change it could have detected, ab
cells with a verdict (not ``unstable``) and those labelled "under load", the rounds disturbed by
other processes' CPU time that name them (and the co-tenant), the rounds disturbed by the machine's
own signs (the canary, slowed samples), and the steady load the records state. ``--from DIR``
prints the tables of a work folder measured before (each load's ``LOAD.json``: its seconds,
co-tenant pid and networks).

The cells: ``--cells squeezenet:onnxruntime,resnet18:ios-sequential[openvino]`` (a peer framework, or
``ios-sequential[PROVIDER]``), by default bench_repeatability's 10 (two networks, three peers and
IOS-Sequential on two providers). ``--quick``: squeezenet under onnxruntime and
IOS-Sequential[onnxruntime], 5 pairs per cell. The duration is estimated before anything runs
(``--estimate-only`` stops there). Nothing of the machine is stopped or niced; its co-tenant is
stopped when a load's runs end (and when this script is interrupted).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_repeatability as rep  # noqa: E402 - the protocol's files, runs and co-tenant

LOADS = ("quiet", "busy", "duty50")
QUICK_CELLS = "squeezenet:onnxruntime,squeezenet:ios-sequential[onnxruntime]"
# from the quiet run of 2026-11-27 (docs/results/repeatability/2026-11-27-paired.txt, 2-core VM):
# AB5, 10 cells x 5 pairs, took 165 s (3.3 s per pair of a cell); AB1, ab's defaults, 307 s (10 pairs each)
SECONDS_PER_PAIR = 3.3
SECONDS_PER_RUN = 15.0  # an ab run's own start: probes, reference outputs
LOAD_FACTOR = {"quiet": 1.0, "busy": 1.8, "duty50": 1.5}  # one core of two taken (half of one), re-runs


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_cells(text: str) -> dict[str, dict[str, list[str]]]:
    """``NET:FW,...`` -> ``{net: {"peers": [...], "providers": [...]}}`` (bad input: one line, exit 2)."""
    import adapters
    from ios_core import models

    out: dict[str, dict[str, list[str]]] = {}
    for item in [c.strip() for c in text.split(",") if c.strip()]:
        net, _, fw = item.partition(":")
        if not fw:
            fail(f"--cells: {item!r} is not NETWORK:FRAMEWORK (e.g. squeezenet:onnxruntime)")
        if net not in models.names():
            fail(f"--cells: unknown network {net!r} (choose from: {', '.join(models.names())})")
        cell = out.setdefault(net, {"peers": [], "providers": []})
        if fw.startswith("ios-sequential[") and fw.endswith("]"):
            provider = fw[len("ios-sequential["):-1]
            if provider not in ("onnxruntime", "openvino", "torch"):
                fail(f"--cells: unknown IOS provider {provider!r} in {item!r} (onnxruntime, openvino, torch)")
            cell["providers"].append(provider)
        elif fw in adapters.names() and fw != "ios":
            cell["peers"].append(fw)
        else:
            fail(f"--cells: unknown framework {fw!r} in {item!r} (a peer: "
                 f"{', '.join(n for n in adapters.names() if n != 'ios')}; or ios-sequential[PROVIDER])")
    if not out:
        fail("--cells: no cell given")
    return out


def default_cells() -> str:
    return ",".join(f"{net}:{fw}" for net in rep.NETWORKS for fw in
                    [*rep.PEERS.split(","), *(f"ios-sequential[{p}]" for p in rep.PROVIDERS.split(","))])


def estimate(cells: dict, loads: list[str], ab_rounds: str | None) -> float:
    """Seconds the runs will take, roughly (see :data:`SECONDS_PER_PAIR`)."""
    from ios_bench.running.ab import MAX_AUTO_PAIRS

    pairs = MAX_AUTO_PAIRS if ab_rounds in (None, "auto") else int(ab_rounds)
    n_cells = sum(len(c["peers"]) + len(c["providers"]) for c in cells.values())
    one = 2 * (len(cells) * SECONDS_PER_RUN + n_cells * pairs * SECONDS_PER_PAIR)  # A/A and A/B
    return sum(one * LOAD_FACTOR[load] for load in loads)


def run_load(load: str, cells: dict, files: dict, work: Path, ab_rounds: str | None, args) -> dict:
    """The A/A and A/B ab runs of every network under ``load``; their figures."""
    from ios_core.measurement.interference import machine_now, quiet_verdict

    tenant = None
    if load == "busy":
        tenant = rep.CoTenant(None, burst=args.limit, limit=args.limit, pause=0.0, cpu=args.cpu)
    elif load == "duty50":
        tenant = rep.CoTenant(None, burst=args.period / 2, limit=args.limit, pause=args.period / 2, cpu=args.cpu)
    t0 = time.monotonic()
    if tenant is not None:
        tenant.__enter__()
    try:
        time.sleep(1.0 if tenant else 0.0)
        print(f"[{load}] " + (f"co-tenant pid {tenant.proc.pid} on CPU {args.cpu}; " if tenant else "")
              + quiet_verdict(machine_now(1.0, exclude={os.getpid()})), flush=True)
        nets = list(cells)
        for name, other in (("AA", "a2"), ("AB", "b")):
            for i, net in enumerate(nets):
                rep.PEERS = ",".join(cells[net]["peers"]) or "none"
                rep.PROVIDERS = ",".join(cells[net]["providers"])
                took = rep.ab_runs([files["a"][i]], [files[other][i]], work / f"{name}-{load}", ab_rounds)
                print(f"  [{load}] ab {name} {net}: {took:.0f} s", flush=True)
    finally:
        if tenant is not None:
            tenant.__exit__(None, None, None)
    meta = {"seconds": time.monotonic() - t0, "tenant_pid": tenant.proc.pid if tenant else None, "nets": nets}
    (work / f"{load}.json").write_text(json.dumps(meta))
    return figures(work, load, meta)


def figures(work: Path, load: str, meta: dict) -> dict:
    """One load's figures from its ab runs' folders (``meta``: its seconds, co-tenant pid, networks)."""
    out = dict(meta)
    for name in ("AA", "AB"):
        out[name] = rep.ab_figures(work / f"{name}-{load}", meta["nets"])
        out[name].update(verdicts(work / f"{name}-{load}", meta["nets"], meta["tenant_pid"]))
    return out


def verdicts(out: Path, nets: list[str], tenant_pid: int | None) -> dict:
    """Issue 48's counts over one protocol's ab runs: cells with a verdict, labelled under load, the
    misses' detectable change; the disturbed rounds by what disturbed them: other processes' CPU time
    (each such round must name the processes, and the co-tenant where it was one of them) or the
    machine's own signs (the canary, slowed samples: nothing to name); the steady co-tenants the
    records state, with the range of their per-cell shares."""
    from ios_bench.running.ab import paired_comparison

    got = {"with_verdict": 0, "under_load": 0, "rounds_disturbed": 0, "by_cpu": 0, "naming": 0, "naming_tenant": 0,
           "by_other": {}, "why": {}, "loads": {}}
    for net in nets:
        folder = out.parent / f"{out.name}-{net}"
        for c in paired_comparison(folder).changes:
            got["with_verdict"] += c.verdict not in ("unstable", "failed") and not c.verdict.startswith("only")
            got["under_load"] += "under load: " in c.why
            got["why"][f"{net}:{c.cell}"] = c.why
        for rec in rep.records(folder):
            for r in rec.get("rounds") or []:
                if r.get("load_by"):
                    share = re.search(r" (\d+)% of the CPUs", str(r.get("load") or ""))
                    got["loads"].setdefault(r["load_by"], []).append(int(share.group(1)) if share else None)
                why = str(r.get("disturbed") or "")
                if r.get("status") != "ok" or not why:
                    continue
                got["rounds_disturbed"] += 1
                kind = disturbance(why)
                if kind == "cpu":
                    got["by_cpu"] += 1
                    got["naming"] += " pid " in why
                    got["naming_tenant"] += tenant_pid is not None and f" pid {tenant_pid}:" in why
                else:
                    got["by_other"][kind] = got["by_other"].get(kind, 0) + 1
    return got


def disturbance(why: str) -> str:
    """Which rule disturbed a round (``ios_core.measurement.interference.judge``'s reason): ``cpu``
    (other processes' CPU time: the rule that names them), ``the canary``, ``slowed samples``, or
    the reason's first word."""
    if "other processes used" in why:
        return "cpu"
    if why.startswith("canary"):
        return "the canary"
    return "slowed samples" if "quickest quarter" in why else why.split(" ")[0]


def steady(g: dict) -> str:
    """``python pid 1234, 33-50 % of the CPUs per cell (in 412 rounds)``, or none."""
    out = []
    for who in sorted({*g["AA"]["loads"], *g["AB"]["loads"]}):
        vals = [v for v in g["AA"]["loads"].get(who, []) + g["AB"]["loads"].get(who, []) if v is not None]
        span = f"{min(vals)}-{max(vals)} % of the CPUs per cell" if vals else "its share unstated"
        out.append(f"{who}, {span} (in {len(g['AA']['loads'].get(who, [])) + len(g['AB']['loads'].get(who, []))} "
                   "rounds)")
    return "; ".join(out) or "none"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loads", default=",".join(LOADS), help=f"of {', '.join(LOADS)} [default: all, in that order]")
    ap.add_argument("--cells", default=None, help="NET:FW,... (FW a peer or ios-sequential[PROVIDER]) "
                                                  "[default: bench_repeatability's 10 cells]")
    ap.add_argument("--quick", action="store_true", help=f"--cells {QUICK_CELLS} --ab-rounds 5")
    ap.add_argument("--ab-rounds", default=None, help="--rounds of the ab runs: default (ab's own, auto), auto or N")
    ap.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1, help="the CPU the co-tenant is pinned to")
    ap.add_argument("--period", type=float, default=0.1, help="duty50: seconds of one on/off cycle [default: 0.1]")
    ap.add_argument("--limit", type=float, default=4 * 3600.0, help="the co-tenant stops after this many seconds")
    ap.add_argument("--out", default=None, help="work folder [default: a temporary one]")
    ap.add_argument("--estimate-only", action="store_true", help="print the plan and its estimated duration, and stop")
    ap.add_argument("--from", dest="from_", default=None, metavar="WORK",
                    help="print the tables of a work folder measured before (nothing is run)")
    args = ap.parse_args(argv)
    if args.from_:
        work = Path(args.from_)
        done = [v for v in LOADS if (work / f"{v}.json").is_file()]
        if not done:
            fail(f"--from: {work} holds no measured load ({', '.join(f'{v}.json' for v in LOADS)})")
        report({v: figures(work, v, json.loads((work / f"{v}.json").read_text())) for v in done}, done)
        return 0
    loads = [v.strip() for v in args.loads.split(",") if v.strip()]
    if not loads or set(loads) - set(LOADS):
        fail(f"--loads: choose from {', '.join(LOADS)}")
    ab_rounds = args.ab_rounds if args.ab_rounds not in (None, "default") else ("5" if args.quick else None)
    if ab_rounds not in (None, "auto") and not (ab_rounds.isdigit() and int(ab_rounds) >= 2):
        fail(f"--ab-rounds: default, auto or a number of pairs (at least 2), not {ab_rounds!r}")
    if not 0 <= args.cpu < (os.cpu_count() or 1):
        fail(f"--cpu: this machine has CPUs 0-{(os.cpu_count() or 1) - 1}")
    if args.period <= 0.002:
        fail("--period: more than 0.002 s")
    cells = parse_cells(args.cells or (QUICK_CELLS if args.quick else default_cells()))
    n_cells = sum(len(c["peers"]) + len(c["providers"]) for c in cells.values())
    secs = estimate(cells, loads, ab_rounds)
    print(f"plan: loads {', '.join(loads)}; {n_cells} cell(s) on {', '.join(cells)}; ab --rounds "
          f"{ab_rounds or 'auto (ab default)'}; A/A and A/B per load; estimated {secs / 60:.0f} min "
          f"(from 2026-11-27's quiet run: {SECONDS_PER_PAIR} s per pair of a cell, x"
          f"{'/'.join(str(LOAD_FACTOR[v]) for v in loads)} under {'/'.join(loads)})", flush=True)
    if args.estimate_only:
        return 0
    work = Path(args.out or tempfile.mkdtemp(prefix="bench-busy-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    print(f"work folder: {work}; started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(t_start))}; "
          f"load average {os.getloadavg()}", flush=True)
    files = rep.save_variants(work / "models", list(cells))
    for name, r in files["ratios"].items():
        print(f"B variant of {name}: image {r['image_size']}, {r['macs_ratio']:.3f}x the MACs", flush=True)
    got = {load: run_load(load, cells, files, work, ab_rounds, args) for load in loads}
    print(f"\nfinished {time.strftime('%H:%M:%S UTC')} ({(time.time() - t_start) / 60:.0f} min); "
          f"load average {os.getloadavg()}\n")
    report(got, loads)
    return 0


def report(got: dict, loads: list[str]) -> None:
    pct = rep.pct

    def row(title, fn):
        print(f"| {title} | " + " | ".join(fn(got[v]) for v in loads) + " |")

    print("| goal | " + " | ".join(loads) + " |\n|---|" + "---|" * len(loads))
    row("ab cells with a verdict (goal: every cell)", lambda g: pct(g["AA"]["with_verdict"] + g["AB"]["with_verdict"],
                                                                  g["AA"]["cells"] + g["AB"]["cells"]))
    row("... labelled 'under load'", lambda g: pct(g["AA"]["under_load"] + g["AB"]["under_load"],
                                                  g["AA"]["cells"] + g["AB"]["cells"]))
    row("A/A: flagged (goal: at most 1/10)", lambda g: pct(g["AA"]["flagged"], g["AA"]["cells"]))
    row("A/A: within 3 %", lambda g: pct(g["AA"]["within3"], g["AA"]["cells"]))
    row("A/B (+9-13 % multiply-adds): flagged as regressions (goal: at least 8/10)",
        lambda g: pct(g["AB"]["regressions"], g["AB"]["cells"]))
    def misses(g):
        missed = [c for c, v in g["AB"]["changes"].items() if not v[3].startswith("regression")]
        return pct(sum("could not have flagged" in g["AB"]["why"].get(c, "") for c in missed), len(missed))

    row("A/B misses stating the change they could detect", misses)
    row("rounds disturbed by other processes' CPU time, naming them (goal: always)",
        lambda g: pct(g["AA"]["naming"] + g["AB"]["naming"], g["AA"]["by_cpu"] + g["AB"]["by_cpu"]))
    row("... naming the co-tenant", lambda g: pct(g["AA"]["naming_tenant"] + g["AB"]["naming_tenant"],
                                                 g["AA"]["by_cpu"] + g["AB"]["by_cpu"]) if g["tenant_pid"] else "-")

    def otherwise(g):
        kinds = {}
        for name in ("AA", "AB"):
            for k, v in g[name]["by_other"].items():
                kinds[k] = kinds.get(k, 0) + v
        return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"

    row("rounds disturbed otherwise (nothing to name), by rule", otherwise)
    row("steady load the records state", steady)
    row("time (s)", lambda g: f"{g['seconds']:.0f}" if isinstance(g.get("seconds"), (int, float)) else "-")
    for load in loads:
        for name in ("AA", "AB"):
            figs = got[load][name]
            print(f"\nab {'A/A' if name == 'AA' else 'A/B'} {load}: unstable {figs['unstable']}")
            for cell, (ch, lo, hi, verdict) in figs["changes"].items():
                text = f"{ch:+.1%} [{lo:+.1%}, {hi:+.1%}]" if ch is not None else "-"
                n, stop, det = (figs.get("pairs") or {}).get(cell, (None, None, None))
                print(f"  {cell:45s} {text:28s} {verdict}  {n} pairs, stopped by {stop or '-'}"
                      + (f", detectable ±{det:.1%}" if det else ""))
                print(f"  {'':45s} {figs['why'].get(cell, '')}")


if __name__ == "__main__":
    sys.exit(main())
