"""ios-bench optimize --model M --batch B --strategy S [-o schedule.json]"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ios_bench.errors import InputError
from ios_bench.planning.loading import load_graph
from ios_bench.planning.options import SEED, finite_json
from ios_bench.reporting.escape import one_line
from ios_bench.running.outputs import check_output_file
from ios_core.cost import COST_KINDS, make_cost_model
from ios_core.ir import atomic_write_text
from ios_core.optimizer import DEFAULT_MAX_PART_SIZE, STRATEGIES, schedule

# What the optimizer's figure is, per cost model: never a measured latency of the schedule.
ESTIMATE_LABELS = {"synthetic": "estimate (synthetic cost model, uncalibrated)",
                   "measured": "predicted latency (sum of measured stage latencies)"}
ESTIMATE_NOTES = {"synthetic": "an estimate from an analytical model not calibrated to this machine, not a "
                               "measured latency; time the schedule with `ios-bench profile --schedule FILE`",
                  "measured": "an estimate composed from stages timed one by one, not a timed run of the whole "
                              "schedule; time it with `ios-bench profile --schedule FILE`"}


def _parse_options(pairs: tuple[str, ...]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"bad --cost-option {pair!r}: expected KEY=VALUE")
        try:
            out[key] = finite_json(value)
        except json.JSONDecodeError:
            out[key] = value
        except ValueError as e:
            raise InputError(f"bad --cost-option {pair!r}: {e}") from None
    return out


@click.command("optimize")
@click.option("--model", "-m", "model", required=True, help="zoo model name, graph JSON file or .onnx model")
@click.option("--batch", "-b", "batch_size", type=click.IntRange(min=1), default=1, show_default=True,
              help="batch size to optimize for")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="both", show_default=True,
              help="sequential | greedy | merge (IOS-Merge) | parallel (IOS-Parallel) | both (IOS-Both)")
@click.option("--max-group-size", "-r", type=click.IntRange(min=1), default=3, show_default=True,
              help="most operators in one group of a parallel stage (pruning r)")
@click.option("--max-num-groups", "-s", type=click.IntRange(min=1), default=8, show_default=True,
              help="most groups in one parallel stage (pruning s)")
@click.option("--max-part-size", type=click.IntRange(min=1), default=DEFAULT_MAX_PART_SIZE, show_default=True,
              help="blocks with more operators are split into parts searched one after another")
@click.option("--cost", "cost_kind", type=click.Choice(COST_KINDS), default="synthetic", show_default=True,
              help="cost model: analytical (synthetic) or timed on a device (measured)")
@click.option("--cost-option", "cost_options", multiple=True, metavar="KEY=VALUE",
              help="option for the cost model, e.g. launch_ms=0.01 (synthetic) or mode=composed (measured); on a "
                   "GPU device=cuda (stages timed as CUDA-graph replays, as IOS cells run; cuda_graph=false for "
                   "launches); repeatable")
@click.option("--weights-seed", type=SEED, default=None,
              help="initialize weights with this seed (if the graph has none) and save them beside the schedule")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="schedule file to write (reference IOS JSON); default: print the stats only")
@click.option("--stats-json", type=click.Path(dir_okay=False), default=None, help="also write the statistics as JSON")
@click.option("--progress/--no-progress", default=None, help="progress bar (default: when stderr is a terminal)")
def command(model, batch_size, strategy, max_group_size, max_num_groups, max_part_size, cost_kind, cost_options,
            weights_seed, output, stats_json, progress):
    """Schedule a network with IOS (or a baseline) and write the schedule file.

    The schedule file is the reference implementation's JSON layout (the graph, with merged
    convolutions applied and a ``stages`` list per block); ``ios-bench show FILE`` prints it.
    """
    if output:
        check_output_file(output, "-o/--output", kind="graph")
        check_output_file(Path(output).with_suffix(".npz"), "-o/--output's weights", kind="weights")
    if stats_json:
        check_output_file(stats_json, "--stats-json", kind="stats")
        if output and Path(stats_json).resolve() == Path(output).resolve():
            raise InputError("--stats-json and -o name the same file")
    graph = load_graph(model)
    graph.check_fits(batch_size)
    if weights_seed is not None and not graph.has_weights:
        graph.init_weights(weights_seed)
    try:
        cost_model = make_cost_model(cost_kind, **_parse_options(cost_options))
    except (TypeError, ValueError, RuntimeError) as e:
        raise InputError(f"cost model {cost_kind!r}: {e}") from None
    if progress is None:
        progress = sys.stderr.isatty()
    result = schedule(graph, strategy, cost_model, batch_size=batch_size, max_group_size=max_group_size,
                      max_num_groups=max_num_groups, max_part_size=max_part_size, progress=progress)
    scheduled, stats = result.graph, result.stats
    click.echo(f"{one_line(graph.name)}: {graph.num_operators()} operators in {len(graph.blocks)} blocks, cost model "
               f"{stats.cost_model}")
    click.echo(f"  search: {stats.states} states, {stats.transitions} transitions, {stats.stages_costed} stages "
               f"costed, {stats.search_seconds:.3f} s")
    click.echo(f"  schedule ({strategy}, batch {batch_size}, r={max_group_size}, s={max_num_groups}): "
               f"{stats.num_stages} stages, {stats.merged} merged convolutions")
    click.echo(f"  {ESTIMATE_LABELS[cost_kind]}: {stats.cost_ms:.4f} ms ({ESTIMATE_NOTES[cost_kind]})")
    if getattr(stats, "validation", None):
        from ios_core.optimizer.optimize import validation_text

        click.echo(f"  validation: {validation_text(stats.validation)}")
    if stats_json:
        atomic_write_text(Path(stats_json), json.dumps({**stats.to_dict(), "cost_ms_is": ESTIMATE_NOTES[cost_kind]},
                                                       indent=2))
    if output:
        scheduled.save(output, weights=scheduled.has_weights)
        click.echo(f"  wrote {output}" + (f" (+ {Path(output).with_suffix('.npz').name})"
                                          if scheduled.has_weights else ""))
