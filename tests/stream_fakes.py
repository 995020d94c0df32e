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


class FakeTaskMarks:
    """The fake device's task marks: the host clock read when a mark executes (in drain order)."""

    def __init__(self, n, streams):
        self.times = [[None, None] for _ in range(n)]
        self.streams = streams

    def _mark(self, s, ti, which):
        import time

        stream, times = self.streams[s], self.times

        def run():
            times[ti][which] = time.perf_counter()

        return lambda: stream.launch("mark", run)

    def begin(self, s, ti):
        return self._mark(s, ti, 0)

    def end(self, s, ti):
        return self._mark(s, ti, 1)

    def read(self):
        ref = self.times[0][0]
        return [(1e3 * (b - ref), 1e3 * (e - ref)) for b, e in self.times]


class CaptureError(AssertionError):
    """Something a CUDA-graph capture does not allow happened inside one."""


class OrderError(AssertionError):
    """A kernel ran before what it reads was known to be on the device."""


def _act(kind: str, alpha: float = 0.0, beta: float = 0.0):
    """The activation from its parameters (written here, not taken from the oracle)."""
    import torch

    return {"identity": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
            "relu6": lambda t: t.clamp(0.0, 6.0), "hardswish": lambda t: t * (t + 3.0).clamp(0.0, 6.0) / 6.0,
            "silu": lambda t: t * torch.sigmoid(t),
            "leaky_relu": lambda t: torch.where(t > 0, t, t * alpha),
            "hardsigmoid": lambda t: (t * alpha + beta).clamp(0.0, 1.0),
            "clip": lambda t: t.clamp(alpha, beta)}[kind]


