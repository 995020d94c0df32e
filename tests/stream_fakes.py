"""A fake device for the stream plan: streams are queues, nothing runs when it is issued, and
``drain`` executes the queued work in a random order that respects only what CUDA promises
(each stream in order; a wait holds its stream until the event's latest record, as of when the
wait was issued, has executed). Every launch, record and wait is logged."""

from __future__ import annotations

import random
from collections import deque


class FakeEvent:
    def __init__(self, device, index):
        self.device, self.index = device, index
        self.issued = 0  # records issued so far (host order)
        self.done = 0  # records executed so far


class FakeStream:
    def __init__(self, device, index):
        self.device, self.index = device, index
        self.queue: deque = deque()

    def record(self, event: FakeEvent):
        event.issued += 1
        self.device.log.append(("record", self.index, event.index))
        self.queue.append(("record", event, event.issued))

    def wait_event(self, event: FakeEvent):
        self.device.log.append(("wait", self.index, event.index))
        self.queue.append(("wait", event, event.issued))

    def launch(self, name, fn):
        self.device.log.append(("launch", self.index, name))
        self.queue.append(("launch", fn, name))


class FakeDevice:
    def __init__(self, streams: int, events: int, seed: int = 0):
        self.log: list = []
        self.order: list = []  # launches in the order they executed
        self.rng = random.Random(seed)
        self.streams = [FakeStream(self, i) for i in range(streams)]
        self.events = [FakeEvent(self, i) for i in range(events)]

    def drain(self):
        """Execute everything queued, one command at a time, from a random ready stream."""
        while True:
            ready = []
            for s in self.streams:
                if not s.queue:
                    continue
                kind, obj, n = s.queue[0]
                if kind != "wait" or obj.done >= n:
                    ready.append(s)
            if not ready:
                stuck = [s.index for s in self.streams if s.queue]
                assert not stuck, f"deadlock: streams {stuck} wait forever"
                return
            s = self.rng.choice(ready)
            kind, obj, n = s.queue.popleft()
            if kind == "record":
                obj.done = max(obj.done, n)
            elif kind == "launch":
                self.order.append((s.index, n))
                obj()
