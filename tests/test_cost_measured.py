"""ios_core.cost (measured, cache): the measured cost model, its modes (stage, calibrated, hybrid,
composed), and its persistent profile database, keyed by the spin environment and provider."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from ios_core.cost import cache as cost_cache
from ios_core.cost.cache import ProfileCache, default_path, stage_signature
from ios_core.cost.measured import MeasuredCostModel, make_measured_cost_model
from ios_core.ir import GraphBuilder
from ios_core.measurement import threads
from ios_core.optimizer import schedule
from ios_core.optimizer.stage import Stage
from tests.runtime_helpers import fan_graph, mixed_graph

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


@pytest.mark.parametrize("off", ["off", "OFF", "no", "false", "0", "none", False, None])
def test_cache_off_in_any_spelling_keeps_no_database(tmp_path, monkeypatch, off):
    # `ios-bench optimize --cost-option cache=off` once made a database in a folder named "off"
    monkeypatch.chdir(tmp_path)
    cm = MeasuredCostModel(cache=off, threads=1, **STAGE)
    assert cm.cache is None
    assert list(tmp_path.iterdir()) == []


def test_cache_names_a_database_of_its_own(tmp_path):
    cm = MeasuredCostModel(cache=str(tmp_path / "own.sqlite"), threads=1, **STAGE)
    assert cm.cache is not None and cm.cache.path == tmp_path / "own.sqlite"


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


def test_cache_key_includes_spin_environment_and_provider(monkeypatch, tmp_path):
    monkeypatch.setenv("GOMP_SPINCOUNT", "20000")
    monkeypatch.setenv(threads.POLICY_VAR, "short-spin")
    a = cost_cache.device_fingerprint("cpu")
    monkeypatch.setenv("GOMP_SPINCOUNT", "300000")
    b = cost_cache.device_fingerprint("cpu")
    monkeypatch.setenv(threads.POLICY_VAR, "default")
    c = cost_cache.device_fingerprint("cpu")
    assert len({a[0], b[0], c[0]}) == 3
    assert json.loads(a[1])["environment"]["GOMP_SPINCOUNT"] == "20000"
    # a different spin environment does not read the other's rows
    g, nodes = fan_graph()
    monkeypatch.setenv("GOMP_SPINCOUNT", "20000")
    db = tmp_path / "p.sqlite"
    MeasuredCostModel(threads=1, cache=db, **FAST).stage_latency(Stage("parallel", [[nodes[0]]]), 1)
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    cm = MeasuredCostModel(threads=1, cache=db, **FAST)
    cm.stage_latency(Stage("parallel", [[nodes[0]]]), 1)
    assert cm.hits == 0 and cm.measured == 1
    with pytest.raises(ValueError, match="provider 'nope' is not available"):
        MeasuredCostModel(provider="nope", cache=False)


def test_calibrated_mode_measures_operators_concurrently_and_caches(tmp_path):
    g, nodes = fan_graph()
    db = tmp_path / "p.sqlite"
    cm = MeasuredCostModel(threads=2, cache=db, **FAST)
    assert cm.mode == "calibrated"  # the default
    par = Stage("parallel", [[nodes[0]], [nodes[1]], [nodes[2]]])
    one = Stage("parallel", [[nodes[1]]])
    t_par = cm.stage_latency(par, 1)
    t_one = cm.stage_latency(one, 1)
    assert t_par > 0 and t_one > 0
    # distinct operators x (the full budget for the single stage, concurrent 1+1 for the parallel
    # one): two distinct convolution shapes concurrent (the two 3x3 are the same operator), one
    # alone, and the pool dispatch
    assert cm.measured == 4
    assert t_par >= cm.dispatch_ms()
    again = MeasuredCostModel(threads=2, cache=db, **FAST)
    assert again.stage_latency(par, 1) == t_par and again.stage_latency(one, 1) == t_one
    assert again.measured == 0 and again.hits >= 3


def test_hybrid_mode_measures_or_prunes_every_concurrent_stage():
    g, nodes = fan_graph()
    cm = MeasuredCostModel(threads=2, cache=False, mode="hybrid", **FAST)
    stages = [Stage("parallel", [[nodes[0]], [nodes[1]]]), Stage("parallel", [[nodes[1]], [nodes[2]]]),
              Stage("parallel", [[nodes[0]], [nodes[1]], [nodes[2]]])]
    for st in stages:
        assert cm.stage_latency(st, 1) > 0
    singles = 2  # the 1x1 and the 3x3 operators at the full budget
    composed_shares = 2  # composition at one thread each (optimistic, alone)
    primed = cm.measured - singles - composed_shares - 1  # and the pool dispatch
    assert cm.pruned + primed == len(stages)
    with pytest.raises(ValueError, match="mode must be one of"):
        MeasuredCostModel(mode="fast", cache=False)


def test_second_optimization_reuses_block_schedules(tmp_path):
    g, _ = fan_graph()
    g.init_weights(0)
    db = tmp_path / "p.sqlite"
    first = schedule(g, "both", MeasuredCostModel(threads=2, cache=db, **FAST), validate=False)
    assert first.stats.blocks_reused == 0 and first.stats.states > 0
    cm = MeasuredCostModel(threads=2, cache=db, **FAST)
    second = schedule(g, "both", cm, validate=False)
    st = second.stats
    assert st.blocks_reused == len(g.blocks) and st.states == 0 and cm.calls == 0
    assert [b.stages for b in second.graph.blocks] == [b.stages for b in first.graph.blocks]
    assert st.cost_ms == pytest.approx(first.stats.cost_ms)
    assert "block schedules reused" in st.summary()
    # other search parameters or another provider/mode are other keys
    other = schedule(g, "both", MeasuredCostModel(threads=2, cache=db, mode="composed", **FAST), validate=False)
    assert other.stats.blocks_reused == 0
