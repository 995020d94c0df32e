"""PyTorch adapters: ``torch`` (eager) and ``torch-compile`` (``torch.compile``, inductor on CPU).

The IOS graph becomes an ``nn.Module`` (``nn.Conv2d`` with its fused activation, pools, slices,
sums, concatenations, ``nn.Linear``) holding copies of the graph's weights, then is traced
with ``torch.fx`` into straight-line code (no interpretation overhead per call, and a code
object of its own, so ``torch.compile`` never shares its recompile budget between graphs).
Runs under ``torch.inference_mode``; input and output are NCHW float32 like the oracle.

``torch.compile`` machinery (dynamo, inductor) is imported only when a ``torch-compile``
program is built; compilation happens inside ``build`` (the first calls), so the recorded
``compile_seconds`` is separate from the measured latency.
"""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
import torch
import torch.fx
import torch.nn as nn

from ios_core.ir import Graph, Node
from ios_core.kernels import TORCH_PRIMS
from ios_core.lowering import lower
from ios_core.threads import resolve_threads

from .base import Adapter, Compiled


def _act_module(act: str) -> nn.Module:
    return {"identity": nn.Identity, "relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}[act]()


class _Flatten(nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1)[:, :, None, None]


class _Linear(nn.Module):
    def __init__(self, linear: nn.Linear, act: nn.Module):
        super().__init__()
        self.linear, self.act = linear, act

    def forward(self, x):
        return self.act(self.linear(torch.flatten(x, 1)))[:, :, None, None]


def _op_module(node: Node) -> nn.Module:
    """An ``nn.Module`` computing one (non-Sequential) operator from its composed input."""
    kind = node.TYPE
    if kind == "conv":
        conv = nn.Conv2d(node.input_shape[0], node.out_channels, node.kernel, node.stride, node.padding,
                         node.dilation, node.groups, bias=True)
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(node.weight))
            conv.bias.copy_(torch.from_numpy(node.bias))
        return nn.Sequential(conv, _act_module(node.act)) if node.act != "identity" else conv
    if kind == "pool":
        if node.pool_type == "max":
            return nn.MaxPool2d(node.kernel, node.stride, node.padding)
        if node.pool_type == "avg":  # the IR's average counts padding (cuDNN INCLUDE_PADDING)
            return nn.AvgPool2d(node.kernel, node.stride, node.padding, count_include_pad=True)
        if node.pool_type == "global_avg":
            return nn.AdaptiveAvgPool2d(1)
        return nn.AdaptiveMaxPool2d(1)
    if kind in ("identity", "element"):
        return nn.Identity()
    if kind in ("relu", "activation"):
        return _act_module(node.act_type)
    if kind == "flatten":
        return _Flatten()
    if kind == "linear":
        lin = nn.Linear(node.in_features, node.out_features, bias=True)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(node.weight))
            lin.bias.copy_(torch.from_numpy(node.bias))
        return _Linear(lin, _act_module(node.act))
    raise NotImplementedError(f"torch adapter: no conversion for node type {kind!r}")


class GraphModule(nn.Module):
    """The whole graph; ``forward`` walks it (``to_module`` traces it once into plain code)."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph
        self.keys: dict[str, str] = {}
        self.ops = nn.ModuleDict()
        for i, op in enumerate(graph.operators()):
            self.keys[op.name] = f"op{i}"
            self.ops[f"op{i}"] = _op_module(op)

    def forward(self, x):
        return lower(self.graph, x, TORCH_PRIMS, lambda op, t: self.ops[self.keys[op.name]](t))


def to_module(graph: Graph) -> torch.fx.GraphModule:
    """The graph as a ``torch.fx.GraphModule`` (eval mode) holding copies of its weights."""
    traced = torch.fx.symbolic_trace(GraphModule(graph).eval())
    traced.eval()
    return traced


def _set_threads(threads: int, inter_op: int | None) -> dict:

    torch.set_num_threads(threads)
    info = {}
    if inter_op is not None:
        try:
            torch.set_num_interop_threads(int(inter_op))
        except RuntimeError as e:  # may only be set once, before any inter-op work
            info["inter_op_threads_note"] = str(e).splitlines()[0]
    info.update(intra_op_threads=torch.get_num_threads(), inter_op_threads=torch.get_num_interop_threads())
    return info


class TorchCompiled(Compiled):
    def __init__(self, fn, info):
        super().__init__(info)
        self.fn = fn

    def prepare(self, x: np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))

    def execute(self, prepared):
        with torch.inference_mode():
            return self.fn(prepared)

    def finish(self, out) -> np.ndarray:
        return out.detach().contiguous().numpy().copy()


class TorchEager(Adapter):
    def _build(self, graph, batch_size, device, threads, inter_op_threads=None):
        import torch

        n = resolve_threads(threads)
        info = {"threads": n, **_set_threads(n, inter_op_threads), "framework_version": torch.__version__}
        t0 = time.perf_counter()
        module = to_module(graph)
        info["convert_seconds"] = time.perf_counter() - t0
        return TorchCompiled(module, info)


class TorchCompile(Adapter):
    """``torch.compile`` with the inductor backend (``mode`` and ``dynamic`` options passed on)."""

    def available(self, device: str = "cpu") -> str | None:
        reason = super().available(device)
        if reason is not None:
            return reason
        cxx = os.environ.get("CXX") or next((c for c in ("g++", "c++", "clang++") if shutil.which(c)), None)
        if cxx is None or shutil.which(cxx) is None:
            return "torch.compile's inductor backend needs a C++ compiler on CPU (none found; set CXX)"
        return None

    def _build(self, graph, batch_size, device, threads, inter_op_threads=None, mode=None, backend="inductor",
               dynamic=False):
        import torch

        n = resolve_threads(threads)
        # Set before compiling: inductor's generated C++ bakes in the OpenMP thread count.
        info = {"threads": n, **_set_threads(n, inter_op_threads), "framework_version": torch.__version__,
                "backend": backend, "mode": mode or "default"}
        t0 = time.perf_counter()
        module = to_module(graph)
        fn = torch.compile(module, backend=backend, mode=mode, dynamic=dynamic)
        x = torch.zeros((batch_size, *graph.input_shape), dtype=torch.float32)
        with torch.inference_mode():
            fn(x)  # compiles
            t1 = time.perf_counter()
            fn(x)  # a second call catches any recompilation (guards) before timing starts
        info["compile_seconds"] = t1 - t0
        info["second_call_seconds"] = time.perf_counter() - t1
        return TorchCompiled(fn, info)


EAGER = TorchEager(
    name="torch",
    description="PyTorch eager (nn.Module traced by torch.fx, inference_mode), NCHW",
    requires=("torch",),
    tolerance=1e-4,
)

COMPILE = TorchCompile(
    name="torch-compile",
    description="torch.compile, inductor backend on CPU; compile time recorded apart from latency",
    requires=("torch",),
    tolerance=1e-3,
)
