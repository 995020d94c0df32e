"""The fake CUDA device's streams, events and graphs (tests/stream_fakes.py): streams are queues,
nothing runs when it is issued, and :meth:`FakeDevice.drain` executes the queued work in a random
order that respects only what CUDA promises (each stream in order; a wait holds its stream until the
event's latest record, as of when the wait was issued, has executed); every launch, record and wait
is logged and goes through :class:`tests.stream_fakes_rules.CudaRules`. With a :class:`FakeTiming`
the device keeps a simulated clock. :class:`FakeCupy` and :class:`FakeDriver` are the few CuPy and
driver calls the real device code makes, on this device."""

from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass

from tests.stream_fakes_rules import CU_EVENT_RECORD_EXTERNAL, CUDA_ERROR_INVALID_HANDLE, CUDA_SUCCESS, CudaRules


@dataclass
class FakeTiming:
    """The simulated device's costs: ``graph_ms`` from a graph launch's submission to its first
    node starting (back-to-back launches overlap it with the previous graph's work), ``kernel_ms``
    each kernel. The host issues in no time; it waits only in a synchronize."""

    graph_ms: float = 0.0
    kernel_ms: float = 0.0


class FakeEvent:
    def __init__(self, device, index, timing: bool = False):
        self.device, self.index = device, index
        self.ptr = 0xE0000 + index
        self.timing = timing
        self.issued = 0  # records issued so far (host order)
        self.done = 0  # records executed so far
        self.time = 0.0  # ms on the device's clock when its latest stamped record executed
        self.at = 0.0  # ... when its latest record executed, stamped or not (what a wait waits for)
        self.clock: dict | None = None  # the recording stream's vector clock (CudaRules)
        self.captured = False
        self.captured_in = None

    # CuPy's Event
    def record(self, stream=None):
        stream = stream if stream is not None else self.device.streams[0]
        stream.record(self)

    def synchronize(self):
        self.device.rules.host_waited(self.clock or {}, "cudaEventSynchronize")
        self.device.drain()
        self.device.host_waited(self.at)


