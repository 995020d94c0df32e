"""TensorFlow adapters: ``tensorflow`` (a ``tf.function`` graph) and ``tensorflow-xla``
(the same function with ``jit_compile=True``).

The graph is written in NHWC, TensorFlow's preferred CPU layout; the NCHW input is
transposed in ``prepare`` and the output back in ``finish``, both outside the timed region.
Weights are converted once (OIHW -> HWIO, depthwise filters -> (kh, kw, C, multiplier)).
Padding is always explicit, never ``'SAME'``: TensorFlow's ``'SAME'`` pads asymmetrically
and its average pool excludes padding from the count, while the IR pads symmetrically and
counts the padding (cuDNN INCLUDE_PADDING). Pools therefore pad with ``tf.pad`` (zeros for
average, -inf for max) then pool ``'VALID'`` (XLA does not take explicit pool padding).

General tensors (vision transformers, ConvNeXt: ``ios_core/ir/tensor_nodes.py``) are lowered by
``adapters.tensorflow_tensors``, whose one layout rule keeps feature maps NHWC and general tensors in
the IR's axis order, converting a value where an operator reads it in the other; such a graph gives
its output in the IR's order. A graph without them is traced exactly as before.

TensorFlow is imported only when one of these adapters is checked or built.

On ``device="cuda"`` the function is traced and run under ``/GPU:0`` with TF32 switched off
(``tf.config.experimental.enable_tensor_float_32_execution(False)``, recorded as
``info["tf32"]``); the input is placed on the GPU outside the timed call and each sample ends
with ``tf.test.experimental.sync_devices()``. Written against TensorFlow's documented API;
not run on a GPU in this project.

``precision="bf16"`` (a sweep's bf16 cell, CPU): the weights and the input in ``tf.bfloat16`` and
every op of the function in bf16, what Keras's ``mixed_bfloat16`` policy computes (it keeps f32
variables and casts them to bf16 at each use; the weights here are constants, so they are cast once,
at build); the output comes back as float32. What the program computes in is read back, never
assumed (:func:`computes_in`): the ``T`` of the traced graph's convolutions and matrix products
(TensorFlow runs the kernel registered for that type: oneDNN's bf16 kernels on AVX512_BF16, an error
where none is registered, never a quiet f32) or, with XLA, the element type of the compiled HLO's
(``adapters.jax.hlo_compute_precision``). XLA's CPU backend computes bf16 convolutions in f32, so
``tensorflow-xla`` declares bf16 "no" on the CPU.

**Frozen weights** (``frozen``, the ``tensorflow`` adapter's CPU builds without XLA, on by default): the graph
is a frozen one, as TensorFlow users deploy a graph for inference (what ``convert_variables_to_constants_v2``
or TF 1's ``freeze_graph`` give): every weight a ``Const`` node of the traced graph (``to_function(frozen=True)``
writes them there while tracing, which costs less than converting a traced function afterwards) instead of a
tensor the function captures (a placeholder fed at each call, as a Keras model's or SavedModel's variables
are). TensorFlow's oneDNN kernels
keep a reordered copy of a filter only when it is a constant (the ``is_filter_const`` attribute of its
``_MklNative*Conv2D``); a captured filter is reordered into oneDNN's blocked layout at every call. At bf16
every 1x1 convolution's filter needs that reorder (the VNNI pair-interleaved layout), at fp32 the depthwise
ones (randwire, where this made bf16 slower than fp32:
docs/results/precision/tensorflow-bf16-randwire-2026-11-27.md). ``frozen=false`` keeps the captured
weights (what a Keras model or SavedModel with variables runs); cuda builds keep them unless asked; the ``tflite``
framework's builds (the TFLite converter, which freezes the function itself) ignore it.

``precision="int8"``: **no**, with its reason (issue 57). TensorFlow's graph runtime has no int8
kernels here; what TensorFlow users deploy for int8 is TensorFlow Lite, another engine, which is the
``tflite`` framework's (``adapters.tflite``: fp32 and int8 in the TFLite interpreter), so that an int8
speedup compares one engine with itself. ``to_function(tflite=True)`` writes the function that framework
converts.
"""

from __future__ import annotations

import functools
import os
import re
import time

import numpy as np

from ios_core.ir import ActivationMap, Graph, Node, OpVisitor
from ios_core.lowering import Primitives, lower
from ios_core.measurement.threads import pool_record, resolve_threads, split_budget

from . import tensorflow_tensors as laid
from .base import Adapter, Compiled, OpTime, ProfilerMissing, median_per_name, per_call_ms, write_chrome_trace
from .build_cache import open_cache
from .imports import absent


