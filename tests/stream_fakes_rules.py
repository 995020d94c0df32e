"""The rules of CUDA the fake device (tests/stream_fakes.py) checks every call against, each with
the documentation it comes from (:class:`CudaRules`): capture, graphs, event record flags, stream
order, events, cuDNN's data types and element types; the error codes and exceptions a broken rule
raises, and :func:`footprint`, the memory a view covers, in which stream order is checked."""

from __future__ import annotations

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
