"""IR operators on general tensors: what vision transformers and ConvNeXt need beside the
feature-map operators of :mod:`.nodes`.

A value's shape is one image's (no batch axis), of rank 1 to 5 (``fields.MIN_RANK``,
``fields.MAX_RANK``): ``(features,)``, ``(tokens, features)``, ``(heads, tokens, features)``, ...
Its first axis is the one input slices and concatenations work along (the channel axis of a
feature map), so a class token is the slice ``[0, 1)`` of a token sequence and a sequence with a
class token is a concatenation. Each operator has one meaning, its ``formula`` (what the oracle,
``ios_core.kernels.OracleKernels``, computes and every backend must):

=============  ==============================================================================
``matmul``     ``a @ b``: two operands (two input terms), the last two axes multiplied, the
               leading axes equal (batched, no broadcasting)
``softmax``    ``exp(x) / sum(exp(x))`` along ``axis`` (an axis of the image's shape;
               negative counts from the end)
``l2norm``     ``x / max(sqrt(sum(x * x)), eps)`` along ``axis`` (``F.normalize``: Swin V2's
               cosine attention)
``layernorm``  ``(x - mean) / sqrt(var + eps) * weight + bias`` over the last ``axes`` axes
               (biased variance), weight and bias of those axes' shape
``dense``      ``act(x @ weight.T + bias)`` along the last axis (a linear layer applied to each
               token)
``reshape``    the same elements in row-major order, of shape ``shape``
``transpose``  axes permuted: output axis ``i`` is input axis ``perm[i]``
``constant``   ``x + c`` or ``x * c`` (``op_type``) with a learned constant ``c`` of shape
               ``const_shape``, broadcast against ``x`` from the last axis (NumPy's rule; it
               never enlarges ``x``): position embeddings, layer scales
``prepend``    ``rows`` learned rows put before ``x`` along its first axis (a class token)
=============  ==============================================================================

GELU is an activation kind (``gelu``, ``gelu_tanh``: :mod:`.activations`); an element-wise sum or
product of two activations is an ``element`` node (values whose trailing axes are all 1
broadcast, as a 1x1 map does).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ios_core.ir.errors import GraphError
from ios_core.ir.nodes import ELEMENT_OPS, Node, Shape, _dims, _Weighted


def _shape_of(term) -> Shape:
    """The shape of one input term's value (a slice of its first axis)."""
    v = term[0]
    return (v.length, *v.node.output_shape[1:])


def _axis(axis: int, rank: int, what: str) -> int:
    """``axis`` (negative: from the end) as an index into a shape of ``rank`` axes."""
    if not -rank <= axis < rank:
        raise GraphError(f"{what}: axis {axis} is outside a shape of {rank} axes")
    return axis % rank


class MatMul(Node):
    """``a @ b`` of two activations (the input's two terms)."""

    TYPE = "matmul"
    OPERANDS = True
    formula = "a @ b"

    @property
    def operand_shapes(self) -> tuple[Shape, Shape]:
        a, b = (_shape_of(t) for t in self.inputs)
        return a, b

    @property
    def input_shape(self) -> Shape:
        return self.operand_shapes[0]

    def check(self) -> None:
        if len(self.inputs) != 2 or any(len(term) == 0 for term in self.inputs):
            raise GraphError(f"node {self.name!r} (matmul) needs two operands (two input terms)")
        for term in self.inputs:
            if any(v.node.output_shape is None for v in term):
                raise GraphError(f"node {self.name!r} reads a value whose shape is unknown")
            if len({(v.length, *v.node.output_shape[1:]) for v in term}) != 1:
                raise GraphError(f"node {self.name!r}: values summed in one operand differ in shape")
        a, b = self.operand_shapes
        if len(a) != len(b) or len(a) < 2:
            raise GraphError(f"node {self.name!r}: matmul of shapes {_dims(a)} and {_dims(b)} (both need the same "
                             "rank, at least 2)")
        if a[:-2] != b[:-2] or a[-1] != b[-2]:
            raise GraphError(f"node {self.name!r}: cannot multiply {_dims(a)} by {_dims(b)}")

    def _infer(self) -> Shape:
        self.check()  # the operands' shapes must agree before there is an output shape
        a, b = self.operand_shapes
        return (*a[:-1], b[-1])

    def macs(self) -> int:
        a, b = self.operand_shapes
        return math.prod(a) * b[-1]

    def readable_lines(self, indent=2):
        a, b = ("+".join(v.node.hint_name for v in t) for t in self.inputs)
        return [f"[{self.hint_name}]MatMul({a}, {b})"]


