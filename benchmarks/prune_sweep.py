"""Pruning sweep: how r (max operators per group) and s (max groups per stage) trade search work
(#stages costed, seconds) against schedule quality (estimated latency), synthetic cost model.

    PYTHONPATH=. python benchmarks/prune_sweep.py                       # inception_v3, r=1..3, s=3,8
    PYTHONPATH=. python benchmarks/prune_sweep.py --models squeezenet,inception_v3 --batch 1,16

The paper's Figure (pruning) does the same with measured latencies on a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ios_core.cost import SyntheticCostModel  # noqa: E402
from ios_core.ir import Graph  # noqa: E402
from ios_core.optimizer import schedule  # noqa: E402


def load(spec: str) -> Graph:
    """A zoo model name or a graph JSON file."""
    if spec.endswith(".json") or Path(spec).is_file():
        return Graph.load(spec)
    from ios_core import models

    return models.get(spec)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="inception_v3")
    p.add_argument("--r", default="1,2,3", help="max_group_size values")
    p.add_argument("--s", default="3,8", help="max_num_groups values")
    p.add_argument("--strategy", default="both", choices=["parallel", "both"])
    p.add_argument("--batch", default="1", help="batch sizes")
    p.add_argument("--max-part-size", type=int, default=100)
    args = p.parse_args(argv)
    rs = [int(x) for x in args.r.split(",")]
    ss = [int(x) for x in args.s.split(",")]
    for spec in args.models.split(","):
        graph = load(spec)
        for batch in [int(b) for b in args.batch.split(",")]:
            seq = schedule(graph, "sequential", SyntheticCostModel(), batch_size=batch).stats.cost_ms
            print(f"# {graph.name}, batch {batch}, strategy {args.strategy}: sequential schedule {seq:.4f} ms")
            print(f"{'r':>3}{'s':>4}{'states':>9}{'transitions':>13}{'stages costed':>15}{'search s':>10}"
                  f"{'cost ms':>10}{'vs seq':>8}{'vs best':>9}")
            rows = []
            for r in rs:
                for s in ss:
                    res = schedule(graph, args.strategy, SyntheticCostModel(), batch_size=batch, max_group_size=r,
                                   max_num_groups=s, max_part_size=args.max_part_size)
                    rows.append((r, s, res.stats))
            best = min(st.cost_ms for _, _, st in rows)
            for r, s, st in rows:
                print(f"{r:>3}{s:>4}{st.states:>9}{st.transitions:>13}{st.stages_costed:>15}{st.search_seconds:>10.3f}"
                      f"{st.cost_ms:>10.4f}{seq / st.cost_ms:>7.2f}x{st.cost_ms / best:>8.3f}x", flush=True)


if __name__ == "__main__":
    main()
