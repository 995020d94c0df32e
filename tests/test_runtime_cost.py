"""The measured cost model and its persistent profile database."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from ios_core.cost.cache import ProfileCache, default_path, stage_signature
from ios_core.cost.measured import MeasuredCostModel, make_measured_cost_model
from ios_core.ir import GraphBuilder
from ios_core.optimizer.stage import Stage
from tests.runtime_helpers import mixed_graph

FAST = dict(warmup=1, number=1, repeat=2, min_sample_ms=None)
STAGE = dict(FAST, mode="stage")  # every distinct stage timed (the default mode is "calibrated")


def _fire(prefix_offset: int = 0, channels: int = 16):
    """A block with three parallel convolutions reading one input (no weights: the cost
    model never needs them)."""
    b = GraphBuilder(f"fire{prefix_offset}", (channels, 12, 12))
    for _ in range(prefix_offset):
        b._new_name()
    x = b.input
    a = b.conv(x, channels, 1)
    c = b.conv(x, channels, 3, padding=1)
    d = b.conv(x, channels, 3, padding=1)
    e = b.conv(d, channels, 1)
    b.end_block(b.concat([a, c, e]))
    g = b.finish()
    return g, g.blocks[0].nodes


def test_signature_ignores_names_but_not_parameters():
    _, n1 = _fire(0)
    _, n2 = _fire(7)
    assert n1[0].name != n2[0].name
    s1 = stage_signature("parallel", [[n1[0]], [n1[1]]])[0]
    assert s1 == stage_signature("parallel", [[n2[0]], [n2[1]]])[0]
    assert s1 != stage_signature("parallel", [[n1[1]], [n1[0]]])[0]
    assert s1 != stage_signature("parallel", [[n1[0], n1[1]]])[0]
    _, n3 = _fire(0, channels=8)
    assert s1 != stage_signature("parallel", [[n3[0]], [n3[1]]])[0]
    # the chain d -> e: internal reference, not an external input
    assert stage_signature("parallel", [[n1[2], n1[3]]])[0] != stage_signature("parallel", [[n1[2]], [n1[3]]])[0]


def test_measured_latency_and_cache_hits(tmp_path):
    _, nodes = _fire(0)
    stages = [Stage("parallel", [[nodes[0]], [nodes[1]]]), Stage("parallel", [[nodes[2], nodes[3]]]),
              Stage("parallel", [[nodes[0]]]), Stage("parallel", [[nodes[4]]])]
    db = tmp_path / "p.sqlite"
    cm = make_measured_cost_model(cache=db, threads=2, **STAGE)
    first = [cm.stage_latency(s, 1) for s in stages]
    assert all(t > 0 for t in first)
    assert cm.misses == 4 and cm.hits == 0 and cm.measured == 4
    # same object: in-memory
    assert cm.stage_latency(stages[0], 1) == first[0] and cm.measured == 4
    # a new process-level object on the same database (another model with the same operators)
    _, other = _fire(5)
    cm2 = MeasuredCostModel(cache=db, threads=2, **STAGE)
    again = [cm2.stage_latency(Stage("parallel", [[other[0]], [other[1]]]), 1),
             cm2.stage_latency(Stage("parallel", [[other[2], other[3]]]), 1)]
    assert again == first[:2]
    assert cm2.misses == 0 and cm2.hits == 2 and cm2.measured == 0
    # another batch size or thread budget is another measurement
    cm2.stage_latency(stages[0], 2)
    assert cm2.misses == 1
    cm3 = MeasuredCostModel(cache=db, threads=1, **STAGE)
    cm3.stage_latency(stages[0], 1)
    assert cm3.misses == 1
    assert ProfileCache(db).count() == 6


def test_cache_location_env(tmp_path, monkeypatch):
    monkeypatch.setenv("IOS_BENCH_CACHE", str(tmp_path / "dir"))
    assert default_path() == tmp_path / "dir" / "profiles.sqlite"
    monkeypatch.setenv("IOS_BENCH_CACHE", str(tmp_path / "x.db"))
    assert default_path() == tmp_path / "x.db"
    cm = MeasuredCostModel(**STAGE)
    assert cm.cache.path == tmp_path / "x.db"


def test_no_cache_and_mixed_ops():
    g = mixed_graph()
    cm = MeasuredCostModel(cache=False, threads=2, **STAGE)
    for block in g.blocks:
        for node in block.nodes:
            assert cm.stage_latency(Stage("parallel", [[node]]), 1) > 0
    assert cm.hits == 0


def test_composed_mode(tmp_path):
    _, nodes = _fire(0)
    cm = MeasuredCostModel(cache=tmp_path / "c.sqlite", threads=2, mode="composed", **FAST)
    par = cm.stage_latency(Stage("parallel", [[nodes[0]], [nodes[1]], [nodes[2], nodes[3]]]), 1)
    n_after_first = cm.measured
    # four convolutions, two distinct (1x1 and 3x3 on a 16x12x12 input), at one thread each, and
    # the pool dispatch
    assert n_after_first == 3
    seq = cm.stage_latency(Stage("parallel", [[nodes[2], nodes[3]]]), 1)
    assert cm.measured == 5  # the two again at the full two threads
    assert par > 0 and seq > 0 and cm.dispatch_ms() > 0


def _worker(db, q):
    _, nodes = _fire(0)
    cm = MeasuredCostModel(cache=db, threads=1, **STAGE)
    for i in range(4):
        cm.stage_latency(Stage("parallel", [[nodes[i]]]), 1)
    q.put(cm.measured)


def test_two_processes_share_the_database(tmp_path):
    db = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_worker, args=(db, q)) for _ in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(120)
        assert p.exitcode == 0
    assert sum(q.get() for _ in ps) >= 2  # two distinct operators; both processes may measure them
    assert ProfileCache(db).count() == 2


def test_bad_options():
    with pytest.raises(ValueError):
        MeasuredCostModel(mode="guess", cache=False)
    with pytest.raises(RuntimeError):
        MeasuredCostModel(device="cuda", cache=False)


def test_merge_stage_is_measured_as_one_convolution(tmp_path):
    from ios_core.optimizer.merge import can_merge

    _, nodes = _fire(0)
    assert can_merge([nodes[0], nodes[1]])
    cm = MeasuredCostModel(cache=tmp_path / "m.sqlite", threads=2, **STAGE)
    merged = cm.stage_latency(Stage("merge", [[nodes[0]], [nodes[1]]]), 1)
    par = cm.stage_latency(Stage("parallel", [[nodes[0]], [nodes[1]]]), 1)
    assert merged > 0 and par > 0 and cm.measured == 2  # distinct signatures
    # the merged stage's signature does not depend on names either
    _, other = _fire(3)
    cm2 = MeasuredCostModel(cache=tmp_path / "m.sqlite", threads=2, **STAGE)
    assert cm2.stage_latency(Stage("merge", [[other[0]], [other[1]]]), 1) == merged and cm2.hits == 1


def test_concurrency_pairs_from_the_database(tmp_path):
    """``concurrency_pairs`` pairs an operator measured alone at the full budget with the same
    operator measured concurrently (stored under its worker's share), per method."""
    from ios_core.cost.cache import ProfileCache
    from ios_core.cost.measured import concurrency_pairs

    db = ProfileCache(tmp_path / "p.sqlite")
    db.put(1, 2, "m", "sigA", 1.0)
    db.put(1, 1, "m", "concurrent1x1:sigA", 1.6)  # two copies at once: 2 x 1.0 / 1.6 = 1.25x
    db.put(1, 2, "m", "sigB", 0.5)  # measured alone only: no pair
    db.put(1, 1, "m", "concurrent1x1:sigC", 0.7)  # concurrent only: no pair
    db.put(1, 2, "m2", "sigA", 3.0)  # another method (provider): its own list
    db.put(16, 1, "m", "concurrent1x1:sigA", 9.0)  # another batch size
    assert concurrency_pairs(db, 1, 2) == {"m": [(2, 1.0, 1.6)]}
    assert concurrency_pairs(db, 1, 4) == {}  # shares must add up to the budget asked about
    db.close()


def test_a_stage_taken_again_for_a_disturbed_machine_counts_once(tmp_path):
    """Every first attempt is judged disturbed and taken again: each stage still counts once as
    measured, and what building it measured (the pool's dispatch cost, timed while the first
    attempt's stage is built) counts too, so every cache miss is one measurement."""
    from ios_core import models
    from ios_core.cost import make_cost_model
    from ios_core.optimizer import schedule

    g = models.get("sample", input_shape=(16, 8, 8)).init_weights(0)
    cm = make_cost_model("measured", cache=tmp_path / "p.sqlite", warmup=1, number=1, repeat=2, min_sample_ms=None)
    calls = []

    def judge(figures, thresholds=None):
        calls.append(1)
        return "test: disturbed" if len(calls) % 2 else None  # every stage's first attempt

    cm._canary.judge = judge
    schedule(g, "both", cm, batch_size=1, validate=False)
    assert cm.disturbed > 0 and cm.disturbed == len(calls) // 2
    assert cm.measured > 0 and cm.misses == cm.measured
