"""TensorRT adapters (CUDA only): the IR lowered layer by layer into a TensorRT network through
the one lowering walk, built into an fp32 engine and run with ``execute_async_v3``.

* ``tensorrt``: TensorRT's default auxiliary streams -- it already runs independent
  branches concurrently by itself, so it is partly inter-operator parallel.
* ``tensorrt-noaux``: ``max_aux_streams = 0``, one stream: the sequential baseline.

fp32 strict: TensorRT enables TF32 for convolutions and matrix products by default; it is
cleared (``BuilderFlag.TF32``), and the flag's state is read back and recorded
(``info["tf32"]``) with every cell.

fp16 and bf16 (issue 46; written, checked against the bindings' manifest on the stand-in, not yet
run on a GPU): the cell's precision sets ``BuilderFlag.FP16`` or ``BuilderFlag.BF16``, as
``trtexec --fp16``/``--bf16`` do (TF32 still cleared; the network, its input and output stay
float32, TensorRT converts at the boundary). The flag lets TensorRT choose that precision per layer
where it has a kernel for it, and keep a layer in fp32 where that is faster: what its users deploy.
The flags are read back after the build; any reduced-precision flag other than the one asked for
refuses the engine. bf16 on a GPU before compute capability 8.0 is refused in one line (no bf16
kernels there: the flag would leave every layer fp32). TensorRT 11 is always strongly typed and has
no such flags: a cell there is refused with that reason. INT8 is not built: it needs calibration
(an ``IInt8Calibrator``, deprecated in TensorRT 10 and absent from 11) or explicit Q/DQ layers
carrying calibrated scales, neither of which the lowering emits yet.

Explicit batch (TensorRT 10 has no other mode): the input is ``(batch, C, H, W)`` float32.
Layers: ``add_convolution_nd`` (bias in the layer, ``pre_padding``/``post_padding``, the
activation as ``add_activation``: CLIP for relu6 and clip, HARD_SIGMOID (times x for
hardswish), SIGMOID times x for silu, LEAKY_RELU), ``add_pooling_nd`` (pre/post padding;
``average_count_excludes_padding`` from the node's ``count_include_pad``), ``add_reduce`` for
global pools, ``add_slice`` for channel slices, ``add_elementwise`` for sums, products and
affine scale/shift constants, ``add_concatenation`` on channels, two ``add_shuffle`` for a
channel shuffle, ``add_resize`` (nearest: asymmetric + floor, PyTorch's; bilinear:
half-pixel or aligned corners), ``add_shuffle`` + ``add_matrix_multiply`` for linear layers.

General tensors (vision transformers, ConvNeXt; issue 56): every general-tensor operator of the IR is
lowered by ``adapters.tensorrt_tensors`` -- ``add_matrix_multiply`` for products of activations and
for dense layers on tokens (constant weights, ``MatrixOperation.TRANSPOSE``), ``add_softmax`` (its
axis a bit of ``axes``), ``add_normalization`` for layer norm (scale and bias constants, the axes
mask, epsilon; ``compute_precision`` fp32 on TensorRT 10, which has it), ``add_shuffle`` for
reshapes and permutes, ``add_concatenation`` for a class token, ``add_reduce`` + ``add_unary`` +
``add_elementwise`` for l2norm, ``ActivationType.GELU_ERF``/``GELU_TANH`` for GELU. A call the
installed TensorRT lacks refuses the graph in one line naming the node, before any layer is added.
Checked against the oracle on the CPU stand-in held to TensorRT 10.16's and 11.1's API only
(``tests/test_tensorrt_tensors.py``: a one-block ViT, a ConvNeXt block, a cosine-attention block);
never run on a GPU. The CNN lowering is layer for layer what it was (a recorded layer list).

Engines are cached on disk (``runs/trt_engines/``, option ``cache=``; ``cache=False`` turns
it off), keyed by the graph's hash (structure and weights), the batch size, the TensorRT
version, the GPU, the variant and the lowering code's version (a hash of this module,
``adapters/tensorrt_tensors.py`` and the shared lowering walk), so a sweep builds each engine
once and a changed lowering rebuilds.

TensorRT 10 and 11 differ where it matters here: 11 is always strongly typed and has no
``BuilderFlag.FP16``/``INT8``/``BF16``; the reduced-precision flags are read only where they
exist (``reduced_precision_flags`` in the info) and any that is set refuses the engine.

Written against the TensorRT 10/11 Python API; it has never run on a GPU in this project's
development (see README). ``tests/test_gpu_api.py`` checks the calls it makes exist in the
installed bindings where they can be inspected.
"""

