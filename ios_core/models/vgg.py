"""VGG-11/13/16/19 (Simonyan & Zisserman, configurations A/B/D/E), torchvision's ``vgg11`` ...
``vgg19`` (without batch normalisation) at 224x224.

torchvision applies ``AdaptiveAvgPool2d((7, 7))`` before the classifier; at a 224x224 input the
feature map is already 7x7, so that pool is the identity and is left out (``image_size`` must
therefore be 224 for the classifier to match torchvision's 25088 input features; other sizes
build a network whose first linear layer has a different width). Dropout is an inference no-op.

Blocks: one block per convolution stage (its convolutions and the max pool), then the
classifier (flatten and three linear layers).
"""

from ios_core.ir import GraphBuilder
from ios_core.models.registry import register

CONFIGS = {
    "vgg11": (1, 1, 2, 2, 2),
    "vgg13": (2, 2, 2, 2, 2),
    "vgg16": (2, 2, 3, 3, 3),
    "vgg19": (2, 2, 4, 4, 4),
}


def _vgg(name: str, num_classes: int, image_size: int):
    b = GraphBuilder(name, (3, image_size, image_size))
    x = b.input
    for channels, count in zip((64, 128, 256, 512, 512), CONFIGS[name]):
        for _ in range(count):
            x = b.conv(x, channels, 3, padding=1)
        x = b.end_block(b.max_pool(x, 2, 2))
    x = b.flatten(x)
    x = b.linear(x, 4096, act="relu")
    x = b.linear(x, 4096, act="relu")
    b.end_block(b.linear(x, num_classes))
    return b.finish()


def _register(name: str):
    letter = {"vgg11": "A", "vgg13": "B", "vgg16": "D", "vgg19": "E"}[name]

    @register(name, f"VGG-{name[3:]} (torchvision, cfg {letter}), 224x224")
    def build(num_classes: int = 1000, image_size: int = 224):
        return _vgg(name, num_classes, image_size)

    build.__name__ = name
    return build


vgg11 = _register("vgg11")
vgg13 = _register("vgg13")
vgg16 = _register("vgg16")
vgg19 = _register("vgg19")
