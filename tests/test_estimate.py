"""ios_bench.planning.estimate: the stated model of a sweep's duration and a cell's memory, and what earlier
runs on this machine replace in it."""

import json

import pytest

from ios_bench.planning import estimate
from ios_bench.planning.cells import Cell
from ios_bench.results import cell_key
from tests.harness_helpers import rec


def _model(history=None, **kw):
    return estimate.Model(history or estimate.History(), {"m": 2_000_000_000, "n": 1_000_000_000}, {"m": 40, "n": 20},
                          **kw)


def test_tflite_has_stated_rates_labelled_where_they_come_from():
    """issue 57: TFLite is its own framework: its fp32 and int8 rates are what the quiet page its source names
    measured (multiply-adds over each cell's median latency, the median over its cells), recomputed here from
    that page's table; tensorflow's int8 has none of its own."""
    import re
    import statistics

    from ios_bench.planning.estimate_stated import stated_rate
    from ios_core import models

    from .conftest import ROOT

    page = ROOT / "docs/results/precision/tflite-own-framework-2026-11-29.md"
    rows = [line.split("|")[1:-1] for line in page.read_text().splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0]]
    cells = {r[0].strip(): [c.strip() for c in r] for r in rows[1:]}
    for key, column in (("tflite", "tflite fp32 ms"), ("tflite@int8", "tflite int8 ms")):
        rate, source = stated_rate(key)
        ms = {m: float(re.match(r"[0-9.]+", cells[m][header.index(column)]).group()) for m in ("inception_v3",
                                                                                             "squeezenet")}
        measured = statistics.median(models.get(m).macs() / (t / 1e3) / 1e9 for m, t in ms.items())
        assert rate == pytest.approx(measured, rel=0.01), (key, measured)
        assert source.startswith("measured: ") and page.name in source
    assert "tensorflow@int8" not in estimate.STATED["gmacs_per_s"]
    assert estimate.STATED["fixed_s"]["tflite"] == estimate.STATED["fixed_s"]["tensorflow"]  # its worker imports TF


def test_the_stated_model_is_used_where_no_earlier_run_measured():
    m = _model(warmup=3, repeat=10, min_sample_ms=10)
    rate = estimate.STATED["gmacs_per_s"]["torch"] * 1e9  # torch's own stated rate, measured on this machine
    lat = 2e9 * 4 / rate
    assert m.latency_s("m", 4, "torch") == pytest.approx(lat)
    assert m.sources == {"stated rate (measured)": 1}
    assert m.latency_s("m", 1, "jax-xla") == pytest.approx(2e9 / (estimate.STATED["gmacs_per_s"]["default"] * 1e9))
    assert "stated rate (assumed)" in m.sources  # no committed figure for jax-xla: the default, said so
    fixed = estimate.STATED["fixed_s"]["default"]
    # the build: the model's fp32 latencies at batch 1, a share of them at its 40 operators
    share = (40 - estimate.BUILD_BASE_OPS) / (estimate.BUILD_FULL_OPS - estimate.BUILD_BASE_OPS)
    build = estimate.STATED["build_latencies"]["torch"] * 2e9 / rate * share
    # a call lasts 147 ms: 1 output check, 3 warmup, 1 calibration call, 10 timed: 15 calls
    assert m.round_s("m", 4, "torch") == pytest.approx(fixed + build + 15 * lat + 2 * estimate.STATED["canary_s"])
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
    assert m.fixed_s("torch") == pytest.approx(2.52 - 15 * 0.040)  # 1 check, 3 warmup, 1 calibration, 10 timed
    counted = estimate.History()  # a round that records its protocol: its calls, not the plan's
    r["rounds"][0]["calls"] = 7  # its timed calls only, the check and its warmup besides
    r["rounds"][0]["protocol"] = {"warmup_calls": 1, "calibration_calls": 0, "samples": 7, "number": 1}
    counted.add(r)
    assert counted.fixed_s["torch"] == pytest.approx([2.52 - 9 * 0.040])
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


def test_an_int8_cells_reference_step_counts_its_check_batches_and_the_oracles_int8_simulation():
    """At batch 1 an int8 cell's reference step runs the oracle on 15 further seeded batches, calibrates the
    int8 simulation on 16 samples and runs it on all 16 checked batches: 47 more batch-1 passes than fp32's;
    at batch 16, one calibration batch and the simulation of the one checked batch: 2 more."""
    m = _model()
    fp32 = Cell("m", "m", 1, "torch", "cpu", None, "torch", 1.0)
    int8 = Cell("m", "m", 1, "torch", "cpu", None, "torch", 1.0, precision="int8")
    lat = m.latency_s("m", 1, "torch", count=False)
    assert m.reference_s("m", 1, int8=True) - m.reference_s("m", 1) == pytest.approx(47 * lat)
    assert m.reference_s("m", 16, int8=True) - m.reference_s("m", 16) == pytest.approx(
        2 * m.latency_s("m", 16, "torch", count=False))
    with_int8 = estimate.sweep_seconds(m, [fp32, int8], {fp32.key: 0, int8.key: 0}, {("m", 1)}, set())
    fp32_only = estimate.sweep_seconds(m, [fp32], {fp32.key: 0}, {("m", 1)}, set())
    assert with_int8["seconds"] - fp32_only["seconds"] == pytest.approx(47 * lat)


