"""Property tests of the IOS dynamic program on random small DAGs.

For each random graph, strategy and cost model: the DP's total cost equals the minimum found by
a brute-force search that tries every subset of the remaining operators as the last stage
(checked against the stage definitions directly, without the DP's chain enumeration), and the
produced schedule is valid (each operator once, dependencies respected, group and stage limits
respected) and computes the oracle's output.
"""

from __future__ import annotations

import random
import zlib
from functools import cache

import numpy as np
import pytest

from ios_core import reference
from ios_core.check import compare
from ios_core.cost import SyntheticCostModel
from ios_core.ir import Conv, GraphBuilder, whole
from ios_core.optimizer import Stage, can_merge, graph_states, optimize, schedule, schedule_cost


# ---- random graphs -------------------------------------------------------------------------------------
def random_graph(seed: int, max_ops: int = 9):
    rng = random.Random(seed)
    b = GraphBuilder(f"rand{seed}", (rng.choice([3, 4, 6]), 8, 8))
    n_blocks = 1 if rng.random() < 0.7 else 2
    for _ in range(n_blocks):
        values = [b.input if not b.blocks else whole(b.blocks[-1].exit_node)]
        n_ops = rng.randint(2, max_ops if n_blocks == 1 else max(2, max_ops // 2))
        for i in range(n_ops - 1):
            kind = rng.random() if i else 0.0  # at least one convolution per block
            src = rng.choice(values[-3:] + values[:1]) if rng.random() < 0.5 else rng.choice(values)
            if kind < 0.6:
                k = rng.choice([1, 1, 3, 5])
                v = b.conv(src, rng.choice([2, 3, 4]), k, padding=k // 2, act=rng.choice(["relu", "relu", "identity"]))
            elif kind < 0.72:
                v = b.pool(src, rng.choice(["max", "avg"]), 3, 1, 1)
            elif kind < 0.86:
                same = [x for x in values if x.length == src.length and x is not src]
                v = b.add([src, rng.choice(same)]) if same else b.relu(src)
            else:
                others = rng.sample(values, min(len(values), rng.randint(2, 3)))
                v = b.concat(others)
            values.append(v)
        used = {id(val.node) for node_v in values for val in node_v.node.values()}
        sinks = [v for v in values[1:] if id(v.node) not in used]
        if rng.random() < 0.8 and len(sinks) > 1:
            b.end_block(b.concat(sinks))  # every operator reaches the exit
        else:
            b.end_block(values[-1])  # dead ends may remain
    return b.finish()


class HashCostModel:
    """Deterministic pseudo-random stage latencies: makes odd schedules optimal."""

    def stage_latency(self, stage, batch_size):
        key = stage.kind + "|" + "|".join(",".join(n.name for n in g) for g in stage.groups)
        h = zlib.crc32(key.encode())
        return 0.1 + (h % 1000) / 1000.0 * stage_size(stage) ** 0.5


def stage_size(stage):
    return sum(len(g) for g in stage.groups)


class CountingModel:
    def __init__(self, inner):
        self.inner = inner
        self.asked: list[tuple] = []

    def stage_latency(self, stage, batch_size):
        self.asked.append((stage.kind, tuple(tuple(n.name for n in g) for g in stage.groups)))
        return self.inner.stage_latency(stage, batch_size)


# ---- brute force ----------------------------------------------------------------------------------------
def brute_force(block, strategy, cost_model, r, s):
    nodes = block.nodes
    n = len(nodes)
    index = {id(nd): i for i, nd in enumerate(nodes)}
    succ = [set() for _ in range(n)]
    for i, nd in enumerate(nodes):
        for p in nd.predecessors():
            if id(p) in index:
                succ[index[id(p)]].add(i)
    exit_i = n - 1

    def desc_in(u, rem):
        out, todo = {u}, [u]
        while todo:
            x = todo.pop()
            for y in succ[x]:
                if y in rem and y not in out:
                    out.add(y)
                    todo.append(y)
        return out

    def parallel_groups(sub, rem):
        if any(not (succ[u] & rem) <= sub for u in sub):
            return None  # not an ending
        sources = [u for u in sorted(sub) if not any(u in succ[p] for p in sub)]
        groups = [desc_in(h, rem) for h in sources]
        if len(groups) > s or any(len(g) > r for g in groups):
            return None
        if sum(len(g) for g in groups) != len(sub) or set().union(*groups) != sub:
            return None  # overlapping groups
        return [sorted(g) for g in groups]

    def cost(kind, groups):
        return cost_model.stage_latency(Stage(kind, [[nodes[u] for u in g] for g in groups]), 1)

    @cache
    def best(rem_mask):
        rem = {i for i in range(n) if rem_mask >> i & 1}
        if not rem:
            return 0.0
        out = float("inf")
        items = sorted(rem)
        for bits in range(1, 1 << len(items)):
            sub = {items[j] for j in range(len(items)) if bits >> j & 1}
            sub_mask = sum(1 << u for u in sub)
            options = []
            if strategy in ("parallel", "both"):
                groups = parallel_groups(sub, rem)
                if groups is not None:
                    options.append(cost("parallel", groups))
            if strategy in ("merge", "both"):
                sinks = all(not (succ[u] & rem) for u in sub)
                if sinks and len(sub) == 1:
                    options.append(cost("parallel", [sorted(sub)]))
                elif sinks and exit_i not in sub and all(type(nodes[u]) is Conv for u in sub) \
                        and can_merge([nodes[u] for u in sorted(sub)]):
                    options.append(cost("merge", [[u] for u in sorted(sub)]))
            for c in options:
                out = min(out, c + best(rem_mask & ~sub_mask))
        return out

    return best((1 << n) - 1)


def check_schedule(graph, r, s):
    graph.validate()  # each operator once, dependencies respected
    for block in graph.blocks:
        assert block.stages
        for stage in block.stages:
            assert 1 <= len(stage) <= s
            for group in stage:
                assert 1 <= len(group) <= r


SEEDS = range(24)
STRATS = ("merge", "parallel", "both")


@pytest.mark.parametrize("seed", SEEDS)
def test_dp_equals_brute_force(seed):
    graph = random_graph(seed)
    rng = random.Random(seed)
    r, s = rng.choice([(1, 1), (2, 2), (3, 8), (2, 3), (3, 2)])
    for strategy in STRATS:
        for model in (SyntheticCostModel(), HashCostModel()):
            counting = CountingModel(model)
            res = schedule(graph, strategy, counting, max_group_size=r, max_num_groups=s)
            out = res.graph
            expected = sum(brute_force(block, strategy, model, r, s) for block in graph.blocks)
            assert res.stats.cost_ms == pytest.approx(expected, rel=1e-9, abs=1e-12), (strategy, r, s)
            assert len(set(counting.asked)) == len(counting.asked), "a stage was costed twice"
            assert res.stats.stages_costed == len(counting.asked)
            check_schedule(out, r, s)
            if isinstance(model, SyntheticCostModel):
                # merged convolutions cost the same as the merge stage they came from
                assert schedule_cost(out, SyntheticCostModel()) == pytest.approx(res.stats.cost_ms)


@pytest.mark.parametrize("seed", range(16))
def test_schedules_compute_the_oracle_output(seed):
    graph = random_graph(100 + seed).init_weights(seed)
    x = reference.random_input(graph, 2, seed)
    ref = reference.run(graph, x)
    before = graph.to_json()
    for strategy in ("sequential", "greedy", "merge", "parallel", "both"):
        for model in (SyntheticCostModel(), HashCostModel()):  # random costs pick merges and odd stages often
            out = optimize(graph, strategy, model, max_group_size=2, max_num_groups=3, max_part_size=4)
            check_schedule(out, 2, 3)
            result = compare(reference.run(out, x), ref, 1e-5)
            assert result.passed, (strategy, result.reason)
    assert graph.to_json() == before, "optimize must not modify its input"
    assert all(b.stages is None for b in graph.blocks)


def test_parts_split_large_blocks_and_stay_valid():
    graph = random_graph(7, max_ops=10)
    full = schedule(graph, "both", HashCostModel(), max_part_size=100)
    split = schedule(graph, "both", HashCostModel(), max_part_size=3)
    check_schedule(split.graph, 3, 8)
    n = sum(len(b.nodes) for b in graph.blocks)
    assert split.stats.parts >= (n + 2) // 3
    assert split.stats.cost_ms >= full.stats.cost_ms - 1e-12


def test_greedy_and_sequential_shapes():
    graph = random_graph(3)
    seq = optimize(graph, "sequential", SyntheticCostModel())
    assert all(len(st) == 1 and len(st[0]) == 1 for b in seq.blocks for st in b.stages)
    assert sum(len(b.stages) for b in seq.blocks) == graph.num_operators()
    greedy = optimize(graph, "greedy", SyntheticCostModel(), max_num_groups=2)
    check_schedule(greedy, 1, 2)
    first = greedy.blocks[0].stages[0]
    ready = [n.name for n in graph.blocks[0].nodes if all(p is graph.input for p in n.predecessors())]
    assert [g[0] for g in first] == ready[:2]


def test_synthetic_model_prefers_parallel_for_small_ops_only():
    cm = SyntheticCostModel()
    b = GraphBuilder("small", (16, 8, 8))
    a = b.conv(b.input, 16, 3, padding=1).node
    c = b.conv(b.input, 16, 3, padding=1).node
    small_par = cm.stage_latency(Stage("parallel", [[a], [c]]), 1)
    small_seq = cm.stage_latency(Stage("parallel", [[a]]), 1) + cm.stage_latency(Stage("parallel", [[c]]), 1)
    assert small_par < small_seq
    b = GraphBuilder("big", (256, 56, 56))
    a = b.conv(b.input, 256, 3, padding=1).node
    c = b.conv(b.input, 256, 3, padding=1).node
    big_par = cm.stage_latency(Stage("parallel", [[a], [c]]), 16)
    big_seq = cm.stage_latency(Stage("parallel", [[a]]), 16) + cm.stage_latency(Stage("parallel", [[c]]), 16)
    assert big_par > big_seq - 2 * cm.stage_ms  # no parallel gain beyond the saved synchronization
    assert cm.stage_latency(Stage("parallel", [[a]]), 16) == cm.stage_latency(Stage("parallel", [[a]]), 16)


def test_bad_arguments():
    graph = random_graph(1)
    with pytest.raises(ValueError, match="strategy"):
        optimize(graph, "fastest", SyntheticCostModel())
    with pytest.raises(ValueError, match="max_group_size"):
        optimize(graph, "both", SyntheticCostModel(), max_group_size=0)
    with pytest.raises(TypeError):
        optimize(graph, "both", object())


def test_random_graphs_cover_merges():
    merged = 0
    for seed in SEEDS:
        merged += schedule(random_graph(seed), "merge", HashCostModel()).stats.merged
    assert merged > 0
    assert np.isfinite(merged)


@pytest.mark.parametrize("seed", range(8))
def test_state_count_is_the_number_of_down_sets(seed, capsys):
    from ios_core.optimizer.dp import count_states, descendants
    from ios_core.optimizer.optimize import _block_edges

    graph = random_graph(200 + seed, max_ops=10)
    # a state is a non-empty set S with: u in S and v an ancestor of u => v in S
    expected = 0
    for block in graph.blocks:
        n = len(block.nodes)
        desc = descendants(_block_edges(block))
        here = sum(1 for m in range(1, 1 << n)
                   if all(not (m >> u & 1) or all(m >> v & 1 for v in range(n) if desc[v] >> u & 1)
                          for u in range(n)))
        assert count_states((1 << n) - 1, desc) == here
        expected += here
    assert graph_states(graph) == expected  # the public count (the estimate's) without a search
    for part in (3, 5):  # cut in parts: each part's states, as the DP solves them
        assert graph_states(graph, part) == schedule(graph, "both", SyntheticCostModel(),
                                                     max_part_size=part).stats.states
    for strategy in ("merge", "parallel", "both"):
        res = schedule(graph, strategy, SyntheticCostModel(), progress=True)
        assert res.stats.states == expected
    assert "IOS" in capsys.readouterr().err  # the progress bar went to stderr
