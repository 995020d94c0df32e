"""ConvNeXt (Liu et al. 2022), torchvision's ``convnext_tiny`` layout.

A block is a 7x7 depthwise convolution, then, per pixel, a layer norm over the channels and an
MLP (``dense`` 4C with the erf GELU, ``dense`` C): the IR takes the (C, H, W) map to (H, W, C)
and back with ``transpose`` nodes around them, as torchvision permutes. A learned per-channel
layer scale (``constant`` mul of shape (C, 1, 1)) precedes the residual sum. Stages of 3, 3, 9
and 3 blocks at 96, 192, 384 and 768 channels; the stem is a 4x4 stride-4 convolution and a
channels-first layer norm, each downsampling a channels-first layer norm and a 2x2 stride-2
convolution; the classifier a global average pool, a layer norm and a linear layer.

Blocks: the stem, one block per ConvNeXt block (a downsampling is the start of the next block),
and the classifier.
"""

from ios_core.ir import Graph, GraphBuilder, Value
from ios_core.models.registry import register


def channel_norm(b: GraphBuilder, x: Value) -> Value:
    """A layer norm over the channels of a (C, H, W) map (torchvision's ``LayerNorm2d``)."""
    return b.transpose(b.layernorm(b.transpose(x, (1, 2, 0)), eps=1e-6), (2, 0, 1))


def block(b: GraphBuilder, x: Value) -> Value:
    """One ConvNeXt block on ``x`` (C, H, W), ended as a block."""
    c = x.length
    y = b.conv(x, c, 7, padding=3, groups=c, act="identity")
    y = b.layernorm(b.transpose(y, (1, 2, 0)), eps=1e-6)  # H, W, C
    y = b.dense(b.dense(y, 4 * c, act="gelu"), c)
    y = b.constant(b.transpose(y, (2, 0, 1)), (c, 1, 1), "mul")  # the layer scale
    return b.end_block(b.add([x, y]))


def convnext(name: str = "convnext", image: int = 224, depths=(3, 3, 9, 3), dims=(96, 192, 384, 768),
             num_classes: int = 1000, channels: int = 3) -> Graph:
    b = GraphBuilder(name, (channels, image, image))
    x = b.end_block(channel_norm(b, b.conv(b.input, dims[0], 4, stride=4, act="identity")))
    for stage, (depth, dim) in enumerate(zip(depths, dims)):
        if stage:
            x = b.conv(channel_norm(b, x), dim, 2, stride=2, act="identity")
        for _ in range(depth):
            x = block(b, x)
    x = channel_norm(b, b.global_avg_pool(x))
    b.end_block(b.linear(x, num_classes))
    return b.finish()


@register("convnext_tiny", "ConvNeXt-T (224x224, stages 3-3-9-3 at 96-192-384-768 channels); "
          "run when named, not in --models all", in_all=False)
def convnext_tiny(num_classes: int = 1000, image_size: int = 224) -> Graph:
    return convnext("convnext_tiny", image=image_size, num_classes=num_classes)
