"""ios-bench profile --frameworks (issue 47): each framework's profiler mapped to the IR by name,
the table's sums, the JSON shape, the missing-profiler path and the bars, on small graphs."""

from __future__ import annotations

import json

import pytest

from adapters.base import OpTime, ProfilerMissing
from ios_bench.profiling import attribute, kind_of, profile_frameworks, profile_one, resolver
from ios_bench.reporting.profile_table import kind_totals, plot, render, table_rows
from ios_core.ir import GraphBuilder

from .adapter_graphs import mini_inception


def pair_graph():
    """conv (no activation) -> separate relu (a pair ORT and OpenVINO fuse), a max pool and a 1x1
    conv reading the relu, their concat."""
    b = GraphBuilder("pair", (8, 10, 10))
    c = b.conv(b.input, 8, 3, padding=1, act="identity")
    r = b.relu(c)
    p = b.max_pool(r, 3, 1, padding=1)
    d = b.conv(r, 8, 1)
    b.end_block(b.concat([p, d]))
    g = b.finish()
    g.init_weights(0)
    return g


@pytest.fixture(scope="module")
def pair():
    return pair_graph()


def _sums(res, one_thread=True):
    assert "error" not in res, res.get("error")
    assert res["attributed_ms"] == pytest.approx(sum(r["ms"] for r in res["rows"]))
    assert res["unmapped_ms"] == pytest.approx(sum(r["ms"] for r in res["unmapped_rows"]))
    timed = res["attributed_ms"] + res["unmapped_ms"]
    assert res["attributed_over_profiled"] == pytest.approx(res["attributed_ms"] / res["profiled_ms"])
    if one_thread:
        # one thread runs one operator at a time: what the profiler timed, each operator counted once,
        # fits in the profiled calls (a margin for per-row medians drawn from different calls); an
        # event counted twice, or one from outside the calls, does not
        assert timed <= 1.25 * res["profiled_ms"], (timed, res["profiled_ms"], res["rows"], res["unmapped_rows"])


def test_resolver_by_name():
    g = mini_inception()
    resolve = resolver(g)
    seq = next(n for n in g.nodes() if n.TYPE == "sequential")
    assert resolve("7.conv:13_nchwc") == ["7"]  # ORT's layout-fused node
    assert resolve("fused 20.gemm:34") == ["20"]
    assert resolve("15.concat:27") == ["15"]  # an input composition, named after its operator
    assert resolve("11.conv:20/WithoutBiases") == ["11"]  # inside a Sequential
    assert resolve("ios:12") == ["12"]
    assert resolve(seq.name) == [op.name for op in seq.nodes]
    assert resolve("ReorderInput_token_6") == [] and resolve("input_abcd_acdb_1.conv:0") == []


def test_every_onnx_node_is_named_after_its_operator():
    from ios_core.lowering.onnx import export

    g = mini_inception()
    g.init_weights(0)
    resolve = resolver(g)
    nodes = export(g, 1).graph.node
    assert [n.name for n in nodes if not resolve(n.name)] == []
    assert any(n.op_type == "Concat" and resolve(n.name) == ["15"] for n in nodes)  # the concat feeding 15


def test_attribute_groups_unmapped_and_sums(pair):
    rows = [OpTime("1.conv:0", 2.0, ("1.conv:0", "2:1"), "Convolution"),  # a fused pair
            OpTime("3:2", 0.5, ("3:2",), "MaxPool"), OpTime("3:2", 0.25, ("3:2",), "MaxPool"),
            OpTime("ReorderOutput", 0.3, ("ReorderOutput",), "Reorder"), OpTime("region", 0.2, (), "op")]
    res = attribute(pair, rows, latency_ms=4.0, profiled_ms=4.4)
    assert [(r["name"], r["kind"], r["ms"]) for r in res["rows"]] == [("1+2", "fused (mixed kinds)", 2.0),
                                                                       ("3", "pooling", 0.75)]
    assert res["unmapped_ms"] == pytest.approx(0.5)
    assert res["overhead_ms"] == pytest.approx(4.0 - 2.75 - 0.5)
    assert res["attributed_share"] == pytest.approx(2.75 / 4.0)
    assert res["profiler_cost"] == pytest.approx(0.1)
    # ORT names a fused Conv+Relu after the Relu: the convolution feeding it is in the group
    res = attribute(pair, [OpTime("2:1_nchwc", 1.0, ("2:1_nchwc",), "Conv")], 2.0, 2.0)
    assert res["rows"][0]["operators"] == ["1", "2"]
    assert res["rows"][0]["kind"] == "fused (mixed kinds)"