from __future__ import annotations

import functools
import hashlib
import time
from pathlib import Path

import numpy as np

from ios_core.atomic import atomic_write_bytes
from ios_core.ir import ActivationMap, Graph, Node, OpVisitor
from ios_core.lowering import Primitives, lower
from ios_core.runtime.cuda_kernels import arch_problem

from .base import Adapter, Compiled
from .tensorrt_tensors import TensorLayers

DEFAULT_CACHE = Path("runs") / "trt_engines"
WORKSPACE_BYTES = 1 << 30


def graph_hash(graph: Graph) -> str:
    """sha256 of the graph's structure (its JSON without the nodes' ``meta``) and every weight array."""
    import json

    h = hashlib.sha256(json.dumps(graph.to_json(meta=False), sort_keys=True).encode())
    for op in graph.operators():
        for attr in ("weight", "bias"):
            arr = getattr(op, attr, None)
            if arr is not None:
                h.update(op.name.encode())
                h.update(np.ascontiguousarray(arr, dtype=np.float32).tobytes())
    return h.hexdigest()


# IR activation kind (ios_core.ir.activations) -> its TensorRT layers: (builder, t, alpha, beta) -> output
TRT_ACTIVATIONS: ActivationMap = ActivationMap("tensorrt", {
    "identity": lambda nb, t, a, b: t,
    "relu": lambda nb, t, a, b: nb._activation(t, "RELU"),
    "sigmoid": lambda nb, t, a, b: nb._activation(t, "SIGMOID"),
    "tanh": lambda nb, t, a, b: nb._activation(t, "TANH"),
    "relu6": lambda nb, t, a, b: nb._activation(t, "CLIP", 0.0, 6.0),
    # x * relu6(x + 3) / 6 = x * hard_sigmoid(x; 1/6, 1/2)
    "hardswish": lambda nb, t, a, b: nb._gated(t, "HARD_SIGMOID", 1.0 / 6.0, 0.5),
    "silu": lambda nb, t, a, b: nb._gated(t, "SIGMOID"),  # x * sigmoid(x)
    # GELU_ERF / GELU_TANH, composed of element-wise layers where the bindings lack them (tensorrt_tensors)
    "gelu": lambda nb, t, a, b: nb._gelu(t, "gelu"),
    "gelu_tanh": lambda nb, t, a, b: nb._gelu(t, "gelu_tanh"),
    "leaky_relu": lambda nb, t, a, b: nb._activation(t, "LEAKY_RELU", a),
    "hardsigmoid": lambda nb, t, a, b: nb._activation(t, "HARD_SIGMOID", a, b),
    "clip": lambda nb, t, a, b: nb._activation(t, "CLIP", a, b),
})


