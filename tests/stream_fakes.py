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


class TorchQueueDevice:
    """The CUDA executor's device interface (see ``ios_core.runtime.cuda_device.CupyDevice``)
    on the CPU: torch tensors for memory (fresh memory is filled with NaN, so reading what
    nothing wrote shows), torch kernels writing into the given views, and the fake device's
    streams: nothing runs until :meth:`drain`, which executes queued work in a random order
    CUDA allows. ``capture`` records the command list; ``replay`` issues it again."""

    def __init__(self, seed: int = 0):
        self.fake = FakeDevice(0, 0, seed)
        self.captured = 0

    # memory
    def empty(self, n):
        import torch

        return torch.full((int(n),), float("nan"))

    def empty_shaped(self, shape):
        import torch

        return torch.full(tuple(shape), float("nan"))

    def view(self, base, start, shape):
        size = 1
        for d in shape:
            size *= d
        return base[start:start + size].view(tuple(shape))

    def narrow(self, v, c0, c1):
        return v[:, c0:c1]

    # streams
    def stream(self, index):
        s = FakeStream(self.fake, index)
        self.fake.streams.append(s)
        return s

    def event(self):
        e = FakeEvent(self.fake, len(self.fake.events))
        self.fake.events.append(e)
        return e

    def bind_streams(self, streams):
        pass

    def launcher(self, stream, index, fn, name):
        return lambda: stream.launch(name, fn)

    def finalize(self, nstreams):
        return []

    def capture(self, stream0, calls):
        self.captured += 1
        return list(calls)

    def replay(self, graph, stream0):
        for call in graph:
            call()

    def stats(self):
        return {"device": "fake"}

    def drain(self):
        import torch

        # one intra-op thread: tiny kernels with an OpenMP team spin badly on a loaded machine
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            self.fake.drain()
        finally:
            torch.set_num_threads(threads)

    def write(self, view, x, stream):
        import torch

        self.drain()
        view.copy_(torch.from_numpy(x))

    def read(self, view, stream):
        return view.contiguous().numpy().copy()

    def sync(self, stream):
        self.drain()

    def timer(self, stream):
        return None

    # kernels (torch, into the given views)
    def conv(self, op, x, out, stream, weight, bias):
        import torch

        w, b = torch.from_numpy(weight), torch.from_numpy(bias)
        act = {"identity": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[op.act]
        st, pd, dl, gr = tuple(op.stride), tuple(op.padding), tuple(op.dilation), op.groups
        return lambda: out.copy_(act(torch.conv2d(x, w, b, st, pd, dl, gr)))

    def pool(self, op, x, out):
        import torch.nn.functional as F

        if op.pool_type == "global_avg":
            return lambda: out.copy_(x.mean((2, 3), keepdim=True))
        if op.pool_type == "global_max":
            return lambda: out.copy_(x.amax((2, 3), keepdim=True))
        k, s, p = tuple(op.kernel), tuple(op.stride), tuple(op.padding)
        if op.pool_type == "max":
            return lambda: out.copy_(F.max_pool2d(x, k, s, p))
        return lambda: out.copy_(F.avg_pool2d(x, k, s, p, count_include_pad=True))

    def activation(self, kind, x, out):
        import torch

        fn = {"identity": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[kind]
        return lambda: out.copy_(fn(x))

    def flatten(self, x, out):
        return lambda: out.view(x.shape).copy_(x)

    def linear(self, op, x, out, stream, weight, bias):
        import torch

        w, b = torch.from_numpy(weight), torch.from_numpy(bias)
        act = {"identity": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[op.act]
        n = x.shape[0]
        return lambda: out.copy_(act(torch.addmm(b, x.reshape(n, -1), w.t())).view(out.shape))

    def combine(self, views, how, dst):
        def run():
            acc = views[0].clone()
            for v in views[1:]:
                acc = acc * v if how == "mul" else acc + v
            dst.copy_(acc)
        return run
