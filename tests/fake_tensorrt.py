"""A CPU stand-in for TensorRT's network-definition API, held to the real API of each version.

``module(version)`` returns a module object standing in for ``tensorrt`` 10 or 11. Its shape
comes from the committed manifest ``tests/data/tensorrt_api.json``, extracted from NVIDIA's
binding sources by ``tests/tensorrt_manifest.py``:

* every enum (``BuilderFlag``, ``ActivationType``, ...) is generated from the manifest, so a
  member that version does not have raises ``AttributeError`` (TensorRT 11 has no
  ``BuilderFlag.FP16``);
* every class the adapter uses is a stand-in whose attributes are checked against that
  class's members in the manifest (inherited ones included): reading or setting an attribute
  the real class does not have raises, and a stand-in method the version lacks is removed;
* module attributes (``float32``, ``Logger``, ...) exist only if the manifest lists them.

The semantics are the documented ones, evaluated with torch: convolutions and pools honour
``pre_padding``/``post_padding`` (``padding_nd`` sets both), average pools honour
``average_count_excludes_padding``, activations their ``alpha``/``beta``, shuffles their
reshape (a 0 copies the input's dimension while ``zero_is_placeholder``, one -1 is inferred) and
transposes, resizes their mode, coordinate transformation and rounding. The general-tensor layers
(issue 56) too: matrix products (``op0``/``op1``: NONE or TRANSPOSE of the last two axes, equal
ranks of at least 2, the other axes equal or 1 and broadcast), softmax (one axis, a bit of
``axes``; by default the rank minus three, 0 below rank 3), normalization (``axes`` a bit mask,
``epsilon``, scale and bias of the input's rank: its size on the normalized axes, 1 elsewhere),
reductions on any axes mask, unary layers, element-wise layers (equal ranks, each dimension equal
or 1), slices (in bounds), concatenations (equal ranks, every other dimension equal; by default
along the rank minus three). What TensorRT refuses (a wrong rank, an axes mask outside the tensor,
a matrix product whose inner dimensions differ, a reshape that changes the volume, ...) raises
:class:`LayerError` when the layer is evaluated (TensorRT's ``add_*`` returns None and logs it, or
the build fails). ``describe(network)`` gives every layer as data (its class, the tensors it reads,
its arguments and attributes), so two lowerings can be compared layer for layer.
"""

from __future__ import annotations

import copy
import hashlib
import math
import types

import numpy as np
import torch
import torch.nn.functional as F

from tests.trt_manifest import MANIFEST, VERSIONS  # noqa: F401  (VERSIONS: the fixtures read it here)

FEED: dict[str, np.ndarray] = {}  # input name -> value (set before building: shapes are read while building)


class EnumValue:
    def __init__(self, enum: str, name: str):
        self.enum, self.name = enum, name

    def __repr__(self):
        return f"{self.enum}.{self.name}"


def make_enum(name: str, members) -> type:
    """An enum class with exactly ``members``: any other member raises AttributeError."""
    return type(name, (), {m: EnumValue(name, m) for m in members})


class Strict:
    """Base of every stand-in class: ``TRT`` names the real class; ``_api`` (set per version) is
    its members from the manifest."""

    TRT = ""
    _api: frozenset = frozenset()
    _version = ""

    def __setattr__(self, name, value):
        if not name.startswith("_") and name not in self._api:
            raise AttributeError(f"TensorRT {self._version}: {self.TRT} has no attribute {name!r}")
        object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only reached for what the stand-in does not hold
        where = "has no attribute" if name not in self._api else "attribute not modelled by the stand-in:"
        raise AttributeError(f"TensorRT {self._version}: {self.TRT} {where} {name!r}")


class Weights(Strict):
    TRT = "Weights"

    def __init__(self, a=None):
        self._array = np.array(a, dtype=np.float32)  # a copy, writable (the builder copies the weights too)

    def numpy(self):
        return self._array