class TorchQueueDevice:
    """The CUDA executor's device interface (see ``ios_core.runtime.cuda_device.CupyDevice``)
    on the CPU: torch tensors for memory (fresh memory is filled with NaN, so reading what
    nothing wrote shows), torch kernels writing into the given views, and the fake device's
    streams: nothing runs until :meth:`drain`, which executes queued work in a random order
    CUDA allows. ``capture`` records the command list; ``replay`` issues it again.

    What a real GPU forbids fails here too:

    * inside a capture, allocating, uploading, synchronizing, copying to or from the host, or
      issuing a kernel for the first time (CuPy compiles and loads a kernel, cuBLAS and cuDNN
      initialize, at the first launch): :class:`CaptureError`;
    * a kernel executing while an upload (the legacy stream) has not been synchronized with the
      device: :class:`OrderError` (non-blocking streams do not wait for the legacy stream);
    * a cuDNN pointer that is not 16-byte aligned (cuDNN Frontend tensors are declared so):
      AssertionError when the convolution is built.

    Kernel methods take the device's explicit parameters (``ConvSpec``, ``PoolSpec``,
    activation name and parameters) and implement them with torch functions written here, so
    an attribute the executor fails to pass computes a different result than the oracle."""

    def __init__(self, seed: int = 0, plan_cache=None):
        from ios_core.runtime.cuda_plans import ConvPlanBook

        self.fake = FakeDevice(0, 0, seed)
        self._streams: dict[int, FakeStream] = {}
        # the plan chosen per convolution geometry, as CupyDevice keeps cuDNN's (ios_core.runtime.cuda_plans):
        # here the two "plans" are torch's convolution on NCHW or channels-last memory, each built and
        # timed on the CPU, the faster kept
        self.plans = ConvPlanBook()
        self._conv_plans: dict[str, str] = {}
        if plan_cache is not None:
            self.attach_plan_cache(plan_cache)
        self.captured = 0
        self.capturing = False
        self.issued: set[str] = set()  # kernel kinds launched at least once (compiled, initialized)
        self.pending_upload = False
        self.convs: list[tuple[int, int]] = []  # byte offsets (input, output) of every convolution built

    def _no_capture(self, what: str) -> None:
        if self.capturing:
            raise CaptureError(f"{what} inside a CUDA-graph capture")

    # memory
    def empty(self, n):
        import torch

        self._no_capture("allocation")
        return torch.full((int(n),), float("nan"))

    def empty_shaped(self, shape):
        import torch

        self._no_capture("allocation")
        return torch.full(tuple(shape), float("nan"))

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

        self._no_capture("upload")
        self.pending_upload = True
        a = np.ascontiguousarray(a, dtype=np.float32)
        return torch.from_numpy(a if a.flags.writeable else a.copy())  # torch wants writable memory

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
        e = FakeEvent(self.fake, len(self.fake.events))
        self.fake.events.append(e)
        return e

    def bind_streams(self, streams):
        pass

    def launcher(self, stream, index, fn, name):
        kinds = getattr(fn, "kinds", ("kernel",))

        def issue():
            for kind in kinds:
                if kind not in self.issued:
                    self._no_capture(f"first launch of {kind} (compiles / initializes)")
                    self.issued.add(kind)
            stream.launch(name, self._checked(fn))
        return issue

    def _checked(self, fn):
        def run():
            if self.pending_upload:
                raise OrderError("a kernel ran before the weight uploads were synchronized with the device")
            fn()
        return run

    def finalize(self, nstreams):
        return []

    def capture(self, stream0, calls):
        self.captured += 1
        self.capturing = True
        try:
            for call in calls:
                call()
        finally:
            self.capturing = False
        return list(calls)

    def replay(self, graph, stream0):
        for call in graph:
            call()

    def stats(self):
        return {"device": "fake", **self.plans.stats()}

    def flush_l2(self, stream) -> None:
        """A cold cache on the CPU: 32 MB written (the fake's 'L2')."""
        import torch

        self._no_capture("cache flush")
        self.drain()
        if getattr(self, "_flush", None) is None:
            self._flush = torch.empty(8 << 20)
        self._flush.fill_(1.0)

    def task_marks(self, n, streams):
        return FakeTaskMarks(n, streams)

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

        key = repr((tuple(x.shape), tuple(x.stride()), tuple(w.shape), str(spec)))
        hit = self._conv_plans.get(key)
        if hit is not None:
            return hit
        pt, pl, pb, pr = spec.pads
        xp = F.pad(x.nan_to_num(0.0), (pl, pr, pt, pb))

        def run(plan):
            xi = xp.contiguous(memory_format=torch.channels_last) if plan == "channels_last" else xp
            return F.conv2d(xi, w, b, spec.stride, 0, spec.dilation, spec.groups)

        def tune():
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

        self._no_capture("host-to-device copy")
        self.drain()
        view.copy_(torch.from_numpy(x))

    def read(self, view, stream):
        self._no_capture("device-to-host copy")
        return view.contiguous().numpy().copy()

    def sync(self, stream):
        self._no_capture("stream synchronize")
        self.drain()

    def sync_device(self):
        self._no_capture("device synchronize")
        self.drain()
        self.pending_upload = False

    def timer(self, stream):
        return None

    # kernels (torch, into the given views), from explicit parameters
    @staticmethod
    def _kinds(fn, *kinds):
        fn.kinds = kinds
        return fn

    def conv(self, x, out, stream, weight, bias, spec):
        import torch.nn.functional as F

        for what, v in (("input", x), ("output", out)):
            assert self.aligned(v), (f"cuDNN {what} pointer at byte offset {self.offset_bytes(v)} is not 16-byte "
                                     f"aligned (shape {tuple(v.shape)})")
        self.convs.append((self.offset_bytes(x), self.offset_bytes(out)))
        w, b = self.upload(weight), self.upload(bias)
        act = _act(spec.act)
        pt, pl, pb, pr = spec.pads
        channels_last = self._conv_plan(spec, x, w, b) == "channels_last"

        def run():
            xp = F.pad(x, (pl, pr, pt, pb))
            if channels_last:
                import torch

                xp = xp.contiguous(memory_format=torch.channels_last)
            out.copy_(act(F.conv2d(xp, w, b, spec.stride, 0, spec.dilation, spec.groups)))
        return self._kinds(run, "cudnn", f"conv{spec}")

    def pool(self, x, out, spec):
        import torch
        import torch.nn.functional as F

        if spec.kind == "global_avg":
            return self._kinds(lambda: out.copy_(x.mean((2, 3), keepdim=True)), "ios_global_pool")
        if spec.kind == "global_max":
            return self._kinds(lambda: out.copy_(x.amax((2, 3), keepdim=True)), "ios_global_pool")
        pt, pl, pb, pr = spec.pads
        pads = (pl, pr, pt, pb)
        k, s = spec.kernel, spec.stride
        if spec.kind == "max":
            return self._kinds(lambda: out.copy_(F.max_pool2d(F.pad(x, pads, value=float("-inf")), k, s)),
                               "ios_pool2d")

        def avg():
            sums = F.avg_pool2d(F.pad(x, pads), k, s) * (k[0] * k[1])
            if spec.count_include_pad:
                out.copy_(sums / (k[0] * k[1]))
            else:
                ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
                out.copy_(sums / (F.avg_pool2d(F.pad(ones, pads), k, s) * (k[0] * k[1])))
        return self._kinds(avg, "ios_pool2d")

    def activation(self, x, out, act, alpha=0.0, beta=0.0):
        fn = _act(act, alpha, beta)
        return self._kinds(lambda: out.copy_(fn(x)), "ios_map")

    def affine(self, x, out, scale, shift, act):
        sc, sh = self.upload(scale).view(1, -1, 1, 1), self.upload(shift).view(1, -1, 1, 1)
        fn = _act(act)
        return self._kinds(lambda: out.copy_(fn(x * sc + sh)), "ios_map")

    def shuffle(self, x, out, groups):
        def run():
            n, c, h, w = x.shape
            out.copy_(x.reshape(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w))
        return self._kinds(run, "ios_shuffle")

    def resize(self, x, out, mode, align_corners):
        import torch.nn.functional as F

        size = tuple(out.shape[2:])
        if mode == "nearest":
            return self._kinds(lambda: out.copy_(F.interpolate(x, size=size, mode="nearest")), "ios_resize")
        return self._kinds(lambda: out.copy_(F.interpolate(x, size=size, mode="bilinear",
                                                           align_corners=align_corners)), "ios_resize")

    def flatten(self, x, out):
        return self._kinds(lambda: out.view(x.shape).copy_(x), "ios_map")

    def linear(self, x, out, stream, weight, bias, act):
        import torch

        w, b = self.upload(weight), self.upload(bias)
        fn = _act(act)
        n = x.shape[0]
        return self._kinds(lambda: out.copy_(fn(torch.addmm(b, x.reshape(n, -1), w.t())).view(out.shape)),
                           "cublas", "ios_map")

    def combine(self, views, how, dst):
        def run():
            acc = views[0].clone()
            for v in views[1:]:
                acc = acc * v if how == "mul" else acc + v
            dst.copy_(acc)
        return self._kinds(run, "ios_map")
