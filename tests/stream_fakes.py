"""A fake CUDA device that fails where CUDA fails.

Streams are queues: nothing runs when it is issued, and ``drain`` executes the queued work in a
random order that respects only what CUDA promises (each stream in order; a wait holds its stream
until the event's latest record, as of when the wait was issued, has executed). Every launch,
record and wait is logged.

Every call of the fake goes through one object, :class:`CudaRules`: the rules of CUDA the
executor relies on, each with the documentation it comes from. Write the next GPU feature against
them: a capture, ordering or event mistake fails a test here before it meets a GPU.

The fake also offers the few CuPy and driver calls the real device code makes
(:class:`FakeCupy`: ``cuda.Event``, ``cuda.get_elapsed_time``; :class:`FakeDriver`:
``cuEventRecordWithFlags``), so ``ios_core.runtime.cuda_device.CudaTaskMarks``,
``ios_core.measurement.gpu.CudaEventTimer`` and ``CupyDevice.capture``/``replay`` run here as
they are, their flag choices included.

With a :class:`FakeTiming` the device keeps a simulated clock (a graph launch's latency, each
kernel's time; streams overlap; back-to-back graph launches pipeline), read by its events and by
its host clock (``now_ns``): figures with a known answer. Without one, events are stamped with the
host clock when they execute.
"""

from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass

from tests.stream_fakes_tensors import TensorKernelsFake

# ---- error codes (CUDA driver API reference, "Error Handling": CUresult; the runtime's cudaError_t
# has the same values for these) --------------------------------------------------------------------
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_HANDLE = 400
CUDA_ERROR_NOT_READY = 600
CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900
CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904
CUDA_ERROR_CAPTURED_EVENT = 907
ERROR_NAMES = {1: "CUDA_ERROR_INVALID_VALUE", 400: "CUDA_ERROR_INVALID_HANDLE", 600: "CUDA_ERROR_NOT_READY",
               900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", 904: "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
               907: "CUDA_ERROR_CAPTURED_EVENT"}
CU_EVENT_RECORD_EXTERNAL = 0x1  # CUevent_record_flags


class CudaError(RuntimeError):
    """What CuPy raises when a runtime call returns an error code (``CUDARuntimeError``)."""

    def __init__(self, code: int, what: str):
        super().__init__(f"{what}: {ERROR_NAMES.get(code, code)}")
        self.code = code


class CaptureError(AssertionError):
    """Something a CUDA-graph capture does not allow happened inside one."""


class OrderError(AssertionError):
    """A kernel ran before what it reads was known to be on the device (or raced another stream)."""


class CudnnError(RuntimeError):
    """What cuDNN (through its Frontend) raises for a graph it does not support or a bad parameter
    (``cudnnGraphNotSupportedError``; ``CUDNN_STATUS_NOT_SUPPORTED`` / ``CUDNN_STATUS_BAD_PARAM``)."""


class DtypeError(AssertionError):
    """A buffer handed to a kernel or a cuDNN tensor holds another element type than declared. On a GPU
    nothing checks this (a raw pointer): the kernel reads the bits as its own type and computes wrong
    numbers; the fake refuses it."""


# cuDNN's supported configurations for a forward convolution (cuDNN API reference,
# ``cudnnConvolutionForward``, "Supported configurations", its floating-point rows; the cuDNN Frontend
# samples build fp16 convolutions the same way: io HALF, compute FLOAT, NVIDIA/cudnn-frontend
# samples/cpp/convolution/fprop.cpp): (x, w, y data type, compute type). No mixed input types; bf16
# only with float compute (PSEUDO_BFLOAT16_CONFIG); half with half compute is TRUE_HALF_CONFIG, with
# float PSEUDO_HALF_CONFIG. Left out on purpose: the integer rows (INT8_CONFIG and friends need
# NHWC/vectorized layouts the fake does not model) and what only the graph API's fusion engines take
# (an fp8 or int8 convolution with a FLOAT output, samples/cpp/convolution/fp8_fprop.cpp): the runtime
# declares none of them, so the fake refuses them until a row is added here with its source.
CUDNN_CONV_CONFIGS = {
    ("FLOAT", "FLOAT", "FLOAT", "FLOAT"): "FLOAT_CONFIG",
    ("HALF", "HALF", "HALF", "HALF"): "TRUE_HALF_CONFIG",
    ("HALF", "HALF", "HALF", "FLOAT"): "PSEUDO_HALF_CONFIG",
    ("BFLOAT16", "BFLOAT16", "BFLOAT16", "FLOAT"): "PSEUDO_BFLOAT16_CONFIG",
    ("DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE"): "DOUBLE_CONFIG",
}
# The least compute capability (major * 10 + minor) a configuration runs on; others run wherever cuDNN
# does. The same table's notes: TRUE_HALF_CONFIG only on architectures with true fp16 support (compute
# capability 5.3 and later); PSEUDO_BFLOAT16_CONFIG only on those with bfloat16 support (8.0 and later:
# cuDNN's graph API has no bf16 convolution engine before Ampere; PyTorch checks the device's
# capability before dispatching a bf16 convolution for this reason, pytorch/pytorch#81139).
CUDNN_CONFIG_MIN_CC = {"TRUE_HALF_CONFIG": 53, "PSEUDO_BFLOAT16_CONFIG": 80}


