"""What a round costs besides its timed samples, per worker kind (issue 36): one round of one cell
on a small graph (the zoo's ``sample``, batch 1) in a real worker (``python -m ios_bench.running.worker``),
as a sweep starts it, timed from the parent.

Per kind it prints:

- ``round s``: the worker process from start to exit (what a round costs the sweep);
- ``timed s``: its warmup and timed samples (the work a round is for);
- ``1stfixed``: the first round's difference (interpreter, imports, a cold build, output checks,
  writing the result); ``fixed s``: the same for the later rounds (median), whose builds reuse the
  first's cache as a sweep's rounds do (``IOS_BENCH_BUILD_CACHE``, ``adapters.build_cache``);
- ``import s``: a fresh interpreter importing what that worker imports for its framework, the way
  its cells do (the adapter's, or the IOS kernel provider's, availability check), timed apart
  (part of ``fixed s``);
- ``imported``: the frameworks the worker imported (``frameworks_imported`` in its result): an IOS
  cell on ONNX Runtime or OpenVINO kernels imports no torch.

    PYTHONPATH=. python benchmarks/bench_rounds_cost.py [--kinds ios[onnxruntime],torch] [--repeat 2]

A kind is an adapter name, or ``ios[PROVIDER]`` (an IOS cell with a greedy schedule on that
provider's kernels). Kinds that cannot run here are skipped with why. Figures are medians over
``--repeat`` rounds; they depend on the machine's load: say when and under what load they were
taken.
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

from ios_core.measurement.stats import median  # noqa: E402 - the one median

DEFAULT_KINDS = ("ios[torch]", "ios[onnxruntime]", "ios[openvino]", "torch", "onnxruntime", "openvino",
                 "torch-compile", "tensorflow", "tensorflow-xla", "jax-xla")
MODEL = "sample"


IMPORT_TIMER = ("import sys, time; t = time.perf_counter(); kind = sys.argv[1]\n"
                "if kind.startswith('ios['):\n"
                "    import adapters.ios; from ios_core.runtime import providers\n"
                "    why = providers.get(kind[4:-1]).available()\n"
                "else:\n"
                "    import adapters; why = adapters.get(kind).available('cpu')\n"
                "print(time.perf_counter() - t if why is None else 'unavailable')")


def import_seconds(kind: str) -> float | None:
    """Seconds a fresh interpreter takes to import what a worker of ``kind`` imports for its framework,
    the way its cells import it (the adapter's, or the IOS kernel provider's, availability check:
    what an adapter leaves out, e.g. TensorFlow's Keras, is left out here too)."""
    p = subprocess.run([sys.executable, "-c", IMPORT_TIMER, kind], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        return float(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def prepare(folder: Path, kinds: list[str]) -> dict:
    """The oracle's input and output for the model, and a greedy schedule for IOS kinds."""
    import numpy as np

    from ios_core import models, optimize
    from ios_core.cost import make_cost_model
    from ios_core.reference import random_input, run

    g = models.get(MODEL)
    g.init_weights(0)
    x = random_input(g, 1)
    np.save(folder / "input.npy", x)
    np.save(folder / "ref.npy", run(g, x))
    if any(k.startswith("ios") for k in kinds):
        optimize(g, "greedy", make_cost_model("synthetic")).save(str(folder / "greedy.json"))
    return {"input": str(folder / "input.npy"), "ref": str(folder / "ref.npy"), "schedule": str(folder / "greedy.json")}


def spec_for(kind: str, files: dict, result: Path, threads: int) -> dict:
    spec = {"model_spec": MODEL, "batch_size": 1, "device": "cpu", "adapter": kind, "threads": threads, "seed": 0,
            "input_seed": 0, "ref_path": files["ref"], "input_path": files["input"], "result_path": str(result),
            "warmup": 3, "number": 1, "repeat": 10, "min_sample_ms": None, "task": "cell"}
    if kind.startswith("ios["):
        spec.update(adapter="ios", schedule="greedy", provider=kind[4:-1], schedule_path=files["schedule"])
    return spec


def one_round(spec: dict, cache: Path | None = None) -> tuple[float, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if cache is not None:  # as a sweep's rounds: builds kept across rounds (adapters.build_cache)
        env["IOS_BENCH_BUILD_CACHE"] = str(cache)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "ios_bench.running.worker", json.dumps(spec)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    try:
        result = json.loads(Path(spec["result_path"]).read_text())
    except (OSError, json.JSONDecodeError):
        result = {"status": "failed", "reason": f"no result (exit {p.returncode}): {p.stderr.strip()[-200:]}"}
    return wall, result


def measure_kind(kind: str, files: dict, folder: Path, repeat: int, threads: int) -> dict:
    walls, timed, imports = [], [], []
    result: dict = {}
    for i in range(repeat):
        wall, result = one_round(spec_for(kind, files, folder / f"{kind}-{i}.json", threads), folder / "cache")
        if result.get("status") != "ok":
            return {"kind": kind, "skipped": str(result.get("reason") or result.get("status"))[:160]}
        walls.append(wall)
        n = (result.get("repeat") or 0) * (result.get("number") or 1) + (result.get("warmup") or 0)
        timed.append(n * (result.get("median_ms") or 0.0) / 1000)  # warmup and samples, at their median
        seconds = import_seconds(kind)
        if seconds is not None:
            imports.append(seconds)
    fixed = [w - t for w, t in zip(walls, timed)]
    later = fixed[1:] or fixed  # after the first round: its build cached
    return {"kind": kind, "round_s": median(walls[1:] or walls), "timed_s": median(timed),
            "first_s": fixed[0], "fixed_s": median(later),
            "import_s": median(imports) if imports else None,
            "build_s": result.get("build_seconds"), "imported": result.get("frameworks_imported")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default=",".join(DEFAULT_KINDS),
                    help="comma-separated worker kinds: adapter names or ios[PROVIDER] (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds per kind (the first, then the median of the "
                    "others; default 2)")
    ap.add_argument("--threads", type=int, default=2, help="the round's thread budget (default 2)")
    args = ap.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if args.repeat < 1 or args.threads < 1 or not kinds:
        print("error: --repeat and --threads must be at least 1, --kinds not empty", file=sys.stderr)
        return 2
    print(f"rounds' fixed cost on {MODEL} (batch 1, {args.threads} threads), {args.repeat} round(s) per kind, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="rounds-cost-") as tmp:
        folder = Path(tmp)
        files = prepare(folder, kinds)
        heads = ("round s", "timed s", "1stfixed", "fixed s", "import s", "build s")
        print(f"{'kind':20s} " + " ".join(f"{h:>8s}" for h in heads) + "  imported")
        for kind in kinds:
            r = measure_kind(kind, files, folder, args.repeat, args.threads)
            if "skipped" in r:
                print(f"{kind:20s} skipped: {r['skipped']}", flush=True)
                continue

            def f(v):
                return f"{v:8.2f}" if isinstance(v, (int, float)) else f"{'-':>8s}"
            cols = " ".join(f(r[k]) for k in ("round_s", "timed_s", "first_s", "fixed_s", "import_s", "build_s"))
            print(f"{kind:20s} {cols}  {','.join(r['imported'] or []) or '-'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