class ITensor(Strict):
    TRT = "ITensor"

    def __init__(self, thunk):
        self._thunk = thunk
        self._value = None
        self.name = ""

    @property
    def value(self) -> torch.Tensor:  # stand-in only (underscore-free but not TensorRT's): see _STANDIN
        if self._value is None:
            self._value = self._thunk()
        return self._value

    @property
    def shape(self):
        return tuple(self.value.shape)


class LayerError(ValueError):
    """What TensorRT refuses in a layer (its ``add_*`` returns None and logs the reason, or the build
    fails): a wrong rank, an axes mask outside the tensor, shapes that do not agree."""


class ILayer(Strict):
    TRT = "ILayer"

    def __init__(self, network, fn, inputs=(), args=None):
        self._network = network
        self._inputs, self._args = tuple(inputs), dict(args or {})
        self.name = ""
        self._out = network._tensor(lambda: fn(self))

    def get_output(self, index):
        assert index == 0
        return self._out

    def _check(self, ok: bool, what: str) -> None:
        if not ok:
            raise LayerError(f"TensorRT {self._version}: {self.TRT} {self.name!r} refused: {what}")

    def _axes(self, mask, rank: int) -> tuple[int, ...]:
        """The axes of a bit mask (bit i: axis i, the batch axis 0), refused when empty or outside ``rank``."""
        self._check(isinstance(mask, int) and 0 < mask < (1 << rank), f"axes mask {mask!r} for a tensor of rank {rank}")
        return tuple(i for i in range(rank) if mask >> i & 1)

    def _broadcast(self, a, b) -> None:
        """Element-wise and matrix-product batch axes: equal ranks, each dimension equal or 1."""
        self._check(a.dim() == b.dim(), f"inputs of ranks {a.dim()} and {b.dim()} (they must be equal)")
        self._check(all(x == y or 1 in (x, y) for x, y in zip(a.shape, b.shape)),
                    f"cannot broadcast {tuple(a.shape)} with {tuple(b.shape)}")


def _pads(layer):
    (pt, pl), (pb, pr) = layer._pre, layer._post
    return (pl, pr, pt, pb)


class _Padded(ILayer):
    """``pre_padding``/``post_padding``; ``padding_nd`` sets both (TensorRT's semantics)."""

    def __init__(self, network, fn, inputs=(), args=None):
        super().__init__(network, fn, inputs, args)
        self._pre, self._post = (0, 0), (0, 0)

    @property
    def padding_nd(self):
        assert self._pre == self._post, "padding_nd read while pre and post padding differ"
        return self._pre

    @padding_nd.setter
    def padding_nd(self, value):
        self._pre = self._post = tuple(value)

    @property
    def pre_padding(self):
        return self._pre

    @pre_padding.setter
    def pre_padding(self, value):
        self._pre = tuple(value)

    @property
    def post_padding(self):
        return self._post

    @post_padding.setter
    def post_padding(self, value):
        self._post = tuple(value)


class IConvolutionLayer(_Padded):
    TRT = "IConvolutionLayer"


class IPoolingLayer(_Padded):
    TRT = "IPoolingLayer"


class IActivationLayer(ILayer):
    TRT = "IActivationLayer"


class IReduceLayer(ILayer):
    TRT = "IReduceLayer"


class ISliceLayer(ILayer):
    TRT = "ISliceLayer"


class IElementWiseLayer(ILayer):
    TRT = "IElementWiseLayer"


class IConcatenationLayer(ILayer):
    TRT = "IConcatenationLayer"


class IShuffleLayer(ILayer):
    TRT = "IShuffleLayer"


class IConstantLayer(ILayer):
    TRT = "IConstantLayer"


class IMatrixMultiplyLayer(ILayer):
    TRT = "IMatrixMultiplyLayer"


class IResizeLayer(ILayer):
    TRT = "IResizeLayer"


class ISoftMaxLayer(ILayer):
    TRT = "ISoftMaxLayer"


class INormalizationLayer(ILayer):
    TRT = "INormalizationLayer"


