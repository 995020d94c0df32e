"""Emission for a kernel provider other than torch: the plan's pieces (``Plan.pieces``), each
compiled once by the provider with its thread share, over buffers fixed at plan time.

* **Pieces and thread shares.** ``Plan.pieces()`` cuts the plan: each group of a parallel
  stage is a piece, and a run of consecutive single-group stages is ONE piece (fewer library
  calls; a sequential schedule is a single piece, the library running the whole graph
  itself). The pieces of a parallel stage are assigned to workers exactly as the torch
  executor assigns groups (``pool.assign_groups`` by multiply-accumulates,
  ``pool.split_threads`` for the shares: on 2 cores, 1 thread each) and each is compiled with
  its worker's share; every other piece gets the whole budget.
* **Buffers.** Every value that crosses pieces (read by a later piece, kept, or an external
  input) gets one whole C-contiguous float32 buffer, placed in one arena by the plan's arena
  pass (``passes.arena``: storage shared where lifetimes, in stages, do not overlap). A
  provider binds its piece's inputs and outputs to them once (ONNX Runtime IO binding,
  OpenVINO tensors sharing memory), so a call moves no data. Values inside a piece are the
  library's business.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..ir import Node
from . import providers as _providers
from .emit_torch import Program, _seq, _traced
from .passes import arena
from .plan import Buffer, Piece, Plan, ValueRef, make_plan
from .pool import assign_groups, shared_pool, split_threads


def piece_cost(piece: Piece) -> int:
    """Multiply-accumulates (at least one per operator), as ``Group.cost``."""
    return sum(max(s.op.macs(), 1) for s in piece.steps)


def schedule_pieces(plan: Plan, pieces: list[Piece], threads: int,
                    max_workers: int | None = None) -> list[list[tuple[list[Piece], int]]]:
    """Steps in execution order; a step is a list of tasks run concurrently, a task the pieces
    one worker runs in order with its thread share."""
    steps: list[list[tuple[list[Piece], int]]] = []
    i = 0
    while i < len(pieces):
        p = pieces[i]
        si = p.stages[0]
        if len(p.stages) > 1 or len(plan.stages[si].groups) == 1:
            steps.append([([p], threads)])
            i += 1
            continue
        same = [q for q in pieces[i:] if len(q.stages) == 1 and q.stages[0] == si]
        i += len(same)
        nworkers = min(len(same), threads, max_workers or threads)
        if nworkers <= 1:
            steps.append([(same, threads)])
            continue
        assigned = assign_groups([piece_cost(q) for q in same], nworkers)
        per = split_threads(threads, nworkers)
        steps.append([([same[j] for j in a], t) for a, t in zip(assigned, per)])
    return steps


def emit_provider(plan: Plan, provider: str, threads: int, random_weights: bool = False,
                  max_workers: int | None = None, seed: int = 0, trace: list | None = None) -> Program:
    """The program of ``plan`` whose pieces run on ``provider`` (see the module doc)."""
    prov = _providers.require(provider)
    n = plan.batch_size
    nstages = len(plan.stages)

    # ---- one whole buffer per value crossing pieces, keyed by where the plan puts the value ----
    def key(node: Node) -> ValueRef:
        return plan.value(node)

    raw = plan.pieces()
    pieces: list[Piece] = []
    for p in raw:  # one output per value: a Sequential and its last operator are the same value
        outs: dict[ValueRef, Node] = {}
        for o in p.outputs:
            outs.setdefault(key(o), o)
        pieces.append(dataclasses.replace(p, outputs=list(outs.values())))
    bufs: dict[ValueRef, Buffer] = {}
    for x in plan.externals:
        bufs[key(x)] = Buffer(len(bufs), "input", (n, *x.output_shape), x, -1, nstages)
    for p in pieces:
        for o in p.outputs:
            k = key(o)
            if k not in bufs:
                bufs[k] = Buffer(len(bufs), "value", (n, *o.output_shape), o, p.stages[0], p.stages[-1])
    kept = {key(o) for o in plan.outputs}
    for p in pieces:
        for u in p.inputs:
            b = bufs[key(u)]
            b.end = max(b.end, p.stages[-1])
    for k in kept:
        bufs[k].end, bufs[k].kept = nstages, True
    layout = Plan(n, [], [], [], buffers=list(bufs.values()))
    arena(layout, ("value",))
    storage = torch.empty(max(layout.arena_bytes // 4, 1), dtype=torch.float32)
    tensor: dict[ValueRef, torch.Tensor] = {}
    for k, b in bufs.items():
        if b.kind == "input":
            tensor[k] = torch.empty(b.shape, dtype=torch.float32)
        else:
            numel = int(np.prod(b.shape))
            tensor[k] = storage[b.offset // 4:b.offset // 4 + numel].view(b.shape)

    def array(node: Node) -> np.ndarray:
        return tensor[key(node)].numpy()

    # ---- compile and bind ------------------------------------------------------------------------
    steps = schedule_pieces(plan, pieces, threads, max_workers)
    env: list = [tensor[key(x)] for x in plan.externals]
    input_slots = {x.name: i for i, x in enumerate(plan.externals)}
    t0 = time.perf_counter()
    kernels, run_of = [], {}
    for tasks in steps:
        for task_pieces, t in tasks:
            for p in task_pieces:
                k = prov.compile(p, n, t, random_weights=random_weights, seed=seed + len(kernels))
                kernels.append(k)
                run_of[id(p)] = k.bind([array(u) for u in p.inputs], [array(o) for o in p.outputs])
    compile_seconds = time.perf_counter() - t0

    copies = [(input_slots[x.name], tensor[key(x)]) for x in plan.externals]

    def copy_in():  # a caller's tensor in an input slot is copied into the bound buffer
        for slot, buf in copies:
            t = env[slot]
            if t is not buf:
                buf.copy_(t)
                env[slot] = buf

    pool = shared_pool()
    stage_fns: list[Callable[[], None]] = []
    op_fns: list[list[Callable[[], None]]] = []
    op_names: list[list[str]] = []
    stage_names: list[list[list[str]]] = []
    workers_used = 1
    for si, tasks in enumerate(steps):
        fns = [_seq([run_of[id(p)] for p in ps]) for ps, _ in tasks]
        if si == 0:
            fns[0] = _seq([copy_in, fns[0]])
        op_fns.append([run_of[id(p)] for ps, _ in tasks for p in ps])
        if si == 0:
            op_fns[0][0] = _seq([copy_in, op_fns[0][0]])
        op_names.append([p.name for ps, _ in tasks for p in ps])
        stage_names.append([[x.name for p in ps for x in p.nodes] for ps, _ in tasks])
        if len(tasks) == 1:
            stage_fns.append(fns[0])
        else:
            work = [(f, t) for f, (_, t) in zip(fns, tasks)]
            if trace is not None:
                work = [(_traced(f, trace, si, ti), t) for ti, (f, t) in enumerate(work)]
            stage_fns.append(_pool_call(pool, work, threads))
            workers_used = max(workers_used, len(work))
    if not steps:
        stage_fns.append(copy_in)
        op_fns.append([copy_in])
        op_names.append(["copy_in"])
        stage_names.append([])

    outputs = {o.name: tensor[key(o)] for o in plan.outputs}
    program = Program(plan=plan, env=env, stage_fns=stage_fns, op_fns=op_fns, op_names=op_names,
                      stage_names=stage_names, input_slots=input_slots,
                      output_getters={name: (lambda t=t: t) for name, t in outputs.items()}, threads=threads)
    program.input_buffers = {x.name: tensor[key(x)] for x in plan.externals}
    program.kernels = kernels
    program.pieces = [p for tasks in steps for ps, _ in tasks for p in ps]
    program.stats = {
        **{k: v for k, v in plan.stats().items() if k in ("stages", "operators", "parallel_stages")},
        "provider": prov.name, "provider_version": prov.version(),
        "provider_settings": _providers.provider_settings(prov.name, threads),
        "steps": len(steps), "pieces": len(kernels),
        "arena_bytes": layout.arena_bytes, "peak_activation_bytes": layout.arena_bytes,
        "naive_activation_bytes": sum(b.nbytes for b in bufs.values() if b.kind == "value"),
        "max_workers": workers_used, "threads": threads, "compile_seconds": compile_seconds,
    }
    return program


def build_provider_program(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node],
                           outputs: Sequence[Node], batch_size: int, threads: int, provider: str,
                           random_weights: bool = False, max_workers: int | None = None, seed: int = 0,
                           trace: list | None = None) -> Program:
    """``emit_provider`` of a fresh plan (``make_plan``): the same contract as
    ``emit_torch.build_program`` for any provider."""
    return emit_provider(make_plan(stages, externals, outputs, batch_size), provider, threads,
                         random_weights=random_weights, max_workers=max_workers, seed=seed, trace=trace)


def _pool_call(pool, work, threads):
    run = pool.run
    return lambda: run(work, threads)
