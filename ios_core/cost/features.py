"""Features of operators and stages, for the operator dataset and the learned cost model.

One function, :func:`stage_features`, turns a stage (its kind, its groups of IR nodes), a batch
size and a thread budget into a flat dict of numbers. The dataset collector stores these beside
each measured latency and the learned cost model computes the same dict for every stage the
optimizer asks about, so the features exist once.

Operator features follow the op-performance collector of the seed documents: the operator type,
its input and output sizes, channels, kernel, stride, groups, multiply-accumulates and bytes
moved; combination features describe how a stage's work is spread over its concurrent groups
(the runtime gives ``min(groups, threads)`` workers an equal share of the threads, longest group
first); machine features (CPU model, library versions, thread environment) are stored with the
data but are not predictors: a model is fitted for one machine and says which.

The physics enters as a roofline estimate (:func:`roof_terms`): each operator takes
``max(macs / P, bytes / B)``, with ``P`` (multiply-accumulates per ms) and ``B`` (bytes per ms)
the throughputs this machine attains at the stage's thread budget (``ios-bench ops fit``
estimates them from the dataset's single operators and stores them in the model file). A group
takes the sum of its operators; the stage's estimate is the sum over its groups. The learned
model predicts the log of measured / estimate, which varies far less across networks than the
latency itself; the group split (largest group, and the longest-first makespan over the
runtime's workers, both relative to the sum) tells it how much concurrency can hide.
"""

from __future__ import annotations

import math

import numpy as np

from ios_core.ir import Node, leaf_nodes
from ios_core.ir.visitor import OPERATOR_TYPES

F32 = 4
# Every operator type the IR computes (ios_core.ir.visitor.OPERATOR_TYPES, from NODE_TYPES); a
# new type changes the feature vector, and a model fitted before it is refused (refit).
OP_TYPES = OPERATOR_TYPES
CONV_KINDS = ("pointwise", "spatial", "depthwise", "grouped")


def chw(shape) -> tuple[int, int, int]:
    """A value's shape as the features' (channels, height, width): a feature map's own; a general
    tensor's first axis, the product of its middle axes and its last axis ((F,) is (F, 1, 1))."""
    if len(shape) == 3:
        return tuple(shape)
    if len(shape) == 1:
        return (shape[0], 1, 1)
    return (shape[0], math.prod(shape[1:-1]), shape[-1])


def op_bytes(node: Node) -> int:
    """Bytes one image moves through ``node``: its input read, its output written, its weights read."""
    c, h, w = chw(node.input_shape)
    co, ho, wo = chw(node.output_shape)
    weights = sum(int(a.size) for a in node.weights().values()) if node.weights() else node.params()
    return F32 * (c * h * w + co * ho * wo + weights)


def conv_kind(node: Node) -> str:
    if node.groups > 1:
        return "depthwise" if node.groups == node.input_shape[0] else "grouped"
    return "pointwise" if tuple(node.kernel) == (1, 1) else "spatial"


def op_features(node: Node, batch_size: int) -> dict[str, float]:
    """Features of one leaf operator at ``batch_size``."""
    c, h, w = chw(node.input_shape)
    co, ho, wo = chw(node.output_shape)
    f: dict[str, float] = {f"op_{t}": float(node.TYPE == t) for t in OP_TYPES}
    f.update(in_c=c, in_h=h, in_w=w, out_c=co, out_h=ho, out_w=wo,
             in_elems=batch_size * c * h * w, out_elems=batch_size * co * ho * wo,
             terms=len(node.inputs), values=sum(len(t) for t in node.inputs),
             macs=batch_size * node.macs(), bytes=batch_size * op_bytes(node))
    kernel = getattr(node, "kernel", None)
    stride = getattr(node, "stride", None)
    f["kernel"] = float(kernel[0] * kernel[1]) if node.WINDOWED and kernel else 0.0
    f["stride"] = float(stride[0]) if node.WINDOWED and stride else 0.0
    f["conv_groups"] = float(node.groups) if node.TYPE == "conv" else 0.0
    f["dilation"] = float(node.dilation[0]) if node.TYPE == "conv" else 0.0
    for k in CONV_KINDS:
        f[f"conv_{k}"] = float(node.TYPE == "conv" and conv_kind(node) == k)
    f["pool_max"] = float(node.TYPE == "pool" and "max" in node.pool_type)
    f["pool_global"] = float(node.TYPE == "pool" and node.pool_type.startswith("global"))
    return f


def stage_features(kind: str, groups: list[list[Node]], batch_size: int, threads: int) -> dict[str, float]:
    """Features of a stage: the sum of its operators' features, how its work is spread over
    groups and workers, and the thread share each worker gets."""
    return dict(zip(_NAMES, Featurizer(batch_size).stage_vector(kind, groups, threads).tolist()))