class _AlongAxis(Node):
    """An operator along one ``axis`` of its input (negative: from the end), checked to be inside it."""

    @property
    def dim(self) -> int:
        """``axis`` as a nonnegative index into the image's shape."""
        return _axis(self.axis, len(self.input_shape), f"node {self.name!r}")

    def check(self) -> None:
        super().check()
        self.dim  # noqa: B018  (raises when the axis is outside the shape)


class Softmax(_AlongAxis):
    """Softmax along ``axis``."""

    TYPE = "softmax"
    ATTRS = (("axis", -1),)
    formula = "exp(x) / sum(exp(x), axis)"

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]Softmax{self.axis}({self.input_str()})"]


class L2Norm(_AlongAxis):
    """``x`` divided by its Euclidean norm along ``axis``, the norm at least ``eps``."""

    TYPE = "l2norm"
    ATTRS = (("axis", -1), ("eps", 1e-12))
    formula = "x / max(sqrt(sum(x * x, axis)), eps)"

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        if isinstance(self.eps, bool) or not isinstance(self.eps, (int, float)) or not 0 < self.eps < 1:
            raise ValueError(f"eps must be a number in (0, 1), got {self.eps!r}")
        self.eps = float(self.eps)

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]L2Norm{self.axis}({self.input_str()})"]


class LayerNorm(_Weighted, Node):
    """Layer normalization over the last ``axes`` axes, with weight and bias."""

    TYPE = "layernorm"
    ATTRS = (("axes", 1), ("eps", 1e-5))
    formula = "(x - mean) / sqrt(var + eps) * weight + bias"

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        if isinstance(self.eps, bool) or not isinstance(self.eps, (int, float)) or not 0 < self.eps < 1:
            raise ValueError(f"eps must be a number in (0, 1), got {self.eps!r}")
        self.eps = float(self.eps)
        self.weight = self.bias = None

    @property
    def weight_shape(self) -> Shape:
        return tuple(self.input_shape[-self.axes:])

    bias_shape = weight_shape

    def check(self) -> None:
        super().check()
        if self.axes > len(self.input_shape):
            raise GraphError(f"node {self.name!r}: normalizes {self.axes} axes of a shape of "
                             f"{len(self.input_shape)}")

    def init_weights(self, rng):
        self.weight = (1.0 + 0.1 * rng.standard_normal(self.weight_shape)).astype(np.float32)
        self.bias = (0.1 * rng.standard_normal(self.weight_shape)).astype(np.float32)

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]LayerNorm({self.input_str()})"]


DENSE_STD = 0.02  # Dense.init_weights: ViT's and ConvNeXt's own initialization of their linear layers


class Dense(_Weighted, Node):
    """A linear layer along the last axis (each token), with fused bias and activation."""

    TYPE = "dense"
    ATTRS = (("out_features", None), ("act", "identity"))
    formula = "act(x @ weight.T + bias)"

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        self._init_weighted()

    @property
    def in_features(self) -> int:
        return self.input_shape[-1]

    @property
    def weight_shape(self):
        return (self.out_features, self.in_features)

    def _infer(self) -> Shape:
        return (*self.input_shape[:-1], self.out_features)

    def macs(self) -> int:
        return math.prod(self.input_shape) * self.out_features

    def init_weights(self, rng):
        """A transformer's linear layers as ViT and ConvNeXt initialize them (timm, torchvision): a normal of
        standard deviation 0.02 truncated at 2 deviations, zero bias. (He-style weights, as the CNNs' layers
        get, made a 12-block ViT's attention so peaked that bf16 missed its bound: 0.36 against 0.05.)"""
        w = np.clip(rng.standard_normal(self.weight_shape, dtype=np.float32), -2.0, 2.0)
        self.weight = w * np.float32(DENSE_STD)
        self.bias = np.zeros(self.out_features, dtype=np.float32)

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]Dense{self.out_features}({self.input_str()})"]


class Reshape(Node):
    """The same elements, row-major, of shape ``shape``."""

    TYPE = "reshape"
    ATTRS = (("shape", None),)
    VIEW = True  # a view of its input where the layout allows
    INTO_CONCAT = False  # it changes the layout
    formula = "reshape(x, shape)"

    def check(self) -> None:
        super().check()
        if math.prod(self.shape) != math.prod(self.input_shape):
            raise GraphError(f"node {self.name!r}: cannot reshape {_dims(self.input_shape)} to {_dims(self.shape)}")

    def _infer(self) -> Shape:
        return tuple(self.shape)

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]Reshape{_dims(self.shape)}({self.input_str()})"]