class NetworkBuilder(TensorLayers, OpVisitor):
    """Emits TensorRT layers for IR operators; keeps every weight array alive until the
    engine is built (TensorRT reads them at build time, not when the layer is added). Every op
    type and attribute of the IR is lowered: the feature-map operators here, the general tensors in
    ``adapters.tensorrt_tensors`` (``tests/test_gpu_api.py``, ``tests/test_gpu_coverage.py`` and
    ``tests/test_tensorrt_tensors.py`` check them against the oracle on a stand-in held to TensorRT
    10's and 11's API)."""

    ACTIVATIONS = TRT_ACTIVATIONS

    def __init__(self, trt, network, batch_size: int):
        self.trt, self.network, self.n = trt, network, batch_size
        self.keep: list[np.ndarray] = []

    def weights(self, arr) -> object:
        a = np.ascontiguousarray(arr, dtype=np.float32)
        self.keep.append(a)
        return self.trt.Weights(a)

    def constant(self, arr, shape):
        return self.network.add_constant(tuple(shape), self.weights(np.reshape(arr, shape))).get_output(0)

    def prims(self) -> Primitives:
        trt, net, n = self.trt, self.network, self.n

        def slice_channels(t, b, e):  # axis 1 of a tensor of any rank: (0, b, 0, 0) ... for a feature map
            shape = tuple(t.shape)
            rest = len(shape) - 2
            layer = net.add_slice(t, start=(0, b, *(0,) * rest), shape=(shape[0], e - b, *shape[2:]),
                                  stride=(1,) * len(shape))
            return layer.get_output(0)

        def combine(op):
            def f(ts):
                return functools.reduce(lambda a, b: net.add_elementwise(a, b, op).get_output(0), ts)
            return f

        def concat(ts):
            layer = net.add_concatenation(list(ts))
            layer.axis = 1
            return layer.get_output(0)

        del n
        return Primitives(slice_channels=slice_channels, add=combine(trt.ElementWiseOperation.SUM),
                          mul=combine(trt.ElementWiseOperation.PROD), concat=concat)

    def _activation(self, t, kind: str, alpha: float = 0.0, beta: float = 0.0):
        """One activation layer: ``kind`` names a member of TensorRT's ActivationType."""
        layer = self.network.add_activation(t, getattr(self.trt.ActivationType, kind))
        layer.alpha, layer.beta = float(alpha), float(beta)
        return layer.get_output(0)

    def _gated(self, t, kind: str, alpha: float = 0.0, beta: float = 0.0):
        """``t * activation(t)``: silu, hardswish."""
        gate = self._activation(t, kind, alpha, beta)
        return self.network.add_elementwise(t, gate, self.trt.ElementWiseOperation.PROD).get_output(0)

    def act(self, t, kind: str, alpha: float = 0.0, beta: float = 0.0):
        """Any IR activation (ios_core.ir.activations) with TensorRT's ActivationType."""
        return TRT_ACTIVATIONS[kind](self, t, alpha, beta)

    def __call__(self, op: Node, x):
        return self.visit(op, x)

    def visit_conv(self, op: Node, x):
        net = self.network
        layer = net.add_convolution_nd(x, op.out_channels, tuple(op.kernel), self.weights(op.weight),
                                       self.weights(op.bias))
        pt, pl, pb, pr = op.pads
        layer.stride_nd = tuple(op.stride)
        layer.pre_padding = (pt, pl)
        layer.post_padding = (pb, pr)
        layer.dilation_nd = tuple(op.dilation)
        layer.num_groups = op.groups
        layer.name = op.name
        return self.act(layer.get_output(0), op.act)

    def visit_pool(self, op: Node, x):
        trt, net = self.trt, self.network
        if op.pool_type in ("global_avg", "global_max"):
            red = trt.ReduceOperation.AVG if op.pool_type == "global_avg" else trt.ReduceOperation.MAX
            return net.add_reduce(x, red, (1 << 2) | (1 << 3), True).get_output(0)
        ptype = trt.PoolingType.MAX if op.pool_type == "max" else trt.PoolingType.AVERAGE
        layer = net.add_pooling_nd(x, ptype, tuple(op.kernel))
        pt, pl, pb, pr = op.pads
        layer.stride_nd = tuple(op.stride)
        layer.pre_padding = (pt, pl)
        layer.post_padding = (pb, pr)
        if op.pool_type == "avg":
            layer.average_count_excludes_padding = not op.count_include_pad
        layer.name = op.name
        return layer.get_output(0)

    def visit_identity(self, op: Node, x):
        return x

    def visit_relu(self, op: Node, x):
        return self.act(x, "relu")

    def visit_activation(self, op: Node, x):
        return self.act(x, op.act_type, op.alpha, op.beta)

    def visit_affine(self, op: Node, x):
        trt, net = self.trt, self.network
        shape = (1, *op.channel_shape)  # (1, C, 1, 1) for a feature map, (1, C, 1, ...) for any rank
        scale = self.constant(op.weight, shape)
        shift = self.constant(op.bias, shape)
        y = net.add_elementwise(x, scale, trt.ElementWiseOperation.PROD).get_output(0)
        y = net.add_elementwise(y, shift, trt.ElementWiseOperation.SUM).get_output(0)
        return self.act(y, op.act)

    def visit_shuffle(self, op: Node, x):
        net, n = self.network, self.n
        c, h, w = op.input_shape
        g = op.groups
        split = net.add_shuffle(x)
        split.reshape_dims = (n, g, c // g, h, w)
        split.second_transpose = (0, 2, 1, 3, 4)
        merge = net.add_shuffle(split.get_output(0))
        merge.reshape_dims = (n, c, h, w)
        return merge.get_output(0)

    def visit_resize(self, op: Node, x):
        trt, net, n = self.trt, self.network, self.n
        layer = net.add_resize(x)
        layer.shape = (n, op.output_shape[0], *op.size)
        if op.mode == "nearest":  # PyTorch's nearest: source floor(i * in / out)
            layer.resize_mode = trt.InterpolationMode.NEAREST
            layer.coordinate_transformation = trt.ResizeCoordinateTransformation.ASYMMETRIC
            layer.nearest_rounding = trt.ResizeRoundMode.FLOOR
        else:
            layer.resize_mode = trt.InterpolationMode.LINEAR
            layer.coordinate_transformation = (trt.ResizeCoordinateTransformation.ALIGN_CORNERS if op.align_corners
                                               else trt.ResizeCoordinateTransformation.HALF_PIXEL)
        layer.name = op.name
        return layer.get_output(0)

    def visit_flatten(self, op: Node, x):
        net, n = self.network, self.n
        layer = net.add_shuffle(x)
        layer.reshape_dims = (n, op.output_shape[0], 1, 1)
        return layer.get_output(0)

    def visit_linear(self, op: Node, x):
        trt, net, n = self.trt, self.network, self.n
        flat = net.add_shuffle(x)
        flat.reshape_dims = (n, op.in_features)
        w = net.add_constant((op.out_features, op.in_features), self.weights(op.weight)).get_output(0)
        b = net.add_constant((1, op.out_features), self.weights(op.bias)).get_output(0)
        mm = net.add_matrix_multiply(flat.get_output(0), trt.MatrixOperation.NONE, w,
                                     trt.MatrixOperation.TRANSPOSE).get_output(0)
        y = self.act(net.add_elementwise(mm, b, trt.ElementWiseOperation.SUM).get_output(0), op.act)
        out = net.add_shuffle(y)
        out.reshape_dims = (n, op.out_features, 1, 1)
        return out.get_output(0)


def _flag(trt, name: str):
    """``trt.BuilderFlag.<name>``, or None where this TensorRT has no such flag (TensorRT 11 is
    strongly typed and has no FP16/INT8/BF16 flags: precision follows the network's types)."""
    return getattr(trt.BuilderFlag, name, None)


# the precisions built with a builder flag (trtexec --fp16 / --bf16) -> the flag's name
PRECISION_FLAGS = {"fp16": "FP16", "bf16": "BF16"}


def build_engine(graph: Graph, batch_size: int, max_aux_streams: int | None, logger=None,
                 precision: str = "fp32") -> tuple[bytes, dict]:
    """Serialized engine of ``graph`` and what the build recorded (TF32 state, flags, layers).
    Works with TensorRT 10 (weakly typed by default: fp32 unless a reduced-precision flag is set,
    which only ``precision`` fp16/bf16 does) and 11 (always strongly typed: an fp32 network is fp32;
    it has no FP16/BF16 flags, so a reduced precision is refused there)."""
    import tensorrt as trt

    if precision != "fp32" and precision not in PRECISION_FLAGS:
        raise ValueError(f"TensorRT engines are built at fp32, fp16 or bf16 here, not {precision}")
    wanted = PRECISION_FLAGS.get(precision)
    if wanted is not None and _flag(trt, wanted) is None:
        raise RuntimeError(f"TensorRT {trt.__version__} is strongly typed and has no BuilderFlag.{wanted}: a "
                           f"{precision} engine would need the network's tensors declared {precision} (not yet)")
    logger = logger or trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch: the only mode in TensorRT 10+
    config = builder.create_builder_config()
    config.clear_flag(trt.BuilderFlag.TF32)  # fp32 strict: TF32 is on by default
    if wanted is not None:
        config.set_flag(_flag(trt, wanted))  # trtexec --fp16 / --bf16
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    if max_aux_streams is not None:
        config.max_aux_streams = int(max_aux_streams)
    emit = NetworkBuilder(trt, network, batch_size)
    emit.check_handles(graph.operators())
    emit.check_api(graph.operators())  # a call this TensorRT lacks: refused before any layer is added
    x = network.add_input("input", trt.float32, (batch_size, *graph.input_shape))
    y = lower(graph, x, emit.prims(), emit)
    y.name = "output"
    network.mark_output(y)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError("TensorRT could not build the engine (see its log above)")
    reduced = {name.lower(): bool(config.get_flag(flag)) for name in ("FP16", "BF16", "INT8", "FP8")
               if (flag := _flag(trt, name)) is not None}
    info = {"tf32": bool(config.get_flag(trt.BuilderFlag.TF32)), "reduced_precision_flags": reduced,
            "fp16": reduced.get("fp16", False), "strongly_typed": _flag(trt, "FP16") is None,
            "layers": network.num_layers, "max_aux_streams": config.max_aux_streams}
    unexpected = {k: v for k, v in reduced.items() if v and k != precision}
    if unexpected or (precision != "fp32" and not reduced.get(precision)):
        raise RuntimeError(f"TensorRT builder config enables reduced precision {reduced}, asked for {precision}: "
                           "refusing the engine")
    # what the engine was built to compute in: the flag read back (TensorRT may keep a layer in fp32)
    info["precision"] = precision
    info["precision_source"] = (
        "read back: no reduced-precision builder flag is set, so every layer is fp32" if precision == "fp32" else
        f"requested, not read back: BuilderFlag.{PRECISION_FLAGS[precision]} read back from the builder config "
        "allows, never forces, it per layer; the engine's layers are not inspected")
    if precision != "fp32":
        info["precision_note"] = (f"BuilderFlag.{PRECISION_FLAGS[precision]}: TensorRT runs each layer at "
                                  f"{precision} where it has a faster kernel for it, else fp32 (trtexec --{precision})")
    return bytes(serialized), info


def lowering_version() -> str:
    """A hash of the code that decides what engine a graph becomes (this module, the general
    tensors' ``adapters.tensorrt_tensors`` and the shared lowering walk): part of the engine cache
    key, so a changed lowering never reuses an engine built by the old one."""
    import importlib

    h = hashlib.sha256()
    for path in (__file__, *(importlib.import_module(m).__file__ for m in ("adapters.tensorrt_tensors",
                                                                          "ios_core.lowering.walk",
                                                                          "ios_core.lowering.compose"))):
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:16]


