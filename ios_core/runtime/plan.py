"""Planning: turn stages of IR nodes into a program, a flat list of prepared closures.

Plan once, run many. At construction the planner

* gives every value a slot in one list (``env``); a closure reads its inputs from slots and
  writes its output to a slot, so running the program is a tight loop over closures;
* does concatenation without copies where the layout allows: a concatenation (an
  ``identity`` node whose terms are whole outputs of operators) owns a preallocated buffer,
  and each producer writes straight into its channel slice of that buffer (the convolution's
  fused activation writes there; element-wise sums use ``out=``), so the concatenation
  itself does nothing at run time;
* preallocates the concatenation buffers from an arena, reusing storage once a buffer's
  last reader has run (lifetimes are counted in stages, so concurrent groups never share
  storage); other activations are the kernels' own outputs (torch's CPU convolution has no
  native ``out=`` path: ``aten::convolution.out`` computes and copies), and their slots are
  cleared after their last use so the allocator reuses that memory;
* reports ``peak_activation_bytes`` (arena plus the largest set of other live activations
  at any stage) beside ``naive_activation_bytes`` (every activation kept).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ..ir import Node, Sequential, leaf_nodes
from .pool import assign_groups, shared_pool, split_threads

F32 = 4


def _act_inplace(act: str):
    return {"identity": None, "relu": torch.relu_, "sigmoid": torch.sigmoid_, "tanh": torch.tanh_}[act]


def _act_out(act: str):
    """An activation writing into ``out`` (a slice of a concatenation buffer)."""
    if act == "relu":
        return lambda y, out: torch.clamp_min(y, 0.0, out=out)
    if act == "sigmoid":
        return lambda y, out: torch.sigmoid(y, out=out)
    if act == "tanh":
        return lambda y, out: torch.tanh(y, out=out)
    return lambda y, out: out.copy_(y)


def _act_fn(act: str):
    return {"identity": None, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[act]


@dataclass
class Program:
    """A planned program. ``stage_fns`` run in order; ``env`` holds every slot."""

    env: list
    stage_fns: list[Callable[[], None]]
    op_fns: list[list[Callable[[], None]]]  # per stage, per op (sequential run, for profiling)
    op_names: list[list[str]]
    stage_names: list[list[list[str]]]
    input_slots: dict[str, int]
    output_slots: dict[str, int]
    threads: int
    stats: dict = field(default_factory=dict)
    profiled_stage_fns: list[Callable[[], None]] | None = None
    stage_acc: list[int] | None = None
    # provider programs (``pieces.build_provider_program``): the buffers the kernels read the
    # inputs from (filling them directly saves a copy), the compiled kernels and their pieces
    input_buffers: dict = field(default_factory=dict)
    kernels: list = field(default_factory=list)
    pieces: list = field(default_factory=list)

    def run(self) -> None:
        for f in self.stage_fns:
            f()

    def run_op_profiled(self, acc: list[int]) -> None:
        """Run every operator in order (no concurrency), adding each one's time to ``acc``."""
        import time

        clock = time.perf_counter_ns
        i = 0
        for fns in self.op_fns:
            for f in fns:
                t0 = clock()
                f()
                acc[i] += clock() - t0
                i += 1

    def enable_stage_profile(self) -> None:
        import time

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


