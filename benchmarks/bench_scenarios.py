"""The figures issue 23 asks for: throughput as services measure it (MLPerf LoadGen scenarios).

    PYTHONPATH=. python benchmarks/bench_scenarios.py                  # squeezenet + inception_v3 (hours on 2 cores)
    PYTHONPATH=. python benchmarks/bench_scenarios.py --out runs/bench-scen --resume
    PYTHONPATH=. python benchmarks/bench_scenarios.py --smoke          # proves the script works (minutes)
    PYTHONPATH=. python benchmarks/bench_scenarios.py --models inception_v3 --sweeps latency,offline,multi-stream

``--sweeps`` runs some of the experiment's sweeps (Server alone takes hours per model here); a later
``--resume`` of the same ``--out`` with the others adds them, and the figures printed are those of
the sweeps named.

It runs the ``throughput`` experiment (``ios-bench experiment throughput``: a latency sweep and
LoadGen Offline, Server and MultiStream sweeps of every CPU framework and IOS-Sequential/IOS-Both
on every kernel provider, each LoadGen cell once per instance/thread split) in its reference form:
LoadGen's reduced (``--quick``) settings, Server judged at p99, 3 rounds per cell. Then it prints:

1. Offline throughput of each framework's best configuration against its batch-1
   latency-derived throughput (1000 / latency), the ratio per model and framework;
2. N instances of IOS-Sequential against one IOS-Both, same provider, Offline: the ratio;
3. Server: the highest QPS LoadGen judged VALID with its p99 within 2x the framework's
   single-stream p90;
4. LoadGen's verdict on every scenario cell of the quick settings (VALID counts per scenario);
5. how long each sweep took (the quick LoadGen sweeps of both networks, and the latency sweep).

Timing figures need a quiet machine (docs/harness.md); ``--smoke`` (the sample model, onnxruntime
and IOS on torch, one round, the experiment's quick form) only shows that the script runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ios_bench.errors import InputError  # noqa: E402
from ios_bench.experiments import get  # noqa: E402
from ios_bench.experiments._common import records  # noqa: E402
from ios_bench.experiments.base import Context  # noqa: E402
from ios_bench.experiments.runner import run_experiment, selected_runs  # noqa: E402
from ios_bench.experiments.throughput import goal_figures  # noqa: E402
from ios_bench.reporting.numbers import fmt  # noqa: E402


def _f(v, unit: str = "") -> str:
    return "-" if v is None else f"{fmt(v)}{unit}"


def _sweep_seconds(folder: Path) -> float | None:
    """Wall time of a sweep: its env.json's ``duration_s``, else captured to finished, summed over
    its sessions (a resumed sweep)."""
    import datetime as dt

    try:
        env = json.loads((folder / "env.json").read_text())
    except (OSError, ValueError):
        return None
    total = 0.0
    for s in [env, *env.get("sessions", [])]:
        if isinstance(s.get("duration_s"), (int, float)):
            total += s["duration_s"]
            continue
        try:
            start, end = dt.datetime.fromisoformat(s["captured"]), dt.datetime.fromisoformat(s["finished"])
            total += (end - start).total_seconds()
        except (KeyError, TypeError, ValueError):
            continue
    return total or None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="squeezenet,inception_v3")
    ap.add_argument("--out", default=None, help="experiment folder [default: runs/bench-scenarios-<time>]")
    ap.add_argument("--resume", action="store_true", help="continue --out where it stopped")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--smoke", action="store_true", help="the experiment's quick form on the sample model")
    ap.add_argument("--sweeps", default=None,
                    help="only these of the experiment's sweeps (comma-separated: latency, offline, server, "
                         "multi-stream) [default: all]")
    args = ap.parse_args()
    out = Path(args.out or f"runs/bench-scenarios-{time.strftime('%Y%m%d-%H%M%S')}")
    models = ["sample"] if args.smoke else [m.strip() for m in args.models.split(",") if m.strip()]
    sweeps = [n.strip() for n in args.sweeps.split(",") if n.strip()] if args.sweeps else None
    ctx = Context(out=out, models=models, quick=args.smoke, reference=not args.smoke, threads=args.threads,
                  resume=args.resume, sweeps=sweeps)
    exp = get("throughput")
    t0 = time.perf_counter()
    report = run_experiment(exp, ctx, progress=False, command=sys.argv)
    wall = time.perf_counter() - t0
    folders = {r.name: out / "runs" / r.name for r in selected_runs(exp, ctx)}
    figs = goal_figures({k: records(v) for k, v in folders.items()})
    form = "smoke (quick form, not a result)" if args.smoke else "reference (LoadGen quick settings, Server at p99)"
    print(f"\nbench_scenarios: {', '.join(models)}; {form}; report {report}")
    print("\n1. Offline (best configuration) / latency-derived throughput (1000 / batch-1 latency)")
    for r in figs["offline"]:
        print(f"   {r['model']:14s} {r['label']:28s} latency-derived {_f(r['latency_rate'], '/s'):>12s}  "
              f"offline {_f(r['offline_rate'], '/s'):>12s} ({r['config'] or '-'})  ratio {_f(r['ratio'], 'x')}")
    print("\n2. N x IOS-Sequential / one IOS-Both (Offline, same provider)")
    for r in figs["ios"]:
        print(f"   {r['model']:14s} {r['provider']:12s} sequential {_f(r['sequential'], '/s')} "
              f"({r['sequential_config']})  both {_f(r['both'], '/s')}  ratio {_f(r['ratio'], 'x')}")
    print("\n3. Server: highest valid QPS, latency percentile within 2x single-stream p90")
    for r in figs["server"]:
        print(f"   {r['model']:14s} {r['label']:28s} {_f(r['qps'], ' QPS') if r['qps'] else r['none_valid']:>14s} "
              f"({r['config'] or '-'})  bound {_f(r['bound_ms'], ' ms')}")
    if "server" in folders:  # issue 42's goal is stated with this count
        srv = [r for r in records(folders["server"]) if r.get("scenario") == "server"]
        rounds = [g for r in srv for g in r.get("rounds") or [] if g.get("status") == "ok"]
        none_rounds = sum(1 for g in rounds if (g.get("server") or {}).get("none_valid_above_qps") is not None)
        none_cells = sum(1 for r in srv if (r.get("server") or {}).get("none_valid_above_qps") is not None)
        stops: dict = {}
        for g in rounds:
            why = (g.get("server") or {}).get("stopped") or "-"
            stops[why] = stops.get(why, 0) + 1
        print(f"   'none valid above X': {none_cells} of {len(srv)} Server cells, {none_rounds} of {len(rounds)} "
              "rounds; searches stopped at: " + (", ".join(f"{k} {v}" for k, v in sorted(stops.items())) or "-"))
    print(f"\n4. LoadGen VALID: {figs['valid']} of {figs['judged']} scenario cells ("
          + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in figs["verdicts"].items()) + ")")
    for line in figs["invalid"]:
        print(f"   INVALID {line}")
    print("\n5. Duration")
    for name, folder in folders.items():
        print(f"   {name:14s} {_f(_sweep_seconds(folder), ' s')}")
    if "server" in folders and (took := _sweep_seconds(folders["server"])):
        print(f"   Server sweep: {took / 3600:.2f} h (issue 42's goal for squeezenet's reference form: at most 1.5 h)")
    scen = [s for n, f in folders.items() if n != "latency" and (s := _sweep_seconds(f))]
    print(f"   LoadGen sweeps together: {_f(sum(scen), ' s') if scen else '-'}; whole script {wall:,.0f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:  # e.g. --resume of a folder that holds no experiment: one line, exit 2
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
