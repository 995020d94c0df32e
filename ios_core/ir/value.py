"""Channel-slice values: ``Value(node, begin, end)`` is channels [begin, end) of a node's output."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .nodes import Node


class Value:
    """Channels ``[begin, end)`` of ``node``'s output: the one type for a channel range of a
    value (the IR's inputs, and the slices of a composed input, ``ios_core.lowering.Slice``)."""

    __slots__ = ("node", "begin", "end")

    def __init__(self, node: Node, begin: int, end: int):
        self.node = node
        self.begin = int(begin)
        self.end = int(end)

    @property
    def length(self) -> int:
        return self.end - self.begin

    channels = length

    @property
    def source(self) -> Node:
        """The node whose output this reads (``node``)."""
        return self.node

    @property
    def whole(self) -> bool:
        """Whether this is all of the node's output."""
        return self.begin == 0 and self.end == self.node.output_shape[0]

    def to_json(self) -> list:
        return [self.node.name, self.begin, self.end]

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Value)
            and other.node is self.node
            and other.begin == self.begin
            and other.end == self.end
        )

    def __hash__(self) -> int:
        return hash((id(self.node), self.begin, self.end))

    def __repr__(self) -> str:
        return f"({self.node.hint_name}:{self.begin}:{self.end})"


# ``inputs`` of a node: a list of terms, concatenated along channels; each term is a
# list of values of equal shape that are summed (or multiplied, for ``element`` mul).
Inputs = list[list[Value]]
