"""NASNet-A Large (Zoph et al., "Learning Transferable Architectures", 6 @ 4032), 331x331.

The cells follow the reference IOS implementation (python/ios/models/nasnet.py), which follows
the widely used PyTorch port of the TF-slim model: ReLU -> separable convolution -> BN twice per
separable branch, each separable convolution a ``sequential`` node (ReLU, depthwise, pointwise)
as in the reference, BN folded into the pointwise convolution's bias. Two details differ:

* ``reference=False`` (the default) builds NASNet-A as published: the normal cell's output also
  concatenates its left input (6 x filters channels, so the penultimate layer has 4032 channels),
  cell_stem_1 concatenates its two stride-2 paths, and cell_stem_0's third combination adds
  ``comb_iter_1``. ``reference=True`` reproduces the IOS reference graph, which drops the left
  input from the normal cell's concatenation, sums the two stem-1 paths and adds ``comb_iter_0``
  in cell_stem_0 (fewer MACs: see docs/models.md).
* The factorized-reduction paths (avg pool 1x1 stride 2, then 1x1 conv, the second path shifted
  by one pixel) are 1x1 stride-2 convolutions, as in the reference: the same MACs; the shifted
  path samples the even rather than the odd pixels.

Average pools count padding (the IR's avg pool), where the TF model excludes it.

Blocks: the reference puts the whole network into one block (with "parts" as optimisation hints),
because a cell reads the outputs of the two previous cells. Here every cell is its own block: a
block's exit concatenates the cell's output with what the next cell needs from the cell before
it, i.e. the previous cell's output itself (normal and reduction cells, whose 1x1 ReLU-conv runs
in the next block), or, where the next cell first reduces that input at stride 2 (cell_stem_1,
the first cell after each reduction), the result of that reduction, computed in this block so
its resolution matches. This adds one channel-concatenated copy per cell and moves a few 1x1
convolutions one block earlier; the operators and MACs are otherwise those of the network.
Blocks: stem conv + cell_stem_0, cell_stem_1, 18 normal/first cells, 2 reduction cells,
classifier (ReLU, global average pool, linear 4032 -> 1000).
"""

from __future__ import annotations

from ios_core.ir import GraphBuilder, Value
from ios_core.models.registry import register


def _relu_conv(b: GraphBuilder, x, out_channels: int, stride: int = 1):
    with b.sequential() as seq:
        b.conv(b.relu(x), out_channels, 1, stride=stride, act="identity")
    return seq.output


