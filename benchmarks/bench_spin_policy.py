"""The effect of the spin/wait policy (ios_core.measurement.threads.SPIN_POLICIES) on every framework, in one
run: each (policy, variant) in its own process, side by side, with ratios to the default policy.

Variants: the peer adapters (torch, onnxruntime, openvino, tensorflow, whichever run here) and the
IOS runtime's IOS-Sequential / IOS-Both (torch provider; optimized under each policy with the
measured cost model, whose profile database is keyed by the spin environment).

    PYTHONPATH=. python benchmarks/bench_spin_policy.py --models squeezenet,inception_v3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_ios_cpu import run_child, run_ios  # noqa: E402

from ios_core.measurement.threads import DEFAULT_POLICY, SPIN_POLICIES, resolve_threads  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="squeezenet")
    p.add_argument("--policies", default=",".join(SPIN_POLICIES))
    p.add_argument("--peers", default="torch,onnxruntime,openvino,tensorflow")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--timeout", type=float, default=1800.0)
    args = p.parse_args(argv)
    policies = [x for x in args.policies.split(",") if x]
    cache = str(Path(tempfile.mkdtemp(prefix="ios-bench-spin-")) / "profiles.sqlite")
    threads = resolve_threads(args.threads)
    base = dict(threads=threads, repeat=args.repeat, warmup=3, min_sample_ms=10.0, cache=cache, mode="calibrated",
                batch=1, rounds=3, work=str(Path(cache).parent), peers=[])
    rows = []
    for model in [m for m in args.models.split(",") if m]:
        variants = [("peer", q) for q in args.peers.split(",") if q] + [("ios", "torch")]
        for kind, name in variants:
            ms = {}
            for pol in policies:
                spec = {**base, "model": model, "kind": kind, "name": name, "spin_policy": pol}
                r = (run_ios if kind == "ios" else run_child)(spec, args.timeout)
                if r.get("status") != "ok":
                    print(f"{model} {name} [{pol}]: {r.get('status')}: {r.get('reason', '')}", flush=True)
                    continue
                if kind == "peer":
                    ms.setdefault(name, {})[pol] = r["ms"]
                else:
                    ms.setdefault("IOS-Sequential", {})[pol] = r["sequential"]["ms"]
                    ms.setdefault("IOS-Both", {})[pol] = r["both"]["ms"]
                print(f"{model} {name} [{pol}] done", flush=True)
            for var, by in ms.items():
                rows.append((model, var, by))
    ref = DEFAULT_POLICY
    print(f"\nspin/wait policy effect, batch 1, {threads} threads (ms, median; ratio = policy ms / {ref} ms)\n")
    head = ["model", "variant"] + [f"{p} ms" for p in policies] + [f"{p}/{ref}" for p in policies if p != ref]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for model, var, by in rows:
        cells = [f"{by[p]:.2f}" if p in by else "-" for p in policies]
        cells += [f"{by[p] / by[ref]:.2f}" if p in by and ref in by else "-" for p in policies if p != ref]
        print("| " + " | ".join([model, var] + cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
