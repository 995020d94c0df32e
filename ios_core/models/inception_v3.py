"""Inception v3 (Szegedy et al.), torchvision's ``inception_v3`` architecture at 299x299.

Differences from torchvision, all intended:

* no auxiliary classifier (it only runs in training);
* batch normalisation folded into each convolution's bias (one bias vector per convolution
  instead of BN's scale and shift);
* dropout before the classifier is an inference no-op and is left out.

Blocks follow the reference IOS implementation (python/ios/models/inception_v3.py): the stem,
then one block per inception module (Mixed_5b ... Mixed_7c), so the IOS dynamic program runs
per module. The last block is the classifier: global average pool and the 2048 -> 1000 linear
layer (the reference stops at the pool).

``image_size`` builds the same network for a smaller square input (at least 75, where every
spatial size stays positive); the zoo's fast tests use it.
"""

from ios_core.ir import GraphBuilder
from ios_core.models.registry import register


def _stem(b: GraphBuilder, x):
    x = b.conv(x, 32, 3, stride=2)  # Conv2d_1a_3x3
    x = b.conv(x, 32, 3)  # Conv2d_2a_3x3
    x = b.conv(x, 64, 3, padding=1)  # Conv2d_2b_3x3
    x = b.max_pool(x, 3, 2)
    x = b.conv(x, 80, 1)  # Conv2d_3b_1x1
    x = b.conv(x, 192, 3)  # Conv2d_4a_3x3
    return b.end_block(b.max_pool(x, 3, 2))


def _inception_a(b: GraphBuilder, x, pool_features: int):
    v1 = b.conv(x, 64, 1)
    v5 = b.conv(b.conv(x, 48, 1), 64, 5, padding=2)
    v3 = b.conv(b.conv(b.conv(x, 64, 1), 96, 3, padding=1), 96, 3, padding=1)
    vp = b.conv(b.avg_pool(x, 3, 1, padding=1), pool_features, 1)
    return b.end_block(b.concat([v1, v5, v3, vp]))


def _inception_b(b: GraphBuilder, x):
    v3 = b.conv(x, 384, 3, stride=2)
    vd = b.conv(b.conv(b.conv(x, 64, 1), 96, 3, padding=1), 96, 3, stride=2)
    vp = b.max_pool(x, 3, 2)
    return b.end_block(b.concat([v3, vd, vp]))


def _inception_c(b: GraphBuilder, x, c7: int):
    v1 = b.conv(x, 192, 1)
    v7 = b.conv(x, c7, 1)
    v7 = b.conv(v7, c7, (1, 7), padding=(0, 3))
    v7 = b.conv(v7, 192, (7, 1), padding=(3, 0))
    vd = b.conv(x, c7, 1)
    vd = b.conv(vd, c7, (7, 1), padding=(3, 0))
    vd = b.conv(vd, c7, (1, 7), padding=(0, 3))
    vd = b.conv(vd, c7, (7, 1), padding=(3, 0))
    vd = b.conv(vd, 192, (1, 7), padding=(0, 3))
    vp = b.conv(b.avg_pool(x, 3, 1, padding=1), 192, 1)
    return b.end_block(b.concat([v1, v7, vd, vp]))


def _inception_d(b: GraphBuilder, x):
    v3 = b.conv(b.conv(x, 192, 1), 320, 3, stride=2)
    v7 = b.conv(x, 192, 1)
    v7 = b.conv(v7, 192, (1, 7), padding=(0, 3))
    v7 = b.conv(v7, 192, (7, 1), padding=(3, 0))
    v7 = b.conv(v7, 192, 3, stride=2)
    vp = b.max_pool(x, 3, 2)
    return b.end_block(b.concat([v3, v7, vp]))


def _inception_e(b: GraphBuilder, x):
    v1 = b.conv(x, 320, 1)
    v3 = b.conv(x, 384, 1)
    v3a = b.conv(v3, 384, (1, 3), padding=(0, 1))
    v3b = b.conv(v3, 384, (3, 1), padding=(1, 0))
    vd = b.conv(b.conv(x, 448, 1), 384, 3, padding=1)
    vda = b.conv(vd, 384, (1, 3), padding=(0, 1))
    vdb = b.conv(vd, 384, (3, 1), padding=(1, 0))
    vp = b.conv(b.avg_pool(x, 3, 1, padding=1), 192, 1)
    return b.end_block(b.concat([v1, v3a, v3b, vda, vdb, vp]))


@register("inception_v3", "Inception v3 (torchvision, no aux head), 299x299")
def inception_v3(num_classes: int = 1000, image_size: int = 299):
    if image_size < 75:
        raise ValueError(f"inception_v3 needs image_size >= 75, got {image_size}")
    b = GraphBuilder("inception_v3", (3, image_size, image_size))
    x = _stem(b, b.input)
    for pool_features in (32, 64, 64):  # Mixed_5b, 5c, 5d
        x = _inception_a(b, x, pool_features)
    x = _inception_b(b, x)  # Mixed_6a
    for c7 in (128, 160, 160, 192):  # Mixed_6b .. 6e
        x = _inception_c(b, x, c7)
    x = _inception_d(b, x)  # Mixed_7a
    x = _inception_e(b, x)  # Mixed_7b
    x = _inception_e(b, x)  # Mixed_7c
    x = b.global_avg_pool(x)
    b.end_block(b.linear(x, num_classes))
    return b.finish()