class Featurizer:
    """Computes stage feature vectors fast, caching each operator's vector (the learned cost
    model featurizes every stage the optimizer asks about: hundreds of thousands for randwire)."""

    def __init__(self, batch_size: int):
        self.batch_size = batch_size
        self._ops: dict[int, tuple[Node, np.ndarray, float, float]] = {}

    def _op(self, leaf: Node) -> tuple[np.ndarray, float, float]:
        hit = self._ops.get(id(leaf))
        if hit is None or hit[0] is not leaf:
            f = op_features(leaf, self.batch_size)
            vec = np.array([f.get(k, 0.0) for k in _OP_NAMES], dtype=np.float64)
            hit = (leaf, vec, f["macs"], f["bytes"])
            self._ops[id(leaf)] = hit  # the node is kept alive here, so its id is not reused
        return hit[1], hit[2], hit[3]

    def stage_vector(self, kind: str, groups: list[list[Node]], threads: int) -> np.ndarray:
        return self.stage_inputs(kind, groups, threads)[0]

    def stage_inputs(self, kind: str, groups: list[list[Node]], threads: int):
        """(the feature vector, the work of each operator: per group a list of (macs, bytes))."""
        op_sum = np.zeros(len(_OP_NAMES))
        macs, byts, nops, work = [], [], [], []
        for g in groups:
            m = b = 0.0
            k = 0
            ops = []
            for n in g:
                for leaf in leaf_nodes(n):
                    vec, lm, lb = self._op(leaf)
                    op_sum += vec
                    m += lm
                    b += lb
                    k += 1
                    ops.append((lm, lb))
            macs.append(m)
            byts.append(b)
            nops.append(k)
            work.append(ops)
        n = len(groups)
        workers = max(1, min(n, threads))
        total_macs, total_bytes = sum(macs), sum(byts)
        stage = [float(kind == "merge"), float(n), float(sum(nops)), float(threads), float(workers),
                 threads / workers, float(self.batch_size), max(macs), min(macs), max(byts), float(max(nops)),
                 total_macs / threads, (min(macs) + 1.0) / (max(macs) + 1.0), math.log1p(total_macs),
                 math.log1p(total_bytes), total_macs / max(total_bytes, 1.0)]
        return np.concatenate([op_sum, np.array(stage)]), work


def roof_terms(work: list[list[tuple[float, float]]], threads: int, peak: tuple[float, float]) -> list[float]:
    """The roofline estimate of a stage from its operators' work (per group, (macs, bytes) of
    each operator) and the attained throughputs ``peak = (macs per ms, bytes per ms)`` at
    ``threads``: [log of the estimate (ms) with every group run in turn, log(largest group /
    sum), log(longest-first makespan over min(groups, threads) workers / sum)]."""
    p, b = peak
    times = [sum(max(m / p, by / b) for m, by in g) for g in work]
    total = max(sum(times), 1e-9)
    loads = [0.0] * max(1, min(len(times), threads))
    for t in sorted(times, reverse=True):
        loads[loads.index(min(loads))] += t
    return [math.log(total), math.log(max(max(times), 1e-9) / total), math.log(max(max(loads), 1e-9) / total)]


ROOF_NAMES = ["log_roof_ms", "log_roof_largest_share", "log_roof_makespan_share"]


_OP_NAMES = ([f"op_{t}" for t in OP_TYPES]
             + ["in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "in_elems", "out_elems", "terms", "values",
                "macs", "bytes", "kernel", "stride", "conv_groups", "dilation"]
             + [f"conv_{k}" for k in CONV_KINDS] + ["pool_max", "pool_global"])
_STAGE_NAMES = ["merge", "groups", "ops", "threads", "workers", "thread_share", "batch", "max_group_macs",
                "min_group_macs", "max_group_bytes", "max_group_ops", "macs_per_thread", "balance", "log_macs",
                "log_bytes", "arith_intensity"]
_NAMES = _OP_NAMES + _STAGE_NAMES


def attained_peaks(rows) -> tuple[float, float]:
    """``(macs per ms, bytes per ms)`` from single operators measured alone, rows of
    ``(macs, bytes, latency_ms)``: the median throughput of those that multiply (convolutions,
    linear layers) and of those that only move data."""
    rows = [(m, b, ms) for m, b, ms in rows if ms > 0]
    compute = [m / ms for m, b, ms in rows if m > 0]
    memory = [b / ms for m, b, ms in rows if m == 0 and b > 0]
    if not compute or not memory:
        raise ValueError("attained throughput needs single operators that multiply and ones that only move data")
    return float(np.median(compute)), float(np.median(memory))


def feature_names() -> list[str]:
    """The stable order of :func:`stage_features`' keys (the learned model's input columns)."""
    return list(_NAMES)
