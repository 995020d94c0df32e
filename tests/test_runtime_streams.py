"""The stream plan (ios_core.runtime.streams), checked without a GPU: a fake device records
every launch, event record and wait, and executes queued work in random orders that respect
only what CUDA promises."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ios_core.runtime.streams import (
    JOIN,
    START,
    Launch,
    Region,
    StreamTask,
    Wait,
    bind,
    check,
    happens_before,
    plan_streams,
)
from tests.stream_fakes_queue import FakeDevice

SIZE = 4  # elements per value


def random_schedule(seed: int, stages: int = 8, reuse: bool = True, concat: bool = True):
    """Random stages -> groups -> tasks over values stored in an arena whose storages are
    reused once a value's last reader has run (lifetimes in stages, as the runtime plans),
    some values written as channel slices of one shared buffer (a concatenation in place).
    Each task computes ``out = sum(inputs) * 1.5 + id``; returns (stages, input region,
    output region, sequential result)."""
    rng = random.Random(seed)
    values = [("x", None)]  # value -> (name, stage it was produced)
    reads_of: dict[int, list[int]] = {}
    structure = []
    for si in range(stages):
        groups = []
        produced_before = len(values)
        for gi in range(rng.randint(1, 3)):
            group = []
            local: list[int] = []
            for ti in range(rng.randint(1, 3)):
                pool = list(range(produced_before)) + local
                ins = rng.sample(pool, k=min(len(pool), rng.randint(1, 2)))
                v = len(values)
                values.append((f"t{si}.{gi}.{ti}", si))
                for i in ins:
                    reads_of.setdefault(i, []).append(si)
                group.append((v, ins))
                local.append(v)
            groups.append(group)
        structure.append(groups)
    out = len(values) - 1
    last = {v: max(reads_of.get(v, [-1])) for v in range(len(values))}
    last[out] = stages
    last[0] = max(last[0], 0)
    # arena: a value takes a free storage (free once its previous value's last reader stage has
    # passed); concatenation: pairs of values of one stage share a two-slot buffer
    region: dict[int, Region] = {0: Region(0, 0, SIZE)}
    free_after: dict[int, int] = {0: stages + 1}  # storage -> last stage it is busy
    next_storage = 1
    for si, groups in enumerate(structure):
        made = [v for g in groups for v, _ in g]
        i = 0
        while i < len(made):
            v = made[i]
            pair = concat and i + 1 < len(made) and rng.random() < 0.3
            end = max(last[v], last[made[i + 1]]) if pair else last[v]
            cands = [s for s, busy in free_after.items() if reuse and busy < si]
            if cands:
                s = rng.choice(cands)
            else:
                s, next_storage = next_storage, next_storage + 1
            free_after[s] = end
            if pair:
                w = made[i + 1]
                region[v] = Region(s, 0, 2 * SIZE, view=(s, 2), c0=0, c1=1)
                region[w] = Region(s, 0, 2 * SIZE, view=(s, 2), c0=1, c1=2)
                i += 2
            else:
                region[v] = Region(s, 0, SIZE)
                i += 1
    tasks = [[[StreamTask(values[v][0], tuple(region[i] for i in ins), (region[v],), payload=(v, ins)) for v, ins in g]
              for g in groups] for groups in structure]
    # sequential result with unlimited memory
    val = {0: np.arange(SIZE, dtype=np.float64) + seed}
    for groups in structure:
        for g in groups:
            for v, ins in g:
                val[v] = sum(val[i] for i in ins) * 1.5 + v
    return tasks, region[0], region[out], val[out], next_storage


def run_on_fake(plan, x_region, out_region, x, storages, seed):
    mem = {s: np.zeros(2 * SIZE) for s in range(storages)}

    def view(r: Region):
        if r.view is not None:
            return mem[r.storage][r.c0 * SIZE:(r.c0 + 1) * SIZE]
        return mem[r.storage][r.start:r.stop]

    dev = FakeDevice(plan.streams, plan.events, seed)

    def launch(s, ti):
        if ti in (START, JOIN):
            return None
        task = plan.tasks[ti]

        def kernel():
            v, _ = task.payload
            view(task.writes[0])[:] = sum(view(r).copy() for r in task.reads) * 1.5 + v
        return lambda: dev.streams[s].launch(task.name, kernel)

    view(x_region)[:] = x
    for call in bind(plan, dev.streams, dev.events, launch):
        call()
    dev.drain()
    return view(out_region).copy(), dev


@pytest.mark.parametrize("seed", range(12))
def test_plan_is_sound_and_minimal(seed):
    stages, x, out, _, _ = random_schedule(seed)
    plan = plan_streams(stages, [x], [out])
    assert check(plan) == []
    # one stream per concurrent group, a group's tasks on one stream
    for si, stage in enumerate(stages):
        streams = []
        for gi in range(len(stage)):
            ss = {plan.stream_of[i] for i in range(len(plan.tasks))
                  if plan.stage_of[i] == si and plan.group_of[i] == gi}
            assert len(ss) == 1
            streams.append(ss.pop())
        assert len(set(streams)) == len(streams)
    assert plan.streams == max(len(st) for st in stages)
    # every wait is needed: without it the plan is unsound
    waits = [i for i, c in enumerate(plan.commands) if isinstance(c, Wait)]
    for i in waits:
        assert check(plan, skip=i) != [], f"wait {i} ({plan.commands[i]}) is not needed"
    # each record is waited on
    waited = {c.event for c in plan.commands if isinstance(c, Wait)}
    assert waited == set(range(plan.events))


@pytest.mark.parametrize("seed", range(6))
def test_fake_device_random_interleavings_match_sequential(seed):
    stages, x, out, expected, storages = random_schedule(seed)
    plan = plan_streams(stages, [x], [out])
    xv = np.arange(SIZE, dtype=np.float64) + seed
    for order_seed in range(15):
        got, dev = run_on_fake(plan, x, out, xv, storages, order_seed)
        np.testing.assert_allclose(got, expected)
    kinds = {entry[0] for entry in dev.log}
    assert kinds <= {"launch", "record", "wait"} and "launch" in kinds


def test_dropping_waits_races_on_the_fake_device():
    """The fake device does see races: with one wait removed, some random order computes a
    wrong value (so the passing test above means something)."""
    found = 0
    for seed in range(6):
        stages, x, out, expected, storages = random_schedule(seed)
        plan = plan_streams(stages, [x], [out])
        xv = np.arange(SIZE, dtype=np.float64) + seed
        for i, c in enumerate(plan.commands):
            if not isinstance(c, Wait):
                continue
            broken = plan_streams(stages, [x], [out])
            broken.commands = plan.commands[:i] + plan.commands[i + 1:]
            wrong = False
            for order_seed in range(20):
                got, _ = run_on_fake(broken, x, out, xv, storages, order_seed)
                if not np.allclose(got, expected):
                    wrong = True
                    break
            found += wrong
    assert found > 0


def test_arena_reuse_waits_for_reader_on_another_stream():
    r = lambda s: Region(s, 0, 4)
    a, b = StreamTask("a", (r(0),), (r(1),)), StreamTask("b", (r(0),), (r(2),))
    # stage 1: c reads storage 1 on one stream, d reads storage 2 on the other
    c, d = StreamTask("c", (r(1),), (r(3),)), StreamTask("d", (r(2),), (r(4),))
    # stage 2: e reuses storage 1 (a's, read by c) and must not overwrite it under c
    e = StreamTask("e", (r(4),), (r(1),))
    f = StreamTask("f", (r(3), r(1)), (r(5),))
    plan = plan_streams([[[a], [b]], [[c], [d]], [[e]], [[f]]], [r(0)], [r(5)])
    assert check(plan) == []
    hb = happens_before(plan)
    sc, cc = hb[2]
    se, ce = hb[4]
    assert sc != se and ce[sc] >= cc[sc], "e overwrote storage 1 without waiting for c"


def test_chains_stay_on_one_stream_without_events():
    r = lambda s: Region(s, 0, 4)
    stages = [[[StreamTask(f"t{i}", (r(i),), (r(i + 1),))]] for i in range(5)]
    plan = plan_streams(stages, [r(0)], [r(5)])
    assert plan.streams == 1 and plan.events == 0
    assert check(plan) == []


def test_concurrent_writes_into_one_concatenation_need_no_event():
    """Two groups writing disjoint channel slices of one buffer are not ordered against each
    other; the reader of the whole buffer waits for both."""
    x = Region(0, 0, 4)
    left = Region(1, 0, 8, view=(1, 2), c0=0, c1=1)
    right = Region(1, 0, 8, view=(1, 2), c0=1, c1=2)
    whole = Region(1, 0, 8)
    a, b = StreamTask("a", (x,), (left,)), StreamTask("b", (x,), (right,))
    c = StreamTask("c", (whole,), (Region(2, 0, 8),))
    plan = plan_streams([[[a], [b]], [[c]]], [x], [Region(2, 0, 8)])
    assert check(plan) == []
    hb = happens_before(plan)
    (sa, ca), (sb, cb) = hb[0], hb[1]
    assert sa != sb and ca[sb] < cb[sb] and cb[sa] < ca[sa], "a and b were serialized"
    assert plan.stats["waits"] == 2  # b forks from the start; c waits for b


def test_launch_order_is_host_order_of_stages():
    stages, x, out, _, _ = random_schedule(3)
    plan = plan_streams(stages, [x], [out])
    launched = [c.task for c in plan.commands if isinstance(c, Launch)]
    assert launched[0] == START and launched[-1] == JOIN
    assert launched[1:-1] == list(range(len(plan.tasks)))
    assert plan.stage_of == sorted(plan.stage_of)
