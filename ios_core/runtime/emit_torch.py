"""Emission for the CPU with torch kernels: a :class:`~.plan.Plan` becomes a :class:`Program`,
a flat list of prepared closures (plan once, run many).

* every buffer has a slot in one list (``env``); a closure reads its inputs from slots and
  writes its output to a slot, so running the program is a tight loop over closures;
* the arena (the concatenation buffers) is one preallocated tensor; a producer marked
  ``into`` writes straight into its channel slice of a concatenation buffer (the
  convolution's fused activation writes there; element-wise sums use ``out=``), so the
  concatenation itself does nothing at run time; reads of arena buffers are views made once;
* other activations are the kernels' own outputs (torch's CPU convolution has no native
  ``out=`` path: ``aten::convolution.out`` computes and copies); their slots are cleared after
  the stage of their last reader (``StagePlan.release``) so the allocator reuses that memory;
* a parallel stage's groups are assigned to workers of the shared pool (longest processing
  time by multiply-accumulates), each with its share of the intra-op threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .. import kernels
from ..ir import Node
from ..lowering import Primitives, Slice, evaluate
from .plan import ALIAS, CONCAT, F32, INTO, Piece, Plan, Step, ValueRef, make_plan
from .pool import assign_groups, shared_pool, split_threads


def _act_inplace(act: str):
    """A fused activation applied in place (None for identity)."""
    return {"identity": None, "relu": torch.relu_, "sigmoid": torch.sigmoid_, "tanh": torch.tanh_,
            "relu6": lambda t: t.clamp_(0.0, 6.0), "hardswish": lambda t: F.hardswish(t, inplace=True),
            "silu": lambda t: F.silu(t, inplace=True)}[act]


def _act_out(act: str):
    """An activation writing into ``out`` (a slice of a concatenation buffer)."""
    if act == "relu":
        return lambda y, out: torch.clamp_min(y, 0.0, out=out)
    if act == "sigmoid":
        return lambda y, out: torch.sigmoid(y, out=out)
    if act == "tanh":
        return lambda y, out: torch.tanh(y, out=out)
    if act == "identity":
        return lambda y, out: out.copy_(y)
    fn = kernels.ACT_FN[act]
    return lambda y, out: out.copy_(fn(y))


def _act_fn(leaf: Node):
    """An activation node's function (None for identity)."""
    act = leaf.act_type
    if act in ("relu", "sigmoid", "tanh"):
        return {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[act]
    if act == "identity":
        return None
    alpha, beta = getattr(leaf, "alpha", 0.0), getattr(leaf, "beta", 0.0)
    return lambda x: kernels.activation(x, act, alpha, beta)


def _combine(op):
    """A closure-building add/mul primitive: the values of two or more closures combined."""
    mul = op is torch.mul

    def prim(fns):
        if len(fns) == 2:
            a, b = fns
            return lambda: op(a(), b())
        first, second, rest = fns[0], fns[1], tuple(fns[2:])

        def f():
            acc = op(first(), second())
            for g in rest:
                acc.mul_(g()) if mul else acc.add_(g())
            return acc
        return f
    return prim


# Composition with closures: each value is a function of no arguments returning a tensor.
CLOSURE_PRIMS = Primitives(
    slice_channels=lambda f, b, e: (lambda: f().narrow(1, b, e - b)),
    add=_combine(torch.add),
    mul=_combine(torch.mul),
    concat=lambda fns: (lambda: torch.cat([f() for f in fns], 1)),
)


@dataclass
class Program:
    """A planned program. ``stage_fns`` run in order; ``env`` holds every buffer's tensor."""

    plan: Plan
    env: list
    stage_fns: list[Callable[[], None]]
    op_fns: list[list[Callable[[], None]]]  # per stage, per op (sequential run, for profiling)
    op_names: list[list[str]]
    stage_names: list[list[list[str]]]
    input_slots: dict[str, int]
    output_getters: dict[str, Callable[[], torch.Tensor]]
    threads: int
    stats: dict = field(default_factory=dict)
    profiled_stage_fns: list[Callable[[], None]] | None = None
    stage_acc: list[int] | None = None
    # provider programs (``emit_provider``): the compiled kernels and their pieces
    kernels: list = field(default_factory=list)
    pieces: list = field(default_factory=list)

    def run(self) -> None:
        for f in self.stage_fns:
            f()

    def output(self, name: str) -> torch.Tensor:
        """The value of output ``name`` after a run (valid until the next run)."""
        return self.output_getters[name]()

    def run_op_profiled(self, acc: list[int]) -> None:
        """Run every operator in order (no concurrency), adding each one's time to ``acc``."""
        clock = time.perf_counter_ns
        i = 0
        for fns in self.op_fns:
            for f in fns:
                t0 = clock()
                f()
                acc[i] += clock() - t0
                i += 1

    def enable_stage_profile(self) -> None:
        if self.profiled_stage_fns is not None:
            return
        clock = time.perf_counter_ns
        acc = [0] * len(self.stage_fns)

        def wrap(i, f):
            def g():
                t0 = clock()
                f()
                acc[i] += clock() - t0
            return g

        self.stage_acc = acc
        self.profiled_stage_fns = [wrap(i, f) for i, f in enumerate(self.stage_fns)]

    def run_stage_profiled(self) -> None:
        for f in self.profiled_stage_fns:
            f()

    def read_stage_times(self) -> list[float]:
        """Per-stage milliseconds accumulated since the last read (resets)."""
        acc = self.stage_acc
        out = [t / 1e6 for t in acc]
        for i in range(len(acc)):
            acc[i] = 0
        return out


def _weight(node: Node, attr: str, shape, random_weights: bool, rng: np.random.Generator) -> torch.Tensor:
    arr = getattr(node, attr, None)
    if arr is None or random_weights:
        if arr is None and not random_weights:
            raise ValueError(f"node {node.name!r} has no weights: call graph.init_weights(seed)")
        arr = (rng.standard_normal(shape) * 0.05).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))


