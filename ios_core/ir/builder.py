"""A small builder for writing networks (the zoo uses it).

    b = GraphBuilder("demo", (375, 15, 15))
    x = b.input
    a = b.conv(x, 375, 3, padding=1)
    c = b.conv(x, 750, 3, padding=1)
    out = b.end_block(b.concat([a, c]))
    graph = b.finish()

``inputs`` arguments take a Value, a list of Values (concatenated), or the IR's full form,
a list of terms (each a list of Values that are summed).
"""

from __future__ import annotations

from contextlib import contextmanager

from ios_core.ir.graph import Block, Graph
from ios_core.ir.nodes import (
    Activation,
    Affine,
    Conv,
    Element,
    Flatten,
    Identity,
    Linear,
    Node,
    Placeholder,
    Pool,
    Relu,
    Resize,
    Sequential,
    Shuffle,
)
from ios_core.ir.tensor_nodes import (
    Constant,
    Dense,
    L2Norm,
    LayerNorm,
    MatMul,
    Prepend,
    Reshape,
    Softmax,
    Transpose,
)
from ios_core.ir.value import Inputs, Value


def as_inputs(inputs) -> Inputs:
    if isinstance(inputs, Value):
        return [[inputs]]
    inputs = list(inputs)
    if all(isinstance(v, Value) for v in inputs):
        return [[v] for v in inputs]
    return [list(term) if not isinstance(term, Value) else [term] for term in inputs]


def whole(node: Node) -> Value:
    return Value(node, 0, node.output_shape[0])


