"""Export an IOS graph (with its weights), or a piece of one, to an ONNX model.

    from ios_core.lowering.onnx import export, export_nodes
    model = export(graph, batch_size=1, path="model.onnx")   # onnx.ModelProto, also saved
    model = export(graph, batch_size=None)                    # dynamic batch dimension "N"
    piece = export_nodes(nodes, inputs=[a, b], outputs=[c], batch_size=1)   # a runtime provider's piece

The adapters (onnxruntime, openvino, ``ios-bench export``) and the runtime's kernel providers
use this one exporter; it walks the graph with :mod:`ios_core.lowering.walk`.

NCHW float32, one input ``input`` (N, C, H, W) and one output ``output``. Mapping:
conv -> Conv with (top, left, bottom, right) pads (+ the fused activation: Relu, Sigmoid, Tanh,
Clip for relu6/clip, HardSwish, Mul(x, Sigmoid(x)) for silu, LeakyRelu, HardSigmoid), pools ->
MaxPool / AveragePool(count_include_pad as the node says; the IR's default counts padding) /
GlobalAveragePool / GlobalMaxPool, affine -> Mul + Add of (1, C, 1, 1) initializers, shuffle ->
Reshape(N, g, C/g, H, W) + Transpose + Reshape, resize -> Resize (nearest: asymmetric/floor;
bilinear: half_pixel or align_corners) with sizes taken from the input's batch at run time,
channel slices -> Slice on axis 1, summed values -> Add / Sum, multiplied -> Mul, terms ->
Concat(axis=1), flatten -> Reshape(N, -1, 1, 1), linear -> Flatten + Gemm(transB) + activation
+ Reshape. Every ONNX node is named after the IR operator it computes (``<op>.conv:3``,
``<op>:5``), the nodes composing an operator's input too (``<op>.concat:27``): profilers report
node names, and ``ios-bench profile`` maps them back to the IR by name. The opset is recorded
in the model (``opset_import``) and in its metadata.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ios_core.ir import ActivationMap, Graph, Node, OpVisitor, leaf_nodes
from ios_core.lowering.compose import Primitives
from ios_core.lowering.walk import check_supported, lower, lower_nodes

DEFAULT_OPSET = 17
MIN_OPSET = 13  # Slice/Reshape/Unsqueeze with tensor inputs, Gemm without broadcast quirks


def _clip(bld: _Builder, x: str, hint: str, lo: float, hi: float) -> str:
    return bld.op("Clip", [x, bld.const(lo, np.float32), bld.const(hi, np.float32)], hint)


def _gelu(bld: _Builder, x: str, hint: str) -> str:
    """x * (1 + erf(x / sqrt(2))) / 2 in opset 13-19 operators (Gelu is opset 20)."""
    e = bld.op("Erf", [bld.op("Mul", [x, bld.const(np.sqrt(0.5), np.float32)], f"{hint}.scale")], f"{hint}.erf")
    half = bld.op("Mul", [x, bld.const(0.5, np.float32)], f"{hint}.half")
    return bld.op("Mul", [half, bld.op("Add", [e, bld.const(1.0, np.float32)], f"{hint}.one")], hint)


def _gelu_tanh(bld: _Builder, x: str, hint: str) -> str:
    """x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2 in opset 13 operators."""
    cube = bld.op("Mul", [bld.op("Mul", [x, x], f"{hint}.sq"), x], f"{hint}.cube")
    inner = bld.op("Add", [x, bld.op("Mul", [cube, bld.const(0.044715, np.float32)], f"{hint}.c")], f"{hint}.inner")
    t = bld.op("Tanh", [bld.op("Mul", [inner, bld.const(np.sqrt(2.0 / np.pi), np.float32)], f"{hint}.k")],
               f"{hint}.tanh")
    half = bld.op("Mul", [x, bld.const(0.5, np.float32)], f"{hint}.half")
    return bld.op("Mul", [half, bld.op("Add", [t, bld.const(1.0, np.float32)], f"{hint}.one")], hint)


# IR activation kind (ios_core.ir.activations) -> its ONNX nodes: (builder, x, hint, alpha, beta) -> output
ONNX_ACTIVATIONS: ActivationMap = ActivationMap("onnx", {
    "identity": lambda bld, x, hint, a, b: x,
    "relu": lambda bld, x, hint, a, b: bld.op("Relu", [x], hint),
    "sigmoid": lambda bld, x, hint, a, b: bld.op("Sigmoid", [x], hint),
    "tanh": lambda bld, x, hint, a, b: bld.op("Tanh", [x], hint),
    "relu6": lambda bld, x, hint, a, b: _clip(bld, x, hint, 0.0, 6.0),
    "hardswish": lambda bld, x, hint, a, b: bld.op("HardSwish", [x], hint),
    "silu": lambda bld, x, hint, a, b: bld.op("Mul", [x, bld.op("Sigmoid", [x], f"{hint}.sigmoid")], hint),
    "gelu": lambda bld, x, hint, a, b: _gelu(bld, x, hint),
    "gelu_tanh": lambda bld, x, hint, a, b: _gelu_tanh(bld, x, hint),
    "leaky_relu": lambda bld, x, hint, a, b: bld.op("LeakyRelu", [x], hint, alpha=float(a)),
    "hardsigmoid": lambda bld, x, hint, a, b: bld.op("HardSigmoid", [x], hint, alpha=float(a), beta=float(b)),
    "clip": lambda bld, x, hint, a, b: _clip(bld, x, hint, a, b),
})


# (node, "weight" | "bias", the node's own array or None) -> the array to export
Weights = Callable[[Node, str, "np.ndarray | None"], np.ndarray]


class _Builder(OpVisitor):
    ACTIVATIONS = ONNX_ACTIVATIONS

    def __init__(self, weights: Weights | None = None):
        import onnx.helper as oh
        import onnx.numpy_helper as onh

        self.oh, self.onh = oh, onh
        self.weights = weights
        self.nodes: list = []
        self.initializers: list = []
        self._constants: dict[tuple, str] = {}
        self._ids = itertools.count()
        self._composed = 0  # nodes before this index belong to operators already emitted

    def fresh(self, hint: str) -> str:
        return f"{hint}:{next(self._ids)}"

    def op(self, op_type: str, inputs: list[str], hint: str, **attrs) -> str:
        out = self.fresh(hint)
        self.nodes.append(self.oh.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(self, values, dtype=np.int64) -> str:
        arr = np.asarray(values, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._constants:
            name = f"const:{len(self._constants)}"
            self.initializers.append(self.onh.from_array(arr, name))
            self._constants[key] = name
        return self._constants[key]

    def weight(self, node: Node, key: str, arr: np.ndarray) -> str:
        if self.weights is not None:
            arr = self.weights(node, key, arr)
        name = f"{node.name}.{key}"
        self.initializers.append(self.onh.from_array(np.ascontiguousarray(arr, dtype=np.float32), name))
        return name

    # ---- composition primitives ----------------------------------------------------------
    def primitives(self) -> Primitives:
        def slice_channels(t, b, e):
            return self.op("Slice", [t, self.const([b]), self.const([e]), self.const([1])], "slice")

        def add(ts):
            return self.op("Add", ts, "add") if len(ts) == 2 else self.op("Sum", ts, "sum")

        def mul(ts):
            acc = ts[0]
            for t in ts[1:]:
                acc = self.op("Mul", [acc, t], "mul")
            return acc

        def concat(ts):
            return self.op("Concat", ts, "concat", axis=1)

        return Primitives(slice_channels, add, mul, concat)

    def act(self, x: str, act: str, hint: str, alpha: float = 0.0, beta: float = 0.0) -> str:
        return ONNX_ACTIVATIONS[act](self, x, hint, alpha, beta)

    # ---- operators ---------------------------------------------------------------------------
    def emit(self, node: Node, x: str) -> str:
        x = self._own_composition(node, x)
        out = self.visit(node, x)
        self._composed = len(self.nodes)
        return out

    def _own_composition(self, node: Node, x: str) -> str:
        """Name the nodes that composed ``node``'s input (slices, sums, the concat) after it
        (``<op>.concat:27``), so that a framework's profile maps them to the operator by name
        (``ios_bench.profiling``); they are consumed only by each other and by ``node``."""
        renames = {}
        for n in self.nodes[self._composed:]:
            new = f"{node.name}.{n.output[0]}"
            renames[n.output[0]] = new
            n.name = new
            n.output[0] = new
            for i, t in enumerate(n.input):
                n.input[i] = renames.get(t, t)
        if isinstance(x, tuple):  # an operator of operands (a matrix product)
            return tuple(renames.get(t, t) for t in x)
        return renames.get(x, x)

    def visit_conv(self, node: Node, x: str) -> str:
        name = node.name
        y = self.op("Conv", [x, self.weight(node, "weight", node.weight), self.weight(node, "bias", node.bias)],
                    f"{name}.conv", kernel_shape=list(node.kernel), strides=list(node.stride),
                    pads=list(node.pads), dilations=list(node.dilation), group=node.groups)
        return self.act(y, node.act, f"{name}.act")

    def visit_pool(self, node: Node, x: str) -> str:
        name = node.name
        if node.pool_type == "global_avg":
            return self.op("GlobalAveragePool", [x], name)
        if node.pool_type == "global_max":
            return self.op("GlobalMaxPool", [x], name)
        # ONNX pads are (top, left, bottom, right) like the IR's; MaxPool pads with -inf
        attrs = dict(kernel_shape=list(node.kernel), strides=list(node.stride), pads=list(node.pads))
        if node.pool_type == "max":
            return self.op("MaxPool", [x], name, **attrs)
        return self.op("AveragePool", [x], name, count_include_pad=int(node.count_include_pad), **attrs)

    def visit_identity(self, node: Node, x: str) -> str:
        return x

    def visit_relu(self, node: Node, x: str) -> str:
        name = node.name
        return self.act(x, "relu", name)

    def visit_activation(self, node: Node, x: str) -> str:
        name = node.name
        return self.act(x, node.act_type, name, node.alpha, node.beta)

    def visit_affine(self, node: Node, x: str) -> str:
        name = node.name
        view = (1, *node.channel_shape)
        y = self.op("Mul", [x, self.weight(node, "weight", node.weight.reshape(view))], f"{name}.scale")
        y = self.op("Add", [y, self.weight(node, "bias", node.bias.reshape(view))], f"{name}.shift")
        return self.act(y, node.act, f"{name}.act")

    def visit_shuffle(self, node: Node, x: str) -> str:
        name = node.name
        c, h, w = node.input_shape
        g = node.groups
        y = self.op("Reshape", [x, self.const([0, g, c // g, h, w])], f"{name}.split")
        y = self.op("Transpose", [y], f"{name}.transpose", perm=[0, 2, 1, 3, 4])
        return self.op("Reshape", [y, self.const([0, c, h, w])], name)

    def visit_resize(self, node: Node, x: str) -> str:
        name = node.name
        # sizes (N, C, H, W) with N taken from the input at run time (dynamic batch)
        nc = self.op("Slice", [self.op("Shape", [x], f"{name}.shape"), self.const([0]), self.const([2])],
                     f"{name}.nc")
        sizes = self.op("Concat", [nc, self.const(list(node.size))], f"{name}.sizes", axis=0)
        if node.mode == "nearest":
            attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        else:
            attrs = dict(mode="linear", coordinate_transformation_mode="align_corners" if node.align_corners
                         else "half_pixel")
        return self.op("Resize", [x, "", "", sizes], name, **attrs)

    def visit_flatten(self, node: Node, x: str) -> str:
        name = node.name
        return self.op("Reshape", [x, self.const([0, -1, 1, 1])], name)

    def visit_linear(self, node: Node, x: str) -> str:
        name = node.name
        flat = self.op("Flatten", [x], f"{name}.flatten", axis=1)
        y = self.op("Gemm", [flat, self.weight(node, "weight", node.weight), self.weight(node, "bias", node.bias)],
                    f"{name}.gemm", transB=1)
        y = self.act(y, node.act, f"{name}.act")
        return self.op("Reshape", [y, self.const([0, -1, 1, 1])], name)

    # ---- general tensors (ios_core.ir.tensor_nodes) ---------------------------------------------------
    def visit_matmul(self, node: Node, x: tuple[str, str]) -> str:
        return self.op("MatMul", list(x), node.name)

    def visit_softmax(self, node: Node, x: str) -> str:
        return self.op("Softmax", [x], node.name, axis=node.dim + 1)

    def visit_l2norm(self, node: Node, x: str) -> str:
        # sqrt(ReduceSum(x * x)): the same in every opset from 13 (ReduceL2's axes moved to an input at 18)
        name = node.name
        square = self.op("Mul", [x, x], f"{name}.square")
        total = self.op("ReduceSum", [square, self.const([node.dim + 1])], f"{name}.sum", keepdims=1)
        norm = self.op("Sqrt", [total], f"{name}.norm")
        floor = self.op("Max", [norm, self.const([node.eps], np.float32)], f"{name}.floor")
        return self.op("Div", [x, floor], name)

    def visit_layernorm(self, node: Node, x: str) -> str:
        return self.op("LayerNormalization", [x, self.weight(node, "weight", node.weight),
                                              self.weight(node, "bias", node.bias)],
                       node.name, axis=-node.axes, epsilon=node.eps)

    def visit_dense(self, node: Node, x: str) -> str:
        name = node.name
        wt = self.op("Transpose", [self.weight(node, "weight", node.weight)], f"{name}.wt", perm=[1, 0])
        y = self.op("MatMul", [x, wt], f"{name}.matmul")
        y = self.op("Add", [y, self.weight(node, "bias", node.bias)], f"{name}.bias")
        return self.act(y, node.act, f"{name}.act")

    def visit_reshape(self, node: Node, x: str) -> str:
        return self.op("Reshape", [x, self.const([0, *node.shape])], node.name)

    def visit_transpose(self, node: Node, x: str) -> str:
        return self.op("Transpose", [x], node.name, perm=[0, *(p + 1 for p in node.perm)])

    def visit_constant(self, node: Node, x: str) -> str:
        return self.op("Mul" if node.op_type == "mul" else "Add", [x, self.weight(node, "weight", node.weight)],
                       node.name)

    def visit_prepend(self, node: Node, x: str) -> str:
        name = node.name
        rows = self.op("Unsqueeze", [self.weight(node, "weight", node.weight), self.const([0])], f"{name}.rows")
        n = self.op("Slice", [self.op("Shape", [x], f"{name}.shape"), self.const([0]), self.const([1])], f"{name}.n")
        shape = self.op("Concat", [n, self.const(list(node.weight_shape))], f"{name}.sizes", axis=0)
        rows = self.op("Expand", [rows, shape], f"{name}.expand")
        return self.op("Concat", [rows, x], name, axis=1)


def _check_args(nodes, batch_size, opset, what: str) -> None:
    if any(op.HAS_WEIGHTS and not op.weights() for node in nodes for op in leaf_nodes(node)):
        raise ValueError(f"{what} has no weights: call graph.init_weights(seed)")
    if batch_size is not None and int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1 or None, got {batch_size}")
    if int(opset) < MIN_OPSET:
        raise ValueError(f"opset {opset} is too old: the exporter needs >= {MIN_OPSET}")


def _model(b: _Builder, name: str, inputs: list[tuple[str, tuple]], results: list[tuple[str, str, tuple]],
           batch_size: int | None, opset: int, props: dict, check: bool):
    """Finish the model: graph inputs ``(name, chw)``; graph outputs ``(tensor, name, chw)``
    (the tensor renamed to ``name`` where it is produced here and named once, else copied
    through an Identity)."""
    import onnx
    import onnx.helper as oh

    produced = {t for n in b.nodes for t in n.output}
    input_names = {n for n, _ in inputs}
    counts: dict[str, int] = {}
    for tensor, _, _ in results:
        counts[tensor] = counts.get(tensor, 0) + 1
    renames = {}
    for tensor, out_name, _ in results:
        if tensor == out_name:
            continue
        if tensor in produced and tensor not in input_names and counts[tensor] == 1:
            renames[tensor] = out_name
        else:
            b.nodes.append(oh.make_node("Identity", [tensor], [out_name], name=out_name))
    if renames:
        for n in b.nodes:
            for seq in (n.input, n.output):
                for i, t in enumerate(seq):
                    if t in renames:
                        seq[i] = renames[t]
    n_dim = "N" if batch_size is None else int(batch_size)
    onnx_graph = oh.make_graph(
        b.nodes, name,
        [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [n_dim, *chw]) for n, chw in inputs],
        [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [n_dim, *chw]) for _, n, chw in results],
        initializer=b.initializers,
    )
    model = oh.make_model(onnx_graph, producer_name="ios-bench", opset_imports=[oh.make_opsetid("", int(opset))])
    # The oldest IR version that carries this opset: keeps the file loadable by runtimes lagging onnx.
    model.ir_version = oh.find_min_ir_version_for(list(model.opset_import))
    oh.set_model_props(model, {**props, "ios_bench.opset": str(opset),
                               "ios_bench.batch_size": "dynamic" if batch_size is None else str(batch_size)})
    if check:
        onnx.checker.check_model(model)
    return model


def export(graph: Graph, batch_size: int | None = 1, path: str | Path | None = None,
           opset: int = DEFAULT_OPSET, check: bool = True):
    """The graph as an ``onnx.ModelProto`` (saved to ``path`` when given), one input ``input``
    and one output ``output``. ``batch_size=None`` makes the batch dimension dynamic (``N``)."""
    import onnx

    _check_args(list(graph.operators()), batch_size, opset, f"graph {graph.name!r}")
    b = _Builder()
    out = lower(graph, "input", b.primitives(), b.emit)
    model = _model(b, graph.name, [("input", graph.input_shape)], [(out, "output", graph.output_shape)],
                   batch_size, opset, {"ios_bench.graph": graph.name}, check)
    if path is not None:
        onnx.save(model, str(path))
    return model


def export_nodes(nodes: list[Node], inputs: list[Node], outputs: list[Node], batch_size: int | None = 1,
                 opset: int = DEFAULT_OPSET, name: str = "piece", check: bool = True, weights: Weights | None = None):
    """A piece of a graph as an ``onnx.ModelProto``: ``nodes`` (schedulable nodes in a valid
    order, Sequential allowed) computed from ``inputs`` (nodes computed elsewhere; the model's
    inputs, named after them, each their whole output); the model's outputs are ``outputs``
    (nodes among ``nodes`` or ``inputs``), named after them. A runtime kernel provider compiles
    a plan piece (``ios_core.runtime.plan.Piece``) this way. ``weights`` replaces the nodes'
    weights as they are exported (the measured cost model's stages of merged convolutions
    have none: it passes seeded random ones)."""
    nodes = list(nodes)
    check_supported([op for n in nodes for op in leaf_nodes(n)], f"piece {name!r}")
    _check_args(nodes if weights is None else [], batch_size, opset, f"piece {name!r}")
    b = _Builder(weights)
    values = lower_nodes(nodes, {x.name: x.name for x in inputs}, b.primitives(), b.emit)
    missing = [o.name for o in outputs if o.name not in values]
    if missing:
        raise ValueError(f"piece {name!r}: outputs {missing} are neither computed in it nor its inputs")
    return _model(b, name, [(x.name, x.output_shape) for x in inputs],
                  [(values[o.name], o.name, o.output_shape) for o in outputs], batch_size, opset,
                  {"ios_bench.piece": name}, check)


def opset_of(model) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
