"""PyTorch adapters: ``torch`` (eager) and ``torch-compile`` (``torch.compile``, inductor on CPU).

The IOS graph becomes an ``nn.Module`` (``nn.Conv2d`` with its fused activation, pools, slices,
sums, concatenations, ``nn.Linear``) holding copies of the graph's weights, then is traced
with ``torch.fx`` into straight-line code (no interpretation overhead per call, and a code
object of its own, so ``torch.compile`` never shares its recompile budget between graphs).
Runs under ``torch.inference_mode``; input and output are NCHW float32 like the oracle.

int8 (``torch``, CPU): post-training static quantization in FX graph mode (``prepare_fx``/``convert_fx``
with the x86 backend's default qconfig mapping, ``ios_core.quantize.torch_quantize``), calibrated on
the harness's seeded calibration inputs; the precision recorded is read back from the converted
module (its quantized convolutions). ``torch-compile`` refuses int8 (``COMPILE_INT8_NO``).

``torch.compile`` machinery (dynamo, inductor) is imported only when a ``torch-compile``
program is built; compilation happens inside ``build`` (the first calls), so the recorded
``compile_seconds`` is separate from the measured latency.

On ``device="cuda"`` the module and the input move to the GPU (the input outside the timed
call), fp32 strict: TF32 is switched off for matrix products and cuDNN convolutions
(``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.cudnn.allow_tf32``) and
recorded (``info["tf32"]``); ``cudnn.benchmark`` is on (what a user tuning for speed does);
samples are timed with CUDA events on the current stream. ``torch-compile-cudagraphs`` is
``torch.compile(mode="reduce-overhead")``: inductor with CUDA graphs (GPU only). The GPU paths
were written against torch's documented API and have not run on a GPU in this project.
"""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from ios_core.ir import ActivationMap, Graph, Node, OpVisitor
from ios_core.kernels import TORCH_PRIMS
from ios_core.lowering import lower
from ios_core.measurement.threads import pool_record, resolve_threads, split_budget
from ios_core.runtime.cuda_kernels import arch_problem

from . import pytorch_tensors as tensors
from .base import Adapter, Compiled, OpTime, ProfilerMissing, median_per_name
from .build_cache import open_cache
from .pytorch_int8 import int8_info, quantized_module  # noqa: F401  (their home before the split)

# IR activation kind (ios_core.ir.activations) -> (alpha, beta) -> its nn.Module
ACTIVATION_MODULES: ActivationMap = ActivationMap("pytorch", {
    "identity": lambda a, b: nn.Identity(),
    "relu": lambda a, b: nn.ReLU(),
    "sigmoid": lambda a, b: nn.Sigmoid(),
    "tanh": lambda a, b: nn.Tanh(),
    "relu6": lambda a, b: nn.ReLU6(),
    "hardswish": lambda a, b: nn.Hardswish(),
    "silu": lambda a, b: nn.SiLU(),
    "gelu": lambda a, b: nn.GELU(),
    "gelu_tanh": lambda a, b: nn.GELU(approximate="tanh"),
    "leaky_relu": lambda a, b: nn.LeakyReLU(a),
    "hardsigmoid": lambda a, b: _Clamped(a, b, 0.0, 1.0),
    "clip": lambda a, b: _Clamped(1.0, 0.0, a, b),
})


def _act_module(act: str, alpha: float = 0.0, beta: float = 0.0) -> nn.Module:
    return ACTIVATION_MODULES[act](alpha, beta)


class _Clamped(nn.Module):
    """``clamp(scale * x + shift, lo, hi)``: hardsigmoid (its alpha, beta) and clip."""

    def __init__(self, scale, shift, lo, hi):
        super().__init__()
        self.scale, self.shift, self.lo, self.hi = float(scale), float(shift), float(lo), float(hi)

    def forward(self, x):
        if self.scale != 1.0 or self.shift != 0.0:
            x = x * self.scale + self.shift
        return torch.clamp(x, self.lo, self.hi)


class _Affine(nn.Module):
    def __init__(self, node: Node):
        super().__init__()
        view = (1, *node.channel_shape)
        self.register_buffer("weight", torch.from_numpy(node.weight.copy()).view(view))
        self.register_buffer("bias", torch.from_numpy(node.bias.copy()).view(view))
        self.act = _act_module(node.act)

    def forward(self, x):
        return self.act(torch.addcmul(self.bias, x, self.weight))