class FakeStream:
    def __init__(self, device, index):
        self.device, self.index = device, index
        self.ptr = 0x5000 + index
        self.queue: deque = deque()

    def _issue(self, command: tuple) -> None:
        self.queue.append((*command, self.device.now))

    def record(self, event: FakeEvent, external: bool = False):
        rules = self.device.rules
        event.issued += 1
        self.device.log.append(("record", self.index, event.index))
        rules.record(self, event, external)
        if not rules.captured(self, ("record", event, external)):
            self._issue(("record", event, event.issued, True))
        return event

    def wait_event(self, event: FakeEvent):
        self.device.log.append(("wait", self.index, event.index))
        self.device.rules.wait(self, event)
        if not self.device.rules.captured(self, ("wait", event)):
            self._issue(("wait", event, event.issued, None))

    def launch(self, name, fn, access=((), ())):
        self.device.log.append(("launch", self.index, name))
        self.device.rules.access(self, *access)
        if not self.device.rules.captured(self, ("launch", name, fn, access)):
            self._issue(("launch", fn, name, None))

    # CuPy's Stream
    def use(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        self.device.rules.host_sync(self, "cudaStreamSynchronize")
        self.device.drain()
        self.device.host_waited(self.t)

    def is_capturing(self) -> bool:
        return self.device.rules.capturing(self)

    def begin_capture(self, mode=None):
        self.device.rules.begin_capture(self)

    def end_capture(self):
        return FakeGraph(self.device, self.device.rules.end_capture(self))

    @property
    def t(self) -> float:
        return self.device.stream_time.get(self.index, 0.0)


class FakeGraph:
    """A captured graph, instantiated (CuPy's ``end_capture``): a replay re-issues the captured
    commands in their host order, after the graph launch's latency on the launching stream."""

    def __init__(self, device, commands):
        self.device, self.commands = device, commands
        self.instantiated = True

    def upload(self, stream):
        self.device.rules.graph_launch(self)

    def launch(self, stream):
        self.device.rules.graph_launch(self)
        stream._issue(("graph", None, 0, None))
        for st, kind, *rest in self.commands:
            if kind == "record":
                event, external = rest
                event.issued += 1
                self.device.log.append(("record", st.index, event.index))
                self.device.rules.record(st, event, external, replay=True)
                st._issue(("record", event, event.issued, external))
            elif kind == "wait":
                st.wait_event(rest[0])
            else:
                name, fn, access = rest
                st.launch(name, fn, access)


class FakeDevice:
    def __init__(self, streams: int, events: int, seed: int = 0, timing: FakeTiming | None = None):
        self.log: list = []
        self.order: list = []  # launches in the order they executed
        self.rng = random.Random(seed)
        self.rules = CudaRules()
        self.timing = timing
        self.now = 0.0  # the host's clock, ms (simulated with a FakeTiming)
        self.stream_time: dict[int, float] = {}  # per stream: when its last command ended (simulated)
        self.streams = [FakeStream(self, i) for i in range(streams)]
        self.events = [FakeEvent(self, i) for i in range(events)]
        self.run = None  # how queued work executes (a device may wrap it: TorchQueueDevice limits threads)

    def host_waited(self, until: float) -> None:
        if self.timing is not None and until > self.now:
            self.now = until

    def now_ns(self) -> int:
        if self.timing is None:
            return time.perf_counter_ns()
        return int(round(self.now * 1e6))

    def _stamp(self, s, issued_at: float, cost: float = 0.0) -> float:
        """When a command of stream ``s`` issued at ``issued_at`` starts (simulated: after the stream's
        previous command; the host clock without a FakeTiming); the stream then ends ``cost`` later."""
        if self.timing is None:
            return 1e3 * time.perf_counter()
        start = max(self.stream_time.get(s.index, 0.0), issued_at)
        self.stream_time[s.index] = start + cost
        return start

    def drain(self):
        """Execute everything queued, one command at a time, from a random ready stream."""
        if self.run is not None:
            return self.run(self._drain)
        return self._drain()

    def host_sync_all(self) -> None:
        """The whole device synchronized (``cudaDeviceSynchronize``)."""
        self.rules.host_sync(None, "device synchronize")
        self.drain()
        self.host_waited(max(self.stream_time.values(), default=0.0))

    def _drain(self):
        while True:
            ready = []
            for s in self.streams:
                if not s.queue:
                    continue
                kind, obj, n, _, _ = s.queue[0]
                if kind != "wait" or obj.done >= n:
                    ready.append(s)
            if not ready:
                stuck = [s.index for s in self.streams if s.queue]
                assert not stuck, f"deadlock: streams {stuck} wait forever"
                return
            s = self.rng.choice(ready)
            kind, obj, n, extra, issued_at = s.queue.popleft()
            timing = self.timing
            if kind == "record":
                at = obj.at = self._stamp(s, issued_at)
                obj.done = max(obj.done, n)
                if extra:  # a plain record, or an external record node of a replayed graph: a time
                    obj.time = at
            elif kind == "wait":
                if timing is not None:
                    self.stream_time[s.index] = max(self.stream_time.get(s.index, 0.0), obj.at)
            elif kind == "graph":
                if timing is not None:
                    self._stamp(s, issued_at + timing.graph_ms)
            elif kind == "launch":
                self._stamp(s, issued_at, timing.kernel_ms if timing is not None else 0.0)
                self.order.append((s.index, n))
                obj()


class FakeDriver:
    """The CUDA driver's ``cuEventRecordWithFlags`` on the fake device (what ``CudaTaskMarks``
    loads with ctypes): returns the error code CUDA would."""

    def __init__(self, device: FakeDevice):
        self.device = device
        self.cuEventRecordWithFlags = _DriverCall(self._record)

    def _record(self, event_ptr, stream_ptr, flags) -> int:
        dev = self.device
        event = next((e for e in dev.events if e.ptr == event_ptr), None)
        stream = next((s for s in dev.streams if s.ptr == stream_ptr), None)
        if event is None or stream is None:
            return CUDA_ERROR_INVALID_HANDLE
        rc = dev.rules.record_flags(stream, int(flags))
        if rc == CUDA_SUCCESS:
            stream.record(event, external=bool(flags & CU_EVENT_RECORD_EXTERNAL))
        return rc


class _DriverCall:
    argtypes = restype = None

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


class FakeCupy:
    """The CuPy calls the real device code makes (``cuda.Event``, ``cuda.get_elapsed_time``), on the
    fake device and its rules."""

    def __init__(self, device: FakeDevice):
        import types

        def event(block=False, disable_timing=False, interprocess=False):
            e = FakeEvent(device, len(device.events), timing=not disable_timing)
            device.events.append(e)
            return e

        self.cuda = types.SimpleNamespace(Event=event, get_elapsed_time=device.rules.elapsed)