class IUnaryLayer(ILayer):
    TRT = "IUnaryLayer"


ELEMENTWISE = {"SUM": torch.add, "PROD": torch.mul, "SUB": torch.sub, "DIV": torch.div, "MAX": torch.maximum,
               "MIN": torch.minimum, "POW": torch.pow}
UNARY = {"SQRT": torch.sqrt, "ERF": torch.erf, "EXP": torch.exp, "LOG": torch.log, "RECIP": torch.reciprocal,
         "ABS": torch.abs, "NEG": torch.neg}
REDUCE = {"AVG": torch.mean, "SUM": torch.sum, "MAX": torch.amax, "MIN": torch.amin}


def _activation(kind: str, alpha: float, beta: float):
    """TensorRT's ActivationType semantics (NvInfer.h)."""
    return {"RELU": torch.relu, "SIGMOID": torch.sigmoid, "TANH": torch.tanh,
            "CLIP": lambda t: t.clamp(alpha, beta),
            "LEAKY_RELU": lambda t: torch.where(t >= 0, t, t * alpha),
            "HARD_SIGMOID": lambda t: (t * alpha + beta).clamp(0.0, 1.0),
            "GELU_ERF": torch.nn.functional.gelu,
            "GELU_TANH": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}[kind]


def _resize_source(out_size: int, in_size: int, transform: str) -> torch.Tensor:
    i = torch.arange(out_size, dtype=torch.float64)
    if transform == "ALIGN_CORNERS":
        return i * ((in_size - 1) / (out_size - 1)) if out_size > 1 else torch.zeros(out_size, dtype=torch.float64)
    if transform == "ASYMMETRIC":
        return i * (in_size / out_size)
    return (i + 0.5) * (in_size / out_size) - 0.5  # HALF_PIXEL


def _resize_axis(v: torch.Tensor, axis: int, out_size: int, layer) -> torch.Tensor:
    in_size = v.shape[axis]
    src = _resize_source(out_size, in_size, layer.coordinate_transformation.name)
    if layer.resize_mode.name == "NEAREST":
        rounding = layer.nearest_rounding.name
        idx = {"FLOOR": torch.floor, "CEIL": torch.ceil, "HALF_UP": lambda s: torch.floor(s + 0.5),
               "HALF_DOWN": lambda s: torch.ceil(s - 0.5)}[rounding](src).long().clamp(0, in_size - 1)
        return v.index_select(axis, idx)
    src = src.clamp(0, in_size - 1)  # outside the input: the edge value
    lo = src.floor().long().clamp(0, in_size - 1)
    hi = (lo + 1).clamp(max=in_size - 1)
    frac = (src - lo).to(v.dtype)
    shape = [1] * v.dim()
    shape[axis] = out_size
    frac = frac.view(shape)
    return v.index_select(axis, lo) * (1 - frac) + v.index_select(axis, hi) * frac


