"""Torch CPU kernels for each IR operator, written plainly: the oracle's building blocks."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F

from .ir import Node
from .lowering.compose import Primitives, compose

ACT_FN: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": lambda t: t,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


# How the oracle composes inputs (``ios_core.lowering.compose``): slices are views, values
# summed (multiplied) left to right, terms concatenated along channels.
TORCH_PRIMS = Primitives(
    slice_channels=lambda t, b, e: t[:, b:e],
    add=lambda ts: functools.reduce(operator.add, ts),
    mul=lambda ts: functools.reduce(operator.mul, ts),
    concat=lambda ts: torch.cat(ts, 1),
)


def gather_input(node: Node, outputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """A node's composed input from computed outputs (node name -> tensor)."""
    return compose(node, outputs, TORCH_PRIMS)


def apply(node: Node, x: torch.Tensor) -> torch.Tensor:
    """Apply one (non-Sequential) operator to its composed input ``x`` (NCHW, float32)."""
    kind = node.TYPE
    if kind == "conv":
        y = F.conv2d(x, torch.from_numpy(node.weight), torch.from_numpy(node.bias), node.stride, node.padding,
                     node.dilation, node.groups)
        return ACT_FN[node.act](y)
    if kind == "pool":
        if node.pool_type == "max":
            return F.max_pool2d(x, node.kernel, node.stride, node.padding)
        if node.pool_type == "avg":
            return F.avg_pool2d(x, node.kernel, node.stride, node.padding, count_include_pad=True)
        if node.pool_type == "global_avg":
            return x.mean(dim=(2, 3), keepdim=True)
        return x.amax(dim=(2, 3), keepdim=True)
    if kind in ("identity", "element"):
        return x
    if kind in ("relu", "activation"):
        return ACT_FN[node.act_type](x)
    if kind == "flatten":
        return x.reshape(x.shape[0], -1, 1, 1)
    if kind == "linear":
        y = F.linear(x.reshape(x.shape[0], -1), torch.from_numpy(node.weight), torch.from_numpy(node.bias))
        return ACT_FN[node.act](y).reshape(x.shape[0], -1, 1, 1)
    raise NotImplementedError(f"no kernel for node type {kind!r}")
