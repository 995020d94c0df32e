"""The TensorRT adapters' general tensors (``ios_core/ir/tensor_nodes.py``: vision transformers,
ConvNeXt): each operator lowered to the TensorRT layers a TensorRT user writes for it.

TensorRT 10 and 11 are explicit-batch only, and every value of the network is the IR's own shape
with the batch first, ``(batch, *shape)`` (a feature map is NCHW, a token sequence ``(batch,
tokens, features)``): no layout conversion anywhere. Axes masks count the batch axis (bit 0).

=============  ==============================================================================
``matmul``     ``add_matrix_multiply(a, NONE, b, NONE)`` (both activations, equal ranks)
``dense``      ``add_matrix_multiply(x, NONE, W, TRANSPOSE)`` with ``W`` a constant of the
               input's rank, ``(1, ..., 1, out, in)`` (broadcast over the leading axes); the
               bias an ``add_elementwise`` SUM of a ``(1, ..., 1, out)`` constant, then the
               activation
``softmax``    ``add_softmax``, ``axes`` the bit of the axis
``layernorm``  ``add_normalization(x, scale, bias, axes mask)`` (scale and bias constants of
               the input's rank, 1 on the axes not normalized), ``epsilon`` the node's;
               ``compute_precision`` fp32 where the bindings have it (TensorRT 10; 11 is
               strongly typed and has none: an fp32 network computes in fp32)
``l2norm``     ``x / max(sqrt(sum(x * x)), eps)``: ``add_elementwise`` PROD, ``add_reduce`` SUM
               (keeping the axis), ``add_unary`` SQRT, ``add_elementwise`` MAX with an ``eps``
               constant and DIV
``reshape``    ``add_shuffle``, ``reshape_dims`` ``(batch, *shape)``
``transpose``  ``add_shuffle``, ``first_transpose`` ``(0, *(p + 1))``
``constant``   ``add_elementwise`` SUM or PROD with a constant of the input's rank
``prepend``    ``add_concatenation`` on axis 1 of a ``(batch, rows, ...)`` constant (the rows
               repeated for each image: the batch is fixed when the engine is built) and ``x``
=============  ==============================================================================

GELU is an activation kind: ``ActivationType.GELU_ERF``/``GELU_TANH`` where the bindings have
them (TensorRT 10 and 11 do), else composed of element-wise layers and ``UnaryOperation.ERF``
(``0.5 x (1 + erf(x / sqrt 2))``) or ``ActivationType.TANH`` (``0.5 x (1 + tanh(sqrt(2/pi) (x +
0.044715 x^3)))``). Before any layer is added, :meth:`TensorLayers.check_api` looks up every
network method and enum member the graph's general-tensor operators need in the TensorRT at hand
and refuses the graph in one line naming the first node whose call it lacks.

Checked against the oracle on the CPU stand-in held to TensorRT 10.16's and 11.1's API
(``tests/fake_tensorrt.py``, ``tests/test_tensorrt_tensors.py``); never run on a GPU.
"""

from __future__ import annotations

import math

import numpy as np

from ios_core.ir import Node

# What each general-tensor operator's lowering calls: network methods (``add_*``) and enum members
# (``Enum.MEMBER``), looked up in the installed bindings before anything is built.
NEEDS: dict[str, tuple[str, ...]] = {
    "matmul": ("add_matrix_multiply", "MatrixOperation.NONE"),
    "dense": ("add_matrix_multiply", "add_constant", "add_elementwise", "MatrixOperation.NONE",
              "MatrixOperation.TRANSPOSE", "ElementWiseOperation.SUM"),
    "softmax": ("add_softmax",),
    "layernorm": ("add_normalization", "add_constant"),
    "l2norm": ("add_elementwise", "add_reduce", "add_unary", "add_constant", "ElementWiseOperation.PROD",
               "ElementWiseOperation.MAX", "ElementWiseOperation.DIV", "ReduceOperation.SUM", "UnaryOperation.SQRT"),
    "reshape": ("add_shuffle",),
    "transpose": ("add_shuffle",),
    "constant": ("add_elementwise", "add_constant", "ElementWiseOperation.SUM", "ElementWiseOperation.PROD"),
    "prepend": ("add_concatenation", "add_constant"),
}
# GELU: TensorRT's own activation, or the composition's calls where the bindings lack it
GELU = {"gelu": ("ActivationType.GELU_ERF", ("add_unary", "UnaryOperation.ERF")),
        "gelu_tanh": ("ActivationType.GELU_TANH", ("add_activation", "ActivationType.TANH"))}
GELU_COMPOSED = ("add_elementwise", "add_constant", "ElementWiseOperation.SUM", "ElementWiseOperation.PROD")


def _acts(op: Node) -> set[str]:
    """The activation kinds ``op`` applies."""
    kinds = {getattr(op, "act", None)}
    if op.TYPE in ("activation", "relu"):
        kinds.add(getattr(op, "act_type", "relu"))
    return {k for k in kinds if k}


