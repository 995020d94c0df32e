"""ios_bench.profiling (issue 57): the profiler's cost from interleaved rounds with its interval, the
frameworks' own traces kept, OpenVINO's exec_type per row, torch's self time beside its total."""

from __future__ import annotations

import json

import pytest

from adapters.base import Adapter, Compiled, OpTime, write_chrome_trace
from ios_bench.profiling import merge_rounds, profile_one, profiler_cost_figures
from ios_bench.reporting.profile_table import render, table_rows
from ios_core.measurement.measure import Measurement

from .test_profile_frameworks import pair_graph


@pytest.fixture(scope="module")
def pair():
    return pair_graph()


class Drift:
    """A machine that slows down steadily: the k-th call (of any build) takes ``10 * (1 + 0.002 k)`` ms
    times the build's own factor (the profiled build: 1.1, a profiler costing 10 %)."""

    def __init__(self):
        self.calls = 0
        self.log: list[str] = []

    def block(self, label: str, factor: float, n: int) -> list[float]:
        self.log.append(label)
        out = []
        for _ in range(n):
            out.append(10.0 * (1 + 0.002 * self.calls) * factor)
            self.calls += 1
        return out


class FakeProfiled(Compiled):
    def __init__(self, drift):
        super().__init__({"precision": "fp32"})
        self.drift = drift

    def profile(self, x, warmup=3, repeat=10, trace=None):
        samples = self.drift.block("P", 1.1, repeat)
        return [OpTime("1", 1.0, ("1",), "Conv")], Measurement(samples, 1, warmup)


class FakeAdapter(Adapter):
    def __init__(self, drift):
        super().__init__(name="fake")
        self.drift = drift

    def available(self, device="cpu"):
        return None

    def profile_options(self):
        return {"profiled": True}

    def build(self, graph, batch_size, device="cpu", threads=None, precision="fp32", profiled=False):
        return FakeProfiled(self.drift) if profiled else Compiled({"precision": "fp32"})


def test_the_profilers_cost_is_interleaved_in_alternating_rounds_with_an_interval(pair, monkeypatch):
    """On a machine that drifts, blocks in alternating order pair each profiled block with an
    unprofiled one on both sides of it: the cost comes out at the profiler's 10 %, inside its
    interval. One block after the other (or every round in the same order) reads the drift as cost."""
    import adapters
    import ios_bench.running.task_cell as task_cell

    drift = Drift()
    monkeypatch.setattr(adapters, "get", lambda name: FakeAdapter(drift))
    monkeypatch.setattr(task_cell, "time_compiled", lambda compiled, prepared, device, warmup, number, repeat:
                        Measurement(drift.block("U", 1.0, repeat), number, warmup))
    res = profile_one("fake", pair, 1, warmup=0, repeat=5, rounds=4)
    assert drift.log == ["U", "P", "P", "U", "U", "P", "P", "U"]
    assert res["profiler_cost"] == pytest.approx(0.10, abs=0.003)
    assert res["profiler_cost_low"] < 0.10 < res["profiler_cost_high"]
    assert res["profiler_cost_high"] - res["profiler_cost_low"] < 0.2
    assert res["rounds"] == 4 and "4 rounds of 5 unprofiled and 5 profiled calls" in res["profiler_cost_how"]
    # the latency: the median of the unprofiled blocks' medians (rounds 0..3 start at calls 0, 15, 20, 35)
    assert res["latency_ms"] == pytest.approx(10 * (1 + 0.002 * (17 + 22) / 2))
    [row] = res["rows"]
    assert row["ms"] == 1.0
    header, rows = table_rows(pair, [res])
    [cost] = [line[1] for line in rows if line[0] == "profiler's cost"]
    lo, hi = 100 * res["profiler_cost_low"], 100 * res["profiler_cost_high"]
    assert cost == f"{100 * res['profiler_cost']:+.1f}% [{lo:+.1f}, {hi:+.1f}]"


