"""IOS on the CPU against the best fp32 peers, in one run, with side-by-side ratios.

For each network (the paper's four by default) and batch size: the fp32 peers (onnxruntime,
openvino adapters) running the whole graph, and per IOS kernel provider IOS-Sequential and
IOS-Both: the optimizer's estimate (predicted ms), the measured ms, and the optimization
seconds (cold: a fresh profile database unless --cache is given). Every variant runs in its own
process under the one thread budget and spin/wait policy (ios_core.measurement.threads), so a crash or a
hang costs one row, not the run.

    PYTHONPATH=. python benchmarks/bench_ios_cpu.py                 # 4 networks, batch 1
    PYTHONPATH=. python benchmarks/bench_ios_cpu.py --batch 1,16    # and batch 16
    PYTHONPATH=. python benchmarks/bench_ios_cpu.py --quick         # squeezenet, short protocol
    PYTHONPATH=. python benchmarks/bench_ios_cpu.py --warm          # also a second (cached) optimization

Ratios: Both/Seq = IOS-Sequential ms / IOS-Both ms on the same provider (> 1: Both is faster);
vs best peer = best peer ms / IOS-Both ms (> 1: IOS-Both is faster), the peers timed in the same
processes as the IOS schedules, alternating with them (the same graph on the same library measures
10-25% apart in two processes here: --processes pools several); Seq/lib = IOS-Sequential on a
provider / that library running the whole graph, timed in the same process, alternating with
the IOS schedules (< 1.05 is the issue's goal). Results also go to
--out (JSON and Markdown).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAPER_MODELS = ("inception_v3", "randwire", "nasnet", "squeezenet")
PEERS = ("onnxruntime", "openvino")
PROVIDERS = ("torch", "onnxruntime", "openvino")


# ---- the child: one variant, one process ---------------------------------------------------------
def child(spec: dict) -> dict:
    from ios_core.measurement.threads import apply_spin_policy, thread_env

    os.environ.update(thread_env(spec["threads"]))
    apply_spin_policy(spec.get("spin_policy"))  # before any framework import
    if spec.get("cache"):
        os.environ["IOS_BENCH_CACHE"] = spec["cache"]

    if spec["kind"] == "pairs":  # in the cells' environment: the database key includes it
        return {"status": "ok", "text": render_pairs(spec["cache"], spec["batches"], spec["threads"],
                                                     spec["providers"])}
    from ios_core import models
    from ios_core.check import compare
    from ios_core.measurement.measure import measure
    from ios_core.reference import random_input
    from ios_core.reference import run as oracle

    graph = models.get(spec["model"]).init_weights(0)
    bs = spec["batch"]
    x = random_input(graph, bs, seed=0)
    ref = oracle(graph, x)
    proto = dict(warmup=spec["warmup"], number=1, repeat=spec["repeat"], min_sample_ms=spec["min_sample_ms"])
    out: dict = {}
    if spec["kind"] == "peer":
        import adapters

        a = adapters.get(spec["name"])
        reason = a.available("cpu")
        if reason:
            return {"status": "skipped", "reason": reason}
        c = a.build(graph, bs, "cpu", spec["threads"])
        p = c.prepare(x)
        check = compare(c.finish(c.execute(p)), ref, getattr(a, "tolerance", None) or 1e-3)
        m = measure(lambda: c.execute(p), sync=c.sync, **proto)
        out.update(status="ok", ms=m.median, std=m.std, check=check.passed, precision=c.info.get("precision"))
        return out
    if spec["kind"] == "optimize":
        return optimize_child(spec, graph, x, ref)
    return measure_child(spec, graph, x, ref, proto)


def optimize_child(spec: dict, graph, x, ref) -> dict:
    """Optimize Sequential and Both on one provider with the measured cost model on that
    provider; save both schedules (with weights: merged convolutions carry theirs) for the
    measuring process."""
    from ios_core.cost import make_cost_model
    from ios_core.optimizer import schedule

    provider, bs = spec["name"], spec["batch"]
    cost_opts = dict(threads=spec["threads"], provider=provider, mode=spec["mode"])
    if spec.get("stage_repeat"):
        cost_opts["repeat"] = spec["stage_repeat"]
    runs = 2 if spec.get("warm") else 1
    out: dict = {}
    for strategy in ("sequential", "both"):
        secs = []
        for _ in range(runs):
            cm = make_cost_model("measured", **cost_opts)
            t0 = time.perf_counter()
            res = schedule(graph, strategy, cm, batch_size=bs)
            secs.append(time.perf_counter() - t0)
        path = Path(spec["work"]) / f"{spec['model']}-b{bs}-{provider}-{strategy}.json"
        res.graph.save(path)
        out[strategy] = {"predicted_ms": res.stats.cost_ms, "optimize_s": secs[0],
                         "optimize_s_warm": secs[1] if runs > 1 else None, "validation": res.stats.validation,
                         "measured": cm.stats().get("measured"), "schedule": str(path)}
    out["status"] = "ok"
    return out


def measure_child(spec: dict, graph, x, ref, proto: dict) -> dict:
    """Time the two schedules of one provider in a fresh process (no optimizer state around),
    interleaved round by round so that drift hits both alike; then the analysis figures:
    Sequential at 1 thread (intra-op scaling, which bounds what inter-op parallelism can win on
    this many cores) and Both's per-stage profile (time in its parallel stages)."""
    import numpy as np

    from ios_core.check import compare
    from ios_core.ir import Graph
    from ios_core.runtime import Runtime

    provider, bs, threads = spec["name"], spec["batch"], spec["threads"]
    kw = {"provider": provider} if provider != "torch" else {}
    rts = {}
    out: dict = {}
    for strategy in ("sequential", "both"):
        sched = Graph.load(spec["schedules"][strategy])
        rts[strategy] = rt = Runtime(sched, bs, threads=threads, **kw)
        out[strategy] = {"check": compare(rt.run(x), ref, 1e-3).passed, "stages": rt.stats.get("stages"),
                         "parallel_stages": rt.stats.get("parallel_stages")}
    # the peers (each library on the whole graph) in the same process and rounds: Seq/lib and
    # Both vs the best peer are then side-by-side ratios
    timed = {k: (lambda rt=rt, **kw: rt.measure(x=x, **kw)) for k, rt in rts.items()}
    import adapters
    from ios_core.measurement.measure import measure

    for peer in spec.get("peers") or []:
        a = adapters.get(peer)
        if a.available("cpu"):
            continue
        c = a.build(graph, bs, "cpu", threads)
        prepared = c.prepare(x)
        key = f"lib:{peer}"
        out[key] = {"check": compare(c.finish(c.execute(prepared)), ref, getattr(a, "tolerance", None) or 1e-3).passed}
        timed[key] = lambda c=c, prepared=prepared, **kw: measure(lambda: c.execute(prepared), sync=c.sync, **kw)
    rounds = max(1, spec["rounds"])
    per_round = max(2, -(-proto["repeat"] // rounds))
    samples: dict[str, list[float]] = {k: [] for k in timed}
    order = list(timed)
    for r in range(rounds):
        for k in order if r % 2 == 0 else order[::-1]:
            m = timed[k](warmup=proto["warmup"] if r == 0 else 1, repeat=per_round,
                         min_sample_ms=proto["min_sample_ms"])
            samples[k] += list(m.samples_ms)
    for k, v in samples.items():
        out[k]["samples"] = v
    # where Both's time goes: per-stage profile (a provider runs a run of one-group stages as one piece)
    m = rts["both"].measure(x=x, warmup=1, repeat=max(3, per_round), profile_stages=True)
    stage_ms = np.median(np.array(m.stage_ms), axis=0)
    par = [i for i, groups in enumerate(m.meta["stage_names"]) if len(groups) > 1]  # concurrent stages
    out["both"].update(profile_ms=float(stage_ms.sum()), parallel_ms=float(stage_ms[par].sum()) if par else 0.0,
                       parallel_pieces=len(par), pieces=len(stage_ms))
    del rts
    # intra-op scaling: Sequential with one thread
    seq1 = Runtime(Graph.load(spec["schedules"]["sequential"]), bs, threads=1, **kw)
    m1 = seq1.measure(x=x, warmup=1, repeat=max(3, per_round // 2), min_sample_ms=proto["min_sample_ms"])
    out["sequential"]["ms_1thread"] = m1.median
    out["status"] = "ok"
    return out


# ---- the parent ---------------------------------------------------------------------------------------
def run_child(spec: dict, timeout: float) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    from ios_core.measurement.threads import spin_env, thread_env

    env = spin_env(spec.get("spin_policy"), {**env, **thread_env(spec["threads"])})
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"timeout after {timeout:g} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["?"]
        return {"status": "failed", "reason": f"exit {p.returncode}: {tail[0][:200]}"}
    res = json.loads(lines[-1])
    res["wall_s"] = time.perf_counter() - t0
    return res


def run_ios(spec: dict, timeout: float) -> dict:
    """One provider: optimize in one process, time the saved schedules in a fresh one."""
    opt = run_child({**spec, "kind": "optimize"}, timeout)
    if opt.get("status") != "ok":
        return opt
    # pyperf-style: several measuring processes (the same schedule differs by 10-25% between
    # processes here), their samples pooled; each process's medians are kept too
    runs = []
    for _ in range(max(1, spec.get("processes", 1))):
        res = run_child({**spec, "kind": "measure",
                         "schedules": {k: opt[k]["schedule"] for k in ("sequential", "both")}}, timeout)
        if res.get("status") != "ok":
            return res
        runs.append(res)
    res = pool_processes(runs)
    for k in ("sequential", "both"):
        res[k] = {**opt[k], **res[k]}
        Path(opt[k]["schedule"]).with_suffix(".npz").unlink(missing_ok=True)  # weights: hundreds of MB
    res["wall_s"] = opt["wall_s"] + sum(r["wall_s"] for r in runs)
    res["threads"] = spec["threads"]
    return res


def pool_processes(runs: list[dict]) -> dict:
    """One result from several measuring processes: every variant's samples pooled (median, IQR),
    its per-process medians listed; the analysis figures are the first process's (medians where
    numeric)."""
    import numpy as np

    res = {k: (dict(v) if isinstance(v, dict) else v) for k, v in runs[0].items()}
    for k, v in res.items():
        if not isinstance(v, dict) or "samples" not in v:
            continue
        allv = [x for r in runs for x in r[k]["samples"]]
        q1, q3 = np.percentile(allv, [25, 75])
        v.update(ms=float(np.median(allv)), iqr=float(q3 - q1), std=float(np.std(allv)), n=len(allv),
                 per_process=[float(np.median(r[k]["samples"])) for r in runs],
                 check=all(r[k]["check"] for r in runs))
        v.pop("samples")
        for extra in ("ms_1thread", "profile_ms", "parallel_ms"):
            if extra in v:
                v[extra] = float(np.median([r[k][extra] for r in runs]))
    return res


def _f(v, d=1):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{d}f}"


def _ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def _pm(r: dict) -> str:
    return f"{r['ms']:.2f} ±{r['iqr']:.2f}" if r.get("iqr") is not None else _f(r.get("ms"), 2)


def _kept(v: dict | None) -> str:
    if not v:
        return "-"
    return "sequential kept" if v.get("kept") == "sequential" else "optimized kept"


def render_analysis(results: dict, models: list[str], batches: list[int], providers: list[str]) -> str:
    """Where the time goes, per network and provider: how well the kernels already use both
    cores (intra-op scaling, Sequential at 1 thread / at N threads), the bound that puts on
    inter-op parallelism (N perfectly overlapped one-thread streams: Seq(1 thread) / N), and how
    much of Both's time its concurrent stages take (per-stage profile)."""
    lines = ["### where the time goes", "",
             "Intra-op scaling = Seq at 1 thread / Seq at N threads. Inter-op bound = Seq(1 thread) / N: the "
             "latency if every operator ran on one thread and N of them always overlapped perfectly; "
             "max Both/Seq = Seq / that bound (an estimate from two measurements, not a measurement of "
             "a schedule). Concurrent stages: pieces of Both with more than one group, and their share of "
             "Both's per-stage profile.", ""]
    head = ["model", "batch", "provider", "Seq ms", "Seq 1-thread ms", "intra-op scaling",
            "inter-op bound ms (est.)", "max Both/Seq (est.)", "Both ms", "Both/Seq", "concurrent stages",
            "time in them", "validation"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for bs in batches:
        for model in models:
            for prov in providers:
                r = results.get((model, bs, "ios", prov)) or {}
                if r.get("status") != "ok":
                    continue
                seq, both = r["sequential"], r["both"]
                n = r.get("threads") or 1
                s1 = seq.get("ms_1thread")
                bound = s1 / n if s1 else None
                share = both["parallel_ms"] / both["profile_ms"] if both.get("profile_ms") else None
                lines.append("| " + " | ".join([
                    model, str(bs), prov, _f(seq["ms"], 2), _f(s1, 2), _ratio(s1, seq["ms"]), _f(bound, 2),
                    _ratio(seq["ms"], bound), _f(both["ms"], 2), _ratio(seq["ms"], both["ms"]),
                    f"{both.get('parallel_pieces', 0)} of {both.get('pieces', '-')}",
                    f"{_f(both.get('parallel_ms'), 2)} ms ({share:.0%})" if share is not None else "-",
                    _kept(both.get("validation"))]) + " |")
    return "\n".join(lines) + "\n"


def render_pairs(cache: str, batches: list[int], threads: int, providers: list[str]) -> str:
    """What concurrency buys on this machine, from the optimizer's own calibrated measurements
    (the profile database): operators run n at a time (one per worker, each on its thread
    share) against one after another at the full budget, by how long the operator takes."""
    from ios_core.cost.cache import ProfileCache
    from ios_core.cost.measured import concurrency_pairs

    db = ProfileCache(cache)
    buckets = ((0.0, 0.1), (0.1, 0.5), (0.5, 2.0), (2.0, float("inf")))
    lines = ["### what running operators concurrently buys (from the cost model's measurements)", "",
             "Speedup = n x (operator alone at the full thread budget) / (n copies at once, one per worker on its "
             "share, less one pool dispatch): above 1, concurrency wins; time-weighted over the operators of the "
             "networks above. The pool dispatch of one concurrent stage is measured separately.", ""]
    head = ["batch", "provider", "dispatch us"] + [f"ops {lo:g}-{hi:g} ms" for lo, hi in buckets] + ["all"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for bs in batches:
        pairs = concurrency_pairs(db, bs, threads)
        dispatch = {m: ms for t, m, sig, ms in db.rows(1) if t == threads and sig.startswith("pool-dispatch-primed")}
        for method, got in sorted(pairs.items()):
            prov = next((p for p in providers if p != "torch" and f":{p}-" in method), "torch")

            def cell(sel):
                if not sel:
                    return "-"
                return f"{sum(n * a for n, a, _ in sel) / sum(c for _, _, c in sel):.2f}x (n={len(sel)})"

            row = [str(bs), prov, _f(dispatch[method] * 1e3, 0) if method in dispatch else "-"]
            row += [cell([g for g in got if lo <= g[1] < hi]) for lo, hi in buckets] + [cell(got)]
            lines.append("| " + " | ".join(row) + " |")
    db.close()
    return "\n".join(lines) + "\n"


def _lib(r: dict, peer: str) -> float | None:
    """A peer's ms timed in the IOS measuring processes (alternating with the schedules)."""
    v = r.get(f"lib:{peer}") or {}
    return v.get("ms") if v.get("check") else None


def render(results: dict, models: list[str], batches: list[int], peers: list[str], providers: list[str]) -> str:
    lines = []
    for bs in batches:
        lines += [f"### batch {bs}", ""]
        head = ["model"] + [f"{p} ms (own process)" for p in peers]
        for prov in providers:
            head += [f"Seq[{prov}] ms", f"Both[{prov}] ms", f"Both[{prov}] predicted (est.)", "pred. err",
                     "opt s (Seq+Both)", "Both/Seq", "vs best peer"]
            if prov in peers:
                head.append(f"Seq/lib[{prov}]")
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        geo: dict[str, list[float]] = {}
        for model in models:
            row = [model]
            peer_ms = {}
            for p in peers:
                r = results.get((model, bs, "peer", p)) or {}
                peer_ms[p] = r.get("ms") if r.get("status") == "ok" and r.get("check") else None
                row.append(_f(peer_ms[p], 2) if peer_ms[p] else r.get("status", "-"))
            best_own = min([v for v in peer_ms.values() if v], default=None)
            for prov in providers:
                r = results.get((model, bs, "ios", prov)) or {}
                if r.get("status") != "ok":
                    row += [r.get("status", "-") + (f" ({r.get('reason', '')[:60]})" if r.get("reason") else "")]
                    row += ["-"] * (6 + (prov in peers))
                    continue
                seq, both = r["sequential"], r["both"]
                err = (both["predicted_ms"] - both["ms"]) / both["ms"]
                # the best peer timed side by side with these schedules (else in its own process)
                best = min([v for p in peers if (v := _lib(r, p))], default=None) or best_own
                row += [_pm(seq) + ("" if seq["check"] else " (WRONG)"),
                        _pm(both) + ("" if both["check"] else " (WRONG)"),
                        _f(both["predicted_ms"], 2), f"{err:+.1%}",
                        f"{_f(seq['optimize_s'])}+{_f(both['optimize_s'])}", _ratio(seq["ms"], both["ms"]),
                        _ratio(best, both["ms"])]
                geo.setdefault(f"Both/Seq[{prov}]", []).append(seq["ms"] / both["ms"])
                if best:
                    geo.setdefault(f"vs best peer[{prov}]", []).append(best / both["ms"])
                if prov in peers:  # the library timed in the same processes and rounds
                    row.append(_ratio(seq["ms"], _lib(r, prov)))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        for k, v in geo.items():
            if len(v) == len(models):
                lines.append(f"- geometric mean {k}: {math.exp(sum(map(math.log, v)) / len(v)):.3f}x")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--models", default=None, help=f"comma-separated (default: {','.join(PAPER_MODELS)})")
    p.add_argument("--batch", default="1", help="batch sizes, e.g. 1,16 (default 1)")
    p.add_argument("--providers", default=",".join(PROVIDERS), help="IOS kernel providers")
    p.add_argument("--peers", default=",".join(PEERS), help="fp32 peer adapters")
    p.add_argument("--threads", type=int, default=None, help="thread budget (default: usable cores)")
    p.add_argument("--mode", default="calibrated", help="measured cost model mode (default: calibrated)")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--processes", type=int, default=2,
                   help="IOS: measuring processes per provider, samples pooled (default 2)")
    p.add_argument("--rounds", type=int, default=4,
                   help="IOS: Sequential and Both are timed alternately in this many rounds (same process)")
    p.add_argument("--min-sample-ms", type=float, default=10.0)
    p.add_argument("--cache", default=None, help="profile database (default: a fresh one: cold optimization)")
    p.add_argument("--warm", action="store_true", help="optimize twice and report the second (cached) run too")
    p.add_argument("--spin-policy", default=None, help="ios_core.measurement.threads spin policy (default: the run's)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per variant")
    p.add_argument("--quick", action="store_true", help="squeezenet only (unless --models), short protocols")
    p.add_argument("--out", default="reports/bench_ios_cpu", help="folder for results.json and results.md")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child)), default=str))
        return 0
    from ios_core.measurement.threads import policy_name, resolve_threads, spin_policy

    models = [m for m in (args.models or ("squeezenet" if args.quick else ",".join(PAPER_MODELS))).split(",") if m]
    batches = [int(b) for b in args.batch.split(",") if b]
    providers = [q for q in args.providers.split(",") if q]
    peers = [q for q in args.peers.split(",") if q]
    threads = resolve_threads(args.threads)
    policy = policy_name(args.spin_policy)
    if args.quick:
        args.repeat, args.warmup, args.min_sample_ms = 5, 2, 0.0
    cache = args.cache or str(Path(tempfile.mkdtemp(prefix="ios-bench-cold-")) / "profiles.sqlite")
    base = dict(threads=threads, spin_policy=policy, repeat=args.repeat, warmup=args.warmup,
                min_sample_ms=args.min_sample_ms or None, cache=cache, mode=args.mode, warm=args.warm,
                stage_repeat=3 if args.quick else None, rounds=args.rounds, processes=args.processes,
                work=str(Path(cache).parent), peers=peers)
    jobs = [(m, b, "peer", q) for m in models for b in batches for q in peers]
    jobs += [(m, b, "ios", q) for m in models for b in batches for q in providers]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"bench_ios_cpu: {len(jobs)} variants, {threads} threads, spin policy {policy!r} "
          f"({spin_policy(policy)['description']}); profile database {cache}"
          + ("" if args.cache else " (fresh: cold optimization)") + f"; load average {load:.1f}", flush=True)
    if load > 0.75 * threads:
        print(f"warning: the machine is busy (load {load:.1f} on {threads} cores): timings will be noisy", flush=True)
    from tqdm import tqdm

    results: dict = {}
    t0 = time.perf_counter()
    with tqdm(total=len(jobs), unit="variant", dynamic_ncols=True) as bar:
        for model, bs, kind, name in jobs:
            bar.set_description(f"{model} b{bs} {'IOS[' + name + ']' if kind == 'ios' else name}")
            spec = {**base, "model": model, "batch": bs, "kind": kind, "name": name}
            res = run_ios(spec, args.timeout) if kind == "ios" else run_child(spec, args.timeout)
            results[(model, bs, kind, name)] = res
            if res.get("status") == "ok" and kind == "ios":
                s, b = res["sequential"], res["both"]
                msg = (f"{model} b{bs} IOS[{name}]: Seq {s['ms']:.2f} ms (pred. {s['predicted_ms']:.2f}), Both "
                       f"{b['ms']:.2f} ms (pred. {b['predicted_ms']:.2f}), optimized in {s['optimize_s']:.0f}+"
                       f"{b['optimize_s']:.0f} s")
            elif res.get("status") == "ok":
                msg = f"{model} b{bs} {name}: {res['ms']:.2f} ms"
            else:
                msg = f"{model} b{bs} {name if kind == 'peer' else 'IOS[' + name + ']'}: {res.get('status')}: " \
                      f"{res.get('reason', '')}"
            bar.write(msg)
            bar.update(1)
    table = (render(results, models, batches, peers, providers) + "\n"
             + render_analysis(results, models, batches, providers) + "\n"
             + (run_child({**base, "kind": "pairs", "batches": batches, "providers": providers},
                          args.timeout).get("text") or ""))
    header = (f"bench_ios_cpu: {threads} threads, spin policy {policy}, cost model measured/{args.mode}, protocol "
              f"warmup {args.warmup} repeat {args.repeat}; load average at start {load:.1f}; "
              f"{time.perf_counter() - t0:.0f} s in all")
    print("\n" + header + "\n\n" + table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"header": header, "results": [
        {"model": k[0], "batch": k[1], "kind": k[2], "name": k[3], **v} for k, v in results.items()]},
        indent=1, default=str))
    (out / "results.md").write_text(header + "\n\n" + table + "\n")
    print(f"wrote {out / 'results.md'} and {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
