"""The device the CUDA executor (:mod:`ios_core.runtime.cuda`) runs on: CuPy arrays, streams
and events, cuDNN Frontend convolutions with one handle and workspace per stream, our own CUDA
C kernels for the rest (:mod:`ios_core.runtime.cuda_kernels`).

Every kernel method takes explicit parameters (never an IR node: the executor translates the
node, and the tests' fake device implements the same parameters independently) and returns a
zero-argument closure over preallocated device memory, launched on the current CuPy stream
(the executor makes the group's stream current first); cuDNN calls go through the handle bound
to that stream. Written against CuPy 14 and the cuDNN Frontend 1.3x; run once, on an H200 with
CuPy 14.2 (CUDA 13) and cuDNN 9.19 (docs/results/gpu-h200-2026-11-26/).
"""

from __future__ import annotations

import os
import weakref

import numpy as np

from ios_core.runtime.cuda_kernels import (
    ACT_CODES,
    CUDNN_FUSED_ACTS,
    EXCLUDED_NOTES_BY_PRECISION,
    MAP_ADD,
    MAP_MUL,
    PRECISIONS,
    STORAGE_DTYPE,
    Kernels,
    arch_problem,
    build_conv,
    conv_data_types,
    conv_key,
    from_storage,
    plan_executor,
    plan_record,
    to_storage,
)
from ios_core.runtime.cuda_plans import ConvPlanBook
from ios_core.runtime.cuda_tensor_kernels import (
    ROWNORM_L2,
    ROWNORM_SOFTMAX,
    STRIDED_ADD,
    STRIDED_MUL,
    as_shaped,
    broadcast_strides,
    elem_strides,
    layernorm_launch,
    matmul_launch,
    row_major,
    rownorm_launch,
    sample_stride,
    strided_launch,
    transpose_strides,
)

ALIGNMENT = 16  # bytes: cuDNN Frontend tensors are declared 16-byte aligned
TUNE_REPEAT = 5  # timed executions per cuDNN plan when choosing the fastest