def test_profiler_cost_figures_use_the_paired_interval():
    """Rounds whose profiled block is 10 % slower give +10 %; a round count of one still gives a figure."""
    un = [[10.0, 10.2, 9.9], [11.0, 11.1, 10.9], [9.0, 9.1, 9.2]]
    pr = [[v * 1.1 for v in r] for r in un]
    f = profiler_cost_figures(un, pr)
    assert f["profiler_cost"] == pytest.approx(0.1)
    assert f["profiler_cost_low"] <= 0.1 <= f["profiler_cost_high"]
    one = profiler_cost_figures(un[:1], pr[:1])
    assert one["profiler_cost"] == pytest.approx(0.1) and "1 round of 3" in one["profiler_cost_how"]


def test_rows_over_rounds_are_each_names_median():
    rounds = [[OpTime("a", 1.0, ("1",), "Conv", exec_type="jit_avx2_FP32"), OpTime("b", 3.0, self_ms=1.0)],
              [OpTime("a", 2.0, ("1",), "Conv", exec_type="jit_avx2_FP32"), OpTime("b", 5.0, self_ms=2.0)],
              [OpTime("a", 9.0, ("1",), "Conv", exec_type="jit_avx2_FP32")]]
    merged = {t.name: t for t in merge_rounds(rounds)}
    assert merged["a"] == OpTime("a", 2.0, ("1",), "Conv", exec_type="jit_avx2_FP32")
    assert merged["b"].ms == 3.0 and merged["b"].self_ms == 1.0  # missing from a round: 0 there


def test_a_trace_is_written_whole_or_not_at_all(tmp_path):
    path = tmp_path / "t.trace.json"
    write_chrome_trace(path, [("conv", "host", "main", 10.0, 5.0), ("relu", "host", 7, 15.0, 1.0)])
    data = json.loads(path.read_text())
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in spans] == [("conv", 10.0, 5.0), ("relu", 15.0, 1.0)]
    assert spans[0]["pid"] == spans[1]["pid"] and spans[0]["tid"] != spans[1]["tid"]

    def broken():
        yield ("conv", "host", "main", 10.0, 5.0)
        raise RuntimeError("the profiler died")

    with pytest.raises(RuntimeError):
        write_chrome_trace(path, broken())
    assert json.loads(path.read_text()) == data  # the old file stands, nothing half-written beside it
    assert [p.name for p in tmp_path.iterdir()] == ["t.trace.json"]