@dataclass
class FakeTiming:
    """The simulated device's costs: ``graph_ms`` from a graph launch's submission to its first
    node starting (back-to-back launches overlap it with the previous graph's work), ``kernel_ms``
    each kernel. The host issues in no time; it waits only in a synchronize."""

    graph_ms: float = 0.0
    kernel_ms: float = 0.0


def footprint(t) -> tuple:
    """The memory a torch view covers: ``(storage address, first byte, end byte)`` per contiguous run
    (a channel slice of a batch of N is N runs)."""
    if t.numel() == 0:
        return ()
    base, esz = t.untyped_storage().data_ptr(), t.element_size()
    shape, stride = list(t.shape), list(t.stride())
    block, i = 1, len(shape)
    while i > 0 and (shape[i - 1] == 1 or stride[i - 1] == block):
        block *= shape[i - 1]
        i -= 1
    starts = [t.storage_offset()]
    for size, st in zip(shape[:i], stride[:i]):
        starts = [a + k * st for a in starts for k in range(size)]
        if len(starts) > 4096:  # never in the tests' small graphs: the hull (conservative)
            lo = t.storage_offset()
            return ((base, lo * esz, (lo + sum((n - 1) * d for n, d in zip(shape, stride)) + 1) * esz),)
    return tuple((base, a * esz, (a + block) * esz) for a in starts)


