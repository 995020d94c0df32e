"""ios_core.optimizer.optimize: a schedule validated against the sequential one (kept only when it
measures faster), with a judge that says what to keep and with the measured cost model."""

from __future__ import annotations

import pytest

from ios_core.cost.measured import MeasuredCostModel
from ios_core.optimizer import schedule
from tests.runtime_helpers import fan_graph

FAST = dict(warmup=1, number=1, repeat=2, min_sample_ms=None)


class _Judge:
    """A deterministic cost model that claims parallel stages are free and whose validation
    reports what the test tells it."""

    def __init__(self, kept):
        self.kept = kept
        self.asked = []

    def stage_latency(self, stage, batch_size):
        return 1.0 if len(stage.groups) == 1 else 0.1

    def validate_schedule(self, schedule, sequential, batch_size):
        self.asked.append((schedule, sequential))
        return {"schedule_ms": 2.0 if self.kept == "sequential" else 1.0, "sequential_ms": 1.5, "kept": self.kept}


def test_optimizer_returns_sequential_when_the_schedule_measures_slower():
    g, _ = fan_graph()
    judge = _Judge("sequential")
    res = schedule(g, "both", judge)
    out, st = res.graph, res.stats
    assert st.validation["kept"] == "sequential" and st.validation["schedule_ms"] == 2.0
    assert all(len(stage) == 1 and len(stage[0]) == 1 for b in out.blocks for stage in b.stages)
    assert st.cost_ms == pytest.approx(st.validation["sequential_cost_ms"])
    assert st.validation["schedule_cost_ms"] < st.validation["sequential_cost_ms"]
    assert "SEQUENTIAL schedule is returned" in st.summary()
    kept = schedule(g, "both", _Judge("schedule"))
    assert kept.stats.validation["kept"] == "schedule"
    assert any(len(stage) > 1 for b in kept.graph.blocks for stage in b.stages)
    assert schedule(g, "both", _Judge("schedule"), validate=False).stats.validation is None
    j = _Judge("schedule")
    schedule(g, "sequential", j)
    assert j.asked == []  # nothing to validate


def test_measured_validation_times_the_candidates_with_the_runtime(monkeypatch):
    """On the CPU every candidate of the strategy's space is timed by default (IOS-Parallel: no
    DP-without-merges, it is the DP), each distinct one built once (on this graph the overhead
    candidate is the schedule, so there is no second timing: the next test makes it differ)."""
    import ios_core.runtime as runtime

    g, _ = fan_graph()
    g.init_weights(0)
    built = []
    real = runtime.make_runtime

    def counting(graph, *a, **kw):
        built.append(graph)
        return real(graph, *a, **kw)

    monkeypatch.setattr(runtime, "make_runtime", counting)
    cm = MeasuredCostModel(threads=2, cache=False, **FAST)
    assert cm.candidates == ("schedule", "sequential", "greedy", "parallel", "overhead")
    v = schedule(g, "parallel", cm).stats.validation
    rows = {c["name"]: c for c in v["candidates"]}
    assert list(rows) == ["schedule", "sequential", "greedy", "overhead"]
    assert v["schedule_ms"] > 0 and v["sequential_ms"] > 0 and v["provider"] == "torch"
    assert rows[v["kept"]]["measured_ms"] == min(c["measured_ms"] for c in rows.values())
    # one build per distinct candidate timed: none built twice
    assert len(built) == len({id(x) for x in built}) == sum("same_as" not in c for c in rows.values())
    only = MeasuredCostModel(threads=2, cache=False, candidates="schedule,sequential", **FAST)
    v = schedule(g, "parallel", only).stats.validation
    assert [c["name"] for c in v["candidates"]] == ["schedule", "sequential"]


class _FewStages(MeasuredCostModel):
    """The measured model's end-to-end timing, with stage figures the test sets: a stage of one or
    two single-operator groups 0.1 us, any other 1 us. On ``fan_graph`` the DP's schedule runs two
    convolutions in one stage, the third alone, then the concatenation (3 stages); whole runs
    measure tens of microseconds at least, so the fitted per-stage cost is far above 1 us and the
    overhead candidate takes 2 stages (a 1 us one among them): it differs from the schedule and
    from the sequential one."""

    def stage_latency(self, stage, batch_size):
        return 1e-4 if len(stage.groups) <= 2 and all(len(gr) == 1 for gr in stage.groups) else 1e-3


