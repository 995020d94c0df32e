"""How the ONNX importer's time grows with the network's size: it must be linear.

Builds synthetic ONNX CNNs of N operators (default 250, 500, 1000) out of one repeated unit
that exercises every rewrite pass of the import (``ios_core.ir.rewrite``):
``Conv -> BatchNormalization -> Relu`` (affine folding, activation fusion), a SiLU written as
``Mul(x, Sigmoid(x))``, a residual ``Add``, a ``Dropout`` whose mask output is unused, and a
side branch no later node reads (dead-code removal); every unit ends in a block cut. Each
size is imported ``--repeat`` times (``ios_core.frontend.onnx.load`` from the serialized
bytes, ONNX's own shape inference included); the median is printed with the time per ONNX
node and the ratio to the smallest size's per-node time (1.0 everywhere = linear).

    PYTHONPATH=. python benchmarks/bench_import.py
    PYTHONPATH=. python benchmarks/bench_import.py --nodes 250,500,1000,2000 --repeat 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from ios_core.measurement.stats import median  # noqa: E402 - the one median

UNIT_NODES = 10  # ONNX nodes per repeated unit


def make_model(nodes: int, channels: int = 8, size: int = 8, seed: int = 0):
    """An ONNX CNN of about ``nodes`` operators (a whole number of units; at least one)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    graph_nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    x = "input"
    for u in range(max(1, nodes // UNIT_NODES)):
        p = f"u{u}_"
        w = const(p + "w", rng.standard_normal((channels, channels, 3, 3)) * 0.1)
        b = const(p + "b", np.zeros(channels))
        graph_nodes += [
            helper.make_node("Conv", [x, w, b], [p + "conv"], pads=[1, 1, 1, 1], name=p + "conv"),
            helper.make_node("BatchNormalization",
                             [p + "conv", const(p + "g", np.ones(channels)), const(p + "be", np.zeros(channels)),
                              const(p + "m", np.zeros(channels)), const(p + "v", np.ones(channels))],
                             [p + "bn"], name=p + "bn"),
            helper.make_node("Relu", [p + "bn"], [p + "relu"], name=p + "relu"),
            helper.make_node("Conv", [p + "relu", const(p + "w2", rng.standard_normal((channels, channels, 1, 1))
                                                         * 0.1)], [p + "c2"], name=p + "c2"),
            helper.make_node("Sigmoid", [p + "c2"], [p + "sig"], name=p + "sig"),
            helper.make_node("Mul", [p + "c2", p + "sig"], [p + "silu"], name=p + "silu"),
            helper.make_node("Add", [p + "silu", x], [p + "res"], name=p + "res"),
            helper.make_node("Dropout", [p + "res"], [p + "drop", p + "mask"], name=p + "drop"),
            helper.make_node("Tanh", [p + "drop"], [p + "dead"], name=p + "dead"),  # read by nobody
            helper.make_node("Relu", [p + "drop"], [p + "out"], name=p + "out"),
        ]
        x = p + "out"
    graph = helper.make_graph(graph_nodes, "chain",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, channels, size, size])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, channels, size, size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", default="250,500,1000", help="comma-separated ONNX node counts")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None, help="also write the figures here")
    args = p.parse_args(argv)
    try:
        sizes = [int(s) for s in args.nodes.split(",") if s.strip()]
        if not sizes or min(sizes) < UNIT_NODES or args.repeat < 1:
            raise ValueError
    except ValueError:
        print(f"error: --nodes takes integers >= {UNIT_NODES}, --repeat an integer >= 1", file=sys.stderr)
        return 2
    from ios_core.frontend import onnx as onnx_frontend

    rows = []
    for n in sizes:
        data = make_model(n).SerializeToString()
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            g = onnx_frontend.load(data, name=f"chain{n}")
            times.append(time.perf_counter() - t0)
        med = median(times)
        rows.append({"onnx_nodes": (n // UNIT_NODES) * UNIT_NODES, "ir_operators": g.num_operators(),
                     "blocks": len(g.blocks), "median_s": med, "us_per_onnx_node": med / n * 1e6})
    base = rows[0]["us_per_onnx_node"]
    print(f"{'ONNX nodes':>10} {'IR ops':>7} {'blocks':>6} {'median s':>9} {'us/node':>8} {'vs first':>8}")
    for r in rows:
        r["per_node_ratio"] = r["us_per_onnx_node"] / base
        print(f"{r['onnx_nodes']:>10} {r['ir_operators']:>7} {r['blocks']:>6} {r['median_s']:>9.3f} "
              f"{r['us_per_onnx_node']:>8.0f} {r['per_node_ratio']:>8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