def test_a_first_round_pays_a_cold_build_and_a_search_worker_its_schedules():
    """torch-compile's first round of a cell compiles cold (later ones reuse the run's build cache);
    a cell with rounds already run does not pay it again. A search worker starts once and times its
    stages once (one cost model for all its schedules); each schedule adds its own part; an earlier
    run's worker of that key is the sum of its schedules."""
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
    assert m.optimize_s("m", 1, "onnxruntime", 3) == pytest.approx(one_search
                                                                    + 2 * estimate.STATED["optimize_schedule_s"])
    both = estimate.sweep_seconds(m, [], {}, set(), {("m", 1, "onnxruntime"): 3})
    assert both["seconds"] == pytest.approx(m.optimize_s("m", 1, "onnxruntime", 3))
    # an earlier run's first rounds are in its measured fixed part: no cold build added
    h = estimate.History()
    h.fixed_s["torch-compile"] = [5.0]
    assert _model(h).first_build_s("torch-compile") == 0.0
    for schedule, seconds in (("sequential", 0.1), ("greedy", 1.5), ("both", 2.0)):
        r = rec("m", 1, f"ios-{schedule}[onnxruntime]", median=10.0)
        r.update(provider="onnxruntime", schedule=schedule, optimize_seconds=seconds)
        h.add(r)
    learnt = _model(h)
    learnt.calibrated = {"ios-sequential[onnxruntime]": 0.2}
    assert learnt.optimize_s("m", 1, "onnxruntime", 3) == pytest.approx(0.2 + 3.6)


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
    cache an earlier run left with the cell's own build named in it, so the estimate adds no cold build
    for it (nor on a GPU's cache); a manifest that names no builds cannot say, and is cold."""
    from adapters.build_cache import ENV, MANIFEST

    m = _model()
    cold = m.first_build_s("torch-compile", "sample", 1)
    assert cold > 0
    monkeypatch.setenv(ENV, str(tmp_path))
    assert m.first_build_s("torch-compile", "sample", 1) == cold  # nothing there yet
    (tmp_path / "torch-inductor").mkdir()
    assert m.first_build_s("torch-compile", "sample", 1) == cold  # files without a manifest: an unfinished build
    (tmp_path / "torch-inductor" / MANIFEST).write_text("{}")
    assert m.first_build_s("torch-compile", "sample", 1) == cold  # sealed before builds were named: cannot say
    (tmp_path / "torch-inductor" / MANIFEST).write_text(json.dumps({"builds": ["sample|b1|fp32"]}))
    assert m.first_build_s("torch-compile", "sample", 1) == 0.0
    assert m.first_build_s("torch-compile-cudagraphs", "sample", 1) == 0.0
    (tmp_path / "torch-inductor" / MANIFEST).unlink()
    (tmp_path / "torch-inductor@nvidia-h200").mkdir()
    (tmp_path / "torch-inductor@nvidia-h200" / MANIFEST).write_text(json.dumps({"builds": ["sample|b1|fp32"]}))
    assert m.first_build_s("torch-compile", "sample", 1) == 0.0
    monkeypatch.setenv(ENV, "off")
    assert m.first_build_s("torch-compile", "sample", 1) == cold


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
    openvino = estimate.STATED["gmacs_per_s"]["openvino"] * 1e9
    assert m.latency_s("n", 1, "openvino") == pytest.approx(1e9 / openvino * 2.0)  # a stated figure: 3x, bounded
    assert "1.50 for earlier runs' figures" in m.speed_note()


def test_earlier_runs_figures_are_scaled_only_when_the_canary_now_leaves_the_range_theirs_spanned():
    # their rounds' canaries: 0.8 to 1.2 ms (10th-90th percentile 0.84-1.16); the probe reads 0.9-1.3 ms on
    # this VM minutes apart, and the same plan's estimate moved 30 % when scaled against their median
    then = [0.8, 0.9, 1.0, 1.1, 1.2]
    low, high = estimate.canary_band(then)
    assert (low, high) == (pytest.approx(0.84), pytest.approx(1.16))
    assert estimate.band_factor(0.85, then) == 1.0 and estimate.band_factor(1.15, then) == 1.0
    assert estimate.band_factor(1.45, then) == pytest.approx(1.45 / 1.16)  # slower than any of theirs
    assert estimate.band_factor(0.42, then) == pytest.approx(0.42 / 0.84)  # faster than any of theirs
    assert estimate.band_factor(None, then) == 1.0 and estimate.band_factor(1.0, []) == 1.0
    assert estimate.band_factor(100.0, then) == estimate.SPEED_BOUNDS[1]
    h = estimate.History()
    for i, c in enumerate(then):
        r = rec("m", 1, "torch", median=40.0)
        r["rounds"] = [{"interference": {"canary_before_ms": c, "canary_after_ms": c}}]
        h.add(r, f"run{i}")
    inside, outside = _model(h, probe_ms=1.13), _model(h, probe_ms=2.32)
    assert inside.latency_s("m", 1, "torch") == pytest.approx(0.040)  # as learnt
    assert outside.latency_s("m", 1, "torch") == pytest.approx(0.040 * 2.0)
    assert "1.00 for earlier runs' figures" in inside.speed_note() and "0.84-1.16 ms" in inside.speed_note()
    # the stated figures keep their own canary (3.9 ms stated): 1.13 ms is a faster machine, bounded
    assert inside.speed(False) == estimate.SPEED_BOUNDS[0]


# ---- precision and kernel provider in the estimate (issue 46 item 1) ---------------------------------

# runs/prec-a (2026-11-27 12:36-13:10 UTC, this 2-core VM, nothing else running): its plan and what it took
PREC_A_MEASURED_S = 2013.5  # env.json duration_s; the estimator then said 395 s ("about 7 min")
PREC_A_STARTS = {"onnxruntime": 0.183, "openvino": 0.241, "torch": 1.359, "tensorflow": 2.26, "ios-both": 1.359,
                 "ios-both[onnxruntime]": 0.215, "ios-both[openvino]": 0.241,  # its workers' starts, measured then
                 "tflite": 2.26}  # its int8 cells were tensorflow's then, the same worker (issue 57: tflite's now)
PREC_A_CELLS = {"fp32": ["onnxruntime", "openvino", "torch", "tensorflow", "ios-both", "ios-both[onnxruntime]",
                         "ios-both[openvino]"],
                "bf16": ["openvino", "torch", "tensorflow", "ios-both[openvino]"],
                "int8": ["onnxruntime", "openvino", "torch", "tflite", "ios-both[onnxruntime]",
                         "ios-both[openvino]"]}


def _prec_a_plan():
    from ios_bench.planning.loading import load_graph

    graphs = {n: load_graph(n) for n in ("inception_v3", "randwire")}
    m = estimate.Model(estimate.History(), {n: g.macs() for n, g in graphs.items()},
                       {n: g.num_operators() for n, g in graphs.items()},
                       {n: estimate.search_states(g) for n, g in graphs.items()}, warmup=3, repeat=10, min_sample_ms=10)
    m.calibrated, m.probe_ms = dict(PREC_A_STARTS), 3.8812
    cells, searches = [], {}
    for name in graphs:
        for precision, fws in PREC_A_CELLS.items():
            for fw in fws:
                provider = (fw.partition("[")[2].rstrip("]") or "torch") if fw.startswith("ios-") else None
                cells.append(Cell(name, name, 1, fw, "cpu", "both" if provider else None, fw, 1.0,
                                  provider=provider, precision=precision))
                if provider:
                    searches[(name, 1, provider, precision)] = 1
    return m, cells, searches


def test_the_stated_model_estimates_the_precision_sweep_within_20_percent_of_what_it_took():
    """runs/prec-a's plan (2 nets x fp32/bf16/int8 x 4 peers and IOS on 3 kernel providers, 3 rounds, 12
    schedule searches: one per model, provider and precision) from the stated model only, with the
    workers' starts and the canary its sweep measured: within 20% of its 2013.5 s (it said 395 s then:
    searches keyed without precision, costed alike on every provider, no int8 calibration)."""
    m, cells, searches = _prec_a_plan()
    assert len(cells) == 34 and len(searches) == 12
    est = estimate.sweep_seconds(m, cells, {c.key: 3 for c in cells}, {("inception_v3", 1), ("randwire", 1)},
                                 searches)
    assert abs(est["seconds"] / PREC_A_MEASURED_S - 1) < 0.2, est["seconds"]
    # every latency from its framework's own stated rate at that precision, measured on this machine
    assert est["from"] == {"stated rate (measured)": 34}


def test_a_search_costs_by_provider_and_precision_and_learns_by_them():
    """A search at int8 on openvino (each candidate stage compiled by OpenVINO, each piece calibrated)
    costs more than at fp32 on torch; an earlier run's search is used for its own precision only."""
    m = _model()
    m.states = {"m": 1000}
    fp32_torch, int8_ov = m.optimize_s("m", 1, "torch"), m.optimize_s("m", 1, "openvino", 1, "int8")
    assert int8_ov > 5 * fp32_torch
    assert m.optimize_s("m", 1, "onnxruntime", 1, "int8") > m.optimize_s("m", 1, "onnxruntime")
    # each state of the DP costs: a graph with more states searches longer at the same operator count
    more = _model()
    more.states = {"m": 40_000}
    per_state = estimate.STATED["optimize_s_per_state"]
    assert more.optimize_s("m", 1, "torch") - fp32_torch == pytest.approx(39_000 * per_state)
    h = estimate.History()
    for precision, seconds in (("fp32", 20.0), ("int8", 300.0)):
        r = rec("m", 1, "ios-both[openvino]", median=10.0)
        r.update(precision=precision, provider="openvino", optimize_seconds=seconds)
        h.add(r)
    learnt = _model(h)
    learnt.calibrated = {"ios-sequential[openvino]": 0.5}
    assert learnt.optimize_s("m", 1, "openvino", 1, "int8") == pytest.approx(0.5 + 300.0)
    assert learnt.optimize_s("m", 1, "openvino") == pytest.approx(0.5 + 20.0)
    both = estimate.sweep_seconds(learnt, [], {}, set(),
                                  {("m", 1, "openvino", "fp32"): 1, ("m", 1, "openvino", "int8"): 1})
    assert both["seconds"] == pytest.approx(0.5 + 20.0 + 0.5 + 300.0)


def _rounds(walls):
    return [{"round": i, "status": "ok", "wall_seconds": w, "repeat": 10, "warmup": 3, "number": 1}
            for i, w in enumerate(walls)]


def test_rounds_and_first_builds_are_learnt_per_precision_and_the_int8_calibration_is_stated():
    """An int8 cell's first round calibrates and quantizes (a cold build the build cache keeps for the
    later rounds): stated where no run measured it, learnt per worker kind and precision where one did
    (its first round's wall less its later rounds'), and never taken for fp32's."""
    m = _model()
    ov8 = Cell("m", "m", 1, "openvino", "cpu", None, "openvino", 1.0, precision="int8")
    ov = Cell("m", "m", 1, "openvino", "cpu", None, "openvino", 1.0)
    cold = m.first_build_s("openvino@int8", "m")
    stated = estimate.STATED["first_build_latencies"]["openvino@int8"]
    assert cold == pytest.approx(stated * m.latency_s("m", 1, "openvino"))
    assert m.first_build_s("openvino", "m") == 0.0
    assert m.first_build_s("ios-both[openvino]@int8", "m") > m.first_build_s("ios-both[onnxruntime]@int8", "m") > 0
    fresh = estimate.sweep_seconds(m, [ov8, ov], {ov8.key: 3, ov.key: 3}, set(), {})
    assert fresh["per_cell"][ov8.key] == pytest.approx(3 * m.cell_s(ov8) + cold)
    assert fresh["per_cell"][ov.key] == pytest.approx(3 * m.cell_s(ov))
    h = estimate.History()
    for precision, walls in (("fp32", [2.5, 2.5, 2.5]), ("int8", [12.3, 3.3, 3.3])):
        r = rec("m", 1, "openvino", median=10.0)
        r.update(precision=precision, rounds=_rounds(walls))
        h.add(r)
    learnt = _model(h)
    assert learnt.first_build_s("openvino@int8", "m") == pytest.approx(9.0)
    assert learnt.first_build_s("openvino", "m") == pytest.approx(0.0)
    # a 10 ms call: 1 check, 3 warmup, 1 calibration, 10 timed calls
    assert learnt.fixed_s("openvino@int8", "m") == pytest.approx(3.3 - 15 * 0.010)
    assert learnt.fixed_s("openvino", "m") == pytest.approx(2.5 - 15 * 0.010)
    # another model: the cold build in its fp32 latencies (n: half m's work at the framework's rate)
    assert learnt.first_build_s("openvino@int8", "n") == pytest.approx(9.0 / 2)


def test_a_replay_of_a_run_folder_estimates_from_its_records(tmp_path):
    """``replay`` rebuilds a finished sweep's estimate from its folder (plan, records, env) without running
    anything; learning from the folder itself (a rerun of it) takes its own searches and first builds."""
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"rounds": 3, "warmup": 3, "repeat": 10, "number": 1,
                                               "min_sample_ms": 0.0}))
    cpu = {"model": "CPU X", "usable_cores": 2}
    (run / "env.json").write_text(json.dumps({"cpu": cpu, "duration_s": 400.0, "captured": "2026-11-27T12:00:00",
                                              "estimate": {"seconds": 50.0, "workers_start_s": {}, "canary_ms": None}}))
    recs = []
    for precision, walls, search in (("fp32", [2.0, 2.0, 2.0], 30.0), ("int8", [20.0, 3.0, 3.0], 300.0)):
        r = rec("m", 1, "ios-both[openvino]", median=10.0)
        r.update(schema=3, precision=precision, provider="openvino", schedule="both", optimize_seconds=search,
                 rounds=_rounds(walls), cell=cell_key("m", 1, "ios-both[openvino]", "cpu", precision=precision))
        recs.append(r)
    skipped = {**rec("m", 1, "onnxruntime", status="skipped"), "schema": 3}
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*recs, skipped]))
    graphs = {"m": (2_000_000_000, 40, 100)}
    stated = estimate.replay(run, [], graphs)
    assert stated["measured_s"] == 400.0 and stated["recorded_s"] == 50.0
    assert stated["measured_parts"] == {"rounds": pytest.approx(32.0), "searches": pytest.approx(330.0)}
    assert sum(stated["parts"].values()) == pytest.approx(stated["estimated_s"])
    again = estimate.replay(run, [run], graphs)
    start = estimate.STATED["fixed_s"]["default"]  # the search worker's start: not calibrated in this folder
    assert again["parts"]["searches"] == pytest.approx(2 * start + 330.0)
    assert again["parts"]["first_builds"] == pytest.approx(17.0)
    lines = estimate.replay_lines(run, graphs)
    assert lines[0] == "a: took 7 min; its sweep estimated 50 s" and len(lines) == 4
    # per cell: a round and its first build, estimated against measured (later rounds' median; the first less it)
    int8 = next(c for c in again["cells"] if c["series"] == "ios-both[openvino]@int8")
    assert (int8["measured_round_s"], int8["measured_first_build_s"], int8["first_build_s"]) == (3.0, 17.0, 17.0)
    assert int8["round_s"] == pytest.approx(again["parts"]["rounds"] / 3 - next(
        c["round_s"] for c in again["cells"] if c["series"] == "ios-both[openvino]"))
    detail = estimate.replay_lines(run, graphs, per_cell=True)
    assert len(detail) == 4 + 3 * 2 and "ios-both[openvino]@int8 m b1: a round" in detail[-1]
    assert "(measured 3.00 s), its first build 17.00 s (measured 17.00 s)" in detail[-1]