def build_program(stages: list[list[list[Node]]], externals: list[Node], outputs: list[Node], batch_size: int,
                  threads: int, random_weights: bool = False, max_workers: int | None = None,
                  seed: int = 0, trace: list | None = None, provider: str = "torch") -> Program:
    """Plan ``stages`` (stage -> groups -> schedulable nodes, Sequential allowed) whose inputs
    are the ``externals`` (filled by the caller through ``input_slots``); ``outputs`` keep
    their values after the run (``output_slots``). ``trace``, a list, receives one record per
    concurrent task run (stage, task, thread id, intra-op threads, start and end ns): the
    evidence that groups overlap. A ``provider`` other than torch plans pieces compiled by that
    library (``pieces.build_provider_program``)."""
    if provider != "torch":
        from .pieces import build_provider_program

        return build_provider_program(stages, externals, outputs, batch_size, threads, provider,
                                      random_weights=random_weights, max_workers=max_workers, seed=seed, trace=trace)
    rng = np.random.default_rng(seed)
    n = batch_size
    # ---- leaves, producers --------------------------------------------------------------
    stage_leaves: list[list[list[Node]]] = [[[leaf for node in g for leaf in leaf_nodes(node)] for g in st]
                                            for st in stages]
    producer: dict[int, Node] = {}  # id(node) -> leaf (or external) that computes it
    stage_of: dict[int, int] = {}  # id(leaf) -> stage index
    for ext in externals:
        producer[id(ext)] = ext
        stage_of[id(ext)] = -1
    for si, st in enumerate(stages):
        for g in st:
            for node in g:
                for leaf in leaf_nodes(node):
                    producer[id(leaf)] = leaf
                    stage_of[id(leaf)] = si
                if isinstance(node, Sequential):
                    producer[id(node)] = node.nodes[-1]
    leaves = [leaf for st in stage_leaves for g in st for leaf in g]

    def prod(node: Node) -> Node:
        try:
            return producer[id(node)]
        except KeyError:
            raise ValueError(f"node {node.name!r} is read but neither computed nor given as an input") from None

    def whole(v) -> bool:
        return v.begin == 0 and v.end == v.node.output_shape[0]

    # ---- pass-through identities and zero-copy concatenations --------------------------------
    alias_of: dict[int, Node] = {}  # identity leaf -> the producer whose value it simply is
    for leaf in leaves:
        if leaf.TYPE == "identity" and len(leaf.inputs) == 1 and len(leaf.inputs[0]) == 1 and whole(leaf.inputs[0][0]):
            src = prod(leaf.inputs[0][0].node)
            alias_of[id(leaf)] = alias_of.get(id(src), src)

    def root(node: Node) -> Node:
        p = prod(node)
        return alias_of.get(id(p), p)

    concat_of: dict[int, tuple[Node, int]] = {}  # producer leaf -> (concat leaf, channel offset)
    concats: list[Node] = []
    aliased_terms: dict[int, set[int]] = {}  # concat leaf -> indices of terms written in place
    for leaf in leaves:
        if leaf.TYPE != "identity" or id(leaf) in alias_of or len(leaf.inputs) < 2:
            continue
        concats.append(leaf)
        offset = 0
        aliased_terms[id(leaf)] = set()
        for ti, term in enumerate(leaf.inputs):
            v = term[0]
            p = root(v.node)
            ok = (len(term) == 1 and whole(v) and p.output_shape[0] == v.length and id(p) in stage_of
                  and stage_of[id(p)] >= 0 and id(p) not in concat_of and p.TYPE not in ("identity", "flatten")
                  and p.output_shape[1:] == leaf.output_shape[1:])
            if ok:
                concat_of[id(p)] = (leaf, offset)
                aliased_terms[id(leaf)].add(ti)
            offset += v.length
    concat_ids = {id(c) for c in concats}

    # ---- slots -------------------------------------------------------------------------------
    env: list = []
    slot: dict[int, int] = {}

    def new_slot(node: Node) -> int:
        env.append(None)
        slot[id(node)] = len(env) - 1
        return len(env) - 1

    for ext in externals:
        new_slot(ext)
    for leaf in leaves:
        if id(leaf) not in alias_of:
            new_slot(leaf)
    for leaf in leaves:
        if id(leaf) in alias_of:
            slot[id(leaf)] = slot[id(alias_of[id(leaf)])]

    def slot_of(node: Node) -> int:
        return slot[id(root(node))]

    # ---- lifetimes (in stages) ------------------------------------------------------------------
    last_use: dict[int, int] = {}  # slot -> last stage reading it
    first_def: dict[int, int] = {}
    for leaf in leaves:
        si = stage_of[id(leaf)]
        for v in leaf.values():
            k = slot_of(v.node)
            last_use[k] = max(last_use.get(k, -1), si)
        if id(leaf) not in alias_of:
            first_def.setdefault(slot[id(leaf)], si)
    keep = {slot_of(o) for o in outputs}
    # an operator whose output may be a view of its input (a channel slice, a reshape) keeps
    # that input's storage alive as long as itself: matters for arena storage reuse
    for leaf in reversed(leaves):
        if id(leaf) in alias_of or leaf.TYPE not in ("identity", "element", "flatten"):
            continue
        if len(leaf.inputs) != 1 or len(leaf.inputs[0]) != 1:
            continue
        k, parent = slot[id(leaf)], slot_of(leaf.inputs[0][0].node)
        if k in keep:
            keep.add(parent)
        last_use[parent] = max(last_use.get(parent, -1), last_use.get(k, -1))
    nstages = len(stages)

    def shape_of(node: Node) -> tuple:
        return (n, *node.output_shape)

    def nbytes(node: Node) -> int:
        return int(np.prod(shape_of(node))) * F32

    # concatenation buffers from an arena, reused across disjoint stage ranges
    buffers: list[tuple[int, int, Node]] = []  # (start stage, end stage, concat)
    for c in concats:
        k = slot[id(c)]
        start = min([stage_of[id(c)]] + [stage_of[id(p)] for p in leaves if concat_of.get(id(p), (None,))[0] is c])
        members = [slot[id(p)] for p in leaves if concat_of.get(id(p), (None,))[0] is c]
        end = nstages if (k in keep or keep & set(members)) else max(
            [stage_of[id(c)], last_use.get(k, -1)] + [last_use.get(m, -1) for m in members])
        buffers.append((start, end, c))
    buffers.sort(key=lambda b: (b[0], -nbytes(b[2])))
    storages: list[list] = []  # [tensor, free_after_stage]
    view_of: dict[int, torch.Tensor] = {}
    for start, end, c in buffers:
        need = nbytes(c) // F32
        best = None
        for s in storages:
            if s[1] < start and s[0].numel() >= need and (best is None or s[0].numel() < best[0].numel()):
                best = s
        if best is None:
            best = [torch.empty(need, dtype=torch.float32), end]
            storages.append(best)
        best[1] = end
        view_of[id(c)] = best[0][:need].view(shape_of(c))
    arena_bytes = sum(s[0].numel() * F32 for s in storages)
    for c in concats:
        env[slot[id(c)]] = view_of[id(c)]
    for leaf in leaves:
        if id(leaf) in concat_of:
            c, off = concat_of[id(leaf)]
            env[slot[id(leaf)]] = view_of[id(c)][:, off:off + leaf.output_shape[0]]
    fixed = {slot[id(c)] for c in concats} | {slot[id(p)] for p in leaves if id(p) in concat_of}

    # memory report: owned activations live from definition to last use
    peak_owned = 0
    owned = [(first_def[k], nstages if k in keep else last_use.get(k, first_def[k]), k) for k in first_def
             if k not in fixed]
    size_of_slot = {slot[id(leaf)]: nbytes(leaf) for leaf in leaves if id(leaf) not in alias_of}
    for si in range(nstages):
        live = sum(size_of_slot[k] for s, e, k in owned if s <= si <= e)
        peak_owned = max(peak_owned, live)
    naive = sum(size_of_slot.values())

    # ---- closures -----------------------------------------------------------------------------
    def getter(node: Node) -> Callable[[], torch.Tensor]:
        """A function returning the composed input of ``node`` (terms concatenated, values summed)."""
        mul = node.TYPE == "element" and node.op_type == "mul"
        parts = []
        for term in node.inputs:
            vals = []
            for v in term:
                k = slot_of(v.node)
                full = root(v.node).output_shape[0]
                vals.append((k, None if (v.begin == 0 and v.end == full) else (v.begin, v.end - v.begin)))
            parts.append(vals)
        if len(parts) == 1 and len(parts[0]) == 1:
            k, sl = parts[0][0]
            if sl is None:
                return lambda: env[k]
            b, ln = sl
            return lambda: env[k].narrow(1, b, ln)

        def term_fn(vals):
            def val(k, sl):
                return (lambda: env[k]) if sl is None else (lambda: env[k].narrow(1, sl[0], sl[1]))
            fns = [val(k, sl) for k, sl in vals]
            if len(fns) == 1:
                return fns[0]
            op = torch.mul if mul else torch.add
            if len(fns) == 2:
                a, b = fns
                return lambda: op(a(), b())

            def f():
                acc = op(fns[0](), fns[1]())
                for g in fns[2:]:
                    acc = acc.mul_(g()) if mul else acc.add_(g())
                return acc
            return f

        tfs = [term_fn(vals) for vals in parts]
        if len(tfs) == 1:
            return tfs[0]
        return lambda: torch.cat([t() for t in tfs], 1)

    def getter_value(v):
        k = slot_of(v.node)
        if v.begin == 0 and v.end == root(v.node).output_shape[0]:
            return lambda: env[k]
        b, ln = v.begin, v.length
        return lambda: env[k].narrow(1, b, ln)

    def make_op(leaf: Node) -> Callable[[], None] | None:
        o = slot[id(leaf)]
        out_view = env[o] if o in fixed else None
        kind = leaf.TYPE
        if id(leaf) in alias_of:
            return None
        if id(leaf) in concat_ids:
            # the terms not written in place by their producers: a copy into the slice, or a sum
            # (product) computed straight into it
            buf = env[o]
            fns = []
            offset = 0
            for ti, term in enumerate(leaf.inputs):
                if ti not in aliased_terms[id(leaf)]:
                    fns.append(_term_into(buf.narrow(1, offset, term[0].length), [getter_value(v) for v in term],
                                          kind == "element" and leaf.op_type == "mul"))
                offset += term[0].length
            return _seq(fns) if fns else None
        get = getter(leaf)
        if kind == "conv":
            w = _weight(leaf, "weight", leaf.weight_shape, random_weights, rng)
            bias = _weight(leaf, "bias", (leaf.out_channels,), random_weights, rng)
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
        if kind == "pool":
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
            if out_view is not None and len(leaf.inputs) == 1 and len(leaf.inputs[0]) == 2:
                # a sum (product) of two values, written straight into the concatenation slice
                op2 = torch.mul if (kind == "element" and leaf.op_type == "mul") else torch.add
                ga, gb = (getter_value(v) for v in leaf.inputs[0])
                return lambda: op2(ga(), gb(), out=out_view)
            fn = None
        elif kind in ("relu", "activation"):
            fn = _act_fn(leaf.act_type) or (lambda x: x)
        elif kind == "flatten":
            fn = lambda x: x.reshape(n, -1, 1, 1)
        elif kind == "linear":
            w = _weight(leaf, "weight", leaf.weight_shape, random_weights, rng)
            bias = _weight(leaf, "bias", (leaf.out_features,), random_weights, rng)
            wt = w.t()
            act = _act_inplace(leaf.act)

            def fn(x):
                y = torch.addmm(bias, x.reshape(n, -1), wt)
                if act is not None:
                    act(y)
                return y.view(n, -1, 1, 1)
        else:
            raise NotImplementedError(f"the runtime has no kernel for node type {kind!r}")
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

    pool = shared_pool()
    stage_fns: list[Callable[[], None]] = []
    op_fns: list[list[Callable[[], None]]] = []
    op_names: list[list[str]] = []
    workers_used = 1
    ext_slots = {slot[id(x)] for x in externals}
    for si, st in enumerate(stage_leaves):
        groups_ops, names, costs = [], [], []
        for g in st:
            pairs = [(leaf, make_op(leaf)) for leaf in g]
            fns = [f for _, f in pairs if f is not None]
            names += [leaf.name for leaf, f in pairs if f is not None]
            if fns:
                groups_ops.append(fns)
                costs.append(_group_cost(g))
        op_fns.append([f for fns in groups_ops for f in fns])
        op_names.append(names)
        release = sorted(k for k, e in last_use.items() if e == si and k not in keep and k not in fixed
                         and k not in ext_slots)
        fn, nworkers = _stage_fn(groups_ops, costs, threads, max_workers, pool, trace, si)
        workers_used = max(workers_used, nworkers)
        stage_fns.append(_with_release(fn, env, release) if release else fn)
    program = Program(
        env=env, stage_fns=stage_fns, op_fns=op_fns, op_names=op_names,
        stage_names=[[[x.name for x in g] for g in st] for st in stages],
        input_slots={e.name: slot[id(e)] for e in externals},
        output_slots={o.name: slot_of(o) for o in outputs}, threads=threads)
    program.stats = {
        "stages": nstages, "operators": sum(len(fns) for fns in op_fns),
        "parallel_stages": sum(1 for st in stages if len(st) > 1),
        "zero_copy_concat_inputs": len(concat_of), "concat_buffers": len(concats),
        "arena_bytes": arena_bytes, "peak_activation_bytes": arena_bytes + peak_owned,
        "naive_activation_bytes": naive + sum(nbytes(c) for c in concats), "max_workers": workers_used,
        "threads": threads,
    }
    return program


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


def _group_cost(group: list[Node]) -> int:
    return sum(max(leaf.macs(), 1) for leaf in group)


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
    import time

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
