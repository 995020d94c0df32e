"""Framework-neutral walking of an IOS graph, shared by the converters.

Each converter supplies a small set of primitives (slice channels, add, multiply, concatenate)
and a per-operator emitter; :func:`lower` walks the graph in the oracle's order (blocks, their
operators, Sequential nodes expanded) and returns the exit node's result. The same walk
serves eager evaluation (torch, TensorFlow tracing) and graph construction (the ONNX exporter),
so every converter reads channel-slice inputs exactly as ``ios_core.kernels.gather_input`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ios_core.ir import Graph, Node, leaf_nodes

# Node types every converter must handle (the zoo uses all of them).
SUPPORTED_TYPES = ("conv", "pool", "element", "identity", "activation", "relu", "flatten", "linear", "affine",
                   "shuffle", "resize", "sequential")


@dataclass
class Primitives:
    """How a framework composes a node's input from its predecessors' outputs."""

    slice_channels: Callable[[Any, int, int], Any]  # (t, begin, end) -> channels [begin, end)
    add: Callable[[list], Any]  # sum of >= 2 equally shaped tensors
    mul: Callable[[list], Any]  # product of >= 2 equally shaped tensors
    concat: Callable[[list], Any]  # >= 2 tensors concatenated along channels


def gather(node: Node, outputs: dict[str, Any], prims: Primitives) -> Any:
    """A node's input: each term's channel slices summed (multiplied for element mul), the
    terms concatenated along channels (the IR's input semantics)."""
    mul = node.TYPE == "element" and node.op_type == "mul"
    terms = []
    for term in node.inputs:
        values = []
        for v in term:
            t = outputs[v.node.name]
            if not (v.begin == 0 and v.end == v.node.output_shape[0]):
                t = prims.slice_channels(t, v.begin, v.end)
            values.append(t)
        if len(values) == 1:
            terms.append(values[0])
        else:
            terms.append(prims.mul(values) if mul else prims.add(values))
    return terms[0] if len(terms) == 1 else prims.concat(terms)


def lower(graph: Graph, x: Any, prims: Primitives, emit: Callable[[Node, Any], Any]) -> Any:
    """Walk ``graph`` from input ``x``: ``emit(op, composed_input)`` produces each operator's
    output. Returns the exit node's output."""
    unsupported = sorted({op.TYPE for op in graph.operators()} - set(SUPPORTED_TYPES))
    if unsupported:
        raise NotImplementedError(f"graph {graph.name!r} uses node types {unsupported} no converter handles")
    outputs: dict[str, Any] = {graph.input.name: x}
    for block in graph.blocks:
        for node in block.nodes:
            for op in leaf_nodes(node):
                outputs[op.name] = emit(op, gather(op, outputs, prims))
            outputs[node.name] = outputs[leaf_nodes(node)[-1].name]
    return outputs[graph.exit_node.name]