def test_a_build_grows_with_the_model_beyond_the_quick_sweeps_networks():
    """The stated build part (``build_s``) was measured on the quick sweep's small networks and holds
    their builds; the model-sized part (``build_latencies``) is added in full from ``BUILD_FULL_OPS``
    operators on (where it was measured), not at all up to ``BUILD_BASE_OPS``, and an earlier run's
    fixed part of the kind at its precision replaces both."""
    small = estimate.Model(estimate.History(), {"m": 2_000_000_000}, {"m": estimate.BUILD_BASE_OPS})
    big = estimate.Model(estimate.History(), {"m": 2_000_000_000}, {"m": estimate.BUILD_FULL_OPS + 20})
    assert small.build_s("m", 1, "ios-both[openvino]") == 0.0
    full = big.build_s("m", 1, "ios-both[openvino]")
    assert full == pytest.approx(estimate.STATED["build_latencies"]["ios[openvino]"]
                                   * big.latency_s("m", 1, "ios-both[openvino]"))
    assert big.build_s("m", 1, "ios-both[openvino]@int8") > full  # a warm int8 build loads its quantized pieces
    h = estimate.History()
    h.fixed_s["ios[openvino]"] = [2.0]
    assert estimate.Model(h, {"m": 2_000_000_000}, {"m": 120}).build_s("m", 1, "ios-both[openvino]") == 0.0