class _Shuffle(nn.Module):
    def __init__(self, node: Node):
        super().__init__()
        self.groups = node.groups
        self.c, self.h, self.w = node.input_shape

    def forward(self, x):
        g, c, h, w = self.groups, self.c, self.h, self.w
        return x.reshape(-1, g, c // g, h, w).transpose(1, 2).reshape(-1, c, h, w)


class _Resize(nn.Module):
    def __init__(self, node: Node):
        super().__init__()
        self.size, self.mode = tuple(node.size), node.mode
        self.align = node.align_corners if node.mode == "bilinear" else None

    def forward(self, x):
        return F.interpolate(x, size=self.size, mode=self.mode, align_corners=self.align)


class _AvgExcludePad(nn.Module):
    """Average over the input positions of each window (padding not counted), any padding."""

    def __init__(self, node: Node):
        super().__init__()
        top, left, bottom, right = node.pads
        self.pads, self.kernel, self.stride = (left, right, top, bottom), node.kernel, node.stride
        scale = float(node.kernel[0] * node.kernel[1]) / torch.from_numpy(node.input_counts())
        self.register_buffer("scale", scale.view(1, 1, *scale.shape))

    def forward(self, x):
        return F.avg_pool2d(F.pad(x, self.pads), self.kernel, self.stride) * self.scale


def _padded(node: Node, module: nn.Module, value: float = 0.0) -> nn.Module:
    """``module`` after an explicit pad (asymmetric padding, or wider than torch's pools allow)."""
    top, left, bottom, right = node.pads
    return nn.Sequential(nn.ConstantPad2d((left, right, top, bottom), value), module)


def _pool_module(node: Node) -> nn.Module:
    native = node.symmetric and all(2 * p <= k for p, k in zip(node.padding, node.kernel))
    if node.pool_type == "max":
        if native:
            return nn.MaxPool2d(node.kernel, node.stride, node.padding)
        return _padded(node, nn.MaxPool2d(node.kernel, node.stride), float("-inf"))
    if not node.count_include_pad:
        if native:
            return nn.AvgPool2d(node.kernel, node.stride, node.padding, count_include_pad=False)
        return _AvgExcludePad(node)
    if native:  # the IR's average counts padding (cuDNN INCLUDE_PADDING)
        return nn.AvgPool2d(node.kernel, node.stride, node.padding, count_include_pad=True)
    return _padded(node, nn.AvgPool2d(node.kernel, node.stride))


class _Flatten(nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1)[:, :, None, None]


class _Linear(nn.Module):
    def __init__(self, linear: nn.Linear, act: nn.Module):
        super().__init__()
        self.linear, self.act = linear, act

    def forward(self, x):
        return self.act(self.linear(torch.flatten(x, 1)))[:, :, None, None]


class ModuleEmitter(OpVisitor):
    """An ``nn.Module`` computing one (non-Sequential) operator from its composed input."""

    ACTIVATIONS = ACTIVATION_MODULES

    def visit_conv(self, node: Node) -> nn.Module:
        conv = nn.Conv2d(node.input_shape[0], node.out_channels, node.kernel, node.stride,
                         node.padding if node.symmetric else 0, node.dilation, node.groups, bias=True)
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(node.weight))
            conv.bias.copy_(torch.from_numpy(node.bias))
        if not node.symmetric:
            conv = _padded(node, conv)
        return nn.Sequential(conv, _act_module(node.act)) if node.act != "identity" else conv

    def visit_pool(self, node: Node) -> nn.Module:
        if node.pool_type == "global_avg":
            return nn.AdaptiveAvgPool2d(1)
        if node.pool_type == "global_max":
            return nn.AdaptiveMaxPool2d(1)
        return _pool_module(node)

    def visit_identity(self, node: Node) -> nn.Module:
        return nn.Identity()

    def visit_relu(self, node: Node) -> nn.Module:
        return nn.ReLU()

    def visit_activation(self, node: Node) -> nn.Module:
        return _act_module(node.act_type, node.alpha, node.beta)

    def visit_affine(self, node: Node) -> nn.Module:
        return _Affine(node)

    def visit_shuffle(self, node: Node) -> nn.Module:
        return _Shuffle(node)

    def visit_resize(self, node: Node) -> nn.Module:
        return _Resize(node)

    def visit_flatten(self, node: Node) -> nn.Module:
        return _Flatten()

    def visit_linear(self, node: Node) -> nn.Module:
        lin = nn.Linear(node.in_features, node.out_features, bias=True)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(node.weight))
            lin.bias.copy_(torch.from_numpy(node.bias))
        return _Linear(lin, _act_module(node.act))

    # ---- general tensors (ios_core.ir.tensor_nodes) ---------------------------------------------------
    def visit_matmul(self, node: Node) -> nn.Module:
        return tensors.MatMul()

    def visit_softmax(self, node: Node) -> nn.Module:
        return tensors.Softmax(node)

    def visit_l2norm(self, node: Node) -> nn.Module:
        return tensors.L2Norm(node)

    def visit_layernorm(self, node: Node) -> nn.Module:
        norm = nn.LayerNorm(node.weight_shape, eps=node.eps)
        with torch.no_grad():
            norm.weight.copy_(torch.from_numpy(node.weight))
            norm.bias.copy_(torch.from_numpy(node.bias))
        return norm

    def visit_dense(self, node: Node) -> nn.Module:
        lin = nn.Linear(node.in_features, node.out_features, bias=True)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(node.weight))
            lin.bias.copy_(torch.from_numpy(node.bias))
        return nn.Sequential(lin, _act_module(node.act)) if node.act != "identity" else lin

    def visit_reshape(self, node: Node) -> nn.Module:
        return tensors.Reshape(node)

    def visit_transpose(self, node: Node) -> nn.Module:
        return tensors.Transpose(node)

    def visit_constant(self, node: Node) -> nn.Module:
        return tensors.Constant(node)

    def visit_prepend(self, node: Node) -> nn.Module:
        return tensors.Prepend(node)