class CudaRules:
    """CUDA's rules, in one place; every call of the fake device goes through here.

    * **Capture** (CUDA Programming Guide, "CUDA Graphs: Stream Capture", "Prohibited and
      Unhandled Operations"): inside a capture, synchronizing a stream or the device, querying an
      event, allocating (``cudaMalloc`` may synchronize), copying to or from pageable host memory
      and a library's lazy initialization (cuDNN's workspace, cuBLAS's handle) are not allowed: the
      call fails and the capture is invalidated (:class:`CaptureError`). A stream joins the capture
      when it waits on an event recorded in a capturing stream; ``cuStreamEndCapture`` fails with
      ``CUDA_ERROR_STREAM_CAPTURE_UNJOINED`` unless every joined stream was joined back into the
      origin stream.
    * **Graphs** (driver API, ``cuGraphLaunch``: "hGraphExec - Executable graph to launch"): only an
      instantiated graph is launched (CuPy instantiates in ``end_capture``).
    * **Event record flags** (driver API, ``CUevent_record_flags``): ``CU_EVENT_RECORD_EXTERNAL``
      "is invalid when used outside of capture" (``CUDA_ERROR_INVALID_VALUE``); inside a capture
      a plain record only orders streams and is no node of the graph (the event records nothing
      at a replay: ``cudaEventElapsedTime`` on it fails with ``cudaErrorCapturedEvent``).
    * **Stream order** (Programming Guide, "Streams": commands of different streams may run in any
      order or concurrently): a kernel that reads memory written on another stream, or writes
      memory read or written there, must be ordered after it by an event wait (transitively) or a
      host synchronize; else :class:`OrderError` (the race that makes multi-stream results wrong
      only sometimes). Uploads on the legacy stream are not waited for by non-blocking streams.
    * **Events** (runtime API, ``cudaEventElapsedTime``): both events recorded with timing enabled
      (``cudaErrorInvalidResourceHandle`` for one created with ``cudaEventDisableTiming`` or never
      recorded) and completed (``cudaErrorNotReady``).
    * A driver call that returns an error code raises where the real one does (CuPy raises
      ``CUDARuntimeError``: :class:`CudaError`); a raw driver call (``FakeDriver``) returns it.
    * **cuDNN data types** (cuDNN API reference, ``cudnnConvolutionForward``, "Supported
      configurations": :data:`CUDNN_CONV_CONFIGS`): a convolution whose x, w, y data types and
      compute type are no supported configuration (mixed input types, bf16 with bf16 compute) is
      refused when its graph is built (:class:`CudnnError`), and so is one the device's compute
      capability is too old for (:data:`CUDNN_CONFIG_MIN_CC`: bf16 before 8.0). The bias of a fused
      graph is at the data type, the intermediates float.
    * **Element types**: every buffer a kernel or a cuDNN tensor is handed holds the element type
      it was declared with (our kernels are compiled for one type, ``cuda_kernels.kernel_source``;
      a cuDNN tensor has its data type). CUDA checks nothing here (pointers), so a mismatch computes
      garbage silently; the fake refuses it (:class:`DtypeError`).
    """

    def __init__(self):
        self.capture: dict | None = None  # the open capture: origin stream, joined streams, commands
        self.clock: dict[int, dict[int, int]] = {}  # vector clock per stream: what it is ordered after
        self.done: dict[int, int] = {}  # per stream: commands the host knows complete (a synchronize)
        self.writes: dict[int, dict[tuple, tuple[int, int]]] = {}  # storage -> run -> (stream, tick)
        self.reads: dict[int, dict[tuple, dict[int, int]]] = {}  # storage -> run -> {stream: tick}
        self.uploads: list[tuple] = []  # legacy-stream uploads (their runs) not yet synchronized with the device
        self.issued: set[str] = set()  # kernel kinds launched at least once (compiled, initialized)

    # ---- cuDNN data types and element types -----------------------------------------------------
    @staticmethod
    def cudnn_conv(types: dict, bound: dict, compute_capability: int | None = None) -> str:
        """A convolution graph declared with ``types`` (tensor -> cuDNN data type, ``compute``,
        ``intermediate``) and ``bound`` (tensor -> the cuDNN data type of the buffer given to it) on a
        GPU of ``compute_capability`` (major * 10 + minor; None: any): its configuration's name, or
        :class:`CudnnError` / :class:`DtypeError`."""
        config = (types["x"], types["w"], types["y"], types["compute"])
        name = CUDNN_CONV_CONFIGS.get(config)
        if name is None:
            raise CudnnError(f"cudnnGraphNotSupportedError: no convolution configuration x/w/y/compute = {config}")
        least = CUDNN_CONFIG_MIN_CC.get(name)
        if least is not None and compute_capability is not None and int(compute_capability) < least:
            raise CudnnError(f"cudnnGraphNotSupportedError: {name} needs compute capability {least // 10}.{least % 10}"
                             f" or later, not {int(compute_capability) // 10}.{int(compute_capability) % 10}")
        if types.get("b", types["x"]) != types["x"] or types.get("intermediate", "FLOAT") not in ("FLOAT", types["x"]):
            raise CudnnError(f"cudnnGraphNotSupportedError: bias {types.get('b')} / intermediate "
                             f"{types.get('intermediate')} with {types['x']} data")
        for tensor, dtype in bound.items():
            if dtype != types[tensor]:
                raise DtypeError(f"cuDNN tensor {tensor} is declared {types[tensor]} but bound to a {dtype} buffer")
        return name

    @staticmethod
    def element_type(expected, tensors, what: str) -> None:
        """Every buffer of ``tensors`` holds ``expected`` (a torch dtype) for the kernel ``what``."""
        for t in tensors:
            if t is not None and t.dtype != expected:
                raise DtypeError(f"{what} compiled for {expected} is handed a {t.dtype} buffer")

    # ---- capture ----------------------------------------------------------------------------
    def capturing(self, stream) -> bool:
        return self.capture is not None and stream.index in self.capture["joined"]

    def no_capture(self, what: str) -> None:
        if self.capture is not None:
            raise CaptureError(f"{what} inside a CUDA-graph capture")

    def begin_capture(self, stream) -> None:
        if self.capture is not None:
            raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cudaStreamBeginCapture while capturing")
        self.capture = {"origin": stream.index, "joined": {stream.index}, "commands": []}

    def captured(self, stream, command: tuple) -> bool:
        """True (and ``command`` kept for the graph) when ``stream`` is capturing."""
        if not self.capturing(stream):
            return False
        self.capture["commands"].append((stream, *command))
        return True

    def end_capture(self, stream) -> list:
        cap, self.capture = self.capture, None
        if cap is None or cap["origin"] != stream.index:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "cudaStreamEndCapture on a stream not capturing")
        origin = self.clock.get(stream.index, {})
        unjoined = [s for s in cap["joined"] if s != stream.index and origin.get(s, 0) < self._tick(s)]
        if unjoined:
            raise CudaError(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, f"cudaStreamEndCapture: streams {unjoined}")
        return cap["commands"]

    def first_launch(self, kinds) -> None:
        """CuPy compiles and loads a kernel at its first launch; cuBLAS and cuDNN initialize at their
        first call: never inside a capture (Programming Guide, "Prohibited and Unhandled Operations")."""
        for kind in kinds:
            if kind not in self.issued:
                self.no_capture(f"first launch of {kind} (compiles / initializes)")
                self.issued.add(kind)

    def graph_launch(self, graph) -> None:
        if not graph.instantiated:
            raise CudaError(CUDA_ERROR_INVALID_VALUE, "cudaGraphLaunch of a graph not instantiated")

    # ---- events -------------------------------------------------------------------------------
    def record_flags(self, stream, flags: int) -> int:
        """The error code ``cuEventRecordWithFlags`` returns for ``flags`` on ``stream``."""
        if flags & CU_EVENT_RECORD_EXTERNAL and not self.capturing(stream):
            return CUDA_ERROR_INVALID_VALUE
        if flags & ~CU_EVENT_RECORD_EXTERNAL:
            return CUDA_ERROR_INVALID_VALUE
        return CUDA_SUCCESS

    def record(self, stream, event, external: bool, replay: bool = False) -> None:
        self._step(stream)
        event.clock = dict(self.clock[stream.index])
        if replay:  # a record node of a replayed graph: external ones record a time, plain ones never did
            event.captured = not external
            event.captured_in = None
            return
        # recorded in a capture without the external flag: a dependency only, no time at a replay
        event.captured = self.capturing(stream) and not external
        event.captured_in = self.capture if self.capturing(stream) else None

    def wait(self, stream, event) -> None:
        if self.capture is not None and event.captured_in is self.capture and not self.capturing(stream):
            self.capture["joined"].add(stream.index)  # joins the capture (Programming Guide, "Cross-stream")
        mine = self.clock.setdefault(stream.index, {})
        for s, n in (event.clock or {}).items():
            if mine.get(s, 0) < n:
                mine[s] = n

    def elapsed(self, start, end) -> float:
        for e in (start, end):
            if not e.timing or e.clock is None:
                raise CudaError(CUDA_ERROR_INVALID_HANDLE, "cudaEventElapsedTime: an event without timing or never "
                                                           "recorded")
            if e.captured:
                raise CudaError(CUDA_ERROR_CAPTURED_EVENT, "cudaEventElapsedTime: an event last recorded in a capture")
            if e.done < e.issued:
                raise CudaError(CUDA_ERROR_NOT_READY, "cudaEventElapsedTime: an event not completed")
        return end.time - start.time

    # ---- stream order -------------------------------------------------------------------------
    def _tick(self, s: int) -> int:
        return self.clock.get(s, {}).get(s, 0)

    def _step(self, stream) -> int:
        mine = self.clock.setdefault(stream.index, {})
        mine[stream.index] = mine.get(stream.index, 0) + 1
        return mine[stream.index]

    def _ordered(self, s: int, other: int, n: int) -> bool:
        return other == s or self.clock.get(s, {}).get(other, 0) >= n or self.done.get(other, 0) >= n

    def access(self, stream, reads=(), writes=(), what: str = "kernel") -> None:
        """A command on ``stream`` reading and writing these runs (:func:`footprint`)."""
        s = stream.index
        n = self._step(stream)
        for base, lo, hi in (*reads, *writes):  # memory a legacy-stream upload may still be writing
            if any(ub == base and ulo < hi and lo < uhi for ub, ulo, uhi in self.uploads):
                raise OrderError(f"a {what} on stream {s} touches weights uploaded on the legacy stream before "
                                 "the uploads were synchronized with the device")
        for base, lo, hi in reads:
            for (a, b), (w, k) in self.writes.get(base, {}).items():
                if a < hi and lo < b and not self._ordered(s, w, k):
                    raise OrderError(f"a {what} on stream {s} reads memory written on stream {w} with no event "
                                     "wait between them")
        for base, lo, hi in writes:
            for (a, b), (w, k) in self.writes.get(base, {}).items():
                if a < hi and lo < b and not self._ordered(s, w, k):
                    raise OrderError(f"a {what} on stream {s} writes memory written on stream {w} with no event "
                                     "wait between them")
            for (a, b), readers in self.reads.get(base, {}).items():
                for r, k in readers.items():
                    if a < hi and lo < b and not self._ordered(s, r, k):
                        raise OrderError(f"a {what} on stream {s} writes memory read on stream {r} with no event "
                                         "wait between them")
        for base, lo, hi in reads:
            self.reads.setdefault(base, {}).setdefault((lo, hi), {})[s] = n
        for base, lo, hi in writes:
            self.writes.setdefault(base, {})[(lo, hi)] = (s, n)
            self.reads.get(base, {}).pop((lo, hi), None)

    def host_sync(self, stream=None, what: str = "synchronize") -> None:
        """The host waited for ``stream`` (None: the whole device): what it was ordered after is done."""
        self.no_capture(what)
        if stream is None:
            self.done = {s: c.get(s, 0) for s, c in self.clock.items()}
            self.writes.clear()
            self.reads.clear()
            self.uploads.clear()
            return
        self.host_waited(self.clock.get(stream.index, {}), what)

    def host_waited(self, clock: dict, what: str = "cudaEventSynchronize") -> None:
        """The host waited for a command whose vector clock is ``clock``: what it was ordered after is done."""
        self.no_capture(what)
        for o, n in clock.items():
            if self.done.get(o, 0) < n:
                self.done[o] = n

    def upload(self, runs=()) -> None:
        """Weights copied on the legacy stream (``cupy.asarray``) into ``runs`` (:func:`footprint`):
        non-blocking streams do not wait for it, so a kernel touching them before a device
        synchronize races it; a kernel on other memory does not."""
        self.no_capture("upload")
        self.uploads.extend(runs)


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


