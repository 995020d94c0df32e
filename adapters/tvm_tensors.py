"""The TVM adapters' general tensors (ios_core/ir/tensor_nodes.py: vision transformers, ConvNeXt):
each general-tensor operator as Relax ops, written into the same ``BlockBuilder`` as the feature-map
operators of ``adapters.tvm.RelaxEmitter`` (which takes :class:`TensorOps` as a mixin).

**Layout.** The Relax module keeps every value in the IR's own axis order, the batch first:
``(batch, *shape)``, a feature map NCHW as the CNN path always stored it. No layout rule is
needed (unlike TensorFlow's NHWC, ``adapters/tensorflow_tensors.py``): a slice or concatenation
of the input composition works along axis 1 (the value's first axis, a feature map's channels) for
every rank, an element-wise sum or product broadcasts NumPy's way (a value whose trailing axes are
1 against a larger one, as a 1x1 map does), and each operator below reads and gives that order.

===============  =================================================================================
IR               Relax (``R = relax.op``)
===============  =================================================================================
``matmul``       ``R.matmul(a, b, out_dtype="float32")``: the leading axes are batch axes
``softmax``      ``R.nn.softmax(x, axis=dim + 1)``
``l2norm``       ``x / R.maximum(R.sqrt(R.sum(x * x, axis=dim + 1, keepdims)), eps)``
``layernorm``    ``R.nn.layer_norm(x, weight, bias, axes=<the last axes>, epsilon=eps)``
``dense``        ``R.matmul(x, weight.T)`` (the weight stored transposed, (in, out), as ``linear``'s)
                 ``+ bias``, then the activation (``RELAX_ACTIVATIONS``: GELU ``nn.gelu``, its tanh
                 form ``nn.gelu_tanh``)
``reshape``      ``R.reshape(x, (batch, *shape))``
``transpose``    ``R.permute_dims(x, (0, *(p + 1 for p in perm)))``
``constant``     ``R.add`` / ``R.multiply`` with the constant as stored (it broadcasts from the last
                 axis, NumPy's rule)
``prepend``      ``R.concat([R.broadcast_to(rows, (batch, *rows.shape)), x], axis=1)``
===============  =================================================================================

Weights are parameters of ``main`` like the CNN operators' (``<node>.weight``, ``<node>.bias``;
``constant`` and ``prepend`` have a weight only), then bound as constants. A graph without general
tensors gives the same module as before, op for op (``tests/test_tvm_tensors.py`` checks its text
and the build cache's key against those recorded before this module existed).

fp32 only: an fp16 build (cuda, ``ToMixedPrecision``) of a graph holding a general-tensor operator
is refused (:func:`fp16_refusal`): TOPI's layer norm computes its statistics in f32, but its softmax
sums its exponentials in its input's dtype, which ``ToMixedPrecision`` may make fp16, and no fp16
transformer has been run on a GPU here.
"""

from __future__ import annotations

import numpy as np

from ios_core.ir import Graph, Node
from ios_core.ir.tensor_nodes import TENSOR_TYPES


def has_tensors(graph: Graph) -> bool:
    """Whether ``graph`` holds a general-tensor operator."""
    return any(op.TYPE in TENSOR_TYPES for op in graph.operators())


def fp16_refusal(graph: Graph) -> str | None:
    """Why the fp16 build refuses ``graph`` (None: a graph without general tensors, built as before)."""
    node = next((op for op in graph.operators() if op.TYPE in TENSOR_TYPES), None)
    if node is None:
        return None
    return (f"tvm: precision fp16 is not built for graph {graph.name!r} (node {node.name!r} of type {node.TYPE!r}, "
            "a general tensor): TVM's softmax sums in its input's dtype, which ToMixedPrecision may make fp16, and no "
            "fp16 transformer has been run on a GPU here; fp32 only")


def tensor_weights(node: Node) -> tuple[tuple[str, np.ndarray], ...]:
    """A general-tensor operator's weight parameters as :class:`TensorOps` reads them, ``(key, array)``
    in order: a dense layer's weight transposed (in, out) and its bias, a layer norm's weight and bias
    (the normalized axes' shape), a constant's and a prepend's one array as stored."""
    if node.TYPE == "dense":
        return ("weight", node.weight.T), ("bias", node.bias)
    if node.TYPE == "layernorm":
        return ("weight", node.weight), ("bias", node.bias)
    return (("weight", node.weight),)


class TensorOps:
    """The general-tensor operators of ``adapters.tvm.RelaxEmitter`` (a mixin): ``visit_<type>(node, x)``
    on values in the IR's order, the batch first. It reads the emitter's ``bb`` (the block builder),
    ``R`` (``relax.op``), ``wv`` (``"<node>.<key>"`` -> the weight parameter), ``batch_size``, ``const``
    and ``act``."""

    def _param(self, node: Node, key: str = "weight"):
        return self.wv[f"{node.name}.{key}"]

    def visit_matmul(self, node: Node, x):
        a, b = x
        return self.bb.emit(self.R.matmul(a, b, out_dtype="float32"))

    def visit_softmax(self, node: Node, x):
        return self.bb.emit(self.R.nn.softmax(x, axis=node.dim + 1))

    def visit_l2norm(self, node: Node, x):
        bb, R = self.bb, self.R
        norm = bb.emit(R.sqrt(bb.emit(R.sum(bb.emit(R.multiply(x, x)), axis=[node.dim + 1], keepdims=True))))
        return bb.emit(R.divide(x, bb.emit(R.maximum(norm, self.const(node.eps)))))

    def visit_layernorm(self, node: Node, x):
        rank = len(node.input_shape) + 1  # the batch axis first
        axes = list(range(rank - node.axes, rank))
        return self.bb.emit(self.R.nn.layer_norm(x, self._param(node), self._param(node, "bias"), axes=axes,
                                                 epsilon=node.eps))

    def visit_dense(self, node: Node, x):
        bb, R = self.bb, self.R
        y = bb.emit(R.matmul(x, self._param(node), out_dtype="float32"))
        return self.act(bb.emit(R.add(y, self._param(node, "bias"))), node.act)

    def visit_reshape(self, node: Node, x):
        return self.bb.emit(self.R.reshape(x, (self.batch_size, *node.shape)))

    def visit_transpose(self, node: Node, x):
        return self.bb.emit(self.R.permute_dims(x, [0, *(p + 1 for p in node.perm)]))

    def visit_constant(self, node: Node, x):
        R = self.R
        return self.bb.emit((R.multiply if node.op_type == "mul" else R.add)(x, self._param(node)))

    def visit_prepend(self, node: Node, x):
        bb, R = self.bb, self.R
        rows = bb.emit(R.broadcast_to(self._param(node), (self.batch_size, *node.weight_shape)))
        return bb.emit(R.concat([rows, x], axis=1))
