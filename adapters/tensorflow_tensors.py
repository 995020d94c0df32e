"""The TensorFlow adapters' general tensors (ios_core/ir/tensor_nodes.py: vision transformers,
ConvNeXt) and the one layout rule that lets them meet the NHWC feature maps of
``adapters.tensorflow._Emitter``.

**The layout rule.** Every value of the traced function is stored in one of two layouts, chosen per
value while tracing (:class:`Laid` carries it):

- ``nhwc``: a (C, H, W) feature map stored (batch, H, W, C), as the CNN path always stored them;
- ``ir``: the IR's own axis order, the batch first: ``(batch, *shape)`` (a feature map in it is NCHW).

The feature-map operators (``conv``, ``pool``, ``shuffle``, ``resize``) read ``nhwc`` and give
``nhwc``; the general-tensor operators (``matmul``, ``softmax``, ``l2norm``, ``layernorm``,
``dense``, ``reshape``, ``prepend``) read ``ir`` and give ``ir``. A value is converted (one
``tf.transpose``) exactly where an operator reads it in the other layout. The operators that do not
care keep their input's layout: the element-wise ones (``identity``, ``relu``, ``activation``,
``element``), ``affine`` (its per-channel weights shaped for the layout), ``constant`` (its constant
permuted for ``nhwc``), and ``flatten``/``linear`` (they read either; their (n, 1, 1) output is
``nhwc``). A ``transpose`` composes its permutation with the stored layout: where the result is the
stored tensor itself it costs nothing (ConvNeXt's permutes around its layer norms: (C, H, W) ->
(H, W, C) of an ``nhwc`` map is that map, and back gives ``nhwc`` again), otherwise it is one
``tf.transpose`` giving ``ir``. Slices and concatenations of the input composition work along the
first axis of the value (the channel axis: the last stored axis in ``nhwc``, axis 1 in ``ir``); the
terms of a sum, product or concatenation that differ in layout are converted to the first term's.
The graph's input is ``nhwc`` (``prepare`` transposes it); a graph holding a general-tensor operator
gives its output in the IR's order (``TFCompiled(nhwc_out=False)``: NCHW for a feature map).

A graph without general tensors is traced exactly as before (``to_function`` uses this module only
for a graph holding one), so the CNN path is the same graph, op for op.

In a ``bf16`` build every op is in bf16 except layer norm and softmax, whose statistics (mean,
variance; the exponentials' sum) are computed in float32 from a bf16 input and the result cast back,
as Keras's mixed-precision layers compute them.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ios_core.ir import Graph, Node
from ios_core.ir.tensor_nodes import TENSOR_TYPES
from ios_core.lowering import Primitives

NHWC, IR = "nhwc", "ir"
TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)
READS_NHWC = frozenset({"conv", "pool", "shuffle", "resize"})  # the feature-map operators proper
KEEPS_LAYOUT = frozenset({"identity", "relu", "activation", "element", "affine", "constant"})
LAYOUT_TENSORS = "NHWC feature maps, general tensors in the IR's order"  # info["layout"] of such a graph
READS_EITHER = frozenset({"flatten", "linear"})  # the classifier's tail: any value, (n, 1, 1) nhwc out


def has_tensors(graph: Graph) -> bool:
    """Whether ``graph`` holds a general-tensor operator (then it is traced with the layout rule)."""
    return any(op.TYPE in TENSOR_TYPES for op in graph.operators())


def int8_refusal(graph: Graph) -> str | None:
    """Why the TFLite int8 build refuses ``graph`` (None: it builds it): attention, a product of two
    activations, whose int8 output misses the int8 bound."""
    attention = next((op for op in graph.operators() if op.TYPE == "matmul"), None)
    if attention is None:
        return None
    return (f"precision 'int8': tflite refuses graph {graph.name!r} (node {attention.name!r} multiplies two "
            "activations): TFLite's full-integer quantization of attention misses the int8 bound (max relative "
            "error 0.59 on a one-block ViT, 0.12 on a cosine-attention block, bound 0.1; a ConvNeXt block, "
            "without attention, holds it: 0.016); so does a selective one keeping attention, softmax, layer "
            "norms, GELU, elementwise operators and the class token's concatenation in float (QuantizationDebugger's "
            "denylisted_ops: vit_tiny at 1 layer 0.24, 12 layers 0.53), whose int8 FULLY_CONNECTED layers (int8 "
            "outputs too) are the error (those in float as well: 0.003)")


class Laid(NamedTuple):
    """A traced value and the layout it is stored in (``nhwc`` or ``ir``)."""

    t: Any
    layout: str


def to_layout(tf, v: Laid, layout: str):
    """``v``'s tensor stored in ``layout`` (one ``tf.transpose`` where it is stored in the other)."""
    if v.layout == layout:
        return v.t
    if layout == NHWC and v.t.shape.rank != 4:
        raise ValueError(f"a value of shape {tuple(v.t.shape)[1:]} is not a (C, H, W) feature map; "
                         "a feature-map operator cannot read it")
    return tf.transpose(v.t, TO_NCHW if layout == IR else TO_NHWC)