def test_the_sweeps_estimate_counts_one_search_worker_per_device_as_the_searches_start_them(tmp_path, monkeypatch):
    """The sweep's estimate counts its schedule searches by the searches' own key (search_key: the device
    included), so the same network, batch, provider and precision on the CPU and on a GPU are two
    workers, as optimize_schedules starts them; a schedule file already in the run folder is not searched."""
    import io

    from rich.console import Console

    from ios_bench.planning.loading import load_graph
    from ios_bench.planning.plan import Plan
    from ios_bench.running.schedules import schedule_path, search_key, search_workers
    from ios_bench.running.sweep import Sweep

    monkeypatch.setattr(estimate, "calibrate", lambda *a, **k: {})
    monkeypatch.setattr(estimate, "speed_probe", lambda *a, **k: estimate.STATED["canary_ms"])
    out = io.StringIO()
    plan = Plan(models=["sample"], rounds=1)
    sweep = Sweep(plan, tmp_path / "run", console=Console(file=out, width=400), progress=False)
    cells = [Cell("sample", "sample", 1, f"ios-{s}", dev, s, "ios", 1.0) for dev in ("cpu", "cuda")
             for s in ("sequential", "both")]
    workers = search_workers(plan, sweep.folder, cells)
    assert sorted(workers) == [("sample", 1, "torch", "fp32", "cpu"), ("sample", 1, "torch", "fp32", "cuda")]
    assert [len(items) for items in workers.values()] == [2, 2] and search_key(cells[2]) == sorted(workers)[1]
    graphs = {"sample": load_graph("sample")}
    est = sweep._estimate(cells, graphs, {})
    assert "2 schedule searches" in out.getvalue()
    done = sweep.folder / schedule_path(plan, cells[2])  # cuda's sequential schedule: searched already
    done.parent.mkdir(parents=True)
    done.write_text("{}")
    fewer = sweep._estimate(cells, graphs, {})
    assert [len(items) for items in search_workers(plan, sweep.folder, cells).values()] == [2, 1]
    assert fewer["seconds"] < est["seconds"]


