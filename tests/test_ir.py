"""The IR (ios_core.ir): building graphs, validation and its errors, JSON round trips with weights,
blocks and schedules, and the oracle on small graphs."""

import copy
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ios_core import models, reference
from ios_core.ir import Graph, GraphBuilder, GraphError


def tiny_cfg(data_dir):
    return json.loads((data_dir / "tiny_schedule.json").read_text())


def test_reference_format_schedule_loads_roundtrips_and_runs(data_dir):
    cfg = tiny_cfg(data_dir)
    g = Graph.from_json(cfg)
    assert g.has_stages
    assert g.to_json() == cfg  # byte-for-byte layout of the reference format
    assert [len(b.stages) for b in g.blocks] == [3, 3]
    g.init_weights(0)
    y = reference.run(g, reference.random_input(g, 2))
    assert y.shape == (2, 40, 1, 1) and np.isfinite(y).all()
    assert "Parallel(" in str(g) and "[5]Sequential(" in str(g)


def test_oracle_matches_hand_written_torch():
    g = models.get("sample", input_shape=(16, 7, 7)).init_weights(3)
    x = reference.random_input(g, 2, seed=1)
    w = {n.name: (torch.from_numpy(n.weight), torch.from_numpy(n.bias)) for n in g.weighted_nodes()}
    t = torch.from_numpy(x)
    c = lambda inp, k: torch.relu(F.conv2d(inp, *w[k], padding=1))
    expected = torch.cat([c(c(t, "1"), "4"), c(t, "2"), c(t, "3")], 1).numpy()
    np.testing.assert_allclose(reference.run(g, x), expected, rtol=1e-5, atol=1e-5)


def test_weights_are_deterministic_and_saved_beside_json(tmp_path):
    a = models.get("squeezenet").init_weights(7)
    b = models.get("squeezenet").init_weights(7)
    c = models.get("squeezenet").init_weights(8)
    for na, nb, nc in zip(a.weighted_nodes(), b.weighted_nodes(), c.weighted_nodes()):
        assert np.array_equal(na.weight, nb.weight)
        assert not np.array_equal(na.weight, nc.weight)
    a.save(tmp_path / "sq.json")
    assert (tmp_path / "sq.npz").exists()
    loaded = Graph.load(tmp_path / "sq.json")
    x = reference.random_input(a, 1)
    np.testing.assert_array_equal(reference.run(a, x), reference.run(loaded, x))


def test_random_input_is_seeded():
    g = models.get("sample")
    assert np.array_equal(reference.random_input(g, 2, 5), reference.random_input(g, 2, 5))
    assert reference.random_input(g, 2, 5).dtype == np.float32


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["blocks"][0]["inner_nodes"][0].update(type="warp"), "unknown type 'warp'"),
        (lambda c: c["blocks"][0]["inner_nodes"][0]["inputs"][0][0].__setitem__(0, "nope"), "unknown node 'nope'"),
        (lambda c: c["blocks"][0]["inner_nodes"][0]["inputs"][0][0].__setitem__(0, "6"), "before it is defined"),
        (lambda c: c["blocks"][0]["inner_nodes"][0]["inputs"][0][0].__setitem__(2, 99), "channels [0, 99)"),
        (lambda c: c["blocks"][0]["inner_nodes"][0].update(output_shape=[8, 5, 5]), "node '1': stored output shape"),
        (lambda c: c["blocks"][0]["inner_nodes"][0].pop("kernel"), "lacks the field 'kernel'"),
        (lambda c: c["blocks"][0]["stages"].pop(), "every operator exactly once"),
        (lambda c: c["blocks"][0].__setitem__("stages", [[["6"]], [["1"], ["2"]], [["5"]], [["7"]]]),
         "scheduled before its input"),
        (lambda c: c["blocks"][1]["inner_nodes"][0]["inputs"][0][0].__setitem__(0, "1"), "another block"),
    ],
)
def test_validation_names_the_node(data_dir, mutate, message):
    cfg = copy.deepcopy(tiny_cfg(data_dir))
    mutate(cfg)
    with pytest.raises(GraphError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        Graph.from_json(cfg)


def test_shape_mismatch_in_concat_is_rejected():
    b = GraphBuilder("bad", (4, 8, 8))
    a = b.conv(b.input, 4, 3, stride=2, padding=1)
    c = b.conv(b.input, 4, 3, padding=1)
    with pytest.raises(GraphError, match="is 8x8, expected 4x4"):
        b.finish(b.concat([a, c]))


def test_conv_shape_macs_params():
    b = GraphBuilder("one", (3, 32, 32))
    b.conv(b.input, 8, 3, stride=2, padding=1, dilation=1)
    g = b.finish()
    conv = g.exit_node
    assert conv.output_shape == (8, 16, 16)
    assert g.macs() == 8 * 16 * 16 * 3 * 9
    assert g.params() == 8 * 3 * 9 + 8
    assert "dilation" not in conv.to_json()  # reference layout unless the extension is used


def test_a_channel_range_is_one_type_whatever_it_ranges_over():
    """ir.Value (an IR node's output) and runtime ValueRef (a buffer) are both ChannelRange: one
    narrowing rule for both."""
    import pytest

    from ios_core.ir import ChannelRange, GraphBuilder, Value
    from ios_core.runtime.plan import ValueRef

    b = GraphBuilder("r", (8, 4, 4))
    conv = b.conv(b.input, 8, 1)
    v = Value(conv.node, 2, 8)
    ref = ValueRef(3, 2, 8, False)
    for r in (v, ref):
        assert isinstance(r, ChannelRange) and r.channels == 6
        assert r.narrow(0, 6) is r
        n = r.narrow(1, 3)
        assert (type(n), n.begin, n.end, n.channels) == (type(r), 3, 5, 2)
        with pytest.raises(ValueError):
            r.narrow(4, 7)
    assert v.narrow(1, 3).node is conv.node and ref.narrow(1, 3).buffer == 3 and not ref.narrow(1, 3).whole
