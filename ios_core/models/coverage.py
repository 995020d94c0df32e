"""A small graph with every IR operator type and every attribute value the IR allows (every
activation, fused and standalone; every pool type, symmetric and asymmetric padding, averages
counting the padding or not; strides, dilations, groups; broadcast products; shuffles;
nearest and bilinear resizes; a Sequential; flatten and linear), and channel slices whose
offsets are not 16-byte aligned. It is what ``ios-bench doctor`` runs on a GPU and what the
tests run through the CUDA executor on the fake device and through the TensorRT lowering on
the stand-in, against the oracle. Not in the zoo (``ios_core.models.names()``): it is a
check, not a benchmark. :func:`level_schedule` gives it (or any graph) its most parallel
schedule.
"""

from __future__ import annotations

import copy

from ios_core.ir import FUSED_ACTIVATIONS, Graph, GraphBuilder, Value

PARAM_ACTS = (("leaky_relu", 0.1, 0.0), ("hardsigmoid", 0.2, 0.5), ("clip", -0.5, 0.7))


def coverage_graph(channels: int = 6, size: int = 9) -> Graph:
    """Every op type and attribute value on a ``(channels, size, size)`` input (odd sizes: a
    channel slice of a concatenation starts at a byte offset that is not 16-byte aligned)."""
    b = GraphBuilder("coverage", (channels, size, size))
    x = b.input
    c = channels
    # block 1: one convolution per fused activation (strides, dilation, groups, asymmetric
    # padding), concatenated (odd channel counts: misaligned slices) and combined
    convs = [b.conv(x, c + (i % 2), 3, padding=1, act=act) for i, act in enumerate(FUSED_ACTIVATIONS)]
    dil = b.conv(x, c, 3, padding=2, dilation=2, groups=2, act="relu")
    asym = b.conv(x, c, 2, padding=(0, 1), padding_end=(1, 0), act="identity")
    cat = b.concat([*convs, dil, asym])
    total = sum(v.end - v.begin for v in [*convs, dil, asym])
    summed = b.add([Value(cat.node, 0, c), Value(cat.node, c + 1, 2 * c + 1), asym])
    with b.sequential() as seq:
        r = b.relu(summed)
        b.conv(r, c, 1, act="tanh")
    s = seq.output
    b.end_block(b.concat([Value(cat.node, 0, total), s]))
    # block 2: pools of every kind and padding, standalone activations, affine, shuffle
    y = Value(b.blocks[-1].exit_node, total - c, total + c)  # 2c channels
    pools = [b.pool(y, "max", 3, 1, 1),
             b.pool(y, "max", 2, 1, (0, 1), padding_end=(1, 0)),
             b.pool(y, "avg", 3, 1, 1, count_include_pad=True),
             b.pool(y, "avg", 3, 1, 1, count_include_pad=False),
             b.pool(y, "avg", 2, 1, (1, 0), padding_end=(0, 1), count_include_pad=False)]
    acts = [b.activation(y, a) for a in FUSED_ACTIVATIONS if a not in ("identity", "relu")]
    acts += [b.activation(y, a, alpha, beta) for a, alpha, beta in PARAM_ACTS]
    aff = b.affine(y, act="relu6")
    shuf = b.shuffle(b.concat([aff, Value(pools[0].node, 0, 2 * c)]), 4)
    gate = b.activation(b.pool(y, "global_avg"), "sigmoid")
    scaled = b.mul([y, gate])  # a 1x1 value broadcast over the spatial size
    mixed = b.add([*pools, *acts, scaled])
    b.end_block(b.concat([mixed, shuf]))
    # block 3: resizes (down, up; nearest, bilinear with and without aligned corners), global
    # pools, a strided convolution, flatten, linear
    z = b.blocks[-1].exit_node
    zc = z.output_shape[0]
    down = b.resize(Value(z, 0, zc), (5, 4), "nearest")
    up = b.resize(Value(z, 0, zc), (11, 13), "bilinear")
    up2 = b.resize(Value(z, 0, zc), (11, 13), "bilinear", align_corners=True)
    near_up = b.resize(Value(z, 0, zc), (11, 13), "nearest")
    g1 = b.pool(b.add([up, up2, near_up]), "global_max")
    g2 = b.pool(down, "global_avg")
    g3 = b.pool(b.conv(Value(z, 0, zc), 4, 3, stride=2, padding=1, act="relu"), "global_avg")
    f = b.flatten(b.concat([g1, g2, g3]))
    b.end_block(b.linear(b.activation(f, "silu"), 7, act="hardswish"))
    return b.finish()


def level_schedule(graph: Graph) -> Graph:
    """A copy of ``graph`` (weights included) whose blocks run in ASAP levels: every operator
    whose inputs are ready is its own group of one parallel stage -- the most concurrency a
    schedule can ask for (several streams, events, fork and join on the GPU)."""
    g = Graph.from_json(copy.deepcopy(graph.to_json()))
    if graph.has_weights:
        for a, b in zip(graph.weighted_nodes(), g.weighted_nodes()):
            b.set_weights(a.weights())
    for block in g.blocks:
        done = {block.enter_node.name}
        left = list(block.nodes)
        stages = []
        while left:
            ready = [n for n in left if all(p.name in done for p in n.predecessors())]
            stages.append([[n.name] for n in ready])
            done.update(n.name for n in ready)
            left = [n for n in left if n.name not in done]
        block.stages = stages
    return g.validate()