def _tf():
    with _without_jax():
        import tensorflow as tf

    return tf


def _without_jax():
    """TensorFlow's ``tf.lite`` imports JAX where it is installed (a framework a TensorFlow cell
    does not run), and its ``__init__`` imports Keras (an API this adapter does not use): about 1.1 s
    of every TensorFlow round on a 2-core machine (3.1 -> 1.9 s to import TensorFlow and run one
    ``tf.function``). Both are left out while TensorFlow is first imported (``adapters.imports``);
    ``tf.keras`` still loads Keras on first use."""
    return absent("jax", "keras", "tf_keras", unless="tensorflow")


# IR activation kind (ios_core.ir.activations) -> (tf, alpha, beta) -> its function of one tensor
TF_ACTIVATIONS: ActivationMap = ActivationMap("tensorflow", {
    "identity": lambda tf, a, b: tf.identity,
    "relu": lambda tf, a, b: tf.nn.relu,
    "sigmoid": lambda tf, a, b: tf.math.sigmoid,
    "tanh": lambda tf, a, b: tf.math.tanh,
    "relu6": lambda tf, a, b: tf.nn.relu6,
    "hardswish": lambda tf, a, b: lambda x: x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0),
    "silu": lambda tf, a, b: tf.nn.silu,
    "gelu": lambda tf, a, b: lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda tf, a, b: lambda x: tf.nn.gelu(x, approximate=True),
    "leaky_relu": lambda tf, a, b: lambda x: tf.nn.leaky_relu(x, a),
    "hardsigmoid": lambda tf, a, b: lambda x: tf.clip_by_value(x * a + b, 0.0, 1.0),
    "clip": lambda tf, a, b: lambda x: tf.clip_by_value(x, a, b),
})


def _act(tf, name: str, alpha: float = 0.0, beta: float = 0.0):
    return TF_ACTIVATIONS[name](tf, alpha, beta)


def _pads_nhwc(node) -> list[list[int]]:
    top, left, bottom, right = node.pads
    return [[0, 0], [top, bottom], [left, right], [0, 0]]


def _mirror_pads(node) -> list[list[int]]:
    """A max pool's padding done by mirroring the border (``SYMMETRIC``: the padded row -j copies row
    j-1): every window that holds a mirrored value also holds the value it copies, so the maximum is
    the one padding with -inf gives, while a side pads at most half the window (PyTorch's own limit).
    Beyond that, one line."""
    top, left, bottom, right = node.pads
    kh, kw = node.kernel
    if 2 * max(top, bottom) > kh or 2 * max(left, right) > kw:
        raise ValueError(f"max pool {node.name}: padding {tuple(node.pads)} is more than half its {kh}x{kw} window; "
                         "the tflite build pads a max pool by mirroring (int8 has no -inf), exact only up to half")
    return _pads_nhwc(node)


def _flatten_nchw(tf, x, shape):
    """Flatten an NHWC tensor in the IR's (C, H, W) order (what ``torch.flatten`` on NCHW gives)."""
    c, h, w = shape
    if h * w > 1:
        x = tf.transpose(x, [0, 3, 1, 2])
    return tf.reshape(x, [-1, c * h * w])