def test_the_overhead_candidate_is_timed_against_the_best_ones_warm_runtime(monkeypatch):
    """The second timing (the overhead candidate against the best of the first) builds the overhead
    candidate's runtime only: the best's runtime is the one built and warmed in the first timing,
    warmed again by one run, not built again."""
    import ios_core.runtime as runtime

    g, _ = fan_graph()
    g.init_weights(0)
    built, measured = [], []  # (graph, runtime) per build; runtime per measure call
    real = runtime.make_runtime

    def counting(graph, *a, **kw):
        rt = real(graph, *a, **kw)
        built.append((graph, rt))
        own = rt.measure

        def measure(**kw):
            measured.append((rt, kw))
            return own(**kw)

        rt.measure = measure
        return rt

    monkeypatch.setattr(runtime, "make_runtime", counting)
    cm = _FewStages(threads=2, cache=False, candidates="schedule,sequential,overhead", **FAST)
    timings = []
    timed = cm.time_candidates

    def spy(graphs, batch_size, repeat=None, runtimes=None):
        b, m = len(built), len(measured)
        out = timed(graphs, batch_size, repeat=repeat, runtimes=runtimes)
        timings.append({"graphs": dict(graphs), "built": built[b:], "measured": measured[m:]})
        return out

    monkeypatch.setattr(cm, "time_candidates", spy)
    v = schedule(g, "parallel", cm).stats.validation
    rows = {c["name"]: c for c in v["candidates"]}
    assert [rows[k]["stages"] for k in ("schedule", "sequential", "overhead")] == [3, 4, 2]
    assert not any("same_as" in c for c in rows.values()) and rows["overhead"]["measured_raw_ms"] > 0
    first, second = timings  # two timings: the overhead candidate differs from every other
    assert list(first["graphs"]) == ["schedule", "sequential"] and len(first["built"]) == 2
    best = min(("schedule", "sequential"), key=lambda k: rows[k]["measured_ms"])
    assert list(second["graphs"]) == ["overhead", best]
    # one build in the second timing: the overhead candidate's; the best's runtime is the first one's
    assert [gr for gr, _ in second["built"]] == [second["graphs"]["overhead"]]
    best_rt = next(rt for gr, rt in first["built"] if gr is second["graphs"][best])
    again = [kw for rt, kw in second["measured"] if rt is best_rt]
    assert again[0] == dict(warmup=0, number=1, repeat=1)  # warm already: one run, then the 5 samples
    assert len(again) == 1 + 5
    assert len(built) == 3


class _Fixed:
    """A runtime whose every run takes ``ms`` (what ``time_candidates`` asks of it), counting runs."""

    def __init__(self, ms):
        self.ms, self.runs = ms, 0

    def measure(self, warmup=0, number=1, repeat=1):
        from types import SimpleNamespace

        self.runs += number * repeat
        return SimpleNamespace(median=self.ms)


def test_the_cpu_candidates_race_a_slow_candidate_is_timed_no_more(monkeypatch):
    import ios_core.runtime as runtime
    from ios_core.cost.measured import RACE_DROP, RACE_ROUNDS

    g, _ = fan_graph()
    times = {"a": 1.0, "b": 1.0 + RACE_DROP / 2, "c": 2.0, "d": 1.0}
    graphs = {k: g for k in times}
    fakes = {}

    def make(graph, *a, **kw):
        name = list(times)[len(fakes)]
        fakes[name] = _Fixed(times[name])
        return fakes[name]

    monkeypatch.setattr(runtime, "make_runtime", make)
    cm = MeasuredCostModel(threads=2, cache=False, **FAST)
    kept = {}
    v = cm.time_candidates(graphs, 1, repeat=7, runtimes=kept)
    assert v["measured_ms"] == times  # every candidate measured, the slow one too
    assert v["samples_by"] == {"a": 7, "b": 7, "c": RACE_ROUNDS, "d": 7}
    # a later call with the same graph objects reuses the runtimes (one warm run), builds none
    runs = fakes["a"].runs
    again = cm.time_candidates({"a": g}, 1, repeat=3, runtimes=kept)
    assert again["measured_ms"] == {"a": 1.0} and len(fakes) == 4 and fakes["a"].runs == runs + 1 + 3


