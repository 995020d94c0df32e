"""Emission for the CPU with torch kernels: the steps of a :class:`~.plan.RuntimePlan` become torch
closures, assembled into a :class:`~.program.Program` by :mod:`.program` (which owns the
storage, the stage functions, the worker pool and profiling).

* the arena (the concatenation buffers) is one preallocated tensor; a producer marked
  ``into`` writes straight into its channel slice of a concatenation buffer (the
  convolution's fused activation writes there; element-wise sums use ``out=``), so the
  concatenation itself does nothing at run time; reads of arena buffers are views made once;
* other activations are the kernels' own outputs (torch's CPU convolution has no native
  ``out=`` path: ``aten::convolution.out`` computes and copies);
* one element type for the whole program (``precision``, :mod:`.tensors`): fp32, or bf16 as a
  PyTorch user gets it on the CPU (``module.to(torch.bfloat16)`` with a bf16 input: oneDNN's bf16
  kernels): every weight cast to ``torch.bfloat16`` once at build, the arena and every activation in
  bf16 (a producer writing into its concatenation slice included), the input converted on entry
  (``Tensors.from_numpy``) and the output back to float32 on exit (``Tensors.to_numpy``). What the
  program computes in is read back from what it was built with (:func:`computes_in`:
  ``stats["precision"]``), never taken from the request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ios_core import kernels
from ios_core.ir import ActivationMap, Node, OpVisitor
from ios_core.lowering import Primitives, evaluate
from ios_core.runtime.passes import make_plan
from ios_core.runtime.plan import ALIAS, CONCAT, INTO, RuntimePlan, Step
from ios_core.runtime.program import GroupTask, Program, Storage, assemble, seq
from ios_core.runtime.tensors import TorchTensors, for_provider

# A fused activation (ios_core.ir.activations, the fusable kinds) as the convolution and linear
# fast paths apply it: (in place, or None for identity; writing into ``out``, or None for
# ``out.copy_`` of the oracle's function).
FUSED_ACTS: ActivationMap = ActivationMap("torch runtime (fused)", {
    "identity": (None, lambda y, out: out.copy_(y)),
    "relu": (torch.relu_, lambda y, out: torch.clamp_min(y, 0.0, out=out)),
    "sigmoid": (torch.sigmoid_, lambda y, out: torch.sigmoid(y, out=out)),
    "tanh": (torch.tanh_, lambda y, out: torch.tanh(y, out=out)),
    "relu6": (lambda t: t.clamp_(0.0, 6.0), None),
    "hardswish": (lambda t: F.hardswish(t, inplace=True), None),
    "silu": (lambda t: F.silu(t, inplace=True), None),
    "gelu": (lambda t: t.copy_(F.gelu(t)), None),  # torch has no in-place GELU
    "gelu_tanh": (lambda t: t.copy_(F.gelu(t, approximate="tanh")), None),
}, fused_only=True)


def _act_inplace(act: str):
    """A fused activation applied in place (None for identity)."""
    return FUSED_ACTS[act][0]


def _act_out(act: str):
    """An activation writing into ``out`` (a slice of a concatenation buffer)."""
    into = FUSED_ACTS[act][1]
    if into is not None:
        return into
    fn = kernels.act_fn(act)
    return lambda y, out: out.copy_(fn(y))


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


def _weight(node: Node, attr: str, shape, random_weights: bool, rng: np.random.Generator) -> torch.Tensor:
    arr = getattr(node, attr, None)
    if arr is None or random_weights:
        if arr is None and not random_weights:
            raise ValueError(f"node {node.name!r} has no weights: call graph.init_weights(seed)")
        arr = (rng.standard_normal(shape) * 0.05).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))


class TorchEmitter(Storage, OpVisitor):
    """Torch closures for the steps of one plan over one :class:`~.program.Storage` of ``tensors``
    (float32, or bfloat16: every weight cast to it once, here)."""

    ACTIVATIONS = kernels.TORCH_ACTIVATIONS  # activation nodes; fused ones: FUSED_ACTS

    def __init__(self, plan: RuntimePlan, random_weights: bool, seed: int, tensors: TorchTensors | None = None):
        super().__init__(plan, tensors or for_provider("torch"))
        self.random_weights = random_weights
        self.rng = np.random.default_rng(seed)
        self.weights: list[torch.Tensor] = []  # every weight the closures hold (what computes_in reads)

    def composed(self, step: Step) -> Callable[[], torch.Tensor]:
        """A function returning the step's composed input (the one evaluator, with closures)."""
        return evaluate(step.inputs, self.read, CLOSURE_PRIMS)

    def weight(self, node: Node, attr: str, shape) -> torch.Tensor:
        w = _weight(node, attr, shape, self.random_weights, self.rng)
        if self.tensors.precision != "fp32":
            w = w.to(self.tensors.dtype)  # cast once, at build
        self.weights.append(w)
        return w

    # ---- operators --------------------------------------------------------------------------------
    def op(self, step: Step) -> Callable[[], None] | None:
        """The closure running ``step`` (None when it has nothing to do at run time)."""
        if step.mode == ALIAS:
            return None
        if step.mode == CONCAT:
            # the terms not written in place by their producers: a copy into the slice, or a sum
            # (product) computed straight into it
            buf = self.view(step.out)
            fns = [_term_into(buf.narrow(1, term.offset, term.channels), [self.read(sl) for sl in term.slices],
                              step.inputs.op == "mul")
                   for ti, term in enumerate(step.inputs.terms) if ti not in step.in_place_terms]
            return seq(fns) if fns else None
        return self.visit(step.op, step)

    def closure(self, step: Step, fn: Callable[[torch.Tensor], torch.Tensor] | None) -> Callable[[], None]:
        """The closure computing ``fn`` (None: the identity) of the step's composed input into
        its output: a slice of a concatenation buffer (``into``) or its slot in ``env``."""
        get = self.composed(step)
        if step.mode == INTO:
            out_view = self.view(step.out)
            if fn is None:
                return lambda: out_view.copy_(get())
            return lambda: out_view.copy_(fn(get()))
        env, o = self.env, step.out.buffer
        if fn is None:
            def op():
                env[o] = get()
        else:
            def op():
                env[o] = fn(get())
        return op

    # ---- one visit per operator type: the closure of a computing step --------------------------------
    def oracle(self, leaf: Node, step: Step) -> Callable[[], None]:
        """No fast path: the oracle's kernel (operator types added through the walk run here, and
        pools with asymmetric padding or averages excluding padding). Only for operators without
        weights: the oracle reads a node's float32 arrays, the program its own weights."""
        return self.closure(step, lambda x: kernels.apply(leaf, x))

    visit_shuffle = visit_resize = visit_softmax = visit_transpose = visit_l2norm = oracle

    # ---- general tensors (ios_core.ir.tensor_nodes) ---------------------------------------------------
    def visit_matmul(self, leaf: Node, step: Step) -> Callable[[], None]:
        fa, fb = self.composed(step)
        if step.mode == INTO:
            out_view = self.view(step.out)
            return lambda: torch.matmul(fa(), fb(), out=out_view)
        env, o = self.env, step.out.buffer

        def op():
            env[o] = torch.matmul(fa(), fb())
        return op

    def visit_reshape(self, leaf: Node, step: Step) -> Callable[[], None]:
        n, shape = self.n, tuple(leaf.shape)
        return self.closure(step, lambda x: x.reshape(n, *shape))

    def visit_layernorm(self, leaf: Node, step: Step) -> Callable[[], None]:
        shape = leaf.weight_shape
        w, b = self.weight(leaf, "weight", shape), self.weight(leaf, "bias", shape)
        eps = leaf.eps
        return self.closure(step, lambda x: F.layer_norm(x, shape, w, b, eps))

    def visit_dense(self, leaf: Node, step: Step) -> Callable[[], None]:
        w = self.weight(leaf, "weight", leaf.weight_shape)
        bias = self.weight(leaf, "bias", (leaf.out_features,))
        act = _act_inplace(leaf.act)
        if act is None:
            return self.closure(step, lambda x: F.linear(x, w, bias))
        return self.closure(step, lambda x: act(F.linear(x, w, bias)))

    def visit_constant(self, leaf: Node, step: Step) -> Callable[[], None]:
        c = self.weight(leaf, "weight", leaf.weight_shape)
        if leaf.op_type == "mul":
            return self.closure(step, lambda x: x * c)
        return self.closure(step, lambda x: x + c)

    def visit_prepend(self, leaf: Node, step: Step) -> Callable[[], None]:
        w = self.weight(leaf, "weight", leaf.weight_shape)
        n = self.n
        rows = w.expand(n, *w.shape)
        return self.closure(step, lambda x: torch.cat([rows, x], 1))

    def visit_affine(self, leaf: Node, step: Step) -> Callable[[], None]:
        """The oracle's affine (``x * weight + bias``, then the activation) on the program's weights."""
        c, shape = leaf.channels, (1, *leaf.channel_shape)
        w = self.weight(leaf, "weight", (c,)).view(shape)
        b = self.weight(leaf, "bias", (c,)).view(shape)
        act = kernels.act_fn(leaf.act)
        return self.closure(step, lambda x: act(x * w + b))

    def visit_conv(self, leaf: Node, step: Step) -> Callable[[], None]:
        env, o, get = self.env, step.out.buffer, self.composed(step)
        w = self.weight(leaf, "weight", leaf.weight_shape)
        bias = self.weight(leaf, "bias", (leaf.out_channels,))
        st, pd, dl, gr = leaf.stride, leaf.padding, leaf.dilation, leaf.groups
        conv = torch.conv2d
        if not leaf.symmetric:  # the oracle's convolution (padded first, kernels.pad_input) on the program's weights
            pad, act_fn = kernels.pad_input, kernels.act_fn(leaf.act)

            def padded(x):
                xp, padding = pad(x, leaf)
                return act_fn(conv(xp, w, bias, st, padding, dl, gr))
            return self.closure(step, padded)
        if step.mode == INTO:
            out_view = self.view(step.out)
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

    def visit_pool(self, leaf: Node, step: Step) -> Callable[[], None]:
        if not (leaf.is_global or (leaf.symmetric and leaf.count_include_pad)):
            return self.oracle(leaf, step)
        pt, k_, s_, p_ = leaf.pool_type, leaf.kernel, leaf.stride, leaf.padding
        if pt == "max":
            fn = lambda x: torch.max_pool2d(x, k_, s_, p_)
        elif pt == "avg":
            fn = lambda x: torch.nn.functional.avg_pool2d(x, k_, s_, p_, False, True)
        elif pt == "global_avg":
            fn = lambda x: torch.mean(x, (2, 3), keepdim=True)
        else:
            fn = lambda x: torch.amax(x, (2, 3), keepdim=True)
        return self.closure(step, fn)

    def visit_identity(self, leaf: Node, step: Step) -> Callable[[], None]:
        terms = step.inputs.terms
        if step.mode == INTO and len(terms) == 1 and len(terms[0].slices) == 2:
            # a sum (product) of two values, written straight into the concatenation slice
            out_view = self.view(step.out)
            op2 = torch.mul if step.inputs.op == "mul" else torch.add
            ga, gb = (self.read(sl) for sl in terms[0].slices)
            return lambda: op2(ga(), gb(), out=out_view)
        return self.closure(step, None)

    def visit_relu(self, leaf: Node, step: Step) -> Callable[[], None]:
        return self.closure(step, torch.relu)

    def visit_activation(self, leaf: Node, step: Step) -> Callable[[], None]:
        return self.closure(step, kernels.act_fn(leaf.act_type, leaf.alpha, leaf.beta))

    def visit_flatten(self, leaf: Node, step: Step) -> Callable[[], None]:
        n = self.n
        return self.closure(step, lambda x: x.reshape(n, -1, 1, 1))

    def visit_linear(self, leaf: Node, step: Step) -> Callable[[], None]:
        n = self.n
        w = self.weight(leaf, "weight", leaf.weight_shape)
        bias = self.weight(leaf, "bias", (leaf.out_features,))
        wt = w.t()
        act = _act_inplace(leaf.act)

        def fn(x):
            y = torch.addmm(bias, x.reshape(n, -1), wt)
            if act is not None:
                act(y)
            return y.view(n, -1, 1, 1)
        return self.closure(step, fn)


