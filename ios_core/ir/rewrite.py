"""Rewriting the IR: who reads a node, replacing its uses, dropping dead code, and the passes
built on them (the ONNX importer's, in the order it runs them).

    ops = NodeList(operators, output)          # topological order; consumers computed once
    for rewrite in IMPORT_PASSES:   # fold_affine, fold_constant_bias, fuse_silu, fuse_activations
        rewrite(ops)
    live = ops.eliminate_dead_code()           # what the output needs, in order
    blocks = cut_blocks(placeholder, live)     # the IOS optimizer schedules block by block

The model is torch.fx's: a node knows its users (``NodeList.consumers``, kept up to date by
every rewrite rather than recomputed), ``replace_all_uses_with`` touches only the users of the
replaced node, and dead-code elimination is one backward sweep. Every operation is linear in
what it touches, so a pass over ``n`` operators costs ``O(n)`` (with bounded fan-in and
fan-out), and importing a network takes time linear in its size (``benchmarks/bench_import.py``).

:class:`~ios_core.ir.Graph` uses the same primitives for its own ``consumers``,
``replace_all_uses_with`` and ``eliminate_dead_code``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ios_core.ir.meta import absorb, absorb_before
from ios_core.ir.nodes import FUSED_ACTIVATIONS, Activation, Affine, Conv, Element, Linear, Node, leaf_nodes
from ios_core.ir.tensor_nodes import Constant, Dense
from ios_core.ir.value import Value


# ---- primitives -------------------------------------------------------------------------------------
def consumers_of(nodes: Iterable[Node]) -> dict[int, list[Node]]:
    """``id(node)`` -> the nodes of ``nodes`` that read it, in order (each once)."""
    out: dict[int, list[Node]] = {}
    for node in nodes:
        for p in node.predecessors():
            out.setdefault(id(p), []).append(node)
    return out


def rewrite_uses(reader: Node, old: Node, new: Node) -> None:
    """Make ``reader`` (and, for a Sequential, every operator inside it) read ``new`` wherever it
    reads ``old``, channel ranges kept."""
    for leaf in leaf_nodes(reader):
        for term in leaf.inputs:
            for i, v in enumerate(term):
                if v.node is old:
                    term[i] = Value(new, v.begin, v.end)


def live_nodes(nodes: Sequence[Node], outputs: Iterable[Node]) -> list[Node]:
    """The nodes of ``nodes`` (topological order) that ``outputs`` depend on, in order: one
    backward sweep."""
    live = {id(o) for o in outputs}
    for node in reversed(nodes):
        if id(node) in live:
            live.update(id(p) for p in node.predecessors())
    return [n for n in nodes if id(n) in live]


def whole_input(op: Node) -> Node | None:
    """The node ``op`` reads whole as its only input, else None."""
    if len(op.inputs) == 1 and len(op.inputs[0]) == 1:
        v = op.inputs[0][0]
        if v.begin == 0 and v.end == v.node.output_shape[0]:
            return v.node
    return None


# ---- a graph under rewriting ------------------------------------------------------------------------
class NodeList:
    """Operators in topological order and the output node, open to rewrites. Each node's
    consumers are computed once here and kept up to date; removals and insertions are
    recorded, not spliced into a list, so each costs time proportional to the node's
    neighbours, not to the graph."""

    def __init__(self, ops: Iterable[Node], output: Node):
        self._ops: list[Node] = list(ops)
        self.output = output
        self._users = consumers_of(self._ops)
        self._removed: set[int] = set()
        self._before: dict[int, list[Node]] = {}  # id(anchor) -> nodes inserted right before it

    # ---- reading ----------------------------------------------------------------------------------
    def __iter__(self):
        """The live order: inserted nodes before their anchors, removed nodes skipped. Iterate
        over a snapshot (``list(ops)``) to rewrite while walking."""
        for op in self._ops:
            yield from self._expanded(op)

    def _expanded(self, op: Node):
        for n in self._before.get(id(op), ()):
            yield from self._expanded(n)
        if id(op) not in self._removed:
            yield op

    def consumers(self, node: Node) -> list[Node]:
        """The nodes that read ``node`` (torch.fx's ``Node.users``)."""
        return self._users.get(id(node), [])

    def removed(self, node: Node) -> bool:
        return id(node) in self._removed

    def sole_consumer(self, node: Node, op: Node) -> bool:
        """``op`` is the only reader of ``node``, and ``node`` is not the output."""
        users = self.consumers(node)
        return len(users) == 1 and users[0] is op and node is not self.output

    # ---- rewriting -----------------------------------------------------------------------------------
    def insert_before(self, anchor: Node, node: Node) -> None:
        """Add ``node`` right before ``anchor`` in the order; it reads nodes already present."""
        self._before.setdefault(id(anchor), []).append(node)
        for p in node.predecessors():
            self._users.setdefault(id(p), []).append(node)

    def replace_all_uses_with(self, old: Node, new: Node) -> None:
        """Every reader of ``old`` reads ``new`` instead (channel ranges kept), the output too;
        ``old`` is removed."""
        users = self._users.pop(id(old), [])
        self.remove(old)
        target = self._users.setdefault(id(new), [])
        known = {id(u) for u in target}
        for u in users:
            rewrite_uses(u, old, new)
            if id(u) not in known:
                target.append(u)
                known.add(id(u))
        if self.output is old:
            self.output = new

    def remove(self, node: Node) -> None:
        """Drop ``node`` (its readers, if any, must have been rewritten first)."""
        if id(node) in self._removed:
            return
        self._removed.add(id(node))
        for p in node.predecessors():
            users = self._users.get(id(p))
            if users is not None:
                self._users[id(p)] = [u for u in users if u is not node]

    def eliminate_dead_code(self) -> list[Node]:
        """The nodes the output depends on, in order (the others are removed)."""
        order = list(self)
        live = live_nodes(order, [self.output])
        keep = {id(n) for n in live}
        for n in order:
            if id(n) not in keep:
                self.remove(n)
        return live


# ---- the import passes --------------------------------------------------------------------------------
def fold_affine(ops: NodeList) -> None:
    """An affine (a BatchNormalization, or a constant Mul/Add) right after a convolution or
    linear layer it alone reads becomes that layer's weights."""
    for op in list(ops):
        if not isinstance(op, Affine) or op.act != "identity" or ops.removed(op):
            continue
        prev = whole_input(op)
        if not isinstance(prev, (Conv, Linear)) or prev.act != "identity" or not ops.sole_consumer(prev, op):
            continue
        scale = op.weight.astype(np.float64)
        shape = (-1,) + (1,) * (prev.weight.ndim - 1)
        prev.weight = (prev.weight.astype(np.float64) * scale.reshape(shape)).astype(np.float32)
        prev.bias = (prev.bias.astype(np.float64) * scale + op.bias).astype(np.float32)
        absorb(prev, op)
        ops.replace_all_uses_with(op, prev)


def fuse_silu(ops: NodeList) -> None:
    """``Mul(x, Sigmoid(x))`` becomes one ``silu`` activation (the sigmoid, if nothing else
    reads it, is left to dead-code elimination)."""
    for op in list(ops):
        if not (isinstance(op, Element) and op.op_type == "mul" and len(op.inputs) == 1
                and len(op.inputs[0]) == 2) or ops.removed(op):
            continue
        a, b = op.inputs[0]
        for x, s in ((a, b), (b, a)):
            sig = s.node
            if (isinstance(sig, Activation) and sig.act_type == "sigmoid" and s.begin == 0
                    and s.end == sig.output_shape[0] and len(sig.inputs) == 1 and len(sig.inputs[0]) == 1
                    and sig.inputs[0][0] == x):
                silu = Activation(op.name, [[Value(x.node, x.begin, x.end)]], hint_name=op.hint_name,
                                  act_type="silu")
                silu.infer_shape()
                absorb(silu, op)
                ops.insert_before(op, silu)
                ops.replace_all_uses_with(op, silu)
                if not ops.consumers(sig) and sig is not ops.output:  # the sigmoid is computed by the silu only
                    absorb_before(silu, sig)
                break


def fold_constant_bias(ops: NodeList) -> None:
    """A ``constant`` add of one number per output feature right after a ``dense`` node it alone
    reads becomes that node's bias (ONNX writes a token-wise linear layer as MatMul, then Add)."""
    for op in list(ops):
        if not (isinstance(op, Constant) and op.op_type == "add") or ops.removed(op):
            continue
        prev = whole_input(op)
        if not isinstance(prev, Dense) or prev.act != "identity" or not ops.sole_consumer(prev, op):
            continue
        c = op.weight.reshape(-1)
        if tuple(op.weight_shape) not in ((prev.out_features,), (1,)):
            continue
        prev.bias = (prev.bias.astype(np.float64) + c).astype(np.float32)
        absorb(prev, op)
        ops.replace_all_uses_with(op, prev)


def fuse_activations(ops: NodeList) -> None:
    """A parameterless activation right after a convolution, linear, affine or dense node it
    alone reads is fused into that node."""
    for op in list(ops):
        if not (isinstance(op, Activation) and op.act_type in FUSED_ACTIVATIONS) or ops.removed(op):
            continue
        prev = whole_input(op)
        if not isinstance(prev, (Conv, Linear, Affine, Dense)) or prev.act != "identity" \
                or not ops.sole_consumer(prev, op):
            continue
        prev.act = op.act_type
        absorb(prev, op)
        ops.replace_all_uses_with(op, prev)


Pass = Callable[[NodeList], None]
IMPORT_PASSES: tuple[Pass, ...] = (fold_affine, fold_constant_bias, fuse_silu, fuse_activations)


def run_passes(ops: Iterable[Node], output: Node, passes: Sequence[Pass] = IMPORT_PASSES) -> list[Node]:
    """Run ``passes`` in order over ``ops`` (topological order) and return the live operators
    in order; the output is last (it is created last)."""
    nodes = NodeList(ops, output)
    for rewrite in passes:
        rewrite(nodes)
    live = nodes.eliminate_dead_code()
    if live and live[-1] is not nodes.output:  # pragma: no cover - the output is created last
        raise AssertionError("the output node is not last")
    return live


# ---- block discovery ------------------------------------------------------------------------------------
def cut_blocks(enter: Node, ops: Sequence[Node]) -> list[tuple[Node, list[Node], Node]]:
    """Cut ``ops`` (topological order, reading ``enter`` and each other) into blocks
    ``(enter node, inner nodes, exit node)``: a cut after op ``i`` is valid when no later op
    reads anything before it. Linear: one sweep for each op's earliest input, one suffix
    minimum."""
    pos = {id(enter): -1}
    for i, op in enumerate(ops):
        pos[id(op)] = i
    low = [min(pos[id(p)] for p in op.predecessors()) for op in ops]
    suffix = [len(ops)] * (len(ops) + 1)
    for i in range(len(ops) - 1, -1, -1):
        suffix[i] = min(low[i], suffix[i + 1])
    blocks, start = [], 0
    for i in range(len(ops)):
        if i == len(ops) - 1 or suffix[i + 1] >= i:
            blocks.append((enter, list(ops[start:i]), ops[i]))
            enter, start = ops[i], i + 1
    return blocks
