"""IR operators.

Every operator is a :class:`Node`. Its ``inputs`` are a list of *terms* concatenated along
channels; each term is a list of :class:`Value` channel slices of equal shape that are summed
(``element`` with ``op_type='mul'`` multiplies them). Shapes are ``(channels, height, width)``
without the batch dimension, as in the reference IOS implementation, whose JSON layout
``to_json``/``from_json`` read and write.

A value may also be a general tensor (rank 1 to 5 without the batch: features; tokens x
features; heads x tokens x features); its first axis plays the channel axis's part (slices and
concatenations are along it). The operators for general tensors are in :mod:`.tensor_nodes`;
the feature-map operators (``RANKS = (3,)``: conv, pool, shuffle, resize) refuse them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from ios_core.ir import fields
from ios_core.ir.activations import ACTIVATIONS, FUSED_ACTIVATIONS
from ios_core.ir.errors import GraphError
from ios_core.ir.meta import meta_from_json, meta_to_json
from ios_core.ir.value import Inputs, Value

# Activation kinds are declared in .activations: parameterless ones may be fused into a conv,
# linear or affine node (``act``); those with parameters exist only as ``activation`` nodes.
RESIZE_MODES = ("nearest", "bilinear")
POOL_TYPES = ("max", "avg", "global_max", "global_avg")
ELEMENT_OPS = ("add", "mul")

Shape = tuple[int, ...]
Lookup = Callable[[str], "Node"]


# attribute -> (reader, its argument): the type and range every node's attribute must have.
_ATTR_RULES: dict[str, tuple[Callable, object]] = {
    "kernel": (fields.as_pair, 1), "stride": (fields.as_pair, 1), "dilation": (fields.as_pair, 1),
    "padding": (fields.as_pair, 0), "out_channels": (fields.as_int, 1), "out_features": (fields.as_int, 1),
    "groups": (fields.as_int, 1), "act": (fields.as_choice, ACTIVATIONS), "act_type": (fields.as_choice, ACTIVATIONS),
    "pool_type": (fields.as_choice, POOL_TYPES), "op_type": (fields.as_choice, ELEMENT_OPS),
    "inplace": (fields.as_bool, None),
    # general tensors (tensor_nodes)
    "axis": (fields.as_int, None), "axes": (fields.as_int, 1), "rows": (fields.as_int, 1),
    "shape": (fields.as_shape, None), "const_shape": (fields.as_shape, None),
}


def _pair(v) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    a, b = v
    return (int(a), int(b))


def _window_out(size: int, kernel: int, stride: int, pad: int, dilation: int = 1, pad_end: int | None = None) -> int:
    pad_end = pad if pad_end is None else pad_end
    return (size + pad + pad_end - dilation * (kernel - 1) - 1) // stride + 1


def _fused_act(act) -> str:
    if act not in FUSED_ACTIVATIONS:
        raise ValueError(f"unknown fused activation {act!r} (one of {', '.join(FUSED_ACTIVATIONS)})")
    return act


class _Weighted:
    """A weight, a bias and a fused activation: the weight handling Conv, Linear and Affine
    share. A subclass gives ``weight_shape`` and ``bias_shape`` and its own ``init_weights``
    (the seeded initialization differs per operator)."""

    HAS_WEIGHTS: ClassVar[bool] = True

    def _init_weighted(self) -> None:
        self.act = _fused_act(self.act)
        self.weight: np.ndarray | None = None
        self.bias: np.ndarray | None = None

    @property
    def bias_shape(self) -> tuple[int]:
        return (self.weight_shape[0],)

    def params(self) -> int:
        return math.prod(self.weight_shape) + math.prod(self.bias_shape)

    def weights(self) -> dict[str, np.ndarray]:
        return {} if self.weight is None else {"weight": self.weight, "bias": self.bias}

    def set_weights(self, arrays) -> None:
        w, b = np.asarray(arrays["weight"], np.float32), np.asarray(arrays["bias"], np.float32)
        if w.shape != tuple(self.weight_shape) or b.shape != tuple(self.bias_shape):
            raise GraphError(f"node {self.name!r}: weight and bias shapes {w.shape}, {b.shape} != "
                             f"{tuple(self.weight_shape)}, {tuple(self.bias_shape)}")
        self.weight, self.bias = w, b


class _Padded:
    """Mixin for windowed operators: ``padding`` is (top, left); ``padding_end`` (bottom, right)
    is optional and, when absent (``()``), equal to ``padding`` (symmetric, the reference format)."""

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """(top, left, bottom, right)."""
        end = self.padding_end or self.padding
        return (*self.padding, *end)

    @property
    def symmetric(self) -> bool:
        return not self.padding_end or tuple(self.padding_end) == tuple(self.padding)

    WINDOWED: ClassVar[bool] = True

    def _check_pads(self) -> None:
        if min(self.pads) < 0:
            raise ValueError(f"negative padding {self.pads}")


class Node:
    """Base class. Subclasses set ``TYPE`` and ``ATTRS`` (JSON keys with their defaults)."""

    TYPE: ClassVar[str] = ""
    # (attribute, default); a default of ``None`` means required in JSON.
    ATTRS: ClassVar[tuple[tuple[str, object], ...]] = ()
    # Attributes written to JSON only when they differ from their default (our extensions
    # to the reference format, so reference files round-trip byte for byte).
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    HAS_WEIGHTS: ClassVar[bool] = False
    # Facts every consumer reads from the node class (declared here, never listed by type there):
    # COMPOSED: the output is the composed input itself (ios_core.lowering.compose already summed,
    #   multiplied or concatenated the terms); nothing is left to compute, no kernel is launched.
    #   A visitor handles a composed type with its identity method unless it has one of its own
    #   (OpVisitor's default ALIASES).
    COMPOSED: ClassVar[bool] = False
    # VIEW: the output may be the input's storage seen anew (a channel slice, a reshape), so the
    #   input's storage must live as long as the output does.
    VIEW: ClassVar[bool] = False
    # INTO_CONCAT: a runtime may write the output straight into its slice of a concatenation
    #   that reads it whole (not a concatenation, which owns its buffer; not a layout change).
    INTO_CONCAT: ClassVar[bool] = True
    # WINDOWED: slides a kernel window (``kernel``, ``stride``, ``padding``): conv and pool.
    WINDOWED: ClassVar[bool] = False
    # OPERANDS: each input term is a separate operand (a matrix product's two), not a part of one
    #   concatenation; the composed input is then the tuple of the terms' values.
    OPERANDS: ClassVar[bool] = False
    # RANKS: the ranks of input this operator takes (None: any); (3,): a feature map (C, H, W).
    RANKS: ClassVar[tuple[int, ...] | None] = None

    def __init__(self, name: str, inputs: Inputs, hint_name: str | None = None, **attrs):
        self.name = str(name)
        self.hint_name = str(hint_name if hint_name is not None else name)
        self.meta: dict = {}  # facts beside the computation, keying nothing (ios_core.ir.meta)
        self.inputs: Inputs = [list(term) for term in inputs]
        self.output_shape: Shape | None = None
        for key, default in self.ATTRS:
            setattr(self, key, self._coerce(key, attrs.pop(key, default)))
        if attrs:
            raise TypeError(f"{type(self).__name__} got unknown attributes {sorted(attrs)}")

    # ---- attributes -------------------------------------------------------------------
    @staticmethod
    def _coerce(key: str, value):
        """Check an attribute's type and range (_ATTR_RULES); numpy integers become ints."""
        if key == "padding_end":  # asymmetric padding: () when symmetric
            value = _plain(value)
            return fields.as_pair(value, key, 0) if value not in (None, (), []) else ()
        rule = _ATTR_RULES.get(key)
        if rule is None:
            return value
        if value is None:
            raise GraphError(f"{key} is required (got null)")
        reader, arg = rule
        value = _plain(value)
        return reader(value, key) if arg is None else reader(value, key, arg)

    @property
    def type(self) -> str:
        return self.TYPE

    def values(self) -> list[Value]:
        return [v for term in self.inputs for v in term]

    def predecessors(self) -> list[Node]:
        """Distinct nodes this node reads, in first-use order."""
        seen: dict[int, Node] = {}
        for v in self.values():
            seen.setdefault(id(v.node), v.node)
        return list(seen.values())

    @property
    def input_shape(self) -> Shape:
        """The composed input's shape: the terms' channels summed, the other axes the first value's."""
        first = self.inputs[0][0]
        return (sum(term[0].length for term in self.inputs), *first.node.output_shape[1:])

    # ---- shapes, cost ---------------------------------------------------------------
    def infer_shape(self) -> Shape:
        if self.RANKS is not None and self.inputs:
            self.check_rank()  # a feature-map operator's inference unpacks (C, H, W)
        self.output_shape = self._infer()
        return self.output_shape

    def _infer(self) -> Shape:
        return self.input_shape

    def check(self) -> None:
        """Raise GraphError (naming this node) if its inputs are malformed."""
        if not self.inputs or any(len(term) == 0 for term in self.inputs):
            raise GraphError(f"node {self.name!r} ({self.TYPE}) has an empty input or term")
        hw = None
        for term in self.inputs:
            for v in term:
                shape = v.node.output_shape
                if shape is None:
                    raise GraphError(f"node {self.name!r} reads {v.node.name!r} whose shape is unknown")
                if not (0 <= v.begin < v.end <= shape[0]):
                    raise GraphError(
                        f"node {self.name!r} reads channels [{v.begin}, {v.end}) of {v.node.name!r}, "
                        f"which has {shape[0]} channels"
                    )
                if hw is None:
                    hw = shape[1:]
                elif tuple(shape[1:]) != tuple(hw):
                    raise GraphError(
                        f"node {self.name!r}: input {v.node.name!r} is {_dims(shape[1:])}, expected {_dims(hw)}"
                    )
            if len({v.length for v in term}) != 1:
                raise GraphError(f"node {self.name!r}: values summed in one term differ in channel count")
        self.check_rank()

    def check_rank(self) -> None:
        """Refuse an input of a rank this operator does not take (``RANKS``)."""
        rank = len(self.inputs[0][0].node.output_shape)
        if self.RANKS is not None and rank not in self.RANKS:
            raise GraphError(f"node {self.name!r} ({self.TYPE}) takes a feature map (C, H, W), not a tensor of "
                             f"shape {tuple(self.inputs[0][0].node.output_shape)}")

    def macs(self) -> int:
        """Multiply-accumulate operations for one image (convolutions and linear layers)."""
        return 0

    def params(self) -> int:
        return 0

    # ---- weights ----------------------------------------------------------------------
    def weights(self) -> dict[str, np.ndarray]:
        return {}

    def set_weights(self, arrays: dict[str, np.ndarray]) -> None:  # pragma: no cover - base
        pass

    def init_weights(self, rng: np.random.Generator) -> None:
        pass

    # ---- JSON -------------------------------------------------------------------------
    def to_json(self, meta: bool = True) -> dict:
        """The node's JSON; ``meta=False``: without its ``meta`` (what keys a graph, ios_core.ir.meta)."""
        cfg: dict = {"type": self.TYPE, "name": self.name, "hint_name": self.hint_name}
        cfg["inputs"] = [[v.to_json() for v in term] for term in self.inputs]
        for key, default in self.ATTRS:
            value = getattr(self, key)
            if key in self.OPTIONAL and value == default:
                continue
            cfg[key] = list(value) if isinstance(value, tuple) else value
        cfg["output_shape"] = list(self.output_shape) if self.output_shape is not None else None
        if meta and self.meta:
            cfg["meta"] = meta_to_json(self.meta)
        return cfg

    @classmethod
    def from_json(cls, cfg: dict, lookup: Lookup) -> Node:
        name = fields.as_name(cfg.get("name"), f"the name of a {cfg.get('type')!r} node")
        hint = cfg.get("hint_name")
        hint = None if hint is None else fields.as_name(hint, f"node {name!r}: hint_name")
        inputs = _parse_inputs(cfg.get("inputs"), name, lookup)
        attrs = {}
        for key, default in cls.ATTRS:
            if key in cfg:
                attrs[key] = cfg[key]
            elif default is None:
                raise GraphError(f"node {name!r} ({cls.TYPE}) lacks the field {key!r}")
        try:
            node = cls(name, inputs, hint_name=hint, **attrs)
        except (TypeError, ValueError) as e:
            raise GraphError(f"node {name!r}: {e}") from None
        if cfg.get("output_shape") is not None:
            node.output_shape = fields.as_shape(cfg["output_shape"], f"node {name!r}: output_shape")
        if cfg.get("meta") is not None:
            node.meta = meta_from_json(cfg["meta"], f"node {name!r}")
        return node

    # ---- text ---------------------------------------------------------------------------
    def input_str(self, op: str = "+") -> str:
        terms = [op.join(v.node.hint_name for v in term) for term in self.inputs]
        if len(terms) == 1:
            return f"({terms[0]})" if len(self.inputs[0]) > 1 else terms[0]
        return "Concat(" + ",".join(terms) + ")"

    def readable_lines(self, indent: int = 2) -> list[str]:
        return [f"[{self.hint_name}]{type(self).__name__}({self.input_str()})"]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _dims(sizes) -> str:
    """Sizes as ``HxW`` (error messages)."""
    return "x".join(str(int(s)) for s in sizes)


