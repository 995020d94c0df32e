"""The CPU program machinery, independent of the kernels: a :class:`~.plan.RuntimePlan` whose steps
were turned into closures (by :mod:`.emit_torch` for torch kernels, or by a kernel provider's
compiled pieces through :func:`emit_pieces`) becomes a :class:`Program`, a flat list of stage
functions (plan once, run many).

* every buffer has a slot in one list (``env``, :class:`Storage`); a closure reads its inputs
  from slots and writes its output to a slot, so running the program is a tight loop;
* the arena is one preallocated tensor; the plan's fixed buffers are views of it made once (torch
  tensors for torch kernels, numpy arrays for a provider's: :mod:`.tensors`, so that a program on
  ONNX Runtime or OpenVINO kernels never imports torch). The plan places buffers in elements (its
  byte offsets count :data:`~.plan.F32` an element); the tensors' dtype sets their size in memory
  (a torch program at bf16: ``torch.bfloat16``, half the bytes, :func:`storage_bytes`);
* other activations are the kernels' own outputs; their slots are cleared after the stage of
  their last reader (``StagePlan.release``) so the allocator reuses that memory;
* a parallel stage's groups are assigned to workers of the shared pool (longest processing
  time by multiply-accumulates), each with its share of the intra-op threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ios_core.ir import Graph, Node, Value
from ios_core.optimizer.stage import Schedule
from ios_core.runtime.plan import F32, Piece, RuntimePlan, ValueRef
from ios_core.runtime.pool import assign_groups, shared_pool, split_threads
from ios_core.runtime.tensors import TORCH, Tensors

Tensor = object  # a torch tensor or a numpy array, as the program's Tensors keep them


def graph_stages(graph: Graph) -> list[list[list[Node]]]:
    """The graph's stages as nodes (blocks without stages run sequentially)."""
    return Schedule.of(graph).node_groups()


@dataclass
class Program:
    """A planned program. ``stage_fns`` run in order; ``env`` holds every buffer's tensor."""

    plan: RuntimePlan
    env: list
    stage_fns: list[Callable[[], None]]
    op_fns: list[list[Callable[[], None]]]  # per stage, per op (sequential run, for profiling)
    op_names: list[list[str]]
    stage_names: list[list[list[str]]]
    input_slots: dict[str, int]
    output_getters: dict[str, Callable[[], Tensor]]
    threads: int
    stats: dict = field(default_factory=dict)
    profiled_stage_fns: list[Callable[[], None]] | None = None
    stage_acc: list[int] | None = None
    # provider programs (``emit_provider``): the compiled kernels and their pieces
    kernels: list = field(default_factory=list)
    pieces: list = field(default_factory=list)
    tensors: Tensors = TORCH  # what its values are kept in, and its thread control

    def run(self) -> None:
        for f in self.stage_fns:
            f()

    def output(self, name: str) -> Tensor:
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


@dataclass
class PieceIO:
    """How a compiled piece meets the program's buffers. ``inputs``: node name -> a function
    returning that value's current tensor (NCHW float32, possibly a channel-slice view);
    ``outputs``: node name -> a function storing the computed tensor; ``destinations``: node
    name -> the preallocated tensor the output lands in (an arena view: a provider may write
    there directly, e.g. through ONNX Runtime's IO binding, and then store that same tensor,
    which costs nothing), or None where the output is a fresh tensor. ``tensors``: the library
    the tensors are (:mod:`.tensors`)."""

    inputs: dict[str, Callable[[], Tensor]]
    outputs: dict[str, Callable[[Tensor], None]]
    destinations: dict[str, Tensor | None]
    tensors: Tensors = TORCH


# compile_piece(piece, io, threads) -> a closure running the piece (reading io.inputs, calling io.outputs)
CompilePiece = Callable[[Piece, PieceIO, int], Callable[[], None]]