def transpose_perm(perm, layout: str) -> tuple[tuple[int, ...], str]:
    """The permutation of the stored tensor (batch axis included) that a ``transpose`` node of
    ``perm`` needs on a value stored in ``layout``, and the layout of the result: ``()`` (no op)
    where the stored tensor already is the result in ``ir`` or, for a rank-3 result, in ``nhwc``."""
    full = (0, *(p + 1 for p in perm))
    stored = TO_NCHW if layout == NHWC else tuple(range(len(full)))  # IR axis k is stored axis stored[k]
    q = tuple(stored[k] for k in full)
    if q == tuple(range(len(q))):
        return (), IR
    if len(q) == 4 and tuple(q[j] for j in TO_NHWC) == tuple(range(4)):
        return (), NHWC
    return q, IR


def laid_primitives(tf, base: Primitives) -> Primitives:
    """``base`` (the NHWC primitives) on :class:`Laid` values: slices and concatenations along the
    value's first axis in its layout, terms of differing layouts converted to the first's."""

    def agree(vs):
        layout = vs[0].layout
        return [to_layout(tf, v, layout) for v in vs], layout

    def slice_channels(v, b, e):
        return Laid(base.slice_channels(v.t, b, e) if v.layout == NHWC else v.t[:, b:e], v.layout)

    def combine(fn):
        def run(vs):
            ts, layout = agree(vs)
            return Laid(fn(ts), layout)
        return run

    def concat(vs):
        ts, layout = agree(vs)
        return Laid(base.concat(ts) if layout == NHWC else tf.concat(ts, axis=1), layout)

    return Primitives(slice_channels, combine(base.add), combine(base.mul), concat)


def laid_emit(tf, emitter):
    """``emit(op, laid_input) -> Laid`` over ``emitter`` (an ``adapters.tensorflow._Emitter``, which
    computes each feature-map operator on NHWC tensors and each general-tensor one on ``ir`` ones)."""

    def emit(op: Node, x):
        kind = op.TYPE
        if op.OPERANDS:  # matmul: a tuple of operands
            return Laid(emitter(op, tuple(to_layout(tf, v, IR) for v in x)), IR)
        if kind == "transpose":
            perm, layout = transpose_perm(op.perm, x.layout)
            return Laid(tf.transpose(x.t, perm) if perm else x.t, layout)
        if kind in READS_EITHER and x.layout == IR:
            return Laid(emitter.ir_tail(op, x.t), NHWC)
        if kind in KEEPS_LAYOUT and x.layout == IR:
            return Laid(emitter.ir_elementwise(op, x.t), IR)
        if kind in KEEPS_LAYOUT or kind in READS_EITHER:
            return Laid(emitter(op, x.t), NHWC)
        if kind in READS_NHWC or kind not in TENSOR_TYPES:
            return Laid(emitter(op, to_layout(tf, x, NHWC)), NHWC)
        return Laid(emitter(op, to_layout(tf, x, IR)), IR)

    return emit


def output_in_ir_order(tf, out: Laid):
    return to_layout(tf, out, IR)


