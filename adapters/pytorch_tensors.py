"""The PyTorch adapter's modules for the IR's general-tensor operators (ios_core/ir/tensor_nodes.py):
each computes one operator on a batch, the batch first (``adapters.pytorch.ModuleEmitter`` makes
them; ``layernorm`` and ``dense`` are ``nn.LayerNorm`` and ``nn.Linear`` there)."""

from __future__ import annotations

import torch
import torch.nn as nn

from ios_core.ir import Node


class MatMul(nn.Module):
    def forward(self, x):
        return torch.matmul(x[0], x[1])


class Softmax(nn.Module):
    def __init__(self, node: Node):
        super().__init__()
        self.dim = node.dim + 1

    def forward(self, x):
        return torch.softmax(x, self.dim)


class L2Norm(nn.Module):
    def __init__(self, node: Node):
        super().__init__()
        self.dim, self.eps = node.dim + 1, node.eps

    def forward(self, x):
        return nn.functional.normalize(x, dim=self.dim, eps=self.eps)


class Reshape(nn.Module):
    def __init__(self, node: Node):
        super().__init__()
        self.shape = tuple(node.shape)

    def forward(self, x):
        return x.reshape(x.shape[0], *self.shape)


class Transpose(nn.Module):
    def __init__(self, node: Node):
        super().__init__()
        self.perm = (0, *(p + 1 for p in node.perm))

    def forward(self, x):
        return x.permute(self.perm)


class Constant(nn.Module):
    def __init__(self, node: Node):
        super().__init__()
        self.register_buffer("weight", torch.from_numpy(node.weight.copy()))
        self.mul = node.op_type == "mul"

    def forward(self, x):
        return x * self.weight if self.mul else x + self.weight


class Prepend(nn.Module):
    def __init__(self, node: Node):
        super().__init__()
        self.register_buffer("weight", torch.from_numpy(node.weight.copy())[None])
        self.rows = tuple(node.weight_shape)  # a plain tuple: torch.fx traces the buffer's shape as a proxy

    def forward(self, x):
        return torch.cat([self.weight.expand((x.shape[0], *self.rows)), x], 1)