def test_kinds():
    g = mini_inception()
    kinds = {op.name: kind_of(op) for op in g.operators()}
    assert kinds["1"] == "conv 3x3" and kinds["3"] == "conv 1x1" and kinds["2"] == "pooling"
    assert kinds["12"] == "conv depthwise" and kinds["15"] == "concat" and kinds["10"] == "elementwise"
    assert kinds["7"] == "conv 3x3" and kinds["19"] == "other"


@pytest.mark.parametrize("name", ["onnxruntime", "openvino", "torch", "ios", "tensorflow", "jax-xla"])
def test_every_cpu_adapter_maps_the_pair(pair, name):
    import adapters

    if adapters.get(name).available("cpu"):
        pytest.skip(adapters.get(name).available("cpu"))
    res = profile_one(name, pair, 1, threads=1, warmup=1, repeat=3)
    _sums(res)
    ops = {op.name for op in pair.operators()}
    mapped = {o for r in res["rows"] for o in r["operators"]}
    assert mapped <= ops
    assert {"1", "3", "4"} <= mapped  # both convolutions and the pool are placed
    if name != "openvino":  # the concat (OpenVINO writes its inputs in place: no layer of its own)
        assert "5" in mapped
    if name == "tensorflow":  # the caller's dispatch (eager execute, the function call) is not an op
        assert not [r for r in res["unmapped_rows"] if r["name"].startswith(("EagerLocalExecute", "KernelAndDevice"))]
    if name == "jax-xla":  # XLA's thunks: the conv alone, its relu fused with the layout change after it
        assert {"convolution", "wrapped_reduce-window"} <= {f for r in res["rows"] for f in r["framework_ops"]}
    if name in ("onnxruntime", "openvino", "tensorflow", "jax-xla"):  # the conv + relu pair fused, one group
        assert any(r["operators"][:2] == ["1", "2"] for r in res["rows"]), res["rows"]
    if name in ("torch", "ios", "jax-xla"):  # torch ranges, IOS stages, XLA's thunks: every operator placed
        assert mapped == ops
    # every operator placed has a time: a row mapped but given none (or the share taken over another
    # figure than the unprofiled latency) fails
    assert all(r["ms"] > 0 for r in res["rows"]), res["rows"]
    assert res["attributed_share"] == pytest.approx(res["attributed_ms"] / res["latency_ms"])


@pytest.mark.parametrize("name", ["torch-compile", "tensorflow-xla"])
def test_compiled_regions_are_unmapped(pair, name):
    import adapters

    if adapters.get(name).available("cpu"):
        pytest.skip(adapters.get(name).available("cpu"))
    res = profile_one(name, pair, 1, threads=1, warmup=1, repeat=2)
    _sums(res)
    assert res["rows"] == [] and res["unmapped_ms"] > 0


HLO = """HloModule jit_forward

%fused_computation (param_0: f32[1,8,10,10]) -> f32[1,8,10,10] {
  %param_0 = f32[1,8,10,10]{3,2,1,0} parameter(0)
  %max.1 = f32[1,8,10,10]{3,2,1,0} maximum(%param_0, %param_0), metadata={op_name="jit(forward)/ios_op1/max"}
  ROOT %copy.2 = f32[1,8,10,10]{3,2,1,0} copy(%max.1), metadata={op_name="jit(forward)/ios_op12/copy"}
}

ENTRY %main.9 (Arg_0.1: f32[1,8,10,10]) -> f32[1,8,10,10] {
  %Arg_0.1 = f32[1,8,10,10]{3,2,1,0} parameter(0)
  %convolution = f32[1,8,10,10]{3,2,1,0} convolution(%Arg_0.1, %Arg_0.1), metadata={op_name="jit(forward)/ios_op0/conv"}
  %transpose_copy_fusion = f32[1,8,10,10]{3,2,1,0} fusion(%Arg_0.1), kind=kLoop, calls=%fused_computation
  ROOT %copy.3 = f32[1,8,10,10]{3,2,1,0} copy(%convolution)
}
"""