class _Emitter(laid.TensorOps, OpVisitor):
    """Builds each operator's TensorFlow ops (``emitter(op, x)``: feature maps NHWC, general tensors
    in the IR's order, ``adapters.tensorflow_tensors``); weights are converted once, at construction."""

    ACTIVATIONS = TF_ACTIVATIONS

    def __init__(self, tf, graph: Graph, dtype=None, tflite: bool = False, frozen: bool = False):
        self.tf = tf
        self.dtype = dtype or tf.float32  # every weight and constant (bf16 for a bf16 build)
        self.tflite = tflite  # max pools pad by mirroring, not with -inf (the tflite framework's build: to_function)
        self.frozen = frozen  # weights as numpy arrays of dtype: Const nodes of the graph traced with them
        self.params: dict[str, tuple] = {}
        self.check_handles(graph.operators())
        for op in graph.operators():
            make = getattr(self, f"_params_{op.TYPE}", None)  # the types with constants of their own
            params = make(op) if make is not None else None
            if params is not None:
                self.params[op.name] = params

    def _const(self, array):
        if self.frozen:  # an op given a numpy array adds it to the graph being traced as a Const
            return np.ascontiguousarray(np.asarray(array, np.float32).astype(self.dtype.as_numpy_dtype))
        return self.tf.constant(np.asarray(array, np.float32), dtype=self.dtype)  # captured by the function

    def _params_linear(self, op):
        return self._const(np.ascontiguousarray(op.weight.T)), self._const(op.bias)

    def _params_resize(self, op):
        if op.mode == "bilinear":
            return self._const(op.interpolation(0)), self._const(op.interpolation(1))
        return None

    def _params_affine(self, op):
        return self._const(op.weight), self._const(op.bias)

    def _params_pool(self, op):
        if op.pool_type == "avg" and not op.count_include_pad:
            # window size / input positions in the window: rescales an average that counted padding
            scale = float(op.kernel[0] * op.kernel[1]) / op.input_counts()
            return (self._const(scale[None, :, :, None]),)
        return None

    def _params_conv(self, op):
        cin = op.input_shape[0]
        w = op.weight  # (O, I/groups, kh, kw)
        if op.groups > 1 and op.groups == cin:  # depthwise: output channel o reads input o // mult
            mult = op.out_channels // cin
            kernel = w.reshape(cin, mult, *op.kernel).transpose(2, 3, 0, 1)
            kind = "depthwise"
        elif op.groups > 1 and not _onednn():
            # TensorFlow's own (Eigen) CPU kernels have no grouped convolution ("Fused conv
            # implementation does not support grouped convolutions"); only its oneDNN build does.
            # Without oneDNN: one convolution per group on its channel slice, concatenated.
            g, per_out = op.groups, op.out_channels // op.groups
            kernels = [np.ascontiguousarray(w[i * per_out:(i + 1) * per_out].transpose(2, 3, 1, 0)) for i in range(g)]
            return "grouped", [self._const(k) for k in kernels], self._const(op.bias)
        else:
            kernel = w.transpose(2, 3, 1, 0)  # HWIO; grouped convs split I and O in torch's order
            kind = "conv"
        return kind, self._const(np.ascontiguousarray(kernel)), self._const(op.bias)

    def __call__(self, op: Node, x):
        return self.visit(op, x)

    def visit_conv(self, op: Node, x):
        tf = self.tf
        conv_kind, kernel, bias = self.params[op.name]
        padding = "VALID" if not any(op.pads) else _pads_nhwc(op)
        if conv_kind == "depthwise":
            # Explicit padding on depthwise convs crashes grappler's shape inference (TF 2.21
            # aborts the process), so pad first and convolve 'VALID'.
            if padding != "VALID":
                x = tf.pad(x, padding)
            y = tf.nn.depthwise_conv2d(x, kernel, [1, *op.stride, 1], "VALID", dilations=list(op.dilation))
        elif conv_kind == "grouped":
            parts = tf.split(x, len(kernel), axis=3)
            y = tf.concat([tf.nn.conv2d(part, k, list(op.stride), padding, dilations=list(op.dilation))
                           for part, k in zip(parts, kernel)], axis=3)
        else:
            y = tf.nn.conv2d(x, kernel, list(op.stride), padding, dilations=list(op.dilation))
        return _act(tf, op.act)(tf.nn.bias_add(y, bias))

    def visit_pool(self, op: Node, x):
        tf = self.tf
        if op.pool_type == "global_avg":
            return tf.reduce_mean(x, axis=[1, 2], keepdims=True)
        if op.pool_type == "global_max":
            return tf.reduce_max(x, axis=[1, 2], keepdims=True)
        if any(op.pads) and op.pool_type == "max" and self.tflite:
            x = tf.pad(x, _mirror_pads(op), mode="SYMMETRIC")
        elif any(op.pads):
            fill = -np.inf if op.pool_type == "max" else 0.0
            x = tf.pad(x, _pads_nhwc(op), constant_values=fill)
        pool = tf.nn.max_pool2d if op.pool_type == "max" else tf.nn.avg_pool2d
        y = pool(x, list(op.kernel), list(op.stride), "VALID")
        if op.pool_type == "avg" and not op.count_include_pad:
            y = y * self.params[op.name][0]
        return y

    def visit_identity(self, op: Node, x):
        return x

    def visit_relu(self, op: Node, x):
        tf = self.tf
        return tf.nn.relu(x)

    def visit_activation(self, op: Node, x):
        tf = self.tf
        return _act(tf, op.act_type, op.alpha, op.beta)(x)

    def visit_affine(self, op: Node, x):
        tf = self.tf
        scale, shift = self.params[op.name]
        return _act(tf, op.act)(x * scale + shift)

    def visit_shuffle(self, op: Node, x):
        tf = self.tf
        c, h, w = op.input_shape
        g = op.groups
        y = tf.transpose(tf.reshape(x, [-1, h, w, g, c // g]), [0, 1, 2, 4, 3])
        return tf.reshape(y, [-1, h, w, c])

    def visit_resize(self, op: Node, x):
        tf = self.tf
        if op.mode == "nearest":  # source pixel floor(i * in / out): no half-pixel centers
            return tf.compat.v1.image.resize_nearest_neighbor(x, list(op.size), align_corners=False,
                                                              half_pixel_centers=False)
        # as two small matrix products: XLA's ResizeBilinear with half-pixel centers does not
        # match TensorFlow's own kernel (nor PyTorch's) when upsampling (TF 2.21)
        rows, cols = self.params[op.name]
        return tf.einsum("jw,nhwc->nhjc", cols, tf.einsum("ih,nhwc->niwc", rows, x))

    def visit_flatten(self, op: Node, x):
        tf = self.tf
        return tf.reshape(_flatten_nchw(tf, x, op.input_shape), [-1, 1, 1, op.output_shape[0]])

    def visit_linear(self, op: Node, x):
        tf = self.tf
        weight_t, bias = self.params[op.name]
        y = _act(tf, op.act)(tf.matmul(_flatten_nchw(tf, x, op.input_shape), weight_t) + bias)
        return tf.reshape(y, [-1, 1, 1, op.out_features])


def to_function(graph: Graph, batch_size: int | None = None, jit_compile: bool = False, scopes: bool = False,
                dtype=None, tflite: bool = False, frozen: bool = False):
    """The graph as a ``tf.function`` on NHWC input of ``dtype`` (float32 unless given; bf16: weights
    and every op in bf16), batch ``None`` = any batch. ``tflite``: written for the TFLite
    converter (the ``tflite`` framework, ``adapters.tflite``; one function for its fp32 and int8), so that
    int8 quantizes every op: max pools pad by mirroring the border, not with -inf
    (:func:`_mirror_pads`), and a sum of several terms is a chain of ``tf.add`` (what Keras's ``Add``
    layer gives), not ``tf.add_n``, which the converter leaves in float between a dequantize and a
    quantize (and outside XNNPACK: resnet50 ran as 34 partitions, 2.7x slower). ``scopes``:
    each IR operator's ops (its input composition included) under a name scope ``ios_op<i>``
    (:func:`operator_scopes`), which TensorFlow's profiler reports in its op names. ``frozen``: the
    weights are ``Const`` nodes of the traced graph (a frozen graph; oneDNN reorders a constant filter
    once), not eager tensors the function captures."""
    tf = _tf()
    prims = Primitives(
        slice_channels=lambda t, b, e: t[:, :, :, b:e],
        add=lambda ts: tf.add_n(ts) if len({tuple(t.shape[1:]) for t in ts}) == 1 and not tflite
        else functools.reduce(tf.add, ts),  # a 1x1 value broadcast over a feature map, or for TFLite
        mul=lambda ts: functools.reduce(tf.multiply, ts),
        concat=lambda ts: tf.concat(ts, axis=3),
    )
    dtype = dtype or tf.float32
    emit = _Emitter(tf, graph, dtype, tflite, frozen)
    tensors = laid.has_tensors(graph)  # general tensors: values carry their layout (adapters.tensorflow_tensors)
    if tensors:
        prims, emit = laid.laid_primitives(tf, prims), laid.laid_emit(tf, emit)
    if scopes:  # the walk composes operator i's input, then emits it, in graph.operators() order
        names = list(operator_scopes(graph))
        at = {"i": 0}

        def scoped(fn):
            def run(*args):
                with tf.name_scope(names[at["i"]]):
                    return fn(*args)
            return run

        prims = Primitives(scoped(prims.slice_channels), scoped(prims.add), scoped(prims.mul), scoped(prims.concat))
        plain_emit = emit

        def emit(op, x):
            out = scoped(plain_emit)(op, x)
            at["i"] += 1
            return out
    c, h, w = graph.input_shape

    def forward(x):
        if scopes:
            at["i"] = 0
        if tensors:
            return laid.output_in_ir_order(tf, lower(graph, laid.Laid(x, laid.NHWC), prims, emit))
        return lower(graph, x, prims, emit)

    spec = tf.TensorSpec((batch_size, h, w, c), dtype, name="input")
    return tf.function(forward, input_signature=[spec], jit_compile=jit_compile, reduce_retracing=True)


def operator_scopes(graph: Graph) -> dict[str, str]:
    """The name scope of each IR operator under ``to_function(scopes=True)`` -> its name (scopes
    are indices: an IR name may hold characters a TensorFlow scope may not)."""
    return {f"ios_op{i}": op.name for i, op in enumerate(graph.operators())}


def _set_threads(tf, threads: int | None, inter_op: int | None) -> dict:
    """Both of TensorFlow's pools within the cell's budget (``ios_core.measurement.threads.split_budget``):
    the inter-op pool (which runs a graph's ready operators concurrently; TensorFlow's default sizes it
    from the machine's cores) gets 1 thread unless several requests are in flight (then one per
    request), the intra-op pool the budget. Both are process-wide and settable only before TensorFlow's
    runtime starts: a value it did not take is said in ``threads_note``; ``thread_pools`` records what
    each pool holds, read back."""
    # several requests in flight (in_flight_options): one inter-op thread per request, each graph on the
    # shared intra-op pool of the per-request share, as TensorFlow's users serve concurrent calls
    inter = int(inter_op) if inter_op is not None else split_budget(threads)[1]
    info: dict = {}
    notes = []
    for what, value, setter, getter in (
        ("intra_op_threads", resolve_threads(threads), tf.config.threading.set_intra_op_parallelism_threads,
         tf.config.threading.get_intra_op_parallelism_threads),
        ("inter_op_threads", inter, tf.config.threading.set_inter_op_parallelism_threads,
         tf.config.threading.get_inter_op_parallelism_threads),
    ):
        if getter() != value:
            try:
                setter(int(value))
            except RuntimeError as e:  # only settable before TensorFlow's runtime starts
                notes.append(f"{what}={value} not applied: {str(e).splitlines()[0]}")
        info[what] = getter() or "default"
    if notes:
        info["threads_note"] = "; ".join(notes)
    info["thread_pools"] = pool_record(
        intra_op=(info["intra_op_threads"], "tf.config.threading.set_intra_op_parallelism_threads"),
        inter_op=(info["inter_op_threads"], "tf.config.threading.set_inter_op_parallelism_threads"))
    return info


def _tf_device(device: str) -> str:
    return "/GPU:0" if device.startswith("cuda") else "/CPU:0"


DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # the sweep's precision -> tf dtype
_COMPUTE_OPS = ("Conv2D", "DepthwiseConv2dNative", "MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum")


def computes_in(fn, x, jit_compile: bool) -> str:
    """What the built function computes its convolutions and matrix products in (the engine's view):
    with XLA the compiled HLO's element types (``adapters.jax.hlo_compute_precision``, after XLA's
    passes), otherwise the ``T`` of those ops in the traced graph, the kernel TensorFlow runs."""
    from .jax import hlo_compute_precision

    if jit_compile:
        return hlo_compute_precision(fn.experimental_get_compiler_ir(x)(stage="optimized_hlo"))
    names = {v: k for k, v in DTYPES.items()}
    graph = fn.get_concrete_function(x).graph
    seen = {names.get(op.get_attr("T").name, op.get_attr("T").name)
            for op in graph.get_operations() if op.type in _COMPUTE_OPS}
    if not seen:
        return "fp32"  # nothing to show a reduced precision: a reduced-precision cell fails
    return seen.pop() if len(seen) == 1 else f"mixed ({', '.join(sorted(seen))})"


class TFCompiled(Compiled):
    def __init__(self, fn, info, device: str = "cpu", scopes: dict[str, str] | None = None, dtype=None,
                 nhwc_out: bool = True):
        super().__init__(info)
        self.fn = fn
        self.nhwc_out = nhwc_out  # the output is NHWC (a CNN graph), not in the IR's order (general tensors)
        self.dtype = dtype  # the input's, when not float32 (a bf16 build): cast in prepare
        self.scopes = dict(scopes or {})  # name scope -> IR operator (a profiling build)
        self.tf = _tf()
        self.where = _tf_device(device)  # CPU even where TensorFlow sees a GPU, unless asked for cuda
        self.gpu = device.startswith("cuda")

    def prepare(self, x: np.ndarray):
        tf = _tf()
        with tf.device(self.where):
            t = tf.constant(np.ascontiguousarray(np.asarray(x, np.float32).transpose(0, 2, 3, 1)))
            t = tf.identity(t if self.dtype is None else tf.cast(t, self.dtype))
        self.sync()
        return t

    def execute(self, prepared):
        with self.tf.device(self.where):
            return self.fn(prepared)

    def finish(self, out) -> np.ndarray:
        out = np.asarray(out.numpy(), np.float32)
        return np.ascontiguousarray(out.transpose(0, 3, 1, 2) if self.nhwc_out else out)

    def sync(self) -> None:
        if self.gpu:
            self.tf.test.experimental.sync_devices()

    def profile(self, x, warmup=3, repeat=10, trace=None):
        """TensorFlow's profiler (host tracer): the executor's op events of each timed call (a
        ``Trace`` range ``ios-bench:call``), median per op over the calls; an op under a scope
        ``ios_op<i>`` (build option ``scopes=True``) has that operator as its source. XLA runs a
        compiled cluster with no op events: its function's time is one unmapped row. ``trace``: the
        trace's events (every plane and thread) kept there as a Chrome trace (:func:`xplane_events`)."""
        import glob
        import tempfile

        from ios_core.measurement.gpu import time_calls

        tf = self.tf
        prepared = self.prepare(x)
        for _ in range(warmup):
            self.execute(prepared)
        self.sync()

        def call():
            with tf.profiler.experimental.Trace(CALL):
                out = self.execute(prepared)
                self.sync()  # on a GPU the call's kernels end inside its range, where its rows are read
            return out

        with tempfile.TemporaryDirectory(prefix="ios-bench-tf-profile-") as logdir:
            options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=2, python_tracer_level=0,
                                                                device_tracer_level=1 if self.gpu else 0)
            tf.profiler.experimental.start(logdir, options=options)
            try:
                # the clock of the cell's unprofiled calls: the profiler's cost compares one clock with itself
                m = time_calls(call, self.sync, "cuda" if self.gpu else "cpu", warmup=0, repeat=repeat)
            finally:
                tf.profiler.experimental.stop()
            files = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
            if not files:
                raise ProfilerMissing("TensorFlow's profiler wrote no trace")
            data = open(files[0], "rb").read()
        if trace is not None:
            write_chrome_trace(trace, xplane_events(data))
        return xplane_rows(data, self.scopes, kernels=self.gpu), m


CALL = "ios-bench:call"
_EXECUTOR = ("ThreadpoolListener", "ExecutorState", "ExecutorDoneCallback")  # scheduling, not ops


def xplane_events(data: bytes):
    """Every timed event of a TensorFlow trace (an ``XSpace``): ``(name, plane, line, start_us,
    duration_us)``, for :func:`adapters.base.write_chrome_trace`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(data)
    for plane in space.planes:
        for line in plane.lines:
            for e in line.events:
                start_ps = line.timestamp_ns * 1000 + e.offset_ps
                yield (plane.event_metadata[e.metadata_id].name, plane.name, line.name or line.id,
                       start_ps / 1e6, e.duration_ps / 1e6)


def xplane_rows(data: bytes, scopes: dict[str, str], kernels: bool = False) -> list[OpTime]:
    """Per op (``name:type`` events of the host plane's compute lines), the median time (ms) over
    the :data:`CALL` ranges they fall in; its source is the IR operator of its scope.

    ``kernels`` (a GPU build): the op events of the host plane are its launches there, not its
    time: the rows are the GPU planes' kernels instead (:func:`kernel_ops`), each op's kernels'
    wall time counted once per call."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(data)
    host = next((p for p in space.planes if p.name == "/host:CPU"), None)
    if host is None:
        raise ProfilerMissing("TensorFlow's trace has no host plane")

    def events(line):
        for e in line.events:
            start = line.timestamp_ns * 1000 + e.offset_ps
            yield host.event_metadata[e.metadata_id].name, start, start + e.duration_ps

    windows = sorted((s, t) for line in host.lines for name, s, t in events(line) if name == CALL)
    if not windows:
        raise ProfilerMissing(f"TensorFlow's trace has no '{CALL}' range")
    if kernels:
        ops, kinds = kernel_ops(space)
        if not ops:
            raise ProfilerMissing("TensorFlow's trace has no GPU kernel carrying its op's annotation: the host "
                                  "plane's op events are launches, not the ops' time on a GPU")
        return _op_rows(per_call_ms(windows, ops, 1e9), kinds, scopes)
    ops, functions = [], []  # XLA: the compiled function, all there is
    kinds: dict[str, str] = {}
    for line in host.lines:  # the caller's thread too: with few threads TensorFlow runs ops inline there
        for name, s, t in events(line):
            if name == CALL:
                continue
            if name.startswith("__inference"):  # the function itself
                functions.append((name, s, t))
                continue
            op, _, kind = name.rpartition(":")
            # an op event is "<name>:<type>"; runtime events are C++ methods ("KernelAndDeviceFunc::Run")
            # or have a sentence after the colon ("EagerLocalExecute: __inference_forward_28")
            if "::" in name or not op or not kind or kind.startswith(" ") or op.startswith(_EXECUTOR):
                continue
            ops.append((op, s, t))
            kinds[op] = kind
    # an op's events on every host thread, its wall time counted once (ps)
    calls, compiled = per_call_ms(windows, ops, 1e9), per_call_ms(windows, functions, 1e9)
    if not any(calls):  # an XLA cluster: no op events, its function's time as one unmapped row
        return [OpTime(name, ms, (), "compiled function") for name, ms in median_per_name(compiled).items()]
    return _op_rows(calls, kinds, scopes)


def _op_rows(calls: list[dict[str, float]], kinds: dict[str, str], scopes: dict[str, str]) -> list[OpTime]:
    """One row per op over the calls (:func:`adapters.base.median_per_name`), its source the IR operator
    of its scope."""
    rows = []
    for op, ms in median_per_name(calls).items():
        scope = re.sub(r"_\d+$", "", op.split("/", 1)[0])  # a scope entered again: TensorFlow adds _1, _2
        rows.append(OpTime(op, ms, (scopes[scope],) if scope in scopes else (), kinds[op]))
    return rows


# the stats a GPU kernel event names the op that launched it by (the tracer's annotation stack)
KERNEL_OP_STATS = ("tf_op", "kernel_annotation")


def kernel_ops(space) -> tuple[list[tuple[str, int, int]], dict[str, str]]:
    """The GPU planes' kernel events of a TensorFlow trace (an ``XSpace``) as ``(op, start_ps,
    end_ps)``, and each op's type: the op is the innermost ``name:type`` of the kernel's annotation
    stack (:data:`KERNEL_OP_STATS`; entries ``a::b``, each maybe with ``#k=v#`` metadata); kernels
    without one are left out."""
    ops, kinds = [], {}
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        wanted = {k for k, m in plane.stat_metadata.items() if m.name in KERNEL_OP_STATS}
        for line in plane.lines:
            for e in line.events:
                text = next((st.str_value or (plane.stat_metadata[st.ref_value].name
                                              if st.ref_value in plane.stat_metadata else "")
                             for st in e.stats if st.metadata_id in wanted), None)
                entry = next((a for a in reversed(re.sub(r"#[^#]*#", "", text or "").split("::"))
                              if ":" in a), None)
                if entry is None:
                    continue
                op, _, kind = entry.rpartition(":")
                start = line.timestamp_ns * 1000 + e.offset_ps
                ops.append((op, start, start + e.duration_ps))
                kinds[op] = kind
    return ops, kinds


class TensorFlow(Adapter):
    def in_flight_options(self, instances: int) -> dict:
        """N tf.function calls in flight need N inter-op threads (TensorFlow's pools are per process:
        the intra-op pool is the per-instance share, the inter-op pool runs the N graphs)."""
        return {"inter_op_threads": instances} if instances > 1 else {}

    def available(self, device: str = "cpu") -> str | None:
        with _without_jax():
            reason = super().available(device)
        if reason is None and device.startswith("cuda"):
            tf = _tf()
            if not tf.config.list_physical_devices("GPU"):
                built = "built with CUDA" if tf.test.is_built_with_cuda() else "a build without CUDA"
                reason = f"TensorFlow {tf.__version__} ({built}) sees no GPU"
        return reason

    def version(self) -> str | None:
        try:
            from importlib.metadata import version

            return version("tensorflow")
        except Exception:
            return None

    def profile_options(self) -> dict:
        return {"scopes": True}

    def _build(self, graph, batch_size, device, threads, inter_op_threads=None, jit_compile=False, cache_dir=None,
               scopes=False, precision="fp32", frozen=None):
        """``cache_dir`` (with ``jit_compile``): XLA's persistent compilation cache kept there across
        rounds (``--tf_xla_persistent_cache_directory``; ``adapters.build_cache``: checked before the
        build, rebuilt when foreign). TensorFlow reads its XLA flags once per process, at its first
        compilation. ``precision`` bf16: weights, input and every op in ``tf.bfloat16``;
        ``info["precision"]`` is read back (:func:`computes_in`). int8: the ``tflite`` framework's. ``frozen``
        (default: on the CPU without XLA): the function's weights are ``Const`` nodes of its graph
        (``to_function(frozen=True)``), not tensors it captures."""
        if frozen is not None and not isinstance(frozen, bool):
            raise ValueError(f"frozen={frozen!r}: {self.name} takes true or false")
        if frozen and jit_compile:
            raise ValueError(f"frozen=true: {self.name} compiles with XLA, which takes the function's weights as "
                             "they are (freezing is for TensorFlow's own oneDNN kernels)")
        tf = _tf()
        if precision not in DTYPES:
            raise ValueError(f"precision {precision!r}: {self.name} builds {', '.join(DTYPES)}")
        dtype = getattr(tf, DTYPES[precision])
        n = resolve_threads(threads)
        jit = bool(jit_compile)
        cache = open_cache(cache_dir, "tensorflow-xla", tf.__version__) if jit else None
        if cache is not None:
            flags = os.environ.get("TF_XLA_FLAGS", "")
            os.environ["TF_XLA_FLAGS"] = f"{flags} --tf_xla_persistent_cache_directory={cache.dir}".strip()
        freeze = (not jit and not device.startswith("cuda")) if frozen is None else frozen
        info = {"threads": n, **_set_threads(tf, n, inter_op_threads), "framework_version": tf.__version__,
                "layout": laid.LAYOUT_TENSORS if laid.has_tensors(graph) else "NHWC", "jit_compile": jit,
                "frozen": freeze}
        if device.startswith("cuda"):
            tf.config.experimental.enable_tensor_float_32_execution(False)  # fp32 strict
            info["tf32"] = bool(tf.config.experimental.tensor_float_32_execution_enabled())
        t0 = time.perf_counter()
        with tf.device(_tf_device(device)):
            fn = to_function(graph, batch_size, jit_compile=jit, scopes=bool(scopes), dtype=dtype, frozen=freeze)
            x = tf.zeros((batch_size, graph.input_shape[1], graph.input_shape[2], graph.input_shape[0]), dtype)
            fn(x).numpy()  # traces (and, with XLA, compiles)
            t1 = time.perf_counter()
            fn(x).numpy()
            info["compile_seconds"] = t1 - t0
            info["second_call_seconds"] = time.perf_counter() - t1
            if precision != "fp32":  # read back (XLA: one more compilation, so not for fp32's builds)
                info["precision"] = computes_in(fn, x, jit)
                info["onednn"] = _onednn()
        if info.get("precision", "fp32") != precision:
            info["precision_note"] = (f"weights and input in {dtype.name}; its convolutions and matrix products "
                                      f"{'compiled by XLA ' if jit else ''}are {info['precision']}")
        if cache is not None:
            cache.seal()
            info.update(cache.info())
        if scopes:
            info["profiling"] = "one name scope per IR operator"
        return TFCompiled(fn, info, device, operator_scopes(graph) if scopes else None,
                          None if precision == "fp32" else dtype, nhwc_out=not laid.has_tensors(graph))


BF16_CPU = ("weights, input and every op in tf.bfloat16 (what Keras's mixed_bfloat16 policy computes): oneDNN's "
            "bf16 kernels on AVX512_BF16, read back from the graph's Conv2D/MatMul T")
XLA_BF16_CPU = ("no: XLA's CPU backend computes bf16 convolutions and dot products in f32 (read back from the "
                "compiled HLO), so bf16 there is storage only")
INT8_CPU = "no: int8 is the tflite framework's: TensorFlow's graph runtime has no int8 kernels here"
XLA_INT8_CPU = ("no: XLA compiles no int8 convolutions from a tf.function; TensorFlow's int8 deployment is TensorFlow "
                "Lite, the tflite framework's")
GPU_NOT_YET = {p: f"not yet: {p} weights and activations are not built for cuda" for p in ("fp16", "bf16")}

PLAIN = TensorFlow(
    name="tensorflow",
    description="TensorFlow tf.function graph, NHWC (layout converted outside the timed call)",
    requires=("tensorflow",),
    devices=("cpu", "cuda"),
    tolerance=1e-3,
    options={},
    mode="tf.function graph",
    precision_table={"cpu": {"bf16": BF16_CPU, "int8": INT8_CPU}, "cuda": GPU_NOT_YET},
)

XLA = TensorFlow(
    name="tensorflow-xla",
    description="TensorFlow tf.function with jit_compile=True (XLA on CPU), NHWC",
    requires=("tensorflow",),
    devices=("cpu", "cuda"),
    tolerance=1e-3,
    options={"jit_compile": True},
    mode="tf.function + XLA (jit_compile)",
    precision_table={"cpu": {"bf16": XLA_BF16_CPU, "int8": XLA_INT8_CPU}, "cuda": GPU_NOT_YET},
)


def _onednn() -> bool:
    """Whether this TensorFlow runs its oneDNN CPU kernels (on by default only on some x86 CPUs)."""
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except Exception:  # an internal module moved: assume the portable kernels
        return False
