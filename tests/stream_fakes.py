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

Its parts: the rules (tests/stream_fakes_rules.py), the streams, events, graphs and simulated clock
(tests/stream_fakes_queue.py), and here the executor's device interface on them
(:class:`TorchQueueDevice`), whose general tensors' kernels are in tests/stream_fakes_tensors.py.
"""

from __future__ import annotations

from tests.stream_fakes_queue import FakeCupy, FakeDevice, FakeDriver, FakeEvent, FakeStream, FakeTiming
from tests.stream_fakes_rules import DtypeError, footprint
from tests.stream_fakes_tensors import TensorKernelsFake


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
