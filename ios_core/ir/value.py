"""Channel ranges: :class:`ChannelRange` is channels ``[begin, end)`` of something; ``Value(node,
begin, end)`` is such a range of an IR node's output (and ``ios_core.runtime.plan.ValueRef`` one of
a runtime buffer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ios_core.ir.nodes import Node


class ChannelRange:
    """Channels ``[begin, end)`` along a tensor's channel axis: the one type of a channel range.
    A subclass says what the channels are of (its ``_range`` makes another range of the same)."""

    __slots__ = ()
    begin: int
    end: int

    @property
    def channels(self) -> int:
        return self.end - self.begin

    def narrow(self, begin: int, end: int):
        """Channels ``[begin, end)`` of this range (relative to its start)."""
        if not 0 <= begin <= end <= self.channels:
            raise ValueError(f"channels [{begin}, {end}) outside a range of {self.channels}")
        if begin == 0 and end == self.channels:
            return self
        return self._range(self.begin + begin, self.begin + end)

    def _range(self, begin: int, end: int):
        raise NotImplementedError


class Value(ChannelRange):
    """Channels ``[begin, end)`` of ``node``'s output: the one type for a channel range of a
    value (the IR's inputs, and the slices of a composed input, ``ios_core.lowering.Slice``)."""

    __slots__ = ("node", "begin", "end")

    def __init__(self, node: Node, begin: int, end: int):
        self.node = node
        self.begin = int(begin)
        self.end = int(end)

    length = ChannelRange.channels

    def _range(self, begin: int, end: int) -> Value:
        return Value(self.node, begin, end)

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
