"""RandWire-WS (Xie et al., "Exploring Randomly Wired Neural Networks"), the large network of
the IOS paper: the regular-computation regime with C = 154 channels, random graphs from the
Watts-Strogatz model WS(N, K=4, P=0.75), N = 16 nodes in the first random stage and 32 in the
other three, 224x224 input. It follows the reference IOS implementation
(python/ios/models/randwire.py ``randwire_large``) except that

* the Watts-Strogatz graphs come from :func:`watts_strogatz` here, seeded with a numpy
  ``Generator`` (``seed``, stage index), instead of the reference's pre-generated files, so the
  wiring is the same on every run but not the reference's wiring;
* nodes are numbered and emitted in index order (a topological order of the DAG);
* the classifier ends with the paper's fully connected layer (1280 -> ``num_classes``);
* as in the reference, a node aggregates its inputs by a plain sum (the paper's learned
  positive weights are folded into the weights of the producing convolutions) and computes
  ReLU -> separable 3x3 convolution -> BN, with BN folded into the pointwise convolution's bias.

Blocks: the stem convolution, one block per random stage, the classifier.
"""

from __future__ import annotations

import numpy as np

from ios_core.ir import GraphBuilder
from ios_core.models.registry import register

STAGES = ((16, 1), (32, 2), (32, 4), (32, 8))  # (nodes, channel multiplier of C)


def watts_strogatz(n: int, k: int, p: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Undirected Watts-Strogatz small-world graph as sorted edges ``(i, j)``, ``i < j``.

    Ring lattice where each node joins its ``k/2`` neighbours on each side; then each node's
    ``k/2`` clockwise edges are rewired with probability ``p`` to a node chosen uniformly among
    those it is not yet adjacent to (the algorithm of the RandWire paper's generator). Rewiring
    keeps the number of edges at ``n*k/2``.
    """
    if k % 2 or not 0 < k < n:
        raise ValueError(f"watts_strogatz needs an even 0 < k < n, got n={n}, k={k}")
    adj = np.eye(n, dtype=bool)
    for i in range(n):
        for d in range(1, k // 2 + 1):
            j = (i + d) % n
            adj[i, j] = adj[j, i] = True
    draws = rng.random((n, k // 2))
    for i in range(n):
        for d in range(1, k // 2 + 1):
            if draws[i, d - 1] < p:
                free = np.flatnonzero(~adj[i])
                if free.size == 0:
                    continue
                j = int(rng.choice(free))
                cur = (i + d) % n
                adj[i, cur] = adj[cur, i] = False
                adj[i, j] = adj[j, i] = True
    return [(i, j) for i in range(n) for j in range(i + 1, n) if adj[i, j]]


def _relu_sep_conv(b: GraphBuilder, inputs, out_channels: int, stride: int):
    with b.sequential() as seq:
        x = b.relu(inputs)
        x = b.conv(x, x.length, 3, stride=stride, padding=1, groups=x.length, act="identity")
        b.conv(x, out_channels, 1, act="identity")
    return seq.output


def _stage(b: GraphBuilder, x, channels: int, n: int, edges):
    """One random stage: the DAG orients each edge from the lower to the higher node index;
    nodes without predecessors read the stage input at stride 2, the stage output sums the
    nodes without successors."""
    preds: list[list[int]] = [[] for _ in range(n)]
    has_succ = [False] * n
    for u, v in edges:
        preds[v].append(u)
        has_succ[u] = True
    out = []
    for u in range(n):
        if preds[u]:
            out.append(_relu_sep_conv(b, [[out[p] for p in preds[u]]], channels, 1))
        else:
            out.append(_relu_sep_conv(b, x, channels, 2))
    return b.end_block(b.identity([[out[u] for u in range(n) if not has_succ[u]]]))


def stage_graphs(seed: int = 0, k: int = 4, p: float = 0.75) -> list[tuple[int, list[tuple[int, int]]]]:
    """The (nodes, edges) of the four random stages for ``seed``."""
    return [(n, watts_strogatz(n, k, p, np.random.default_rng([seed, i]))) for i, (n, _) in enumerate(STAGES)]


def build_randwire(name: str, graphs, channels: int = 154, num_classes: int = 1000, image_size: int = 224):
    """RandWire regular regime from explicit stage graphs ``[(n, edges), ...]`` (four of them)."""
    b = GraphBuilder(name, (3, image_size, image_size))
    x = b.end_block(b.conv(b.input, channels // 2, 3, stride=2, padding=1, act="identity"))
    for (n, edges), (_, mult) in zip(graphs, STAGES):
        x = _stage(b, x, channels * mult, n, edges)
    x = b.relu(x)
    x = b.conv(x, 1280, 1, act="identity")
    x = b.global_avg_pool(x)
    b.end_block(b.linear(x, num_classes))
    return b.finish()


@register("randwire", "RandWire-WS large, C=154, seeded, 224x224")
def randwire(seed: int = 0, channels: int = 154, num_classes: int = 1000, image_size: int = 224):
    return build_randwire("randwire", stage_graphs(seed), channels, num_classes, image_size)