def _parse_inputs(raw, name: str, lookup: Lookup) -> Inputs:
    if raw is None:
        raise GraphError(f"node {name!r} has no inputs")
    inputs: Inputs = []
    for term in fields.as_list(raw, f"node {name!r}: inputs"):
        values = []
        for item in fields.as_list(term, f"node {name!r}: an input term"):
            if not (isinstance(item, list) and len(item) == 3):
                raise GraphError(f"node {name!r}: an input value must be [node, begin, end], got {fields.shown(item)}")
            source = fields.as_name(item[0], f"node {name!r}: an input's node name")
            begin = fields.as_int(item[1], f"node {name!r}: channel begin", 0)
            end = fields.as_int(item[2], f"node {name!r}: channel end", 0)
            values.append(Value(lookup(source), begin, end))
        inputs.append(values)
    return inputs


def _plain(value):
    """numpy scalars (from model builders) as Python numbers; lists and tuples element-wise."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


class Placeholder(Node):
    TYPE = "placeholder"

    def __init__(self, name: str, output_shape, hint_name: str | None = None):
        super().__init__(name, [], hint_name)
        self.output_shape = fields.as_shape(_plain(output_shape), f"placeholder {self.name!r}: output_shape")

    def _infer(self) -> Shape:
        return self.output_shape

    def check(self) -> None:
        if not fields.MIN_RANK <= len(self.output_shape) <= fields.MAX_RANK or min(self.output_shape) <= 0:
            raise GraphError(f"placeholder {self.name!r} has a bad shape {self.output_shape}")

    def to_json(self, meta: bool = True) -> dict:
        return {"type": self.TYPE, "name": self.name, "hint_name": self.hint_name,
                "output_shape": list(self.output_shape)}

    @classmethod
    def from_json(cls, cfg: dict, lookup: Lookup) -> Node:
        name = fields.as_name(cfg.get("name"), "the name of a placeholder")
        if "output_shape" not in cfg:
            raise GraphError(f"placeholder {name!r} lacks output_shape")
        hint = cfg.get("hint_name")
        return cls(name, cfg["output_shape"], None if hint is None else fields.as_name(hint, "hint_name"))

    def readable_lines(self, indent: int = 2) -> list[str]:
        return [f"[{self.hint_name}]Placeholder"]


class Conv(_Weighted, _Padded, Node):
    """2-D convolution with fused bias and activation (``padding_end`` for asymmetric padding)."""

    TYPE = "conv"
    RANKS = (3,)
    ATTRS = (("out_channels", None), ("kernel", None), ("stride", (1, 1)), ("padding", (0, 0)),
             ("dilation", (1, 1)), ("groups", 1), ("act", "identity"), ("padding_end", ()))
    OPTIONAL = frozenset({"dilation", "padding_end"})

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        self.out_channels = int(self.out_channels)
        self.groups = int(self.groups)
        self._init_weighted()
        self._check_pads()

    def _infer(self) -> Shape:
        c, h, w = self.input_shape
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        pt, pl, pb, pr = self.pads
        return (self.out_channels, _window_out(h, kh, sh, pt, dh, pb), _window_out(w, kw, sw, pl, dw, pr))

    def check(self) -> None:
        super().check()
        cin = self.input_shape[0]
        if cin % self.groups or self.out_channels % self.groups:
            raise GraphError(
                f"node {self.name!r}: groups={self.groups} does not divide {cin} input and "
                f"{self.out_channels} output channels"
            )

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.out_channels, self.input_shape[0] // self.groups, *self.kernel)

    def macs(self) -> int:
        _, ho, wo = self.output_shape
        return self.out_channels * ho * wo * math.prod(self.weight_shape[1:])

    def init_weights(self, rng):
        fan_in = math.prod(self.weight_shape[1:])
        gain = 2.0 if self.act == "relu" else 1.0
        self.weight = rng.standard_normal(self.weight_shape, dtype=np.float32) * np.float32(np.sqrt(gain / fan_in))
        self.bias = rng.standard_normal(self.out_channels, dtype=np.float32) * np.float32(0.01)

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]Conv2d({self.input_str()})"]


class Pool(_Padded, Node):
    """max / avg / global pools. The average counts padding (as cuDNN's INCLUDE_PADDING) unless
    ``count_include_pad`` is false; max pools pad with -inf. ``padding_end`` as in Conv."""

    TYPE = "pool"
    RANKS = (3,)
    ATTRS = (("pool_type", None), ("kernel", (1, 1)), ("stride", (1, 1)), ("padding", (0, 0)),
             ("padding_end", ()), ("count_include_pad", True))
    OPTIONAL = frozenset({"padding_end", "count_include_pad"})

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        if self.pool_type not in POOL_TYPES:
            raise ValueError(f"unknown pool_type {self.pool_type!r}")
        if not isinstance(self.count_include_pad, bool):
            raise ValueError(f"count_include_pad must be true or false, got {self.count_include_pad!r}")
        self._check_pads()

    @property
    def is_global(self) -> bool:
        return self.pool_type.startswith("global")

    def _infer(self) -> Shape:
        c, h, w = self.input_shape
        if self.is_global:
            self.kernel, self.stride, self.padding, self.padding_end = (h, w), (1, 1), (0, 0), ()
            return (c, 1, 1)
        (kh, kw), (sh, sw) = self.kernel, self.stride
        pt, pl, pb, pr = self.pads
        return (c, _window_out(h, kh, sh, pt, 1, pb), _window_out(w, kw, sw, pl, 1, pr))

    def input_counts(self) -> np.ndarray:
        """(out_h, out_w) float32: how many input (not padding) positions each window covers;
        the divisor of an average that excludes padding."""
        _, h, w = self.input_shape
        _, ho, wo = self.output_shape if self.output_shape is not None else self._infer()
        pt, pl, _, _ = self.pads

        def per_dim(size, out, k, s, p):
            start = np.arange(out) * s - p
            return np.clip(start + k, 0, size) - np.clip(start, 0, size)

        rows = per_dim(h, ho, self.kernel[0], self.stride[0], pt)
        cols = per_dim(w, wo, self.kernel[1], self.stride[1], pl)
        return np.outer(rows, cols).astype(np.float32)

    def check(self) -> None:
        super().check()
        if not self.is_global and any(p > k // 2 for p, k in zip(self.padding, self.kernel)):
            raise GraphError(f"node {self.name!r}: padding {self.padding} is more than half the kernel "
                             f"{self.kernel} (no pooling window would see the input)")

    def readable_lines(self, indent=2):
        names = {"max": "MaxPool2d", "avg": "AvgPool2d", "global_max": "GlobalMaxPool2d",
                 "global_avg": "GlobalAvgPool2d"}
        return [f"[{self.hint_name}]{names[self.pool_type]}({self.input_str()})"]


class Element(Node):
    """Element-wise combination of the values of each term: ``add`` sums, ``mul`` multiplies.

    With a single term, values whose axes after the first are all of size 1 (1x1 for a feature
    map) broadcast over the others (the per-channel scale of a squeeze-and-excitation block:
    ``x * sigmoid(fc(pool(x)))``); the node's size is the largest of its values'."""

    TYPE = "element"
    ATTRS = (("op_type", "add"),)
    COMPOSED = VIEW = True  # the composition combines the terms; one value passes through

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)

    @property
    def broadcasts(self) -> bool:
        """Whether some value is 1x1 while the node is larger (a per-channel broadcast)."""
        return len(self.inputs) == 1 and len({tuple(v.node.output_shape[1:]) for v in self.inputs[0]}) > 1

    @property
    def input_shape(self) -> Shape:
        if len(self.inputs) != 1:
            return super().input_shape
        term = self.inputs[0]
        rest = max((tuple(v.node.output_shape[1:]) for v in term), key=math.prod)
        return (term[0].length, *rest)

    def check(self) -> None:
        if len(self.inputs) != 1:
            return super().check()
        term = self.inputs[0]
        if not term:
            raise GraphError(f"node {self.name!r} ({self.TYPE}) has an empty input or term")
        for v in term:
            shape = v.node.output_shape
            if shape is None:
                raise GraphError(f"node {self.name!r} reads {v.node.name!r} whose shape is unknown")
            if not (0 <= v.begin < v.end <= shape[0]):
                raise GraphError(f"node {self.name!r} reads channels [{v.begin}, {v.end}) of {v.node.name!r}, "
                                 f"which has {shape[0]} channels")
        if len({v.length for v in term}) != 1:
            raise GraphError(f"node {self.name!r}: values combined in one term differ in channel count")
        rest = tuple(self.input_shape[1:])
        ones = (1,) * len(rest)
        for v in term:
            if tuple(v.node.output_shape[1:]) not in (rest, ones):
                raise GraphError(f"node {self.name!r}: input {v.node.name!r} is {_dims(v.node.output_shape[1:])}, "
                                 f"expected {_dims(rest)} (or {_dims(ones)}, broadcast)")

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]{self.input_str('*' if self.op_type == 'mul' else '+')}"]


class Identity(Node):
    """Identity; with several terms it is a concatenation, with several values a sum."""

    TYPE = "identity"
    COMPOSED = VIEW = True
    INTO_CONCAT = False  # a concatenation owns its buffer

    def readable_lines(self, indent=2):
        s = self.input_str()
        return [f"[{self.hint_name}]{s if s.startswith('C') else '(' + s + ')'}"]


class Activation(Node):
    """An element-wise activation; ``alpha`` and ``beta`` parametrize ``leaky_relu``,
    ``hardsigmoid`` and ``clip`` (see :data:`ACTIVATIONS`)."""

    TYPE = "activation"
    ATTRS = (("act_type", None), ("inplace", False), ("alpha", 0.0), ("beta", 0.0))
    OPTIONAL = frozenset({"alpha", "beta"})

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        if self.act_type not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.act_type!r}")
        for key in ("alpha", "beta"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise ValueError(f"{key} must be a finite number, got {value!r}")
            setattr(self, key, float(value))
        if self.act_type == "clip" and self.alpha > self.beta:
            raise ValueError(f"clip needs alpha (min) <= beta (max), got [{self.alpha}, {self.beta}]")

    def readable_lines(self, indent=2):
        return [f"{self.act_type.capitalize()}@{self.hint_name}({self.input_str()})"]


class Relu(Node):
    TYPE = "relu"

    @property
    def act_type(self) -> str:
        return "relu"


class Flatten(Node):
    """Flattens (C, H, W), or any shape, to (C*H*W, 1, 1): the classifier tail's reshape."""

    TYPE = "flatten"
    VIEW = True  # a reshape
    INTO_CONCAT = False  # it changes the layout

    def _infer(self) -> Shape:
        return (math.prod(self.input_shape), 1, 1)


class Linear(_Weighted, Node):
    """Fully connected layer on the flattened input, with fused bias and activation."""

    TYPE = "linear"
    ATTRS = (("out_features", None), ("act", "identity"))

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        self.out_features = int(self.out_features)
        self._init_weighted()

    @property
    def in_features(self) -> int:
        return math.prod(self.input_shape)

    def _infer(self) -> Shape:
        return (self.out_features, 1, 1)

    def macs(self) -> int:
        return self.in_features * self.out_features

    @property
    def weight_shape(self):
        return (self.out_features, self.in_features)

    def init_weights(self, rng):
        gain = 2.0 if self.act == "relu" else 1.0
        self.weight = rng.standard_normal(self.weight_shape, dtype=np.float32) * np.float32(
            np.sqrt(gain / self.in_features))
        self.bias = rng.standard_normal(self.out_features, dtype=np.float32) * np.float32(0.01)


class Affine(_Weighted, Node):
    """Per-channel scale and shift, ``y = act(x * weight[c] + bias[c])``: a batch normalization
    that follows no convolution (pre-activation networks), or a constant ``Mul``/``Add``/``Sub``."""

    TYPE = "affine"
    ATTRS = (("act", "identity"),)
    OPTIONAL = frozenset({"act"})

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        self._init_weighted()

    @property
    def channels(self) -> int:
        return self.input_shape[0]

    @property
    def channel_shape(self) -> Shape:
        """The shape (without the batch) the weight and bias take to broadcast over the input:
        (C, 1, 1) for a feature map, (C, 1, ...) for any rank."""
        return (self.channels, *(1,) * (len(self.input_shape) - 1))

    @property
    def weight_shape(self) -> tuple[int]:
        return (self.channels,)

    def init_weights(self, rng):
        self.weight = (1.0 + 0.1 * rng.standard_normal(self.channels)).astype(np.float32)
        self.bias = (0.1 * rng.standard_normal(self.channels)).astype(np.float32)

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]Affine({self.input_str()})"]


