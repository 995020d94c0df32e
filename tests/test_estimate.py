"""ios_bench.planning.estimate: the stated model of a sweep's duration and a cell's memory, and what earlier
runs on this machine replace in it."""

import json

import pytest

from ios_bench.planning import estimate
from ios_bench.planning.cells import Cell
from tests.harness_helpers import rec


def _model(history=None, **kw):
    return estimate.Model(history or estimate.History(), {"m": 2_000_000_000, "n": 1_000_000_000}, {"m": 40, "n": 20},
                          **kw)


def test_the_stated_model_is_used_where_no_earlier_run_measured():
    m = _model(warmup=3, repeat=10, min_sample_ms=10)
    rate = estimate.STATED["gmacs_per_s"]["default"] * 1e9
    lat = 2e9 * 4 / rate
    assert m.latency_s("m", 4, "torch") == pytest.approx(lat)
    assert m.sources == {"stated model": 1}
    fixed = estimate.STATED["fixed_s"]["default"]
    assert m.round_s("m", 4, "torch") == pytest.approx(fixed + 3 * lat + 10 * max(lat, 0.01)
                                                       + 2 * estimate.STATED["canary_s"])
    assert m.fixed_s("tensorflow") == estimate.STATED["fixed_s"]["tensorflow"]


def test_earlier_records_replace_the_stated_figures():
    h = estimate.History()
    r = rec("m", 1, "torch", median=40.0)
    r.update(repeat=10, warmup=3, number=1,
             rounds=[{"wall_seconds": 2.52, "repeat": 10, "warmup": 3, "number": 1}])
    h.add(r, "run1")
    m = _model(h)
    assert m.latency_s("m", 1, "torch") == pytest.approx(0.040)  # the same cell
    assert m.latency_s("m", 8, "torch") == pytest.approx(0.320)  # another batch size: scaled
    assert m.latency_s("n", 1, "torch") == pytest.approx(0.020)  # another model: the framework's rate
    assert m.fixed_s("torch") == pytest.approx(2.52 - 13 * 0.040)
    assert set(m.sources) == {"earlier runs", "earlier runs (another batch size)",
                              "earlier runs (the framework's rate)"}
    assert h.runs == ["run1"]
    failed = estimate.History()
    failed.add(rec("m", 1, "torch", status="failed"))
    assert failed.latency_ms == {}


def test_the_sweep_estimate_counts_rounds_left_references_and_searches():
    m = _model()
    cells = [Cell("m", "m", 1, "torch", "cpu", None, "torch", 1.0), Cell("n", "n", 1, "onnxruntime", "cpu", None,
                                                                           "onnxruntime", 1.0)]
    est = estimate.sweep_seconds(m, cells, {cells[0].key: 3, cells[1].key: 0}, {("m", 1)}, {("m", 1, "torch")})
    assert est["per_cell"][cells[1].key] == 0  # its rounds are measured already
    one = m.round_s("m", 1, "torch")
    assert est["seconds"] == pytest.approx(3 * one + m.reference_s("m", 1) + m.optimize_s("m", 1, "torch"))


def test_a_first_round_pays_a_cold_build_and_a_search_worker_its_schedules():
    """torch-compile's first round of a cell compiles cold (later ones reuse the run's build cache);
    a cell with rounds already run does not pay it again. A search worker starts once and searches
    each of its schedules."""
    m = _model()
    tc = Cell("m", "m", 1, "torch-compile", "cpu", None, "torch-compile", 1.0)
    cold = estimate.STATED["first_build_s"]["torch-compile"]
    assert cold > 0 and estimate.STATED["first_build_s"]["default"] == 0
    fresh = estimate.sweep_seconds(m, [tc], {tc.key: 3}, set(), {})
    resumed = estimate.sweep_seconds(m, [tc], {tc.key: 2}, set(), {}, fresh=set())
    one = m.round_s("m", 1, "torch-compile")
    assert fresh["seconds"] == pytest.approx(3 * one + cold)
    assert resumed["seconds"] == pytest.approx(2 * one)
    m.calibrated = {"ios-sequential[onnxruntime]": 0.2}
    one_search = m.optimize_s("m", 1, "onnxruntime", 1)
    assert m.optimize_s("m", 1, "onnxruntime", 3) == pytest.approx(0.2 + 3 * (one_search - 0.2))
    both = estimate.sweep_seconds(m, [], {}, set(), {("m", 1, "onnxruntime"): 3})
    assert both["seconds"] == pytest.approx(m.optimize_s("m", 1, "onnxruntime", 3))
    # an earlier run's first rounds are in its measured fixed part: no cold build added
    h = estimate.History()
    h.fixed_s["torch-compile"] = [5.0]
    assert _model(h).first_build_s("torch-compile") == 0.0