def engine_key(graph: Graph, batch_size: int, trt_version: str, fp: dict, variant: str) -> str:
    """The engine cache key: the graph (structure and weights), batch size, TensorRT version,
    GPU, variant and the lowering code's version."""
    parts = [graph_hash(graph), str(batch_size), trt_version, str(fp.get("name")), str(fp.get("compute_capability")),
             f"aux{variant}", f"lowering{lowering_version()}"]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


class TRTCompiled(Compiled):
    """A deserialized engine with one execution context; input and output live on the GPU
    (``prepare`` copies the input there, outside the timed call); ``execute`` enqueues the
    engine on its own non-blocking CuPy stream."""

    def __init__(self, engine_bytes: bytes, batch_size: int, input_shape, info: dict):
        import cupy
        import tensorrt as trt

        super().__init__(info)
        self.cupy = cupy
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.runtime = trt.Runtime(self.logger)
        self.engine = self.runtime.deserialize_cuda_engine(engine_bytes)
        if self.engine is None:
            raise RuntimeError("TensorRT could not deserialize the engine")
        self._bind()

    def _bind(self) -> None:
        """An execution context on the engine, with its own stream and I/O buffers."""
        import cupy
        import tensorrt as trt

        from ios_core.measurement.gpu import CudaEventTimer

        self.context = self.engine.create_execution_context()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.buffers = {}
        for i in range(self.engine.num_io_tensors):
            name = self.engine.get_tensor_name(i)
            shape = tuple(self.engine.get_tensor_shape(name))
            buf = cupy.empty(shape, dtype=cupy.float32)
            self.buffers[name] = buf
            self.context.set_tensor_address(name, int(buf.data.ptr))
            mode = self.engine.get_tensor_mode(name)
            if mode == trt.TensorIOMode.INPUT:
                self.input_name = name
            else:
                self.output_name = name
        self.info["aux_streams_used"] = getattr(self.engine, "num_aux_streams", None)
        self._timer = CudaEventTimer(self.stream)

    def another_context(self) -> TRTCompiled:
        """One more execution context on the same engine, with its own CUDA stream and buffers:
        TensorRT's way to keep several requests in flight (``trtexec --streams=N``). Written against
        TensorRT's documented API; not run on a GPU in this project."""
        other = object.__new__(TRTCompiled)
        Compiled.__init__(other, dict(self.info))
        other.cupy, other.logger, other.runtime, other.engine = self.cupy, self.logger, self.runtime, self.engine
        other._bind()
        return other

    def prepare(self, x: np.ndarray):
        buf = self.buffers[self.input_name]
        buf.set(np.ascontiguousarray(x, dtype=np.float32), stream=self.stream)
        self.stream.synchronize()
        return buf

    def execute(self, prepared):
        if not self.context.execute_async_v3(self.stream.ptr):
            raise RuntimeError("TensorRT execute_async_v3 failed")
        return self.buffers[self.output_name]

    def finish(self, out) -> np.ndarray:
        self.stream.synchronize()
        return self.cupy.asnumpy(out)

    def sync(self) -> None:
        self.stream.synchronize()

    def timer(self):
        return self._timer


