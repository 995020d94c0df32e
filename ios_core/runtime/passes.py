"""The plan's passes, in order: resolve, aliasing, liveness, arena (see :mod:`.plan`), and
:func:`make_plan`, which runs them.

Each pass reads what the earlier ones wrote into the :class:`~.plan.RuntimePlan` and adds its part;
none knows about a device or a framework.
"""

from __future__ import annotations

from collections.abc import Sequence

from ios_core.ir import Node, leaf_nodes
from ios_core.lowering import composition
from ios_core.runtime.plan import ALIAS, COMPUTE, CONCAT, INTO, Buffer, Group, RuntimePlan, StagePlan, Step, ValueRef

# Which operators' output may be a view of their input (Node.VIEW: their input's storage must live
# as long as their output) and which producers may be written into a concatenation's slice
# (Node.INTO_CONCAT) are facts of the node classes (ios_core.ir.nodes).


def resolve(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node], outputs: Sequence[Node],
            batch_size: int) -> RuntimePlan:
    """One step per executable operator (Sequential nodes expanded), with its stage, group and
    composed input."""
    plan_stages = []
    for si, st in enumerate(stages):
        groups = []
        for gi, g in enumerate(st):
            group = Group(list(g))
            group.steps = [Step(leaf, si, gi, composition(leaf)) for node in g for leaf in leaf_nodes(node)]
            groups.append(group)
        plan_stages.append(StagePlan(groups))
    return RuntimePlan(batch_size, plan_stages, list(externals), list(outputs))


def aliasing(plan: RuntimePlan, into_concat: bool = True) -> None:
    """Decide where every value lives: buffers for the inputs, for each concatenation and for
    every other computing operator; pass-through identities alias their source; a producer
    whose whole output is one term of a concatenation (and only of that one) writes straight
    into its slice of the concatenation's buffer (unless ``into_concat`` is False: then every
    computing operator owns its buffer and each concatenation copies all its terms)."""
    n = plan.batch_size
    steps = plan.steps
    stage_of: dict[int, int] = {id(x): -1 for x in plan.externals}
    producer: dict[int, Node] = {id(x): x for x in plan.externals}  # node -> the leaf computing it
    for st in plan.stages:
        for g in st.groups:
            for node in g.nodes:
                producer[id(node)] = leaf_nodes(node)[-1]
            for s in g.steps:
                producer[id(s.op)] = s.op
                stage_of[id(s.op)] = s.stage

    def prod(node: Node) -> Node:
        try:
            return producer[id(node)]
        except KeyError:
            raise ValueError(f"node {node.name!r} is read but neither computed nor given as an input") from None

    alias_of: dict[int, Node] = {}  # pass-through identity -> the producer whose value it is

    def root(node: Node) -> Node:
        p = prod(node)
        return alias_of.get(id(p), p)

    for s in steps:
        if s.op.TYPE == "identity" and s.inputs.pass_through:
            s.mode = ALIAS
            alias_of[id(s.op)] = root(s.inputs.single.source)

    into: dict[int, tuple[Step, int]] = {}  # producer leaf -> (concatenation step, channel offset)
    for s in steps:
        if s.mode == ALIAS or s.op.TYPE != "identity" or not s.inputs.is_concat:
            continue
        s.mode = CONCAT
        in_place = set()
        for ti, term in enumerate(s.inputs.terms):
            if not into_concat or len(term.slices) != 1:
                continue
            sl = term.slices[0]
            p = root(sl.source)
            if (sl.whole and p.output_shape[0] == sl.channels and stage_of.get(id(p), -1) >= 0
                    and id(p) not in into and p.INTO_CONCAT
                    and tuple(p.output_shape[1:]) == tuple(s.op.output_shape[1:])):
                into[id(p)] = (s, term.offset)
                in_place.add(ti)
        s.in_place_terms = frozenset(in_place)

    def new_buffer(kind: str, node: Node) -> int:
        plan.buffers.append(Buffer(len(plan.buffers), kind, (n, *node.output_shape), node))
        return len(plan.buffers) - 1

    for x in plan.externals:
        plan.values[x.name] = ValueRef(new_buffer("input", x), 0, x.output_shape[0], True)
    for s in steps:
        if s.mode == CONCAT:
            s.out = ValueRef(new_buffer("concat", s.op), 0, s.op.output_shape[0], True)
    for s in steps:
        if s.mode == ALIAS:
            s.out = plan.values[alias_of[id(s.op)].name]
        elif s.mode == COMPUTE and id(s.op) in into:
            concat, off = into[id(s.op)]
            s.mode = INTO
            s.out = ValueRef(concat.out.buffer, off, off + s.op.output_shape[0], False)
        elif s.mode == COMPUTE:
            s.out = ValueRef(new_buffer("value", s.op), 0, s.op.output_shape[0], True)
        plan.values[s.op.name] = s.out
    for st in plan.stages:
        for g in st.groups:
            for node in g.nodes:
                plan.values[node.name] = plan.values[leaf_nodes(node)[-1].name]