def test_a_search_at_the_optimize_batch_is_one_worker_for_every_batch_that_executes_its_schedules(tmp_path):
    """With the IOS option optimize_batch every cell executes the schedule searched at that batch: the
    search key follows the schedule file (its batch is the searched one), so cells at batch 1 and 4 are
    one search worker that writes each schedule file once, and the estimate counts one search at batch 2."""
    from ios_bench.planning.plan import Plan
    from ios_bench.running.schedules import schedule_path, search_key, search_workers

    plan = Plan(models=["sample"], rounds=1, ios_options={"optimize_batch": 2})
    cells = [Cell("sample", "sample", b, f"ios-{s}", "cpu", s, "ios", 1.0) for b in (1, 4)
             for s in ("sequential", "both")]
    workers = search_workers(plan, tmp_path, cells)
    assert list(workers) == [("sample", 2, "torch", "fp32", "cpu")]
    assert [p for _, p in workers[("sample", 2, "torch", "fp32", "cpu")]] == [schedule_path(plan, c) for c in cells[:2]]
    assert schedule_path(plan, cells[0]) == schedule_path(plan, cells[2])
    assert {search_key(c, plan.ios_options) for c in cells} == set(workers)
    assert search_key(cells[2]) == ("sample", 4, "torch", "fp32", "cpu")  # without the option: the cell's own


# the quick sweep `make run` of 2026-11-27 15:32 UTC (/tmp/estrun4/runs/r1, this 2-core VM, nothing else running):
# sample and squeezenet at batch 1, 17 variants, 3 rounds; its workers' starts and canary as its sweep measured
# them; its build caches (user scope) warm. None of the stated figures was chosen from it (docs/results/estimate/
# 2026-11-27-quick-sweep-replay.md): it is the out-of-sample check
QUICK_MEASURED_S = 178.1  # env.json duration_s; its sweep said 244 s (+37 %)
QUICK_STARTS = {"torch": 1.218, "torch-compile": 1.219, "tensorflow": 2.178, "tensorflow-xla": 2.179,
                "jax-xla": 1.031, "onnxruntime": 0.148, "onnxruntime-parallel": 0.196, "openvino": 0.217,
                **{f"ios-{s}": 1.218 for s in ("sequential", "greedy", "both")},
                **{f"ios-{s}[onnxruntime]": 0.196 for s in ("sequential", "greedy", "both")},
                **{f"ios-{s}[openvino]": 0.217 for s in ("sequential", "greedy", "both")}}


def test_the_stated_model_estimates_the_quick_sweep_within_20_percent_of_what_it_took():
    """The default quick sweep (34 cells, 6 search workers of 3 schedules each) from the stated model only:
    within 20 % of the 178.1 s it took, with its known bias in (8 IOS cells shared a schedule with another
    and were measured once; the estimate counts them). It said 244 s then: each schedule of a worker
    costed as a search of its own (its stages timed again), a round's own work 0.3 s and JAX's build 0.4 s
    where its rounds took 0.35-0.52 s beyond the worker's start."""
    from ios_bench.planning.loading import load_graph

    graphs = {n: load_graph(n) for n in ("sample", "squeezenet")}
    m = estimate.Model(estimate.History(), {n: g.macs() for n, g in graphs.items()},
                       {n: g.num_operators() for n, g in graphs.items()},
                       {n: estimate.search_states(g) for n, g in graphs.items()}, warmup=3, repeat=10, min_sample_ms=10)
    m.calibrated, m.probe_ms = dict(QUICK_STARTS), 3.8961
    m.warm_cache = lambda framework, model, batch: True  # the user-scope caches held every build (its records)
    cells, searches = [], {}
    for name in graphs:
        for fw in QUICK_STARTS:
            provider = (fw.partition("[")[2].rstrip("]") or "torch") if fw.startswith("ios-") else None
            schedule = fw[4:].partition("[")[0] if provider else None
            cells.append(Cell(name, name, 1, fw, "cpu", schedule, fw, 1.0, provider=provider))
            if provider:
                searches[(name, 1, provider, "fp32", "cpu")] = searches.get((name, 1, provider, "fp32", "cpu"), 0) + 1
    assert len(cells) == 34 and sorted(searches.values()) == [3] * 6
    est = estimate.sweep_seconds(m, cells, {c.key: 3 for c in cells}, {("sample", 1), ("squeezenet", 1)}, searches)
    assert abs(est["seconds"] / QUICK_MEASURED_S - 1) < 0.2, est["seconds"]


