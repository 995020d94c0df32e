"""ios-bench show MODEL_OR_JSON"""

from __future__ import annotations

import click

from ios_bench.planning.loading import load_graph
from ios_bench.reporting.escape import one_line, plain


@click.command("show")
@click.argument("model_or_json")
def command(model_or_json: str):
    """Print a graph (a zoo model name or a graph/schedule JSON file) in the reference IOS
    text form, with its schedule's stages when it has them (Parallel(...) groups)."""
    graph = load_graph(model_or_json)
    click.echo(plain(graph))
    stages = sum(len(b.stages) for b in graph.blocks) if graph.has_stages else None
    click.echo(f"# {one_line(graph.name)}: input {graph.input_shape}, {graph.num_operators()} operators, "
               f"{len(graph.blocks)} blocks, {graph.macs() / 1e9:.3f} GMACs, {graph.params() / 1e6:.2f} M params"
               + (f", {stages} stages" if stages is not None else ", no schedule (shown sequential)"))