class TensorRTAdapter(Adapter):
    def distribution(self) -> str:
        return "tensorrt"

    def version(self) -> str | None:
        try:
            import tensorrt as trt

            return str(trt.__version__)
        except Exception:
            return super().version()

    def available(self, device: str = "cpu") -> str | None:
        if device not in self.devices:
            return f"{self.name} runs on NVIDIA GPUs only (device cuda), not {device}"
        from ios_core.measurement.gpu import tensorrt_missing

        return tensorrt_missing()

    def _build(self, graph: Graph, batch_size: int, device: str, threads: int | None,
               max_aux_streams: int | None = None, cache=True, precision: str = "fp32") -> Compiled:
        import tensorrt as trt

        from ios_core.measurement.gpu import fingerprint

        fp = fingerprint()
        # bf16 before compute capability 8.0: TensorRT has no bf16 kernel there, and a weakly typed build
        # only allows the precision (the flag never forces it), so every layer could come out fp32 under a
        # bf16 label; refused in one line instead (ios_core.runtime.cuda_kernels.arch_problem)
        problem = arch_problem(precision, fp.get("compute_capability"), "TensorRT's bf16 kernels")
        if problem is not None:
            raise RuntimeError(f"tensorrt: {problem}")
        variant = "default" if max_aux_streams is None else str(int(max_aux_streams))
        # an fp16 engine is another engine (an fp32 key stays as it was)
        key = engine_key(graph, batch_size, str(trt.__version__), fp,
                         variant if precision == "fp32" else f"{variant}|{precision}")
        folder = None if cache is False else Path(DEFAULT_CACHE if cache is True else cache)
        path = folder / f"{key}.engine" if folder else None
        meta: dict = {}
        t0 = time.perf_counter()
        if path is not None and path.is_file():
            engine = path.read_bytes()
            cached = True
            meta_path = path.with_suffix(".json")
            if meta_path.is_file():
                import json

                meta = json.loads(meta_path.read_text())
        else:
            engine, meta = build_engine(graph, batch_size, max_aux_streams, precision=precision)
            cached = False
            if path is not None:
                import json

                folder.mkdir(parents=True, exist_ok=True)
                for target, data in ((path, engine), (path.with_suffix(".json"), json.dumps(meta).encode())):
                    atomic_write_bytes(target, bytes(data))
        info = {**meta, "engine_seconds": time.perf_counter() - t0, "engine_cached": cached,
                "engine_cache": str(path) if path else None, "variant": f"max_aux_streams={variant}",
                "precision": meta.get("precision", "fp32"), "gpu": fp.get("name"),
                "framework_version": str(trt.__version__), "lowering_version": lowering_version()}
        if info.get("tf32"):
            raise RuntimeError("TensorRT kept TF32 enabled after clear_flag(TF32): refusing a non-fp32 engine")
        return TRTCompiled(engine, batch_size, graph.input_shape, info)


