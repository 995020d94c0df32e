"""benchmarks/gpu_fidelity.py on the fake CUDA device (its figures meaningless and labelled so): it
runs, prints per stage the model's figure, the stage alone, alone with a cold L2, inside the whole
replay and the gap before it, a diagnosis per schedule and the critical-path bound per network."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.conftest import ROOT


@pytest.fixture
def fidelity(monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_fidelity", ROOT / "benchmarks" / "gpu_fidelity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    small = module.models.get  # a small sample: CPU kernels stand in for the GPU
    monkeypatch.setattr(module.models, "get", lambda name, **kw: small(name, input_shape=(8, 12, 12)))
    monkeypatch.setattr(module, "REPLAYS", 3)
    return module


def test_it_prints_every_stage_a_diagnosis_and_the_bound_on_the_fake_device(fidelity, capsys):
    assert fidelity.main(["--fake", "--models", "sample"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("FAKE DEVICE") and "MEANINGLESS" in lines[0]
    titles = [i for i, line in enumerate(lines) if line.startswith("sample IOS-")]
    assert len(titles) == 2 and all("[fake device: meaningless]" in lines[i] for i in titles)
    for i in titles:
        n = int(re.search(r": (\d+) stages;", lines[i]).group(1))
        rows = [line.split("|")[1:-1] for line in lines[i + 3:i + 3 + n]]
        assert [int(r[0]) for r in rows] == list(range(n))
        for r in rows:  # model, alone, cold L2 always measured; in replay wherever the stage launches a kernel
            assert all(float(c.replace(",", "")) > 0 for c in r[2:5]), r
        assert any(r[5].strip() != "-" for r in rows)
        diag = lines[i + 3 + n + 1]
        assert diag.startswith("diagnosis: measured ") and ". Largest: " in diag
    bound = next(line for line in lines if line.startswith("critical-path bound [fake device: meaningless]: "))
    assert re.search(r"IOS-Both [\d.,]+ ms = [\d.]+x the bound; with the per-graph replay cost each isolated "
                     r"figure carries \(-?[\d.,]+ ms\) counted once: [\d.,]+ ms, IOS-Both = [\d.]+x$", bound), bound
    assert "kept" in next(line for line in lines if line.startswith("## sample"))


def test_bad_arguments_are_one_line_and_exit_2(fidelity, capsys):
    for argv in (["--models", "nope"], ["--budget", "0"], ["--models", ","]):
        with pytest.raises(SystemExit) as e:
            fidelity.main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ")


def test_a_network_past_the_budget_is_skipped_with_a_line(fidelity, capsys, monkeypatch):
    clock = iter([0.0, 1000.0, 1000.0, 1000.0])
    monkeypatch.setattr(fidelity, "_now", lambda: next(clock))
    assert fidelity.main(["--fake", "--models", "sample", "--budget", "10"]) == 0
    out = capsys.readouterr().out
    assert "## sample: skipped (the budget of 10 s was spent: 1000 s)" in out


def test_a_network_that_fails_is_a_line_the_others_print_and_the_script_exits_1(fidelity, capsys, monkeypatch):
    """One network raising (a marks error, a GPU gone) leaves the others their tables, and the script
    fails (exit 1), so the GPU window records the step failed, not done."""
    real = fidelity.network

    def network(name, *a, **kw):
        if name == "squeezenet":
            raise RuntimeError("cuEventRecordWithFlags failed: CUresult 1")
        return real(name, *a, **kw)

    monkeypatch.setattr(fidelity, "network", network)
    assert fidelity.main(["--fake", "--models", "squeezenet,sample"]) == 1
    out = capsys.readouterr().out
    assert "## squeezenet: failed (RuntimeError: cuEventRecordWithFlags failed: CUresult 1)" in out
    assert any(line.startswith("sample IOS-Both") for line in out.splitlines())
    assert out.rstrip().splitlines()[-1].endswith("; failed: squeezenet")


class _SignatureCosts:
    """A cost model that answers from a table and records every stage signature the search asked
    for: a merge of convolutions costs less than the convolutions side by side, so the search
    merges."""

    def __init__(self):
        self.seen: set[str] = set()

    def stage_latency(self, stage, batch_size):
        from ios_core.cost.cache import stage_signature

        self.seen.add(stage_signature(stage.kind, stage.groups)[0])
        if stage.kind == "merge":
            return 0.5
        return 0.2 * len(stage.groups) + max(len(g) for g in stage.groups)


def test_the_model_column_costs_each_stage_as_the_search_did_merged_ones_too(fidelity):
    """The search costs a merged stage as ``merge`` of the original convolutions, and the
    operators that read it as they were before the rewrite: the stage signature includes both, so
    a stage rebuilt from the scheduled graph misses the search's figure and is measured afresh."""
    from ios_core.cost.cache import stage_signature
    from ios_core.optimizer import schedule
    from tests.runtime_helpers import fan_graph

    graph, _ = fan_graph()
    costs = _SignatureCosts()
    result = schedule(graph, "both", costs, batch_size=1, validate=False)
    assert result.stats.merged >= 1  # the case in question
    stages = fidelity.search_stages(result.graph, graph)
    assert len(stages) == len(result.schedule.stages) and any(merged for _, merged in stages)
    for stage, merged in stages:
        assert stage_signature(stage.kind, stage.groups)[0] in costs.seen, (stage, merged)
        assert (stage.kind == "merge") == merged or stage.kind == "parallel"
    assert sum(costs.stage_latency(st, 1) for st, _ in stages) == pytest.approx(result.stats.cost_ms)


class _OperatorCosts:
    """Each one-operator stage costs what ``ms`` says for its operator."""

    def __init__(self, ms: dict[str, float]):
        self.ms = ms

    def stage_latency(self, stage, batch_size):
        (node,), = stage.groups
        return self.ms[node.name]


def test_the_critical_path_bound_is_the_longest_path_of_isolated_times(fidelity):
    """a -> b -> d and a -> c -> d at 1, 2, 5 and 1 ms: the longest path is a, c, d (7 ms), not
    the sum (9 ms) nor the widest level; with a per-graph replay cost of 0.5 ms in every isolated
    figure, counted once: 0.5 + 4.5 + 0.5 + 0.5 = 6 ms."""
    from ios_core.ir import GraphBuilder

    b = GraphBuilder("diamond", (4, 6, 6))
    a = b.conv(b.input, 4, 1)
    bb = b.conv(a, 4, 3, padding=1)
    c = b.conv(a, 4, 1)
    d = b.add([bb, c])
    b.end_block(d)
    graph = b.finish()
    ms = {a.node.name: 1.0, bb.node.name: 2.0, c.node.name: 5.0, d.node.name: 1.0}
    assert fidelity.critical_path_ms(graph, _OperatorCosts(ms)) == pytest.approx(7.0)
    assert fidelity.critical_path_ms(graph, _OperatorCosts(ms), graph_ms=0.5) == pytest.approx(6.0)
    ms[bb.node.name] = 6.0  # now the other branch is the longest
    assert fidelity.critical_path_ms(graph, _OperatorCosts(ms)) == pytest.approx(8.0)