def test_jax_hlo_instructions_name_their_operators_fusions_included():
    from adapters.jax import hlo_scopes

    scopes = hlo_scopes(HLO)
    assert scopes["convolution"] == {"ios_op0"}
    assert scopes["transpose_copy_fusion"] == {"ios_op1", "ios_op12"}  # what its fused computation holds
    assert scopes["copy.3"] == set()  # XLA's own layout change: unmapped


def test_jax_trace_without_thunk_events_is_one_unmapped_row(monkeypatch):
    pytest.importorskip("jax")
    import jax

    from adapters.jax import CALL, trace_rows

    def ev(name, start, dur, **stats):
        return type("E", (), {"name": name, "start_ns": start, "duration_ns": dur, "stats": list(stats.items())})()

    def data(events):
        line = type("L", (), {"events": events})()
        return type("D", (), {"planes": [type("P", (), {"name": "/host:CPU", "lines": [line]})()]})()

    calls = [ev(CALL, 0, 2_000_000), ev(CALL, 5_000_000, 4_000_000), ev(CALL, 10_000_000, 3_500_000)]
    monkeypatch.setattr(jax.profiler.ProfileData, "from_file", staticmethod(lambda path: data(calls)))
    assert trace_rows("x", {}, {}) == [OpTime("jit(forward)", 3.5, (), "compiled function")]  # ms, not whole ms
    thunks = [ev("convolution", 1_000, 500_000, hlo_op="convolution"),
              ev("copy.3", 6_000_000, 1_000_000, hlo_op="copy.3"),
              ev("convolution", 5_500_000, 700_000, hlo_op="convolution"),
              ev("late", 20_000_000, 1, hlo_op="late")]  # outside every call: not counted
    monkeypatch.setattr(jax.profiler.ProfileData, "from_file", staticmethod(lambda path: data(calls + thunks)))
    rows = trace_rows("x", {"convolution": {"ios_op0"}}, {"ios_op0": "1"})
    assert rows == [OpTime("convolution", 0.5, ("1",), "hlo"), OpTime("copy.3", 0.0, (), "hlo")]
    monkeypatch.setattr(jax.profiler.ProfileData, "from_file", staticmethod(lambda path: data(thunks)))
    with pytest.raises(ProfilerMissing, match="no 'ios-bench:call'"):
        trace_rows("x", {}, {})


def test_missing_or_failing_profiler_is_one_column(pair, monkeypatch):
    import adapters.onnxruntime as ort_adapter
    from adapters.base import ProfilerMissing

    def broken(self, x, warmup=3, repeat=10):
        raise ProfilerMissing("no trace written")

    monkeypatch.setattr(ort_adapter.ORTCompiled, "profile", broken)
    monkeypatch.setattr(type(ort_adapter.PARALLEL), "available", lambda self, device="cpu": None)
    res = profile_frameworks(pair, ["onnxruntime", "ios"], 1, threads=1, warmup=1, repeat=2)
    assert res[0] == {"framework": "onnxruntime", "error": "not available: ProfilerMissing: no trace written"}
    _sums(res[1])
    text = render(pair, res)
    assert "onnxruntime: not available: ProfilerMissing: no trace written" in text
    assert text.splitlines()[0].split()[-2:] == ["onnxruntime", "ios"]


def test_unavailable_framework(pair, monkeypatch):
    import adapters.openvino as ov_adapter

    monkeypatch.setattr(type(ov_adapter.OPENVINO), "available", lambda self, device="cpu": "openvino is not installed")
    assert profile_one("openvino", pair, 1) == {"framework": "openvino",
                                                 "error": "not available: openvino is not installed"}


