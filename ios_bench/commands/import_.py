"""ios-bench import MODEL.onnx -o graph.json"""

from __future__ import annotations

from pathlib import Path

import click

from ios_bench.errors import InputError
from ios_bench.reporting.escape import one_line
from ios_bench.running.outputs import check_output_file


@click.command("import")
@click.argument("model", metavar="MODEL.onnx")
@click.option("-o", "--output", "output", metavar="GRAPH.json",
              help="where to write the graph JSON (default: MODEL.json beside the ONNX file); the weights go "
                   "beside it (GRAPH.npz)")
@click.option("--name", default=None, help="the graph's name (default: the file's stem)")
def command(model: str, output: str | None, name: str | None):
    """Import an ONNX model (a CNN classifier) into the IOS IR, with the file's weights.

    \b
    Writes GRAPH.json (the reference IOS layout) and GRAPH.npz (the weights) beside it; both
    then work wherever a model is named: `ios-bench run --models GRAPH.json`, `show`,
    `optimize`, `profile`, `export`. `--models MODEL.onnx` imports on the fly instead.
    A model with an operator or attribute the IR cannot represent is refused in one line
    (exit code 2) naming the operator, the node and every other unsupported operator type;
    docs/import.md lists what is supported.
    """
    src = Path(model)
    if not src.is_file():
        raise InputError(f"{model}: {'not a regular file' if src.exists() else 'no such file'}")
    path = Path(output) if output else src.with_suffix(".json")
    if path.suffix.lower() != ".json":
        raise InputError(f"{path}: the output file should end in .json")
    npz = path.with_suffix(".npz")
    # both outputs checked before any work: new, or a graph (weights) that ios-bench wrote
    check_output_file(path, "-o/--output", create_parents=False, kind="graph")
    check_output_file(npz, "-o/--output's weights", create_parents=False, kind="weights")
    try:
        from ios_core.frontend import onnx as onnx_frontend
    except ImportError as e:  # pragma: no cover - onnx is a dependency
        raise InputError(f"the onnx package is needed to import ({e})") from None
    graph = onnx_frontend.load(src, name=name)
    save_graph(graph, path)
    click.echo(f"wrote {path} and {npz.name}: {one_line(graph.name)}, input {graph.input_shape}, "
               f"{graph.num_operators()} operators in {len(graph.blocks)} blocks, {graph.macs() / 1e9:.3f} GMACs, "
               f"{graph.params() / 1e6:.2f} M params (the file's weights)")


def save_graph(graph, path: Path) -> None:
    """The weights first, then the JSON that names them: a failure leaves no half result (a new
    weights file is removed again)."""
    npz = path.with_suffix(".npz")
    existed = npz.exists()
    try:
        if graph.has_weights:
            graph.save_weights(npz)
        graph.save(path, weights=False)
    except OSError as e:
        if not existed:
            npz.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