class TensorLayers:
    """The general-tensor operators of ``adapters.tensorrt.NetworkBuilder`` (a mixin): ``visit_<type>``
    for each, on tensors of shape ``(batch, *shape)``; uses the builder's ``trt``, ``network``, ``n``
    (the batch), ``constant(array, shape)`` and ``act(tensor, kind)``."""

    # ---- what the bindings must have --------------------------------------------------------------
    def _has(self, name: str) -> bool:
        if "." in name:
            enum, member = name.split(".")
            return hasattr(getattr(self.trt, enum, None), member)
        return hasattr(self.network, name)

    def check_api(self, ops) -> None:
        """Refuse, in one line naming the node, a graph whose general-tensor operators (or GELU) need
        a network method or enum member this TensorRT does not have; called before any layer is added."""
        version = getattr(self.trt, "__version__", "?")
        for op in ops:
            needs = list(NEEDS.get(op.TYPE, ()))
            for kind in _acts(op) & set(GELU):
                own, composed = GELU[kind]
                needs += [] if self._has(own) else [*composed, *GELU_COMPOSED]
            missing = next((name for name in needs if not self._has(name)), None)
            if missing is not None:
                where = missing if "." in missing else f"INetworkDefinition.{missing}"
                raise NotImplementedError(f"tensorrt: node {op.name!r} ({op.TYPE}) needs {where}, which TensorRT "
                                          f"{version} does not have")

    # ---- small helpers ---------------------------------------------------------------------------
    @staticmethod
    def _rank(op: Node) -> int:
        """The rank of ``op``'s input tensor in the network (the batch axis included)."""
        return 1 + len(op.input_shape)

    def _ew(self, a, b, kind: str):
        return self.network.add_elementwise(a, b, getattr(self.trt.ElementWiseOperation, kind)).get_output(0)

    def _scalar(self, value: float, rank: int):
        """A constant ``value`` of shape ``(1,) * rank`` (it broadcasts against any tensor of that rank)."""
        return self.constant(np.full((1,) * rank, value, np.float32), (1,) * rank)

    def _gelu(self, t, kind: str):
        """GELU of ``t``: TensorRT's activation ``GELU_ERF``/``GELU_TANH``, composed where it lacks it."""
        own = GELU[kind][0].split(".")[1]
        if hasattr(self.trt.ActivationType, own):
            return self._activation(t, own)
        rank = len(t.shape)
        half_x = self._ew(t, self._scalar(0.5, rank), "PROD")
        if kind == "gelu":  # 0.5 x (1 + erf(x / sqrt 2))
            u = self._ew(t, self._scalar(1.0 / math.sqrt(2.0), rank), "PROD")
            g = self.network.add_unary(u, self.trt.UnaryOperation.ERF).get_output(0)
        else:  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
            cube = self._ew(self._ew(t, t, "PROD"), t, "PROD")
            inner = self._ew(t, self._ew(cube, self._scalar(0.044715, rank), "PROD"), "SUM")
            g = self._activation(self._ew(inner, self._scalar(math.sqrt(2.0 / math.pi), rank), "PROD"), "TANH")
        return self._ew(half_x, self._ew(g, self._scalar(1.0, rank), "SUM"), "PROD")

    # ---- the general-tensor operators --------------------------------------------------------------
    def visit_matmul(self, op: Node, x):
        a, b = x
        none = self.trt.MatrixOperation.NONE
        layer = self.network.add_matrix_multiply(a, none, b, none)
        layer.name = op.name
        return layer.get_output(0)

    def visit_dense(self, op: Node, x):
        trt, rank = self.trt, self._rank(op)
        w = self.constant(op.weight, (1,) * (rank - 2) + tuple(op.weight_shape))
        layer = self.network.add_matrix_multiply(x, trt.MatrixOperation.NONE, w, trt.MatrixOperation.TRANSPOSE)
        layer.name = op.name
        bias = self.constant(op.bias, (1,) * (rank - 1) + (op.out_features,))
        return self.act(self._ew(layer.get_output(0), bias, "SUM"), op.act)

    def visit_softmax(self, op: Node, x):
        layer = self.network.add_softmax(x)
        layer.axes = 1 << (op.dim + 1)
        layer.name = op.name
        return layer.get_output(0)

    def visit_layernorm(self, op: Node, x):
        rank, k = self._rank(op), op.axes
        shape = (1,) * (rank - k) + tuple(op.weight_shape)
        scale, bias = self.constant(op.weight, shape), self.constant(op.bias, shape)
        layer = self.network.add_normalization(x, scale, bias, sum(1 << i for i in range(rank - k, rank)))
        layer.epsilon = float(op.eps)
        if hasattr(layer, "compute_precision"):  # TensorRT 10 (11 is strongly typed: fp32 in, fp32 computed)
            layer.compute_precision = self.trt.float32
        layer.name = op.name
        return layer.get_output(0)

    def visit_l2norm(self, op: Node, x):
        rank = self._rank(op)
        sums = self.network.add_reduce(self._ew(x, x, "PROD"), self.trt.ReduceOperation.SUM, 1 << (op.dim + 1), True)
        sums.name = op.name
        norm = self.network.add_unary(sums.get_output(0), self.trt.UnaryOperation.SQRT).get_output(0)
        return self._ew(x, self._ew(norm, self._scalar(op.eps, rank), "MAX"), "DIV")

    def visit_reshape(self, op: Node, x):
        layer = self.network.add_shuffle(x)
        layer.reshape_dims = (self.n, *op.shape)
        layer.name = op.name
        return layer.get_output(0)

    def visit_transpose(self, op: Node, x):
        layer = self.network.add_shuffle(x)
        layer.first_transpose = (0, *(p + 1 for p in op.perm))
        layer.name = op.name
        return layer.get_output(0)

    def visit_constant(self, op: Node, x):
        c = np.asarray(op.weight, np.float32)
        shape = (1,) * (self._rank(op) - c.ndim) + c.shape
        return self._ew(x, self.constant(c, shape), "PROD" if op.op_type == "mul" else "SUM")

    def visit_prepend(self, op: Node, x):
        shape = (self.n, *op.weight_shape)
        rows = self.constant(np.ascontiguousarray(np.broadcast_to(op.weight, shape)), shape)
        layer = self.network.add_concatenation([rows, x])
        layer.axis = 1
        layer.name = op.name
        return layer.get_output(0)