def test_the_probes_timings_calibrate_every_framework_without_a_process_of_its_own():
    """The sweep's probe worker times each framework's start (``start_s``; IOS providers:
    ``provider_start_s``); a kind it did not time falls back to a probe of its own."""
    probes = {"cpu": {"adapters": {"torch": {"start_s": 1.1}, "tensorflow": {"start_s": 2.0},
                                   "tvm": {"reason": "not here", "start_s": None}},
                      "provider_start_s": {"onnxruntime": 0.15}}}
    asked = []
    probe = estimate.probed_starts(probes, fallback=lambda kind: asked.append(kind) or 9.0)
    got = estimate.calibrate(["torch", "ios-both[onnxruntime]", "ios-greedy[onnxruntime]", "tensorflow", "jax-xla"],
                             estimate.History(), probe=probe)
    assert got == {"torch": 1.1, "ios-both[onnxruntime]": 0.15, "ios-greedy[onnxruntime]": 0.15, "tensorflow": 2.0,
                   "jax-xla": 9.0}
    assert asked == ["jax-xla"]


def test_only_runs_of_a_machine_like_this_one_are_learned_from(tmp_path):
    cpu = {"model": "CPU X", "usable_cores": 2}
    for name, their_cpu, median in [("same", cpu, 40.0), ("other", {"model": "CPU Y", "usable_cores": 2}, 5.0)]:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "env.json").write_text(json.dumps({"cpu": their_cpu}))
        (folder / "results.jsonl").write_text(json.dumps(rec("m", 1, "torch", median=median)) + "\n")
    found = estimate.earlier_runs(tmp_path / "new")
    assert {p.name for p in found} == {"same", "other"}
    h = estimate.learn(found, cpu)
    assert h.latency_ms == {("m", 1, "torch"): 40.0} and h.runs == ["same"]
    assert not estimate.same_machine({}, cpu)


def test_cell_memory_and_the_fit_check():
    h = estimate.History()
    stated = estimate.cell_memory_mib("torch", 100.0, 10.0, 4, h)
    assert stated == pytest.approx(estimate.STATED["base_mib"]["default"] + 2 * 100 + 2 * 10 * 4)
    # an earlier record's peak replaces the stated base
    h.peak.append(("torch", "m", 1, 700.0))
    learned = estimate.cell_memory_mib("torch", 100.0, 10.0, 4, h, {"m": 10.0}, {"m": 100.0})
    assert learned == pytest.approx((700 - 200 - 20) + 200 + 80)
    assert estimate.too_big(1000, 2000) is None
    why = estimate.too_big(1900, 2000)
    assert why.startswith("not enough memory") and "1,900 MiB" in why and "2,000 MiB" in why


@pytest.mark.parametrize("seconds,text", [(5, "5 s"), (89.2, "90 s"), (600, "10 min"), (3 * 3600 + 300, "3 h 05 min")])
def test_durations_read_as_people_write_them(seconds, text):
    assert estimate.human(seconds) == text