class TensorOps:
    """The general-tensor operators of ``adapters.tensorflow._Emitter`` (a mixin): each reads and
    gives tensors in the IR's order, the batch first (``visit_<type>``); ``ir_elementwise`` and
    ``ir_tail`` are the layout-keeping operators on such tensors. Constants are made by the emitter's
    ``_const`` (``Const`` nodes in a frozen build, bf16 in a bf16 build); ``_params_<type>`` makes them
    once, at construction."""

    def _params_dense(self, op):
        return self._const(np.ascontiguousarray(op.weight.T)), self._const(op.bias)

    def _params_layernorm(self, op):
        return self._const32(op.weight), self._const32(op.bias)

    def _params_constant(self, op):
        c = np.asarray(op.weight, np.float32)
        nhwc = c.reshape((1,) * (3 - c.ndim) + c.shape).transpose(1, 2, 0) if c.ndim <= 3 else None
        return self._const(c), None if nhwc is None else self._const(np.ascontiguousarray(nhwc))

    def _params_prepend(self, op):
        return (self._const(op.weight),)

    def _const32(self, array):
        """A float32 constant even in a bf16 build (layer norm's weight and bias: it computes in f32)."""
        if self.frozen:
            return np.ascontiguousarray(np.asarray(array, np.float32))
        return self.tf.constant(np.asarray(array, np.float32), dtype=self.tf.float32)

    def _act(self, kind: str):
        return self.ACTIVATIONS[kind](self.tf, 0.0, 0.0)

    def _in_f32(self, x):
        return x if x.dtype == self.tf.float32 else self.tf.cast(x, self.tf.float32)

    def _back(self, y, like):
        return y if like.dtype == y.dtype else self.tf.cast(y, like.dtype)

    # ---- the general-tensor operators, on ir tensors ------------------------------------------------
    def visit_matmul(self, op: Node, x):
        return self.tf.linalg.matmul(x[0], x[1])

    def visit_softmax(self, op: Node, x):
        return self._back(self.tf.nn.softmax(self._in_f32(x), axis=op.dim + 1), x)

    def visit_l2norm(self, op: Node, x):
        tf = self.tf
        norm = tf.sqrt(tf.reduce_sum(tf.square(x), axis=op.dim + 1, keepdims=True))
        return x / tf.maximum(norm, tf.cast(op.eps, x.dtype))

    def visit_layernorm(self, op: Node, x):
        tf = self.tf
        w, b = self.params[op.name]
        rank = x.shape.rank
        axes = list(range(rank - op.axes, rank))
        x32 = self._in_f32(x)
        mean = tf.reduce_mean(x32, axis=axes, keepdims=True)
        centered = x32 - mean
        var = tf.reduce_mean(tf.square(centered), axis=axes, keepdims=True)
        return self._back(centered * tf.math.rsqrt(var + op.eps) * w + b, x)

    def visit_dense(self, op: Node, x):
        tf = self.tf
        w_t, b = self.params[op.name]
        shape = op.input_shape
        y = tf.linalg.matmul(tf.reshape(x, [-1, shape[-1]]), w_t) + b  # one 2-D product over every token
        y = self._act(op.act)(y)
        return tf.reshape(y, [-1, *shape[:-1], op.out_features])

    def visit_reshape(self, op: Node, x):
        return self.tf.reshape(x, [-1, *op.shape])

    def visit_transpose(self, op: Node, x):  # on an ir tensor (laid_emit composes it with the layout)
        return self.tf.transpose(x, (0, *(p + 1 for p in op.perm)))

    def visit_prepend(self, op: Node, x):
        tf = self.tf
        (rows,) = self.params[op.name]
        batch = tf.shape(x)[:1]
        rows = tf.broadcast_to(rows[None], tf.concat([batch, tf.shape(rows)], 0))
        return tf.concat([rows, x], axis=1)

    def visit_constant(self, op: Node, x):
        """``constant`` on an ``nhwc`` map (:func:`laid_emit`; on ``ir``: :meth:`ir_elementwise`): its
        constant permuted to (H, W, C)."""
        c = self.params[op.name][1]
        return x * c if op.op_type == "mul" else x + c

    # ---- the layout-keeping operators on ir tensors -------------------------------------------------
    def ir_elementwise(self, op: Node, x):
        """``identity``/``relu``/``activation``/``element``/``affine``/``constant`` on an ``ir`` tensor."""
        if op.TYPE == "constant":
            c = self.params[op.name][0]
            return x * c if op.op_type == "mul" else x + c
        if op.TYPE == "affine":
            scale, shift = self.params[op.name]
            shape = [-1, *(1,) * (len(op.input_shape) - 1)]
            return self._act(op.act)(x * self.tf.reshape(scale, shape) + self.tf.reshape(shift, shape))
        return self.visit(op, x)  # element-wise: the same op in any layout

    def ir_tail(self, op: Node, x):
        """``flatten``/``linear`` of an ``ir`` tensor: flattened in the IR's row-major order."""
        tf = self.tf
        flat = tf.reshape(x, [-1, math.prod(op.input_shape)])
        if op.TYPE == "flatten":
            return tf.reshape(flat, [-1, 1, 1, op.output_shape[0]])
        weight_t, bias = self.params[op.name]
        y = self._act(op.act)(tf.linalg.matmul(flat, weight_t) + bias)
        return tf.reshape(y, [-1, 1, 1, op.out_features])