class INetworkDefinition(Strict):
    TRT = "INetworkDefinition"

    def __init__(self, version: str, classes: dict):
        self._layers: list = []
        self._inputs: dict = {}
        self._outputs: list = []
        self._tensors: list = []
        self._cls = classes

    def _tensor(self, thunk):
        t = self._cls["ITensor"](thunk)
        self._tensors.append(t)
        return t

    def _evaluate(self, inputs: dict) -> list:
        """The outputs for ``inputs`` (name -> array): what an engine built from this network
        computes (every tensor evaluated afresh)."""
        FEED.update(inputs)
        for t in self._tensors:
            t._value = None
        return [t.value.numpy() for t in self._outputs]

    def _layer(self, kind: str, fn, inputs=(), **args):
        layer = self._cls[kind](self, fn, inputs, args)
        self._layers.append(layer)
        return layer

    @property
    def num_layers(self):
        return len(self._layers)

    def add_input(self, name, dtype, shape):
        assert dtype.name == "FLOAT", dtype
        t = self._tensor(lambda: torch.from_numpy(FEED[name]))
        assert tuple(FEED[name].shape) == tuple(shape), (FEED[name].shape, shape)
        t.name = name
        self._shapes = {**getattr(self, "_shapes", {}), name: tuple(shape)}
        self._inputs[name] = t
        return t

    def mark_output(self, tensor):
        self._outputs.append(tensor)

    def add_convolution_nd(self, input, num_output_maps, kernel_shape, kernel, bias=None):
        w = torch.from_numpy(kernel.numpy())
        b = torch.from_numpy(bias.numpy()) if bias is not None else None
        assert w.shape[0] == num_output_maps and tuple(w.shape[2:]) == tuple(kernel_shape)

        def f(layer):
            x = F.pad(input.value, _pads(layer))
            return F.conv2d(x, w, b, layer.stride_nd, 0, layer.dilation_nd, layer.num_groups)
        layer = self._layer("IConvolutionLayer", f, (input,), num_output_maps=num_output_maps,
                            kernel_shape=kernel_shape, kernel=kernel, bias=bias)
        layer.stride_nd, layer.dilation_nd, layer.num_groups = (1, 1), (1, 1), 1
        return layer

    def add_activation(self, input, type):
        def f(layer):
            return _activation(type.name, layer.alpha, layer.beta)(input.value)
        layer = self._layer("IActivationLayer", f, (input,), type=type)
        layer.alpha, layer.beta = 0.0, 0.0
        return layer

    def add_pooling_nd(self, input, type, window_size):
        k = tuple(window_size)

        def f(layer):
            pads = _pads(layer)
            x = input.value
            if type.name == "MAX":
                return F.max_pool2d(F.pad(x, pads, value=float("-inf")), k, layer.stride_nd)
            sums = F.avg_pool2d(F.pad(x, pads), k, layer.stride_nd) * (k[0] * k[1])
            if not layer.average_count_excludes_padding:
                return sums / (k[0] * k[1])
            ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
            return sums / (F.avg_pool2d(F.pad(ones, pads), k, layer.stride_nd) * (k[0] * k[1]))
        layer = self._layer("IPoolingLayer", f, (input,), type=type, window_size=k)
        layer.stride_nd = (1, 1)
        layer.average_count_excludes_padding = True  # TensorRT's default
        return layer

    def add_reduce(self, input, op, axes, keep_dims):
        def f(layer):
            v = input.value
            layer._check(layer.op.name in REDUCE, f"ReduceOperation.{layer.op.name} is not modelled by the stand-in")
            return REDUCE[layer.op.name](v, layer._axes(layer.axes, v.dim()), keepdim=bool(layer.keep_dims))
        layer = self._layer("IReduceLayer", f, (input,))
        layer.op, layer.axes, layer.keep_dims = op, axes, keep_dims
        return layer

    def add_slice(self, input, start, shape, stride):
        def f(layer):
            v = input.value
            start, shape, stride = (tuple(getattr(layer, k)) for k in ("start", "shape", "stride"))
            layer._check(len(start) == len(shape) == len(stride) == v.dim(),
                         f"start {start}, shape {shape}, stride {stride} for a tensor of rank {v.dim()}")
            layer._check(all(0 <= s and n >= 1 and st >= 1 and s + (n - 1) * st < d
                             for s, n, st, d in zip(start, shape, stride, v.shape)),
                         f"start {start}, shape {shape}, stride {stride} outside {tuple(v.shape)}")
            return v[tuple(slice(s, s + n * st, st) for s, n, st in zip(start, shape, stride))]
        layer = self._layer("ISliceLayer", f, (input,))
        layer.start, layer.shape, layer.stride = tuple(start), tuple(shape), tuple(stride)
        return layer

    def add_elementwise(self, input1, input2, op):
        def f(layer):
            a, b = input1.value, input2.value
            layer._check(layer.op.name in ELEMENTWISE, f"ElementWiseOperation.{layer.op.name} is not modelled")
            layer._broadcast(a, b)
            return ELEMENTWISE[layer.op.name](a, b)
        layer = self._layer("IElementWiseLayer", f, (input1, input2))
        layer.op = op
        return layer

    def add_unary(self, input, op):
        def f(layer):
            layer._check(layer.op.name in UNARY, f"UnaryOperation.{layer.op.name} is not modelled by the stand-in")
            return UNARY[layer.op.name](input.value)
        layer = self._layer("IUnaryLayer", f, (input,))
        layer.op = op
        return layer

    def add_concatenation(self, inputs):
        inputs = list(inputs)

        def f(layer):
            vs = [t.value for t in inputs]
            rank = vs[0].dim()
            layer._check(all(v.dim() == rank for v in vs), f"inputs of ranks {[v.dim() for v in vs]}")
            layer._check(0 <= layer.axis < rank, f"axis {layer.axis} of tensors of rank {rank}")
            rest = {tuple(d for i, d in enumerate(v.shape) if i != layer.axis) for v in vs}
            layer._check(len(rest) == 1, f"shapes {[tuple(v.shape) for v in vs]} differ off axis {layer.axis}")
            return torch.cat(vs, layer.axis)
        layer = self._layer("IConcatenationLayer", f, inputs)
        layer.axis = max(len(inputs[0].shape) - 3, 0)  # TensorRT's default: the rank minus three (C of NCHW)
        return layer

    def add_shuffle(self, input):
        def f(layer):
            v = input.value
            if layer.first_transpose is not None:
                layer._check(sorted(layer.first_transpose) == list(range(v.dim())),
                             f"first_transpose {tuple(layer.first_transpose)} of a tensor of rank {v.dim()}")
                v = v.permute(*layer.first_transpose)
            if layer.reshape_dims is not None:
                dims = [v.shape[i] if d == 0 and layer.zero_is_placeholder else d
                        for i, d in enumerate(layer.reshape_dims)]
                if dims.count(-1) == 1 and math.prod(d for d in dims if d != -1) > 0:
                    dims[dims.index(-1)] = v.numel() // math.prod(d for d in dims if d != -1)
                layer._check(all(d >= 1 for d in dims) and math.prod(dims) == v.numel(),
                             f"cannot reshape {tuple(v.shape)} to {tuple(layer.reshape_dims)}")
                v = v.reshape(dims)
            if layer.second_transpose is not None:
                layer._check(sorted(layer.second_transpose) == list(range(v.dim())),
                             f"second_transpose {tuple(layer.second_transpose)} of a tensor of rank {v.dim()}")
                v = v.permute(*layer.second_transpose)
            return v.contiguous()
        layer = self._layer("IShuffleLayer", f, (input,))
        layer.first_transpose = layer.reshape_dims = layer.second_transpose = None
        layer.zero_is_placeholder = True  # TensorRT's default: a 0 in reshape_dims copies the input's dimension
        return layer

    def add_constant(self, shape, weights):
        shape = tuple(shape)
        layer = self._layer("IConstantLayer", lambda layer: torch.from_numpy(weights.numpy().reshape(shape)),
                            shape=shape, weights=weights)
        layer._check(weights.numpy().size == math.prod(shape), f"{weights.numpy().size} weights for shape {shape}")
        return layer

    def add_matrix_multiply(self, input0, op0, input1, op1):
        def f(layer):
            a, b = input0.value, input1.value
            layer._check(a.dim() == b.dim() and a.dim() >= 2, f"inputs of ranks {a.dim()} and {b.dim()} (equal ranks "
                         "of at least 2)")
            ops = (layer.op0.name, layer.op1.name)
            layer._check(set(ops) <= {"NONE", "TRANSPOSE"}, f"MatrixOperation {ops}: VECTOR is not modelled")
            a = a.transpose(-1, -2) if ops[0] == "TRANSPOSE" else a
            b = b.transpose(-1, -2) if ops[1] == "TRANSPOSE" else b
            layer._check(a.shape[-1] == b.shape[-2], f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}")
            layer._broadcast(a[..., :1, :1], b[..., :1, :1])  # the axes before the last two
            return torch.matmul(a, b)
        layer = self._layer("IMatrixMultiplyLayer", f, (input0, input1))
        layer.op0, layer.op1 = op0, op1
        return layer

    def add_softmax(self, input):
        def f(layer):
            v = input.value
            axes = layer._axes(layer.axes, v.dim())
            layer._check(len(axes) == 1, f"axes mask {layer.axes}: only one axis can be set")
            return torch.softmax(v, axes[0])
        layer = self._layer("ISoftMaxLayer", f, (input,))
        layer.axes = 1 << max(len(input.shape) - 3, 0)  # TensorRT's default: the rank minus three
        return layer

    def add_normalization(self, input, scale, bias, axesMask):
        def f(layer):
            x, s, b = input.value, scale.value, bias.value
            axes = layer._axes(layer.axes, x.dim())
            layer._check(layer.num_groups == 1, f"num_groups {layer.num_groups}: group normalization is not modelled")
            want = tuple(d if i in axes else 1 for i, d in enumerate(x.shape))
            for name, t in (("scale", s), ("bias", b)):
                layer._check(tuple(t.shape) == want, f"{name} of shape {tuple(t.shape)} for an input of shape "
                             f"{tuple(x.shape)} normalized over axes {axes} (expected {want})")
            mean = x.mean(axes, keepdim=True)
            var = ((x - mean) ** 2).mean(axes, keepdim=True)
            return (x - mean) / torch.sqrt(var + layer.epsilon) * s + b
        layer = self._layer("INormalizationLayer", f, (input, scale, bias))
        layer.axes, layer.epsilon, layer.num_groups = axesMask, 1e-5, 1  # TensorRT's default epsilon
        if "compute_precision" in layer._api:  # TensorRT 10: fp32 by default whatever the builder flags
            layer.compute_precision = self._enums["DataType"].FLOAT
        return layer

    def add_resize(self, input):
        def f(layer):
            v = input.value
            shape = tuple(layer.shape)
            assert shape[:2] == tuple(v.shape[:2]), (shape, v.shape)
            return _resize_axis(_resize_axis(v, 2, shape[2], layer), 3, shape[3], layer)
        layer = self._layer("IResizeLayer", f, (input,))
        return layer


