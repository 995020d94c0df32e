"""A piece as an ONNX model, through the one ONNX lowering (``ios_core.lowering.onnx.export_nodes``).

Inputs: the whole values of the piece's input nodes (N, C, H, W), named after them; the piece
reads their channel slices with ``Slice`` as the whole-graph export does. Outputs: the values
of the piece's output nodes, in order, named after them. Weights are the graph's own, or
seeded random ones for every node with ``random_weights`` (the measured cost model's stages).
"""

from __future__ import annotations

import numpy as np

from ios_core.ir import Node
from ios_core.lowering.onnx import DEFAULT_OPSET, export_nodes

__all__ = ["DEFAULT_OPSET", "export_piece"]


def export_piece(piece, batch_size: int, opset: int = DEFAULT_OPSET, random_weights: bool = False,
                 seed: int = 0, check: bool = False):
    """``piece`` (``name``, ``nodes``, ``inputs``, ``outputs``) as an ``onnx.ModelProto`` with
    static shapes for ``batch_size``."""
    weights = None
    if random_weights:
        rng = np.random.default_rng(seed)

        def weights(node: Node, key: str, arr):
            shape = node.weight_shape if key == "weight" else node.bias_shape
            return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    return export_nodes(piece.nodes, piece.inputs, piece.outputs, batch_size, opset=opset, name=piece.name,
                        check=check, weights=weights)
