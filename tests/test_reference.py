"""The oracle with liveness and chunks (``ios_core.reference.run``) against the plain walk that
keeps every value and evaluates the batch whole (``reference.run_plain``, the oracle before)."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from ios_core import reference
from ios_core.check import compare, tolerance_for
from ios_core.ir import GraphBuilder, Value
from ios_core.runtime.plan import ALIAS, CONCAT, INTO
from tests.runtime_helpers import mixed_graph


def output_also_read():
    """Concatenations written by several producers (one also read elsewhere, one term a
    slice), pass-through identities, a dead value, and an exit that aliases a value another
    operator reads."""
    b = GraphBuilder("aliases", (6, 5, 5))
    x = b.input
    a = b.conv(x, 6, 3, padding=1)
    c = b.conv(a, 4, 1, act="sigmoid")
    i = b.identity(a)                       # pass-through: an alias of a
    d = b.conv(Value(i.node, 2, 5), 3, 1)   # reads a slice of the alias
    cat = b.concat([a, c, Value(i.node, 0, 2), d, x])
    y = b.conv(b.end_block(cat), 8, 3, padding=1)
    z = b.relu(y)                           # reads y, which the exit aliases
    s = b.add([z, y])
    b.relu(s)                               # read by nobody
    b.end_block(Value(y.node, 0, 8))        # the exit: a pass-through identity of y
    return b.finish().init_weights(3)


def chain(n: int = 12):
    b = GraphBuilder("chain", (4, 6, 6))
    v = b.input
    for _ in range(n):
        v = b.conv(v, 4, 3, padding=1)
    return b.finish().init_weights(1)


GRAPHS = {"mixed": lambda: mixed_graph().init_weights(0), "aliases": output_also_read, "chain": chain}


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("batch", [1, 2, 5])
def test_run_equals_the_plain_walk_bit_for_bit(name, batch):
    g = GRAPHS[name]()
    x = reference.random_input(g, batch, seed=batch)
    want = reference.run_plain(g, x)
    assert reference.chunk_size(g) >= 5  # small graphs: one chunk, so the result is the plain walk's
    got = reference.run(g, x)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_chunks_are_exact(name, chunk):
    """Every IR operator is per-image, so a chunk's rows are exactly what the plain walk gives
    for those images alone: chunked evaluation equals the plain walk run chunk by chunk, bit for
    bit. Against the whole batch it agrees within the float32 tolerance only: a kernel (oneDNN's
    convolution) may pick another summation order for another batch size (measured with torch's
    CPU kernels: up to 4e-6 absolute on squeezenet and inception_v3 at batch 4 in chunks of 1 to
    3, 3e-7 on nasnet at batch 32 in chunks of 13; all under 1e-6 of the largest output, the
    tolerance is 1e-3; benchmarks/bench_reference_memory.py prints it)."""
    g = GRAPHS[name]()
    x = reference.random_input(g, 5, seed=7)
    got = reference.run_chunked(g, x, chunk)
    by_chunk = np.concatenate([reference.run_plain(g, x[i:i + chunk]) for i in range(0, 5, chunk)])
    np.testing.assert_array_equal(got, by_chunk)
    whole = reference.run_plain(g, x)
    check = compare(got, whole, tolerance_for("fp32"))
    assert check.passed, check


def test_run_chunks_by_the_memory_budget(monkeypatch):
    g = GRAPHS["mixed"]()
    per_image = reference.activation_bytes(g)
    assert reference.chunk_size(g, budget=3 * per_image) == 3
    assert reference.chunk_size(g, budget=3 * per_image - 1) == 2
    assert reference.chunk_size(g, budget=1) == 1
    monkeypatch.setattr(reference, "MEMORY_BUDGET", 2 * per_image)
    x = reference.random_input(g, 5, seed=1)
    np.testing.assert_array_equal(reference.run(g, x), reference.run_chunked(g, x, 2))
    np.testing.assert_array_equal(reference.run(g, x),
                                  np.concatenate([reference.run_plain(g, x[i:i + 2]) for i in (0, 2, 4)]))


def test_activation_footprint_is_the_plan_peak_not_the_sum():
    g = chain(12)
    per_value = 4 * 6 * 6 * 4  # one conv output at batch 1, bytes
    # input + at most two conv outputs live at once (the one read and the one written)
    assert reference.activation_bytes(g) <= 3 * per_value
    assert reference.activation_bytes(g) >= 2 * per_value


def _max_alive(monkeypatch, fn, g, x) -> tuple[int, int]:
    """(largest number of operator outputs alive at once, operators applied) while ``fn`` runs."""
    real = reference.apply
    alive: set[int] = set()
    count = [0, 0]

    def tracking(op, inp):
        y = real(op, inp)
        if y is not inp:  # a new tensor (identity and element ops hand back their input)
            k = count[1]
            count[1] += 1
            alive.add(k)
            weakref.finalize(y, alive.discard, k)
            count[0] = max(count[0], len(alive))
        return y

    monkeypatch.setattr(reference, "apply", tracking)
    fn(g, x)
    return count[0], count[1]


def test_values_are_dropped_after_their_last_reader(monkeypatch):
    g = chain(12)
    x = reference.random_input(g, 2)
    plain_alive, applied = _max_alive(monkeypatch, reference.run_plain, g, x)
    assert applied == 12 and plain_alive == 12  # the plain walk keeps every value to the end
    run_alive, applied = _max_alive(monkeypatch, reference.run, g, x)
    assert applied == 12 and run_alive <= 2  # the value read and the value written


def test_the_oracle_plan_writes_nothing_into_concatenations():
    g = GRAPHS["aliases"]()
    p = reference.plan(g)
    modes = {s.mode for s in p.steps}
    assert INTO not in modes and {ALIAS, CONCAT} <= modes
    assert all(not s.in_place_terms for s in p.steps if s.mode == CONCAT)
    exit_buffer = p.buffer_of(g.exit_node)
    assert exit_buffer.kept and exit_buffer.node.name != g.exit_node.name  # the exit aliases y


def test_run_rejects_what_it_rejected_before():
    g = GRAPHS["mixed"]()
    with pytest.raises(ValueError, match="input shape"):
        reference.run(g, np.zeros((1, 3, 6, 6), np.float32))
    with pytest.raises(ValueError, match="chunk"):
        reference.run_chunked(g, reference.random_input(g, 1), 0)
    bare = mixed_graph()
    with pytest.raises(ValueError, match="no weights"):
        reference.run(bare, reference.random_input(bare, 1))


# ---- the oracle's int8 simulation (the int8 check's RMS bound: ios_core.check) -------------------------------

def _one_conv(weight, bias=None, act="identity"):
    c_out, c_in = weight.shape[:2]
    b = GraphBuilder("one_conv", (c_in, 2, 2))
    y = b.conv(b.input, c_out, 1, act=act)
    b.relu(y)  # an operator without weights: computed in float
    g = b.finish().init_weights(0)
    conv = next(n for n in g.operators() if n.TYPE == "conv")
    conv.weight = np.asarray(weight, np.float32).reshape(c_out, c_in, 1, 1)
    conv.bias = np.zeros(c_out, np.float32) if bias is None else np.asarray(bias, np.float32)
    return g, conv


def test_the_int8_simulation_quantizes_weights_per_channel_and_inputs_per_tensor():
    # channel 0's weights lie on its int8 grid (largest magnitude / 127), channel 1's do not; the inputs lie on
    # the grid of their calibrated range [0, 2.55] (a step of 0.01), but for one value between two steps
    w = np.array([[1.27, -0.5], [1.0, 0.3333]], np.float32)
    g, conv = _one_conv(w)
    calib = np.zeros((1, 2, 2, 2), np.float32)
    calib[0, 0, 0, 0] = 2.55
    x = np.full((1, 2, 2, 2), 1.0, np.float32)
    x[0, 1] = 0.5
    x[0, 0, 1, 1] = 0.504  # quantized to 0.50
    y = reference.int8_simulation(g, [calib])(x)
    wq = w.copy()
    wq[1, 1] = np.round(0.3333 / (1.0 / 127)) * (1.0 / 127)  # channel 1's step is 1.0 / 127
    xq = x.copy()
    xq[0, 0, 1, 1] = 0.50
    expected = np.maximum(np.einsum("oc,nchw->nohw", wq, xq), 0)
    assert np.allclose(y, expected, rtol=0, atol=1e-5)
    assert not np.allclose(y, reference.run(g, x), rtol=0, atol=1e-5)  # the float oracle differs
    assert np.array_equal(conv.weight.reshape(2, 2), w)  # the graph's own weights are untouched


def test_the_int8_simulation_keeps_an_all_zero_channel_zero():
    g, _ = _one_conv(np.array([[0.5, 0.25], [0.0, 0.0]], np.float32))  # channel 1: no weight at all
    x = np.full((1, 2, 2, 2), 1.0, np.float32)
    y = reference.int8_simulation(g, [x])(x)
    assert np.isfinite(y).all() and np.array_equal(y[0, 1], np.zeros((2, 2), np.float32))
    assert np.allclose(y[0, 0], 0.5 + 64 * 0.5 / 127, atol=1e-6)  # 0.25 is 63.5 steps of 0.5 / 127: rounded to 64


def test_the_int8_simulation_clips_an_input_beyond_its_calibrated_range():
    g, _ = _one_conv(np.array([[1.0]], np.float32))
    calib = np.linspace(-1.0, 1.0, 4, dtype=np.float32).reshape(1, 1, 2, 2)
    x = np.array([3.0, 0.5, -0.5, 1.0], np.float32).reshape(1, 1, 2, 2)
    y = reference.int8_simulation(g, [calib])(x).reshape(-1)
    step = 2.0 / 255
    assert y[0] == pytest.approx(y[3], abs=1e-6) and abs(y[0] - 1.0) <= step  # 3.0 read as the range's top
    assert y[2] == 0.0  # the ReLU after the convolution, in float
    assert abs(y[1] - 0.5) <= step / 2 + 1e-6


def test_the_int8_simulation_is_calibrated_on_every_batch_it_is_given():
    g, _ = _one_conv(np.array([[1.0]], np.float32))
    x = np.array([0.3, 0.7, 1.9, 0.0], np.float32).reshape(1, 1, 2, 2)
    small = np.full((1, 1, 2, 2), 0.5, np.float32)
    large = np.full((1, 1, 2, 2), 2.0, np.float32)
    one = reference.int8_simulation(g, [small])(x).reshape(-1)
    both = reference.int8_simulation(g, [large, small])(x).reshape(-1)  # the first batch counts too
    assert one[2] == pytest.approx(0.5, abs=1e-6)  # clipped to the one batch's range
    assert both[2] == pytest.approx(1.9, abs=2.0 / 255)  # inside both batches' range


def test_the_int8_simulation_of_a_network_is_near_the_oracle_not_equal_to_it():
    g = mixed_graph().init_weights(0)
    x = reference.random_input(g, 2, 0)
    calib = [reference.random_input(g, 2, s) for s in (11, 12)]
    ref = reference.run(g, x)
    res = compare(reference.int8_simulation(g, calib)(x), ref, tolerance_for("int8"))
    assert res.passed and 1e-4 < res.rms_rel_err < 0.05