class IBuilderConfig(Strict):
    TRT = "IBuilderConfig"

    def __init__(self, enums):
        self._flags = {enums["BuilderFlag"].TF32.name}  # TensorRT enables TF32 by default
        self.max_aux_streams = -1
        self._pools = {}

    def clear_flag(self, flag):
        self._flags.discard(flag.name)

    def set_flag(self, flag):
        self._flags.add(flag.name)

    def get_flag(self, flag):
        return flag.name in self._flags

    def set_memory_pool_limit(self, pool, pool_size):
        self._pools[pool.name] = pool_size


class Builder(Strict):
    TRT = "Builder"
    built: list = []

    def __init__(self, logger):
        self._logger = logger

    def create_network(self, flags=0):
        network = self._classes["INetworkDefinition"](self._version, self._classes)
        network._enums = self._enums
        return network

    def create_builder_config(self):
        return self._classes["IBuilderConfig"](self._enums)

    def build_serialized_network(self, network, config):
        names = [layer.name for layer in network._layers if layer.name]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:  # TensorRT's network validation: "layers must have distinct names"
            raise LayerError(f"TensorRT {self._version}: repeated layer names {repeated} (layers must have distinct "
                             "names)")
        Builder.built.append((network, config))
        blob = b"fake-engine-%d" % len(ENGINES)
        ENGINES[blob] = network
        return blob


