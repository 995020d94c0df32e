"""A piece as an ONNX model, through the one ONNX lowering the exporter uses.

Inputs ``in0..``: the whole values of the piece's input nodes (N, C, H, W); the piece reads
its channel slices with ``Slice`` as the whole-graph export does. Outputs ``out0..``: the
values of the piece's output nodes, in order. Weights are the graph's own (or seeded random
ones for nodes without weights when ``random_weights``).
"""

from __future__ import annotations

import numpy as np

from ...ir import Node, leaf_nodes
from .base import Piece

DEFAULT_OPSET = 17


def _lowering():
    # TODO(core): the lowering walk and exporter move into ios_core; import them from there.
    from adapters._lowering import gather
    from adapters.onnx_export import _Builder

    return _Builder, gather


def input_name(i: int) -> str:
    return f"in{i}"


def output_name(i: int) -> str:
    return f"out{i}"


def export_piece(piece: Piece, batch_size: int, opset: int = DEFAULT_OPSET, random_weights: bool = False,
                 seed: int = 0, check: bool = False):
    """``piece`` as an ``onnx.ModelProto`` with static shapes for ``batch_size``."""
    import onnx
    import onnx.helper as oh

    Builder, gather = _lowering()
    rng = np.random.default_rng(seed)

    class PieceBuilder(Builder):
        def weight(self, node: Node, key: str, arr):
            if arr is None or random_weights:
                if arr is None and not random_weights:
                    raise ValueError(f"node {node.name!r} has no weights: call graph.init_weights(seed)")
                shape = node.weight_shape if key == "weight" else (node.weight_shape[0],)
                arr = (rng.standard_normal(shape) * 0.05).astype(np.float32)
            return super().weight(node, key, arr)

    b = PieceBuilder(None)
    prims = b.primitives()
    names: dict[str, str] = {}
    for i, node in enumerate(piece.inputs):
        names[node.name] = input_name(i)
    for node in piece.nodes:
        for op in leaf_nodes(node):
            names[op.name] = b.emit(op, gather(op, names, prims))
        names[node.name] = names[leaf_nodes(node)[-1].name]

    # name the outputs: rename the tensor where it is computed here and is no other output,
    # else copy it through an Identity (an output that is an input, or a value output twice)
    inputs = {input_name(i) for i in range(len(piece.inputs))}
    renamed: dict[str, str] = {}
    identities = []
    for i, node in enumerate(piece.outputs):
        t, want = names[node.name], output_name(i)
        if t in inputs or t in renamed:
            identities.append(oh.make_node("Identity", [renamed.get(t, t)], [want], name=want))
        else:
            renamed[t] = want
    for n in b.nodes:
        for seq in (n.input, n.output):
            for j, t in enumerate(seq):
                if t in renamed:
                    seq[j] = renamed[t]
    b.nodes.extend(identities)

    def info(name, node):
        return oh.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [batch_size, *node.output_shape])

    graph = oh.make_graph(b.nodes, piece.name, [info(input_name(i), n) for i, n in enumerate(piece.inputs)],
                          [info(output_name(i), n) for i, n in enumerate(piece.outputs)], initializer=b.initializers)
    model = oh.make_model(graph, producer_name="ios-bench", opset_imports=[oh.make_opsetid("", int(opset))])
    model.ir_version = oh.find_min_ir_version_for(list(model.opset_import))
    if check:
        onnx.checker.check_model(model)
    return model