# the builder flags its users set (trtexec --fp16/--bf16/--int8): fp16 and bf16 built with theirs; int8 refused
TRT_FLAGS = {**{p: f"BuilderFlag.{f} (trtexec --{p}; TensorRT 10: it picks {p} per layer where faster, TF32 off; "
                   "TensorRT 11 has no such flag: refused there; written, not yet run on a GPU)"
                for p, f in PRECISION_FLAGS.items()},
             "int8": "not yet: BuilderFlag.INT8 needs calibration (an IInt8Calibrator, deprecated in TensorRT 10 and "
                     "absent from 11) or explicit Q/DQ layers with calibrated scales; the lowering emits neither"}

TENSORRT = TensorRTAdapter(
    name="tensorrt",
    description="TensorRT fp32 engine (TF32 off), TensorRT's default auxiliary streams (its own branch parallelism)",
    requires=("tensorrt",),
    devices=("cuda",),
    tolerance=1e-3,
    concurrency="contexts",
    precision_table={"cuda": TRT_FLAGS},
)

TENSORRT_NOAUX = TensorRTAdapter(
    name="tensorrt-noaux",
    description="TensorRT fp32 engine (TF32 off), max_aux_streams=0: one stream, no branch parallelism",
    requires=("tensorrt",),
    devices=("cuda",),
    tolerance=1e-3,
    options={"max_aux_streams": 0},
    concurrency="contexts",
    precision_table={"cuda": TRT_FLAGS},
)
