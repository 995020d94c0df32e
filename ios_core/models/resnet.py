"""ResNet-18/34/50 (He et al.), torchvision's architectures at 224x224.

Batch normalisation is folded into each convolution's bias (torchvision's convolutions have no
bias; each BN contributes a scale and a shift), so the parameter count is lower by one value per
BN channel. ResNet-50 is torchvision's "v1.5" bottleneck (stride on the 3x3 convolution).

Blocks: the stem (7x7 convolution and max pool), one block per residual block (the projection
shortcut, where there is one, runs beside the residual branch), and the classifier (global
average pool and the linear layer). The residual sum and its ReLU are one ``relu`` node whose
single input term sums the branch and the shortcut, as the IR's terms allow.
"""

from ios_core.ir import GraphBuilder
from ios_core.models.registry import register


def _basic(b: GraphBuilder, x, channels: int, stride: int):
    in_channels = x.length
    shortcut = x
    if stride != 1 or in_channels != channels:
        shortcut = b.conv(x, channels, 1, stride=stride, act="identity")
    y = b.conv(x, channels, 3, stride=stride, padding=1)
    y = b.conv(y, channels, 3, padding=1, act="identity")
    return b.end_block(b.relu([[y, shortcut]]))


def _bottleneck(b: GraphBuilder, x, channels: int, stride: int):
    out_channels = channels * 4
    shortcut = x
    if stride != 1 or x.length != out_channels:
        shortcut = b.conv(x, out_channels, 1, stride=stride, act="identity")
    y = b.conv(x, channels, 1)
    y = b.conv(y, channels, 3, stride=stride, padding=1)
    y = b.conv(y, out_channels, 1, act="identity")
    return b.end_block(b.relu([[y, shortcut]]))


def _resnet(name: str, unit, layers, num_classes: int, image_size: int):
    b = GraphBuilder(name, (3, image_size, image_size))
    x = b.conv(b.input, 64, 7, stride=2, padding=3)
    x = b.end_block(b.max_pool(x, 3, 2, padding=1))
    for stage, (channels, count) in enumerate(zip((64, 128, 256, 512), layers)):
        for i in range(count):
            x = unit(b, x, channels, 2 if (stage > 0 and i == 0) else 1)
    x = b.global_avg_pool(x)
    b.end_block(b.linear(x, num_classes))
    return b.finish()


@register("resnet18", "ResNet-18 (torchvision), 224x224")
def resnet18(num_classes: int = 1000, image_size: int = 224):
    return _resnet("resnet18", _basic, (2, 2, 2, 2), num_classes, image_size)


@register("resnet34", "ResNet-34 (torchvision), 224x224")
def resnet34(num_classes: int = 1000, image_size: int = 224):
    return _resnet("resnet34", _basic, (3, 4, 6, 3), num_classes, image_size)


@register("resnet50", "ResNet-50 (torchvision), 224x224")
def resnet50(num_classes: int = 1000, image_size: int = 224):
    return _resnet("resnet50", _bottleneck, (3, 4, 6, 3), num_classes, image_size)
