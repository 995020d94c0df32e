"""Weights where every branch counts, for the import tests (tests/test_import_transformer.py,
tests/test_import_timm.py, tests/test_adapters_timm.py).

The libraries' own initializations hide errors from a check against torch: a layer scale at 1e-6
(ConvNeXt) or a post-norm at 0 (timm's Swin V2) makes a block the identity, and linear (or 1x1
convolution) weights of std 0.02 leave each attention's scores near 0 (its softmax near uniform,
along either axis) and each GELU's inputs near 0 (where the erf and tanh forms agree). Seen on the
libraries' initializations: timm's Swin V2 matched torch with the oracle's softmax along the wrong
axis; torchvision's ConvNeXt, Swin, Swin V2 and MaxViT, and timm's ConvNeXt with its MLP as 1x1
convolutions, with the oracle's GELU in the tanh form instead of the erf."""

from __future__ import annotations


def lively(net, seed: int = 2):
    """``net`` with every parameter whose elements all share one value (norm weights and biases, a
    layer scale, zero biases, a logit scale) moved by a seeded 0.2 x N(0, 1), and the linear and
    convolution layers' weights drawn at the scale of their inputs (N(0, 1 / fan-in)); in place,
    returned."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            if p.numel() and bool((p == p.flatten()[0]).all()):
                p.add_(torch.randn(p.shape, generator=gen) * 0.2)
        for m in net.modules():  # a 1x1 conv is a linear layer too (timm's ConvNeXt with conv_mlp)
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d)):
                fan_in = m.weight[0].numel()  # in_features, or in_channels / groups x the kernel's size
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) / fan_in ** 0.5)
    return net