@pytest.mark.parametrize("name", ["ios", "jax-xla", "onnxruntime", "tensorflow", "torch"])
def test_each_frameworks_own_trace_is_kept_beside_the_profile(pair, name, tmp_path):
    import adapters

    reason = adapters.get(name).available("cpu")
    if reason:
        pytest.skip(reason)
    res = profile_one(name, pair, 1, threads=1, warmup=1, repeat=2, rounds=2, trace_dir=tmp_path)
    assert "error" not in res, res["error"]
    path = tmp_path / f"pair-{name}-b1-cpu.trace.json"
    assert res["trace"] == str(path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left beside it
    data = json.loads(path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data  # ORT writes the JSON array form
    names = {e.get("name", "") for e in events if e.get("ph") == "X"}
    assert "ios-bench:call" in names or name in ("onnxruntime", "ios"), sorted(names)[:20]
    # what the rows were read from is in it: a mapped row's framework op names a traced event
    assert any(op in n for row in res["rows"] for op in row["framework_ops"] for n in names), sorted(names)[:20]
    assert f"{name}: its profiler's own events, a Chrome trace (Perfetto): {path}" in render(pair, [res])


def test_openvinos_exec_type_is_kept_per_row_and_shown(pair):
    """Each row's kernel is the one OpenVINO's runtime model records for that layer (its rt_info
    ``primitiveType``, read here independently of the profiling info the adapter reads)."""
    import adapters

    ov = adapters.get("openvino")
    if ov.available("cpu"):
        pytest.skip(ov.available("cpu"))
    res = profile_one("openvino", pair, 1, threads=1, warmup=1, repeat=2, rounds=2)
    assert "error" not in res, res["error"]
    built = ov.build(pair, 1, "cpu", 1)
    recorded = {op.get_friendly_name(): op.get_rt_info()["primitiveType"].astype(str)
                for op in built.compiled_model.get_runtime_model().get_ordered_ops()}
    kernels = {}
    for row in res["rows"]:
        assert set(row["exec_types"]) == set(row["framework_ops"]), row
        kernels.update(row["exec_types"])
    assert kernels and all(kernels[n] == recorded[n] for n in kernels), (kernels, recorded)
    header, rows = table_rows(pair, [res])
    assert header == ["operator", "openvino", "openvino kernel"]
    by_label = {line[0]: line[2] for line in rows}
    conv = next(r for r in res["rows"] if "1" in r["operators"])
    last = max(conv["operators"], key=[op.name for op in pair.operators()].index)  # a group: its last operator's row
    label = next(k for k in by_label if k.startswith(last + " ("))
    assert by_label[label] == ",".join(dict.fromkeys(conv["exec_types"].values()))


def test_torch_rows_give_self_beside_total(pair):
    """torch's total of an operator's range holds its aten ops; its self time is what is left: for a
    convolution, less than the total (the convolution kernel is a child event)."""
    import adapters

    t = adapters.get("torch")
    if t.available("cpu"):
        pytest.skip(t.available("cpu"))
    res = profile_one("torch", pair, 1, threads=1, warmup=1, repeat=3, rounds=2)
    assert "error" not in res, res["error"]
    rows = {r["name"]: r for r in res["rows"]}
    assert all(0 <= r["self_ms"] <= r["ms"] for r in rows.values())
    assert rows["1"]["self_ms"] < 0.8 * rows["1"]["ms"], rows["1"]
    header, _ = table_rows(pair, [res])
    assert header == ["operator", "torch", "torch self"]


def test_cli_trace_dir_keeps_the_traces_and_refuses_a_file(pair, tmp_path, capsys):
    from .test_profile_frameworks import _cli

    path = tmp_path / "pair.json"
    pair.save(path)
    traces = tmp_path / "traces"
    code, out, err = _cli(capsys, "profile", "--model", str(path), "--frameworks", "ios", "--threads", "1",
                          "--warmup", "1", "--repeat", "2", "--trace-dir", str(traces))
    assert code == 0, err
    trace = traces / "pair-ios-b1-cpu.trace.json"
    assert f"ios: its profiler's own events, a Chrome trace (Perfetto): {trace}" in out
    assert "4 rounds of 2 unprofiled and 2 profiled runs" in out
    assert json.loads(trace.read_text())["traceEvents"]
    code, out, err = _cli(capsys, "profile", "--model", str(path), "--frameworks", "ios", "--trace-dir", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--trace-dir" in err, err


def test_run_profile_keeps_the_traces_in_the_run_folder_and_the_report_names_them(pair, tmp_path, monkeypatch):
    import ios_bench.profiling as profiling
    import ios_bench.results as results_mod
    from ios_bench.planning.plan import Plan
    from ios_bench.reporting.profile_table import report_sections
    from ios_bench.reporting.report_tables import Table

    path = tmp_path / "pair.json"
    pair.save(path)
    recs = [{"model": "pair", "batch_size": 1, "device": "cpu", "framework": "ios", "status": "ok"}]
    monkeypatch.setattr(results_mod, "load_run", lambda folder: type("R", (), {"records": recs})())
    run = tmp_path / "run"
    run.mkdir()
    plan = Plan()
    plan.models = [str(path)]
    plan.warmup, plan.repeat, plan.threads = 1, 2, 1
    [entry] = profiling.profile_run(run, plan, say=lambda s: None)
    [res] = entry["results"]
    assert res["trace"] == "profile-traces/pair-ios-b1-cpu.trace.json"
    assert json.loads((run / res["trace"]).read_text())["traceEvents"]
    [(_, items)] = report_sections(run, tmp_path, Table)
    texts = [it[1] for it in items if isinstance(it, tuple) and it[0] == "text"]
    assert any("ios: `profile-traces/pair-ios-b1-cpu.trace.json`" in t for t in texts), texts


# ---- what the mutation sample of profiling.py found untested (make mutate SAMPLE=40 SEED=0)


def test_a_grouped_convolution_is_depthwise_only_when_each_channel_is_its_own_group():
    from ios_bench.profiling import kind_of
    from ios_core.ir.builder import GraphBuilder

    b = GraphBuilder("groups", (8, 6, 6))
    dw = b.conv(b.input, 8, 3, padding=1, groups=8)
    two = b.conv(dw, 8, 3, padding=1, groups=2)
    b.end_block(b.conv(two, 8, 1, groups=4))
    g = b.finish()
    assert [kind_of(op) for op in g.operators()] == ["conv depthwise", "conv 3x3", "conv 1x1"]


def test_rows_follow_the_graph_by_their_first_operator(pair):
    """A fused row over the first and the last convolution comes before the relu between them."""
    from ios_bench.profiling import attribute

    res = attribute(pair, [OpTime("relu", 1.0, ("2",), "Relu"), OpTime("both convs", 2.0, ("1", "4"), "Conv")],
                    3.0, 3.0)
    assert [r["name"] for r in res["rows"]] == ["1+4", "2"]


def test_a_convolution_the_graph_does_not_name_is_unmapped(pair):
    """A framework's convolution-typed node whose name matches nothing in the graph (a weight reorder, a
    layout change) is counted as unmapped, not guessed at."""
    from ios_bench.profiling import attribute

    res = attribute(pair, [OpTime("reorder_conv_weights", 0.5, ("zz_reorder",), "Convolution"),
                           OpTime("1", 2.0, ("1",), "Conv")], 3.0, 3.0)
    assert [r["name"] for r in res["rows"]] == ["1"]
    assert res["unmapped_rows"] == [{"name": "reorder_conv_weights", "ms": 0.5}]


def _fake_profile(monkeypatch):
    import adapters
    import ios_bench.running.task_cell as task_cell

    drift = Drift()
    builds = []

    class Recording(FakeAdapter):
        def build(self, graph, batch_size, *args, **kwargs):
            builds.append(batch_size)
            return super().build(graph, batch_size, *args, **kwargs)

    monkeypatch.setattr(adapters, "get", lambda name: Recording(drift))
    monkeypatch.setattr(task_cell, "time_compiled", lambda compiled, prepared, device, warmup, number, repeat:
                        Measurement(drift.block("U", 1.0, repeat), number, warmup))
    return builds


def test_a_profile_without_a_batch_size_profiles_one_input(pair, monkeypatch):
    builds = _fake_profile(monkeypatch)
    res = profile_one("fake", pair, warmup=0, repeat=2, rounds=1)
    assert res["batch_size"] == 1 and builds == [1, 1]


def test_a_build_that_moved_the_thread_to_other_cores_is_moved_back(pair, monkeypatch):
    """A framework's build that pins the thread (jax-xla's thread budget) to cores it did not have is undone
    after its profile, whether the new set is narrower or not; on a system without affinity (macOS) nothing
    is asked of it."""
    import os

    start = os.sched_getaffinity(0)
    if len(start) < 2:
        pytest.skip("needs two cores")
    first, second = sorted(start)[:2]
    builds = _fake_profile(monkeypatch)
    real_build = FakeAdapter.build

    def pinning(self, graph, batch_size, *args, **kwargs):
        os.sched_setaffinity(0, {second})
        return real_build(self, graph, batch_size, *args, **kwargs)

    try:
        os.sched_setaffinity(0, {first})
        monkeypatch.setattr(FakeAdapter, "build", pinning)
        assert "error" not in profile_one("fake", pair, warmup=0, repeat=2, rounds=1)
        assert os.sched_getaffinity(0) == {first}
    finally:
        os.sched_setaffinity(0, start)
    monkeypatch.setattr(FakeAdapter, "build", real_build)
    monkeypatch.delattr(os, "sched_getaffinity")
    assert "error" not in profile_one("fake", pair, warmup=0, repeat=2, rounds=1) and builds


def test_run_profile_profiles_each_model_with_its_own_frameworks(pair, tmp_path, monkeypatch):
    import ios_bench.profiling as profiling
    import ios_bench.results as results_mod
    from ios_bench.planning.plan import Plan

    path = tmp_path / "pair.json"
    pair.save(path)
    recs = [{"model": "pair", "batch_size": 1, "device": "cpu", "framework": "ios-greedy", "status": "ok"},
            {"model": "other", "batch_size": 1, "device": "cpu", "framework": "onnxruntime", "status": "ok"}]
    monkeypatch.setattr(results_mod, "load_run", lambda folder: type("R", (), {"records": recs})())
    asked = []
    monkeypatch.setattr(profiling, "profile_frameworks", lambda graph, names, bs, **kw: asked.append(names) or [])
    plan = Plan()
    plan.models = [str(path)]
    profiling.profile_run(tmp_path, plan, say=lambda s: None)
    assert asked == [["ios"]]


def test_only_the_first_profiled_block_writes_the_trace(pair, monkeypatch, tmp_path):
    """The kept trace is one block's (the first round's), not overwritten by every later round; a single
    round still writes it."""
    import adapters

    _fake_profile(monkeypatch)
    asked = []

    class Tracing(FakeProfiled):
        def profile(self, x, warmup=3, repeat=10, trace=None):
            asked.append(trace is not None)
            if trace is not None:
                trace.write_text('{"traceEvents": [{}]}')
            return super().profile(x, warmup, repeat)

    monkeypatch.setattr(adapters, "get", lambda name: type("A", (FakeAdapter,), {
        "build": lambda self, graph, bs, device="cpu", threads=None, precision="fp32", profiled=False:
        Tracing(self.drift) if profiled else Compiled({"precision": "fp32"})})(Drift()))
    res = profile_one("fake", pair, 1, warmup=0, repeat=2, rounds=3, trace_dir=tmp_path)
    assert asked == [True, False, False] and res["trace"].endswith("pair-fake-b1-cpu.trace.json")
    asked.clear()
    (tmp_path / "one").mkdir()
    assert "trace" in profile_one("fake", pair, 1, warmup=0, repeat=2, rounds=1, trace_dir=tmp_path / "one")
    assert asked == [True]


def test_run_profile_gives_a_graph_without_weights_its_seeded_weights(tmp_path, monkeypatch):
    import ios_bench.profiling as profiling
    import ios_bench.results as results_mod
    from ios_bench.planning.plan import Plan
    from ios_core.ir.builder import GraphBuilder

    b = GraphBuilder("bare", (4, 6, 6))
    b.end_block(b.conv(b.input, 4, 3, padding=1))
    bare = b.finish()
    assert not bare.has_weights
    bare.save(tmp_path / "bare.json")
    recs = [{"model": "bare", "batch_size": 1, "device": "cpu", "framework": "onnxruntime", "status": "ok"}]
    monkeypatch.setattr(results_mod, "load_run", lambda folder: type("R", (), {"records": recs})())
    weighted = []
    monkeypatch.setattr(profiling, "profile_frameworks",
                        lambda graph, names, bs, **kw: weighted.append(graph.has_weights) or [])
    plan = Plan()
    plan.models = [str(tmp_path / "bare.json")]
    profiling.profile_run(tmp_path, plan, say=lambda s: None)
    assert weighted == [True]
