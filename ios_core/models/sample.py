"""The sample network of the reference IOS README: one block of four convolutions."""

from ios_core.ir import GraphBuilder
from ios_core.models.registry import register


@register("sample", "IOS README sample: 4 convs on a 375x15x15 input")
def sample(input_shape=(375, 15, 15)):
    b = GraphBuilder("sample", input_shape)
    x = b.input
    v1 = b.conv(x, 375, 3, padding=1)
    v2 = b.conv(x, 750, 3, padding=1)
    v3 = b.conv(x, 375, 3, padding=1)
    v1 = b.conv(v1, 750, 3, padding=1)
    b.end_block(b.concat([v1, v2, v3]))
    return b.finish()
