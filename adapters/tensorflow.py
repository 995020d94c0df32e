"""TensorFlow adapters: ``tensorflow`` (a ``tf.function`` graph) and ``tensorflow-xla``
(the same function with ``jit_compile=True``).

The graph is written in NHWC, TensorFlow's preferred CPU layout; the NCHW input is
transposed in ``prepare`` and the output back in ``finish``, both outside the timed region.
Weights are converted once (OIHW -> HWIO, depthwise filters -> (kh, kw, C, multiplier)).
Padding is always explicit, never ``'SAME'``: TensorFlow's ``'SAME'`` pads asymmetrically
and its average pool excludes padding from the count, while the IR pads symmetrically and
counts the padding (cuDNN INCLUDE_PADDING). Pools therefore pad with ``tf.pad`` (zeros for
average, -inf for max) then pool ``'VALID'`` (XLA does not take explicit pool padding).

TensorFlow is imported only when one of these adapters is checked or built.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from ios_core.ir import Graph, Node
from ios_core.lowering import Primitives, lower
from ios_core.threads import resolve_threads

from .base import Adapter, Compiled


def _tf():
    import tensorflow as tf

    return tf


def _act(tf, name: str):
    return {"identity": tf.identity, "relu": tf.nn.relu, "sigmoid": tf.math.sigmoid, "tanh": tf.math.tanh}[name]


def _flatten_nchw(tf, x, shape):
    """Flatten an NHWC tensor in the IR's (C, H, W) order (what ``torch.flatten`` on NCHW gives)."""
    c, h, w = shape
    if h * w > 1:
        x = tf.transpose(x, [0, 3, 1, 2])
    return tf.reshape(x, [-1, c * h * w])


class _Emitter:
    """Builds each operator's TensorFlow ops; weights are converted once, at construction."""

    def __init__(self, tf, graph: Graph):
        self.tf = tf
        self.params: dict[str, tuple] = {}
        for op in graph.operators():
            if op.TYPE == "conv":
                self.params[op.name] = self._conv_params(op)
            elif op.TYPE == "linear":
                self.params[op.name] = (tf.constant(np.ascontiguousarray(op.weight.T)), tf.constant(op.bias))

    def _conv_params(self, op):
        tf = self.tf
        cin = op.input_shape[0]
        w = op.weight  # (O, I/groups, kh, kw)
        if op.groups > 1 and op.groups == cin:  # depthwise: output channel o reads input o // mult
            mult = op.out_channels // cin
            kernel = w.reshape(cin, mult, *op.kernel).transpose(2, 3, 0, 1)
            kind = "depthwise"
        else:
            kernel = w.transpose(2, 3, 1, 0)  # HWIO; grouped convs split I and O in torch's order
            kind = "conv"
        return kind, tf.constant(np.ascontiguousarray(kernel)), tf.constant(op.bias)

    def __call__(self, op: Node, x):
        tf = self.tf
        kind = op.TYPE
        if kind == "conv":
            conv_kind, kernel, bias = self.params[op.name]
            (ph, pw) = op.padding
            padding = "VALID" if (ph, pw) == (0, 0) else [[0, 0], [ph, ph], [pw, pw], [0, 0]]
            if conv_kind == "depthwise":
                # Explicit padding on depthwise convs crashes grappler's shape inference (TF 2.21
                # aborts the process), so pad first and convolve 'VALID'.
                if padding != "VALID":
                    x = tf.pad(x, padding)
                y = tf.nn.depthwise_conv2d(x, kernel, [1, *op.stride, 1], "VALID", dilations=list(op.dilation))
            else:
                y = tf.nn.conv2d(x, kernel, list(op.stride), padding, dilations=list(op.dilation))
            return _act(tf, op.act)(tf.nn.bias_add(y, bias))
        if kind == "pool":
            if op.pool_type == "global_avg":
                return tf.reduce_mean(x, axis=[1, 2], keepdims=True)
            if op.pool_type == "global_max":
                return tf.reduce_max(x, axis=[1, 2], keepdims=True)
            (ph, pw) = op.padding
            if (ph, pw) != (0, 0):
                fill = -np.inf if op.pool_type == "max" else 0.0
                x = tf.pad(x, [[0, 0], [ph, ph], [pw, pw], [0, 0]], constant_values=fill)
            pool = tf.nn.max_pool2d if op.pool_type == "max" else tf.nn.avg_pool2d
            return pool(x, list(op.kernel), list(op.stride), "VALID")
        if kind in ("identity", "element"):
            return x
        if kind in ("relu", "activation"):
            return _act(tf, op.act_type)(x)
        if kind == "flatten":
            return tf.reshape(_flatten_nchw(tf, x, op.input_shape), [-1, 1, 1, op.output_shape[0]])
        if kind == "linear":
            weight_t, bias = self.params[op.name]
            y = _act(tf, op.act)(tf.matmul(_flatten_nchw(tf, x, op.input_shape), weight_t) + bias)
            return tf.reshape(y, [-1, 1, 1, op.out_features])
        raise NotImplementedError(f"tensorflow adapter: no conversion for node type {kind!r}")


