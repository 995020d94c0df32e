"""SqueezeNet 1.0 (Iandola et al.), as torchvision's squeezenet1_0.

Blocks: the stem, one block per fire module (squeeze, then the two expand convolutions in
parallel, concatenated), and the classifier (dropout is an inference no-op).
"""

from ios_core.ir import GraphBuilder
from ios_core.models.registry import register


def fire(b: GraphBuilder, x, squeeze: int, expand: int):
    s = b.conv(x, squeeze, 1)
    e1 = b.conv(s, expand, 1)
    e3 = b.conv(s, expand, 3, padding=1)
    return b.end_block(b.concat([e1, e3]))


@register("squeezenet", "SqueezeNet 1.0 (torchvision squeezenet1_0), 224x224")
def squeezenet(num_classes: int = 1000, image_size: int = 224):
    b = GraphBuilder("squeezenet", (3, image_size, image_size))
    x = b.conv(b.input, 96, 7, stride=2)
    x = b.end_block(b.max_pool(x, 3, 2))
    x = fire(b, x, 16, 64)
    x = fire(b, x, 16, 64)
    x = fire(b, x, 32, 128)
    x = b.end_block(b.max_pool(x, 3, 2))
    x = fire(b, x, 32, 128)
    x = fire(b, x, 48, 192)
    x = fire(b, x, 48, 192)
    x = fire(b, x, 64, 256)
    x = b.end_block(b.max_pool(x, 3, 2))
    x = fire(b, x, 64, 256)
    x = b.conv(x, num_classes, 1)
    b.end_block(b.global_avg_pool(x))
    return b.finish()
