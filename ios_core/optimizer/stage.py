"""A stage: what the optimizer asks a cost model about.

``kind`` is ``"parallel"`` (the groups run concurrently, each group's operators in order) or
``"merge"`` (one group per original convolution; they run as a single merged convolution).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import Node


@dataclass(frozen=True, eq=False)
class Stage:
    kind: str
    groups: list[list[Node]]

    def __post_init__(self):
        if self.kind not in ("parallel", "merge"):
            raise ValueError(f"stage kind must be 'parallel' or 'merge', not {self.kind!r}")

    @property
    def nodes(self) -> list[Node]:
        return [n for g in self.groups for n in g]

    def names(self) -> list[list[str]]:
        return [[n.name for n in g] for g in self.groups]

    def __repr__(self) -> str:
        return f"Stage({self.kind}, {self.names()})"
