"""Every zoo model and every strategy: the scheduled graph computes the oracle's output; the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ios_core import models, reference
from ios_core.check import compare
from ios_core.cost import SyntheticCostModel, make_cost_model
from ios_core.ir import Graph, GraphBuilder
from ios_core.optimizer import STRATEGIES, Schedule, optimize, schedule, schedule_cost

FAST = {"sample", "squeezenet"}


def inception_like() -> Graph:
    """Two inception-style blocks: 1x1 / 1x1->3x3 / 1x1->5x5 / pool->1x1 branches, concatenated."""
    b = GraphBuilder("mini_inception", (8, 12, 12))
    x = b.input
    for width in (4, 6):
        a = b.conv(x, width, 1)
        c = b.conv(b.conv(x, width, 1), width, 3, padding=1)
        d = b.conv(b.conv(x, width // 2, 1), width, 5, padding=2)
        p = b.conv(b.pool(x, "avg", 3, 1, 1), width, 1)
        x = b.end_block(b.concat([a, c, d, p]))
    return b.finish()


def _check_all_strategies(graph: Graph, batch_size: int = 1):
    graph = graph if graph.has_weights else graph.init_weights(0)
    x = reference.random_input(graph, batch_size, 0)
    ref = reference.run(graph, x)
    results = {}
    for strategy in STRATEGIES:
        res = schedule(graph, strategy, SyntheticCostModel(), batch_size=batch_size)
        out = res.graph
        assert out.has_stages and out.validate() is out
        assert not hasattr(out, "optimize_stats")  # statistics are returned, not attached
        assert isinstance(res.schedule, Schedule) and len(res.schedule) == res.stats.num_stages
        check = compare(reference.run(out, x), ref)
        assert check.passed, (graph.name, strategy, check.reason)
        results[strategy] = res
    costs = {s: results[s].stats.cost_ms for s in STRATEGIES}
    # the DP searches spaces that contain the sequential schedule
    for s in ("merge", "parallel", "both"):
        assert costs[s] <= costs["sequential"] + 1e-9
    assert costs["both"] <= min(costs["merge"], costs["parallel"]) + 1e-9
    return results


def test_inception_like_graph_all_strategies_match_oracle():
    results = _check_all_strategies(inception_like(), batch_size=2)
    merged = schedule(inception_like().init_weights(1), "merge", SyntheticCostModel(launch_ms=0.05))
    assert merged.stats.merged >= 1  # the three 1x1 convolutions on the block input merge
    assert results["parallel"].stats.states > 0


@pytest.mark.parametrize("name", sorted(FAST))
def test_fast_zoo_models(name):
    _check_all_strategies(models.get(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in models.default_names() if n not in FAST])
def test_every_zoo_model(name):
    _check_all_strategies(models.get(name))


def test_merge_transform_builds_weights_and_slices():
    graph = inception_like().init_weights(3)
    res = schedule(graph, "merge", SyntheticCostModel(launch_ms=0.05))
    out = res.graph
    merged = [n for n in out.operators() if n.name.endswith("_merged")]
    assert merged, "expected a merged convolution"
    for conv in merged:
        assert conv.weight is not None and conv.weight.shape == conv.weight_shape
    readers = [v for n in out.operators() for v in n.values() if v.node in merged]
    assert readers and any(v.begin > 0 for v in readers)  # consumers read their channel slice
    # the input graph is untouched and the schedule round-trips through JSON
    assert not any(n.name.endswith("_merged") for n in graph.operators())
    again = Graph.from_json(json.loads(json.dumps(out.to_json())))
    assert [b.stages for b in again.blocks] == [b.stages for b in out.blocks]
    assert schedule_cost(again, SyntheticCostModel(launch_ms=0.05)) == pytest.approx(res.stats.cost_ms)


def test_make_cost_model():
    assert isinstance(make_cost_model("synthetic", launch_ms=0.01), SyntheticCostModel)
    with pytest.raises(ValueError, match="unknown cost model"):
        make_cost_model("psychic")
    try:
        import ios_core.cost.measured  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="measured"):
            make_cost_model("measured")


def test_reference_schedule_file_reoptimizes():
    graph = Graph.load("tests/data/tiny_schedule.json")
    res = schedule(graph, "both", SyntheticCostModel())
    assert res.graph.has_stages and res.stats.cost_ms > 0


def test_cli_optimize_writes_a_loadable_schedule(tmp_path):
    from ios_bench.cli import cli

    target = tmp_path / "sched.json"
    stats = tmp_path / "stats.json"
    runner = CliRunner()
    res = runner.invoke(cli, ["optimize", "--model", "sample", "--strategy", "both", "-r", "2", "-s", "4",
                              "--weights-seed", "0", "-o", str(target), "--stats-json", str(stats)])
    assert res.exit_code == 0, res.output
    assert "states" in res.output and "stages costed" in res.output
    loaded = Graph.load(target)
    assert loaded.has_stages and loaded.has_weights
    data = json.loads(stats.read_text())
    assert data["strategy"] == "both" and data["r"] == 2 and data["s"] == 4 and data["stages_costed"] > 0
    original = models.get("sample").init_weights(0)
    x = reference.random_input(original, 1, 0)
    assert compare(reference.run(loaded, x), reference.run(original, x)).passed
    shown = runner.invoke(cli, ["show", str(target)])
    assert shown.exit_code == 0 and "stages" in shown.output


def test_cli_optimize_bad_input():
    from ios_bench.cli import main

    with pytest.raises(SystemExit) as e:
        main(["optimize", "--model", "sample", "--cost-option", "nonsense"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["optimize", "--model", "no_such_model"])
    assert e.value.code == 2


def test_chained_merges_read_slices_of_an_earlier_merge():
    b = GraphBuilder("chain", (5, 9, 9))
    x = b.input
    a = b.conv(x, 4, 1)
    c = b.conv(x, 3, 3, padding=1)
    d = b.conv(a, 2, 3, padding=1)
    e = b.conv(a, 3, 1)
    b.end_block(b.concat([c, d, e]))
    graph = b.finish().init_weights(5)
    out = optimize(graph, "merge", SyntheticCostModel(launch_ms=1.0))  # launches dominate: merge all
    merged = [n for n in out.operators() if n.name.endswith("_merged")]
    assert len(merged) == 2
    first, second = merged
    assert [(v.node, v.begin, v.end) for v in second.values()] == [(first, 0, 4)]
    x_in = reference.random_input(graph, 2, 1)
    assert compare(reference.run(out, x_in), reference.run(graph, x_in), 1e-5).passed