def test_available_memory_is_a_positive_figure():
    assert estimate.available_mib() > 0


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_calibration_measures_a_workers_start_per_kind_within_its_budget():
    """Frameworks no earlier run measured get a worker's start measured now (one probe per kind of
    worker: IOS cells on one provider share one), plus the stated build part; earlier runs win."""
    clock, probed = FakeClock(), []

    def probe(kind):
        probed.append(kind)
        clock.now += {"ios[onnxruntime]": 0.4, "torch": 1.5, "tensorflow": 4.0}.get(kind, 1.0)
        if kind == "tvm":
            raise RuntimeError("no tvm here")
        return {"ios[onnxruntime]": 0.4, "torch": 1.5}.get(kind, 4.0)

    hist = estimate.History()
    hist.fixed_s["openvino"] = [2.2]  # measured by an earlier run: not probed
    fws = ["ios-both[onnxruntime]", "ios-sequential[onnxruntime]", "torch", "openvino", "tvm", "tensorflow",
           "jax-xla"]
    got = estimate.calibrate(fws, hist, probe=probe, clock=clock, budget_s=6.0)
    # tvm failed (stated), the budget was spent after tensorflow: jax-xla is not probed
    assert probed == ["ios[onnxruntime]", "torch", "tvm", "tensorflow"]
    assert got == {"ios-both[onnxruntime]": 0.4, "ios-sequential[onnxruntime]": 0.4, "torch": 1.5, "tensorflow": 4.0}
    m = _model(hist)
    m.calibrated = got
    build = estimate.STATED["build_s"]
    own = estimate.STATED["round_s"]
    assert m.fixed_s("ios-both[onnxruntime]") == pytest.approx(0.4 + own + build["default"])
    assert m.fixed_s("tensorflow") == pytest.approx(4.0 + own + build["tensorflow"])
    assert m.fixed_s("openvino") == 2.2  # earlier runs
    assert m.fixed_s("jax-xla") == estimate.STATED["fixed_s"]["default"]  # stated


def test_a_real_start_probe_times_a_fresh_worker():
    seconds = estimate.start_probe("onnxruntime")
    assert 0.0 < seconds < 120.0


def test_the_eta_corrects_itself_from_finished_rounds():
    """An estimate of 100 s; the first rounds take twice their estimate: the remaining time doubles."""
    clock = FakeClock()
    eta = estimate.Eta(100.0, clock=clock)
    assert eta.remaining() == 100.0 and eta.ratio() is None
    clock.now += 10
    assert eta.remaining() == 90.0  # before any round: the estimate less the time spent
    clock.now += 10
    eta.finished(10.0)  # 20 s for 10 s of estimate
    assert eta.ratio() == pytest.approx(2.0) and eta.remaining() == pytest.approx(180.0)
    clock.now += 5
    assert eta.remaining() == pytest.approx(175.0)  # counts down between rounds
    clock.now += 15
    eta.finished(40.0)  # 40 s for 50 s: faster now, the ratio over everything finished
    assert eta.ratio() == pytest.approx(40 / 50) and eta.remaining() == pytest.approx(50 * 0.8)
    clock.now += 1000
    assert eta.remaining() == 0.0


def test_work_that_will_not_run_leaves_the_eta():
    """IOS cells measured as another's identical schedule never run their rounds: dropped from the
    estimate, the remaining time no longer waits for them."""
    clock = FakeClock()
    eta = estimate.Eta(100.0, clock=clock)
    eta.drop(30.0)
    assert eta.remaining() == pytest.approx(70.0)
    clock.now += 10
    eta.finished(10.0)
    assert eta.remaining() == pytest.approx(60.0)
    eta.drop(1000.0)
    assert eta.remaining() == 0.0


def test_a_first_round_is_not_cold_where_the_user_build_cache_holds_the_build(tmp_path, monkeypatch):
    """``--build-cache user``: a second run's first torch-compile round reuses the sealed inductor
    cache an earlier run left, so the estimate adds no cold build for it (nor on a GPU's cache)."""
    from adapters.build_cache import ENV, MANIFEST

    m = _model()
    cold = estimate.STATED["first_build_s"]["torch-compile"]
    monkeypatch.setenv(ENV, str(tmp_path))
    assert m.first_build_s("torch-compile") == cold  # nothing there yet
    (tmp_path / "torch-inductor").mkdir()
    assert m.first_build_s("torch-compile") == cold  # files without a manifest: a build that did not finish
    (tmp_path / "torch-inductor" / MANIFEST).write_text("{}")
    assert m.first_build_s("torch-compile") == 0.0 and m.first_build_s("torch-compile-cudagraphs") == 0.0
    (tmp_path / "torch-inductor" / MANIFEST).unlink()
    (tmp_path / "torch-inductor@nvidia-h200").mkdir()
    (tmp_path / "torch-inductor@nvidia-h200" / MANIFEST).write_text("{}")
    assert m.first_build_s("torch-compile") == 0.0
    monkeypatch.setenv(ENV, "off")
    assert m.first_build_s("torch-compile") == cold