class _Device:
    """A cost model whose end-to-end 'device' runs a schedule in the sum of its stages' figures plus
    a hidden 0.5 ms per stage (what the stage figures miss), counting what it is asked to time."""

    candidates = ("schedule", "sequential", "greedy", "parallel", "overhead")

    def __init__(self):
        from ios_core.cost.synthetic import SyntheticCostModel

        self.base = SyntheticCostModel()
        self.timed: list[list[str]] = []
        self.noted = None

    def stage_latency(self, stage, batch_size):
        return self.base.stage_latency(stage, batch_size)

    def time_candidates(self, graphs, batch_size):
        from ios_core.optimizer import Schedule, schedule_cost

        self.timed.append(list(graphs))
        return {"measured_ms": {k: schedule_cost(g, self.base, batch_size) + 0.5 * len(Schedule.of(g))
                                for k, g in graphs.items()}, "failed": {}, "seconds": 0.0, "form": "test"}

    def note_candidates(self, validation):
        self.noted = validation


def test_the_search_keeps_the_candidate_that_measures_fastest_and_fits_the_per_stage_cost():
    from ios_core.models import get

    g = get("sample", input_shape=(8, 12, 12)).init_weights(0)
    dev = _Device()
    res = schedule(g, "both", dev, batch_size=1)
    v = res.stats.validation
    rows = {c["name"]: c for c in v["candidates"]}
    assert list(rows) == ["schedule", "sequential", "greedy", "parallel", "overhead"]
    # on this graph no two of the first round are identical (the next test has some), and the
    # overhead candidate is the schedule: one timing of the four; every candidate has both figures
    assert dev.timed == [["schedule", "sequential", "greedy", "parallel"]] and rows["overhead"]["same_as"] == "schedule"
    assert all(c["predicted_ms"] > 0 and c["measured_ms"] > 0 for c in rows.values())
    # measured = predicted + 0.5 per stage, exactly: the fit finds it
    assert v["per_stage_ms"] == pytest.approx(0.5)
    for c in rows.values():
        assert c["measured_ms"] == pytest.approx(c["predicted_ms"] + 0.5 * c["stages"])
    best = min(c["measured_ms"] for c in rows.values())
    assert rows[v["kept"]]["measured_ms"] == best and res.stats.num_stages == rows[v["kept"]]["stages"]
    assert dev.noted is v


class _ReplayDevice(_Device):
    """A CUDA-graph device: every stage figure carries a per-graph cost G (a stage is timed as a
    replay of its own), a whole schedule's replay pays G once, plus a hidden 0.05 ms per stage; its
    replay constants state G (as ``MeasuredCostModel.replay_constants`` does on cuda)."""

    G, PER_STAGE = 0.4, 0.05

    def stage_latency(self, stage, batch_size):
        return self.base.stage_latency(stage, batch_size) + self.G

    def replay_constants(self):
        return {"graph_ms": self.G, "stage_ms": 0.001}

    def time_candidates(self, graphs, batch_size):
        from ios_core.optimizer import Schedule, schedule_cost

        self.timed.append(list(graphs))
        run = {k: self.G + schedule_cost(g, self.base, batch_size) + self.PER_STAGE * len(Schedule.of(g))
               for k, g in graphs.items()}
        return {"measured_ms": run, "failed": {}, "seconds": 0.0, "form": "test"}


def test_on_a_replaying_device_the_fit_takes_the_per_graph_cost_out_and_recovers_the_per_stage_cost():
    """Fitted against the raw predictions, every stage figure's G hides the per-stage cost (the fit
    clamps at 0); against the predictions corrected by the replay constants it is recovered exactly,
    and the overhead hypothesis (each stage: figure - G + the fitted cost) is the device's own model,
    so the schedule it finds measures no slower than the DP's or the sequential one."""
    from ios_core.models import get

    g = get("sample", input_shape=(8, 12, 12)).init_weights(0)
    dev = _ReplayDevice()
    v = schedule(g, "both", dev, batch_size=1).stats.validation
    rows = {c["name"]: c for c in v["candidates"]}
    assert v["per_graph_ms"] == pytest.approx(dev.G)
    assert v["per_stage_ms"] == pytest.approx(dev.PER_STAGE)
    for c in rows.values():  # measured = corrected prediction + the per-stage cost, exactly
        corrected = c["predicted_ms"] - (c["stages"] - 1) * dev.G
        assert c["measured_ms"] == pytest.approx(corrected + dev.PER_STAGE * c["stages"])
    best_other = min(rows["schedule"]["measured_ms"], rows["sequential"]["measured_ms"])
    assert rows["overhead"]["measured_ms"] <= best_other + 1e-9
    # where more, cheaper stages pay (inception_v3's figures: no weights needed), the hypothesis finds
    # a schedule the raw figures (each stage + G) rank below the DP's, and it measures faster
    v = schedule(get("inception_v3"), "both", _ReplayDevice(), batch_size=1).stats.validation
    rows = {c["name"]: c for c in v["candidates"]}
    assert "same_as" not in rows["overhead"] and rows["overhead"]["stages"] > rows["schedule"]["stages"]
    assert rows["overhead"]["measured_ms"] < rows["schedule"]["measured_ms"] and v["kept"] == "overhead"


