"""Hypothesis property tests of the IOS dynamic program and the typed schedule it returns.

Random DAGs are drawn operator by operator (kind, inputs, sizes), so a failing case shrinks to
a small graph. Properties: the DP's optimum equals a brute-force search's (for every strategy
the DP serves); the schedule is a valid topological order of stages covering every operator
exactly once, within the group limits; it round-trips through the reference JSON layout.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ios_core.cost import SyntheticCostModel
from ios_core.ir import Graph, GraphBuilder, whole
from ios_core.optimizer import STRATEGIES, Schedule, Stage, schedule, schedule_cost
from tests.test_optimizer_dp import HashCostModel, brute_force


@st.composite
def dags(draw, max_ops: int = 7):
    """A one- or two-block graph whose operators read earlier values (drawn, so it shrinks)."""
    b = GraphBuilder("hyp", (draw(st.sampled_from([3, 4])), 6, 6))
    n_blocks = draw(st.integers(1, 2))
    for _ in range(n_blocks):
        values = [b.input if not b.blocks else whole(b.blocks[-1].exit_node)]
        n_ops = draw(st.integers(1, max_ops if n_blocks == 1 else max(1, max_ops // 2)))
        for i in range(n_ops):
            kind = draw(st.sampled_from(["conv", "conv", "pool", "add", "concat", "relu"])) if i else "conv"
            src = values[draw(st.integers(0, len(values) - 1))]
            if kind == "conv":
                k = draw(st.sampled_from([1, 3]))
                act = draw(st.sampled_from(["relu", "identity"]))
                v = b.conv(src, draw(st.integers(2, 4)), k, padding=k // 2, act=act)
            elif kind == "pool":
                v = b.pool(src, draw(st.sampled_from(["max", "avg"])), 3, 1, 1)
            elif kind == "add":
                same = [x for x in values if x.length == src.length and x is not src]
                v = b.add([src, same[draw(st.integers(0, len(same) - 1))]]) if same else b.relu(src)
            elif kind == "concat":
                other = values[draw(st.integers(0, len(values) - 1))]
                v = b.concat([src, other])
            else:
                v = b.relu(src)
            values.append(v)
        used = {id(val.node) for node_v in values for val in node_v.node.values()}
        sinks = [v for v in values[1:] if id(v.node) not in used]
        if len(sinks) > 1 and draw(st.booleans()):
            b.end_block(b.concat(sinks))
        else:
            b.end_block(b.relu(values[-1]))
    return b.finish()


def assert_valid_schedule(graph: Graph, sched: Schedule, r: int, s: int) -> None:
    """Stages in a topological order, every operator of every block exactly once."""
    assert len(sched.blocks) == len(graph.blocks)
    for block, stages in zip(graph.blocks, sched.blocks):
        inside = {n.name for n in block.nodes}
        done = {block.enter_node.name}
        seen: list[str] = []
        for stage in stages:
            assert isinstance(stage, Stage) and stage.kind == "parallel"
            assert 1 <= len(stage.groups) <= s
            for group in stage.groups:
                assert 1 <= len(group) <= r
                earlier = set()
                for node in group:
                    for p in node.predecessors():
                        assert p.name in done or p.name in earlier or p.name not in inside, (node.name, p.name)
                    earlier.add(node.name)
                    seen.append(node.name)
            done.update(n.name for g in stage.groups for n in g)
        assert sorted(seen) == sorted(inside) and len(seen) == len(set(seen))


LIMITS = st.sampled_from([(1, 1), (2, 2), (3, 8), (2, 3), (3, 2)])
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(graph=dags(), limits=LIMITS, hashed=st.booleans())
def test_dp_optimum_equals_brute_force(graph, limits, hashed):
    r, s = limits
    model = HashCostModel() if hashed else SyntheticCostModel()
    for strategy in ("merge", "parallel", "both"):
        res = schedule(graph, strategy, model, max_group_size=r, max_num_groups=s)
        expected = sum(brute_force(block, strategy, model, r, s) for block in graph.blocks)
        assert abs(res.stats.cost_ms - expected) <= 1e-9 * max(1.0, expected), (strategy, r, s)


@SETTINGS
@given(graph=dags(), limits=LIMITS, strategy=st.sampled_from(STRATEGIES))
def test_schedules_are_valid_and_round_trip(graph, limits, strategy):
    r, s = limits
    model = HashCostModel()
    res = schedule(graph, strategy, model, max_group_size=r, max_num_groups=s)
    sched = res.schedule
    if strategy in ("sequential", "greedy"):
        r = 1
    assert_valid_schedule(res.graph, sched, r, s)
    assert len(sched) == res.stats.num_stages
    # the reference layout carries it unchanged, and it applies back onto a fresh copy
    again = Graph.from_json(json.loads(json.dumps(res.graph.to_json())))
    assert Schedule.of(again).names() == sched.names()
    bare = Graph.from_json(json.loads(json.dumps(res.graph.to_json())))
    for block in bare.blocks:
        block.stages = None
    assert Schedule.sequential(bare).names() == [b.sequential_stages() for b in bare.blocks]
    assert Schedule.of(sched.apply(bare)).names() == sched.names()
    if strategy not in ("merge", "both"):  # no merged convolutions: the same stages, the same costs
        assert abs(schedule_cost(res.graph, model) - res.stats.cost_ms) <= 1e-9 * max(1.0, res.stats.cost_ms)
