"""Typed schedules: a :class:`Schedule` is the stages of every block, each :class:`Stage` a
list of groups of IR nodes.

A stage's ``kind`` is ``"parallel"`` (the groups run concurrently, each group's operators in
order) or ``"merge"`` (one group per original convolution; they run as a single merged
convolution). This is what the optimizer asks a cost model about (``stage_latency(stage,
batch_size)``). In a scheduled graph merges are already applied (a merged ``Conv`` node is one
operator), so the stages read from a graph (:meth:`Schedule.of`) are all ``"parallel"``.

On disk a schedule is the reference IOS layout: each block's ``stages``, lists of groups of
operator names (``Block.stages``); :meth:`Schedule.of` reads it from a graph and
:meth:`Schedule.apply` writes it back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ios_core.ir import Graph, GraphError, Node

STAGE_KINDS = ("parallel", "merge")


@dataclass(frozen=True, eq=False)
class Stage:
    kind: str
    groups: list[list[Node]]

    def __post_init__(self):
        if self.kind not in STAGE_KINDS:
            raise ValueError(f"stage kind must be 'parallel' or 'merge', not {self.kind!r}")

    @property
    def nodes(self) -> list[Node]:
        return [n for g in self.groups for n in g]

    def names(self) -> list[list[str]]:
        return [[n.name for n in g] for g in self.groups]

    def __repr__(self) -> str:
        return f"Stage({self.kind}, {self.names()})"


@dataclass(frozen=True, eq=False)
class Schedule:
    """The stages of each block of a graph, in execution order (``blocks[i]`` for block ``i``)."""

    blocks: tuple[tuple[Stage, ...], ...]

    @classmethod
    def of(cls, graph: Graph) -> Schedule:
        """The schedule a graph carries; a block without stages runs one operator per stage."""
        blocks = []
        for bi, block in enumerate(graph.blocks):
            by_name = {n.name: n for n in block.nodes}
            names = block.stages if block.stages is not None else block.sequential_stages()
            try:
                blocks.append(tuple(Stage("parallel", [[by_name[name] for name in g] for g in st]) for st in names))
            except KeyError as e:
                raise GraphError(f"block {bi}: schedule names unknown operator {e.args[0]!r}") from None
        return cls(tuple(blocks))

    @classmethod
    def sequential(cls, graph: Graph) -> Schedule:
        """One operator per stage, in block order."""
        return cls(tuple(tuple(Stage("parallel", [[n]]) for n in block.nodes) for block in graph.blocks))

    @property
    def stages(self) -> list[Stage]:
        """Every stage, block after block."""
        return [st for block in self.blocks for st in block]

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def __len__(self) -> int:
        return sum(len(b) for b in self.blocks)

    def node_groups(self) -> list[list[list[Node]]]:
        """stage -> groups -> nodes: what the runtime plans."""
        return [st.groups for st in self.stages]

    def names(self) -> list[list[list[list[str]]]]:
        """Per block, the reference layout (stages of groups of operator names)."""
        return [[st.names() for st in block] for block in self.blocks]

    def apply(self, graph: Graph) -> Graph:
        """Write this schedule into ``graph``'s blocks (``Block.stages``) and validate it there
        (every operator once, each after its inputs); returns ``graph``."""
        if len(self.blocks) != len(graph.blocks):
            raise GraphError(f"schedule has {len(self.blocks)} blocks, graph {graph.name!r} {len(graph.blocks)}")
        if any(st.kind != "parallel" for st in self.stages):
            raise GraphError("a schedule applied to a graph has parallel stages only (merges are graph transforms)")
        for block, names in zip(graph.blocks, self.names()):
            block.stages = names
        graph.validate()
        return graph

    def __repr__(self) -> str:
        return f"Schedule({len(self.blocks)} blocks, {len(self)} stages)"
