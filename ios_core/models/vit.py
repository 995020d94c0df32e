"""Vision transformers (Dosovitskiy et al.), torchvision's ``VisionTransformer`` layout: ViT-Ti/16.

The image is cut into patches by a strided convolution, the (features, rows, columns) map becomes
a sequence of tokens (``reshape``, ``transpose``: tokens x features), a learned class token is
put first (``prepend``) and learned position embeddings are added (``constant``). Each encoder
layer is pre-norm: ``x + attention(layernorm(x))``, then ``x + mlp(layernorm(x))``. Attention
projects queries, keys and values separately (three ``dense`` nodes side by side, which IOS may
run concurrently), splits the heads (``reshape``, ``transpose``: heads x tokens x head features),
scales the scores (a learned scalar, ``constant`` mul; torchvision's 1/sqrt(head features) when
imported), and takes ``softmax(q k^T) v`` with two ``matmul`` nodes. The MLP's activation is the
erf GELU. The classifier reads the class token (the channel slice [0, 1) of the final layer
norm's tokens) with a ``linear`` layer.

Blocks: the patch embedding, one block per encoder layer, and the classifier.
"""

from ios_core.ir import Graph, GraphBuilder, Value
from ios_core.models.registry import register


def attention(b: GraphBuilder, x: Value, heads: int) -> Value:
    """Multi-head self-attention of ``x`` (tokens, features), projections included."""
    tokens, dim = x.node.output_shape[0], x.node.output_shape[-1]
    hd = dim // heads

    def split(v: Value, perm) -> Value:
        return b.transpose(b.reshape(v, (tokens, heads, hd)), perm)

    q = split(b.dense(x, dim), (1, 0, 2))  # heads, tokens, hd
    k = split(b.dense(x, dim), (1, 2, 0))  # heads, hd, tokens
    v = split(b.dense(x, dim), (1, 0, 2))
    scores = b.softmax(b.constant(b.matmul(q, k), (1,), "mul"))
    out = b.reshape(b.transpose(b.matmul(scores, v), (1, 0, 2)), (tokens, dim))
    return b.dense(out, dim)


def encoder_layer(b: GraphBuilder, x: Value, heads: int, mlp: int) -> Value:
    """One pre-norm encoder layer, ended as a block."""
    dim = x.node.output_shape[-1]
    x = b.add([x, attention(b, b.layernorm(x, eps=1e-6), heads)])
    y = b.dense(b.dense(b.layernorm(x, eps=1e-6), mlp, act="gelu"), dim)
    return b.end_block(b.add([x, y]))


def vit(name: str = "vit", image: int = 224, patch: int = 16, dim: int = 192, depth: int = 12, heads: int = 3,
        mlp: int = 768, num_classes: int = 1000, channels: int = 3) -> Graph:
    """A ViT of ``depth`` layers on ``channels`` x ``image`` x ``image`` input."""
    if image % patch or dim % heads:
        raise ValueError(f"patch {patch} must divide image {image} and heads {heads} divide dim {dim}")
    b = GraphBuilder(name, (channels, image, image))
    grid = image // patch
    x = b.conv(b.input, dim, patch, stride=patch, act="identity")
    x = b.transpose(b.reshape(x, (dim, grid * grid)), (1, 0))  # tokens, features
    x = b.prepend(x)  # the class token
    x = b.end_block(b.constant(x, (grid * grid + 1, dim)))  # position embeddings
    for _ in range(depth):
        x = encoder_layer(b, x, heads, mlp)
    x = b.layernorm(x, eps=1e-6)
    b.end_block(b.linear(x.narrow(0, 1), num_classes))
    return b.finish()


@register("vit_tiny", "ViT-Ti/16 (224x224, 12 layers, 192 features, 3 heads, MLP 768, class token); "
          "run when named, not in --models all", in_all=False)
def vit_tiny(num_classes: int = 1000, image_size: int = 224) -> Graph:
    return vit("vit_tiny", image=image_size, num_classes=num_classes)
