"""The CUDA executor (ios_core.runtime.cuda) on a fake device: the same emission, arena, stream
plan and CUDA-graph capture as on a GPU, with torch CPU kernels writing into the planned views
and the streams as queues executed in random CUDA-legal orders (tests/stream_fakes.py). Fresh
memory is NaN, so reading what nothing wrote (or what a reuse overwrote too early) shows."""

from __future__ import annotations

import numpy as np
import pytest

from ios_core import models, reference
from ios_core.check import compare
from ios_core.reference import random_input
from ios_core.runtime.streams import Wait, check
from tests.runtime_helpers import mixed_graph
from tests.stream_fakes import TorchQueueDevice


def _asap(graph):
    """Every block's operators by dependency level, each level one parallel stage (a group per
    node): the most concurrency a schedule can ask for."""
    for block in graph.blocks:
        level: dict[str, int] = {}
        names = {n.name for n in block.nodes}
        for n in block.nodes:
            preds = [p.name for p in n.predecessors() if p.name in names]
            level[n.name] = 1 + max([level[p] for p in preds], default=-1)
        stages = {}
        for n in block.nodes:
            stages.setdefault(level[n.name], []).append([n.name])
        block.stages = [stages[k] for k in sorted(stages)]
    return graph


def _runtime(graph, batch, seed=0, cuda_graph=False):
    from ios_core.runtime.cuda import CudaRuntime

    return CudaRuntime(graph, batch, "cuda", backend=TorchQueueDevice(seed), cuda_graph=cuda_graph)


GRAPHS = {
    "mixed": lambda: _asap(mixed_graph()),
    "sample": lambda: _asap(models.get("sample", input_shape=(32, 15, 15))),
    "squeezenet": lambda: _asap(models.get("squeezenet", image_size=64, num_classes=10)),
    "nasnet": lambda: _asap(models.get("nasnet", image_size=64, num_classes=10, stem_filters=32, filters=44)),
    "inception_v3": lambda: _asap(models.get("inception_v3", image_size=96, num_classes=10)),
}


SLOW = ("nasnet", "inception_v3")


@pytest.mark.parametrize("name", [n if n not in SLOW else pytest.param(n, marks=pytest.mark.slow) for n in GRAPHS])
def test_fake_cuda_runtime_matches_the_oracle_in_random_stream_orders(name):
    graph = GRAPHS[name]().init_weights(0)
    batch = 2
    x = random_input(graph, batch, seed=5)
    ref = reference.run(graph, x)
    orders = 4 if name in ("nasnet", "inception_v3") else 8
    for seed in range(orders):
        rt = _runtime(graph, batch, seed)
        for _ in range(2):  # a second run reuses every buffer
            out = rt.run(x)
        chk = compare(out, ref, 1e-4)
        assert chk.passed, (name, seed, chk)
    plan = rt.program.streams
    assert check(plan) == []
    st = rt.stats
    assert st["streams"] >= 2 and st["events"] >= 1
    assert st["streams"] == max(len(s.groups) for s in rt.plan.stages)


def test_fake_cuda_graph_capture_replays_the_same_commands():
    graph = GRAPHS["mixed"]().init_weights(1)
    x = random_input(graph, 2, seed=2)
    rt = _runtime(graph, 2, seed=3, cuda_graph=True)
    assert rt.dev.captured == 1 and rt.stats["cuda_graph"] is True
    for _ in range(3):
        out = rt.run(x)
    assert compare(out, reference.run(graph, x), 1e-4).passed


def test_concatenations_are_written_in_place_and_buffers_reused():
    graph = GRAPHS["squeezenet"]().init_weights(0)
    rt = _runtime(graph, 1)
    st = rt.stats
    assert st["zero_copy_concat_inputs"] > 0
    naive = sum(int(np.prod(b.shape)) * 4 for b in rt.plan.buffers if b.kind != "input")
    assert rt.plan.arena_bytes < naive  # storage reused across stages


def test_launches_and_waits_are_logged_per_stream():
    graph = GRAPHS["mixed"]().init_weights(0)
    rt = _runtime(graph, 1)
    rt.run(random_input(graph, 1, seed=0))
    log = rt.dev.fake.log
    launched = [e for e in log if e[0] == "launch"]
    assert len(launched) == len(rt.program.streams.tasks)
    waits = [c for c in rt.program.streams.commands if isinstance(c, Wait)]
    assert len([e for e in log if e[0] == "wait"]) == len(waits)
    assert {e[1] for e in launched} == set(range(rt.stats["streams"]))


def test_sequential_schedule_uses_one_stream_and_no_event():
    graph = models.get("sample", input_shape=(32, 15, 15)).init_weights(0)  # no stages: sequential
    rt = _runtime(graph, 1)
    assert rt.stats["streams"] == 1 and rt.stats["events"] == 0
    x = random_input(graph, 1, seed=1)
    assert compare(rt.run(x), reference.run(graph, x), 1e-4).passed


def test_the_fake_device_catches_a_missing_wait():
    """Drop one wait from the executor's command list: some random stream order then computes
    a wrong output (NaN from unwritten memory, or a value overwritten too early)."""
    from ios_core.runtime.streams import bind

    graph = GRAPHS["mixed"]().init_weights(0)
    x = random_input(graph, 2, seed=5)
    ref = reference.run(graph, x)
    rt = _runtime(graph, 2)
    prog = rt.program
    waits = [i for i, c in enumerate(prog.streams.commands) if isinstance(c, Wait)]
    assert waits
    caught = 0
    for i in waits:
        plan = prog.streams
        full = plan.commands
        plan.commands = full[:i] + full[i + 1:]
        prog.calls = bind(plan, prog.stream_objs, prog.events, prog._launch)
        plan.commands = full
        for seed in range(12):
            rt.dev.fake.rng.seed(seed)
            if not compare(rt.run(x), ref, 1e-4).passed:
                caught += 1
                break
    assert caught > 0


def test_measured_cost_model_times_stages_as_cuda_programs_on_the_fake_device():
    from ios_core import optimize
    from ios_core.cost.measured import MeasuredCostModel

    graph = mixed_graph().init_weights(0)
    cm = MeasuredCostModel(device="cuda", backend=TorchQueueDevice(1), cache=False, warmup=1, repeat=2,
                           min_sample_ms=None)
    sched = optimize(graph, "parallel", cm, batch_size=1)
    assert cm.measured > 0 and cm.threads == 1
    x = random_input(sched, 1, seed=0)
    assert compare(_runtime(sched, 1).run(x), reference.run(graph, x), 1e-4).passed
