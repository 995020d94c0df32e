"""The numerical oracle: a plain sequential evaluation of a graph with torch CPU ops.

Every runtime, schedule and adapter is checked against :func:`run`. It walks the graph in
order, node by node (``ios_core.lowering.lower``, the walk every converter shares, with plain
torch primitives and ``ios_core.kernels.apply``), and ignores any schedule the graph carries.
"""

from __future__ import annotations

import numpy as np
import torch

from .ir import Graph
from .kernels import TORCH_PRIMS, apply
from .lowering import lower


def run(graph: Graph, x: np.ndarray) -> np.ndarray:
    """Evaluate ``graph`` on ``x`` (N, C, H, W) float32 and return the exit node's output."""
    x = np.asarray(x, dtype=np.float32)
    if tuple(x.shape[1:]) != graph.input_shape:
        raise ValueError(f"input shape {tuple(x.shape[1:])} != graph input {graph.input_shape}")
    if not graph.has_weights:
        raise ValueError(f"graph {graph.name!r} has no weights: call graph.init_weights(seed)")
    with torch.inference_mode():
        out = lower(graph, torch.from_numpy(x), TORCH_PRIMS, apply)
        return out.contiguous().numpy().copy()


def random_input(graph: Graph, batch_size: int = 1, seed: int = 0) -> np.ndarray:
    """The seeded input every framework in a sweep receives: standard normal, float32."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch_size, *graph.input_shape), dtype=np.float32)