def test_a_replay_counts_the_workers_schedules_a_shared_round_once_and_the_build_cache_its_records_saw(tmp_path):
    """A replay says what the sweep said: one search worker per search key with as many schedules as its
    cells were measured with (the sweep counts them so), no cold build where the first round found its build
    cache warm; and a round measured once for two cells (identical schedules) is measured time once."""
    run = tmp_path / "runs" / "q"
    run.mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"rounds": 1, "warmup": 3, "repeat": 10, "number": 1,
                                               "min_sample_ms": 0.0}))
    (run / "env.json").write_text(json.dumps({"cpu": {"model": "CPU X", "usable_cores": 2}, "duration_s": 60.0,
                                              "captured": "2026-11-27T12:00:00",
                                              "estimate": {"seconds": 50.0, "workers_start_s": {}}}))
    shared = {"round": 0, "status": "ok", "wall_seconds": 2.0, "repeat": 10, "warmup": 3, "number": 1, "pid": 7,
              "started": "2026-11-27T12:00:01+00:00"}
    recs = []
    for schedule in ("sequential", "greedy"):
        r = rec("m", 1, f"ios-{schedule}", median=10.0)
        r.update(schema=3, provider="torch", schedule=schedule, optimize_seconds=1.0, rounds=[shared],
                 schedule_file=f"schedules/m-b1-cpu-{schedule}.json", cell=cell_key("m", 1, f"ios-{schedule}", "cpu"))
        recs.append(r)
    tc = rec("m", 1, "torch-compile", median=10.0)
    tc.update(schema=3, cell=cell_key("m", 1, "torch-compile", "cpu"),
              rounds=[{**shared, "pid": 8, "wall_seconds": 5.0,
                       "info": {"build_cache": {"state": "warm", "reused": True}}}])
    recs.append(tc)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    graphs = {"m": (2_000_000_000, 40, 100)}
    got = estimate.replay(run, [], graphs)
    assert got["measured_parts"]["rounds"] == pytest.approx(7.0)  # the shared round once, torch-compile's
    assert got["parts"]["first_builds"] == 0.0  # its build cache was warm
    m = estimate.Model(estimate.History(), {"m": 2_000_000_000}, {"m": 40}, {"m": 100})
    assert got["parts"]["searches"] == pytest.approx(m.optimize_s("m", 1, "torch", 2))
    assert got["parts"]["searches"] > m.optimize_s("m", 1, "torch", 1)


def test_a_search_at_a_larger_batch_times_its_stages_at_that_batch():
    """The per-operator search figures are batch 1's; at batch 16 a search adds ``optimize_batch_latencies``
    of what the batch adds to the model's latency on the provider's engine at its precision (its stages are
    timed at the cell's batch), learnt latencies included; batch 1 is unchanged."""
    m = _model()
    m.states = {"m": 100}
    k = estimate.STATED["optimize_batch_latencies"]
    one, sixteen = m.optimize_s("m", 1, "openvino", 1, "int8"), m.optimize_s("m", 16, "openvino", 1, "int8")
    lat = m.latency_s("m", 1, "openvino@int8", count=False)
    assert sixteen - one == pytest.approx(k * 15 * lat)
    h = estimate.History()
    for batch, ms in ((1, 10.0), (16, 200.0)):
        h.add(rec("m", batch, "torch", median=ms))
    learnt = _model(h)
    assert learnt.optimize_s("m", 16, "torch") - learnt.optimize_s("m", 1, "torch") == pytest.approx(k * 0.190)


def _seal(root, framework: str, build: str | None, monkeypatch) -> None:
    """A build sealed into ``root``'s cache of ``framework``, named ``build`` (as a round's worker names it)."""
    from adapters.build_cache import BUILD_ENV, BuildCache

    if build:
        monkeypatch.setenv(BUILD_ENV, build)
    else:
        monkeypatch.delenv(BUILD_ENV, raising=False)
    cache = BuildCache(root, framework, "1.0").open()
    (cache.dir / f"entry-{len(list(cache.dir.iterdir()))}.bin").write_bytes(b"compiled")
    cache.seal()


def test_a_first_build_is_warm_only_where_the_build_cache_holds_the_cells_own_build(tmp_path, monkeypatch):
    """The estimate's warm-cache rule is per (framework, model, batch, precision): a cache holding
    another model's build (or another batch's, or another precision's) leaves the cell's first build cold;
    its own makes it warm; a later build into the warm cache keeps the names found there; a manifest that
    names no builds (sealed before builds were named) cannot say, and is counted cold."""
    from adapters.build_cache import ENV, MANIFEST, build_name, sealed_builds

    monkeypatch.setenv(ENV, str(tmp_path))
    _seal(tmp_path, "torch-inductor", build_name("squeezenet", 1, "fp32"), monkeypatch)
    assert not estimate.warm_build_cache("torch-compile", "sample", 1)  # another model's build
    assert not estimate.warm_build_cache("torch-compile", "squeezenet", 4)  # another batch's
    assert not estimate.warm_build_cache("torch-compile@bf16", "squeezenet", 1)  # another precision's
    assert not estimate.warm_build_cache("jax-xla", "squeezenet", 1)  # another framework's cache
    assert estimate.warm_build_cache("torch-compile", "squeezenet", 1)
    m = _model()
    assert m.first_build_s("torch-compile", "sample", 1) > 0
    assert m.first_build_s("torch-compile", "squeezenet", 1) == 0.0
    _seal(tmp_path, "torch-inductor", build_name("sample", 1, "fp32"), monkeypatch)  # opened warm, then sealed
    assert sealed_builds(tmp_path / "torch-inductor") == ["squeezenet|b1|fp32", "sample|b1|fp32"]
    assert estimate.warm_build_cache("torch-compile", "sample", 1)
    manifest = tmp_path / "torch-inductor" / MANIFEST
    old = json.loads(manifest.read_text())
    del old["builds"]
    manifest.write_text(json.dumps(old))
    assert not estimate.warm_build_cache("torch-compile", "squeezenet", 1)


