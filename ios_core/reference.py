"""The numerical oracle: a plain sequential evaluation of a graph with torch CPU ops.

Every runtime, schedule and adapter is checked against :func:`run`. It walks the graph in
order, node by node, and ignores any schedule the graph carries.
"""

from __future__ import annotations

import numpy as np
import torch

from .ir import Graph, leaf_nodes
from .kernels import apply, gather_input


def run(graph: Graph, x: np.ndarray) -> np.ndarray:
    """Evaluate ``graph`` on ``x`` (N, C, H, W) float32 and return the exit node's output."""
    x = np.asarray(x, dtype=np.float32)
    if tuple(x.shape[1:]) != graph.input_shape:
        raise ValueError(f"input shape {tuple(x.shape[1:])} != graph input {graph.input_shape}")
    if not graph.has_weights:
        raise ValueError(f"graph {graph.name!r} has no weights: call graph.init_weights(seed)")
    outputs: dict[str, torch.Tensor] = {graph.input.name: torch.from_numpy(x)}
    with torch.inference_mode():
        for block in graph.blocks:
            for node in block.nodes:
                for op in leaf_nodes(node):
                    outputs[op.name] = apply(op, gather_input(op, outputs))
                outputs[node.name] = outputs[leaf_nodes(node)[-1].name]
        return outputs[graph.exit_node.name].contiguous().numpy().copy()


def random_input(graph: Graph, batch_size: int = 1, seed: int = 0) -> np.ndarray:
    """The seeded input every framework in a sweep receives: standard normal, float32."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch_size, *graph.input_shape), dtype=np.float32)
