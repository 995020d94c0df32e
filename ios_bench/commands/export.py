"""ios-bench export MODEL_OR_JSON -o model.onnx [--batch B | --dynamic-batch] [--opset N] [--seed S]"""

from __future__ import annotations

from pathlib import Path

import click

from ios_bench.errors import InputError
from ios_bench.planning.loading import load_graph
from ios_bench.reporting.escape import one_line
from ios_bench.running.outputs import check_output_file


@click.command("export")
@click.argument("model_or_json")
@click.option("-o", "--output", "output", metavar="FILE.onnx", help="where to write the ONNX model (required)")
@click.option("--batch", "batch", metavar="B", default="1", show_default=True,
              help="fixed batch size of the model's input")
@click.option("--dynamic-batch", is_flag=True, help="make the batch dimension dynamic ('N') instead")
@click.option("--opset", metavar="N", default=None, help="ONNX opset (default: the exporter's, 17)")
@click.option("--seed", metavar="S", default="0", show_default=True,
              help="weights seed, used when the graph has no saved weights (.npz beside its JSON)")
def command(model_or_json: str, output: str | None, batch: str, dynamic_batch: bool, opset: str | None, seed: str):
    """Export a zoo model or a graph/schedule JSON file, with its weights, to ONNX (NCHW float32,
    input 'input', output 'output'). The same exporter feeds the onnxruntime and openvino adapters."""
    from ios_core.lowering.onnx import DEFAULT_OPSET, MIN_OPSET, export

    if not output:
        raise InputError("missing -o/--output FILE.onnx")
    batch = _int(batch, "--batch", minimum=1)
    seed = _int(seed, "--seed", minimum=0)
    opset = DEFAULT_OPSET if opset is None else _int(opset, "--opset", minimum=1)
    if opset < MIN_OPSET:
        raise InputError(f"--opset {opset} is too old: the exporter needs {MIN_OPSET} or newer")
    path = Path(output)
    if path.suffix.lower() != ".onnx":
        raise InputError(f"{output}: the output file should end in .onnx")
    check_output_file(path, "-o/--output", create_parents=False, kind="onnx")
    try:
        import onnx  # noqa: F401
    except ImportError as e:
        raise InputError(f"the onnx package is needed to export ({e})") from None
    graph = load_graph(model_or_json)
    graph.check_fits(batch)
    weights = "saved weights"
    if not graph.has_weights:
        graph.init_weights(seed)
        weights = f"weights seed {seed}"
    model = export(graph, None if dynamic_batch else batch, path=path, opset=opset)
    size = path.stat().st_size
    click.echo(f"wrote {path}: {one_line(graph.name)}, batch {'N (dynamic)' if dynamic_batch else batch}, "
               f"opset {opset}, "
               f"{len(model.graph.node)} ONNX nodes, {graph.params() / 1e6:.2f} M params ({weights}), "
               f"{size / 2**20:.1f} MiB")


def _int(text: str, option: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{option} {text!r} is not an integer") from None
    if value < minimum:
        raise InputError(f"{option} must be >= {minimum}, got {value}")
    return value
