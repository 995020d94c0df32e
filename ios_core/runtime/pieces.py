"""Planning for a kernel provider other than torch: the schedule cut into pieces, each
compiled once by the provider with its thread share, over buffers fixed at plan time.

* **Pieces.** A parallel stage (more than one group, and more than one worker to run them)
  becomes one step whose tasks are the workers: each worker's groups (assigned exactly as
  the torch plan assigns them, ``pool.assign_groups``) form one piece with that worker's
  thread share (``pool.split_threads``). Every other stage runs on the calling thread with
  the whole budget, and a run of such consecutive stages forms ONE piece: fewer library calls
  (a sequential schedule is a single piece, the library running the whole graph itself).
* **Buffers.** Every value that crosses pieces (a piece's output read by a later piece, the
  graph's input and output) has one C-contiguous float32 buffer for the program's life; a
  provider binds its piece's inputs and outputs to them once (ONNX Runtime IO binding,
  OpenVINO tensors sharing memory), so a call moves no data. Buffers share storage from an
  arena when their lifetimes (in steps) do not overlap. Values inside a piece are the
  library's business.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from ..ir import Node, leaf_nodes
from . import providers as _providers
from .plan import F32, Program, _group_cost, _seq, _traced
from .pool import assign_groups, shared_pool, split_threads


def plan_steps(stages: list[list[list[Node]]], threads: int,
               max_workers: int | None = None) -> list[tuple[list[int], list[tuple[list[Node], int]]]]:
    """Cut ``stages`` into steps: (stage indices, tasks); a task is (nodes, thread share).
    Consecutive stages that run on one thread are one step with one task."""
    steps: list[tuple[list[int], list[tuple[list[Node], int]]]] = []
    run: list[Node] = []
    run_stages: list[int] = []

    def flush():
        if run:
            steps.append((list(run_stages), [(list(run), threads)]))
            run.clear()
            run_stages.clear()

    for si, st in enumerate(stages):
        groups = [g for g in st if g]
        nworkers = min(len(groups), threads, max_workers or threads)
        if nworkers <= 1:
            run.extend(n for g in groups for n in g)
            run_stages.append(si)
            continue
        flush()
        costs = [_group_cost([leaf for n in g for leaf in leaf_nodes(n)]) for g in groups]
        assigned = assign_groups(costs, nworkers)
        per = split_threads(threads, nworkers)
        steps.append(([si], [([n for i in a for n in groups[i]], t) for a, t in zip(assigned, per)]))
    flush()
    return steps


def build_provider_program(stages: list[list[list[Node]]], externals: list[Node], outputs: list[Node],
                           batch_size: int, threads: int, provider: str, random_weights: bool = False,
                           max_workers: int | None = None, seed: int = 0, trace: list | None = None) -> Program:
    """Plan ``stages`` for ``provider`` (see the module doc); same contract as
    ``plan.build_program``: ``externals`` are filled through ``input_slots`` (or, without a
    copy, through ``input_buffers``), ``outputs`` are read through ``output_slots``."""
    prov = _providers.require(provider)
    n = batch_size
    steps = plan_steps(stages, threads, max_workers)

    # ---- who computes what --------------------------------------------------------------
    producer: dict[int, Node] = {id(x): x for x in externals}  # referenced node -> leaf holding its value
    piece_of: dict[int, int] = {}  # id(node or leaf) -> piece index
    tasks: list[tuple[int, list[Node], int]] = []  # (step, nodes, threads)
    for si, (_, step_tasks) in enumerate(steps):
        for nodes, t in step_tasks:
            pi = len(tasks)
            tasks.append((si, nodes, t))
            for node in nodes:
                piece_of[id(node)] = pi
                for leaf in leaf_nodes(node):
                    piece_of[id(leaf)] = pi
                    producer[id(leaf)] = leaf
                producer[id(node)] = leaf_nodes(node)[-1]

    def prod(node: Node) -> Node:
        try:
            return producer[id(node)]
        except KeyError:
            raise ValueError(f"node {node.name!r} is read but neither computed nor given as an input") from None

    # ---- pieces: inputs read from elsewhere, outputs needed elsewhere ----------------------------
    pieces = [_providers.make_piece(f"piece{pi}", nodes, []) for pi, (_, nodes, _) in enumerate(tasks)]
    out_nodes: list[dict[int, Node]] = [{} for _ in pieces]  # per piece: resolved leaf id -> node
    needed_until: dict[int, int] = {}  # resolved leaf id -> last step reading it
    for pi, piece in enumerate(pieces):
        for u in piece.inputs:
            p = prod(u)
            needed_until[id(p)] = max(needed_until.get(id(p), -1), tasks[pi][0])
            if id(u) in piece_of:
                out_nodes[piece_of[id(u)]].setdefault(id(p), u)
    nsteps = len(steps)
    for o in outputs:
        p = prod(o)
        needed_until[id(p)] = nsteps
        if id(o) in piece_of:
            out_nodes[piece_of[id(o)]].setdefault(id(p), o)
    for piece, outs in zip(pieces, out_nodes):
        # a piece nobody reads (dead operators the schedule still runs) keeps its last value
        piece.outputs = list(outs.values()) or [piece.nodes[-1]]

    # ---- buffers -------------------------------------------------------------------------------
    ext_ids = {id(x) for x in externals}
    values: dict[int, Node] = {}  # resolved leaf id -> leaf, for every buffer
    first: dict[int, int] = {}
    for pi, piece in enumerate(pieces):
        for u in piece.outputs:
            p = prod(u)
            values[id(p)] = p
            first[id(p)] = tasks[pi][0]
    for o in outputs:
        if id(prod(o)) in ext_ids:
            raise ValueError(f"output {o.name!r} is an input: nothing to compute")

    def shape_of(node: Node) -> tuple:
        return (n, *node.output_shape)

    def numel(node: Node) -> int:
        return int(np.prod(shape_of(node)))

    spans = sorted(((first[k], needed_until.get(k, first[k]), k) for k in values),
                   key=lambda s: (s[0], -numel(values[s[2]])))
    storages: list[list] = []  # [tensor, busy until step]
    tensor_of: dict[int, torch.Tensor] = {}
    for start, end, k in spans:
        need = numel(values[k])
        best = None
        for s in storages:
            if s[1] < start and s[0].numel() >= need and (best is None or s[0].numel() < best[0].numel()):
                best = s
        if best is None:
            best = [torch.empty(need, dtype=torch.float32), end]
            storages.append(best)
        best[1] = end
        tensor_of[k] = best[0][:need].view(shape_of(values[k]))
    for x in externals:
        tensor_of[id(x)] = torch.empty(shape_of(x), dtype=torch.float32)
    arena_bytes = sum(s[0].numel() * F32 for s in storages)

    def array(node: Node) -> np.ndarray:
        return tensor_of[id(prod(node))].numpy()

    # ---- compile and bind ----------------------------------------------------------------------
    env: list = []
    input_slots: dict[str, int] = {}
    for x in externals:
        input_slots[x.name] = len(env)
        env.append(tensor_of[id(x)])
    output_slots: dict[str, int] = {}
    for o in outputs:
        output_slots[o.name] = len(env)
        env.append(tensor_of[id(prod(o))])
    t0 = time.perf_counter()
    fns: list[Callable[[], None]] = []
    kernels = []
    for pi, (piece, (_, _, t)) in enumerate(zip(pieces, tasks)):
        kernel = prov.compile(piece, n, t, random_weights=random_weights, seed=seed + pi)
        kernels.append(kernel)
        fns.append(kernel.bind([array(u) for u in piece.inputs], [array(u) for u in piece.outputs]))
    compile_seconds = time.perf_counter() - t0

    # the caller may put another tensor in an input slot: copy it into the bound buffer
    copies = [(input_slots[x.name], tensor_of[id(x)]) for x in externals]

    def copy_in():
        for k, buf in copies:
            t = env[k]
            if t is not buf:
                buf.copy_(t)
                env[k] = buf

    pool = shared_pool()
    stage_fns: list[Callable[[], None]] = []
    op_fns: list[list[Callable[[], None]]] = []
    op_names: list[list[str]] = []
    stage_names: list[list[list[str]]] = []
    pi = 0
    workers_used = 1
    for si, (_, step_tasks) in enumerate(steps):
        step_fns = fns[pi:pi + len(step_tasks)]
        names = [p.name for p in pieces[pi:pi + len(step_tasks)]]
        if si == 0:
            step_fns = [_seq([copy_in, step_fns[0]])] + step_fns[1:]
        op_fns.append(step_fns)
        op_names.append(names)
        stage_names.append([[x.name for x in p.nodes] for p in pieces[pi:pi + len(step_tasks)]])
        if len(step_tasks) == 1:
            stage_fns.append(step_fns[0])
        else:
            work = [(f, t) for f, (_, t) in zip(step_fns, step_tasks)]
            if trace is not None:
                work = [(_traced(f, trace, si, ti), t) for ti, (f, t) in enumerate(work)]
            stage_fns.append(_pool_call(pool, work, threads))
            workers_used = max(workers_used, len(work))
        pi += len(step_tasks)
    if not steps:
        stage_fns.append(copy_in)
        op_fns.append([copy_in])
        op_names.append(["copy_in"])
        stage_names.append([])

    program = Program(
        env=env, stage_fns=stage_fns, op_fns=op_fns, op_names=op_names,
        stage_names=stage_names, input_slots=input_slots, output_slots=output_slots, threads=threads,
        input_buffers={x.name: tensor_of[id(x)] for x in externals}, kernels=kernels, pieces=pieces)
    program.stats = {
        "provider": prov.name, "provider_version": prov.version(),
        "provider_settings": _providers.provider_settings(prov.name, threads),
        "stages": len(stages), "steps": nsteps, "pieces": len(pieces),
        "parallel_stages": sum(1 for _, ts in steps if len(ts) > 1),
        "operators": sum(len(leaf_nodes(node)) for p in pieces for node in p.nodes),
        "arena_bytes": arena_bytes, "peak_activation_bytes": arena_bytes,
        "naive_activation_bytes": sum(numel(v) * F32 for v in values.values()),
        "max_workers": workers_used, "threads": threads, "compile_seconds": compile_seconds,
    }
    return program


def _pool_call(pool, work, threads):
    run = pool.run
    return lambda: run(work, threads)