class GraphBuilder:
    def __init__(self, name: str, input_shape: tuple[int, int, int]):
        self.name = name
        self._count = 0
        self.placeholder = Placeholder(self._new_name(), input_shape)
        self.blocks: list[Block] = []
        self._block: Block | None = None
        self._seq: list[Node] | None = None
        self._last_exit: Node = self.placeholder

    @property
    def input(self) -> Value:
        return whole(self.placeholder)

    def _new_name(self) -> str:
        name = str(self._count)
        self._count += 1
        return name

    def _add(self, node: Node) -> Value:
        node.infer_shape()
        if self._seq is not None:
            self._seq.append(node)
        else:
            if self._block is None:
                self._block = Block(self._last_exit)
            self._block.inner_nodes.append(node)
        return whole(node)

    # ---- operators ----------------------------------------------------------------------------
    def conv(self, inputs, out_channels: int, kernel=1, stride=1, padding=0, groups=1, act="relu",
             dilation=1, padding_end=()) -> Value:
        return self._add(Conv(self._new_name(), as_inputs(inputs), out_channels=out_channels, kernel=kernel,
                              stride=stride, padding=padding, groups=groups, act=act, dilation=dilation,
                              padding_end=padding_end))

    def pool(self, inputs, pool_type: str, kernel=1, stride=1, padding=0, padding_end=(),
             count_include_pad=True) -> Value:
        return self._add(Pool(self._new_name(), as_inputs(inputs), pool_type=pool_type, kernel=kernel,
                              stride=stride, padding=padding, padding_end=padding_end,
                              count_include_pad=count_include_pad))

    def max_pool(self, inputs, kernel, stride=None, padding=0) -> Value:
        return self.pool(inputs, "max", kernel, stride or kernel, padding)

    def avg_pool(self, inputs, kernel, stride=None, padding=0) -> Value:
        return self.pool(inputs, "avg", kernel, stride or kernel, padding)

    def global_avg_pool(self, inputs) -> Value:
        return self.pool(inputs, "global_avg")

    def add(self, values: list[Value]) -> Value:
        """Element-wise sum of equally shaped values."""
        return self._add(Element(self._new_name(), [list(values)], op_type="add"))

    def mul(self, values: list[Value]) -> Value:
        return self._add(Element(self._new_name(), [list(values)], op_type="mul"))

    def identity(self, inputs) -> Value:
        return self._add(Identity(self._new_name(), as_inputs(inputs)))

    def concat(self, values: list[Value]) -> Value:
        return self.identity([[v] for v in values])

    def relu(self, inputs) -> Value:
        return self._add(Relu(self._new_name(), as_inputs(inputs)))

    def activation(self, inputs, act_type: str, alpha: float = 0.0, beta: float = 0.0) -> Value:
        return self._add(Activation(self._new_name(), as_inputs(inputs), act_type=act_type, alpha=alpha, beta=beta))

    def affine(self, inputs, act="identity") -> Value:
        """Per-channel scale and shift (weights from ``init_weights``)."""
        return self._add(Affine(self._new_name(), as_inputs(inputs), act=act))

    def shuffle(self, inputs, groups: int) -> Value:
        return self._add(Shuffle(self._new_name(), as_inputs(inputs), groups=groups))

    def resize(self, inputs, size, mode="nearest", align_corners=False) -> Value:
        return self._add(Resize(self._new_name(), as_inputs(inputs), size=size, mode=mode,
                                align_corners=align_corners))

    def flatten(self, inputs) -> Value:
        return self._add(Flatten(self._new_name(), as_inputs(inputs)))

    def linear(self, inputs, out_features: int, act="identity") -> Value:
        return self._add(Linear(self._new_name(), as_inputs(inputs), out_features=out_features, act=act))

    # ---- general tensors (tensor_nodes) -----------------------------------------------------------
    def matmul(self, a: Value, b: Value) -> Value:
        """``a @ b`` of two activations (the last two axes; the leading ones equal)."""
        return self._add(MatMul(self._new_name(), [[a], [b]]))

    def softmax(self, inputs, axis: int = -1) -> Value:
        return self._add(Softmax(self._new_name(), as_inputs(inputs), axis=axis))

    def l2norm(self, inputs, axis: int = -1, eps: float = 1e-12) -> Value:
        """``x / max(||x||, eps)`` along ``axis`` (``F.normalize``)."""
        return self._add(L2Norm(self._new_name(), as_inputs(inputs), axis=axis, eps=eps))

    def layernorm(self, inputs, axes: int = 1, eps: float = 1e-5) -> Value:
        return self._add(LayerNorm(self._new_name(), as_inputs(inputs), axes=axes, eps=eps))

    def dense(self, inputs, out_features: int, act="identity") -> Value:
        """A linear layer along the last axis (each token)."""
        return self._add(Dense(self._new_name(), as_inputs(inputs), out_features=out_features, act=act))

    def reshape(self, inputs, shape) -> Value:
        return self._add(Reshape(self._new_name(), as_inputs(inputs), shape=tuple(shape)))

    def transpose(self, inputs, perm) -> Value:
        return self._add(Transpose(self._new_name(), as_inputs(inputs), perm=tuple(perm)))

    def constant(self, inputs, const_shape, op_type: str = "add") -> Value:
        """``x + c`` (``x * c``) with a learned constant of ``const_shape`` (weights from ``init_weights``)."""
        return self._add(Constant(self._new_name(), as_inputs(inputs), op_type=op_type,
                                  const_shape=tuple(const_shape)))

    def prepend(self, inputs, rows: int = 1) -> Value:
        """``rows`` learned rows before the input along its first axis (a class token)."""
        return self._add(Prepend(self._new_name(), as_inputs(inputs), rows=rows))

    # ---- structure ----------------------------------------------------------------------------
    @contextmanager
    def sequential(self):
        """Operators added inside ``with b.sequential() as seq:`` form one Sequential node;
        afterwards ``seq.output`` is its output value."""
        if self._seq is not None:
            raise ValueError("sequential nodes do not nest")
        handle = _SeqHandle()
        self._seq = []
        try:
            yield handle
        finally:
            nodes, self._seq = self._seq, None
        if not nodes:
            raise ValueError("empty sequential")
        handle.output = self._add(Sequential(self._new_name(), nodes))

    def end_block(self, value: Value) -> Value:
        """Make ``value``'s node the exit of the current block (adding an identity when the
        value is not the whole output of the block's last operator)."""
        block = self._block
        if block is None:
            raise ValueError("end_block with no open block")
        last = block.inner_nodes[-1] if block.inner_nodes else None
        if last is value.node and value.begin == 0 and value.end == last.output_shape[0]:
            block.inner_nodes.pop()
        else:
            self._add(Identity(self._new_name(), [[value]]))
            last = block.inner_nodes.pop()
        block.exit_node = last
        self.blocks.append(block)
        self._block = None
        self._last_exit = last
        return whole(last)

    def finish(self, output: Value | None = None) -> Graph:
        if self._block is not None:
            self.end_block(output if output is not None else whole(self._block.inner_nodes[-1]))
        return Graph(self.name, self.placeholder, self.blocks).validate()


class _SeqHandle:
    output: Value | None = None