def _fake_results(pair):
    a = {"framework": "a", **attribute(pair, [OpTime("1.conv:0", 2.0, ("1.conv:0", "2:1"), "Convolution"),
                                              OpTime("3:2", 1.0, ("3:2",)), OpTime("x", 0.5, ())], 4.0, 4.2)}
    b = {"framework": "b", **attribute(pair, [OpTime(f"ios:{n}", 0.5, (f"ios:{n}",)) for n in "12345"], 3.0, 3.3)}
    return [a, b, {"framework": "c", "error": "not available: no profiler"}]


def _ms(cell: str) -> float:
    return float(cell.split()[0].replace(",", ""))


@pytest.mark.parametrize("by", ["op", "kind"])
def test_table_columns_sum_to_the_latency(pair, by):
    results = _fake_results(pair)
    header, rows = table_rows(pair, results, by)
    assert header[1:] == ["a", "b", "c"]
    labels = [r[0] for r in rows]
    end = labels.index("end-to-end (unprofiled)")
    for col, res in ((1, results[0]), (2, results[1])):
        total = sum(_ms(r[col]) for r in rows[:end] if r[col] != "-" and not r[col].startswith("("))
        assert total == pytest.approx(res["latency_ms"], abs=0.01)
        assert _ms(rows[end][col]) == pytest.approx(res["latency_ms"])
    assert all(r[3] in ("-", "n/a") for r in rows)
    assert rows[labels.index("profiler's cost")][1] == "+5.0%"
    if by == "op":  # one row per IR operator: a's fused 1+2 once, on 2's row, and 1 says where its time is
        ops = [op.name for op in pair.operators()]
        assert labels[:len(ops)] == [f"{op.name} ({kind_of(op)})" for op in pair.operators()]
        assert rows[0][1] == "(in 2)" and rows[1][1] == "2.000 50.0% (with 1)"
        assert rows[ops.index("3")][1] == "1.000 25.0%"  # a row of one operator as it was
        assert rows[ops.index("4")][1] == "-"  # an operator a's profiler never named: nothing, not "(None)"
    else:
        assert kind_totals(results[0]) == {"pooling": 1.0, "fused (mixed kinds)": 2.0}


def test_nested_groups_land_once_on_their_last_operators_row(pair):
    """jax-xla's groups nest (a fusion and an op inside it): both end on operator 2, so row 2 holds their
    sum, the column still adds up to the latency, and operator 1 says where its time is."""
    res = {"framework": "j", **attribute(pair, [OpTime("f", 2.0, ("1.conv:0", "2:1")), OpTime("g", 0.5, ("2:1",)),
                                              OpTime("h", 1.0, ("3:2",))], 4.0, 4.2)}
    header, rows = table_rows(pair, [res])
    by = {r[0].split(" ")[0]: r[1] for r in rows}
    assert by["1"] == "(in 2)" and by["2"] == "2.500 62.5% (with 1)" and by["3"] == "1.000 25.0%"
    end = [r[0] for r in rows].index("end-to-end (unprofiled)")
    assert sum(_ms(r[1]) for r in rows[:end] if not r[1].startswith(("(", "-"))) == pytest.approx(4.0, abs=0.01)


def test_two_groups_on_one_row_add_their_self_times_and_keep_both_kernels():
    from ios_bench.reporting.profile_table import _merged

    got = _merged({"ms": 2.0, "self_ms": 1.0, "exec_types": {"a": "jit_avx2"}},
                  {"ms": 0.5, "self_ms": 0.25, "exec_types": {"b": "ref"}})
    assert got["self_ms"] == 1.25 and got["exec_types"] == {"a": "jit_avx2", "b": "ref"}
    assert "self_ms" not in _merged({"ms": 1.0, "exec_types": {}}, {"ms": 2.0})


def test_plot_is_a_png(pair, tmp_path):
    path = plot(_fake_results(pair), tmp_path / "bars.png", "pair")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError):
        plot([{"framework": "c", "error": "x"}], tmp_path / "none.png")


