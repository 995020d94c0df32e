"""merge_convs / can_merge: the merged convolution computes exactly the originals' outputs."""

import numpy as np
import pytest
import torch

from ios_core.ir import Conv, GraphBuilder, Pool
from ios_core.kernels import apply, gather_input
from ios_core.optimizer.merge import can_merge, merge_convs, merge_offsets


def _convs(specs, in_shape=(6, 9, 11), seed=0, input_mode="same"):
    b = GraphBuilder("m", in_shape)
    x = b.input
    nodes = []
    for spec in specs:
        v = b.conv(x, spec["out"], spec["kernel"], stride=spec.get("stride", 1), padding=spec.get("padding", 0),
                   act=spec.get("act", "relu"), dilation=spec.get("dilation", 1), groups=spec.get("groups", 1))
        nodes.append(v.node)
    rng = np.random.default_rng(seed)
    for n in nodes:
        n.init_weights(rng)
    return b.placeholder, nodes


def _run(node, placeholder, x):
    return apply(node, gather_input(node, {placeholder.name: torch.from_numpy(x)})).numpy()


CASES = [
    [dict(out=3, kernel=1), dict(out=4, kernel=3, padding=1), dict(out=2, kernel=5, padding=2)],
    [dict(out=3, kernel=(1, 3), padding=(0, 1)), dict(out=5, kernel=(3, 1), padding=(1, 0))],
    [dict(out=3, kernel=3, stride=2, padding=1), dict(out=2, kernel=1, stride=2)],
    [dict(out=2, kernel=3, dilation=2, padding=2), dict(out=3, kernel=1, dilation=2)],
    [dict(out=4, kernel=3), dict(out=3, kernel=1, padding=0, stride=1)],  # valid 3x3 vs 1x1: sizes differ
    [dict(out=2, kernel=3, padding=1, act="identity"), dict(out=2, kernel=3, padding=1, act="relu")],
]


@pytest.mark.parametrize("specs", CASES)
def test_merge_matches_originals(specs):
    placeholder, convs = _convs(specs)
    x = np.random.default_rng(1).standard_normal((2, *placeholder.output_shape)).astype(np.float32)
    ok = can_merge(convs)
    same_size = len({c.output_shape[1:] for c in convs}) == 1
    same_act = len({c.act for c in convs}) == 1
    assert ok == (same_size and same_act)
    if not ok:
        with pytest.raises(ValueError):
            merge_convs(convs, "merged")
        return
    merged = merge_convs(convs, "merged")
    assert merged.out_channels == sum(c.out_channels for c in convs)
    assert merged.output_shape[1:] == convs[0].output_shape[1:]
    y = _run(merged, placeholder, x)
    for c, (b, e) in zip(convs, merge_offsets(convs)):
        np.testing.assert_allclose(y[:, b:e], _run(c, placeholder, x), rtol=1e-5, atol=1e-5)


def test_merge_refuses_different_inputs_and_non_convs():
    b = GraphBuilder("m", (4, 8, 8))
    x = b.input
    a = b.conv(x, 4, 1).node
    c = b.conv(x, 4, 1).node
    d = b.conv(whole_of(a), 4, 1).node
    p = b.pool(x, "max", 3, 1, 1).node
    g = b.conv(x, 4, 3, padding=1, groups=2).node
    assert can_merge([a, c])
    assert not can_merge([a, d])
    assert not can_merge([a, p])
    assert not can_merge([a, g])
    assert not can_merge([])
    assert can_merge([a]) and not can_merge([p])
    assert isinstance(merge_convs([a, c], "m"), Conv) and isinstance(p, Pool)


def test_merge_without_weights_builds_structure_only():
    b = GraphBuilder("m", (4, 8, 8))
    x = b.input
    a = b.conv(x, 4, 1).node
    c = b.conv(x, 5, 3, padding=1).node
    m = merge_convs([a, c], "m")
    assert m.weight is None and m.kernel == (3, 3) and m.padding == (1, 1) and m.out_channels == 9


def test_a_merged_convolution_keeps_every_imported_name():
    """Each convolution's ONNX node names (ios_core.ir.meta) are on the merged one, in their order."""
    from ios_core.ir.meta import SOURCE_NODES, source_nodes

    b = GraphBuilder("m", (4, 8, 8))
    a, c, d = (b.conv(b.input, 4, 1).node for _ in range(3))
    a.meta[SOURCE_NODES] = ["Conv_0", "BatchNormalization_1"]
    c.meta[SOURCE_NODES] = ["Conv_2"]  # d: none (a zoo graph's)
    assert source_nodes(merge_convs([a, c, d], "m")) == ["Conv_0", "BatchNormalization_1", "Conv_2"]
    assert merge_convs([d], "m").meta == {}


def whole_of(node):
    from ios_core.ir import whole

    return whole(node)
