"""Peak memory of the oracle (``ios_core.reference.run``), each case in a fresh process.

For each model and batch size a child process builds the model with seeded weights, makes the
seeded input, runs one evaluation and reports its peak resident memory (``ru_maxrss``: the whole
process, Python, torch, weights and input included) and the peak before the evaluation (the
model and input alone). Implementations (``--impl``):

* ``run``: ``ios_core.reference.run`` (liveness and chunks of ``reference.chunk_size`` images);
* ``whole``: the same walk with liveness but the batch whole (``run_chunked(graph, x, N)``);
* ``plain``: the walk keeping every value (``reference.run_plain``, the oracle before this), or,
  with ``--against REV``, ``ios_core/reference.py`` as it was at git revision ``REV``.

Outputs are compared bit for bit: ``run`` against ``plain`` at the batches both ran, and
``run`` against ``whole`` (chunked against unchunked at the same batch; a kernel may sum in a
different order for another batch size, so these can differ in the last bits: the maximum
absolute difference and its ratio to the largest output magnitude are printed). Usage:

    PYTHONPATH=. python benchmarks/bench_reference_memory.py                    # nasnet, inception_v3
    PYTHONPATH=. python benchmarks/bench_reference_memory.py --models nasnet --batch 1,32 \\
        --plain-batch 1 --whole-batch 32 --against main --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ints(text: str) -> list[int]:
    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if any(v < 1 for v in out):
        raise argparse.ArgumentTypeError(f"batch sizes must be >= 1, got {text!r}")
    return out


def _old_reference(rev: str):
    """``ios_core/reference.py`` at git revision ``rev``, loaded as a module of ios_core."""
    import types

    src = subprocess.run(["git", "show", f"{rev}:ios_core/reference.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    mod = types.ModuleType("ios_core._reference_at_rev")
    mod.__package__ = "ios_core"
    exec(compile(src, f"{rev}:ios_core/reference.py", "exec"), mod.__dict__)
    return mod


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(args) -> None:
    import numpy as np
    import torch

    from ios_core import models, reference

    if args.threads:
        torch.set_num_threads(args.threads)
    graph = models.get(args.model).init_weights(args.seed)
    x = reference.random_input(graph, args.batch, args.seed)
    base = _peak_mib()
    t0 = time.perf_counter()
    if args.impl == "run":
        y = reference.run(graph, x)
    elif args.impl == "whole":
        y = reference.run_chunked(graph, x, args.batch)
    elif args.against:
        y = _old_reference(args.against).run(graph, x)
    else:
        y = reference.run_plain(graph, x)
    seconds = time.perf_counter() - t0
    np.save(args.out, y)
    print(json.dumps({"peak_mib": _peak_mib(), "base_mib": base, "seconds": seconds,
                      "chunk": reference.chunk_size(graph),
                      "activation_mib_per_image": reference.activation_bytes(graph) / 2**20}))


def run_case(model: str, batch: int, impl: str, args, tmp: Path) -> dict:
    out = tmp / f"{model}-{batch}-{impl}.npy"
    cmd = [sys.executable, __file__, "--child", "--model", model, "--batch-one", str(batch), "--impl", impl,
           "--out", str(out), "--seed", str(args.seed), "--threads", str(args.threads or 0)]
    if args.against:
        cmd += ["--against", args.against]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or [f"exit code {p.returncode}"])[-1]
        return {"model": model, "batch": batch, "impl": impl, "error": f"rc={p.returncode}: {tail[:200]}"}
    row = json.loads(p.stdout.strip().splitlines()[-1])
    row.update(model=model, batch=batch, impl=impl, output=str(out))
    return row


def compare(a: dict, b: dict) -> dict:
    import numpy as np

    x, y = np.load(a["output"]), np.load(b["output"])
    diff = float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max())
    scale = float(np.abs(y).max()) or 1.0
    return {"model": a["model"], "batch": a["batch"], "a": a["impl"], "b": b["impl"],
            "bit_equal": bool(x.shape == y.shape and np.array_equal(x, y)), "max_abs_diff": diff,
            "max_rel_to_largest": diff / scale}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="nasnet,inception_v3")
    ap.add_argument("--batch", type=_ints, default=[1, 2, 8, 32], help="batches for reference.run")
    ap.add_argument("--plain-batch", type=_ints, default=[1, 2], help="batches for the plain (old) oracle")
    ap.add_argument("--whole-batch", type=_ints, default=[], help="batches for the unchunked walk")
    ap.add_argument("--against", default=None, help="git revision whose ios_core/reference.py is 'plain'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads in each child (0: torch's default)")
    ap.add_argument("--json", default=None)
    # child mode
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--batch-one", type=int, dest="batch_one", help=argparse.SUPPRESS)
    ap.add_argument("--impl", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        args.batch = args.batch_one
        child(args)
        return 0

    from ios_core import models as zoo

    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in zoo.names()]
    if unknown:
        print(f"error: unknown model(s) {', '.join(unknown)}; known: {', '.join(zoo.names())}", file=sys.stderr)
        return 2
    rows, checks = [], []
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"{'model':14} {'impl':6} {'batch':>5} {'chunk':>5} {'peak MiB':>9} {'before MiB':>10} {'seconds':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in names:
            done: dict[tuple[int, str], dict] = {}
            cases = [(b, "run") for b in args.batch] + [(b, "plain") for b in args.plain_batch] \
                + [(b, "whole") for b in args.whole_batch]
            for batch, impl in cases:
                row = run_case(model, batch, impl, args, Path(tmp))
                rows.append(row)
                if "error" in row:
                    print(f"{model:14} {impl:6} {batch:>5} failed: {row['error']}")
                    continue
                done[(batch, impl)] = row
                print(f"{model:14} {impl:6} {batch:>5} {row['chunk']:>5} {row['peak_mib']:>9.0f} "
                      f"{row['base_mib']:>10.0f} {row['seconds']:>8.1f}", flush=True)
            for (batch, impl), row in sorted(done.items()):
                if impl != "run":
                    continue
                for other in ("plain", "whole"):
                    if (batch, other) in done:
                        c = compare(row, done[(batch, other)])
                        checks.append(c)
                        print(f"{model:14} batch {batch:>3}: run vs {other:5} bit-equal {c['bit_equal']!s:5} "
                              f"max |diff| {c['max_abs_diff']:.3g} ({c['max_rel_to_largest']:.3g} of the "
                              f"largest output)")
        for row in rows:
            row.pop("output", None)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "checks": checks, "against": args.against}, indent=2))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