def _cli(capsys, *argv) -> tuple[int, str, str]:
    from ios_bench.cli import main

    capsys.readouterr()
    try:
        main(list(argv))
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_json_shape_and_bad_input(pair, tmp_path, capsys):
    path = tmp_path / "pair.json"
    pair.save(path)
    code, out, err = _cli(capsys, "profile", "--model", str(path), "--frameworks", "ios,onnxruntime", "--format",
                          "json", "--threads", "1", "--warmup", "1", "--repeat", "2")
    assert code == 0, err
    data = json.loads(out)
    assert [d["framework"] for d in data] == ["ios", "onnxruntime"]
    for d in data:
        assert {"framework", "latency_ms", "profiled_ms", "attributed_ms", "unmapped_ms", "overhead_ms",
                "rows"} <= set(d)
        assert all({"name", "kind", "ms"} <= set(row) for row in d["rows"])
    code, out, err = _cli(capsys, "profile", "--model", str(path), "--frameworks", "ios,nosuch")
    assert code == 2 and "unknown framework 'nosuch'" in err and len(err.strip().splitlines()) == 1
    code, out, err = _cli(capsys, "profile", "--model", "nosuchmodel", "--frameworks", "ios")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_report_section_from_the_run_folder(pair, tmp_path):
    from ios_bench.reporting.profile_table import report_sections
    from ios_bench.reporting.report_tables import Table

    assert report_sections(tmp_path, tmp_path, Table) == []  # no profile.json: no section
    (tmp_path / "profile.json").write_text(json.dumps([{"model": "pair", "batch_size": 1, "device": "cpu",
                                                        "results": _fake_results(pair)}]))
    [(heading, items)] = report_sections(tmp_path, tmp_path, Table)
    assert heading == "Where the time goes"
    table = next(it for it in items if isinstance(it, Table))
    assert table.headers == ["kind", "a", "b", "c"] and table.note == "c: not available: no profiler"
    assert [r[0] for r in table.rows][:6] == ["conv 1x1", "conv 3x3", "pooling", "concat", "elementwise",
                                              "fused (mixed kinds)"]
    img = next(it for it in items if isinstance(it, tuple) and it[0] == "img")
    assert (tmp_path / img[1]).read_bytes()[:4] == b"\x89PNG"
    (tmp_path / "profile.json").write_text("[{")
    [(_, [warn])] = report_sections(tmp_path, tmp_path, Table)
    assert warn[0] == "warn" and "unreadable" in warn[1]


def test_run_profile_picks_each_models_frameworks(pair, tmp_path, monkeypatch):
    import ios_bench.profiling as profiling
    import ios_bench.results as results_mod
    from ios_bench.planning.plan import Plan

    path = tmp_path / "pair.json"
    pair.save(path)
    recs = [{"model": "pair", "batch_size": 1, "device": "cpu", "framework": f, "status": s}
            for f, s in (("onnxruntime", "ok"), ("ios-both[torch]", "ok"), ("ios-greedy[torch]", "ok"),
                         ("openvino", "failed"), ("tvm-notinstalled", "ok"))]
    monkeypatch.setattr(results_mod, "load_run", lambda folder: type("R", (), {"records": recs})())
    asked = []
    monkeypatch.setattr(profiling, "profile_frameworks",
                        lambda graph, names, bs, **kw: asked.append((graph.name, names, bs)) or [])
    plan = Plan()
    plan.models = [str(path)]
    out = profiling.profile_run(tmp_path, plan, say=lambda s: None)
    assert asked == [("pair", ["onnxruntime", "ios"], 1)]
    assert json.loads((tmp_path / "profile.json").read_text()) == out == [
        {"model": "pair", "batch_size": 1, "device": "cpu", "results": []}]


def two_branch_graph():
    """Two conv branches as two groups of one parallel stage, then their concat."""
    b = GraphBuilder("two_branch", (16, 24, 24))
    a = b.conv(b.conv(b.input, 32, 3, padding=1), 32, 3, padding=1)
    c = b.conv(b.conv(b.input, 32, 3, padding=1), 32, 3, padding=1)
    b.end_block(b.concat([a, c]))
    g = b.finish()
    names = [n.name for n in g.blocks[0].nodes]  # conv a1, a2, c1, c2, concat
    g.blocks[0].stages = [[[names[0], names[1]], [names[2], names[3]]], [[names[4]]]]
    g.init_weights(0)
    return g.validate()