class CupyDevice:
    """``plan_cache``: where the cuDNN plan chosen per convolution geometry is kept across
    processes (``"default"``: the profile database's location, ``ios_core.cost.cache``; a path;
    a ``CudnnPlanCache``; None: this process only).

    ``precision`` (fp32, fp16, bf16): every buffer holds values at that precision
    (``cuda_kernels.STORAGE_DTYPE``), weights are cast once when uploaded, the input when written
    and the output read back as float32; convolutions are cuDNN graphs with that data type and float
    compute (``cuda_kernels.conv_data_types``), their plans chosen and cached per precision, and our
    kernels compiled at it (``cuda_kernels.kernel_source``). fp16 and bf16 are written against
    cuDNN's and CuPy's documentation and checked on the tests' fake device; not yet run on a GPU."""

    def __init__(self, device_id: int = 0, plan_cache="default", precision: str = "fp32"):
        import cudnn
        import cupy

        if precision not in PRECISIONS:
            raise ValueError(f"the CUDA runtime computes in {', '.join(PRECISIONS)}, not {precision!r}")
        self.precision = precision
        self.dtype = np.dtype(STORAGE_DTYPE[precision])
        self.itemsize = self.dtype.itemsize

        if os.environ.get("CUPY_TF32", "0") not in ("", "0"):
            raise RuntimeError("CUPY_TF32 is set: CuPy would run matrix products in TF32; the runtime is fp32")
        self.cp = cupy
        self.cudnn = cudnn
        self.device = cupy.cuda.Device(device_id)
        self.compute_capability = str(self.device.compute_capability)  # '90' for 9.0 (CuPy's form)
        problem = arch_problem(precision, self.compute_capability)
        if problem is not None:  # cuDNN would find no engine for any convolution: say why, once
            raise RuntimeError(f"the IOS CUDA runtime cannot run here: {problem}")
        self.device.use()
        self.k = Kernels(precision)
        self.k.load()  # compile and load our CUDA C now, never inside a capture
        self._streams: dict[int, object] = {}  # stream index -> Stream, reused by every program
        self._handles: dict[int, object] = {}  # stream index -> cuDNN handle bound to it
        self._convs: dict[tuple, object] = {}  # conv_key -> built and tuned Conv, reused by every program
        self._shared: dict[int, object] = {}  # id of a read-only host array -> its device copy (upload)
        self._stats: dict = {}
        self.device_id = int(device_id)
        self.plans = ConvPlanBook()
        if plan_cache is not None:
            self.attach_plan_cache(plan_cache)
        self._begin()

    def plan_versions(self) -> dict:
        """What a stored cuDNN plan is valid for: the GPU, its driver, cuDNN and the cuDNN Frontend."""
        from ios_core.measurement.gpu import fingerprint

        fp = fingerprint(self.device_id)
        try:
            frontend = str(self.cudnn.__version__)
        except AttributeError:
            frontend = None
        return {"gpu": fp.get("name"), "compute_capability": fp.get("compute_capability"),
                "driver": fp.get("driver"), "cudnn": fp.get("cudnn"), "cudnn_frontend": frontend}

    def attach_plan_cache(self, plan_cache) -> None:
        """Keep the plans chosen in ``plan_cache`` (see the class) and reuse those stored there."""
        self.plans.open(plan_cache, self.plan_versions())

    def _begin(self) -> None:
        """State of the program being built (the device serves one program after another)."""
        self.handles: list = []
        self.ws_need: list[int] = []
        self._ws_users: list[tuple[int, list]] = []
        self.keep: list = []  # weights, workspaces and private buffers the closures reference
        self.fused = 0
        self.unfused = 0
        self.conv_plans: list[str] = []

    # ---- memory -------------------------------------------------------------------------------
    def empty(self, n: int):
        return self.cp.empty(int(n), dtype=self.dtype)

    def empty_shaped(self, shape):
        return self.cp.empty(tuple(shape), dtype=self.dtype)

    def view(self, base, start: int, shape):
        size = int(np.prod(shape))
        return base[start:start + size].reshape(tuple(shape))

    def narrow(self, v, c0: int, c1: int):
        return v[:, c0:c1]

    def aligned(self, view) -> bool:
        return int(view.data.ptr) % ALIGNMENT == 0

    def upload(self, a: np.ndarray):
        """``a`` on the device, cast once (here, on the host) to the device's precision. An fp32
        array nobody may write (read-only: the random weights the measured cost model's stage
        programs share, ``runtime.cuda.RandomWeights``) is uploaded once per device and reused while
        it lives, not once per stage program."""
        if not a.flags.writeable and a.dtype == np.float32 and a.flags.c_contiguous:
            hit = self._shared.get(id(a))
            if hit is None:
                hit = self._shared[id(a)] = self.cp.asarray(to_storage(a, self.precision))
                weakref.finalize(a, self._shared.pop, id(a), None)  # its id may be reused once it is gone
            return hit
        arr = self.cp.asarray(to_storage(a, self.precision))
        self.keep.append(arr)
        return arr

    def write(self, view, x: np.ndarray, stream) -> None:
        stream.synchronize()  # a previous run may still read the input
        view.set(to_storage(x, self.precision), stream=stream)  # CuPy's set refuses another dtype
        stream.synchronize()

    def read(self, view, stream) -> np.ndarray:
        return from_storage(self.cp.asnumpy(view, stream=stream, blocking=True), self.precision)

    def sync(self, stream) -> None:
        stream.synchronize()

    def sync_device(self) -> None:
        """Wait for everything (uploads on the legacy stream included: non-blocking streams do
        not wait for it)."""
        self.device.synchronize()

    @staticmethod
    def now_ns() -> int:
        """The host clock the GPU cell protocol reads (``ios_core.measurement.gpu.time_gpu_cell``)."""
        import time

        return time.perf_counter_ns()

    def timer(self, stream):
        from ios_core.measurement.gpu import CudaEventTimer

        return CudaEventTimer(stream)

    def flush_l2(self, stream) -> None:
        """Read a buffer twice the size of the GPU's L2 cache on ``stream`` (a sum into a scalar
        allocated with it): what a stage timed next reads comes from device memory (a cold L2), as it
        may inside a whole network's run. Read, not written: L2 is write-back, so a flush that writes
        would leave dirty lines the next stage first pays to write to memory."""
        cp = self.cp
        if getattr(self, "_flush", None) is None:
            l2 = int(cp.cuda.runtime.getDeviceProperties(self.device.id).get("l2CacheSize", 64 << 20))
            self._flush = cp.zeros(max(2 * l2, 1 << 20) // 4, dtype=cp.float32)  # written once, here
            self._flush_sum = cp.zeros((), dtype=cp.float32)
        with stream:
            self._flush.sum(out=self._flush_sum)

    def task_marks(self, n: int, streams) -> CudaTaskMarks:
        return CudaTaskMarks(self.cp, n, streams)

    # ---- streams ------------------------------------------------------------------------------
    def stream(self, index: int):
        if index not in self._streams:
            self._streams[index] = self.cp.cuda.Stream(non_blocking=True)
        return self._streams[index]

    def event(self):
        return self.cp.cuda.Event(disable_timing=True)

    def bind_streams(self, streams) -> None:
        """One cuDNN handle per stream (a handle carries its stream), created once per stream."""
        self._begin()
        for i, s in enumerate(streams):
            if i not in self._handles:
                h = self.cudnn.create_handle()
                self.cudnn.set_stream(handle=h, stream=s.ptr)
                self._handles[i] = h
            self.handles.append(self._handles[i])
            self.ws_need.append(0)

    def launcher(self, stream, index: int, fn, name: str):
        use = stream.use

        def launch():
            use()
            fn()
        return launch

    def finalize(self, nstreams: int) -> list:
        """Workspaces: one per stream, as large as its largest convolution's plan needs. Returns
        what the program's closures reference (the program keeps it alive)."""
        workspaces = [self.cp.empty(max(1, need), dtype=self.cp.uint8) for need in self.ws_need]
        for s, holder in self._ws_users:
            holder[0] = int(workspaces[s].data.ptr)
        owned = self.keep + workspaces
        self._stats = {"convs_fused": self.fused, "convs_unfused": self.unfused,
                       "cudnn_plans": sorted(set(self.conv_plans))}
        self.keep = []
        return owned

    def capture(self, stream0, calls):
        """The whole command list captured from stream 0 into one CUDA graph. The program has
        run it once and synchronized before (compilation, module loading, cuBLAS and cuDNN
        initialization all happen then, never inside the capture). If a call fails inside the
        capture, that error is raised (ending the capture may fail too; that is secondary)."""
        stream0.use()
        self.device.synchronize()
        stream0.begin_capture()
        try:
            for call in calls:
                call()
        except BaseException:
            try:
                stream0.end_capture()
            except Exception:
                pass
            raise
        graph = stream0.end_capture()
        stream0.use()
        graph.upload(stream0)
        stream0.synchronize()
        return graph

    def replay(self, graph, stream0) -> None:
        graph.launch(stream0)

    def stats(self) -> dict:
        # fp32: every cuDNN engine with a TF32/down-convert/reduced-precision note is deselected
        # before plans are built (EXCLUDED_NOTES_BY_PRECISION); linear layers are our own kernel (ios_linear), float
        # compute at every precision; fp16/bf16: tensor-core engines allowed, float compute
        types = conv_data_types(self.precision)
        return {**self._stats, **self.plans.stats(), "tf32": False, "precision": self.precision,
                "cudnn_data_type": types["x"], "cudnn_compute_type": types["compute"],
                "cudnn_excluded_notes": list(EXCLUDED_NOTES_BY_PRECISION[self.precision]),
                "cudnn": self.cudnn.backend_version_string(), "cupy": self.cp.__version__}

    # ---- kernels -------------------------------------------------------------------------------
    def _tune(self, stream: int, x, out, weight, bias):
        """Time every built plan of a convolution on the stream's handle (outside any capture);
        returns {plan index: ms}; a plan that fails to run gets None."""
        cp, handle = self.cp, self.handles[stream]

        def tune(conv):
            g, t = conv.graph, conv.tensors
            pack = {t["x"]: int(x.data.ptr), t["w"]: int(weight.data.ptr), t["y"]: int(out.data.ptr)}
            if conv.fused:
                pack[t["b"]] = int(bias.data.ptr)
            s = self._streams[stream]
            times = {}
            for i in conv.plans:
                try:
                    ws = cp.empty(max(1, int(g.get_workspace_size_plan_at_index(i))), dtype=cp.uint8)
                    g.execute_plan_at_index(pack, int(ws.data.ptr), i, handle=handle)  # warm-up
                    start, end = cp.cuda.Event(), cp.cuda.Event()
                    start.record(s)
                    for _ in range(TUNE_REPEAT):
                        g.execute_plan_at_index(pack, int(ws.data.ptr), i, handle=handle)
                    end.record(s)
                    end.synchronize()
                    times[i] = float(cp.cuda.get_elapsed_time(start, end)) / TUNE_REPEAT
                except Exception:
                    times[i] = None
            return times
        return tune

    def conv(self, x, out, stream: int, weight_np, bias_np, spec):
        n, cin, h, w = x.shape
        isz = x.itemsize
        weight = self.upload(weight_np)
        bias = self.upload(bias_np).reshape(1, -1, 1, 1)
        geometry = dict(n=n, cin=cin, h=h, w=w, cout=spec.out_channels, kernel=tuple(spec.kernel),
                        stride=tuple(spec.stride), pads=tuple(spec.pads), dilation=tuple(spec.dilation),
                        groups=spec.groups, act=spec.act, in_stride=[s // isz for s in x.strides],
                        out_stride=[s // isz for s in out.strides], out_hw=tuple(out.shape[2:]))
        if self.precision != "fp32":  # part of the plan cache's key (an fp32 key stays as it was)
            geometry["precision"] = self.precision
        key = conv_key(geometry)
        conv = self._convs.get(key)
        if conv is None:
            self.device.synchronize()  # the weights are on the device before timing
            handle = self.handles[stream]

            def tune():
                c = build_conv(handle, tune=self._tune(stream, x, out, weight, bias), **geometry)
                return c, plan_record(c), len(c.plans or {})

            conv = self._convs[key] = self.plans.choose(
                repr(key), tune, lambda record: build_conv(handle, known=record, **geometry))
        self.conv_plans.append(conv.plan_name or str(conv.plan))
        self.ws_need[stream] = max(self.ws_need[stream], conv.workspace_bytes)
        holder = [0]
        self._ws_users.append((stream, holder))
        t = conv.tensors
        pack = {t["x"]: int(x.data.ptr), t["w"]: int(weight.data.ptr), t["y"]: int(out.data.ptr)}
        if conv.fused:
            pack[t["b"]] = int(bias.data.ptr)
        # the plan and the pack resolved once: no plan-list walk at each launch (plan_executor)
        execute = plan_executor(conv, pack, self.handles[stream])
        if conv.fused:
            self.fused += 1

            def run():
                execute(holder[0])
            return run
        self.unfused += 1
        bias_act = self.k.map_launch(out, out, shift=bias.reshape(-1), act=spec.act)

        def run_unfused():
            execute(holder[0])
            bias_act()
        return run_unfused

    def pool(self, x, out, spec):
        k = self.k
        if spec.kind in ("global_avg", "global_max"):
            is_max = spec.kind == "global_max"
            return k.global_pool_launch(x, out, is_max)
        kernel, stride, begin = tuple(spec.kernel), tuple(spec.stride), tuple(spec.pads[:2])
        is_max, count_pad = spec.kind == "max", bool(spec.count_include_pad)
        return k.pool2d_launch(x, out, kernel, stride, begin, is_max, count_pad)

    def activation(self, x, out, act: str, alpha: float = 0.0, beta: float = 0.0):
        k = self.k
        if x.ndim > 4:  # ios_map walks 4 axes: an element-wise activation of any rank is a strided copy
            return strided_launch(k, x, elem_strides(x), out, act_code=ACT_CODES[act], alpha=alpha, beta=beta)
        return k.map_launch(x, out, act=act, alpha=alpha, beta=beta)

    def affine(self, x, out, scale_np, shift_np, act: str):
        k = self.k
        scale, shift = self.upload(scale_np), self.upload(shift_np)
        if x.ndim > 4:  # the scale and shift of the first image axis (the channel), broadcast over the rest
            along = [0, 1, *(0,) * (x.ndim - 2)]
            return _chain([strided_launch(k, x, elem_strides(x), out, b=scale, b_strides=along, op=STRIDED_MUL),
                           strided_launch(k, out, elem_strides(out), out, b=shift, b_strides=along, op=STRIDED_ADD,
                                          act_code=ACT_CODES[act])])
        return k.map_launch(x, out, scale=scale, shift=shift, act=act)

    def shuffle(self, x, out, groups: int):
        k = self.k
        return k.shuffle_launch(x, out, groups)

    def resize(self, x, out, mode: str, align_corners: bool):
        k = self.k
        return k.resize_launch(x, out, mode, align_corners)

    def flatten(self, x, out):
        dst = out.reshape(x.shape)  # out is an operator's own (contiguous) buffer
        k = self.k
        return k.map_launch(x, dst)

    def linear(self, x, out, stream: int, weight_np, bias_np, act: str):
        n = x.shape[0]
        x2 = x.reshape(n, -1)  # x is contiguous (the program composes a sliced input into scratch)
        w_t = self.upload(np.ascontiguousarray(weight_np.T))
        shift = self.upload(bias_np)
        k = self.k
        return k.linear_launch(x2, w_t, shift, out, act=act)  # not cupy.matmul: see cuda_kernels

    def combine(self, views, how: str, dst):
        k = self.k
        if dst.ndim > 4:  # ios_map walks 4 axes: wider tensors go through the strided kernel
            return self._combine_wide(views, how, dst)
        op = MAP_MUL if how == "mul" else MAP_ADD
        if len(views) == 1:
            return k.map_launch(views[0], dst)
        return _chain([k.map_launch(views[0], dst, b=views[1], op=op),
                       *(k.map_launch(dst, dst, b=v, op=op) for v in views[2:])])

    # ---- general tensors (cuda_tensor_kernels; every view per-sample contiguous) ------------------------
    def _combine_wide(self, views, how: str, dst):
        op = STRIDED_MUL if how == "mul" else STRIDED_ADD
        shape = tuple(dst.shape)
        first = strided_launch(self.k, views[0], broadcast_strides(views[0], shape), dst)
        rest = [strided_launch(self.k, dst, elem_strides(dst), dst, b=v, b_strides=broadcast_strides(v, shape), op=op)
                for v in views[1:]]
        return _chain([first, *rest])

    def dense(self, x, out, stream: int, weight_np, bias_np, act: str):
        """``act(x @ weight.T + bias)`` along the last axis: one ``ios_matmul`` over the samples, the
        weight (uploaded transposed, (K, J)) shared by all of them."""
        w_t = self.upload(np.ascontiguousarray(np.asarray(weight_np).T))
        shift = self.upload(bias_np)
        kk, j = (int(d) for d in w_t.shape)
        n, m = int(x.shape[0]), int(np.prod(x.shape[1:-1]))
        return matmul_launch(self.k, x, [sample_stride(x), 0, kk, 1], w_t, [0, 0, j, 1], out,
                             [sample_stride(out), 0, j, 1], (n, 1, m, kk, j), shift=shift, act_code=ACT_CODES[act])

    def batched_matmul(self, a, b, out):
        """``a @ b`` over the samples and the leading image axes (the heads)."""
        m, kk, j = int(a.shape[-2]), int(a.shape[-1]), int(b.shape[-1])
        z1 = int(np.prod(a.shape[1:-2]))
        return matmul_launch(self.k, a, [sample_stride(a), m * kk, kk, 1], b, [sample_stride(b), kk * j, j, 1], out,
                             [sample_stride(out), m * j, j, 1], (int(a.shape[0]), z1, m, kk, j))

    def layernorm(self, x, out, weight_np, bias_np, axes: int, eps: float):
        w = self.upload(np.asarray(weight_np).reshape(-1))
        b = self.upload(np.asarray(bias_np).reshape(-1))
        return layernorm_launch(self.k, x, w, b, out, axes, eps)

    def softmax(self, x, out, axis: int):
        """Softmax along ``axis`` of the batched shape (>= 1)."""
        return rownorm_launch(self.k, x, out, axis, ROWNORM_SOFTMAX)

    def l2norm(self, x, out, axis: int, eps: float):
        return rownorm_launch(self.k, x, out, axis, ROWNORM_L2, eps)

    def transpose(self, x, out, perm):
        """Output image axis ``i`` is input image axis ``perm[i]``: a strided copy."""
        return strided_launch(self.k, x, transpose_strides(x, perm), out)

    def reshape(self, x, out):
        """The same elements, row-major, in ``out``'s shape: a copy."""
        return strided_launch(self.k, x, as_shaped(x, out.shape[1:]), out)

    def constant(self, x, out, c_np, how: str):
        """``x + c`` or ``x * c``, ``c`` broadcast from the last axis (and over the samples)."""
        c = self.upload(c_np)
        shape = tuple(out.shape)
        dims = (1,) * (len(shape) - c.ndim) + tuple(int(d) for d in c.shape)
        strides = [0 if d == 1 and e != 1 else s for d, e, s in zip(dims, shape, row_major(dims))]
        return strided_launch(self.k, x, elem_strides(x), out, b=c, b_strides=strides,
                              op=STRIDED_MUL if how == "mul" else STRIDED_ADD)

    def prepend(self, x, out, rows_np):
        """``rows`` (shared by every sample) then ``x`` along the first image axis: two strided copies."""
        rows = self.upload(rows_np)
        r = int(rows.shape[0])
        head, tail = out[:, :r], out[:, r:]
        return _chain([strided_launch(self.k, rows, [0, *row_major(rows.shape)], head),
                       strided_launch(self.k, x, as_shaped(x, x.shape[1:]), tail)])


def _chain(launches):
    if len(launches) == 1:
        return launches[0]

    def run():
        for launch in launches:
            launch()
    return run


class CudaTaskMarks:
    """Timing events recorded before and after each task on its stream, kept inside a captured CUDA
    graph as event-record nodes: ``cuEventRecordWithFlags(event, stream, CU_EVENT_RECORD_EXTERNAL)``
    while the stream is capturing (the CUDA driver API; a plain ``cudaEventRecord`` inside a capture
    only orders streams and records nothing), a plain record (flag 0) outside a capture, where the
    external flag is invalid (``CUevent_record_flags``): the warm-up run before the capture, a
    program without a graph. PyTorch chooses the flag from the stream's capture status likewise.
    The events add no dependency between streams. Written against the CUDA driver API
    documentation and run on the tests' strict fake device; not run on a GPU yet."""

    RECORD_EXTERNAL = 0x1  # CU_EVENT_RECORD_EXTERNAL

    def __init__(self, cp, n: int, streams, driver=None):
        """``driver``: the CUDA driver library (``libcuda.so.1`` through ctypes unless given: the
        tests' fake device passes its own, which returns the error codes CUDA would)."""
        import ctypes

        self.cp, self.streams = cp, streams
        self.events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(n)]
        lib = driver if driver is not None else ctypes.CDLL("libcuda.so.1")
        self._record = lib.cuEventRecordWithFlags
        self._record.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
        self._record.restype = ctypes.c_int

    def _mark(self, event, stream):
        record, ev, st, external = self._record, int(event.ptr), int(stream.ptr), self.RECORD_EXTERNAL
        capturing = stream.is_capturing  # CuPy: cudaStreamIsCapturing

        def mark():
            rc = record(ev, st, external if capturing() else 0)
            if rc:
                raise RuntimeError(f"cuEventRecordWithFlags failed: CUresult {rc}")
        return mark

    def begin(self, s: int, ti: int):
        return self._mark(self.events[ti][0], self.streams[s])

    def end(self, s: int, ti: int):
        return self._mark(self.events[ti][1], self.streams[s])

    def read(self) -> list[tuple[float, float]]:
        if not self.events:  # a program with no tasks
            return []
        ref = self.events[0][0]
        ms = self.cp.cuda.get_elapsed_time
        return [(float(ms(ref, b)), float(ms(ref, e))) for b, e in self.events]


__all__ = ["CupyDevice", "CudaTaskMarks", "CUDNN_FUSED_ACTS", "ALIGNMENT"]
