"""ios_bench.planning.probing: which adapters and IOS providers run where, asked in workers (faked here)."""

from ios_bench.planning.plan import Plan
from ios_bench.planning.probing import ios_providers, merge_probes, probe
from tests.round_fakes import FakeExecutor, FakeNode, context


def test_merge_probes_an_adapter_runs_where_one_node_runs_it():
    a = {"status": "ok", "adapters": {"torch": {"reason": None, "version": "2"}, "tvm": {"reason": "no tvm"}}}
    b = {"status": "ok", "adapters": {"torch": {"reason": "broken"}, "tvm": {"reason": None, "version": "0.2"}}}
    m = merge_probes([("n1", a), ("n2", b)])
    assert m["adapters"]["torch"]["reason"] is None and m["adapters"]["torch"]["nodes"] == ["n1"]
    assert m["adapters"]["tvm"]["reason"] is None and m["adapters"]["tvm"]["nodes"] == ["n2"]


def test_probe_asks_one_worker_per_node_and_falls_back_to_one_by_one(tmp_path):
    calls = []

    def answer(task):
        calls.append(task.spec["names"])
        if task.spec["names"] and len(task.spec["names"]) > 1:
            return {"status": "failed", "reason": "segfault", "node": "local"}
        name = task.spec["names"][0]
        return {"status": "ok", "adapters": {name: {"reason": None, "version": "1"}}, "optimize": True}

    ctx, said = context(tmp_path, FakeExecutor(answer), frameworks=["torch"])
    placement: dict = {}
    got = probe(ctx, placement)
    assert calls[0] == ["torch", "ios"] and ["torch"] in calls and ["ios"] in calls
    assert got["cpu"]["adapters"]["torch"]["reason"] is None and got["cpu"]["optimize"] is True
    assert placement["cpu"]["nodes"] == ["local"] and "one by one" in said[0]


def test_a_device_no_node_offers_is_said(tmp_path):
    ex = FakeExecutor(lambda t: {"status": "ok", "adapters": {}}, nodes=[])
    ctx, _ = context(tmp_path, ex)
    got = probe(ctx, {})
    assert "no node offers cpu" in got["cpu"]["no_node"] and not ex.seen


def test_ios_providers_are_the_plans_or_the_available_ones():
    notes: list[str] = []
    probe_ = {"providers": {"torch": None, "onnxruntime": None, "openvino": "not installed"}}
    assert ios_providers(Plan(), probe_, "cpu", notes) == ["torch", "onnxruntime"]
    assert notes == ["IOS provider openvino unavailable on cpu: not installed"]
    ios_providers(Plan(), probe_, "cpu", notes)
    assert len(notes) == 1  # said once
    assert ios_providers(Plan(ios_providers=["openvino"]), probe_, "cpu", []) == ["openvino"]
    assert ios_providers(Plan(), probe_, "cuda", []) == ["torch"]  # a GPU runs its own kernels
    assert FakeNode("x", "y").id == "x"