class _Emitter:
    """Closures for the steps of one plan over one ``env``."""

    def __init__(self, plan: Plan, random_weights: bool, seed: int):
        self.plan = plan
        self.n = plan.batch_size
        self.random_weights = random_weights
        self.rng = np.random.default_rng(seed)
        self.env: list = [None] * len(plan.buffers)
        arena = torch.empty(plan.arena_bytes // F32, dtype=torch.float32)
        self.fixed: set[int] = set()
        for b in plan.buffers:
            if b.offset is not None:
                numel = b.nbytes // F32
                self.env[b.index] = arena[b.offset // F32:b.offset // F32 + numel].view(b.shape)
                self.fixed.add(b.index)

    # ---- reading values -------------------------------------------------------------------------
    def view(self, ref: ValueRef) -> torch.Tensor:
        """The fixed tensor of a value in the arena."""
        t = self.env[ref.buffer]
        return t if ref.whole else t.narrow(1, ref.begin, ref.channels)

    def getter(self, ref: ValueRef) -> Callable[[], torch.Tensor]:
        if ref.buffer in self.fixed:
            t = self.view(ref)
            return lambda: t
        env, k = self.env, ref.buffer
        if ref.whole:
            return lambda: env[k]
        b, ln = ref.begin, ref.channels
        return lambda: env[k].narrow(1, b, ln)

    def read(self, s: Slice) -> Callable[[], torch.Tensor]:
        return self.getter(self.plan.read(s))

    def composed(self, step: Step) -> Callable[[], torch.Tensor]:
        """A function returning the step's composed input (the one evaluator, with closures)."""
        return evaluate(step.inputs, self.read, CLOSURE_PRIMS)

    def piece_io(self, piece: Piece) -> PieceIO:
        destinations: dict[str, torch.Tensor | None] = {}
        outputs: dict[str, Callable[[torch.Tensor], None]] = {}
        env = self.env
        for o in piece.outputs:
            ref = self.plan.value(o)
            if ref.buffer in self.fixed:
                dest = destinations[o.name] = self.view(ref)
                outputs[o.name] = lambda t, dest=dest: None if t is dest else dest.copy_(t)
            else:
                destinations[o.name] = None
                outputs[o.name] = lambda t, k=ref.buffer: env.__setitem__(k, t)
        return PieceIO({x.name: self.getter(self.plan.value(x)) for x in piece.inputs}, outputs, destinations)

    def weight(self, node: Node, attr: str, shape) -> torch.Tensor:
        return _weight(node, attr, shape, self.random_weights, self.rng)

    # ---- operators --------------------------------------------------------------------------------
    def op(self, step: Step) -> Callable[[], None] | None:
        """The closure running ``step`` (None when it has nothing to do at run time)."""
        if step.mode == ALIAS:
            return None
        leaf, env, n = step.op, self.env, self.n
        if step.mode == CONCAT:
            # the terms not written in place by their producers: a copy into the slice, or a sum
            # (product) computed straight into it
            buf = self.view(step.out)
            fns = [_term_into(buf.narrow(1, term.offset, term.channels), [self.read(sl) for sl in term.slices],
                              step.inputs.op == "mul")
                   for ti, term in enumerate(step.inputs.terms) if ti not in step.in_place_terms]
            return _seq(fns) if fns else None
        out_view = self.view(step.out) if step.mode == INTO else None
        o = step.out.buffer
        kind = leaf.TYPE
        get = self.composed(step)
        if kind == "conv" and leaf.symmetric:
            w = self.weight(leaf, "weight", leaf.weight_shape)
            bias = self.weight(leaf, "bias", (leaf.out_channels,))
            st, pd, dl, gr = leaf.stride, leaf.padding, leaf.dilation, leaf.groups
            conv = torch.conv2d
            if out_view is not None:
                act = _act_out(leaf.act)
                return lambda: act(conv(get(), w, bias, st, pd, dl, gr), out_view)
            act = _act_inplace(leaf.act)
            if act is None:
                def conv_op():
                    env[o] = conv(get(), w, bias, st, pd, dl, gr)
            else:
                def conv_op():
                    env[o] = act(conv(get(), w, bias, st, pd, dl, gr))
            return conv_op
        if kind == "pool" and (leaf.is_global or (leaf.symmetric and leaf.count_include_pad)):
            pt, k_, s_, p_ = leaf.pool_type, leaf.kernel, leaf.stride, leaf.padding
            if pt == "max":
                fn = lambda x: torch.max_pool2d(x, k_, s_, p_)
            elif pt == "avg":
                fn = lambda x: torch.nn.functional.avg_pool2d(x, k_, s_, p_, False, True)
            elif pt == "global_avg":
                fn = lambda x: torch.mean(x, (2, 3), keepdim=True)
            else:
                fn = lambda x: torch.amax(x, (2, 3), keepdim=True)
        elif kind in ("identity", "element"):
            terms = step.inputs.terms
            if out_view is not None and len(terms) == 1 and len(terms[0].slices) == 2:
                # a sum (product) of two values, written straight into the concatenation slice
                op2 = torch.mul if step.inputs.op == "mul" else torch.add
                ga, gb = (self.read(sl) for sl in terms[0].slices)
                return lambda: op2(ga(), gb(), out=out_view)
            fn = None
        elif kind == "relu":
            fn = torch.relu
        elif kind == "activation":
            fn = _act_fn(leaf) or (lambda x: x)
        elif kind == "flatten":
            fn = lambda x: x.reshape(n, -1, 1, 1)
        elif kind == "linear":
            w = self.weight(leaf, "weight", leaf.weight_shape)
            bias = self.weight(leaf, "bias", (leaf.out_features,))
            wt = w.t()
            act = _act_inplace(leaf.act)

            def fn(x):
                y = torch.addmm(bias, x.reshape(n, -1), wt)
                if act is not None:
                    act(y)
                return y.view(n, -1, 1, 1)
        else:
            # no fast path: the oracle's kernel (operator types added through the walk run here, and
            # convolutions and pools with asymmetric padding or averages excluding padding)
            fn = lambda x, leaf=leaf: kernels.apply(leaf, x)
        if out_view is not None:
            if fn is None:
                return lambda: out_view.copy_(get())
            return lambda: out_view.copy_(fn(get()))
        if fn is None:
            def op():
                env[o] = get()
        else:
            def op():
                env[o] = fn(get())
        return op


Task = tuple[list[str], list[Callable[[], None]], float]  # one group: names, closures, cost (for balancing)


def emit(plan: Plan, threads: int, random_weights: bool = False, max_workers: int | None = None, seed: int = 0,
         trace: list | None = None) -> Program:
    """The torch CPU program of ``plan`` with ``threads`` intra-op threads in all. ``trace``, a
    list, receives one record per concurrent task run (stage, task, thread id, intra-op
    threads, start and end ns): the evidence that groups overlap. ``random_weights`` draws
    weights from ``seed`` (the measured cost model times stages without the graph's weights)."""
    em = _Emitter(plan, random_weights, seed)
    stage_tasks: list[list[Task]] = []
    for st in plan.stages:
        tasks = []
        for g in st.groups:
            pairs = [(s.op.name, em.op(s)) for s in g.steps]
            fns = [f for _, f in pairs if f is not None]
            if fns:
                tasks.append(([name for name, f in pairs if f is not None], fns, g.cost))
        stage_tasks.append(tasks)
    return _program(plan, em, stage_tasks, threads, max_workers, trace)


@dataclass
class PieceIO:
    """How a compiled piece meets the program's buffers. ``inputs``: node name -> a function
    returning that value's current tensor (NCHW float32, possibly a channel-slice view);
    ``outputs``: node name -> a function storing the computed tensor; ``destinations``: node
    name -> the preallocated tensor the output lands in (an arena view: a provider may write
    there directly, e.g. through ONNX Runtime's IO binding, and then store that same tensor,
    which costs nothing), or None where the output is a fresh tensor."""

    inputs: dict[str, Callable[[], torch.Tensor]]
    outputs: dict[str, Callable[[torch.Tensor], None]]
    destinations: dict[str, torch.Tensor | None]


# compile_piece(piece, io, threads) -> a closure running the piece (reading io.inputs, calling io.outputs)
CompilePiece = Callable[[Piece, PieceIO, int], Callable[[], None]]


def emit_pieces(plan: Plan, threads: int, compile_piece: CompilePiece, max_workers: int | None = None,
                trace: list | None = None) -> Program:
    """A program whose groups are pieces compiled by a kernel provider: ``compile_piece(piece,
    io, threads)`` is called once per piece (:meth:`Plan.pieces`) with the intra-op threads
    that piece gets when it runs (its share of a parallel stage, or all of ``threads``) and
    returns the closure that runs it. Stages, the worker pool, releases, profiling and stats
    are the torch program's. Plan with ``make_plan(..., fuse_sequential=True)`` so runs of
    single-group stages are compiled as one piece."""
    em = _Emitter(plan, False, 0)
    pieces = plan.pieces()
    by_stage: dict[int, list[Piece]] = {}
    for p in pieces:
        by_stage.setdefault(p.stage, []).append(p)
    stage_tasks: list[list[Task]] = []
    for si, st in enumerate(plan.stages):
        stage_pieces = by_stage.get(si, [])
        costs = [st.groups[p.group].cost for p in stage_pieces]
        shares = group_threads(costs, threads, max_workers)
        tasks = []
        for p, cost, share in zip(stage_pieces, costs, shares):
            fn = compile_piece(p, em.piece_io(p), share)
            tasks.append(([p.name], [fn], cost))
        stage_tasks.append(tasks)
    return _program(plan, em, stage_tasks, threads, max_workers, trace)


def group_threads(costs: Sequence[float], threads: int, max_workers: int | None = None) -> list[int]:
    """The intra-op threads each group of a stage runs with (the assignment of :func:`_stage_fn`)."""
    nworkers = min(len(costs), threads, max_workers or threads)
    if nworkers <= 1:
        return [threads] * len(costs)
    shares = [threads] * len(costs)
    for a, t in zip(assign_groups(list(costs), nworkers), split_threads(threads, nworkers)):
        for i in a:
            shares[i] = t
    return shares


def _program(plan: Plan, em: _Emitter, stage_tasks: list[list[Task]], threads: int, max_workers: int | None,
             trace: list | None) -> Program:
    env = em.env
    pool = shared_pool()
    stage_fns: list[Callable[[], None]] = []
    op_fns: list[list[Callable[[], None]]] = []
    op_names: list[list[str]] = []
    workers_used = 1
    for si, (st, tasks) in enumerate(zip(plan.stages, stage_tasks)):
        groups_ops = [fns for _, fns, _ in tasks]
        op_fns.append([f for fns in groups_ops for f in fns])
        op_names.append([name for names, _, _ in tasks for name in names])
        fn, nworkers = _stage_fn(groups_ops, [c for _, _, c in tasks], threads, max_workers, pool, trace, si)
        workers_used = max(workers_used, nworkers)
        stage_fns.append(_with_release(fn, env, st.release) if st.release else fn)
    program = Program(
        plan=plan, env=env, stage_fns=stage_fns, op_fns=op_fns, op_names=op_names,
        stage_names=[[[x.name for x in g.nodes] for g in st.groups] for st in plan.stages],
        input_slots={x.name: plan.value(x).buffer for x in plan.externals},
        output_getters={o.name: em.getter(plan.value(o)) for o in plan.outputs}, threads=threads)
    program.stats = {**plan.stats(), "max_workers": workers_used, "threads": threads}
    return program


def build_program(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node], outputs: Sequence[Node],
                  batch_size: int, threads: int, random_weights: bool = False, max_workers: int | None = None,
                  seed: int = 0, trace: list | None = None, provider: str = "torch") -> Program:
    """Plan ``stages`` (stage -> groups -> schedulable nodes) whose inputs are ``externals``
    (filled by the caller through ``input_slots``) and emit the torch CPU program; ``outputs``
    keep their values after the run (``Program.output(name)``). Another ``provider``
    (``onnxruntime``, ``openvino``) emits the plan's pieces compiled by that library
    (:func:`ios_core.runtime.emit_provider.emit_provider`)."""
    if provider != "torch":
        from .emit_provider import build_provider_program

        return build_provider_program(stages, externals, outputs, batch_size, threads, provider,
                                      random_weights=random_weights, max_workers=max_workers, seed=seed, trace=trace)
    return emit(make_plan(stages, externals, outputs, batch_size), threads, random_weights=random_weights,
                max_workers=max_workers, seed=seed, trace=trace)


def _term_into(dst, getters, mul):
    if len(getters) == 1:
        g = getters[0]
        return lambda: dst.copy_(g())
    op = torch.mul if mul else torch.add
    a, b = getters[0], getters[1]
    rest = getters[2:]
    if not rest:
        return lambda: op(a(), b(), out=dst)

    def f():
        op(a(), b(), out=dst)
        for g in rest:
            dst.mul_(g()) if mul else dst.add_(g())
    return f


def _with_release(fn, env, release):
    if len(release) == 1:
        k = release[0]

        def f():
            fn()
            env[k] = None
        return f

    def g():
        fn()
        for k in release:
            env[k] = None
    return g


def _stage_fn(group_ops, costs, threads, max_workers, pool, trace=None, si=0):
    if not group_ops:
        return (lambda: None), 0
    if len(group_ops) == 1:
        return _seq(group_ops[0]), 1
    nworkers = min(len(group_ops), threads, max_workers or threads)
    if nworkers <= 1:
        return _seq([f for fns in group_ops for f in fns]), 1
    # longest-processing-time assignment of groups to workers, by multiply-accumulates
    assigned = assign_groups(costs, nworkers)
    per = split_threads(threads, nworkers)
    tasks = [(_seq([f for i in a for f in group_ops[i]]), t) for a, t in zip(assigned, per)]
    if trace is not None:
        tasks = [(_traced(f, trace, si, ti), t) for ti, (f, t) in enumerate(tasks)]
    run = pool.run
    return (lambda: run(tasks, threads)), nworkers


def _traced(fn, trace, si, ti):
    import threading

    def run():
        t0 = time.perf_counter_ns()
        fn()
        trace.append({"stage": si, "task": ti, "thread": threading.get_ident(), "threads": torch.get_num_threads(),
                      "start_ns": t0, "end_ns": time.perf_counter_ns()})
    return run


def _seq(fns):
    if len(fns) == 1:
        return fns[0]
    fns = tuple(fns)

    def run():
        for f in fns:
            f()
    return run
