"""Import an ONNX model (a CNN classifier) into the IOS IR, with the file's weights.

    from ios_core.frontend import onnx as onnx_frontend
    graph = onnx_frontend.load("resnet18.onnx")      # or an onnx.ModelProto, or bytes
    graph.save("resnet18.json")                       # JSON + resnet18.npz beside it

What happens, in order:

1. every operator type is checked first: a type the IR cannot represent is refused at once
   (:class:`~ios_core.frontend.UnsupportedModel`, one line naming the type, the node, and every
   other unsupported type in the file);
2. ``onnx.shape_inference`` annotates the tensors; each IR node's shape is checked against it;
3. the nodes are mapped in file order. Subgraphs whose inputs are all constants (shape
   arithmetic, ``Constant``) are evaluated now (``onnx.reference``); ``Shape`` of an activation
   is a constant (the per-sample shape is static; the batch dimension is the file's, or 1);
   ``Identity``/``Dropout`` are aliases; ``Concat``/``Split``/``Slice`` on channels become the
   IR's channel slices (no node); ``Pad`` (constant zero) is read into the following
   convolution or pool; ``Reshape -> Transpose -> Reshape`` of a channel shuffle becomes one
   ``shuffle`` node;
4. on the IR, the rewrite passes of :mod:`ios_core.ir.rewrite` (``PASSES``): a
   ``BatchNormalization`` (or constant ``Mul``/``Add``) after a convolution or linear layer
   is folded into its weights, the rest stay per-channel ``affine`` nodes;
   ``Mul(x, Sigmoid(x))`` becomes ``silu``; a parameterless activation right after a
   convolution, linear or affine node is fused into it; unused nodes are dropped;
5. the operators are cut into blocks (``ios_core.ir.rewrite.cut_blocks``) at every node
   that all later nodes depend on only through it (the IOS optimizer schedules block by
   block).

The mapping of each operator, and what is refused and why, is in ``docs/import.md``.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ios_core.frontend.errors import UnsupportedModel
from ios_core.frontend.onnx_file import _first_line, _load_external_data, _read, _validate
from ios_core.ir import (
    Activation,
    Affine,
    Block,
    Conv,
    Element,
    Flatten,
    Graph,
    GraphError,
    Identity,
    Linear,
    Node,
    Placeholder,
    Pool,
    Resize,
    Shuffle,
    Value,
    whole,
)
from ios_core.ir.rewrite import IMPORT_PASSES, cut_blocks, run_passes

# ONNX operator types mapped onto IR operators (or channel slices) when they act on activations.
MAPPED = frozenset({
    "Conv", "BatchNormalization", "Relu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu",
    "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceMax", "Concat",
    "Split", "Slice", "Add", "Sub", "Mul", "Div", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose",
    "Gemm", "MatMul", "Resize", "Pad", "Identity", "Dropout", "Cast", "Shape",
})
# Operator types accepted only where every input is a constant (evaluated at import time):
# the shape arithmetic exporters emit around Reshape/Resize.
FOLDED = frozenset({
    "Constant", "ConstantOfShape", "Gather", "Range", "Floor", "Ceil", "Sqrt", "Neg", "Equal", "Where", "Expand",
    "Size", "Min", "Max", "Abs", "ReduceProd", "ReduceSum", "Not", "Less", "Greater", "And", "Or", "Mod",
})
# Rewrites of the mapped IR, in order (ios_core.ir.rewrite): affine folding, SiLU, activation
# fusion; then dead-code elimination and block discovery.
PASSES = IMPORT_PASSES
_FLOAT = 1  # onnx.TensorProto.FLOAT
_BIG = 2 ** 62


@dataclass
class _Act:
    """An activation tensor: channel slices concatenated (the IR's native form, no node needed),
    of per-sample rank 3 (``rank`` 4: N, C, H, W) or flattened (``rank`` 2: N, C, stored 1x1),
    with a pending zero ``pad`` (top, left, bottom, right) a following conv or pool absorbs."""

    values: list[Value]
    rank: int = 4
    pad: tuple[int, int, int, int] | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        _, h, w = self.values[0].node.output_shape
        return (sum(v.length for v in self.values), h, w)

    def dims(self) -> tuple[int, ...]:
        """Per-sample dims as ONNX sees them (padding included)."""
        c, h, w = self.shape
        if self.rank == 2:
            return (c,)
        if self.pad:
            t, left, b, r = self.pad
            return (c, h + t + b, w + left + r)
        return (c, h, w)


@dataclass
class _Grouped:
    """A channel shuffle in progress: ``reshape(N, g, C/g, H, W)``, maybe transposed (0,2,1,3,4)."""

    act: _Act
    groups: int
    transposed: bool = False


def load(source, name: str | None = None) -> Graph:
    """Import ``source`` (a path to an ``.onnx`` file, an ``onnx.ModelProto`` or its bytes) as a
    validated :class:`~ios_core.ir.Graph` carrying the file's weights. Raises
    :class:`~ios_core.frontend.UnsupportedModel` (one line) for what the IR cannot represent, and
    for any file that is not a valid ONNX model: whatever bytes a file holds, the importer either
    returns a graph or raises that one-line error (see "Files from anywhere" in docs/import.md)."""
    model, origin = _read(source)
    if name is None:
        name = Path(origin).stem if origin else (model.graph.name or "onnx_model")
    importer = None
    # warnings (numpy on odd weights, onnx on odd fields) would be extra lines on stderr: a model
    # either imports or is refused in one line
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            _load_external_data(model, origin, name)
            model = _validate(model, origin, name)
            importer = _Importer(model, name, inferred=True)
            graph = importer.run()
        except UnsupportedModel:
            raise
        except GraphError as e:
            raise UnsupportedModel(f"cannot import {name!r}: {e}") from None
        except Exception as e:  # a file from anywhere must never crash the importer
            where = importer.where() if importer is not None else ""
            raise UnsupportedModel(f"cannot import {name!r}: {where}the importer cannot map this model "
                                   f"({type(e).__name__}: {_first_line(e)})") from None
    graph.source = {"format": "onnx", "path": os.path.abspath(origin)} if origin else None
    return graph


def _attrs(node) -> dict:
    """A node's attributes as Python values; ValueError (one line) for one that cannot be read,
    or a string that is not UTF-8 text."""
    import onnx.helper as oh

    def text(name: str, b: bytes) -> str:
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"attribute {name!r} is not UTF-8 text ({b[:40]!r})") from None

    out = {}
    for a in node.attribute:
        try:
            v = oh.get_attribute_value(a)
        except Exception as e:
            raise ValueError(f"attribute {a.name!r} cannot be read ({_first_line(e)})") from None
        if isinstance(v, bytes):
            v = text(a.name, v)
        elif isinstance(v, list) and any(isinstance(x, bytes) for x in v):
            v = [text(a.name, x) if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out


def _label(node, index: int | None = None) -> str:
    """How a message names an ONNX node: its name, else its first output, else its position."""
    if node.name:
        return node.name
    first = next((o for o in node.output if o), None)
    if first is not None:
        return first
    return f"#{index}" if index is not None else "(nameless, no outputs)"


class _Importer:
    def __init__(self, model, name: str, inferred: bool = False):
        import onnx

        self.name = name
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        if not inferred:
            try:
                model = onnx.shape_inference.infer_shapes(model, data_prop=True)
            except Exception:  # inference is a cross-check only; the IR infers its own shapes
                pass
        self.model = model
        self.g = model.graph
        self.shapes: dict[str, tuple] = {}
        for vi in list(self.g.value_info) + list(self.g.output):
            dims = _dims(vi)
            if dims is not None:
                self.shapes[vi.name] = dims
        self.values: dict[str, object] = {}  # tensor name -> _Act | _Grouped | np.ndarray
        self.node = None  # the ONNX node being converted (for messages)
        self.node_index: int | None = None
        for init in self.g.initializer:
            self.values[init.name] = self._weight(init)
        self.ops: list[Node] = []
        self._used: set[str] | None = None  # every tensor name some node or the output reads

    def _weight(self, init) -> np.ndarray:
        """An initializer as an array whose shape is its dims: data of the wrong length or
        type is refused in one line, never allocated to its declared size."""
        import onnx

        try:
            arr = onnx.numpy_helper.to_array(init)
            ok = tuple(arr.shape) == tuple(init.dims)
            reason = f"array of shape {arr.shape}"
        except Exception as e:
            ok, reason = False, _first_line(e)
        if not ok:
            raise UnsupportedModel(f"cannot import {self.name!r}: weight {init.name!r}: its data does not match its "
                                   f"dims {list(init.dims)} and type {init.data_type} ({reason})")
        return arr

    # ---- messages ----------------------------------------------------------------------------
    def where(self) -> str:
        n = self.node
        return f"{n.op_type} node {_label(n, self.node_index)!r}: " if n is not None else ""

    def refuse(self, why: str):
        raise UnsupportedModel(f"cannot import {self.name!r}: {self.where()}{why} (no other unsupported operator "
                               f"types in the model)")

    # ---- driver ---------------------------------------------------------------------------------
    def run(self) -> Graph:
        self._check_op_types()
        placeholder = self._input()
        if len(self.g.output) != 1:
            self.refuse(f"the model has {len(self.g.output)} outputs; the IR has one (export the classifier "
                        f"output only)")
        for i, node in enumerate(self.g.node):
            self.node, self.node_index = node, i
            self._convert(node)
        self.node = self.node_index = None
        out_name = self.g.output[0].name
        out = self.values.get(out_name)
        if not isinstance(out, _Act) or out.pad:
            self.refuse(f"the output {out_name!r} is not a computed activation")
        result = self._single(out, "output")
        exit_node = result.node
        if not (result.begin == 0 and result.end == exit_node.output_shape[0]):
            exit_node = self._add(Identity, [[result]], "output")
        ops = run_passes(self.ops, exit_node, PASSES)
        if not ops:
            self.refuse("the output is the input itself; there is nothing to schedule")
        for i, op in enumerate(ops, 1):
            op.name = str(i)
        try:
            graph = Graph(self.name, placeholder, _blocks(placeholder, ops)).validate()
        except GraphError as e:
            raise UnsupportedModel(f"cannot import {self.name!r}: the mapped graph is invalid: {e}") from None
        expected = self.shapes.get(out_name)
        got = graph.output_shape if out.rank == 4 else (graph.output_shape[0],)
        if expected is not None and all(isinstance(d, int) for d in expected[1:]) and tuple(expected[1:]) != got:
            raise UnsupportedModel(f"cannot import {self.name!r}: output shape {got} != the file's {expected[1:]}")
        return graph

    def _check_op_types(self) -> None:
        bad: dict[str, str] = {}
        for i, node in enumerate(self.g.node):
            kind = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            if kind not in MAPPED and kind not in FOLDED and kind not in bad:
                bad[kind] = _label(node, i)
        if bad:
            (kind, where), others = next(iter(bad.items())), list(bad)[1:]
            rest = f"other unsupported operator types: {', '.join(others)}" if others else \
                "no other unsupported operator types"
            raise UnsupportedModel(f"cannot import {self.name!r}: unsupported ONNX operator {kind} (node {where!r}); "
                                   f"{rest}")

    def _input(self) -> Placeholder:
        inits = {i.name for i in self.g.initializer}
        inputs = [i for i in self.g.input if i.name not in inits]
        if len(inputs) != 1:
            raise UnsupportedModel(f"cannot import {self.name!r}: the model has {len(inputs)} inputs; the IR takes "
                                   f"one image batch (N, C, H, W)")
        vi = inputs[0]
        dims = _dims(vi)
        elem = vi.type.tensor_type.elem_type
        if elem != _FLOAT:
            raise UnsupportedModel(f"cannot import {self.name!r}: input {vi.name!r} is not float32 (type {elem})")
        if dims is None or len(dims) != 4 or not all(isinstance(d, int) and d > 0 for d in dims[1:]):
            raise UnsupportedModel(f"cannot import {self.name!r}: input {vi.name!r} has shape {dims}; the IR needs "
                                   f"(N, C, H, W) with C, H, W fixed")
        self.batch = dims[0] if isinstance(dims[0], int) and dims[0] > 0 else 1
        self.input_batch = dims[0] if isinstance(dims[0], int) and dims[0] > 0 else None
        placeholder = Placeholder("0", dims[1:], hint_name=vi.name)
        self.values[vi.name] = _Act([whole(placeholder)])
        return placeholder

    # ---- one ONNX node -------------------------------------------------------------------------------
    def _convert(self, node) -> None:
        ins = []
        for name in node.input:
            if not name:
                ins.append(None)
                continue
            if name not in self.values:
                self.refuse(f"input {name!r} is not produced before this node (the graph is not in "
                            f"topological order, or reads a missing tensor)")
            ins.append(self.values[name])
        try:
            attrs = _attrs(node)
        except ValueError as e:
            self.refuse(str(e))
        kind = node.op_type
        if kind == "Shape" and isinstance(ins[0], _Act):
            outs = [self._shape_of(ins[0], attrs)]
        elif all(v is None or isinstance(v, np.ndarray) for v in ins):
            outs = self._fold(node, ins)
        elif kind in FOLDED:
            self.refuse("this operator is supported only on constants (shape arithmetic), not on activations")
        else:
            outs = getattr(self, f"_op_{kind}")(ins, attrs)
            if not isinstance(outs, list):
                outs = [outs]
        for i, name in enumerate(node.output):
            if not name:
                continue
            if i >= len(outs) or outs[i] is None:
                if self._is_used(name):
                    self.refuse(f"its output {i} ({name!r}) is used; only the main output is supported")
                continue
            self.values[name] = outs[i]
            if isinstance(outs[i], _Act):
                self._check_shape(name, outs[i])

    def _is_used(self, name: str) -> bool:
        if self._used is None:  # once, not per node: the check runs for every unused optional output
            self._used = {i for n in self.g.node for i in n.input} | {o.name for o in self.g.output}
        return name in self._used

    def _check_shape(self, name: str, act: _Act) -> None:
        expected = self.shapes.get(name)
        if expected is None or len(expected) < 2 or not all(isinstance(d, int) for d in expected[1:]):
            return
        if len(expected) != act.rank or tuple(expected[1:]) != act.dims():
            self.refuse(f"the IR computes per-sample shape {act.dims()} (rank {act.rank}) where ONNX infers "
                        f"{tuple(expected)}")

    def _fold(self, node, ins) -> list:
        import onnx
        import onnx.helper as oh
        from onnx.reference import ReferenceEvaluator

        feeds = {n: v for n, v in zip(node.input, ins) if n}
        inputs = [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()]
        outputs = [oh.make_value_info(o, onnx.TypeProto()) for o in node.output if o]
        model = oh.make_model(oh.make_graph([node], "fold", inputs, outputs),
                              opset_imports=[oh.make_opsetid("", max(self.opset, 7))])
        try:
            res = ReferenceEvaluator(model).run(None, feeds)
        except Exception as e:
            self.refuse(f"cannot evaluate it on its constant inputs ({type(e).__name__}: {str(e).splitlines()[0]})")
        res = iter(np.asarray(r) for r in res)
        return [next(res) if o else None for o in node.output]

    def _shape_of(self, act: _Act, attrs: dict) -> np.ndarray:
        full = np.array([self.batch, *act.dims()], dtype=np.int64)
        start, end = attrs.get("start", 0), attrs.get("end", None)
        return full[start:end]

    # ---- helpers -----------------------------------------------------------------------------------------
    def _act(self, value, what: str = "input", padded: bool = False) -> _Act:
        if isinstance(value, _Grouped):
            self.refuse("reads a half-done channel shuffle (Reshape to 5-D); only Reshape -> Transpose(0,2,1,3,4) "
                        "-> Reshape back is supported")
        if not isinstance(value, _Act):
            self.refuse(f"its {what} must be an activation, not a constant")
        if value.pad and not padded:
            self.refuse("reads the output of a Pad; a zero Pad is supported only right before a Conv or pool")
        return value

    def _const(self, value, what: str, optional: bool = False):
        if value is None and optional:
            return None
        if not isinstance(value, np.ndarray):
            self.refuse(f"its {what} must be a constant (an initializer), not a computed tensor")
        return value

    def _add(self, cls, inputs, hint: str, **attrs) -> Node:
        try:
            node = cls(f"t{len(self.ops)}", inputs, hint_name=hint, **attrs)
            node.check()
            node.infer_shape()
        except (ValueError, TypeError, GraphError) as e:
            self.refuse(str(e))
        if min(node.output_shape) <= 0:
            self.refuse(f"the output shape {node.output_shape} is empty")
        self.ops.append(node)
        return node

    def _hint(self) -> str:
        n = self.node
        return _label(n, self.node_index) if n is not None else "node"

    def _single(self, act: _Act, hint: str | None = None) -> Value:
        """``act`` as one Value (a concatenation of several slices becomes an identity node)."""
        if len(act.values) == 1:
            return act.values[0]
        return whole(self._add(Identity, [[v] for v in act.values], hint or self._hint()))

    @staticmethod
    def _slice(values: list[Value], begin: int, end: int) -> list[Value]:
        out, offset = [], 0
        for v in values:
            lo, hi = max(begin, offset), min(end, offset + v.length)
            if lo < hi:
                out.append(Value(v.node, v.begin + lo - offset, v.begin + hi - offset))
            offset += v.length
        return out

    def _per_channel(self, c: np.ndarray, act: _Act) -> np.ndarray | None:
        """A constant broadcast against ``act`` as one number per channel, or None."""
        channels = act.shape[0]
        if c.ndim > act.rank:
            return None
        shape = (1,) * (act.rank - c.ndim) + tuple(c.shape)
        if shape[0] != 1 or shape[1] not in (1, channels) or any(d != 1 for d in shape[2:]):
            return None
        flat = np.asarray(c, np.float32).reshape(-1)
        return np.ascontiguousarray(np.broadcast_to(flat, (channels,)), dtype=np.float32)

    def _affine(self, act: _Act, scale, shift) -> _Act:
        c = act.shape[0]
        node = self._add(Affine, [[v] for v in act.values], self._hint())
        node.weight = np.array(np.broadcast_to(np.asarray(scale, np.float32), (c,)))
        node.bias = np.array(np.broadcast_to(np.asarray(shift, np.float32), (c,)))
        return _Act([whole(node)], act.rank)

    def _activation(self, ins, act_type: str, alpha: float = 0.0, beta: float = 0.0) -> _Act:
        x = self._act(ins[0])
        node = self._add(Activation, [[v] for v in x.values], self._hint(), act_type=act_type, alpha=alpha,
                         beta=beta)
        return _Act([whole(node)], x.rank)

    def _channel_axis(self, axis: int, rank: int) -> None:
        if (axis % rank) != 1:
            self.refuse(f"axis {axis} is not the channel axis; the IR splits and joins channels only")

    def _window(self, attrs: dict, x: _Act, kernel, dilations=(1, 1)) -> tuple[int, int, int, int]:
        """(top, left, bottom, right) padding of a conv or pool, auto_pad resolved."""
        auto = attrs.get("auto_pad", "NOTSET")
        strides = list(attrs.get("strides", [1, 1]))
        if auto in ("NOTSET", ""):
            pads = list(attrs.get("pads", [0, 0, 0, 0]))
            if len(pads) != 4:
                self.refuse(f"pads {pads} are not 2-D")
            return tuple(int(p) for p in pads)
        if auto == "VALID":
            return (0, 0, 0, 0)
        if auto not in ("SAME_UPPER", "SAME_LOWER"):
            self.refuse(f"auto_pad={auto!r}")
        _, h, w = x.dims()
        begin, end = [], []
        for size, k, s, d in zip((h, w), kernel, strides, dilations):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small = total // 2
            begin.append(small if auto == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        return (begin[0], begin[1], end[0], end[1])

    # ---- operators ---------------------------------------------------------------------------------------
    def _op_Identity(self, ins, attrs):
        return ins[0]

    def _op_Dropout(self, ins, attrs):
        return [ins[0], None]

    def _op_Cast(self, ins, attrs):
        if attrs.get("to") != _FLOAT:
            self.refuse(f"Cast of an activation to type {attrs.get('to')}; the IR computes in float32")
        return ins[0]

    def _op_Conv(self, ins, attrs):
        x = self._act(ins[0], padded=True)
        w = self._const(ins[1], "weight")
        b = self._const(ins[2] if len(ins) > 2 else None, "bias", optional=True)
        if w.ndim != 4:
            self.refuse(f"a {w.ndim - 2}-D convolution; the IR has 2-D convolutions only")
        kernel = tuple(int(k) for k in attrs.get("kernel_shape", w.shape[2:]))
        if kernel != tuple(w.shape[2:]):
            self.refuse(f"kernel_shape {kernel} != weight shape {w.shape}")
        dilations = tuple(int(d) for d in attrs.get("dilations", (1, 1)))
        groups = int(attrs.get("group", 1))
        cin = x.shape[0]
        if w.shape[1] * groups != cin:
            self.refuse(f"weight {w.shape} with group={groups} does not fit {cin} input channels")
        pads = self._window(attrs, x, kernel, dilations)
        if x.pad:
            pads = tuple(a + b for a, b in zip(pads, x.pad))
        top, left, bottom, right = pads
        node = self._add(Conv, [[v] for v in x.values], self._hint(), out_channels=int(w.shape[0]), kernel=kernel,
                         stride=tuple(attrs.get("strides", (1, 1))), padding=(top, left),
                         padding_end=(bottom, right) if (bottom, right) != (top, left) else (),
                         dilation=dilations, groups=groups)
        node.weight = np.array(w, dtype=np.float32)
        node.bias = np.zeros(w.shape[0], np.float32) if b is None else np.array(b.reshape(-1), dtype=np.float32)
        if node.bias.shape != (w.shape[0],):
            self.refuse(f"bias shape {b.shape} != ({w.shape[0]},)")
        return _Act([whole(node)])

    def _op_BatchNormalization(self, ins, attrs):
        x = self._act(ins[0])
        if attrs.get("training_mode", 0):
            self.refuse("training_mode=1; the IR runs inference only")
        scale, bias, mean, var = (self._const(v, what) for v, what in zip(ins[1:5], ("scale", "B", "mean", "var")))
        eps = float(attrs.get("epsilon", 1e-5))
        a = (scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps))
        b = bias.astype(np.float64) - mean.astype(np.float64) * a
        if a.shape != (x.shape[0],):
            self.refuse(f"parameters of shape {a.shape} for {x.shape[0]} channels")
        return [self._affine(x, a, b), None, None]

    def _op_Relu(self, ins, attrs):
        return self._activation(ins, "relu")

    def _op_Sigmoid(self, ins, attrs):
        return self._activation(ins, "sigmoid")

    def _op_Tanh(self, ins, attrs):
        return self._activation(ins, "tanh")

    def _op_HardSwish(self, ins, attrs):
        return self._activation(ins, "hardswish")

    def _op_HardSigmoid(self, ins, attrs):
        return self._activation(ins, "hardsigmoid", float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5)))

    def _op_LeakyRelu(self, ins, attrs):
        return self._activation(ins, "leaky_relu", float(attrs.get("alpha", 0.01)))

    def _op_Clip(self, ins, attrs):
        if self.opset < 11:
            lo, hi = attrs.get("min"), attrs.get("max")
        else:
            lo = self._const(ins[1] if len(ins) > 1 else None, "min", optional=True)
            hi = self._const(ins[2] if len(ins) > 2 else None, "max", optional=True)
            lo = None if lo is None else float(lo)
            hi = None if hi is None else float(hi)
        big = float(np.finfo(np.float32).max)
        if lo == 0.0 and hi == 6.0:
            return self._activation(ins, "relu6")
        if lo == 0.0 and (hi is None or hi >= big):
            return self._activation(ins, "relu")
        return self._activation(ins, "clip", -big if lo is None else lo, big if hi is None else hi)

    def _pool(self, ins, attrs, pool_type: str):
        x = self._act(ins[0], padded=True)
        kernel = tuple(int(k) for k in attrs.get("kernel_shape", ()))
        if len(kernel) != 2:
            self.refuse(f"kernel_shape {kernel} is not 2-D")
        if any(d != 1 for d in attrs.get("dilations", (1, 1))):
            self.refuse("dilated pooling")
        strides = tuple(int(s) for s in attrs.get("strides", (1, 1)))
        pads = list(self._window(attrs, x, kernel))
        include = bool(attrs.get("count_include_pad", 0)) if pool_type == "avg" else True
        if x.pad:
            if pool_type == "max":
                self.refuse("a zero Pad before MaxPool (max pooling pads with -inf)")
            if any(pads) and not include:
                self.refuse("a zero Pad before an AveragePool that pads itself with count_include_pad=0")
            pads = [a + b for a, b in zip(pads, x.pad)]
            include = include or any(x.pad)
        _, h, w = x.shape
        if attrs.get("ceil_mode", 0):
            # the last window may start inside the input or the leading padding only
            for dim, (size, k, s) in enumerate(zip((h, w), kernel, strides)):
                begin, end = pads[dim], pads[dim + 2]
                out = -(-(size + begin + end - k) // s) + 1
                if (out - 1) * s >= size + begin:
                    out -= 1
                need = (out - 1) * s + k - size - begin
                if need > end:
                    if pool_type == "avg" and include:
                        self.refuse("ceil_mode=1 with count_include_pad=1 where the ceiling adds a partial window "
                                    "(its divisor differs between runtimes)")
                    pads[dim + 2] = need
        top, left, bottom, right = pads
        node = self._add(Pool, [[v] for v in x.values], self._hint(), pool_type=pool_type, kernel=kernel,
                         stride=strides, padding=(top, left),
                         padding_end=(bottom, right) if (bottom, right) != (top, left) else (),
                         count_include_pad=include)
        return [_Act([whole(node)]), None]

    def _op_MaxPool(self, ins, attrs):
        if attrs.get("storage_order", 0):
            pass  # affects only the Indices output, refused if used
        return self._pool(ins, attrs, "max")

    def _op_AveragePool(self, ins, attrs):
        return self._pool(ins, attrs, "avg")

    def _global(self, ins, pool_type: str, keepdims: bool = True) -> _Act:
        x = self._act(ins[0])
        if x.rank != 4:
            self.refuse("global pooling of a 2-D tensor")
        node = self._add(Pool, [[v] for v in x.values], self._hint(), pool_type=pool_type)
        return _Act([whole(node)], 4 if keepdims else 2)

    def _op_GlobalAveragePool(self, ins, attrs):
        return self._global(ins, "global_avg")

    def _op_GlobalMaxPool(self, ins, attrs):
        return self._global(ins, "global_max")

    def _reduce(self, ins, attrs, pool_type: str):
        x = self._act(ins[0])
        axes = attrs.get("axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = self._const(ins[1], "axes").tolist()
        if axes is None or x.rank != 4 or sorted(a % 4 for a in axes) != [2, 3]:
            self.refuse(f"a reduction over axes {axes}; only over height and width (2, 3) of a 4-D tensor")
        return self._global(ins, pool_type, keepdims=bool(attrs.get("keepdims", 1)))

    def _op_ReduceMean(self, ins, attrs):
        return self._reduce(ins, attrs, "global_avg")

    def _op_ReduceMax(self, ins, attrs):
        return self._reduce(ins, attrs, "global_max")

    def _op_Concat(self, ins, attrs):
        acts = [self._act(v) for v in ins if v is not None]
        ranks = {a.rank for a in acts}
        if len(ranks) != 1:
            self.refuse("concatenates tensors of different ranks")
        rank = ranks.pop()
        self._channel_axis(int(attrs.get("axis", 1)), rank)
        if len({a.shape[1:] for a in acts}) != 1:
            self.refuse("concatenates tensors of different spatial sizes")
        return _Act([v for a in acts for v in a.values], rank)

    def _op_Split(self, ins, attrs):
        x = self._act(ins[0])
        self._channel_axis(int(attrs.get("axis", 0)), x.rank)
        c = x.shape[0]
        split = attrs.get("split")
        if split is None and len(ins) > 1 and ins[1] is not None:
            split = self._const(ins[1], "split").tolist()
        n_out = len(self.node.output)
        if split is None:
            n = int(attrs.get("num_outputs", n_out))
            size = -(-c // n)
            split = [min(size, c - i * size) for i in range(n)]
        if sum(split) != c or len(split) != n_out or min(split) <= 0:
            self.refuse(f"split sizes {split} do not divide {c} channels into {n_out} outputs")
        outs, begin = [], 0
        for s in split:
            outs.append(_Act(self._slice(x.values, begin, begin + s), x.rank))
            begin += s
        return outs

    def _op_Slice(self, ins, attrs):
        x = self._act(ins[0])
        if self.opset < 10:
            starts, ends = attrs.get("starts"), attrs.get("ends")
            axes, steps = attrs.get("axes"), None
        else:
            starts, ends = (self._const(v, w).tolist() for v, w in zip(ins[1:3], ("starts", "ends")))
            axes = self._const(ins[3], "axes").tolist() if len(ins) > 3 and ins[3] is not None else None
            steps = self._const(ins[4], "steps").tolist() if len(ins) > 4 and ins[4] is not None else None
        axes = list(range(len(starts))) if axes is None else axes
        steps = [1] * len(starts) if steps is None else steps
        dims = (self.batch, *x.dims())
        begin, end = 0, x.shape[0]
        for start, stop, axis, step in zip(starts, ends, axes, steps):
            axis %= x.rank
            size = dims[axis]
            lo = max(0, min(size, start + size if start < 0 else start))
            hi = max(0, min(size, stop + size if stop < 0 else stop))
            if axis == 1:
                if step != 1:
                    self.refuse(f"a channel slice with step {step}")
                begin, end = lo, hi
            elif not (lo == 0 and hi >= size and step == 1) and not (axis == 0 and self.input_batch is None):
                self.refuse(f"a slice along axis {axis}; the IR slices channels only")
        if end <= begin:
            self.refuse("an empty channel slice")
        return _Act(self._slice(x.values, begin, end), x.rank)

    def _binary(self, ins, op: str):
        a, b = ins
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            act, const = (b, a) if isinstance(a, np.ndarray) else (a, b)
            act = self._act(act)
            k = self._per_channel(const, act)
            if k is None:
                self.refuse(f"a constant of shape {const.shape} that is not one number per channel")
            first = isinstance(a, np.ndarray)
            if op == "Add":
                return self._affine(act, 1.0, k)
            if op == "Mul":
                return self._affine(act, k, 0.0)
            if op == "Sub":
                return self._affine(act, -1.0, k) if first else self._affine(act, 1.0, -k)
            if first:
                self.refuse("divides a constant by an activation")
            return self._affine(act, 1.0 / k, 0.0)
        a, b = self._act(a), self._act(b)
        if op == "Div":
            self.refuse("divides two activations")
        if a.rank != b.rank or a.shape[0] != b.shape[0]:
            self.refuse(f"combines tensors of shapes {a.dims()} and {b.dims()}; the IR broadcasts only a 1x1 "
                        f"per-channel tensor over a feature map of the same channels")
        if a.shape[1:] != b.shape[1:] and (1, 1) not in (a.shape[1:], b.shape[1:]):
            self.refuse(f"combines tensors of spatial sizes {a.shape[1:]} and {b.shape[1:]}")
        if op == "Sub":
            b = self._affine(b, -1.0, 0.0)
        va, vb = self._single(a), self._single(b)
        if b.shape[1:] != (1, 1) and a.shape[1:] == (1, 1):
            va, vb = vb, va  # the full-size value first
        node = self._add(Element, [[va, vb]], self._hint(), op_type="mul" if op == "Mul" else "add")
        return _Act([whole(node)], a.rank)

    def _op_Add(self, ins, attrs):
        return self._binary(ins, "Add")

    def _op_Sub(self, ins, attrs):
        return self._binary(ins, "Sub")

    def _op_Mul(self, ins, attrs):
        return self._binary(ins, "Mul")

    def _op_Div(self, ins, attrs):
        return self._binary(ins, "Div")

    def _flatten(self, x: _Act) -> _Act:
        if x.rank == 2 or x.shape[1:] == (1, 1):
            return _Act(x.values, 2)
        node = self._add(Flatten, [[v] for v in x.values], self._hint())
        return _Act([whole(node)], 2)

    def _op_Flatten(self, ins, attrs):
        x = self._act(ins[0])
        if int(attrs.get("axis", 1)) % x.rank != 1:
            self.refuse(f"Flatten with axis {attrs.get('axis')}; only axis 1 (keep the batch)")
        return self._flatten(x)

    def _op_Reshape(self, ins, attrs):
        x = ins[0]
        target = [int(d) for d in self._const(ins[1], "shape").tolist()]
        src = x.act if isinstance(x, _Grouped) else self._act(x)
        c, h, w = src.shape
        dims = [self.batch, *src.dims()] if not isinstance(x, _Grouped) else \
            [self.batch, x.groups, c // x.groups, h, w]
        if isinstance(x, _Grouped) and x.transposed:
            dims = [self.batch, c // x.groups, x.groups, h, w]
        total = int(np.prod(dims))
        if not attrs.get("allowzero", 0):
            target = [dims[i] if d == 0 and i < len(dims) else d for i, d in enumerate(target)]
        if target.count(-1) == 1:
            known = int(np.prod([d for d in target if d != -1]))
            target[target.index(-1)] = total // known if known else 0
        if int(np.prod(target)) != total or target[0] != self.batch:
            self.refuse(f"reshape to {target} moves data across the batch dimension")
        per = target[1:]
        if isinstance(x, _Grouped):
            if per == [c, h, w]:
                if not x.transposed:
                    return src
                node = self._add(Shuffle, [[v] for v in src.values], self._hint(), groups=x.groups)
                return _Act([whole(node)])
            self.refuse(f"a channel shuffle reshaped back to {per}, not {[c, h, w]}")
        if src.rank == 4:
            if per == [c, h, w]:
                return src
            if per == [c * h * w]:
                return self._flatten(src)
            if per == [c * h * w, 1, 1]:
                return _Act(self._flatten(src).values, 4)
            if len(per) == 4 and per[2:] == [h, w] and per[0] * per[1] == c and per[0] > 1:
                return _Grouped(src, per[0])
        elif per == [c] or per == [c, 1, 1]:
            return _Act(src.values, 2 if len(per) == 1 else 4)
        self.refuse(f"a reshape of {tuple(src.dims())} to {tuple(per)}; the IR reshapes only to flatten before "
                    f"the classifier, or as part of a channel shuffle")

    def _op_Transpose(self, ins, attrs):
        x = ins[0]
        if isinstance(x, _Grouped) and not x.transposed and list(attrs.get("perm", [])) == [0, 2, 1, 3, 4]:
            return _Grouped(x.act, x.groups, True)
        self.refuse("a transpose that is not part of a channel shuffle (Reshape -> Transpose(0,2,1,3,4) -> "
                    "Reshape)")

    def _axes(self, ins, attrs) -> list[int]:
        axes = attrs.get("axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = self._const(ins[1], "axes").tolist()
        return list(axes or [])

    def _op_Squeeze(self, ins, attrs):
        x = self._act(ins[0])
        axes = sorted(a % x.rank for a in self._axes(ins, attrs))
        if x.rank == 4 and axes == [2, 3] and x.shape[1:] == (1, 1):
            return _Act(x.values, 2)
        self.refuse(f"a squeeze of axes {axes}; only the 1x1 spatial axes (2, 3)")

    def _op_Unsqueeze(self, ins, attrs):
        x = self._act(ins[0])
        axes = sorted(a % (x.rank + 2) for a in self._axes(ins, attrs))
        if x.rank == 2 and axes == [2, 3]:
            return _Act(x.values, 4)
        self.refuse(f"an unsqueeze of axes {axes}; only a 2-D (N, C) tensor to (N, C, 1, 1)")

    def _linear(self, x: _Act, weight: np.ndarray, bias: np.ndarray) -> _Act:
        if x.rank != 2:
            self.refuse("a matrix product of a 4-D tensor; flatten it first")
        if weight.shape[1] != x.shape[0]:
            self.refuse(f"weight {weight.shape} does not fit {x.shape[0]} input features")
        node = self._add(Linear, [[v] for v in x.values], self._hint(), out_features=int(weight.shape[0]))
        node.weight = np.array(weight, dtype=np.float32)
        node.bias = np.array(np.broadcast_to(np.asarray(bias, np.float32).reshape(-1), (weight.shape[0],)),
                             dtype=np.float32)
        return _Act([whole(node)], 2)

    def _op_Gemm(self, ins, attrs):
        x = self._act(ins[0])
        b = self._const(ins[1], "B")
        c = self._const(ins[2] if len(ins) > 2 else None, "C", optional=True)
        if attrs.get("transA", 0):
            self.refuse("transA=1")
        weight = (b if attrs.get("transB", 0) else b.T) * np.float32(attrs.get("alpha", 1.0))
        bias = np.zeros(weight.shape[0], np.float32) if c is None else \
            np.asarray(c, np.float32) * np.float32(attrs.get("beta", 1.0))
        if bias.size not in (1, weight.shape[0]):
            self.refuse(f"bias C of shape {bias.shape}")
        return self._linear(x, weight, bias)

    def _op_MatMul(self, ins, attrs):
        x = self._act(ins[0])
        b = self._const(ins[1], "B")
        if b.ndim != 2:
            self.refuse(f"a matrix product with a {b.ndim}-D weight")
        return self._linear(x, b.T, np.zeros(b.shape[1], np.float32))

    def _op_Pad(self, ins, attrs):
        x = self._act(ins[0], padded=True)
        if attrs.get("mode", "constant") != "constant":
            self.refuse(f"mode={attrs.get('mode')!r}; only zero (constant) padding")
        if self.opset < 11:
            pads, value = attrs.get("pads"), float(attrs.get("value", 0.0))
        else:
            pads = self._const(ins[1], "pads").tolist()
            value = float(self._const(ins[2], "constant_value")) if len(ins) > 2 and ins[2] is not None else 0.0
            if len(ins) > 3 and ins[3] is not None:
                axes = [a % 4 for a in self._const(ins[3], "axes").tolist()]
                full = [0] * 8
                for i, a in enumerate(axes):
                    full[a], full[a + 4] = pads[i], pads[i + len(axes)]
                pads = full
        if value != 0.0 or x.rank != 4 or len(pads) != 8 or any(pads[i] for i in (0, 1, 4, 5)) or min(pads) < 0:
            self.refuse(f"pads {pads} value {value}; only non-negative zero padding of height and width")
        add = (pads[2], pads[3], pads[6], pads[7])
        old = x.pad or (0, 0, 0, 0)
        return _Act(x.values, 4, tuple(a + b for a, b in zip(old, add)))

    def _op_Resize(self, ins, attrs):
        x = self._act(ins[0])
        if x.rank != 4:
            self.refuse("resizing a 2-D tensor")
        _, h, w = x.shape
        if self.opset < 11:
            scales, sizes = self._const(ins[1], "scales"), None
            coord = "asymmetric"
        else:
            scales = self._const(ins[2], "scales", optional=True) if len(ins) > 2 else None
            sizes = self._const(ins[3], "sizes", optional=True) if len(ins) > 3 else None
            coord = attrs.get("coordinate_transformation_mode", "half_pixel")
        if attrs.get("antialias", 0) or attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            self.refuse("antialias or keep_aspect_ratio_policy")
        if attrs.get("axes") is not None and sorted(a % 4 for a in attrs["axes"]) != [2, 3]:
            self.refuse(f"axes {attrs['axes']}")
        if sizes is not None and sizes.size:
            size = tuple(int(s) for s in sizes.reshape(-1)[-2:])
            if sizes.size == 4 and int(sizes[1]) != x.shape[0]:
                self.refuse("resizes the channel axis")
        elif scales is not None and scales.size:
            s = [float(v) for v in scales.reshape(-1)]
            if len(s) == 4 and (s[0] != 1.0 or s[1] != 1.0):
                self.refuse(f"scales {s} resize the batch or channel axis")
            sh, sw = s[-2:]
            size = (int(np.floor(h * sh)), int(np.floor(w * sw)))
            if size[0] != h * sh or size[1] != w * sw:
                self.refuse(f"scales {s[-2:]} give a fractional output size from {h}x{w}")
        else:
            self.refuse("neither scales nor sizes")
        mode = attrs.get("mode", "nearest")
        if mode == "nearest":
            nearest = attrs.get("nearest_mode", "round_prefer_floor") if self.opset >= 11 else "floor"
            integer = size[0] % h == 0 and size[1] % w == 0
            ok = (coord == "asymmetric" and nearest == "floor") or (
                integer and coord in ("half_pixel", "pytorch_half_pixel")
                and nearest in ("round_prefer_floor", "round_prefer_ceil"))
            if not ok:
                self.refuse(f"nearest resize with coordinate_transformation_mode={coord!r} and "
                            f"nearest_mode={nearest!r}; the IR's nearest is asymmetric/floor (or half_pixel "
                            f"at an integer scale)")
            node = self._add(Resize, [[v] for v in x.values], self._hint(), size=size, mode="nearest")
        elif mode == "linear":
            if coord in ("half_pixel", "pytorch_half_pixel") and min(size) > 1:
                align = False
            elif coord == "align_corners":
                align = True
            else:
                self.refuse(f"linear resize with coordinate_transformation_mode={coord!r}; the IR's bilinear uses "
                            f"half_pixel or align_corners")
            node = self._add(Resize, [[v] for v in x.values], self._hint(), size=size, mode="bilinear",
                             align_corners=align)
        else:
            self.refuse(f"mode={mode!r}; the IR resizes with nearest or (bi)linear interpolation")
        return _Act([whole(node)])


def _dims(value_info) -> tuple | None:
    t = value_info.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim)


def _blocks(placeholder: Placeholder, ops: list[Node]) -> list[Block]:
    """``ops`` (topological order) cut into blocks (:func:`ios_core.ir.rewrite.cut_blocks`)."""
    return [Block(enter, inner, exit_node) for enter, inner, exit_node in cut_blocks(placeholder, ops)]
