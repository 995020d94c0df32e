"""The stream plan: which stream runs each kernel, and the events that order them.

Device-independent (no CUDA here): the CUDA executor replays a :class:`StreamPlan` with CuPy
streams and events, and the tests replay it with a fake backend that records every launch,
event record and wait (``tests/test_runtime_streams.py``).

Input: the schedule as stages -> groups -> :class:`StreamTask` (one kernel launch each), every task
naming the memory it reads and writes as :class:`Region` (a storage, a range of it, and, for
channel slices of one buffer, the channels). Rules:

* **One stream per concurrent group.** The groups of a stage go to distinct streams; a
  group goes to the free stream that produced most of what it reads, so chains stay on one
  stream and need no event. Stream 0 is the caller's stream: the input is written there
  (:data:`START`) and the run ends there (the *join*).
* **Events only where a dependency crosses streams.** A task depends on every earlier
  access to memory it touches (read after write, write after read, write after write, so a
  buffer reused from the arena never races a reader on another stream). A dependency on the
  same stream is implicit; one already implied by earlier waits (tracked with vector clocks,
  so transitive orderings count) needs nothing; of the rest only those not implied by
  another get a wait, each on an event recorded right after the producing launch.
* **Fork and join.** Every stream's first task waits (directly or transitively) on the start
  on stream 0, and stream 0 finally waits for the last task of every other stream: a run is
  ordered after the previous one, the output is complete when stream 0 is, and the whole
  schedule can be captured from stream 0 into one CUDA graph.

No device-wide synchronisation is ever planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any


@dataclass(frozen=True)
class Region:
    """Elements ``[start, stop)`` of ``storage``. Channel slices of one buffer (``view``, a key
    naming the buffer's placement) overlap only when their channels ``[c0, c1)`` do; otherwise
    two regions of a storage overlap when their ranges do."""

    storage: int
    start: int
    stop: int
    view: Any = None
    c0: int = 0
    c1: int = 0

    def overlaps(self, other: Region) -> bool:
        if self.storage != other.storage or self.start >= other.stop or other.start >= self.stop:
            return False
        if self.view is not None and self.view == other.view:
            return self.c0 < other.c1 and other.c0 < self.c1
        return True


@dataclass
class StreamTask:
    """One kernel launch. ``payload`` is whatever the backend needs to launch it."""

    name: str
    reads: tuple[Region, ...]
    writes: tuple[Region, ...]
    payload: Any = None


@dataclass(frozen=True)
class Launch:
    stream: int
    task: int  # index into StreamPlan.tasks


@dataclass(frozen=True)
class Record:
    stream: int
    event: int


@dataclass(frozen=True)
class Wait:
    stream: int
    event: int


START = -1  # the pseudo-task (on stream 0) that writes the input
JOIN = -2  # marks the join on stream 0 (the run is complete when stream 0 is)


@dataclass
class StreamPlan:
    """``commands`` in host order (a backend issues them one after another); ``tasks`` in
    launch order; ``stream_of[i]`` the stream of task ``i``; ``stage_of[i]``/``group_of[i]``
    where it came from."""

    streams: int
    events: int
    commands: list
    tasks: list[StreamTask]
    stream_of: list[int]
    stage_of: list[int]
    group_of: list[int]
    input_regions: tuple[Region, ...]
    output_regions: tuple[Region, ...]
    stats: dict = field(default_factory=dict)

    def describe(self) -> str:
        lines = []
        for c in self.commands:
            if isinstance(c, Launch):
                name = "start" if c.task == START else "join" if c.task == JOIN else self.tasks[c.task].name
                lines.append(f"s{c.stream}: launch {name}")
            elif isinstance(c, Record):
                lines.append(f"s{c.stream}: record e{c.event}")
            else:
                lines.append(f"s{c.stream}: wait e{c.event}")
        return "\n".join(lines)


def plan_streams(stages: Sequence[Sequence[Sequence[StreamTask]]], input_regions: Sequence[Region] = (),
                 output_regions: Sequence[Region] = ()) -> StreamPlan:
    """Plan ``stages`` (stage -> groups -> tasks in order). ``input_regions`` are written
    before the run on stream 0; ``output_regions`` are read after it from stream 0."""
    nstreams = max([len([g for g in st if g]) for st in stages] + [1])
    planner = _StreamPlanner(nstreams)
    start = planner.launch(0, START, [])
    planner.note(input_regions, True, start)
    for si, stage in enumerate(stages):
        planner.stage(si, [list(g) for g in stage if g], start)
    # join: stream 0 waits for the last launch of every other stream
    count = planner.count
    tails = {(s, count[s]) for s in range(1, nstreams) if count[s]}
    planner.launch(0, JOIN, planner.order_after(0, tails))
    return planner.result(input_regions, output_regions)


class _StreamPlanner:
    """The state of :func:`plan_streams` while it walks the stages: per-stream vector clocks,
    the launches so far with their waits and records, the events, and every storage's access
    history."""

    def __init__(self, nstreams: int):
        # vector clocks: clock[s][t] = how many launches of stream t stream s is ordered after
        self.clock = [[0] * nstreams for _ in range(nstreams)]
        self.count = [0] * nstreams
        self.snapshot: dict[tuple[int, int], list[int]] = {}  # (stream, position) -> clock after that launch
        self.launches: list[tuple[list, Launch, list]] = []  # (waits before, launch, records after)
        self.at: dict[tuple[int, int], int] = {}  # (stream, position) -> index into launches
        self.event_at: dict[tuple[int, int], int] = {}
        self.history: dict[int, list[tuple[Region, bool, int, int]]] = {}  # storage -> (region, is_write, stream, pos)
        self.tasks: list[StreamTask] = []
        self.stream_of: list[int] = []
        self.stage_of: list[int] = []
        self.group_of: list[int] = []
        self.nevents = 0

    def launch(self, s: int, task_index: int, waits: list) -> tuple[int, int]:
        self.count[s] += 1
        self.clock[s][s] = self.count[s]
        pos = (s, self.count[s])
        self.snapshot[pos] = list(self.clock[s])
        self.at[pos] = len(self.launches)
        self.launches.append((waits, Launch(s, task_index), []))
        return pos

    def event_after(self, pos: tuple[int, int]) -> int:
        if pos not in self.event_at:
            self.event_at[pos] = self.nevents
            self.launches[self.at[pos]][2].append(Record(pos[0], self.nevents))
            self.nevents += 1
        return self.event_at[pos]

    def order_after(self, s: int, deps: set[tuple[int, int]]) -> list:
        """Waits making stream ``s`` ordered after every launch in ``deps``."""
        clock, snapshot = self.clock, self.snapshot
        todo = [d for d in deps if d[0] != s and clock[s][d[0]] < d[1]]
        # keep only the dependencies no other one implies
        keep = [d for d in todo if not any(e != d and snapshot[e][d[0]] >= d[1] for e in todo)]
        waits = []
        for d in sorted(keep):
            waits.append(Wait(s, self.event_after(d)))
            clock[s] = [max(a, b) for a, b in zip(clock[s], snapshot[d])]
        return waits

    def accesses(self, regions, write: bool) -> set[tuple[int, int]]:
        deps = set()
        for r in regions:
            for other, was_write, s, p in self.history.get(r.storage, ()):
                if (write or was_write) and r.overlaps(other):
                    deps.add((s, p))
        return deps

    def note(self, regions, write: bool, pos) -> None:
        for r in regions:
            h = self.history.setdefault(r.storage, [])
            if write:
                # the write was ordered after every older access it overlaps, so one it
                # covers is implied by the write from now on
                h[:] = [a for a in h if not _covers(r, a[0])]
            h.append((r, write, *pos))

    def stage(self, si: int, groups: list[list[StreamTask]], start: tuple[int, int]) -> None:
        """Plan one stage: each group on its own stream, its tasks in order."""
        nstreams = len(self.count)
        votes = []
        for g in groups:
            v = [0] * nstreams
            for task in g:
                for d in self.accesses(task.reads, False):
                    v[d[0]] += 1
            votes.append(v)
        for gi, s in zip(range(len(groups)), _assign_streams(votes)):
            for task in groups[gi]:
                deps = self.accesses(task.reads, False) | self.accesses(task.writes, True)
                if self.count[s] == 0 and s != 0:
                    deps.add(start)  # fork from stream 0
                waits = self.order_after(s, deps)
                ti = len(self.tasks)
                self.tasks.append(task)
                self.stream_of.append(s)
                self.stage_of.append(si)
                self.group_of.append(gi)
                pos = self.launch(s, ti, waits)
                self.note(task.reads, False, pos)
                self.note(task.writes, True, pos)

    def result(self, input_regions: Sequence[Region], output_regions: Sequence[Region]) -> StreamPlan:
        commands: list = []
        for waits, lc, records in self.launches:
            commands += waits
            commands.append(lc)
            commands += records
        plan = StreamPlan(streams=max(1, sum(1 for c in self.count if c)), events=self.nevents, commands=commands,
                          tasks=self.tasks, stream_of=self.stream_of, stage_of=self.stage_of,
                          group_of=self.group_of, input_regions=tuple(input_regions),
                          output_regions=tuple(output_regions))
        plan.stats = {"streams": plan.streams, "events": self.nevents,
                      "waits": sum(1 for c in commands if isinstance(c, Wait)), "launches": len(self.tasks)}
        return plan


def _covers(a: Region, b: Region) -> bool:
    """Region ``a`` contains region ``b``."""
    if a.storage != b.storage:
        return False
    if a.view is not None and a.view == b.view:
        return a.c0 <= b.c0 and b.c1 <= a.c1
    return a.view is None and a.start <= b.start and b.stop <= a.stop


def _assign_streams(votes: list[list[int]]) -> list[int]:
    """A distinct stream per group: each group prefers the stream that produced most of what
    it reads (``votes[group][stream]``; ties: the lower stream), strongest preferences first."""
    prefs = sorted((-max(v), gi) for gi, v in enumerate(votes))
    chosen: dict[int, int] = {}
    used: set[int] = set()
    for _, gi in prefs:
        order = sorted(range(len(votes[gi])), key=lambda s: (-votes[gi][s], s))
        s = next(s for s in order if s not in used)
        chosen[gi] = s
        used.add(s)
    return [chosen[gi] for gi in range(len(votes))]


# ---- an independent check of a plan (what the tests and the fake backend use) ----------------

def happens_before(plan: StreamPlan, skip: int | None = None) -> dict:
    """Replay ``plan.commands`` (without command number ``skip``) with CUDA's semantics and
    return each launch's vector clock: ``{task index (START, JOIN too): clock}``, where
    ``clock[s]`` counts the launches of stream ``s`` it is ordered after (itself included)."""
    n = max(plan.streams, max(plan.stream_of, default=0) + 1)
    clock = [[0] * n for _ in range(n)]
    count = [0] * n
    events: dict[int, list[int]] = {}
    out: dict[int, tuple[int, list[int]]] = {}
    for i, c in enumerate(plan.commands):
        if i == skip:
            continue
        if isinstance(c, Launch):
            count[c.stream] += 1
            clock[c.stream][c.stream] = count[c.stream]
            out[c.task] = (c.stream, list(clock[c.stream]))
        elif isinstance(c, Record):
            events[c.event] = list(clock[c.stream])
        else:
            ev = events.get(c.event)
            if ev is None:
                raise AssertionError(f"command {i}: wait on event e{c.event} before it is recorded")
            clock[c.stream] = [max(a, b) for a, b in zip(clock[c.stream], ev)]
    return out


def conflicts(plan: StreamPlan) -> list[tuple[int, int]]:
    """Every ordered pair (earlier, later) of launches (START included) touching overlapping
    memory with at least one write: the pairs that must be ordered."""
    acc = [(START, list(plan.input_regions), [])] + [(i, list(t.writes), list(t.reads))
                                                     for i, t in enumerate(plan.tasks)]
    pairs = []
    for j in range(1, len(acc)):
        bj, wj, rj = acc[j]
        for i in range(j):
            ai, wi, ri = acc[i]
            if any(a.overlaps(b) for a in wi for b in wj + rj) or any(a.overlaps(b) for a in ri for b in wj):
                pairs.append((ai, bj))
    return pairs


def check(plan: StreamPlan, skip: int | None = None) -> list[str]:
    """The problems of ``plan`` (empty when sound): a conflicting pair not ordered, a stream
    not forked from the start, a launch the join does not cover."""
    hb = happens_before(plan, skip)
    problems = []

    def ordered(a: int, b: int) -> bool:
        sa, ca = hb[a]
        sb, cb = hb[b]
        return cb[sa] >= ca[sa]

    for a, b in conflicts(plan):
        if not ordered(a, b):
            problems.append(f"{_name(plan, a)} -> {_name(plan, b)} not ordered")
    for i in range(len(plan.tasks)):
        if not ordered(START, i):
            problems.append(f"{_name(plan, i)} not ordered after the start")
        if not ordered(i, JOIN):
            problems.append(f"{_name(plan, i)} not covered by the join")
    return problems


def _name(plan: StreamPlan, i: int) -> str:
    return "start" if i == START else "join" if i == JOIN else plan.tasks[i].name


def bind(plan: StreamPlan, streams: Sequence, events: Sequence, launch) -> list:
    """The plan's commands as zero-argument calls, for a backend with CuPy's interface:
    ``streams[s].record(events[e])`` and ``streams[s].wait_event(events[e])``;
    ``launch(stream_index, task_index)`` returns the call that enqueues task ``task_index``
    (``START``/``JOIN`` included, or ``None`` for nothing) on that stream."""
    calls = []
    for c in plan.commands:
        if isinstance(c, Launch):
            f = launch(c.stream, c.task)
            if f is not None:
                calls.append(f)
        elif isinstance(c, Record):
            calls.append(_bound(streams[c.stream].record, events[c.event]))
        else:
            calls.append(_bound(streams[c.stream].wait_event, events[c.event]))
    return calls


def _bound(method, arg):
    """``method(arg)`` as a zero-argument call with no Python frame of ours (``functools.partial``):
    an event record or wait costs the host the driver call only."""
    return partial(method, arg)