def _op_module(node: Node) -> nn.Module:
    """An ``nn.Module`` computing one (non-Sequential) operator from its composed input."""
    return ModuleEmitter().visit(node)


class GraphModule(nn.Module):
    """The whole graph; ``forward`` walks it (``to_module`` traces it once into plain code)."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph
        self.keys: dict[str, str] = {}
        self.ops = nn.ModuleDict()
        for i, op in enumerate(graph.operators()):
            self.keys[op.name] = f"op{i}"
            self.ops[f"op{i}"] = _op_module(op)

    def forward(self, x):
        return lower(self.graph, x, TORCH_PRIMS, lambda op, t: self.ops[self.keys[op.name]](t))


def to_module(graph: Graph) -> torch.fx.GraphModule:
    """The graph as a ``torch.fx.GraphModule`` (eval mode) holding copies of its weights."""
    traced = torch.fx.symbolic_trace(GraphModule(graph).eval())
    traced.eval()
    return traced


def _set_threads(threads: int, inter_op: int | None) -> dict:
    """torch's two pools within the cell's budget (``ios_core.measurement.threads.split_budget``): the
    intra-op pool (OpenMP) the budget, the inter-op pool (``torch.jit.fork``, async work; its default is
    the machine's cores) 1 thread unless asked. The inter-op pool can be sized once per process, before
    any inter-op work: a size it did not take is said in ``inter_op_threads_note``."""
    _, inter, _ = split_budget(threads, inter_op)
    torch.set_num_threads(threads)
    info = {}
    if torch.get_num_interop_threads() != inter:
        try:
            torch.set_num_interop_threads(inter)
        except RuntimeError as e:  # may only be set once, before any inter-op work
            info["inter_op_threads_note"] = str(e).splitlines()[0]
    info.update(intra_op_threads=torch.get_num_threads(), inter_op_threads=torch.get_num_interop_threads())
    info["thread_pools"] = pool_record(intra_op=(info["intra_op_threads"], "torch.set_num_threads"),
                                       inter_op=(info["inter_op_threads"], "torch.set_num_interop_threads"))
    return info


def _cuda_reason() -> str | None:
    if torch.cuda.is_available():
        return None
    build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    return f"torch {torch.__version__} ({build}) sees no CUDA GPU"


def _cuda_setup(precision: str = "fp32", device: str = "cuda") -> dict:
    """fp32 strict on the GPU: no TF32 in matrix products or cuDNN convolutions. A precision the GPU
    has no kernels for (bf16 before compute capability 8.0, where PyTorch falls back to slow
    convolutions outside cuDNN: pytorch/pytorch#81139) is refused with one line, never run."""
    problem = arch_problem(precision, "".join(map(str, torch.cuda.get_device_capability(device))),
                           who="PyTorch's cuDNN bf16 convolutions")
    if problem:
        raise RuntimeError(f"torch: {problem}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return {"tf32": bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32),
            "cudnn_benchmark": True, "gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version()}


class TorchCudaTimer:
    """CUDA events on torch's current stream (``ios_core.measurement.measure.measure(timer=...)``)."""

    clock = "cuda-events"

    def __init__(self):
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return float(self._start.elapsed_time(self._end))


DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # the sweep's precision -> torch dtype


def _dtype(precision: str):
    import torch

    if precision not in DTYPES:
        raise ValueError(f"precision {precision!r}: torch builds {', '.join(DTYPES)}")
    return getattr(torch, DTYPES[precision])


def _computes_in(module) -> str:
    """What the module holds its weights in, read from its parameters (torch-compile's record: the
    kernels inductor generates are not inspected; ``precision_source`` says so)."""
    dtypes = {str(p.dtype).replace("torch.", "") for p in module.parameters()}
    if not dtypes:
        return "fp32"  # no parameter to read it from: said to be fp32, so a reduced-precision cell fails
    return _precision_of(dtypes)


def _precision_of(dtypes: set[str]) -> str:
    names = {v: k for k, v in DTYPES.items()}
    return names.get(next(iter(dtypes)), "mixed") if len(dtypes) == 1 else "mixed"


# the heavy operators whose operands say what a call computes in, and where their operands are
# (as dispatched: under inference_mode conv2d and linear arrive whole, else decomposed; one level is seen)
HEAVY_OPERANDS = {"conv2d": (0, 1), "convolution": (0, 1), "linear": (0, 1), "addmm": (1, 2), "mm": (0, 1),
                  "bmm": (0, 1), "matmul": (0, 1)}


def dispatched_dtypes(module, x) -> dict[str, int]:
    """One call of ``module(x)`` with every ATen operator it dispatches watched
    (``TorchDispatchMode``): per operand dtype (``"bfloat16"``, or ``"mixed"`` for a call whose two
    operands differ), how many convolutions and matrix products ran on it. What the kernels were
    given, not what the parameters were cast to: a module that casts back to float32 inside reads fp32."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: dict[str, int] = {}

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            where = HEAVY_OPERANDS.get(func.overloadpacket.__name__)
            if where is not None:
                dtypes = {str(args[i].dtype).replace("torch.", "") for i in where}
                key = dtypes.pop() if len(dtypes) == 1 else "mixed"
                seen[key] = seen.get(key, 0) + 1
            return func(*args, **(kwargs or {}))

    with torch.inference_mode(), Watch():
        module(x)
    return seen


def computes_in_dispatched(module, x) -> tuple[str, dict[str, int]]:
    """(the precision one call computed its convolutions and matrix products in, the counts of
    :func:`dispatched_dtypes`): fp32 when it ran none."""
    seen = dispatched_dtypes(module, x)
    return (_precision_of(set(seen)) if seen else "fp32"), seen


class TorchCompiled(Compiled):
    def __init__(self, fn, info, device: str = "cpu", dtype=None):
        super().__init__(info)
        self.fn = fn
        self.device = device
        self.cuda = device.startswith("cuda")
        self.dtype = dtype  # None: float32; else the input is cast to it in prepare (outside the timed call)

    def profile(self, x, warmup=3, repeat=10, trace=None):
        """``torch.profiler`` over ``repeat`` timed calls. Rows: the top-level events of a call
        (median per name over the calls): on
        an eager build with ``ranges=True`` one ``ios:<operator>`` range per IR operator (its input
        composition included, :func:`with_ranges`); compiled code: its regions (unmapped).
        ``trace``: where torch's own Chrome trace of the profiler's window is kept
        (``export_chrome_trace``, then moved there atomically)."""
        from torch.profiler import ProfilerActivity, profile, record_function

        from ios_core.measurement.gpu import time_calls

        prepared = self.prepare(x)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        with profile(activities=activities) as prof:
            # the first calls under a fresh profiler are slow (10-100x, its own start): warm up inside it
            for _ in range(max(warmup, PROFILER_WARMUP)):
                self.execute(prepared)
            self.sync()

            def call():
                with record_function(CALL):
                    return self.execute(prepared)

            # the clock the cell's unprofiled calls are timed with (on cuda the host clock after a device-wide
            # synchronize, not these CUDA events): the profiler's cost compares one clock with itself
            m = time_calls(call, self.sync, self.device, self.timer(), warmup=0, repeat=repeat)
        if trace is not None:
            import tempfile
            from pathlib import Path

            from ios_core.atomic import atomic_write_bytes

            with tempfile.TemporaryDirectory(prefix="ios-bench-torch-trace-") as tmp:
                prof.export_chrome_trace(str(Path(tmp) / "trace.json"))
                atomic_write_bytes(trace, (Path(tmp) / "trace.json").read_bytes())
        return torch_rows(prof.events(), device_time=self.cuda), m

    def prepare(self, x: np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        if self.cuda:
            t = t.to(self.device)
        if self.dtype is not None:
            t = t.to(self.dtype)
        if self.cuda:
            torch.cuda.synchronize()
        return t

    def execute(self, prepared):
        with torch.inference_mode():
            return self.fn(prepared)

    def finish(self, out) -> np.ndarray:
        return out.detach().float().cpu().contiguous().numpy().copy()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.current_stream().synchronize()

    def timer(self):
        return TorchCudaTimer() if self.cuda else None

    def own_stream(self):
        """A context in which this program's calls run on a CUDA stream of their own (torch's current
        stream is per thread): one per request in flight under a LoadGen scenario. On the CPU: none.
        Written against torch's documented API; not run on a GPU in this project."""
        import contextlib

        if not self.cuda:
            return contextlib.nullcontext()
        return torch.cuda.stream(torch.cuda.Stream(device=self.device))


PROFILER_WARMUP = 10
CALL = "ios-bench:call"  # the range around each timed call: the rows are its children


def torch_rows(events, device_time: bool = False) -> list[OpTime]:
    """Per name, the median over the timed calls (the ranges :data:`CALL`) of the CPU time (ms)
    of the events directly inside a call (torch's total: the events inside it included) and of
    their self CPU time (torch's self: what ran inside none of its child events, e.g. a range's
    Python and dispatch between its aten ops); a range ``ios:<operator>`` has that operator as its
    source, anything else none.

    ``device_time`` (a cuda build): the GPU time of the kernels each event and its children launched
    (torch's ``device_time_total``, self: ``self_device_time_total``) instead of the CPU time, which
    on a GPU is the launches' host time, not the operator's: a call whose events launched no kernel
    at all is refused (the profiler saw no device activity), never shown as host time."""
    total_of, self_of = (("device_time_total", "self_device_time_total") if device_time
                         else ("cpu_time_total", "self_cpu_time_total"))
    calls: list[dict[str, float]] = []
    selfs: list[dict[str, float]] = []
    for c in (e for e in events if e.name == CALL):
        call: dict[str, float] = {}
        own: dict[str, float] = {}
        for e in c.cpu_children:
            call[e.name] = call.get(e.name, 0.0) + getattr(e, total_of) / 1000
            own[e.name] = own.get(e.name, 0.0) + getattr(e, self_of) / 1000
        calls.append(call)
        selfs.append(own)
    if not calls:
        raise ProfilerMissing(f"torch.profiler recorded no '{CALL}' range")
    if device_time and not any(ms for call in calls for ms in call.values()):
        raise ProfilerMissing("torch.profiler recorded no GPU kernel inside the calls (CUPTI unavailable?): "
                              "their host time is not the operators' time on cuda")
    self_ms = median_per_name(selfs)
    return [OpTime(name, ms, (name[4:],) if name.startswith("ios:") else (),
                   "range" if name.startswith("ios:") else "op", self_ms=self_ms[name])
            for name, ms in median_per_name(calls).items()]


def with_ranges(module: torch.fx.GraphModule, graph: Graph) -> torch.fx.GraphModule:
    """``module`` (from :func:`to_module`) with a ``record_function`` range ``ios:<operator>``
    around each IR operator's code: the nodes traced from its module (``ops.op<i>``, by their
    ``nn_module_stack``) and the nodes composing its input just before them (slices, sums, the
    concat). Nodes after the last operator stay outside every range."""
    names = {f"ops.op{i}": op.name for i, op in enumerate(graph.operators())}
    g = module.graph
    owner: dict = {}
    pending: list = []
    for n in g.nodes:
        if n.op in ("placeholder", "output"):
            continue
        stack = n.meta.get("nn_module_stack") or {}
        path = next((p for p in stack if p in names), None)
        if path is None:
            pending.append(n)
            continue
        for p in (*pending, n):
            owner[p] = path
        pending = []
    runs: list[list] = []
    for n in g.nodes:
        if n in owner:
            if runs and runs[-1][0] == owner[n]:
                runs[-1][2] = n
            else:
                runs.append([owner[n], n, n])
    for path, first, last in runs:
        with g.inserting_before(first):
            handle = g.call_function(torch.ops.profiler._record_function_enter_new, (f"ios:{names[path]}", None))
        with g.inserting_after(last):
            g.call_function(torch.ops.profiler._record_function_exit._RecordFunction, (handle,))
    g.lint()
    module.recompile()
    return module


class TorchEager(Adapter):
    def profile_options(self) -> dict:
        return {"ranges": True}

    def available(self, device: str = "cpu") -> str | None:
        reason = super().available(device)
        if reason is None and device.startswith("cuda"):
            reason = _cuda_reason()
        return reason

    def _build(self, graph, batch_size, device, threads, inter_op_threads=None, ranges=False, precision="fp32",
               calibration_samples=None, cache_dir=None, quantized_engine=None, calibration_data=None):
        """``ranges``: one ``record_function`` range per IR operator (``ios-bench profile``);
        ``precision`` bf16/fp16: the model and its input in that dtype, as PyTorch users run it;
        int8 (CPU): post-training static quantization in FX graph mode (:func:`quantized_module`),
        calibrated on ``calibration_samples`` seeded inputs, recorded as int8 only where the
        converted module's convolutions are quantized kernels; ``quantized_engine`` (int8): PyTorch's
        quantized engine and its default qconfig, ``x86`` unless given (``onednn``, ``fbgemm``)."""
        import torch

        n = resolve_threads(threads)
        info = {"threads": n, **_set_threads(n, inter_op_threads), "framework_version": torch.__version__}
        t0 = time.perf_counter()
        module = to_module(graph)
        if precision == "int8":
            module, calibration = quantized_module(module, graph, batch_size, calibration_samples, cache_dir,
                                                   quantized_engine, calibration_data)
            info.update(int8_info(module, calibration))
            if ranges:  # convert_fx's nodes keep no nn_module_stack to place the ranges by
                info["profiling"] = "torch.profiler, the converted module's ops (no per-operator ranges at int8)"
            info["convert_seconds"] = time.perf_counter() - t0
            return TorchCompiled(module, info, device, None)
        if ranges:
            module = with_ranges(module, graph)
            info["profiling"] = "one record_function range per IR operator"
        if device.startswith("cuda"):
            info.update(_cuda_setup(precision, device))
            module = module.to(device)
        dtype = _dtype(precision)
        module = module.to(dtype)
        x = torch.zeros((batch_size, *graph.input_shape), dtype=dtype, device=device)
        info["precision"], info["heavy_op_dtypes"] = computes_in_dispatched(module, x)
        info["precision_source"] = ("read back: the operand dtypes of the convolutions and matrix products one "
                                    "call dispatched (TorchDispatchMode)")
        info["convert_seconds"] = time.perf_counter() - t0
        return TorchCompiled(module, info, device, None if precision == "fp32" else dtype)


class TorchCompile(Adapter):
    """``torch.compile`` with the inductor backend (``mode`` and ``dynamic`` options passed on)."""

    def available(self, device: str = "cpu") -> str | None:
        reason = super().available(device)
        if reason is not None:
            return reason
        if device.startswith("cuda"):
            import importlib.util

            reason = _cuda_reason()
            if reason is None and importlib.util.find_spec("triton") is None:
                reason = "torch.compile's inductor backend needs Triton on CUDA (not installed)"
            return reason
        cxx = os.environ.get("CXX") or next((c for c in ("g++", "c++", "clang++") if shutil.which(c)), None)
        if cxx is None or shutil.which(cxx) is None:
            return "torch.compile's inductor backend needs a C++ compiler on CPU (none found; set CXX)"
        return None

    def _build(self, graph, batch_size, device, threads, inter_op_threads=None, mode=None, backend="inductor",
               dynamic=False, cache_dir=None, precision="fp32"):
        """``cache_dir``: inductor's caches (its FX graph and AOT autograd caches, the C++ and Triton
        kernels it compiled) kept there across rounds (``adapters.build_cache``: checked before
        the build, rebuilt when foreign)."""
        import torch

        n = resolve_threads(threads)
        version, gpu = torch.__version__, None
        if device.startswith("cuda"):  # a GPU's kernels: keyed by the GPU and sealed with Triton's version too
            version = f"{torch.__version__} triton {_triton_version()}"
            gpu = torch.cuda.get_device_name(torch.device(device))
        # one cache for torch-compile and torch-compile-cudagraphs: inductor keys its entries itself
        cache = open_cache(cache_dir, "torch-inductor", version, gpu)
        if cache is not None:  # read by inductor when it compiles
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache.dir)
            os.environ["TRITON_CACHE_DIR"] = str(cache.dir / "triton")
            os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "1"
            os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "1"
        # Set before compiling: inductor's generated C++ bakes in the OpenMP thread count.
        info = {"threads": n, **_set_threads(n, inter_op_threads), "framework_version": torch.__version__,
                "backend": backend, "mode": mode or "default"}
        t0 = time.perf_counter()
        module = to_module(graph)
        if device.startswith("cuda"):
            info.update(_cuda_setup(precision, device))
            module = module.to(device)
        dtype = _dtype(precision)  # bf16/fp16: the model and its input in that dtype
        module = module.to(dtype)
        info["precision"] = _computes_in(module)
        info["precision_source"] = ("requested, not read back: the dtype of the module's parameters after "
                                    ".to(dtype); the kernels inductor generates are not read")
        isa = _trust_vec_isa(cache) if not device.startswith("cuda") else None
        fn = torch.compile(module, backend=backend, mode=mode, dynamic=dynamic)
        x = torch.zeros((batch_size, *graph.input_shape), dtype=dtype, device=device)
        with torch.inference_mode():
            fn(x)  # compiles
            t1 = time.perf_counter()
            fn(x)  # a second call catches any recompilation (guards) before timing starts
        info["compile_seconds"] = t1 - t0
        info["second_call_seconds"] = time.perf_counter() - t1
        if cache is not None:
            if isa:
                info["vec_isa_probes"] = isa
            cache.seal()
            info.update(cache.info())
        return TorchCompiled(fn, info, device, None if precision == "fp32" else dtype)


def _triton_version() -> str:
    try:
        from importlib.metadata import version

        return version("triton")
    except Exception:  # noqa: BLE001 - not installed (TorchCompile.available says so on cuda)
        return "none"


# Inductor on CPU picks the vector ISA its C++ is compiled for by probing every ISA the processor
# claims: a test library built and loaded in a child interpreter each (about 0.9 s of every round
# on a 2-core machine). The run's first build probes them (as inductor would) and records which
# passed in the run's cache; where every candidate passed, each build of the run - the first too,
# so that inductor's cache key (which holds its config) is the same in every round - tells
# inductor the ISAs are fine (``config.cpp.vec_isa_ok``), and the later rounds skip the probes,
# which would pick the same ISA. Inductor's private module is read defensively: anything
# unexpected and the probes run as usual.
VEC_ISA_FILE = "vec_isa.json"


def _vec_isa_candidates() -> list[str] | None:
    """The vector ISAs inductor would probe on this processor (by its flags), or None."""
    try:
        import platform

        from torch._inductor import cpu_vec_isa as v

        if platform.machine() not in ("x86_64", "AMD64"):
            return None
        flags = v.x86_isa_checker()
        return [str(i) for i in v.supported_vec_isa_list if all(f in flags for f in str(i).split())]
    except Exception:  # noqa: BLE001 - another torch: probe as usual
        return None


def _trust_vec_isa(cache) -> str | None:
    """Before a build with a run's cache: "probed" (this build probed the ISAs and recorded them),
    "skipped" (an earlier round's record is used) or None (inductor probes as usual)."""
    if cache is None:
        return None
    try:
        import json

        from torch._inductor import config
        from torch._inductor import cpu_vec_isa as v

        candidates = _vec_isa_candidates()
        if not candidates:
            return None
        path = cache.dir / VEC_ISA_FILE
        record = json.loads(path.read_text()) if cache.state == "warm" and path.exists() else None
        if record is None or record.get("candidates") != candidates:
            record = {"candidates": candidates, "passed": [str(i) for i in v.valid_vec_isa_list()]}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record))  # kept by the cache's manifest (sealed after the build)
            how = "probed"
        else:
            how = "skipped"
        if record.get("passed") != candidates:
            return None if how == "skipped" else how
        config.cpp.vec_isa_ok = True
        return how
    except Exception:  # noqa: BLE001 - another torch, an unreadable record: probe as usual
        return None


