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

The mapping of each operator, and what is refused and why, is in ``docs/import.md``; the
mappings themselves are in :mod:`ios_core.frontend.onnx_ops`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from ios_core.frontend.errors import UnsupportedModel
from ios_core.frontend.onnx_file import _first_line, _load_external_data, _read, _validate
from ios_core.frontend.onnx_ops import _FLOAT, OnnxOps, _Act, _Grouped
from ios_core.frontend.onnx_tensor_ops import TensorOps
from ios_core.ir import (
    Activation,
    Affine,
    Block,
    Graph,
    GraphError,
    Identity,
    Node,
    Placeholder,
    Value,
    whole,
)
from ios_core.ir.meta import SOURCE_NODES, add_source_nodes, unnamed
from ios_core.ir.rewrite import IMPORT_PASSES, cut_blocks, run_passes

# ONNX operator types mapped onto IR operators (or channel slices) when they act on activations.
MAPPED = frozenset({
    "Conv", "BatchNormalization", "Relu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu",
    "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceMax", "Concat",
    "Split", "Slice", "Add", "Sub", "Mul", "Div", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose",
    "Gemm", "MatMul", "Resize", "Pad", "Identity", "Dropout", "Cast", "Shape",
    # general tensors (onnx_tensor_ops)
    "LayerNormalization", "Softmax", "Erf", "Gather", "Einsum", "ReduceL2", "InstanceNormalization", "Pow", "ReduceSum",
})
# Operator types accepted only where every input is a constant (evaluated at import time):
# the shape arithmetic exporters emit around Reshape/Resize.
FOLDED = frozenset({
    "Constant", "ConstantOfShape", "Range", "Floor", "Ceil", "Sqrt", "Neg", "Equal", "Where", "Expand",
    "Size", "Min", "Max", "Abs", "ReduceProd", "Not", "Less", "Greater", "And", "Or", "Mod",
    "ScatterND", "Exp", "Sin", "Cos", "Tile", "CumSum",
})
# Rewrites of the mapped IR, in order (ios_core.ir.rewrite): affine folding, SiLU, activation
# fusion; then dead-code elimination and block discovery.
PASSES = IMPORT_PASSES


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


def _source_name(node, index: int | None = None) -> str:
    """How an IR operator's ``meta`` names the ONNX node it computes (ios_core.ir.meta.SOURCE_NODES): its
    name, else (no name in the file) its type and first output, as ONNX tools show it; a name that is not
    UTF-8 (protobuf hands it over as bytes) read with replacement characters."""
    def text(s):
        return s.decode("utf-8", "replace") if isinstance(s, bytes) else s

    return text(node.name) or unnamed(text(node.op_type), text(next((o for o in node.output if o), None)), index)


def _label(node, index: int | None = None) -> str:
    """How a message names an ONNX node: its name, else its first output, else its position."""
    if node.name:
        return node.name
    first = next((o for o in node.output if o), None)
    if first is not None:
        return first
    return f"#{index}" if index is not None else "(nameless, no outputs)"


class _Importer(OnnxOps, TensorOps):
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
        # source names of ONNX nodes that made no IR node of their own (a zero Pad, a channel Concat, the
        # first two nodes of a channel shuffle) read by the node being converted: its first IR node computes them
        self.pending: list[str] = []
        self.skip: set[int] = set()  # indices of ONNX nodes an earlier mapping consumed
        self._producers = None  # tensor name -> (index, node), and the consumers: onnx_tensor_ops
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
            if i in self.skip:  # folded into an earlier node's mapping (the GELU pattern)
                continue
            self.node, self.node_index = node, i
            self._convert(node)
        self.node = self.node_index = None
        out_name = self.g.output[0].name
        out = self.values.get(out_name)
        if isinstance(out, _Act) and out.bpos != 0:
            made = self._producer(out_name)
            self.refuse(f"the output {out_name!r} (of node {_label(made[1], made[0]) if made else '?'!r}) has its "
                        f"batch axis moved from the front (to {out.bpos}); the IR's output is batch first")
        if not isinstance(out, _Act) or out.pad:
            self.refuse(f"the output {out_name!r} is not a computed activation")
        self.pending = list(out.via)  # a Concat read by the output alone: the output's identity computes it
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
        got = (graph.output_shape[0],) if out.flat else graph.output_shape
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
        self.pending = [n for v in ins if isinstance(v, (_Act, _Grouped)) for n in v.via]
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
        if expected is None or len(expected) < 2:
            return
        if act.bpos == 0 and not all(isinstance(d, int) for d in expected[1:]):
            return
        if act.bpos != 0:  # the batch elsewhere: compare every axis but the symbolic ones
            full = act.full(self.batch)
            if len(expected) != len(full) or any(isinstance(e, int) and e != f for e, f in zip(expected, full)):
                self.refuse(f"the IR computes shape {full} (batch at axis {act.bpos}) where ONNX infers "
                            f"{tuple(expected)}")
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
        full = np.array(act.full(self.batch), dtype=np.int64)  # the batch where it is (_Act.bpos)
        start, end = attrs.get("start", 0), attrs.get("end", None)
        return full[start:end]

    # ---- helpers -----------------------------------------------------------------------------------------
    def _act(self, value, what: str = "input", padded: bool = False, moved: bool = False) -> _Act:
        """``value`` as an activation; ``moved``: one whose batch axis is not first is welcome (the
        general-tensor mappings, which track it: ``_Act.bpos``)."""
        if isinstance(value, _Grouped):  # not a channel shuffle after all (split attention's radix): a 5-D tensor
            c, h, w = value.act.shape
            grouped = self._reshape(value.act, [value.groups, c // value.groups, h, w])
            value = self._transpose(grouped, {"perm": [0, 2, 1, 3, 4]}) if value.transposed else grouped
        if not isinstance(value, _Act):
            self.refuse(f"its {what} must be an activation, not a constant")
        if value.pad and not padded:  # read by what cannot absorb it: the zeros made real
            value = self._unpad(value)
        if value.bpos != 0 and not moved:
            self.refuse("reads a tensor whose batch axis a Transpose or Reshape moved from the front; only "
                        "element-wise and general-tensor operators take one")
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
        add_source_nodes(node, [*self.pending, *([_source_name(self.node, self.node_index)] if self.node else [])])
        self.pending = []
        self.ops.append(node)
        return node

    def _also(self, node: Node, indices) -> None:
        """``node`` computes the ONNX nodes at ``indices`` too (a pattern mapped onto one IR node): its
        source names, those of the pattern in the file's order."""
        pattern = sorted({*indices, self.node_index})
        names = [_source_name(self.g.node[i], i) for i in pattern]
        node.meta[SOURCE_NODES] = [n for n in node.meta.get(SOURCE_NODES, []) if n not in names] + names

    def _via(self) -> tuple[str, ...]:
        """The node being converted as a source name its output carries to the IR node that computes it
        (a zero Pad read into a convolution, a channel Concat into its reader)."""
        return (_source_name(self.node, self.node_index),)

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
        x = self._act(ins[0], moved=True)
        node = self._add(Activation, [[v] for v in x.values], self._hint(), act_type=act_type, alpha=alpha,
                         beta=beta)
        return _Act([whole(node)], x.rank, bpos=x.bpos)

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


def _dims(value_info) -> tuple | None:
    t = value_info.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim)


def _blocks(placeholder: Placeholder, ops: list[Node]) -> list[Block]:
    """``ops`` (topological order) cut into blocks (:func:`ios_core.ir.rewrite.cut_blocks`)."""
    return [Block(enter, inner, exit_node) for enter, inner, exit_node in cut_blocks(placeholder, ops)]
