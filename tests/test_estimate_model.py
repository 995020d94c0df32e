"""ios_bench.planning.estimate_model: a round's fixed part of a network no earlier run measured, fitted to its
size (operators, parameters) from the networks earlier runs measured (``Model.size_fit``), and a first build
where the build cache holds the cell's own."""

import pytest

from ios_bench.planning import estimate
from tests.harness_helpers import rec

LAT_MS = 1.0  # each record's call: 10 calls of 1 ms, subtracted from a round's wall
# a round's protocol as its worker records it: with the output check, 10 calls in all
TEN_CALLS = {"warmup_calls": 0, "calibration_calls": 0, "samples": 9, "number": 1}
# name -> (operators, parameters)
SIZES = {"a": (10, 1_000_000), "b": (50, 30_000_000), "c": (120, 5_000_000), "d": (300, 60_000_000),
         "new": (5, 8_000_000)}


def _planar(ops: int, params: int) -> float:
    """A fixed part that a start and a build per operator and per million parameters make exactly."""
    return 0.4 + 0.01 * ops + 0.05 * params / 1e6


def _history(fixed: dict, kind: str = "onnxruntime", batch: int = 1) -> estimate.History:
    """Earlier runs' records of ``kind``: each network's three rounds lasting its fixed part plus its calls."""
    h = estimate.History()
    for name, f in fixed.items():
        _add(h, name, f, kind, batch)
    return h


def _add(h: estimate.History, name: str, fixed: float, kind: str = "onnxruntime", batch: int = 1) -> None:
    r = rec(name, batch, kind, median=LAT_MS)
    r["rounds"] = [{"round": i, "status": "ok", "wall_seconds": fixed + 10 * LAT_MS / 1000, "protocol": TEN_CALLS,
                    "repeat": 10, "warmup": 3, "number": 1} for i in range(3)]
    h.add(r)


def _model(h: estimate.History, sizes: dict = SIZES) -> estimate.Model:
    return estimate.Model(h, {n: 1_000_000_000 for n in sizes}, {n: o for n, (o, _) in sizes.items()},
                          params={n: p for n, (_, p) in sizes.items()})


def test_a_network_no_run_measured_gets_the_fixed_part_of_its_size():
    """A small network among bigger measured ones: its fixed part follows the others' dependence on the size
    (a start, per operator, per parameter), not their median (the big networks' builds)."""
    h = _history({n: _planar(*SIZES[n]) for n in "abcd"})
    m = _model(h)
    assert m.size_fit("onnxruntime")[0] == pytest.approx((0.4, 0.01, 0.05), abs=1e-6)
    assert m.fixed_s("onnxruntime", "new") == pytest.approx(_planar(*SIZES["new"]))  # 0.85 s; their median 2.8
    assert m.fixed_s("onnxruntime", "b") == pytest.approx(_planar(*SIZES["b"]))  # its own, learnt as before
    own = _history({**{n: _planar(*SIZES[n]) for n in "abcd"}, "new": 5.0})
    assert _model(own).fixed_s("onnxruntime", "new") == pytest.approx(5.0)  # measured: its own, not the fit's
    assert m.fixed_s("openvino", "new") == estimate.STATED["fixed_s"]["openvino"]  # another kind: none learnt


def test_the_fit_takes_batch_1_rounds_of_networks_of_known_size_and_needs_three():
    """Rounds at another batch (a bigger input, more to check) and networks whose size is not known stay out
    of the fit; with fewer than three networks the stated build part is moved to the size as before."""
    fixed = {n: _planar(*SIZES[n]) for n in "abcd"}
    h = _history(fixed)
    _add(h, "b", 40.0, batch=16)
    _add(h, "unknown", 60.0)
    assert h.fixed_by_batch[("onnxruntime", "b", 16)] == [pytest.approx(40.0)] * 2  # its first round learnt apart
    assert h.fixed_by_batch[("onnxruntime", "b", 1)] == [pytest.approx(fixed["b"])] * 2
    assert _model(h).fixed_s("onnxruntime", "new") == pytest.approx(_planar(*SIZES["new"]))
    two = _history({n: fixed[n] for n in "ab"})
    assert _model(two).size_fit("onnxruntime") is None
    # without a fit: what it was before (the other networks' fixed parts, less their stated build part), as for a
    # network whose parameters are not known
    before = _model(two)
    before.params = {}
    assert _model(two).fixed_s("onnxruntime", "new") == pytest.approx(before.fixed_s("onnxruntime", "new"))
    assert before.fixed_s("onnxruntime", "new") != pytest.approx(_planar(*SIZES["new"]), rel=0.05)


def test_the_fit_weighs_each_network_by_its_own_fixed_part():
    """A big network off the others' line does not swamp the small ones' (each network's error counts as a
    share of its fixed part): a small network between two small measured ones gets about theirs."""
    sizes = {"s1": (10, 1_000_000), "s2": (20, 2_000_000), "mid": (100, 20_000_000), "big": (300, 80_000_000),
             "s3": (15, 1_500_000)}
    h = _history({"s1": 2.0, "s2": 2.4, "mid": 6.0, "big": 60.0})
    got = _model(h, sizes).fixed_s("onnxruntime", "s3")
    assert 2.0 <= got <= 2.4  # least squares in seconds: 1.1 s, half of either neighbour's


def test_the_fit_is_never_below_the_least_start_measured():
    """A fit whose start is nothing (the sizes explain every network) leaves a tiny network the least of a
    worker's start (WORKER_START_S) and the least fixed part measured of its kind, not nothing."""
    from ios_bench.planning.estimate_stated import WORKER_START_S

    sizes = {**SIZES, "tiny": (1, 10_000)}
    h = _history({n: 0.01 * SIZES[n][0] + 0.05 * SIZES[n][1] / 1e6 for n in "abcd"})
    least = min(0.01 * SIZES[n][0] + 0.05 * SIZES[n][1] / 1e6 for n in "abcd")
    assert _model(h, sizes).fixed_s("onnxruntime", "tiny") == pytest.approx(min(WORKER_START_S, least))


def test_a_first_build_is_none_where_the_cache_holds_the_cells_own_even_where_runs_measured_one():
    """Earlier runs' cold first builds of the kind do not stand for a cell whose build the cache the rounds will
    use already holds (its first round loads it, as the later ones do); another cell's is still charged."""
    h = _history({n: _planar(*SIZES[n]) for n in "bcd"}, kind="torch-compile")
    r = rec("a", 1, "torch-compile", median=LAT_MS)
    r["rounds"] = [{"round": i, "status": "ok", "wall_seconds": w, "protocol": TEN_CALLS, "repeat": 10, "warmup": 3,
                    "number": 1} for i, w in enumerate([9.0, 3.0, 3.0])]
    h.add(r)
    m = _model(h)
    m.warm_cache = lambda framework, model, batch: (framework, model, batch) == ("torch-compile", "a", 1)
    assert m.first_build_s("torch-compile", "a", 1) == 0.0
    assert m.first_build_s("torch-compile", "a", 16) == pytest.approx(6.0)  # its own, learnt: 9 s less 3