def test_a_rounds_worker_names_its_build_in_the_build_cache_it_seals(tmp_path, monkeypatch):
    """A cell's round (task_cell, here on OpenVINO, which keeps a build cache) names the build it makes
    in the manifest of the cache it seals: the estimate then finds that cell's build warm, and not
    another model's or batch's."""
    pytest.importorskip("openvino")
    import numpy as np

    from adapters.build_cache import BUILD_ENV, ENV, sealed_builds
    from ios_bench.running import task_cell
    from ios_core import models, reference

    monkeypatch.setenv(ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(BUILD_ENV, "")  # none named yet (and restored after task_cell names its build)
    g = models.get("sample", input_shape=(4, 7, 7)).init_weights(0)
    g.save(tmp_path / "g.json")
    x = reference.random_input(g, 1, seed=0)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "ref.npy", reference.run(g, x))
    spec = {"task": "cell", "model_spec": str(tmp_path / "g.json"), "batch_size": 1, "device": "cpu",
            "adapter": "openvino", "threads": 1, "seed": 0, "input_seed": 0, "ref_path": str(tmp_path / "ref.npy"),
            "input_path": str(tmp_path / "x.npy"), "result_path": str(tmp_path / "out.json"), "warmup": 0,
            "number": 1, "repeat": 2, "min_sample_ms": None}
    result = task_cell.task_cell(spec, {})
    assert result["status"] == "ok", result.get("reason")
    assert sealed_builds(tmp_path / "cache" / "openvino") == [f"{g.name}|b1|fp32"]
    assert estimate.warm_build_cache("openvino", g.name, 1)
    assert not estimate.warm_build_cache("openvino", g.name, 2) and not estimate.warm_build_cache("openvino", "x", 1)


def test_a_replay_counts_one_search_at_the_optimize_batch_for_every_batch_that_executed_it(tmp_path):
    """A run with the IOS option optimize_batch searched each schedule once, at that batch, for the cells
    of every batch size: its replay counts one search worker at the optimize batch (search_key with the
    plan's options), not one per cell batch."""
    run = tmp_path / "runs" / "ob"
    run.mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"rounds": 1, "warmup": 3, "repeat": 10, "number": 1,
                                               "min_sample_ms": 0.0, "ios_options": {"optimize_batch": 1}}))
    (run / "env.json").write_text(json.dumps({"cpu": {"model": "CPU X", "usable_cores": 2}, "duration_s": 60.0,
                                              "captured": "2026-11-27T12:00:00",
                                              "estimate": {"seconds": 50.0, "workers_start_s": {}}}))
    recs = []
    for batch in (1, 4):
        r = rec("m", batch, "ios-sequential", median=10.0)
        r.update(schema=3, provider="torch", schedule="sequential", optimize_seconds=1.0,
                 rounds=[{"round": 0, "status": "ok", "wall_seconds": 2.0}],
                 schedule_file="schedules/m-b1-cpu-sequential.json",
                 cell=cell_key("m", batch, "ios-sequential", "cpu"))
        recs.append(r)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    got = estimate.replay(run, [], {"m": (2_000_000_000, 40, 100)})
    m = estimate.Model(estimate.History(), {"m": 2_000_000_000}, {"m": 40}, {"m": 100})
    assert got["parts"]["searches"] == pytest.approx(m.optimize_s("m", 1, "torch", 1))


def test_runs_of_another_thread_count_or_another_network_of_the_same_name_are_not_learned_from(tmp_path):
    """An earlier run teaches the estimate this machine's speed for the same cell only: at the plan's threads,
    and a model from the same kind of source (a file named like a zoo model, torchvision's alexnet imported,
    is another network than the zoo's alexnet)."""
    cpu = {"model": "CPU X", "usable_cores": 2}
    for name, threads, models, median in [("zoo2", 2, ["m"], 40.0), ("zoo1", 1, ["m"], 70.0),
                                          ("file2", 2, ["/elsewhere/m.json"], 300.0)]:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "env.json").write_text(json.dumps({"cpu": cpu}))
        (folder / "plan.json").write_text(json.dumps({"models": models, "threads": threads}))
        (folder / "results.jsonl").write_text(json.dumps({**rec("m", 1, "torch", median=median),
                                                          "threads": threads}) + "\n")
    found = estimate.earlier_runs(tmp_path / "new")
    assert estimate.learn(found, cpu, 2, {"m": True}).latency_ms == {("m", 1, "torch"): 40.0}
    assert estimate.learn(found, cpu, 1, {"m": True}).latency_ms == {("m", 1, "torch"): 70.0}
    assert estimate.learn(found, cpu, 2, {"m": False}).latency_ms == {("m", 1, "torch"): 300.0}  # m from a file
    assert estimate.learn(found, cpu, 2, {"other": True}).runs == ["zoo2", "file2"]  # m is not planned


def test_a_record_or_a_round_taken_beside_other_work_teaches_no_speed():
    """Every round of a record disturbed: its figure is over disturbed rounds (a smoke run beside a test
    suite): no latency, no round cost is learnt from it, only its memory. A disturbed round of a
    record with undisturbed ones is left out of the round costs."""
    h = estimate.History()
    smoke = {**rec("m", 1, "torch", median=400.0), "rounds_used": 0, "rounds_disturbed": 3, "peak_rss_mib": 900.0,
             "repeat": 3, "rounds": [{"round": i, "wall_seconds": 30.0, "disturbed": "load"} for i in range(3)]}
    h.add(smoke)
    assert h.latency_ms == {} and h.fixed_s == {} and h.peak == [("torch", "m", 1, 900.0)]
    quiet = {**rec("m", 1, "torch", median=40.0), "rounds_used": 2, "rounds_disturbed": 1, "repeat": 3,
             "rounds": [{"round": 0, "wall_seconds": 9.0}, {"round": 1, "wall_seconds": 2.0},
                        {"round": 2, "wall_seconds": 2.5}, {"round": 3, "wall_seconds": 30.0, "disturbed": "load"}]}
    h.add(quiet)
    assert h.latency_ms == {("m", 1, "torch"): 40.0}
    calls = 1 + 0 + 1 + 3  # the output check, no warmup, the calibration call, 3 samples
    assert h.fixed_s["torch"] == pytest.approx([2.0 - calls * 0.04, 2.5 - calls * 0.04])


