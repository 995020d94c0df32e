"""The device the CUDA executor (:mod:`ios_core.runtime.cuda`) runs on: CuPy arrays, streams
and events, cuDNN Frontend convolutions with one handle and workspace per stream, CuPy kernels
for the rest (:mod:`ios_core.runtime.cuda_kernels`).

Every method returns a zero-argument closure over preallocated device memory, launched on
the current CuPy stream (the executor makes the group's stream current first); cuDNN calls go
through the handle bound to that stream. Written against CuPy 14 and the cuDNN Frontend 1.3x;
never run on a GPU in this project's development (see README).
"""

from __future__ import annotations

import os

import numpy as np

from .cuda_kernels import Kernels, build_conv


class CupyDevice:
    def __init__(self, device_id: int = 0):
        import cudnn
        import cupy

        if os.environ.get("CUPY_TF32", "0") not in ("", "0"):
            raise RuntimeError("CUPY_TF32 is set: CuPy would run matrix products in TF32; the runtime is fp32")
        self.cp = cupy
        self.cudnn = cudnn
        self.device = cupy.cuda.Device(device_id)
        self.device.use()
        self.k = Kernels()
        self._streams: dict[int, object] = {}  # stream index -> Stream, reused by every program
        self._handles: dict[int, object] = {}  # stream index -> cuDNN handle bound to it
        self._stats: dict = {}
        self._begin()

    def _begin(self) -> None:
        """State of the program being built (the device serves one program after another)."""
        self.handles: list = []
        self.ws_need: list[int] = []
        self._ws_users: list[tuple[int, list]] = []
        self.keep: list = []  # weights, workspaces and private buffers the closures reference
        self.fused = 0
        self.unfused = 0

    # ---- memory -------------------------------------------------------------------------------
    def empty(self, n: int):
        return self.cp.empty(int(n), dtype=self.cp.float32)

    def empty_shaped(self, shape):
        return self.cp.empty(tuple(shape), dtype=self.cp.float32)

    def view(self, base, start: int, shape):
        size = int(np.prod(shape))
        return base[start:start + size].reshape(tuple(shape))

    def narrow(self, v, c0: int, c1: int):
        return v[:, c0:c1]

    def upload(self, a: np.ndarray):
        arr = self.cp.asarray(np.ascontiguousarray(a, dtype=np.float32))
        self.keep.append(arr)
        return arr

    def write(self, view, x: np.ndarray, stream) -> None:
        stream.synchronize()  # a previous run may still read the input
        view.set(x, stream=stream)
        stream.synchronize()

    def read(self, view, stream) -> np.ndarray:
        return self.cp.asnumpy(view, stream=stream, blocking=True)

    def sync(self, stream) -> None:
        stream.synchronize()

    def timer(self, stream):
        from ..gpu import CudaEventTimer

        return CudaEventTimer(stream)

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
        """Workspaces: one per stream, as large as its largest convolution needs. Returns what
        the program's closures reference (the program keeps it alive)."""
        workspaces = [self.cp.empty(max(1, need), dtype=self.cp.uint8) for need in self.ws_need]
        for s, holder in self._ws_users:
            holder[0] = int(workspaces[s].data.ptr)
        owned = self.keep + workspaces
        self._stats = {"convs_fused": self.fused, "convs_unfused": self.unfused}
        self.keep = []
        return owned

    def capture(self, stream0, calls):
        """The whole command list captured from stream 0 into one CUDA graph."""
        stream0.use()
        stream0.synchronize()
        stream0.begin_capture()
        try:
            for call in calls:
                call()
        finally:
            graph = stream0.end_capture()
        stream0.use()
        graph.upload(stream0)
        return graph

    def replay(self, graph, stream0) -> None:
        graph.launch(stream0)

    def stats(self) -> dict:
        return {**self._stats, "tf32": False, "cudnn": self.cudnn.backend_version_string(),
                "cupy": self.cp.__version__}

    # ---- kernels -------------------------------------------------------------------------------
    def conv(self, op, x, out, stream: int, weight_np, bias_np):
        n, cin, h, w = x.shape
        isz = x.itemsize
        conv = build_conv(self.handles[stream], n=n, cin=cin, h=h, w=w, cout=op.out_channels, kernel=tuple(op.kernel),
                          stride=tuple(op.stride), padding=tuple(op.padding), dilation=tuple(op.dilation),
                          groups=op.groups, act=op.act, in_stride=[s // isz for s in x.strides],
                          out_stride=[s // isz for s in out.strides], out_hw=tuple(out.shape[2:]))
        weight = self.upload(weight_np)
        bias = self.upload(bias_np).reshape(1, -1, 1, 1)
        self.ws_need[stream] = max(self.ws_need[stream], conv.workspace_bytes)
        holder = [0]
        self._ws_users.append((stream, holder))
        t, g, handle = conv.tensors, conv.graph, self.handles[stream]
        pack = {t["x"]: int(x.data.ptr), t["w"]: int(weight.data.ptr), t["y"]: int(out.data.ptr)}
        self.keep.append(conv)
        if conv.fused:
            self.fused += 1
            pack[t["b"]] = int(bias.data.ptr)

            def run():
                g.execute(pack, holder[0], handle=handle)
            return run
        self.unfused += 1
        bias_act = self.k.bias_act[op.act]

        def run_unfused():
            g.execute(pack, holder[0], handle=handle)
            bias_act(out, bias, out)
        return run_unfused

    def pool(self, op, x, out):
        k = self.k
        if op.pool_type in ("global_avg", "global_max"):
            is_max = op.pool_type == "global_max"
            return lambda: k.global_pool(x, out, is_max)
        kernel, stride, padding, is_max = tuple(op.kernel), tuple(op.stride), tuple(op.padding), op.pool_type == "max"
        return lambda: k.pool2d(x, out, kernel, stride, padding, is_max)

    def activation(self, kind: str, x, out):
        act = self.k.act[kind]
        return lambda: act(x, out)

    def flatten(self, x, out):
        dst = out.reshape(x.shape)  # out is an operator's own (contiguous) buffer
        copy = self.k.copy
        return lambda: copy(x, dst)

    def linear(self, op, x, out, stream: int, weight_np, bias_np):
        n = x.shape[0]
        x2 = x.reshape(n, -1)
        w_t = self.upload(np.ascontiguousarray(weight_np.T))
        bias = self.upload(bias_np).reshape(1, -1, 1, 1)
        tmp = self.empty_shaped((n, op.out_features))
        self.keep.append(tmp)
        tmp4 = tmp.reshape(n, op.out_features, 1, 1)
        matmul, bias_act = self.cp.matmul, self.k.bias_act[op.act]

        def run():
            matmul(x2, w_t, out=tmp)
            bias_act(tmp4, bias, out)
        return run

    def combine(self, views, how: str, dst):
        k = self.k
        if len(views) == 1:
            (a,) = views
            return lambda: k.copy(a, dst)
        first = k.mul2 if how == "mul" else k.add2
        more = k.mul_into if how == "mul" else k.add_into
        a, b, rest = views[0], views[1], tuple(views[2:])
        if not rest:
            return lambda: first(a, b, dst)

        def run():
            first(a, b, dst)
            for v in rest:
                more(v, dst)
        return run