def _act(kind: str, alpha: float = 0.0, beta: float = 0.0):
    """The activation from its parameters (written here, not taken from the oracle)."""
    import torch

    return {"identity": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
            "relu6": lambda t: t.clamp(0.0, 6.0), "hardswish": lambda t: t * (t + 3.0).clamp(0.0, 6.0) / 6.0,
            "silu": lambda t: t * torch.sigmoid(t),
            "gelu": lambda t: 0.5 * t * (1.0 + torch.erf(t * 0.7071067811865476)),
            "gelu_tanh": lambda t: 0.5 * t * (1.0 + torch.tanh(0.7978845608028654 * (t + 0.044715 * t ** 3))),
            "leaky_relu": lambda t: torch.where(t > 0, t, t * alpha),
            "hardsigmoid": lambda t: (t * alpha + beta).clamp(0.0, 1.0),
            "clip": lambda t: t.clamp(alpha, beta)}[kind]


class TorchQueueDevice(TensorKernelsFake):
    """The CUDA executor's device interface (see ``ios_core.runtime.cuda_device.CupyDevice``)
    on the CPU: torch tensors for memory (fresh memory is filled with NaN, so reading what
    nothing wrote shows), torch kernels writing into the given views, and the fake device's
    streams: nothing runs until :meth:`drain`, which executes queued work in a random order
    CUDA allows. ``capture`` and ``replay`` are ``CupyDevice``'s own, on the fake streams; task
    marks and the event timer are the real classes on :class:`FakeCupy` and :class:`FakeDriver`.

    What a real GPU forbids fails here too (:class:`CudaRules`, every rule with its source):
    allocating, uploading, synchronizing, copying to or from the host, a cuDNN workspace or a
    kernel's first launch inside a capture (:class:`CaptureError`); a kernel racing another
    stream, or issued before the weight uploads (legacy stream) were synchronized
    (:class:`OrderError`); an external event record outside a capture, an elapsed time between
    events not both completed with timing (:class:`CudaError`); a cuDNN pointer that is not 16-byte
    aligned (cuDNN Frontend tensors are declared so): AssertionError when the convolution is built.

    Kernel methods take the device's explicit parameters (``ConvSpec``, ``PoolSpec``,
    activation name and parameters) and implement them with torch functions written here, so
    an attribute the executor fails to pass computes a different result than the oracle.
    ``timing``: a :class:`FakeTiming` (simulated clock), else events read the host clock.

    ``precision`` (fp32, fp16, bf16), as ``CupyDevice``'s: every buffer holds torch's float16 or
    bfloat16, weights are cast once when uploaded, the input when written, the output read back as
    float32; every kernel computes in float32 on the values loaded at the precision and rounds once
    when it stores (the real kernels' ``ios_ld``/``ios_st``, cuDNN's float compute). Each convolution
    declares cuDNN's data types through the real ``cuda_kernels.conv_data_types`` and the rules check
    them (:meth:`CudaRules.cudnn_conv`), and every kernel's buffers their element type.

    The general tensors' kernels (dense, matmul, layer norm, softmax, ...) are
    :class:`tests.stream_fakes_tensors.TensorKernelsFake`'s."""

    TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
    CUDNN_NAMES = {"float32": "FLOAT", "float16": "HALF", "bfloat16": "BFLOAT16", "float64": "DOUBLE"}

    def __init__(self, seed: int = 0, plan_cache=None, timing: FakeTiming | None = None, precision: str = "fp32",
                 compute_capability: str = "90"):
        import types

        import torch

        from ios_core.runtime.cuda_plans import ConvPlanBook

        self.precision = precision
        self.compute_capability = compute_capability  # as CuPy's Device.compute_capability: '90' is 9.0
        self.dtype = getattr(torch, self.TORCH_DTYPES[precision])
        self.itemsize = torch.empty((), dtype=self.dtype).element_size()
        self.conv_configs: list[str] = []  # cuDNN's configuration of every convolution built

        self.fake = FakeDevice(0, 0, seed, timing=timing)
        self.fake.run = self._limited
        self.rules = self.fake.rules
        self.cp = FakeCupy(self.fake)
        self.driver = FakeDriver(self.fake)
        self.device = types.SimpleNamespace(synchronize=self.sync_device)  # CupyDevice.capture's cupy Device
        self._streams: dict[int, FakeStream] = {}
        # the plan chosen per convolution geometry, as CupyDevice keeps cuDNN's (ios_core.runtime.cuda_plans):
        # here the two "plans" are torch's convolution on NCHW or channels-last memory, each built and
        # timed on the CPU, the faster kept
        self.plans = ConvPlanBook()
        self._conv_plans: dict[str, str] = {}
        if plan_cache is not None:
            self.attach_plan_cache(plan_cache)
        self.captured = 0
        self.flushes = 0
        self.convs: list[tuple[int, int]] = []  # byte offsets (input, output) of every convolution built

    # the capture state and the kinds launched once live in the rules (tests set them)
    @property
    def capturing(self) -> bool:
        return self.rules.capture is not None

    @capturing.setter
    def capturing(self, value: bool) -> None:
        if not value:
            self.rules.capture = None

    @property
    def issued(self) -> set:
        return self.rules.issued

    @issued.setter
    def issued(self, value: set) -> None:
        self.rules.issued = value

    def _no_capture(self, what: str) -> None:
        self.rules.no_capture(what)

    def now_ns(self) -> int:
        return self.fake.now_ns()

    # memory
    def empty(self, n):
        import torch

        self._no_capture("allocation")
        return torch.full((int(n),), float("nan"), dtype=self.dtype)

    def empty_shaped(self, shape):
        import torch

        self._no_capture("allocation")
        return torch.full(tuple(shape), float("nan"), dtype=self.dtype)

    def view(self, base, start, shape):
        size = 1
        for d in shape:
            size *= d
        return base[start:start + size].view(tuple(shape))

    def narrow(self, v, c0, c1):
        return v[:, c0:c1]

    @staticmethod
    def offset_bytes(view) -> int:
        return view.storage_offset() * view.element_size()

    def aligned(self, view) -> bool:
        return self.offset_bytes(view) % 16 == 0

    def upload(self, a):
        import numpy as np
        import torch

        self.rules.no_capture("upload")
        a = np.ascontiguousarray(a, dtype=np.float32)
        t = torch.from_numpy(a if a.flags.writeable else a.copy())  # torch wants writable memory
        t = t.to(self.dtype)  # cast once, at build (CupyDevice.upload: cuda_kernels.to_storage)
        self.rules.upload(footprint(t))
        return t

    # streams
    def stream(self, index):
        """One stream per index, reused by every program (as CupyDevice does): a new one per program
        made ``drain`` walk thousands of streams in a search (75 % of a fake inception_v3 search)."""
        hit = self._streams.get(index)
        if hit is None:
            hit = self._streams[index] = FakeStream(self.fake, index)
            self.fake.streams.append(hit)
        return hit

    def event(self):
        e = FakeEvent(self.fake, len(self.fake.events))  # timing disabled, as CupyDevice's
        self.fake.events.append(e)
        return e

    def bind_streams(self, streams):
        pass

    def launcher(self, stream, index, fn, name):
        kinds = getattr(fn, "kinds", ("kernel",))
        access = getattr(fn, "access", ((), ()))
        rules = self.rules

        def issue():
            rules.first_launch(kinds)
            stream.launch(name, fn, access)
        return issue

    def finalize(self, nstreams):
        self._no_capture("cuDNN workspace allocation")
        return []

    def capture(self, stream0, calls):
        from ios_core.runtime.cuda_device import CupyDevice

        self.captured += 1
        return CupyDevice.capture(self, stream0, calls)

    def replay(self, graph, stream0):
        from ios_core.runtime.cuda_device import CupyDevice

        CupyDevice.replay(self, graph, stream0)

    def stats(self):
        from ios_core.runtime.cuda_kernels import conv_data_types

        types = conv_data_types(self.precision)  # what CupyDevice.stats reports
        return {"device": "fake", "precision": self.precision, "cudnn_data_type": types["x"],
                "cudnn_compute_type": types["compute"], **self.plans.stats()}

    def flush_l2(self, stream) -> None:
        """A cold cache on the CPU, as CupyDevice flushes: 32 MB (twice the fake's 'L2') read by a
        reduction into a preallocated scalar on ``stream``; nothing written but the scalar."""
        import torch

        self._no_capture("cache flush")
        if getattr(self, "_flush", None) is None:
            self._flush = torch.ones(8 << 20)
            self._flush_sum = torch.zeros(())
        buf, out = self._flush, self._flush_sum

        def run():
            torch.sum(buf, dim=0, out=out)
        self.flushes += 1
        stream.launch("flush_l2", run, (footprint(buf), footprint(out)))

    def task_marks(self, n, streams):
        from ios_core.runtime.cuda_device import CudaTaskMarks

        return CudaTaskMarks(self.cp, n, streams, driver=self.driver)

    def timer(self, stream):
        from ios_core.measurement.gpu import CudaEventTimer

        return CudaEventTimer(stream, cupy=self.cp)

    FAKE_PLANS = ("nchw", "channels_last")

    def plan_versions(self) -> dict:
        import torch

        return {"gpu": "fake torch queue device", "compute_capability": None, "driver": None, "cudnn": None,
                "cudnn_frontend": None, "torch": torch.__version__}

    def attach_plan_cache(self, plan_cache) -> None:
        self.plans.open(plan_cache, self.plan_versions())

    def _conv_plan(self, spec, x, w, b):
        """The plan of this convolution geometry: from the book (stored, or both built and timed)."""
        import time

        import torch
        import torch.nn.functional as F

        key = repr((tuple(x.shape), tuple(x.stride()), tuple(w.shape), str(spec))
                   + ((self.precision,) if self.precision != "fp32" else ()))  # the plan cache keyed by precision
        hit = self._conv_plans.get(key)
        if hit is not None:
            return hit
        pt, pl, pb, pr = spec.pads
        xp = F.pad(x.nan_to_num(0.0), (pl, pr, pt, pb))

        def run(plan):
            xi = xp.contiguous(memory_format=torch.channels_last) if plan == "channels_last" else xp
            return F.conv2d(xi.float(), w.float(), b.float(), spec.stride, 0, spec.dilation, spec.groups)

        def tune():
            self._no_capture("cuDNN plan tuning (workspace allocation)")
            times = {}
            for plan in self.FAKE_PLANS:
                run(plan)
                t0 = time.perf_counter()
                run(plan)
                times[plan] = time.perf_counter() - t0
            best = min(times, key=times.get)
            return best, {"plan": best, "ms": 1e3 * times[best]}, len(times)

        def known(record):
            if record["plan"] not in self.FAKE_PLANS:
                raise RuntimeError(f"no plan {record['plan']!r} on this device")
            return record["plan"]

        plan = self._conv_plans[key] = self.plans.choose(key, tune, known)
        return plan

    def _limited(self, fn):
        import torch

        # one intra-op thread: tiny kernels with an OpenMP team spin badly on a loaded machine
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn()
        finally:
            torch.set_num_threads(threads)

    def drain(self):
        self.fake.drain()

    def write(self, view, x, stream):
        import numpy as np
        import torch

        self._no_capture("host-to-device copy")
        stream.synchronize()  # as CupyDevice.write: a previous run may still read the input
        self.rules.access(stream, (), footprint(view), "host-to-device copy")
        if x.dtype != np.float32:
            raise DtypeError(f"the host input is {x.dtype}, the device casts float32 (cuda_kernels.to_storage)")
        # CuPy's ndarray.set (CupyDevice.write): the same shape (no broadcast, unlike torch's copy_) into a
        # C-contiguous array, else ValueError('Shape mismatch') / RuntimeError (cupy/_core/core.pyx, set)
        if tuple(view.shape) != tuple(x.shape):
            raise ValueError(f"Shape mismatch: cupy.ndarray.set of a {tuple(x.shape)} array into {tuple(view.shape)}")
        if not view.is_contiguous():
            raise RuntimeError("Cannot set to non-contiguous array")
        view.copy_(torch.from_numpy(x))  # cast to the buffer's precision, as CupyDevice.write casts on the host
        stream.synchronize()

    def read(self, view, stream):
        self._no_capture("device-to-host copy")
        self.rules.access(stream, footprint(view), (), "device-to-host copy")
        stream.synchronize()
        return view.contiguous().float().numpy().copy()  # read back as float32 (cuda_kernels.from_storage)

    def sync(self, stream):
        self._no_capture("stream synchronize")
        stream.synchronize()

    def sync_device(self):
        self._no_capture("device synchronize")
        self.fake.host_sync_all()

    # kernels (torch, into the given views), from explicit parameters
    def _kinds(self, fn, *kinds, reads=(), writes=()):
        """``fn`` with the kernel kinds it launches and the memory it reads and writes (the rules'
        stream-order check; ``ios_core.runtime.cuda._seq`` keeps both through a sequence). Every
        buffer must hold the device's element type (the kernels are compiled for it)."""
        self.rules.element_type(self.dtype, (*reads, *writes), kinds[0] if kinds else "kernel")
        fn.kinds = kinds
        fn.access = (tuple(r for v in reads if v is not None for r in footprint(v)),
                     tuple(w for v in writes for w in footprint(v)))
        return fn

    def conv(self, x, out, stream, weight, bias, spec):
        import torch.nn.functional as F

        for what, v in (("input", x), ("output", out)):
            assert self.aligned(v), (f"cuDNN {what} pointer at byte offset {self.offset_bytes(v)} is not 16-byte "
                                     f"aligned (shape {tuple(v.shape)})")
        self.convs.append((self.offset_bytes(x), self.offset_bytes(out)))
        w, b = self.upload(weight), self.upload(bias)
        from ios_core.runtime.cuda_kernels import conv_data_types

        names = self.CUDNN_NAMES
        # the data types CupyDevice declares for this precision, checked as cuDNN checks its graph
        self.conv_configs.append(self.rules.cudnn_conv(conv_data_types(self.precision), {
            "x": names[str(x.dtype).split(".")[-1]], "w": names[str(w.dtype).split(".")[-1]],
            "b": names[str(b.dtype).split(".")[-1]], "y": names[str(out.dtype).split(".")[-1]]},
            int(self.compute_capability)))
        act = _act(spec.act)
        pt, pl, pb, pr = spec.pads
        channels_last = self._conv_plan(spec, x, w, b) == "channels_last"

        def run():  # float compute on the values at the precision, one rounding when stored (PSEUDO_HALF)
            xp = F.pad(x.float(), (pl, pr, pt, pb))
            if channels_last:
                import torch

                xp = xp.contiguous(memory_format=torch.channels_last)
            out.copy_(act(F.conv2d(xp, w.float(), b.float(), spec.stride, 0, spec.dilation, spec.groups)))
        return self._kinds(run, "cudnn", f"conv{spec}", reads=(x, w, b), writes=(out,))

    def pool(self, x, out, spec):
        import torch
        import torch.nn.functional as F

        if spec.kind == "global_avg":
            return self._kinds(lambda: out.copy_(x.float().mean((2, 3), keepdim=True)), "ios_global_pool", reads=(x,),
                               writes=(out,))
        if spec.kind == "global_max":
            return self._kinds(lambda: out.copy_(x.float().amax((2, 3), keepdim=True)), "ios_global_pool", reads=(x,),
                               writes=(out,))
        pt, pl, pb, pr = spec.pads
        pads = (pl, pr, pt, pb)
        k, s = spec.kernel, spec.stride
        if spec.kind == "max":
            return self._kinds(lambda: out.copy_(F.max_pool2d(F.pad(x.float(), pads, value=float("-inf")), k, s)),
                               "ios_pool2d", reads=(x,), writes=(out,))

        def avg():
            sums = F.avg_pool2d(F.pad(x.float(), pads), k, s) * (k[0] * k[1])
            if spec.count_include_pad:
                out.copy_(sums / (k[0] * k[1]))
            else:
                ones = torch.ones((1, 1, *x.shape[2:]))
                out.copy_(sums / (F.avg_pool2d(F.pad(ones, pads), k, s) * (k[0] * k[1])))
        return self._kinds(avg, "ios_pool2d", reads=(x,), writes=(out,))

    def activation(self, x, out, act, alpha=0.0, beta=0.0):
        fn = _act(act, alpha, beta)
        kind = "ios_strided" if x.dim() > 4 else "ios_map"  # CupyDevice's choice: ios_map walks 4 axes
        return self._kinds(lambda: out.copy_(fn(x.float())), kind, reads=(x,), writes=(out,))

    def affine(self, x, out, scale, shift, act):
        along = (1, -1, *(1,) * (x.dim() - 2))  # the first image axis (the channel), any rank: the oracle's
        sc, sh = self.upload(scale).view(along), self.upload(shift).view(along)
        fn = _act(act)
        kind = "ios_strided" if x.dim() > 4 else "ios_map"
        return self._kinds(lambda: out.copy_(fn(x.float() * sc.float() + sh.float())), kind, reads=(x, sc, sh),
                           writes=(out,))

    def shuffle(self, x, out, groups):
        def run():
            n, c, h, w = x.shape
            out.copy_(x.reshape(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w))
        return self._kinds(run, "ios_shuffle", reads=(x,), writes=(out,))

    def resize(self, x, out, mode, align_corners):
        import torch.nn.functional as F

        size = tuple(out.shape[2:])
        if mode == "nearest":
            return self._kinds(lambda: out.copy_(F.interpolate(x.float(), size=size, mode="nearest")), "ios_resize",
                               reads=(x,), writes=(out,))
        return self._kinds(lambda: out.copy_(F.interpolate(x.float(), size=size, mode="bilinear",
                                                           align_corners=align_corners)), "ios_resize",
                           reads=(x,), writes=(out,))

    def flatten(self, x, out):
        return self._kinds(lambda: out.view(x.shape).copy_(x), "ios_map", reads=(x,), writes=(out,))

    def linear(self, x, out, stream, weight, bias, act):
        import torch

        w, b = self.upload(weight), self.upload(bias)
        fn = _act(act)
        n = x.shape[0]
        return self._kinds(lambda: out.copy_(fn(torch.addmm(b.float(), x.reshape(n, -1).float(), w.t().float()))
                                             .view(out.shape)),
                           "cublas", "ios_map", reads=(x, w, b), writes=(out,))

    def combine(self, views, how, dst):
        def run():
            acc = views[0].float().clone()
            for v in views[1:]:
                acc = acc * v if how == "mul" else acc + v
            dst.copy_(acc)
        return self._kinds(run, "ios_map", reads=tuple(views), writes=(dst,))
