"""A fake executor for unit tests of the round protocol's modules: records the tasks it is handed
and answers each with a result the test gives (no worker process)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FakeNode:
    id: str
    name: str


@dataclass
class FakeExecutor:
    answer: object = None  # callable(task) -> result dict
    name: str = "local"
    nodes: list = field(default_factory=lambda: [FakeNode("n0", "local")])
    seen: list = field(default_factory=list)

    def match(self, device):
        return list(self.nodes), {}

    def probe(self, tasks):
        self.seen.extend(tasks)
        return [self.answer(t) for t in tasks]

    def run(self, tasks, done, starting=None, observe=None):
        for t in tasks:
            self.seen.append(t)
            if starting:
                starting(t)
            done(t, self.answer(t))
        return []


def context(tmp_path, executor=None, **plan):
    from ios_bench.planning.plan import Plan
    from ios_bench.records.runfolder import RunFolder
    from ios_bench.running.context import SweepContext

    said: list[str] = []
    ctx = SweepContext(Plan(threads=2, **plan), RunFolder(tmp_path), executor or FakeExecutor(), said.append)
    return ctx, said
