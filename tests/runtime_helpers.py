"""Graphs, schedules and checks the tests share (one place: ``mixed_graph``, ``check_runtime``;
the ``mixed`` fixture is in ``conftest.py``)."""

from __future__ import annotations

import copy

from ios_core.check import compare
from ios_core.ir import Graph, GraphBuilder, Value
from ios_core.models.coverage import level_schedule  # noqa: F401  (the tests' most parallel schedule)
from ios_core.reference import random_input
from ios_core.reference import run as oracle


def check_runtime(graph: Graph, schedule: Graph, batch: int, provider: str = "torch", threads: int = 2, **kw):
    """The runtime of ``schedule`` (``provider``'s kernels) computes what the oracle computes on
    ``graph``, for two inputs (plan once, run many); returns the runtime."""
    from ios_core.runtime import Runtime

    rt = Runtime(schedule, batch, provider=provider, threads=threads, **kw)
    for seed in (batch, batch + 10):
        x = random_input(graph, batch, seed=seed)
        res = compare(rt.run(x), oracle(graph, x))
        assert res.passed, f"{provider}: {res.reason}"
    return rt


def mixed_graph(channels: int = 8, size: int = 6) -> Graph:
    """Every operator kind the runtime runs: slices, sums, products, pass-through identities,
    concatenations of whole outputs and of slices, a Sequential, activations, pools, linear."""
    b = GraphBuilder("mixed", (channels, size, size))
    x = b.input
    a = b.conv(x, channels, 3, padding=1)
    c = b.conv(x, channels, 1, act="identity")
    with b.sequential() as seq:
        r = b.relu(x)
        b.conv(r, channels, 3, padding=1, act="sigmoid")
    s = seq.output
    d = b.conv(Value(a.node, 0, channels // 2), channels // 2, 1, act="tanh")
    e = b.add([a, c])
    m = b.mul([c, s])
    cat = b.concat([a, c, s, d])  # d written in place, the others too
    b.end_block(cat)
    y = b.conv(Value(b.blocks[-1].exit_node, 0, 2 * channels), channels, 1)
    y2 = b.conv(Value(b.blocks[-1].exit_node, channels, 3 * channels), channels, 3, padding=1)
    t = b.add([y, y2])
    cat2 = b.concat([t, Value(b.blocks[-1].exit_node, 0, channels), y2])  # one slice copied
    p = b.max_pool(cat2, 3, 2, 1)
    q = b.avg_pool(cat2, 3, 2, 1)
    b.end_block(b.concat([p, q]))
    g1 = b.pool(Value(b.blocks[-1].exit_node, 0, 6 * channels), "global_max")
    g2 = b.global_avg_pool(Value(b.blocks[-1].exit_node, 0, 6 * channels))
    f = b.flatten(b.add([g1, g2]))
    act = b.activation(f, "tanh")
    b.end_block(b.linear(act, 10))
    del e, m
    return b.finish()


def fan_graph(channels: int = 8):
    """Three parallel convolutions of one input, concatenated: the graph and its block's nodes."""
    b = GraphBuilder("fan", (channels, 10, 10))
    x = b.input
    outs = [b.conv(x, channels, k, padding=k // 2) for k in (1, 3, 3)]
    b.end_block(b.concat(outs))
    g = b.finish()
    return g, g.blocks[0].nodes


def sequential_schedule(graph: Graph) -> Graph:
    g = Graph.from_json(copy.deepcopy(graph.to_json()))
    _copy_weights(graph, g)
    for block in g.blocks:
        block.stages = block.sequential_stages()
    return g.validate()


def _copy_weights(src: Graph, dst: Graph) -> None:
    if src.has_weights:
        for a, b in zip(src.weighted_nodes(), dst.weighted_nodes()):
            b.set_weights(a.weights())


def fan_stage_timed_at_fp32(db_path, provider: str):
    """A two-branch parallel stage of :func:`fan_graph`, its fp32 figure measured into a profile database at
    ``db_path`` on ``provider``: what a search at another precision must not reuse. Returns (the stage, the
    database, the fp32 cost model, the fast measuring settings a test builds its other model with)."""
    from ios_core.cost.cache import ProfileCache
    from ios_core.cost.measured import MeasuredCostModel
    from ios_core.optimizer.stage import Stage

    _, nodes = fan_graph()
    stage = Stage("parallel", [[nodes[0]], [nodes[1]]])
    fast = dict(warmup=1, number=1, repeat=2, min_sample_ms=None, mode="stage", provider=provider, threads=2)
    db = ProfileCache(db_path)
    fp32 = MeasuredCostModel(cache=db, **fast)
    fp32.stage_latency(stage, 1)
    return stage, db, fp32, fast