def _relu_sep_conv(b: GraphBuilder, x, out_channels: int, kernel: int, stride: int):
    with b.sequential() as seq:
        y = b.relu(x)
        y = b.conv(y, y.length, kernel, stride=stride, padding=kernel // 2, groups=y.length, act="identity")
        b.conv(y, out_channels, 1, act="identity")
    return seq.output


def _branch(b, x: Value, out_channels: int, kernel: int, stride: int = 1):
    """BranchSeparables: the first separable keeps the input width."""
    x = _relu_sep_conv(b, x, x.length, kernel, stride)
    return _relu_sep_conv(b, x, out_channels, kernel, 1)


def _branch_stem(b, x: Value, out_channels: int, kernel: int, stride: int):
    """BranchSeparablesStem: the first separable already maps to ``out_channels``."""
    x = _relu_sep_conv(b, x, out_channels, kernel, stride)
    return _relu_sep_conv(b, x, out_channels, kernel, 1)


def _pool(b, x, kind: str, stride: int):
    return (b.max_pool if kind == "max" else b.avg_pool)(x, 3, stride, padding=1)


def _stem0(b, x: Value, nf: int, reference: bool):
    x1 = _relu_conv(b, x, nf)
    c0 = b.identity([[_branch(b, x1, nf, 5, 2), _branch_stem(b, x, nf, 7, 2)]])
    c1 = b.identity([[_pool(b, x1, "max", 2), _branch_stem(b, x, nf, 7, 2)]])
    c2l, c2r = _pool(b, x1, "avg", 2), _branch_stem(b, x, nf, 5, 2)
    c3r = _pool(b, c0, "avg", 1)
    c4l, c4r = _branch(b, c0, nf, 3), _pool(b, x1, "max", 2)
    return [[c1], [c2l, c2r], [c3r, c0 if reference else c1], [c4l, c4r]]


def _stem1_right(b, h: Value, nf: int, reference: bool):
    """cell_stem_1's factorized reduction of the stem convolution's output (stride 2)."""
    p1, p2 = _relu_conv(b, h, nf // 2, 2), _relu_conv(b, h, nf // 2, 2)
    return [[p1, p2]] if reference else [[p1], [p2]]


def _stem1(b, hp: Value, x_right: Value, nf: int):
    x_left = _relu_conv(b, hp, nf)
    c0 = b.identity([[_branch(b, x_left, nf, 5, 2), _branch(b, x_right, nf, 7, 2)]])
    c1 = b.identity([[_pool(b, x_left, "max", 2), _branch(b, x_right, nf, 7, 2)]])
    c2l, c2r = _pool(b, x_left, "avg", 2), _branch(b, x_right, nf, 5, 2)
    c3r = _pool(b, c0, "avg", 1)
    c4l, c4r = _branch(b, c0, nf, 3), _pool(b, x_left, "max", 2)
    return [[c1], [c2l, c2r], [c3r, c1], [c4l, c4r]]


def _first_left(b, x_prev: Value, out_left: int):
    """FirstCell's factorized reduction of the cell before the previous one: two stride-2
    paths, concatenated (2 * out_left channels)."""
    return [[_relu_conv(b, x_prev, out_left, 2)], [_relu_conv(b, x_prev, out_left, 2)]]


def _first(b, x: Value, x_left: Value, out_right: int):
    x_right = _relu_conv(b, x, out_right)
    c0 = [_branch(b, x_right, out_right, 5), _branch(b, x_right, out_right, 3)]
    c1 = [_branch(b, x_left, out_right, 5), _branch(b, x_left, out_right, 3)]
    c2 = [_pool(b, x_right, "avg", 1), x_left]
    c3 = [_pool(b, x_left, "avg", 1), _pool(b, x_left, "avg", 1)]
    c4 = [_branch(b, x_right, out_right, 3), x_right]
    return [[x_left], c0, c1, c2, c3, c4]


def _normal(b, x: Value, x_prev: Value, out_left: int, out_right: int, reference: bool):
    x_left = _relu_conv(b, x_prev, out_left)
    x_right = _relu_conv(b, x, out_right)
    c0 = [_branch(b, x_right, out_right, 5), _branch(b, x_left, out_left, 3)]
    c1 = [_branch(b, x_left, out_left, 5), _branch(b, x_left, out_left, 3)]
    c2 = [_pool(b, x_right, "avg", 1), x_left]
    c3 = [_pool(b, x_left, "avg", 1), _pool(b, x_left, "avg", 1)]
    c4 = [_branch(b, x_right, out_right, 3), x_right]
    return ([] if reference else [[x_left]]) + [c0, c1, c2, c3, c4]


def _reduction(b, x: Value, x_prev: Value, out_left: int, out_right: int):
    x_left = _relu_conv(b, x_prev, out_left)
    x_right = _relu_conv(b, x, out_right)
    c0 = b.identity([[_branch(b, x_right, out_right, 5, 2), _branch(b, x_left, out_right, 7, 2)]])
    c1 = b.identity([[_pool(b, x_right, "max", 2), _branch(b, x_left, out_right, 7, 2)]])
    c2 = [_pool(b, x_right, "avg", 2), _branch(b, x_left, out_right, 5, 2)]
    c3 = [c1, _pool(b, c0, "avg", 1)]
    c4 = [_branch(b, c0, out_right, 3), _pool(b, x_right, "max", 2)]
    return [[c1], c2, c3, c4]


def _channels(terms) -> int:
    return sum(term[0].length for term in terms)


def _end(b: GraphBuilder, out_terms, carry_terms):
    """End the cell's block: exit = concat(cell output, carry); return (out, carry) slices."""
    n_out = _channels(out_terms)
    exit_value = b.end_block(b.identity(list(out_terms) + list(carry_terms)))
    node = exit_value.node
    return Value(node, 0, n_out), (Value(node, n_out, node.output_shape[0]) if carry_terms else None)


@register("nasnet", "NASNet-A Large 6@4032, 331x331")
def nasnet(num_classes: int = 1000, image_size: int = 331, stem_filters: int = 96, filters: int = 168,
           reference: bool = False):
    b = GraphBuilder("nasnet", (3, image_size, image_size))
    conv0 = b.conv(b.input, stem_filters, 3, stride=2, act="identity")
    # block 0: stem conv, cell_stem_0; carries cell_stem_1's reduced view of conv0
    x, carry = _end(b, _stem0(b, conv0, filters // 4, reference), _stem1_right(b, conv0, filters // 2, reference))
    # block 1: cell_stem_1; carries the first cell's reduced view of cell_stem_0 (x)
    x, carry = _end(b, _stem1(b, x, carry, filters // 2), _first_left(b, x, filters // 2))
    for mult in (1, 2, 4):
        # first cell: its left input is the carried reduction; it carries its own input raw
        x, carry = _end(b, _first(b, x, carry, filters * mult), [[x]])
        for i in range(5):
            # normal cell: carries its own input, the next cell's left input (none after the last)
            last = mult == 4 and i == 4
            x, carry = _end(b, _normal(b, x, carry, filters * mult, filters * mult, reference), [] if last else [[x]])
        if mult < 4:
            # reduction cell: also reduces its left input for the first cell after it
            x_prev = carry
            out = _reduction(b, x, x_prev, 2 * filters * mult, 2 * filters * mult)
            x, carry = _end(b, out, _first_left(b, x_prev, filters * mult))
    x = b.global_avg_pool(b.relu(x))
    b.end_block(b.linear(x, num_classes))
    return b.finish()