ENGINES: dict[bytes, object] = {}  # serialized "engine" -> the network it was built from


class Runtime(Strict):
    TRT = "Runtime"

    def __init__(self, logger):
        self._logger = logger

    def deserialize_cuda_engine(self, serialized_engine):
        network = ENGINES.get(bytes(serialized_engine))
        return None if network is None else self._classes["ICudaEngine"](network, self._enums)


class ICudaEngine(Strict):
    """An engine of one input and one output (the adapter's networks)."""

    TRT = "ICudaEngine"

    def __init__(self, network, enums):
        self._network, self._enums = network, enums
        (self._input,) = network._inputs
        self._output = network._outputs[0]
        self._output.name = self._output.name or "output"

    @property
    def num_io_tensors(self):
        return 1 + len(self._network._outputs)

    @property
    def num_aux_streams(self):
        return 0

    def get_tensor_name(self, index):
        return [self._input, self._output.name][index]

    def get_tensor_shape(self, name):
        if name == self._input:
            return self._network._shapes[name]
        return tuple(self._output.shape)

    def get_tensor_mode(self, name):
        mode = self._enums["TensorIOMode"]
        return mode.INPUT if name == self._input else mode.OUTPUT

    def create_execution_context(self):
        return self._classes["IExecutionContext"](self)


