"""Small graphs for the adapter tests: every IR node type the zoo uses, in awkward places."""

from __future__ import annotations

from ios_core.ir import GraphBuilder, Value


def mini_inception(input_shape=(16, 12, 12)):
    """An inception-style graph: branches, a merged conv whose channel slices feed two convs,
    a concat whose first term sums two slices, element mul, avg pools counting padding (stride 1
    and stride 2 on an even size, where TF 'SAME' would pad asymmetrically), a padded max pool,
    dilated, grouped and depthwise convs, a Sequential node, sigmoid/tanh activations, global max,
    flatten of a 3x3 map (NCHW order matters) and linear layers."""
    b = GraphBuilder("mini_inception", input_shape)
    stem = b.conv(b.input, 24, 3, padding=1)
    x = b.end_block(b.max_pool(stem, 3, 2, padding=1))  # 12x12 -> 6x6
    # inception block
    a = b.conv(x, 8, 1)
    pair = b.conv(x, 12, 1)
    merged = b.conv(x, 16, 1)  # as if two 1x1 convs were merged: consumers read its slices
    c1 = b.conv(Value(merged.node, 0, 8), 8, 3, padding=1)
    c2 = b.conv(Value(merged.node, 8, 16), 8, 3, padding=2, dilation=2, act="identity")
    pc = b.conv(b.avg_pool(x, 3, 1, padding=1), 8, 1)
    m = b.mul([Value(pair.node, 0, 8), Value(pair.node, 4, 12)])
    with b.sequential() as seq:
        t = b.conv(x, 8, 3, padding=1, groups=4)
        t = b.conv(t, 16, 3, padding=1, groups=8, act="identity")  # depthwise, multiplier 2
        b.activation(t, "tanh")
    cat = b.identity([[a, Value(merged.node, 8, 16)], [c1], [c2, pc], [m], [seq.output]])
    x = b.end_block(b.relu(cat))  # 48 channels, 6x6
    # head
    p = b.avg_pool(x, 3, 2, padding=1)  # 6x6 -> 3x3
    g = b.conv(p, 16, 1, groups=2, act="sigmoid")
    lin = b.linear(b.flatten(g), 10, act="relu")  # flatten of 16x3x3
    gm = b.pool(b.add([Value(x.node, 0, 24), Value(x.node, 24, 48)]), "global_max")
    gv = b.pool(Value(p.node, 0, 8), "global_avg")
    x = b.end_block(b.concat([lin, gm, gv]))
    b.end_block(b.linear(x, 7))
    return b.finish()


def imported_ops(input_shape=(8, 9, 9)):
    """Every operator the ONNX importer added to the IR: asymmetric padding (conv, max and
    average pools), averages excluding padding, the parametric and fused activations, affine,
    channel shuffle, nearest/bilinear resize and a squeeze-excitation broadcast multiply."""
    b = GraphBuilder("imported_ops", input_shape)
    x = b.conv(b.input, 16, 3, stride=2, padding=(1, 0), padding_end=(1, 2), act="relu6")  # 9x9 -> 5x5
    a = b.affine(x, act="hardswish")
    p1 = b.pool(a, "max", 3, 2, padding=(0, 0), padding_end=(1, 1))  # ceil-mode style: 5x5 -> 2x2
    p1 = b.resize(p1, (5, 5), "nearest")
    p2 = b.pool(a, "avg", 3, 1, padding=1, count_include_pad=False)
    p3 = b.pool(a, "avg", 2, 2, padding=(0, 0), padding_end=(1, 1))  # 5x5 -> 3x3, padding counted
    p3 = b.resize(p3, (5, 5), "bilinear")
    s = b.conv(b.pool(a, "global_avg"), 16, 1, act="silu")
    s = b.activation(s, "hardsigmoid", 1 / 6, 0.5)
    se = b.mul([p2, s])  # broadcast 1x1 over 5x5
    y = b.end_block(b.concat([p1, se, p3]))  # 48 channels
    y = b.shuffle(y, 4)
    y1 = b.activation(Value(y.node, 0, 24), "leaky_relu", 0.1)
    y2 = b.activation(Value(y.node, 24, 48), "clip", -0.5, 0.75)
    y3 = b.resize(b.conv(y, 8, 1, act="sigmoid"), (9, 9), "bilinear", align_corners=True)
    z = b.conv(b.concat([y1, y2]), 8, 3, padding=(1, 0), padding_end=(0, 2), groups=8, act="identity")
    z = b.end_block(b.add([b.resize(z, (9, 9), "bilinear"), y3]))
    return b.finish(b.linear(b.flatten(b.pool(z, "avg", 3, 3)), 5, act="tanh"))