def test_identical_first_round_candidates_are_timed_once():
    """Two convolutions of one input, of different shapes: IOS-Parallel's only parallel schedule
    runs both in one stage, which is what greedy does, so ``parallel`` is ``greedy``: timed once,
    under greedy's name, and given greedy's figure."""
    from ios_core.ir import GraphBuilder

    b = GraphBuilder("two", (8, 12, 12))
    b.end_block(b.concat([b.conv(b.input, 8, 1), b.conv(b.input, 16, 3, padding=1)]))
    g = b.finish().init_weights(0)
    dev = _Device()
    v = schedule(g, "both", dev, batch_size=1).stats.validation
    rows = {c["name"]: c for c in v["candidates"]}
    assert rows["parallel"]["same_as"] == "greedy" and "same_as" not in rows["greedy"]
    assert dev.timed == [["schedule", "sequential", "greedy"]]  # parallel (and overhead = schedule) not timed
    assert rows["parallel"]["measured_ms"] == rows["greedy"]["measured_ms"]


def test_validation_text_names_each_candidate():
    from ios_core.optimizer.optimize import fit_per_stage_ms, validation_text

    text = validation_text({"candidates": [{"name": "schedule", "measured_ms": 1.25},
                                           {"name": "greedy", "same_as": "schedule", "measured_ms": 1.25},
                                           {"name": "overhead", "reason": "RuntimeError: gone"}],
                            "kept": "greedy", "form": "cuda-graph replay"})
    assert text == ("candidates timed end to end (cuda-graph replay, ms): schedule 1.250, greedy (= schedule), "
                    "overhead - -> GREEDY kept")
    assert fit_per_stage_ms([{"measured_ms": 1.0, "predicted_ms": 2.0, "stages": 4}]) == 0.0  # never negative
    assert fit_per_stage_ms([{"measured_ms": 1.0, "predicted_ms": None, "stages": 4}]) is None
    # with a per-graph cost of 0.25: corrected 2.0 - 3 * 0.25 = 1.25, measured 1.45 over 4 stages
    assert fit_per_stage_ms([{"measured_ms": 1.45, "predicted_ms": 2.0, "stages": 4}], 0.25) == pytest.approx(0.05)


@pytest.mark.parametrize("strategy, names", [
    ("greedy", ["schedule", "sequential"]),
    ("merge", ["schedule", "sequential", "overhead"]),
    ("parallel", ["schedule", "sequential", "greedy", "overhead"]),
    ("both", ["schedule", "sequential", "greedy", "parallel", "overhead"])])
def test_a_strategy_ends_with_the_candidates_of_its_own_space(strategy, names):
    """A baseline or an ablation never returns another strategy's schedule: greedy is checked
    against sequential only, IOS-Merge is offered no parallel stage."""
    from ios_core.models import get

    g = get("sample", input_shape=(8, 12, 12)).init_weights(0)
    res = schedule(g, strategy, _Device(), batch_size=1)
    assert [c["name"] for c in res.stats.validation["candidates"]] == names


def _blocks_graph():
    from ios_core import models

    g = models.get("inception_v3", image_size=75)  # many blocks, each with parallel branches
    assert len(g.blocks) > 3
    return g


class _TickingCost:
    """A cost model whose every stage costing advances the optimizer's clock by one second (the
    search's time is then exact): the synthetic model's figures."""

    def __init__(self, clock):
        from ios_core.cost.synthetic import SyntheticCostModel

        self.base, self.clock = SyntheticCostModel(), clock

    def stage_latency(self, stage, batch_size):
        self.clock[0] += 1.0
        return self.base.stage_latency(stage, batch_size)


