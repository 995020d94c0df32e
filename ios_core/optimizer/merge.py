"""Operator merge: several convolutions that read the same input become one convolution.

The merged convolution reads the same input, has the concatenated output channels (in the
order given) and kernels zero-padded to the largest kernel size; its padding is chosen so
that every original convolution's taps land on exactly the input positions they read before,
so channel slice ``[offset_i, offset_i + out_channels_i)`` of the merged output equals the
output of convolution ``i`` (bias concatenated, same activation).

Conditions (``can_merge``): every node is a ``Conv`` with ``groups == 1`` and symmetric
padding; they read the same inputs (identical terms and channel slices); same stride,
dilation, activation and output size; and a common padding exists that aligns the taps of
all of them (always true for the usual "same" paddings, e.g. 1x1/p0, 3x3/p1, 5x5/p2).
"""

from __future__ import annotations

import numpy as np

from ios_core.ir import Conv, Node
from ios_core.ir.meta import absorb


def _merged_geometry(convs: list[Conv]) -> tuple[tuple[int, int], tuple[int, int], list[tuple[int, int]]] | None:
    """(kernel, padding, per-conv tap offsets) of the merged convolution, or None if no padding aligns them."""
    first = convs[0]
    _, in_h, in_w = first.input_shape
    out_hw = tuple(first.output_shape[1:])
    kernel, padding, offsets_per_dim = [], [], []
    for dim, size in enumerate((in_h, in_w)):
        d = first.dilation[dim]
        s = first.stride[dim]
        big = max(c.kernel[dim] for c in convs)
        chosen = None
        # conv i reads input row y*s - p_i + d*t (t < k_i); in the merged conv it is tap t + o_i,
        # read as y*s - P + d*(t + o_i), so P = p_i + d*o_i with 0 <= o_i <= big - k_i.
        candidates = sorted({c.padding[dim] + d * o for c in convs for o in range(big - c.kernel[dim] + 1)})
        for pad in candidates:
            offs = []
            for c in convs:
                delta = pad - c.padding[dim]
                if delta < 0 or delta % d or delta // d > big - c.kernel[dim]:
                    break
                offs.append(delta // d)
            else:
                if (size + 2 * pad - d * (big - 1) - 1) // s + 1 == out_hw[dim]:
                    chosen = (pad, offs)
                    break
        if chosen is None:
            return None
        kernel.append(big)
        padding.append(chosen[0])
        offsets_per_dim.append(chosen[1])
    offsets = list(zip(offsets_per_dim[0], offsets_per_dim[1]))
    return (kernel[0], kernel[1]), (padding[0], padding[1]), offsets


def _shape(node: Node):
    return node.output_shape if node.output_shape is not None else node.infer_shape()


def merge_key(conv: Node):
    """A hashable key: convolutions that can merge share it (the padding alignment is checked
    separately by ``can_merge``). ``None`` for nodes that never merge."""
    if type(conv) is not Conv or conv.groups != 1 or not conv.symmetric:
        return None
    inputs = tuple(tuple((id(v.node), v.begin, v.end) for v in term) for term in conv.inputs)
    return (inputs, conv.stride, conv.dilation, conv.act, tuple(_shape(conv)[1:]))


def can_merge(convs: list[Node]) -> bool:
    """Whether ``convs`` can be merged into one convolution by :func:`merge_convs`."""
    if not convs:
        return False
    if len(convs) == 1:
        return type(convs[0]) is Conv
    keys = {merge_key(c) for c in convs}
    if len(keys) != 1 or None in keys:
        return False
    if len({id(c) for c in convs}) != len(convs):
        return False
    return _merged_geometry(list(convs)) is not None


def merge_offsets(convs: list[Conv]) -> list[tuple[int, int]]:
    """Channel range ``[begin, end)`` of each original convolution in the merged output."""
    ranges, begin = [], 0
    for c in convs:
        ranges.append((begin, begin + c.out_channels))
        begin += c.out_channels
    return ranges


def merge_convs(convs: list[Conv], name: str) -> Conv:
    """Build the merged convolution of ``convs`` (see the module docstring).

    The result reads the same inputs (the same ``Value`` objects) as the originals and has
    its output shape inferred; it carries weights when every original has weights.
    Raises ``ValueError`` when ``can_merge(convs)`` is false.
    """
    convs = list(convs)
    if not can_merge(convs):
        raise ValueError(f"cannot merge {[getattr(c, 'name', c) for c in convs]}: merging needs convolutions "
                         f"(groups=1) reading the same input with the same stride, dilation, activation and "
                         f"output size")
    first = convs[0]
    kernel, padding, offsets = _merged_geometry(convs)
    merged = Conv(name, [list(term) for term in first.inputs], hint_name=" ".join(c.hint_name for c in convs),
                  out_channels=sum(c.out_channels for c in convs), kernel=kernel, stride=first.stride,
                  padding=padding, dilation=first.dilation, groups=1, act=first.act)
    merged.infer_shape()
    absorb(merged, *convs)  # the imported file's nodes of each (ios_core.ir.meta), in the convolutions' order
    if tuple(merged.output_shape[1:]) != tuple(first.output_shape[1:]):  # pragma: no cover - guarded above
        raise AssertionError("merged convolution output size differs")
    if all(c.weight is not None and c.bias is not None for c in convs):
        weight = np.zeros(merged.weight_shape, dtype=np.float32)
        bias = np.zeros(merged.out_channels, dtype=np.float32)
        for c, (b, e), (oh, ow) in zip(convs, merge_offsets(convs), offsets):
            kh, kw = c.kernel
            weight[b:e, :, oh:oh + kh, ow:ow + kw] = c.weight
            bias[b:e] = c.bias
        merged.weight, merged.bias = weight, bias
    return merged
