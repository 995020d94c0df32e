"""Torch CPU kernels for each IR operator, written plainly: the oracle's building blocks."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F

from ios_core.ir import ActivationMap, Node, OpVisitor
from ios_core.lowering.compose import Primitives, compose


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


# IR activation kind (ios_core.ir.activations) -> (alpha, beta) -> its torch function: the oracle's
# one table of activations, which the torch runtime's activation nodes use too.
TORCH_ACTIVATIONS: ActivationMap = ActivationMap("torch (oracle)", {
    "identity": lambda a, b: _same,
    "relu": lambda a, b: torch.relu,
    "sigmoid": lambda a, b: torch.sigmoid,
    "tanh": lambda a, b: torch.tanh,
    "relu6": lambda a, b: lambda t: torch.clamp(t, 0.0, 6.0),
    "hardswish": lambda a, b: F.hardswish,  # x * relu6(x + 3) / 6
    "silu": lambda a, b: F.silu,  # x * sigmoid(x)
    "gelu": lambda a, b: F.gelu,  # x * (1 + erf(x / sqrt(2))) / 2
    "gelu_tanh": lambda a, b: lambda t: F.gelu(t, approximate="tanh"),
    "leaky_relu": lambda a, b: lambda t: F.leaky_relu(t, a),
    "hardsigmoid": lambda a, b: lambda t: torch.clamp(t * a + b, 0.0, 1.0),
    "clip": lambda a, b: lambda t: torch.clamp(t, a, b),
})


def act_fn(act: str, alpha: float = 0.0, beta: float = 0.0) -> Callable[[torch.Tensor], torch.Tensor]:
    """The torch function of one IR activation (``alpha``/``beta`` for the kinds that read them)."""
    return TORCH_ACTIVATIONS[act](alpha, beta)


def activation(x: torch.Tensor, act: str, alpha: float = 0.0, beta: float = 0.0) -> torch.Tensor:
    """Any IR activation; ``alpha``/``beta`` parametrize leaky_relu, hardsigmoid and clip."""
    return act_fn(act, alpha, beta)(x)


def pad_input(x: torch.Tensor, node: Node, value: float = 0.0) -> tuple[torch.Tensor, tuple[int, int]]:
    """``x`` padded for a windowed node: symmetric padding is left to the kernel (returned as
    its ``padding``), asymmetric padding is applied here with ``value``."""
    if node.symmetric:
        return x, tuple(node.padding)
    top, left, bottom, right = node.pads
    return F.pad(x, (left, right, top, bottom), value=value), (0, 0)


def pool(x: torch.Tensor, node: Node) -> torch.Tensor:
    """A non-global max or average pool with the IR's padding semantics."""
    if node.pool_type == "max":
        if node.symmetric and 2 * max(node.padding) <= min(node.kernel):
            return F.max_pool2d(x, node.kernel, node.stride, node.padding)
        top, left, bottom, right = node.pads
        return F.max_pool2d(F.pad(x, (left, right, top, bottom), value=float("-inf")), node.kernel, node.stride)
    if node.count_include_pad:
        xp, padding = pad_input(x, node)
        if 2 * max(padding) > min(node.kernel):
            top, left, bottom, right = node.pads
            xp, padding = F.pad(x, (left, right, top, bottom)), (0, 0)
        return F.avg_pool2d(xp, node.kernel, node.stride, padding, count_include_pad=True)
    # the average over the input positions only: window sums over window counts
    top, left, bottom, right = node.pads
    pads = (left, right, top, bottom)
    ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    sums = F.avg_pool2d(F.pad(x, pads), node.kernel, node.stride)
    counts = F.avg_pool2d(F.pad(ones, pads), node.kernel, node.stride)
    return sums / counts


def shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    n, c, h, w = x.shape
    return x.reshape(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


def resize(x: torch.Tensor, node: Node) -> torch.Tensor:
    if node.mode == "nearest":
        return F.interpolate(x, size=tuple(node.size), mode="nearest")
    return F.interpolate(x, size=tuple(node.size), mode="bilinear", align_corners=node.align_corners)

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


class OracleKernels(OpVisitor):
    """The oracle's kernel of each operator type: ``visit(node, x)`` applies one
    (non-Sequential) operator to its composed input ``x`` (NCHW, float32)."""

    ACTIVATIONS = TORCH_ACTIVATIONS

    def visit_conv(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        x, padding = pad_input(x, node)
        y = F.conv2d(x, torch.from_numpy(node.weight), torch.from_numpy(node.bias), node.stride, padding,
                     node.dilation, node.groups)
        return act_fn(node.act)(y)

    def visit_pool(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        if node.pool_type == "global_avg":
            return x.mean(dim=(2, 3), keepdim=True)
        if node.pool_type == "global_max":
            return x.amax(dim=(2, 3), keepdim=True)
        return pool(x, node)

    def visit_identity(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return x

    def visit_relu(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

    def visit_activation(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return activation(x, node.act_type, node.alpha, node.beta)

    def visit_affine(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        shape = (1, *node.channel_shape)
        y = x * torch.from_numpy(node.weight).view(shape) + torch.from_numpy(node.bias).view(shape)
        return act_fn(node.act)(y)

    def visit_shuffle(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return shuffle(x, node.groups)

    def visit_resize(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return resize(x, node)

    def visit_flatten(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1, 1, 1)

    def visit_linear(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x.reshape(x.shape[0], -1), torch.from_numpy(node.weight), torch.from_numpy(node.bias))
        return act_fn(node.act)(y).reshape(x.shape[0], -1, 1, 1)

    # ---- general tensors (ios_core.ir.tensor_nodes): x is (N, *shape) ------------------------------
    def visit_matmul(self, node: Node, x: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return torch.matmul(*x)

    def visit_softmax(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, node.dim + 1)

    def visit_l2norm(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        norm = torch.linalg.vector_norm(x, dim=node.dim + 1, keepdim=True)
        return x / torch.clamp(norm, min=node.eps)

    def visit_layernorm(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, node.weight_shape, torch.from_numpy(node.weight), torch.from_numpy(node.bias),
                            node.eps)

    def visit_dense(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return act_fn(node.act)(F.linear(x, torch.from_numpy(node.weight), torch.from_numpy(node.bias)))

    def visit_reshape(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], *node.shape)

    def visit_transpose(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, *(p + 1 for p in node.perm))

    def visit_constant(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        c = torch.from_numpy(node.weight)
        return x * c if node.op_type == "mul" else x + c

    def visit_prepend(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        w = torch.from_numpy(node.weight).to(x.dtype)
        return torch.cat([w.expand(x.shape[0], *w.shape), x], 1)


ORACLE_KERNELS = OracleKernels()


def apply(node: Node, x: torch.Tensor) -> torch.Tensor:
    """Apply one (non-Sequential) operator to its composed input ``x`` (NCHW, float32)."""
    return ORACLE_KERNELS.visit(node, x)