def test_a_rate_learnt_from_models_of_unknown_size_is_the_stated_one_and_says_so():
    """A framework whose earlier records are all of models the estimate cannot size (another run's file,
    an ab side) has no rate of its own: its latencies come from the stated rate, labelled stated, and are
    scaled as stated figures are."""
    from ios_bench.planning.estimate_stated import stated_rate

    h = estimate.History()
    h.add(rec("elsewhere", 1, "torch", median=5.0))
    slow = estimate.STATED["canary_ms"] * 2  # a machine half as fast as the stated figures' ...
    h.canary_ms.append(slow)  # ... as the earlier run found it: a learnt figure would not be scaled
    m = _model(h)
    m.probe_ms = slow
    got = m.latency_s("m", 1, "torch")
    assert list(m.sources) == [f"stated rate ({stated_rate('torch')[1].split(':', 1)[0]})"]
    assert got == pytest.approx(2e9 / (stated_rate("torch")[0] * 1e9) * 2)


def test_on_another_kind_of_host_the_canary_scales_the_stated_starts_but_not_the_stated_latencies():
    """The stated figures' canary was sorted on a host with AVX-512; a host with other instruction sets
    (AVX2 only: its canary 4x quicker, its frameworks' kernels 1.1-1.4x slower) is compared by its canary
    for one core's scalar work (a worker's start, a build) and not for the frameworks' kernels."""
    stated = estimate.STATED["canary_ms"]
    avx2 = ["avx", "avx2", "f16c", "fma", "sse4_1", "sse4_2", "sse4a"]
    same = _model(probe_ms=0.5 * stated, isa=list(reversed(estimate.STATED["canary_isa"])))
    other, unknown = _model(probe_ms=0.5 * stated, isa=avx2), _model(probe_ms=0.5 * stated)
    plain = _model()
    assert same.stated_host() and unknown.stated_host() and not other.stated_host()
    for m in (same, unknown):
        assert m.latency_s("m", 1, "torch") == pytest.approx(0.5 * plain.latency_s("m", 1, "torch"))
    assert other.latency_s("m", 1, "torch") == pytest.approx(plain.latency_s("m", 1, "torch"))
    for m in (same, other):
        assert m.fixed_s("torch") == pytest.approx(0.5 * plain.fixed_s("torch"))
    assert "the stated latencies excepted" in other.speed_note()
    assert "excepted" not in same.speed_note() and same.speed_note().startswith("scaled by 0.50")
    # a run folder of another kind of host (the same model name, "AMD EPYC") teaches nothing here
    cpu = {"model": "AMD EPYC", "usable_cores": 2, "isa_flags": avx2}
    assert estimate.same_machine({"cpu": {**cpu, "isa_flags": list(reversed(avx2))}}, cpu)
    assert not estimate.same_machine({"cpu": {**cpu, "isa_flags": list(estimate.STATED["canary_isa"])}}, cpu)
    assert estimate.same_machine({"cpu": {k: v for k, v in cpu.items() if k != "isa_flags"}}, cpu)


def test_rounds_disturbed_as_often_as_on_earlier_runs_here_are_expected_again():
    """A disturbed round is measured again (at most the plan's max_reruns per cell): the estimate expects
    as many re-runs as earlier runs here had disturbed rounds (d / (1 - d) a planned round, a re-run
    disturbed as often), none with fewer than MIN_RERUN_EVIDENCE earlier rounds or none allowed."""
    from ios_bench.planning.estimate_breakdown import breakdown

    h = estimate.History()
    for i in range(10):  # 40 rounds, 10 of them disturbed: d = 1/4, a planned round costs 1/3 more
        h.add({**rec(f"x{i}", 1, "torch"), "rounds_measured": 4, "rounds_disturbed": 1})
    h.add({**rec("y", 1, "torch"), "rounds_used": 0, "rounds_measured": 3, "rounds_disturbed": 3})  # beside work
    assert (h.rounds_seen, h.rounds_disturbed) == (40, 10)
    m, none = _model(h, max_reruns=6), _model(h)
    assert m.disturbed_share() == pytest.approx(0.25)
    assert m.expected_reruns(3) == pytest.approx(1.0) and none.expected_reruns(3) == 0.0
    assert _model(h, max_reruns=1).expected_reruns(6) == 1.0  # at most max_reruns a cell
    few = estimate.History()
    few.add({**rec("x", 1, "torch"), "rounds_measured": 20, "rounds_disturbed": 10})
    assert _model(few, max_reruns=6).expected_reruns(3) == 0.0  # 20 rounds say too little
    cells = [Cell("m", "m", 1, "torch", "cpu", None, "torch", 1.0)]
    got = estimate.sweep_seconds(m, cells, {cells[0].key: 3}, set(), {}, fresh=set())
    assert got["seconds"] == pytest.approx(4 * m.cell_s(cells[0]))
    rows = breakdown(m, cells, {cells[0].key: 3}, set(), {}, fresh=set())
    assert sum(r["seconds"] for r in rows) == pytest.approx(got["seconds"])
    assert sum(r["seconds"] for r in rows if r["kind"] == "rerun") == pytest.approx(m.cell_s(cells[0]))