BF16_CPU = "model and input in torch.bfloat16 (module.to(torch.bfloat16)): oneDNN's bf16 kernels on AVX512_BF16"
INT8_CPU = ("post-training static quantization in FX graph mode (torch.ao.quantization.quantize_fx prepare_fx/"
            "convert_fx, get_default_qconfig_mapping('x86'): u8 activations, s8 weights per channel, fbgemm/oneDNN "
            "kernels), calibrated on 16 seeded inputs; int8 where the converted module's convolutions are quantized")
# torch.compile over that converted module, tried (torch 2.13.0+cpu): dynamo cannot trace quantized tensors (fake
# tensor propagation: "quantized nyi in meta tensors"; the packed weights, a ScriptObject, cannot be proxied), so it
# breaks the graph at every quantized op and runs them eagerly: the torch adapter's int8 under another label.
COMPILE_INT8_NO = ("no: torch.compile cannot trace FX-quantized modules (quantized tensors are not implemented for "
                   "its fake tensors: every quantized op is a graph break, run eagerly); inductor's int8 is PT2E "
                   "quantization (prepare_pt2e/convert_pt2e), which lives in torchao, not installed")
GPU_HALF = "model and input in torch.{} on the GPU (written for it, not yet run on a GPU in this project)"
HALF_TABLE = {"cpu": {"bf16": BF16_CPU},
              "cuda": {"fp16": GPU_HALF.format("float16"), "bf16": GPU_HALF.format("bfloat16")}}