def to_function(graph: Graph, batch_size: int | None = None, jit_compile: bool = False):
    """The graph as a ``tf.function`` on NHWC float32 input (batch ``None`` = any batch)."""
    tf = _tf()
    prims = Primitives(
        slice_channels=lambda t, b, e: t[:, :, :, b:e],
        add=lambda ts: tf.add_n(ts),
        mul=lambda ts: functools.reduce(tf.multiply, ts),
        concat=lambda ts: tf.concat(ts, axis=3),
    )
    emit = _Emitter(tf, graph)
    c, h, w = graph.input_shape

    def forward(x):
        return lower(graph, x, prims, emit)

    spec = tf.TensorSpec((batch_size, h, w, c), tf.float32, name="input")
    return tf.function(forward, input_signature=[spec], jit_compile=jit_compile, reduce_retracing=True)


def _set_threads(tf, threads: int, inter_op: int | None) -> dict:
    info: dict = {}
    notes = []
    for what, value, setter, getter in (
        ("intra_op_threads", threads, tf.config.threading.set_intra_op_parallelism_threads,
         tf.config.threading.get_intra_op_parallelism_threads),
        ("inter_op_threads", inter_op, tf.config.threading.set_inter_op_parallelism_threads,
         tf.config.threading.get_inter_op_parallelism_threads),
    ):
        if value is not None and getter() != value:
            try:
                setter(int(value))
            except RuntimeError as e:  # only settable before TensorFlow's runtime starts
                notes.append(f"{what}={value} not applied: {str(e).splitlines()[0]}")
        info[what] = getter() or "default"
    if notes:
        info["threads_note"] = "; ".join(notes)
    return info


class TFCompiled(Compiled):
    def __init__(self, fn, info):
        super().__init__(info)
        self.fn = fn
        self.tf = _tf()

    def prepare(self, x: np.ndarray):
        tf = _tf()
        with tf.device("/CPU:0"):
            return tf.constant(np.ascontiguousarray(np.asarray(x, np.float32).transpose(0, 2, 3, 1)))

    def execute(self, prepared):
        with self.tf.device("/CPU:0"):  # CPU even where TensorFlow sees a GPU
            return self.fn(prepared)

    def finish(self, out) -> np.ndarray:
        return np.ascontiguousarray(out.numpy().transpose(0, 3, 1, 2))


class TensorFlow(Adapter):
    def version(self) -> str | None:
        try:
            from importlib.metadata import version

            return version("tensorflow")
        except Exception:
            return None

    def _build(self, graph, batch_size, device, threads, inter_op_threads=None, jit_compile=False):
        tf = _tf()
        n = resolve_threads(threads)
        jit = bool(jit_compile)
        info = {"threads": n, **_set_threads(tf, n, inter_op_threads), "framework_version": tf.__version__,
                "layout": "NHWC", "jit_compile": jit}
        t0 = time.perf_counter()
        with tf.device("/CPU:0"):
            fn = to_function(graph, batch_size, jit_compile=jit)
            x = tf.zeros((batch_size, graph.input_shape[1], graph.input_shape[2], graph.input_shape[0]))
            fn(x).numpy()  # traces (and, with XLA, compiles)
            t1 = time.perf_counter()
            fn(x).numpy()
        info["compile_seconds"] = t1 - t0
        info["second_call_seconds"] = time.perf_counter() - t1
        return TFCompiled(fn, info)


PLAIN = TensorFlow(
    name="tensorflow",
    description="TensorFlow tf.function graph, NHWC (layout converted outside the timed call)",
    requires=("tensorflow",),
    tolerance=1e-3,
    options={},
)

XLA = TensorFlow(
    name="tensorflow-xla",
    description="TensorFlow tf.function with jit_compile=True (XLA on CPU), NHWC",
    requires=("tensorflow",),
    tolerance=1e-3,
    options={"jit_compile": True},
)