class Transpose(Node):
    """Axes permuted: output axis ``i`` is input axis ``perm[i]``."""

    TYPE = "transpose"
    ATTRS = (("perm", None),)
    formula = "transpose(x, perm)"

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        perm = self.perm
        if (not isinstance(perm, (list, tuple)) or any(isinstance(p, bool) or not isinstance(p, int) for p in perm)
                or sorted(perm) != list(range(len(perm)))):
            raise ValueError(f"perm must be a permutation of 0..rank-1, got {perm!r}")
        self.perm = tuple(int(p) for p in perm)

    def check(self) -> None:
        super().check()
        if len(self.perm) != len(self.input_shape):
            raise GraphError(f"node {self.name!r}: perm {list(self.perm)} for a shape of {len(self.input_shape)} axes")

    def _infer(self) -> Shape:
        self.check()  # the permutation must fit the shape before there is an output shape
        shape = self.input_shape
        return tuple(shape[p] for p in self.perm)

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]Transpose{list(self.perm)}({self.input_str()})"]


class _Constant:
    """One learned array, ``weight`` of ``weight_shape``: what ``constant`` and ``prepend`` share."""

    HAS_WEIGHTS: ClassVar[bool] = True

    def params(self) -> int:
        return math.prod(self.weight_shape)

    def weights(self) -> dict[str, np.ndarray]:
        return {} if self.weight is None else {"weight": self.weight}

    def set_weights(self, arrays) -> None:
        w = np.asarray(arrays["weight"], np.float32)
        if w.shape != tuple(self.weight_shape):
            raise GraphError(f"node {self.name!r}: weight shape {w.shape} != {tuple(self.weight_shape)}")
        self.weight = w

    def init_weights(self, rng):
        scale = 0.02 if getattr(self, "op_type", "add") == "add" else 0.1
        base = 1.0 if getattr(self, "op_type", "add") == "mul" else 0.0
        self.weight = (base + scale * rng.standard_normal(self.weight_shape)).astype(np.float32)


class Constant(_Constant, Node):
    """``x + c`` or ``x * c`` with a learned constant ``c`` of shape ``const_shape``."""

    TYPE = "constant"
    ATTRS = (("op_type", "add"), ("const_shape", None))
    formula = "x + c  |  x * c"

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        if self.op_type not in ELEMENT_OPS:  # pragma: no cover - _ATTR_RULES checks it
            raise ValueError(f"unknown op_type {self.op_type!r}")
        self.weight = None

    @property
    def weight_shape(self) -> Shape:
        return tuple(self.const_shape)

    def check(self) -> None:
        super().check()
        shape, c = self.input_shape, self.weight_shape
        if len(c) > len(shape) or any(k not in (1, s) for k, s in zip(reversed(c), reversed(shape))):
            raise GraphError(f"node {self.name!r}: a constant of shape {_dims(c)} does not broadcast to "
                             f"{_dims(shape)}")

    def readable_lines(self, indent=2):
        op = "*" if self.op_type == "mul" else "+"
        return [f"[{self.hint_name}]({self.input_str()}){op}Const{_dims(self.const_shape)}"]


class Prepend(_Constant, Node):
    """``rows`` learned rows, then ``x``, along the first axis (a class token)."""

    TYPE = "prepend"
    ATTRS = (("rows", 1),)
    INTO_CONCAT = False  # it owns a concatenation of its own
    formula = "concat(weight, x) along the first axis"

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        self.weight = None

    @property
    def weight_shape(self) -> Shape:
        return (self.rows, *self.input_shape[1:])

    def _infer(self) -> Shape:
        shape = self.input_shape
        return (self.rows + shape[0], *shape[1:])

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]Prepend{self.rows}({self.input_str()})"]


# Registered in node_types.NODE_TYPES, in this order.
TENSOR_NODES: tuple[type[Node], ...] = (MatMul, Softmax, LayerNorm, Dense, Reshape, Transpose, Constant, Prepend,
                                          L2Norm)
TENSOR_TYPES: tuple[str, ...] = tuple(cls.TYPE for cls in TENSOR_NODES)