EAGER = TorchEager(
    name="torch",
    description="PyTorch eager (nn.Module traced by torch.fx, inference_mode), NCHW; on cuda: cuDNN, TF32 off",
    requires=("torch",),
    devices=("cpu", "cuda"),
    tolerance=1e-4,
    mode="eager (inference_mode)",
    precision_table={"cpu": {**HALF_TABLE["cpu"], "int8": INT8_CPU}, "cuda": HALF_TABLE["cuda"]},
)

COMPILE = TorchCompile(
    name="torch-compile",
    description="torch.compile, inductor backend (C++ on CPU, Triton on cuda); compile time recorded apart",
    requires=("torch",),
    devices=("cpu", "cuda"),
    tolerance=1e-3,
    mode="torch.compile (inductor)",
    precision_table={"cpu": {**HALF_TABLE["cpu"], "int8": COMPILE_INT8_NO}, "cuda": HALF_TABLE["cuda"]},
)

COMPILE_CUDAGRAPHS = TorchCompile(
    name="torch-compile-cudagraphs",
    description="torch.compile(mode='reduce-overhead'): inductor with CUDA graphs (GPU only), TF32 off",
    requires=("torch",),
    devices=("cuda",),
    tolerance=1e-3,
    options={"mode": "reduce-overhead"},
    precision_table={"cuda": HALF_TABLE["cuda"]},
    concurrency=None,
    concurrency_note="its CUDA graphs replay into static buffers captured once per process: requests in flight "
                     "would overwrite each other's input and output",
)