def test_a_search_budget_schedules_the_blocks_left_greedily(monkeypatch):
    import importlib

    opt = importlib.import_module("ios_core.optimizer.optimize")  # the module (the package exports a function)
    g = _blocks_graph()
    clock = [0.0]
    monkeypatch.setattr(opt.time, "perf_counter", lambda: clock[0])
    full = schedule(g, "both", _TickingCost(clock), validate=False)
    first = full.stats.per_block[0]["stages_costed"]
    assert full.stats.budget_greedy_blocks == 0 and full.stats.search_budget_s is None
    # a budget the first block's search spends: every later block greedily, said so
    clock[0] = 0.0
    cut = schedule(g, "both", _TickingCost(clock), validate=False, search_seconds=first)
    n = len(g.blocks)
    assert cut.stats.budget_greedy_blocks == n - 1 and cut.stats.search_budget_s == first
    assert [b.get("greedy") is not None for b in cut.stats.per_block] == [False] + [True] * (n - 1)
    greedy = schedule(g, "greedy", _TickingCost(clock), validate=False)
    # the blocks after the first are exactly greedy's; the first is the full search's
    assert [len(b.stages) for b in cut.graph.blocks[1:]] == [len(b.stages) for b in greedy.graph.blocks[1:]]
    assert len(cut.graph.blocks[0].stages) == len(full.graph.blocks[0].stages)
    assert "blocks scheduled greedily" in cut.stats.summary()
    with pytest.raises(ValueError):
        schedule(g, "both", _TickingCost(clock), validate=False, search_seconds=0)


def _residual_chain(channels: int = 8):
    """conv -> conv -> add(first, second) -> conv: every operator depends on the one before it (the add
    reads the first convolution too, as a residual connection does), so one schedule only."""
    from ios_core.ir import GraphBuilder

    b = GraphBuilder("chain", (channels, 6, 6))
    a = b.conv(b.input, channels, 3, padding=1)
    c = b.conv(a, channels, 3, padding=1)
    s = b.add([a, c])
    b.end_block(b.conv(s, channels, 1))
    return b.finish()


def test_only_sequential_tells_a_chain_from_a_graph_with_parallel_operators():
    from ios_core.optimizer.optimize import only_sequential

    assert only_sequential(_residual_chain())
    assert not only_sequential(fan_graph()[0])  # three convolutions of one input


def test_a_chain_graphs_greedy_schedule_is_its_sequential_one():
    g = _residual_chain()
    stages = {s: [b.stages for b in schedule(g, s, _Judge("schedule")).graph.blocks] for s in ("sequential", "greedy")}
    assert stages["greedy"] == stages["sequential"] == [[[["1"]], [["2"]], [["3"]], [["4"]]]]


class _Composed:
    """A composed cost model: a stage costs the sum of its operators (1 ms each), groups concurrently."""

    composes_groups = True

    def __init__(self):
        self.validated = 0

    def stage_latency(self, stage, batch_size):
        return max(float(len(g)) for g in stage.groups)

    def validate_schedule(self, schedule, sequential, batch_size):
        self.validated += 1
        return {"schedule_ms": 1.0, "sequential_ms": 1.5, "kept": "schedule"}


def test_a_chain_graphs_dp_schedule_is_the_sequential_one_where_no_grouping_is_cheaper():
    g = _residual_chain()
    model = _Composed()
    for strategy in ("parallel", "both"):
        res = schedule(g, strategy, model)
        assert [b.stages for b in res.graph.blocks] == [[[["1"]], [["2"]], [["3"]], [["4"]]]]
        assert res.stats.chain_tie and res.stats.validation is None and "a chain graph" in res.stats.summary()
    assert model.validated == 0  # never timed against itself
    # a cost model that prices a group of the chain lower (_Judge: any one-group stage 1 ms) keeps the DP's
    kept = schedule(g, "both", _Judge("schedule"))
    assert not kept.stats.chain_tie and [b.stages for b in kept.graph.blocks] != [[[["1"]], [["2"]], [["3"]], [["4"]]]]
    # a graph with a choice is searched and validated as before
    fan = schedule(fan_graph()[0], "both", model)
    assert not fan.stats.chain_tie and model.validated == 1


def test_the_measured_cost_model_composes_groups_in_its_composed_modes_only():
    """The chain tie (composes_groups) holds where a one-group stage is the sum of its operators."""
    assert MeasuredCostModel(threads=1, cache=False).composes_groups  # calibrated, the default
    assert not MeasuredCostModel(threads=1, cache=False, mode="stage").composes_groups  # timed whole