# ---- this machine's speed now (issue 46 item 1) -----------------------------------------------------


def test_the_speed_probe_is_the_least_of_the_rounds_canaries_after_one_untimed_try():
    asked, slept, times = [], [], iter([99.0, 9.0, 4.5, 8.0])  # the untimed try, then a burst, a free core, a burst
    got = estimate.speed_probe(3, canary=lambda reps: asked.append(reps) or next(times), sleep=slept.append)
    assert got == 4.5 and asked == [1, 5, 5, 5] and slept == [estimate.PROBE_PAUSE_S] * 2
    assert 0 < estimate.speed_probe(2) < 1000  # the real canary, on this machine (ms)


def test_a_fake_probe_scales_what_was_not_measured_now_within_its_bounds():
    stated = estimate.STATED["canary_ms"]
    assert estimate.speed_factor(None, stated) == 1.0 and estimate.speed_factor(stated, None) == 1.0
    assert estimate.speed_factor(1.5 * stated, stated) == pytest.approx(1.5)
    low, high = estimate.SPEED_BOUNDS
    assert estimate.speed_factor(100 * stated, stated) == high and estimate.speed_factor(stated / 100, stated) == low
    cells = [Cell("m", "m", 1, "torch", "cpu", None, "torch", 1.0), Cell("n", "n", 4, "openvino", "cpu", None,
                                                                           "openvino", 1.0)]

    def total(m):
        rounds = {c.key: 3 for c in cells}
        return estimate.sweep_seconds(m, cells, rounds, {("m", 1)}, {("m", 1, "torch"): 2})["seconds"]

    plain = _model()
    assert plain.speed_note() == ""  # no probe: the figures as they are
    slow, fast, absurd = _model(probe_ms=1.5 * stated), _model(probe_ms=0.7 * stated), _model(probe_ms=50 * stated)
    canaries = 6 * 2 * estimate.STATED["canary_s"]  # a canary lasts its stated time: not scaled

    def scaled(k):
        return canaries + k * (total(plain) - canaries)

    assert total(slow) == pytest.approx(scaled(1.5)) and total(fast) == pytest.approx(scaled(0.7))
    assert total(absurd) == pytest.approx(scaled(high))  # bounded
    assert slow.speed_note().startswith("scaled by 1.50 for this machine's speed now")
    assert "bounded to 0.5-2.0" in absurd.speed_note()
    # a worker's start measured now is this machine's speed already: only the stated part is scaled
    for m in (plain, slow):
        m.calibrated = {"torch": 1.0}
    assert slow.fixed_s("torch") - 1.0 == pytest.approx(1.5 * (plain.fixed_s("torch") - 1.0))
    # earlier runs' figures are scaled against their rounds' canaries, not the stated one
    h = estimate.History()
    r = rec("m", 1, "torch", median=40.0)
    r["rounds"] = [{"interference": {"canary_before_ms": 2 * stated, "canary_after_ms": 2 * stated}}]
    h.add(r, "run1")
    assert h.canary_ms == [2 * stated]
    m = _model(h, probe_ms=3 * stated)
    assert m.latency_s("m", 1, "torch") == pytest.approx(0.040 * 1.5)
    assert m.latency_s("n", 1, "openvino") == pytest.approx(1e9 / (60e9) * 2.0)  # a stated figure: 3x, bounded
    assert "1.50 for earlier runs' figures" in m.speed_note()
