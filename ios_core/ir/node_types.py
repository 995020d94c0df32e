"""Every node type of the IR by its JSON ``type``, in the IR's order: the feature-map operators
(:mod:`.nodes`), the general-tensor ones (:mod:`.tensor_nodes`), Sequential last (a walk's types
end with it). Everything that lists op types derives from this (``OPERATOR_TYPES``,
``lowering.walk.SUPPORTED_TYPES``, ``cost.features.OP_TYPES``)."""

from __future__ import annotations

from ios_core.ir.nodes import FEATURE_MAP_NODES, Node, Sequential
from ios_core.ir.tensor_nodes import TENSOR_NODES

NODE_TYPES: dict[str, type[Node]] = {cls.TYPE: cls for cls in (*FEATURE_MAP_NODES, *TENSOR_NODES, Sequential)}