class Shuffle(Node):
    """Channel shuffle of ShuffleNet: output channel ``j * groups + i`` is input channel
    ``i * (C / groups) + j`` (``reshape(g, C/g) -> transpose -> reshape``)."""

    TYPE = "shuffle"
    RANKS = (3,)
    ATTRS = (("groups", None),)

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        if isinstance(self.groups, bool) or not isinstance(self.groups, int) or self.groups < 1:
            raise ValueError(f"groups must be a positive integer, got {self.groups!r}")

    def check(self) -> None:
        super().check()
        if self.input_shape[0] % self.groups:
            raise GraphError(f"node {self.name!r}: groups={self.groups} does not divide {self.input_shape[0]} "
                             f"channels")

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]ChannelShuffle{self.groups}({self.input_str()})"]


class Resize(Node):
    """Spatial resize to ``size`` (height, width): ``nearest`` (the source pixel ``floor(i *
    in / out)``, PyTorch's ``nearest``) or ``bilinear`` (half-pixel centers, or the corners
    aligned with ``align_corners``)."""

    TYPE = "resize"
    RANKS = (3,)
    ATTRS = (("size", None), ("mode", "nearest"), ("align_corners", False))
    OPTIONAL = frozenset({"align_corners"})

    def __init__(self, name, inputs, hint_name=None, **attrs):
        super().__init__(name, inputs, hint_name, **attrs)
        try:
            self.size = _pair(self.size)
        except (TypeError, ValueError):
            raise ValueError(f"size must be [height, width], got {self.size!r}") from None
        if min(self.size) < 1:
            raise ValueError(f"size must be positive, got {self.size}")
        if self.mode not in RESIZE_MODES:
            raise ValueError(f"unknown resize mode {self.mode!r} (one of {', '.join(RESIZE_MODES)})")
        if not isinstance(self.align_corners, bool) or (self.align_corners and self.mode != "bilinear"):
            raise ValueError("align_corners must be a boolean, true only for bilinear")

    def _infer(self) -> Shape:
        return (self.input_shape[0], *self.size)

    def interpolation(self, axis: int) -> np.ndarray:
        """(out, in) float32 matrix of the bilinear weights along ``axis`` (0: height, 1: width):
        the resize is ``A_h @ x @ A_w.T`` per channel (for engines without a matching resize)."""
        n_in, n_out = self.input_shape[1 + axis], self.size[axis]
        i = np.arange(n_out, dtype=np.float64)
        if self.align_corners:
            src = i * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
        else:
            src = np.maximum((i + 0.5) * (n_in / n_out) - 0.5, 0.0)
        lo = np.minimum(np.floor(src).astype(int), n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        frac = src - lo
        m = np.zeros((n_out, n_in))
        np.add.at(m, (np.arange(n_out), lo), 1.0 - frac)
        np.add.at(m, (np.arange(n_out), hi), frac)
        return m.astype(np.float32)

    def readable_lines(self, indent=2):
        return [f"[{self.hint_name}]Resize{self.size[0]}x{self.size[1]}({self.input_str()})"]


class Sequential(Node):
    """A chain of operators scheduled as one unit; its inputs are its first node's inputs."""

    TYPE = "sequential"

    def __init__(self, name: str, nodes: list[Node], hint_name: str | None = None):
        if not nodes:
            raise ValueError("a sequential node needs at least one inner node")
        self.nodes = list(nodes)
        super().__init__(name, nodes[0].inputs, hint_name)
        self.inputs = nodes[0].inputs  # shared, not copied: one source of truth

    def _infer(self) -> Shape:
        for node in self.nodes:
            node.infer_shape()
        return self.nodes[-1].output_shape

    def check(self) -> None:
        inner = set()
        for node in self.nodes:
            if isinstance(node, (Sequential, Placeholder)):
                raise GraphError(f"sequential {self.name!r} holds a {node.TYPE} node {node.name!r}; it may hold "
                                 "only operators")
            node.check()
            node.infer_shape()
            for v in node.values():
                if node is not self.nodes[0] and id(v.node) not in inner and v.node not in self.predecessors():
                    raise GraphError(f"node {node.name!r} inside sequential {self.name!r} reads "
                                     f"{v.node.name!r}, which is neither inside it nor one of its inputs")
            inner.add(id(node))

    def predecessors(self) -> list[Node]:
        inner = {id(n) for n in self.nodes}
        seen: dict[int, Node] = {}
        for node in self.nodes:
            for v in node.values():
                if id(v.node) not in inner:
                    seen.setdefault(id(v.node), v.node)
        return list(seen.values())

    def macs(self) -> int:
        return sum(n.macs() for n in self.nodes)

    def params(self) -> int:
        return sum(n.params() for n in self.nodes)

    def to_json(self, meta: bool = True) -> dict:
        return {"type": self.TYPE, "name": self.name, "hint_name": self.hint_name,
                "nodes": [n.to_json(meta) for n in self.nodes],
                "output_shape": list(self.output_shape) if self.output_shape else None}

    @classmethod
    def from_json(cls, cfg, lookup):
        raise AssertionError("Sequential is built by Graph.from_json and GraphBuilder")  # pragma: no cover

    def readable_lines(self, indent=2):
        lines = [f"[{self.hint_name}]Sequential("]
        for node in self.nodes:
            lines.extend(" " * indent + line for line in node.readable_lines(indent))
        lines.append(")")
        return lines


# The feature-map node classes in the IR's order; ios_core.ir.node_types.NODE_TYPES registers them
# with the general-tensor ones (tensor_nodes), Sequential last.
FEATURE_MAP_NODES: tuple[type[Node], ...] = (Placeholder, Conv, Pool, Element, Identity, Activation, Relu, Flatten,
                                             Linear, Affine, Shuffle, Resize)


def leaf_nodes(node: Node) -> list[Node]:
    """The executable operators of a node: its inner nodes for a Sequential, else itself."""
    return node.nodes if isinstance(node, Sequential) else [node]
