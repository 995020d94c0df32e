"""The graph walk every converter shares: operators in the oracle's order, inputs composed
once (:mod:`ios_core.lowering.compose`), each operator handed to a framework's emitter.

    out = lower(graph, x, prims, emit)       # emit(op, composed_input) -> op's output

serves eager evaluation (the oracle, torch, TensorFlow tracing) and graph construction (the
ONNX exporter, TVM's Relax builder). :func:`lower_nodes` does the same for a piece of a graph
(some of its operators, fed with the outputs of others): what a runtime kernel provider
compiles.

Adding an operator type: define the IR node (``ios_core/ir/nodes.py``, registered in
``NODE_TYPES``: :data:`SUPPORTED_TYPES` derives from it) and give every emitter, an
:class:`~ios_core.ir.visitor.OpVisitor`, a ``visit_<type>`` method or a declared refusal
(docs/architecture.md, "Adding an operator"). The runtime's torch emitter falls back to
``ios_core.kernels.apply`` for a type it has no fast path for, and the composition of inputs
needs nothing new.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ios_core.ir import NODE_TYPES, Graph, Node, leaf_nodes
from ios_core.lowering.compose import Primitives, compose

# Node types every converter handles: every type of the IR but the input placeholder.
SUPPORTED_TYPES = tuple(t for t in NODE_TYPES if t != "placeholder")

Emit = Callable[[Node, Any], Any]


def check_supported(nodes: Iterable[Node], what: str, supported: Iterable[str] = SUPPORTED_TYPES) -> None:
    """Refuse, naming them, node types no converter handles."""
    unsupported = sorted({n.TYPE for n in nodes} - set(supported))
    if unsupported:
        raise NotImplementedError(f"{what} uses node types {unsupported} no converter handles")


def schedulable_nodes(graph: Graph) -> Iterator[Node]:
    """The schedulable nodes of ``graph`` (Sequential nodes unexpanded), in block order."""
    for block in graph.blocks:
        yield from block.nodes


def lower_nodes(nodes: Iterable[Node], inputs: Mapping[str, Any], prims: Primitives, emit: Emit) -> dict[str, Any]:
    """Emit ``nodes`` (schedulable nodes in a valid order; Sequential nodes expanded) whose
    inputs are ``inputs`` (node name -> value) or each other's outputs. Returns every value by
    node name: ``inputs``, each operator's output, and each Sequential's (its last operator's)."""
    outputs: dict[str, Any] = dict(inputs)
    for node in nodes:
        ops = leaf_nodes(node)
        for op in ops:
            outputs[op.name] = emit(op, compose(op, outputs, prims))
        outputs[node.name] = outputs[ops[-1].name]
    return outputs


def lower(graph: Graph, x: Any, prims: Primitives, emit: Emit,
          supported: Iterable[str] = SUPPORTED_TYPES) -> Any:
    """Walk ``graph`` from input ``x``; returns the exit node's output."""
    check_supported(graph.operators(), f"graph {graph.name!r}", supported)
    outputs = lower_nodes(schedulable_nodes(graph), {graph.input.name: x}, prims, emit)
    return outputs[graph.exit_node.name]
