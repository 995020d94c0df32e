"""The runtime's plan: a device-independent description of how a schedule runs.

    plan = make_plan(stages, externals=[graph.input], outputs=[graph.exit_node], batch_size=1)  # .passes

``stages`` are the schedule's stages as nodes (stage -> groups -> schedulable nodes, Sequential
allowed). The plan is built by passes (:mod:`ios_core.runtime.passes`), each filling in part
of it:

1. **resolve**: one :class:`Step` per executable operator, with its stage, group and composed
   input (:func:`ios_core.lowering.composition`);
2. **aliasing**: where every value lives (:class:`ValueRef`: a channel range of a
   :class:`Buffer`): pass-through identities alias their source, a concatenation owns a
   buffer that its producers write straight into (their step's ``mode`` is ``"into"``), every
   other operator computes a buffer of its own;
3. **liveness**: each buffer's lifetime in stages (first writer, last reader, kept outputs,
   views that keep their source alive) and, per stage, the buffers released after it;
4. **arena**: byte offsets of the buffers that live in one preallocated arena (the
   concatenation buffers for the torch CPU executor; every buffer where an executor wants
   it), reusing storage between buffers whose lifetimes do not overlap; lifetimes are
   counted in stages, so groups running concurrently never share storage.

Executors consume the plan: the torch CPU emitter (:mod:`ios_core.runtime.emit_torch`) turns
it into closures; a kernel provider compiles :meth:`RuntimePlan.pieces` (a group; with
``fuse_sequential`` planning a run of consecutive single-group stages is one group) with its
external input and output values (:func:`ios_core.runtime.program.emit_pieces` runs them); a CUDA
executor would map groups to streams, stages to events between them and run
:func:`ios_core.runtime.passes.arena` over every buffer. See docs/runtime.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ios_core.ir import ChannelRange, Node, Value
from ios_core.lowering import Composition

F32 = 4

# Step modes (what the executor does for an operator):
ALIAS = "alias"      # nothing: its output is its input (a pass-through identity)
COMPUTE = "compute"  # compute into a fresh buffer of its own
INTO = "into"        # compute straight into ``out``, a channel slice of a concatenation buffer
CONCAT = "concat"    # a concatenation: fill the terms its producers did not write in place


@dataclass
class Buffer:
    """One activation tensor, NCHW float32. ``kind``: ``"input"`` (filled by the caller),
    ``"concat"`` (a concatenation's buffer, written by its producers) or ``"value"`` (an
    operator's own output). ``start``/``end``: first stage writing it and last stage reading
    it (``-1`` for inputs, the stage count for kept outputs). ``offset``: byte offset in the
    arena once the arena pass placed it."""

    index: int
    kind: str
    shape: tuple[int, ...]
    node: Node  # the external input, the concatenation or the operator it holds
    start: int = -1
    end: int = -1
    kept: bool = False
    offset: int | None = None

    @property
    def channels(self) -> int:
        return self.shape[1]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * F32


@dataclass(frozen=True)
class ValueRef(ChannelRange):
    """Channels ``[begin, end)`` of buffer ``buffer`` (the IR's channel range, of runtime storage);
    ``whole``: the range is all of the value the buffer was made for."""

    buffer: int
    begin: int
    end: int
    whole: bool

    def _range(self, begin: int, end: int) -> ValueRef:
        return ValueRef(self.buffer, begin, end, False)


@dataclass
class Step:
    """One executable operator. ``inputs`` is its composed input's structure; read a slice's
    value with :meth:`RuntimePlan.read`. ``in_place_terms`` (concatenations) are the term indices
    that producers already wrote into the buffer."""

    op: Node
    stage: int
    group: int
    inputs: Composition
    mode: str = COMPUTE
    out: ValueRef | None = None
    in_place_terms: frozenset[int] = frozenset()

    @property
    def runs(self) -> bool:
        """False for an alias, and for a concatenation whose terms were all written in place."""
        if self.mode == ALIAS:
            return False
        return not (self.mode == CONCAT and len(self.in_place_terms) == len(self.inputs.terms))


@dataclass
class Group:
    """Operators run in order; the groups of a stage run concurrently. ``nodes`` are the
    schedulable nodes as scheduled (Sequential unexpanded), ``steps`` their operators."""

    nodes: list[Node]
    steps: list[Step] = field(default_factory=list)

    @property
    def cost(self) -> int:
        """Multiply-accumulates (at least one per operator): the weight used to balance
        groups over workers."""
        return sum(max(s.op.macs(), 1) for s in self.steps)


@dataclass
class StagePlan:
    groups: list[Group]
    release: list[int] = field(default_factory=list)  # buffers whose last reader is in this stage


@dataclass
class Piece:
    """What a kernel provider compiles as one unit: ``nodes`` (schedulable nodes, in order)
    run one after another on one thread share. ``inputs``: the values it reads that are
    computed elsewhere (external inputs or other pieces), as the nodes its operators name (a
    Sequential stands for its last operator); ``outputs``: the values it computes that are
    read after it or kept, and those no operator reads (the schedule computes them, so a
    provider does too). A provider reads only ``name``, ``nodes``, ``inputs`` and ``outputs``
    (``ios_core.runtime.providers.make_piece`` makes one from nodes alone).

    The plan's pieces (:meth:`RuntimePlan.pieces`) are its groups (with ``fuse_sequential``
    planning, a run of consecutive single-group stages is one group) and also carry their
    ``stage``, ``group`` (index in the stage) and ``steps``; bind each value to storage with
    :meth:`RuntimePlan.value`. ``ios_core.lowering.onnx.export_nodes(piece.nodes,
    piece.inputs, piece.outputs)`` is the piece as an ONNX model."""

    name: str
    nodes: list[Node]
    inputs: list[Node]
    outputs: list[Node]
    stage: int = 0
    group: int = 0
    steps: list[Step] = field(default_factory=list)


@dataclass
class RuntimePlan:
    batch_size: int
    stages: list[StagePlan]
    externals: list[Node]
    outputs: list[Node]
    buffers: list[Buffer] = field(default_factory=list)
    values: dict[str, ValueRef] = field(default_factory=dict)  # node name -> where its output lives
    arena_bytes: int = 0

    # ---- reading ---------------------------------------------------------------------------
    @property
    def steps(self) -> list[Step]:
        return [s for st in self.stages for g in st.groups for s in g.steps]

    def value(self, node: Node) -> ValueRef:
        try:
            return self.values[node.name]
        except KeyError:
            raise ValueError(f"node {node.name!r} is read but neither computed nor given as an input") from None

    def read(self, s: Value) -> ValueRef:
        """Where the channel slice ``s`` (of a step's :attr:`Step.inputs`) lives."""
        return self.value(s.source).narrow(s.begin, s.end)

    def buffer_of(self, node: Node) -> Buffer:
        return self.buffers[self.value(node).buffer]

    # ---- pieces for kernel providers -------------------------------------------------------
    def pieces(self) -> list[Piece]:
        """One piece per group, in execution order. Plan with ``make_plan(...,
        fuse_sequential=True)`` to make each run of consecutive single-group stages one group
        (one piece); lifetimes and the arena are then computed for what really runs."""
        raw = [(si, gi, list(g.nodes), list(g.steps)) for si, st in enumerate(self.stages)
               for gi, g in enumerate(st.groups)]
        # who reads what: a value leaves a piece when another piece reads it, or it is kept
        computed_in: dict[str, int] = {}
        for pi, (_, _, nodes, steps) in enumerate(raw):
            for s in steps:
                computed_in[s.op.name] = pi
            for n in nodes:
                computed_in[n.name] = pi
        read_by: dict[str, set[int]] = {}
        for pi, (_, _, _, steps) in enumerate(raw):
            for s in steps:
                for sl in s.inputs.slices:
                    read_by.setdefault(sl.source.name, set()).add(pi)
        kept = {o.name for o in self.outputs}
        out = []
        for pi, (si, gi, nodes, steps) in enumerate(raw):
            inputs: dict[str, Node] = {}
            outputs: dict[str, Node] = {}
            for s in steps:
                for sl in s.inputs.slices:
                    if computed_in.get(sl.source.name) != pi:
                        inputs.setdefault(sl.source.name, sl.source)
            for n in [*nodes, *(s.op for s in steps)]:
                readers = read_by.get(n.name, set())
                if n.name in kept or readers - {pi} or (not readers and n in nodes):
                    outputs.setdefault(n.name, n)
            out.append(Piece(f"s{si}g{gi}", nodes, list(inputs.values()), list(outputs.values()), si, gi, steps))
        return out

    # ---- figures ----------------------------------------------------------------------------
    def stats(self) -> dict:
        """Figures of the plan: operators, zero-copy concatenation inputs, arena bytes, and
        ``peak_activation_bytes`` (the arena plus the largest set of other live activations at
        any stage) beside ``naive_activation_bytes`` (every operator's output kept)."""
        nstages = len(self.stages)
        owned = [b for b in self.buffers if b.kind == "value" and b.offset is None]
        peak_owned = 0
        for si in range(nstages):
            peak_owned = max(peak_owned, sum(b.nbytes for b in owned if b.start <= si <= b.end))
        steps = self.steps
        naive = sum(int(np.prod((self.batch_size, *s.op.output_shape))) * F32 for s in steps if s.mode != ALIAS)
        return {
            "stages": nstages, "operators": sum(1 for s in steps if s.runs),
            "parallel_stages": sum(1 for st in self.stages if len(st.groups) > 1),
            "zero_copy_concat_inputs": sum(1 for s in steps if s.mode == INTO),
            "concat_buffers": sum(1 for b in self.buffers if b.kind == "concat"),
            "arena_bytes": self.arena_bytes, "peak_activation_bytes": self.arena_bytes + peak_owned,
            "naive_activation_bytes": naive,
        }