class IExecutionContext(Strict):
    TRT = "IExecutionContext"

    def __init__(self, engine):
        self._engine = engine
        self._addresses: dict = {}

    def set_tensor_address(self, name, memory):
        self._addresses[name] = int(memory)
        return True

    def execute_async_v3(self, stream_handle):
        """Reads the input from, and writes the output to, the addresses set (fake CuPy memory)."""
        e = self._engine
        x = MEMORY[self._addresses[e._input]]
        (y,) = e._network._evaluate({e._input: x.copy()})
        MEMORY[self._addresses[e._output.name]][...] = y
        return True


MEMORY: dict[int, np.ndarray] = {}  # fake device pointer -> its host array (fake_cupy)


class Logger(Strict):
    TRT = "Logger"

    def __init__(self, min_severity=None):
        self.min_severity = min_severity


STANDINS = (Weights, ITensor, ILayer, IConvolutionLayer, IPoolingLayer, IActivationLayer, IReduceLayer, ISliceLayer,
            IElementWiseLayer, IConcatenationLayer, IShuffleLayer, IConstantLayer, IMatrixMultiplyLayer,
            IResizeLayer, ISoftMaxLayer, INormalizationLayer, IUnaryLayer, INetworkDefinition, IBuilderConfig, Builder,
            Logger, Runtime, ICudaEngine, IExecutionContext)
_STANDIN = {"value"}  # ITensor.value: how the tests read a tensor (not a TensorRT member)


def _missing(cls_name: str, version: str, name: str):
    def raise_(*args, **kwargs):
        raise AttributeError(f"TensorRT {version}: {cls_name} has no attribute {name!r}")
    return property(raise_)


def _plain(v):
    """``v`` as JSON data: enum members by name, weights by digest, tuples as lists."""
    if isinstance(v, EnumValue):
        return repr(v)
    if isinstance(v, Weights):
        a = v.numpy()
        return f"weights{list(a.shape)}:{hashlib.sha256(a.tobytes()).hexdigest()[:16]}"
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return v


def describe(network) -> list[dict]:
    """Every layer of ``network`` as data, in the order added: its class, the tensors it reads (by
    their index in the network), its arguments and the attributes set on it, and its output's shape.
    Two lowerings emit the same network exactly when their descriptions are equal."""
    index = {id(t): i for i, t in enumerate(network._tensors)}
    out = []
    for layer in network._layers:
        attrs = {k: _plain(v) for k, v in vars(layer).items() if not k.startswith("_")}
        if isinstance(layer, _Padded):
            attrs.update(pre_padding=list(layer._pre), post_padding=list(layer._post))
        out.append({"layer": layer.TRT, "inputs": [index[id(t)] for t in layer._inputs],
                    "args": {k: _plain(v) for k, v in layer._args.items()}, "attrs": attrs,
                    "output": index[id(layer._out)], "shape": list(layer._out.shape)})
    return out


