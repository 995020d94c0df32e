"""Weights where every branch counts, for the import tests (tests/test_import_transformer.py,
tests/test_import_timm.py, tests/test_adapters_timm.py).

The libraries' own initializations hide errors from a check against torch: a layer scale at 1e-6
(ConvNeXt) or a post-norm at 0 (timm's Swin V2) makes a block the identity, and linear weights of
std 0.02 leave each attention's scores near 0 (its softmax near uniform, along either axis) and each
GELU's inputs near 0 (where the erf and tanh forms agree). Seen on the libraries' initializations:
timm's Swin V2 matched torch with the oracle's softmax along the wrong axis, and torchvision's
ConvNeXt, Swin, Swin V2 and MaxViT with the oracle's GELU in the tanh form instead of the erf."""

from __future__ import annotations


def lively(net, seed: int = 2):
    """``net`` with every parameter whose elements all share one value (norm weights and biases, a
    layer scale, zero biases, a logit scale) moved by a seeded 0.2 x N(0, 1), and the linear layers'
    weights drawn at the scale of their inputs (N(0, 1 / fan-in)); in place, returned."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            if p.numel() and bool((p == p.flatten()[0]).all()):
                p.add_(torch.randn(p.shape, generator=gen) * 0.2)
        for m in net.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) / m.in_features ** 0.5)
    return net
