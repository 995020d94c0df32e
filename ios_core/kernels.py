"""Torch CPU kernels for each IR operator, written plainly: the oracle's building blocks."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F

from .ir import Node, Value

ACT_FN: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": lambda t: t,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def gather_input(node: Node, outputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Compose a node's input: each term's channel slices summed (multiplied for element
    mul), the terms concatenated along channels."""
    mul = node.TYPE == "element" and node.op_type == "mul"
    terms = []
    for term in node.inputs:
        acc = None
        for v in term:
            t = _slice(outputs[v.node.name], v)
            acc = t if acc is None else (acc * t if mul else acc + t)
        terms.append(acc)
    return terms[0] if len(terms) == 1 else torch.cat(terms, dim=1)


def _slice(t: torch.Tensor, v: Value) -> torch.Tensor:
    if v.begin == 0 and v.end == t.shape[1]:
        return t
    return t[:, v.begin:v.end]


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