def module(version: str = "10", without=()) -> types.ModuleType:
    """A module object standing in for ``tensorrt`` ``version`` ("10" or "11"); ``without`` names
    members (``"INetworkDefinition.add_normalization"``, ``"ActivationType.GELU_ERF"``) taken out of
    that version's manifest: a TensorRT that lacks them."""
    api = copy.deepcopy(MANIFEST["versions"][version])
    for item in without:
        owner, member = item.rsplit(".", 1)
        table = api["classes"] if owner in api["classes"] else api["enums"]
        table[owner] = [m for m in table[owner] if m != member]
    m = types.ModuleType("tensorrt")
    m.__version__ = f"{api['tag'].lstrip('v')}-standin"
    enums = {name.split(".")[-1] if "." not in name else name: make_enum(name, members)
             for name, members in api["enums"].items()}
    for name, enum in enums.items():
        if "." not in name:
            setattr(m, name, enum)
    classes: dict[str, type] = {}
    for base in STANDINS:
        members = frozenset(api["classes"].get(base.TRT, ()))
        if not members and base.TRT not in api["classes"]:
            raise AssertionError(f"TensorRT {version} has no class {base.TRT}")
        attrs = {"_api": members | _STANDIN if base is ITensor else members, "_version": version}
        for name in dir(base):
            if name.startswith("_") or name in ("TRT", "built") or name in members:
                continue
            if base is ITensor and name in _STANDIN:
                continue
            attrs[name] = _missing(base.TRT, version, name)  # the stand-in has it, this version does not
        classes[base.TRT] = type(base.__name__, (base,), attrs)
    for name in ("Builder", "Runtime", "ICudaEngine"):
        classes[name]._classes = classes
        classes[name]._enums = enums
    classes["Builder"].built = Builder.built
    # severities are class members of the logger (ILogger.Severity, exported)
    for sev in api["enums"].get("ILogger.Severity", ()):
        setattr(classes["Logger"], sev, EnumValue("ILogger.Severity", sev))
    python_names = {"Builder": "Builder", "Logger": "Logger", "Weights": "Weights", "Runtime": "Runtime"}
    for py, trt_name in python_names.items():
        assert py in api["module"], (version, py)
        setattr(m, py, classes[trt_name])
    datatypes = {"float32": "FLOAT", "float16": "HALF", "int32": "INT32", "int8": "INT8"}
    for attr, member in datatypes.items():
        if attr in api["module"]:
            setattr(m, attr, getattr(enums["DataType"], member))
    return m


def fake_cupy() -> types.ModuleType:
    """The few CuPy names the TensorRT adapter's runtime half uses (streams, events, device
    buffers addressed by pointer), on host memory: enough to run ``TRTCompiled`` on the stand-in."""
    cp = types.ModuleType("cupy")
    cp.float32 = np.float32
    counter = [1 << 20]

    class Array:
        def __init__(self, shape, dtype):
            self._a = np.zeros(shape, dtype=dtype)
            counter[0] += 4096
            self.data = types.SimpleNamespace(ptr=counter[0])
            MEMORY[self.data.ptr] = self._a
            self.shape = self._a.shape

        def set(self, arr, stream=None):
            self._a[...] = arr

    class Stream:
        def __init__(self, non_blocking=False):
            counter[0] += 1
            self.ptr = counter[0]

        def synchronize(self):
            pass

    class Event:
        def __init__(self, block=False, disable_timing=False, interprocess=False):
            pass

        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

    cp.empty = lambda shape, dtype=np.float32: Array(shape, dtype)
    cp.asnumpy = lambda a, stream=None, blocking=True: a._a.copy()
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 1, driverGetVersion=lambda: 12090,
                                    runtimeGetVersion=lambda: 12090,
                                    getDeviceProperties=lambda i: {"name": b"Stand-in GPU", "major": 9, "minor": 0})
    cp.cuda = types.SimpleNamespace(Stream=Stream, Event=Event, get_elapsed_time=lambda a, b: 1.0, runtime=runtime)
    return cp