def _overlap(a, b) -> bool:
    return a["start_ms"] < b["end_ms"] and b["start_ms"] < a["end_ms"]


def test_ios_timeline_shows_the_parallel_stage_on_two_workers(monkeypatch):
    """The parallel stage's two groups are dispatched at once, on two threads: each waits at a
    barrier for the other before it computes, so a runtime that ran them one after the other would
    break the barrier (whatever else the machine runs), and the two bars must overlap in time."""
    import threading

    import ios_core.runtime.program as program
    from ios_core.runtime import Runtime

    barrier = threading.Barrier(2, timeout=30)
    traced = program._traced

    def meeting(fn, trace, si, ti, *args):
        def met():
            barrier.wait()
            fn()
        return traced(met if si == 0 else fn, trace, si, ti, *args)

    monkeypatch.setattr(program, "_traced", meeting)
    g = two_branch_graph()
    names = [n.name for n in g.blocks[0].nodes]
    rt = Runtime(g, 1, threads=2, trace=[])
    timelines = [rt.timeline() for _ in range(3)]
    for bars in timelines:
        first = sorted((b for b in bars if b["stage"] == 0), key=lambda b: b["worker"])
        assert [(b["worker"], b["groups"]) for b in first] == [(0, [[names[0], names[1]]]),
                                                            (1, [[names[2], names[3]]])]
        [last] = [b for b in bars if b["stage"] == 1]  # one group: run on the calling thread
        assert last["worker"] == 0 and last["groups"] == [[names[4]]]
        assert all(0 <= b["start_ms"] <= b["end_ms"] for b in bars)
        assert last["start_ms"] >= max(b["end_ms"] for b in first)
    assert all(_overlap(*[b for b in bars if b["stage"] == 0]) for bars in timelines)  # concurrently
    assert all(len({b["thread"] for b in bars if b["stage"] == 0}) == 2 for bars in timelines)
    assert rt.trace == []
    with pytest.raises(RuntimeError, match="without trace"):
        Runtime(g, 1, threads=2).timeline()  # a timed build carries no clocks


def test_ios_profile_carries_the_timeline_and_plot_draws_it(tmp_path, capsys):
    g = two_branch_graph()
    res = profile_one("ios", g, 1, threads=2, warmup=1, repeat=2)
    _sums(res, one_thread=False)
    assert {b["worker"] for b in res["timeline"]} == {0, 1}
    path = tmp_path / "g.json"
    g.save(path)
    code, out, err = _cli(capsys, "profile", "--model", str(path), "--frameworks", "ios", "--threads", "2",
                          "--warmup", "1", "--repeat", "2", "--plot", str(tmp_path / "bars.png"))
    assert code == 0, err
    png = tmp_path / "bars-ios-timeline.png"
    assert f"plot: {png}" in out and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from ios_bench.reporting.profile_table import report_sections  # run --profile's section draws it too
    from ios_bench.reporting.report_tables import Table

    (tmp_path / "profile.json").write_text(json.dumps([{"model": "two_branch", "batch_size": 1, "device": "cpu",
                                                        "results": [res]}]))
    [(_, items)] = report_sections(tmp_path, tmp_path, Table)
    imgs = [it[1] for it in items if isinstance(it, tuple) and it[0] == "img"]
    assert imgs == ["where_time_goes_two_branch_cpu_b1.png", "where_time_goes_two_branch_cpu_b1-ios-timeline.png"]
    assert (tmp_path / imgs[1]).read_bytes()[:4] == b"\x89PNG"


def test_a_profile_at_a_reduced_precision_builds_the_cells_precision(pair, monkeypatch):
    """profile --precision int8 profiles the int8 build (the quantized model), as the cell would run
    it: both builds (timed and profiled) are asked for the precision, and the result says int8."""
    import adapters

    ort = adapters.get("onnxruntime")
    if ort.available("cpu"):
        pytest.skip(ort.available("cpu"))
    asked = []
    build = type(ort).build

    def spy(self, graph, batch_size, device="cpu", threads=None, **options):
        asked.append(options.get("precision", "fp32"))
        return build(self, graph, batch_size, device, threads, **options)

    monkeypatch.setattr(type(ort), "build", spy)
    res = profile_one("onnxruntime", pair, 1, threads=1, precision="int8", warmup=1, repeat=2)
    assert asked == ["int8", "int8"]
    _sums(res)
    assert res["precision"] == "int8"
    ops = {r["name"] for r in res["rows"]} | {r["name"] for r in res["unmapped_rows"]}
    assert any("QLinear" in n or "Integer" in n or "Quant" in n for r in res["rows"] for n in r["framework_ops"]) \
        or any("Quant" in n for n in ops), res["rows"]


