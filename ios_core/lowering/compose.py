"""Input composition, written once: how an operator's input is made from its predecessors.

An IR operator's ``inputs`` are a list of *terms* concatenated along channels; each term is a
list of channel slices ``[node, begin, end]`` of equal shape, summed (multiplied for
``element`` with ``op_type="mul"``). :func:`composition` describes that structurally (a
:class:`Composition` of :class:`Term` of :class:`Slice`, each slice knowing whether it reads
its source's whole output, each term its channel offset), and :func:`evaluate` computes it with
a framework's :class:`Primitives` (slice channels, add, multiply, concatenate). Every consumer
of the IR uses these two: the oracle (torch tensors), the adapters' converters (torch modules,
TensorFlow ops, Relax expressions), the ONNX exporter (ONNX node names) and the runtime's
planner (which reads the structure to decide which producers write straight into a
concatenation, and evaluates the rest with closure-building primitives).

An operator of two operands (``Node.OPERANDS``: a matrix product) has one term per operand; its
composed input is the tuple of the terms' values, never their concatenation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ios_core.ir import Node, Value

# A channel slice of a composed input is an IR value (``ios_core.ir.Value``: ``source``,
# ``begin``, ``end``, ``channels``, ``whole``): one type for "a channel range of a value".
Slice = Value


@dataclass(frozen=True)
class Term:
    """Slices of equal shape combined element-wise; the term fills channels
    ``[offset, offset + channels)`` of the composed input."""

    slices: tuple[Slice, ...]
    offset: int
    channels: int


@dataclass(frozen=True)
class Composition:
    """An operator's composed input: ``terms`` concatenated along channels, each term's slices
    combined with ``op`` (``"add"`` or ``"mul"``)."""

    terms: tuple[Term, ...]
    op: str
    channels: int
    operands: bool = False  # each term is a separate operand (Node.OPERANDS), not concatenated

    @property
    def slices(self) -> list[Slice]:
        return [s for t in self.terms for s in t.slices]

    @property
    def single(self) -> Slice | None:
        """The one slice when the input is one term of one slice (no arithmetic, no concat)."""
        if len(self.terms) == 1 and len(self.terms[0].slices) == 1:
            return self.terms[0].slices[0]
        return None

    @property
    def pass_through(self) -> bool:
        """The input is one predecessor's whole output, unchanged."""
        s = self.single
        return s is not None and s.whole

    @property
    def is_concat(self) -> bool:
        return len(self.terms) > 1 and not self.operands


def _combine_op(node: Node) -> str:
    return "mul" if node.TYPE == "element" and getattr(node, "op_type", "add") == "mul" else "add"


def composition(node: Node) -> Composition:
    """The structural description of ``node``'s input (shapes must be inferred)."""
    terms = []
    offset = 0
    for term in node.inputs:
        slices = tuple(Value(v.node, v.begin, v.end) for v in term)  # copies: later rewrites do not reach them
        width = slices[0].channels
        terms.append(Term(slices, offset, width))
        offset += width
    return Composition(tuple(terms), _combine_op(node), offset, node.OPERANDS)


@dataclass(frozen=True)
class Primitives:
    """How a framework composes values. ``add``/``mul`` get two or more equally shaped values
    (in input order); ``concat`` two or more values to join along channels."""

    slice_channels: Callable[[Any, int, int], Any]  # (t, begin, end) -> channels [begin, end)
    add: Callable[[list], Any]
    mul: Callable[[list], Any]
    concat: Callable[[list], Any]


def evaluate_term(term: Term, op: str, read: Callable[[Slice], Any], prims: Primitives) -> Any:
    """One term: its slices read (``read`` slices them) and combined with ``op``."""
    values = [read(s) for s in term.slices]
    if len(values) == 1:
        return values[0]
    return prims.mul(values) if op == "mul" else prims.add(values)


def evaluate(comp: Composition, read: Callable[[Slice], Any], prims: Primitives) -> Any:
    """The composed input: ``read(slice)`` gives each slice's value (already sliced), the
    terms are combined and concatenated with ``prims`` (for an operator of operands, the tuple
    of the terms' values)."""
    terms = [evaluate_term(t, comp.op, read, prims) for t in comp.terms]
    if comp.operands:
        return tuple(terms)
    return terms[0] if len(terms) == 1 else prims.concat(terms)


def reader(outputs: Mapping[str, Any], prims: Primitives) -> Callable[[Slice], Any]:
    """``read`` for :func:`evaluate` from computed outputs keyed by node name: a slice that
    is not the whole output goes through ``prims.slice_channels``."""
    def read(s: Slice) -> Any:
        t = outputs[s.source.name]
        return t if s.whole else prims.slice_channels(t, s.begin, s.end)
    return read


def compose(node: Node, outputs: Mapping[str, Any], prims: Primitives) -> Any:
    """``node``'s composed input from ``outputs`` (node name -> value)."""
    return evaluate(composition(node), reader(outputs, prims), prims)


__all__ = ["Composition", "Primitives", "Slice", "Term", "compose", "composition", "evaluate", "evaluate_term",
           "reader"]

