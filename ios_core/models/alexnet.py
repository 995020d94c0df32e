"""AlexNet, torchvision's ``alexnet`` (the one-GPU variant of Krizhevsky's "one weird trick"
paper) at 224x224.

torchvision applies ``AdaptiveAvgPool2d((6, 6))`` before the classifier; at a 224x224 input the
feature map is already 6x6, so that pool is the identity and is left out. Dropout is an
inference no-op.

Blocks: conv1 + pool, conv2 + pool, conv3-5 + pool, the classifier (flatten, three linear).
"""

from ios_core.ir import GraphBuilder
from ios_core.models.registry import register


@register("alexnet", "AlexNet (torchvision), 224x224")
def alexnet(num_classes: int = 1000, image_size: int = 224):
    b = GraphBuilder("alexnet", (3, image_size, image_size))
    x = b.conv(b.input, 64, 11, stride=4, padding=2)
    x = b.end_block(b.max_pool(x, 3, 2))
    x = b.conv(x, 192, 5, padding=2)
    x = b.end_block(b.max_pool(x, 3, 2))
    x = b.conv(x, 384, 3, padding=1)
    x = b.conv(x, 256, 3, padding=1)
    x = b.conv(x, 256, 3, padding=1)
    x = b.end_block(b.max_pool(x, 3, 2))
    x = b.flatten(x)
    x = b.linear(x, 4096, act="relu")
    x = b.linear(x, 4096, act="relu")
    b.end_block(b.linear(x, num_classes))
    return b.finish()