def test_cli_offers_every_precision_a_sweep_can_ask_for(pair, tmp_path, capsys):
    """``profile --precision`` takes the sweep's precisions (int8 was missing from its choices)."""
    import adapters

    if adapters.get("onnxruntime").available("cpu"):
        pytest.skip(adapters.get("onnxruntime").available("cpu"))
    path = tmp_path / "pair.json"
    pair.save(path)
    code, out, err = _cli(capsys, "profile", "--model", str(path), "--frameworks", "onnxruntime", "--precision",
                          "int8", "--format", "json", "--threads", "1", "--warmup", "1", "--repeat", "2")
    assert code == 0, err
    assert [d.get("precision") for d in json.loads(out)] == ["int8"]
    code, out, err = _cli(capsys, "profile", "--model", str(path), "--frameworks", "onnxruntime", "--precision", "int4")
    assert code == 2 and "int4" in err


def test_an_operators_events_on_several_threads_count_their_wall_time_once():
    from adapters.base import per_call_ms, union_length

    assert union_length([(0, 4), (2, 6), (8, 9), (5, 7)]) == 8  # [0, 7] and [8, 9]
    windows = [(0, 100), (200, 300)]
    events = [("conv", 10, 60), ("conv", 30, 80),  # two threads at once: 70, not 100
              ("pool", 80, 150),  # runs past its call: clipped to it
              ("conv", 210, 220), ("conv", 230, 240),  # the second call: 20
              ("late", 150, 160)]  # between calls: no call's
    assert per_call_ms(windows, events, 10) == [{"conv": 7.0, "pool": 2.0}, {"conv": 2.0}]


def test_onnxruntime_parallel_nodes_are_counted_once():
    from adapters.onnxruntime import ort_rows

    def node(name, ts, dur):
        return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "args": {"op_name": "Conv"}}

    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 1000},
              node("1.conv:0", 0, 600), node("1.conv:0", 100, 600),  # one node's kernel on two inter-op threads
              node("3:2", 700, 200)]
    rows = {r.name: r.ms for r in ort_rows(events, 1)}
    assert rows == {"1.conv:0": pytest.approx(0.7), "3:2": pytest.approx(0.2)}


def test_rows_adding_up_to_more_than_the_profiled_call_are_flagged(pair):
    # two operators that ran at once, 3 ms each, in a profiled call of 4 ms (unprofiled: 3.8 ms)
    rows = [OpTime("1.conv:0", 3.0, ("1.conv:0",), "Conv"), OpTime("4.conv:3", 3.0, ("4.conv:3",), "Conv")]
    res = attribute(pair, rows, latency_ms=3.8, profiled_ms=4.0)
    assert res["attributed_over_profiled"] == pytest.approx(1.5)
    assert res["attributed_share"] == pytest.approx(6.0 / 3.8)
    assert "150% of the profiled call" in res["overlap"] and "at the same time" in res["overlap"]
    assert res["overhead_ms"] == pytest.approx(3.8 - 6.0)
    fits = attribute(pair, rows[:1], latency_ms=3.8, profiled_ms=4.0)
    assert "overlap" not in fits and fits["attributed_over_profiled"] == pytest.approx(0.75)
    text = render(pair, [{"framework": "a", **res}, {"framework": "b", **fits}])
    assert "exceeds the gaps" not in text  # the old, wrong explanation of a negative overhead
    assert "(!) a: its rows add up to 6 ms" in text and "(!) b" not in text
    line = next(li for li in text.splitlines() if li.startswith("attributed / profiled"))
    assert line.split()[-3:] == ["150.0%", "(!)", "75.0%"]