def liveness(plan: RuntimePlan) -> None:
    """Lifetimes in stages: a buffer lives from the first stage writing it to the last stage
    reading it (kept outputs to the end); an operator whose output may be a view of its input
    keeps that input alive as long as itself. Fills ``Buffer.start/end/kept`` and each stage's
    ``release`` (value buffers whose last reader runs in it)."""
    nstages = len(plan.stages)
    steps = plan.steps
    last_use: dict[int, int] = {}
    for s in steps:
        for sl in s.inputs.slices:
            b = plan.read(sl).buffer
            last_use[b] = max(last_use.get(b, -1), s.stage)
        if s.mode != ALIAS:  # a write is a use too: a buffer nobody reads lives in its writers' stages
            buf = plan.buffers[s.out.buffer]
            buf.start = s.stage if buf.start < 0 else min(buf.start, s.stage)
            last_use[buf.index] = max(last_use.get(buf.index, -1), s.stage)
    keep = {plan.value(o).buffer for o in plan.outputs}
    for s in reversed(steps):
        if s.mode != COMPUTE or not s.op.VIEW or s.inputs.single is None:
            continue
        k, parent = s.out.buffer, plan.read(s.inputs.single).buffer
        if k in keep:
            keep.add(parent)
        last_use[parent] = max(last_use.get(parent, -1), last_use.get(k, -1))
    for b in plan.buffers:
        b.kept = b.index in keep
        if b.kind == "input":
            b.start = -1
        b.end = nstages if b.kept else max(last_use.get(b.index, -1), b.start)
    for b in plan.buffers:
        if b.kind == "value" and not b.kept and b.index in last_use:
            plan.stages[b.end].release.append(b.index)
    for st in plan.stages:
        st.release.sort()


ALIGN = 64  # bytes: every arena block starts on a cache line (vectorized kernels like that)


def arena(plan: RuntimePlan, kinds: Sequence[str] = ("concat",)) -> None:
    """Place the buffers of ``kinds`` in one arena: storage blocks laid out one after another,
    each reused by buffers whose lifetimes do not overlap (a block is free for a buffer
    starting at stage ``s`` once its last occupant ended before ``s``), best fit first.
    Sets ``Buffer.offset`` (bytes) and ``plan.arena_bytes``."""
    chosen = sorted((b for b in plan.buffers if b.kind in kinds), key=lambda b: (b.start, -b.nbytes))
    blocks: list[list[int]] = []  # [offset, size, free after stage]
    top = 0
    for b in chosen:
        best = None
        for blk in blocks:
            if blk[2] < b.start and blk[1] >= b.nbytes and (best is None or blk[1] < best[1]):
                best = blk
        if best is None:
            size = -(-b.nbytes // ALIGN) * ALIGN
            best = [top, size, b.end]
            top += size
            blocks.append(best)
        best[2] = b.end
        b.offset = best[0]
    plan.arena_bytes = top


def fuse_sequential_runs(stages: Sequence[Sequence[Sequence[Node]]]) -> list[list[list[Node]]]:
    """``stages`` with every run of consecutive single-group stages made one single-group
    stage (its groups' nodes in order); parallel stages unchanged."""
    out: list[list[list[Node]]] = []
    run: list[Node] = []
    for st in stages:
        if len(st) == 1:
            run += list(st[0])
            continue
        if run:
            out.append([run])
            run = []
        out.append([list(g) for g in st])
    if run:
        out.append([run])
    return out


def make_plan(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node], outputs: Sequence[Node],
              batch_size: int, arena_kinds: Sequence[str] = ("concat",), fuse_sequential: bool = False,
              into_concat: bool = True) -> RuntimePlan:
    """Plan ``stages`` (stage -> groups -> schedulable nodes) whose inputs are ``externals``;
    ``outputs`` stay alive to the end. ``arena_kinds``: the buffer kinds placed in the arena
    (``("concat",)`` for the torch CPU executor, whose kernels allocate their own outputs;
    ``("concat", "value")`` for an executor that preallocates everything).
    ``fuse_sequential``: runs of consecutive single-group stages become one stage (what a
    kernel provider compiles as one piece, to keep per-call overhead down).
    ``into_concat=False``: no producer writes into a concatenation's buffer (every value is an
    operator's own tensor, as in the oracle's plain walk, :mod:`ios_core.reference`)."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if fuse_sequential:
        stages = fuse_sequential_runs(stages)
    plan = resolve(stages, externals, outputs, batch_size)
    aliasing(plan, into_concat)
    liveness(plan)
    arena(plan, arena_kinds)
    return plan
