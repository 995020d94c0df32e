"""The numerical oracle: a plain sequential evaluation of a graph with torch CPU ops.

Every runtime, schedule and adapter is checked against :func:`run`. It walks the graph in
order, node by node (the oracle's order: :func:`ios_core.lowering.schedulable_nodes`), composes
each operator's input with plain torch primitives (``ios_core.kernels.TORCH_PRIMS``) and applies
it with ``ios_core.kernels.apply``; it ignores any schedule the graph carries.

Two things keep its memory bounded; neither changes a value:

* **Liveness.** Each value is dropped after its last reader. The lifetimes are the runtime
  plan's (:func:`ios_core.runtime.passes.make_plan` on one stage per node, with
  ``into_concat=False`` so that every operator's output is a tensor of its own, as in the
  plain walk): a buffer is dropped after stage ``Buffer.end``; the exit node's is kept.
* **Chunks of images.** Every IR operator is per-image (no operator mixes images of a batch),
  so a batch is evaluated in chunks of at most :func:`chunk_size` images, each chunk's output
  written into its rows of the result. The chunk size comes from the plan's per-image
  activation footprint (:func:`activation_bytes`: the largest sum of live buffers at any stage,
  at batch 1) and :data:`MEMORY_BUDGET` (bytes of live activations one chunk may plan for):
  ``max(1, MEMORY_BUDGET // activation_bytes(graph))``. Kernels' transient buffers (padded
  inputs, summed terms before a concatenation, oneDNN scratch) come on top.

Chunking is exact in the values computed per image, but a kernel may pick a different
algorithm (summation order) for a different batch size, so a chunked batch can differ from the
same batch evaluated whole in the last bits; see tests/test_reference.py and
benchmarks/bench_reference_memory.py for what was measured. :func:`run_plain` is the walk that
keeps every value and evaluates the batch whole (the oracle before chunking and liveness).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from ios_core.inputs import random_input  # noqa: F401 - the seeded input, here with the oracle
from ios_core.ir import Graph
from ios_core.kernels import TORCH_PRIMS, apply
from ios_core.lowering import check_supported, evaluate, lower, schedulable_nodes

if TYPE_CHECKING:  # the runtime package is imported when a plan is made, not with the oracle
    from ios_core.runtime.plan import RuntimePlan

# Bytes of live activations (as the plan counts them) one chunk of images may use. With it the
# nasnet reference at batch 32 peaks under 2.5 GB of resident memory (weights and the Python
# process included); see benchmarks/bench_reference_memory.py.
MEMORY_BUDGET = 512 * 2**20


def _check(graph: Graph, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if tuple(x.shape[1:]) != graph.input_shape:
        raise ValueError(f"input shape {tuple(x.shape[1:])} != graph input {graph.input_shape}")
    if not graph.has_weights:
        raise ValueError(f"graph {graph.name!r} has no weights: call graph.init_weights(seed)")
    return x


def plan(graph: Graph) -> RuntimePlan:
    """The oracle's plan: one stage per schedulable node in the oracle's order, every operator
    computing a tensor of its own (no producer writes into a concatenation), at batch 1 (the
    stages and lifetimes do not depend on the batch)."""
    from ios_core.runtime.passes import make_plan

    check_supported(graph.operators(), f"graph {graph.name!r}")
    stages = [[[node]] for node in schedulable_nodes(graph)]
    return make_plan(stages, [graph.input], [graph.exit_node], 1, arena_kinds=(), into_concat=False)


def activation_bytes(graph: Graph, p: RuntimePlan | None = None) -> int:
    """Per-image activation footprint: the largest sum of the bytes of the buffers live at
    one stage of :func:`plan` (the input and the kept output included), at batch 1."""
    p = p or plan(graph)
    n = len(p.stages)
    delta = [0] * (n + 2)
    for b in p.buffers:
        delta[max(b.start, 0)] += b.nbytes
        delta[min(b.end, n) + 1] -= b.nbytes
    peak = live = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def chunk_size(graph: Graph, budget: int | None = None, p: RuntimePlan | None = None) -> int:
    """Images per chunk: ``max(1, budget // activation_bytes(graph))``, ``budget`` defaulting
    to :data:`MEMORY_BUDGET`."""
    budget = MEMORY_BUDGET if budget is None else budget
    return max(1, int(budget) // max(1, activation_bytes(graph, p)))


def _evaluate(p: RuntimePlan, x: torch.Tensor, emit=None) -> torch.Tensor:
    """One chunk through the plan: each step computed from the tensors it reads (``emit(op, input)``,
    the oracle's kernels unless told otherwise), each buffer dropped after its last stage."""
    from ios_core.runtime.plan import ALIAS

    emit = emit or apply  # looked up at the call: a test may wrap the module's apply
    drop: list[list[int]] = [[] for _ in p.stages]
    for b in p.buffers:
        if not b.kept and 0 <= b.end < len(p.stages):
            drop[b.end].append(b.index)
    env: dict[int, torch.Tensor] = {p.value(x_node).buffer: x for x_node in p.externals}

    def read(s):
        ref = p.read(s)
        t = env[ref.buffer]
        return t if ref.whole else TORCH_PRIMS.slice_channels(t, ref.begin, ref.end)

    for si, st in enumerate(p.stages):
        for g in st.groups:
            for step in g.steps:
                if step.mode != ALIAS:  # an alias's value is its source's tensor
                    env[step.out.buffer] = emit(step.op, evaluate(step.inputs, read, TORCH_PRIMS))
        for k in drop[si]:
            env.pop(k, None)
    out = p.value(p.outputs[0])
    t = env[out.buffer]
    return t if out.whole else t[:, out.begin:out.end]


def run_chunked(graph: Graph, x: np.ndarray, chunk: int) -> np.ndarray:
    """:func:`run` with ``chunk`` images per chunk (``chunk >= 1``)."""
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    x = _check(graph, x)
    return _run(plan(graph), x, chunk)


def run(graph: Graph, x: np.ndarray) -> np.ndarray:
    """Evaluate ``graph`` on ``x`` (N, C, H, W) float32 and return the exit node's output,
    in chunks of :func:`chunk_size` images, each value dropped after its last reader."""
    x = _check(graph, x)
    p = plan(graph)
    return _run(p, x, chunk_size(graph, p=p))


def _run(p: RuntimePlan, x: np.ndarray, chunk: int, emit=None) -> np.ndarray:
    n = x.shape[0]
    out = None
    with torch.inference_mode():
        for i in range(0, max(n, 1), chunk):  # an empty batch runs once, as a batch of none
            y = _evaluate(p, torch.from_numpy(x[i:i + chunk]), emit)
            if out is None:
                out = np.empty((n, *y.shape[1:]), dtype=np.float32)
            out[i:i + chunk] = y.contiguous().numpy()
            del y
    return out


def run_plain(graph: Graph, x: np.ndarray) -> np.ndarray:
    """The walk keeping every value, the batch whole (:func:`ios_core.lowering.lower`): what
    :func:`run` was before liveness and chunks; tests and the memory benchmark compare with it."""
    x = _check(graph, x)
    with torch.inference_mode():
        out = lower(graph, torch.from_numpy(x), TORCH_PRIMS, apply)
        return out.contiguous().numpy().copy()


# The oracle's int8: the same walk with the network quantized as post-training static int8 quantization
# quantizes it, in its plainest form and no further: every convolution and linear layer (``conv``, ``linear``,
# ``dense``) reads int8 weights (symmetric, per output channel: scale = the channel's largest magnitude / 127)
# and an int8 input (per tensor, 256 levels over the [min, max] the calibration inputs give it, 0 included:
# asymmetric, as u8 with a zero point); every other operator computes in float, as the frameworks' transformer
# recipes keep attention, softmax and normalizations (a CNN's framework also quantizes pools, sums and
# concatenations: a little more error than this). It tells how far a correct int8 quantization of *this*
# network, calibrated on *these* inputs, is from the float oracle: what ``ios_core.check`` measures an int8
# cell's error against (docs/precision.md).
INT8_SIM_WEIGHTED = ("conv", "linear", "dense")
INT8_SIM_LEVELS = 256


def _fake_quant_weight(w: np.ndarray) -> np.ndarray:
    """``w`` (output channels first) on its symmetric int8 grid per output channel: -127..127 steps of the
    channel's largest magnitude / 127 (an all-zero channel stays zero)."""
    w = np.asarray(w, np.float32)
    scale = np.abs(w).max(axis=tuple(range(1, w.ndim)), keepdims=True) / 127.0
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    return (np.round(w / scale) * scale).astype(np.float32)  # |w| / scale <= 127 by construction


def _fake_quant(t: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    step = (hi - lo) / (INT8_SIM_LEVELS - 1) or 1.0
    zero = round(-lo / step)
    return (torch.clamp(torch.round(t / step) + zero, 0, INT8_SIM_LEVELS - 1) - zero) * step


def int8_simulation(graph: Graph, calibration):
    """The oracle of ``graph`` quantized to int8 as above, its inputs' ranges calibrated on the batches
    ``calibration`` (``ios_core.quantize.calibration_feeds``: what the int8 cells calibrate on): a function
    of a batch ``x`` (N, C, H, W) returning the quantized network's output, as :func:`run` returns the
    float network's."""
    import copy

    p = plan(graph)
    chunk = chunk_size(graph, p=p)
    ranges: dict[str, tuple[float, float]] = {}

    def calibrating(op, inp):
        if op.TYPE in INT8_SIM_WEIGHTED:
            lo, hi = (float(v) for v in torch.aminmax(inp))
            a, b = ranges.get(op.name, (lo, hi))
            ranges[op.name] = (min(a, lo), max(b, hi))
        return apply(op, inp)

    # the ranges are each input's min and max over every calibration sample: the batches are run as one, in
    # the oracle's chunks (every operator is per image)
    _run(p, np.concatenate([_check(graph, b) for b in calibration]), chunk, calibrating)
    quantized = {}
    for op in graph.operators():
        if op.name in ranges:
            quantized[op.name] = q = copy.copy(op)  # the graph's own node keeps its float weight
            q.weight = _fake_quant_weight(op.weight)

    def simulated(op, inp):
        if op.name in quantized:
            return apply(quantized[op.name], _fake_quant(inp, *ranges[op.name]))
        return apply(op, inp)

    return lambda x: _run(p, _check(graph, x), chunk, simulated)