class Storage:
    """Where the values of one plan live while its program runs: ``env`` (one slot per buffer)
    and the arena, one preallocated tensor of ``tensors`` whose views are the fixed buffers."""

    def __init__(self, plan: RuntimePlan, tensors: Tensors = TORCH):
        self.plan = plan
        self.n = plan.batch_size
        self.tensors = tensors
        self.env: list = [None] * len(plan.buffers)
        arena = tensors.empty((plan.arena_bytes // F32,))
        self.fixed: set[int] = set()
        for b in plan.buffers:
            if b.offset is not None:
                self.env[b.index] = tensors.reshape(arena, b.offset // F32, b.nbytes // F32, b.shape)
                self.fixed.add(b.index)

    # ---- reading values -------------------------------------------------------------------------
    def view(self, ref: ValueRef) -> Tensor:
        """The fixed tensor of a value in the arena."""
        t = self.env[ref.buffer]
        return t if ref.whole else self.tensors.narrow(t, ref.begin, ref.channels)

    def getter(self, ref: ValueRef) -> Callable[[], Tensor]:
        if ref.buffer in self.fixed:
            t = self.view(ref)
            return lambda: t
        env, k = self.env, ref.buffer
        if ref.whole:
            return lambda: env[k]
        b, ln, narrow = ref.begin, ref.channels, self.tensors.narrow
        return lambda: narrow(env[k], b, ln)

    def read(self, s: Value) -> Callable[[], Tensor]:
        return self.getter(self.plan.read(s))

    def piece_io(self, piece: Piece) -> PieceIO:
        destinations: dict[str, Tensor | None] = {}
        outputs: dict[str, Callable[[Tensor], None]] = {}
        env, copy = self.env, self.tensors.copy
        for o in piece.outputs:
            ref = self.plan.value(o)
            if ref.buffer in self.fixed:
                dest = destinations[o.name] = self.view(ref)
                outputs[o.name] = lambda t, dest=dest: None if t is dest else copy(dest, t)
            else:
                destinations[o.name] = None
                outputs[o.name] = lambda t, k=ref.buffer: env.__setitem__(k, t)
        return PieceIO({x.name: self.getter(self.plan.value(x)) for x in piece.inputs}, outputs, destinations,
                       self.tensors)


GroupTask = tuple[list[str], list[Callable[[], None]], float]  # one group: names, closures, cost (for balancing)


def emit_pieces(plan: RuntimePlan, threads: int, compile_piece: CompilePiece, max_workers: int | None = None,
                trace: list | None = None, tensors: Tensors = TORCH) -> Program:
    """A program whose groups are pieces compiled by a kernel provider: ``compile_piece(piece,
    io, threads)`` is called once per piece (:meth:`RuntimePlan.pieces`) with the intra-op threads
    that piece gets when it runs (its share of a parallel stage, or all of ``threads``) and
    returns the closure that runs it. Stages, the worker pool, releases, profiling and stats
    are the torch program's. Plan with ``make_plan(..., fuse_sequential=True)`` so runs of
    single-group stages are compiled as one piece. ``tensors``: what the values are kept in."""
    em = Storage(plan, tensors)
    pieces = plan.pieces()
    by_stage: dict[int, list[Piece]] = {}
    for p in pieces:
        by_stage.setdefault(p.stage, []).append(p)
    stage_tasks: list[list[GroupTask]] = []
    for si, st in enumerate(plan.stages):
        stage_pieces = by_stage.get(si, [])
        costs = [st.groups[p.group].cost for p in stage_pieces]
        shares = group_threads(costs, threads, max_workers)
        tasks = []
        for p, cost, share in zip(stage_pieces, costs, shares):
            fn = compile_piece(p, em.piece_io(p), share)
            tasks.append(([p.name], [fn], cost))
        stage_tasks.append(tasks)
    return assemble(plan, em, stage_tasks, threads, max_workers, trace)


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


def assemble(plan: RuntimePlan, em: Storage, stage_tasks: list[list[GroupTask]], threads: int, max_workers: int | None,
             trace: list | None) -> Program:
    """The program running ``stage_tasks`` (per stage, its groups' named closures and costs) over
    ``em``'s storage: stage functions with the worker pool, releases, profiling and stats."""
    env = em.env
    pool = shared_pool(em.tensors)
    stage_fns: list[Callable[[], None]] = []
    op_fns: list[list[Callable[[], None]]] = []
    op_names: list[list[str]] = []
    workers_used = 1
    for si, (st, tasks) in enumerate(zip(plan.stages, stage_tasks)):
        groups_ops = [fns for _, fns, _ in tasks]
        op_fns.append([f for fns in groups_ops for f in fns])
        op_names.append([name for names, _, _ in tasks for name in names])
        fn, nworkers = _stage_fn(groups_ops, [c for _, _, c in tasks], threads, max_workers, pool, trace, si,
                                 em.tensors)
        workers_used = max(workers_used, nworkers)
        stage_fns.append(_with_release(fn, env, st.release) if st.release else fn)
    program = Program(
        plan=plan, env=env, stage_fns=stage_fns, op_fns=op_fns, op_names=op_names,
        stage_names=[[[x.name for x in g.nodes] for g in st.groups] for st in plan.stages],
        input_slots={x.name: plan.value(x).buffer for x in plan.externals},
        output_getters={o.name: em.getter(plan.value(o)) for o in plan.outputs}, threads=threads,
        tensors=em.tensors)
    program.stats = {**storage_bytes(plan.stats(), em.tensors), "max_workers": workers_used, "threads": threads}
    return program


BYTE_FIGURES = ("arena_bytes", "peak_activation_bytes", "naive_activation_bytes")


def storage_bytes(figures: dict, tensors: Tensors) -> dict:
    """The plan's figures with its byte counts as bytes of ``tensors``' elements: the plan counts
    :data:`~.plan.F32` bytes an element (its offsets are elements), a bf16 program's take 2."""
    if tensors.itemsize == F32:
        return figures
    return {k: (v // F32 * tensors.itemsize if k in BYTE_FIGURES else v) for k, v in figures.items()}


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


def _stage_fn(group_ops, costs, threads, max_workers, pool, trace=None, si=0, tensors: Tensors = TORCH):
    if not group_ops:
        return (lambda: None), 0
    if len(group_ops) == 1:
        return seq(group_ops[0]), 1
    nworkers = min(len(group_ops), threads, max_workers or threads)
    if nworkers <= 1:
        return seq([f for fns in group_ops for f in fns]), 1
    # longest-processing-time assignment of groups to workers, by multiply-accumulates
    assigned = assign_groups(costs, nworkers)
    per = split_threads(threads, nworkers)
    tasks = [(seq([f for i in a for f in group_ops[i]]), t) for a, t in zip(assigned, per)]
    if trace is not None:
        tasks = [(_traced(f, trace, si, ti, tensors, a), t) for ti, ((f, t), a) in enumerate(zip(tasks, assigned))]
    run = pool.run
    return (lambda: run(tasks, threads)), nworkers


def _traced(fn, trace, si, ti, tensors: Tensors = TORCH, groups=()):
    """``fn`` appending its stage, task, the indices of the stage's groups it runs, its thread and
    its start and end (``perf_counter_ns``) to ``trace`` at each run."""
    import threading

    groups = list(groups)

    def run():
        t0 = time.perf_counter_ns()
        fn()
        trace.append({"stage": si, "task": ti, "groups": groups, "thread": threading.get_ident(),
                      "threads": tensors.threads(), "start_ns": t0, "end_ns": time.perf_counter_ns()})
    return run


def seq(fns):
    if len(fns) == 1:
        return fns[0]
    fns = tuple(fns)

    def run():
        for f in fns:
            f()
    return run