def computes_in(em: TorchEmitter) -> tuple[str, str | None]:
    """What the emitted program computes in, read back from what it holds: the dtypes of the weights its
    closures were built with and of its arena (``fp32``, ``bf16``; ``mixed`` with a note naming them).
    A program with nothing to read it from (no weight, no arena) says fp32, as the torch adapter does
    for a module without parameters, so a reduced-precision cell fails its check, never mislabelled."""
    names = {v: k for k, v in TorchTensors.DTYPES.items()}
    held = [w.dtype for w in em.weights] + [t.dtype for t in (em.env[k] for k in em.fixed) if t is not None]
    got = sorted({names.get(str(d).replace("torch.", ""), str(d)) for d in held})
    if not got:
        return "fp32", None
    if len(got) == 1:
        return got[0], None
    return "mixed", f"the program holds {', '.join(got)} tensors"


def emit(plan: RuntimePlan, threads: int, random_weights: bool = False, max_workers: int | None = None, seed: int = 0,
         trace: list | None = None, precision: str = "fp32") -> Program:
    """The torch CPU program of ``plan`` with ``threads`` intra-op threads in all. ``trace``, a
    list, receives one record per concurrent task run (stage, task, thread id, intra-op
    threads, start and end ns): the evidence that groups overlap. ``random_weights`` draws
    weights from ``seed`` (the measured cost model times stages without the graph's weights).
    ``precision`` (fp32, bf16): the program's element type (weights, arena, activations; the module
    docstring); ``stats["precision"]`` is what it was built with (:func:`computes_in`)."""
    em = TorchEmitter(plan, random_weights, seed, for_provider("torch", precision))
    stage_tasks: list[list[GroupTask]] = []
    for st in plan.stages:
        tasks = []
        for g in st.groups:
            pairs = [(s.op.name, em.op(s)) for s in g.steps]
            fns = [f for _, f in pairs if f is not None]
            if fns:
                tasks.append(([name for name, f in pairs if f is not None], fns, g.cost))
        stage_tasks.append(tasks)
    program = assemble(plan, em, stage_tasks, threads, max_workers, trace)
    got, note = computes_in(em)
    program.stats["precision"] = got
    if note:
        program.stats["precision_note"] = note
    return program


def build_torch_program(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node],
                        outputs: Sequence[Node], batch_size: int, threads: int, random_weights: bool = False,
                        max_workers: int | None = None, seed: int = 0, trace: list | None = None,
                        precision: str = "fp32") -> Program:
    """Plan ``stages`` (stage -> groups -> schedulable nodes) whose inputs are ``externals``
    (filled by the caller through ``input_slots``, as ``program.tensors.from_numpy`` makes them) and
    emit the torch CPU program at ``precision``; ``outputs`` keep their values after the run
    (``Program.output(name)``). Any provider: :func:`ios_core.runtime.factory.build_program`."""
    return emit(make_plan(stages, externals, outputs, batch_size), threads, random_weights=random_weights,
                max_workers=max_workers, seed=seed, trace=trace, precision=precision)


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


