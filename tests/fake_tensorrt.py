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
reshape and transposes, resizes their mode, coordinate transformation and rounding.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

MANIFEST = json.loads((Path(__file__).resolve().parent / "data" / "tensorrt_api.json").read_text())
VERSIONS = tuple(sorted(MANIFEST["versions"]))  # ("10", "11")
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
        self._array = np.asarray(a, dtype=np.float32)

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


class ILayer(Strict):
    TRT = "ILayer"

    def __init__(self, network, fn):
        self._network = network
        self.name = ""
        self._out = network._tensor(lambda: fn(self))

    def get_output(self, index):
        assert index == 0
        return self._out


def _pads(layer):
    (pt, pl), (pb, pr) = layer._pre, layer._post
    return (pl, pr, pt, pb)


class _Padded(ILayer):
    """``pre_padding``/``post_padding``; ``padding_nd`` sets both (TensorRT's semantics)."""

    def __init__(self, network, fn):
        super().__init__(network, fn)
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

    def _layer(self, kind: str, fn):
        layer = self._cls[kind](self, fn)
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
        layer = self._layer("IConvolutionLayer", f)
        layer.stride_nd, layer.dilation_nd, layer.num_groups = (1, 1), (1, 1), 1
        return layer

    def add_activation(self, input, type):
        def f(layer):
            return _activation(type.name, layer.alpha, layer.beta)(input.value)
        layer = self._layer("IActivationLayer", f)
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
        layer = self._layer("IPoolingLayer", f)
        layer.stride_nd = (1, 1)
        layer.average_count_excludes_padding = True  # TensorRT's default
        return layer

    def add_reduce(self, input, op, axes, keep_dims):
        dims = tuple(i for i in range(4) if axes & (1 << i))

        def f(layer):
            v = input.value
            return v.mean(dims, keepdim=keep_dims) if op.name == "AVG" else v.amax(dims, keepdim=keep_dims)
        return self._layer("IReduceLayer", f)

    def add_slice(self, input, start, shape, stride):
        def f(layer):
            idx = tuple(slice(s, s + n * st, st) for s, n, st in zip(start, shape, stride))
            return input.value[idx]
        return self._layer("ISliceLayer", f)

    def add_elementwise(self, input1, input2, op):
        fn = {"SUM": torch.add, "PROD": torch.mul}[op.name]
        return self._layer("IElementWiseLayer", lambda layer: fn(input1.value, input2.value))

    def add_concatenation(self, inputs):
        layer = self._layer("IConcatenationLayer", lambda layer: torch.cat([t.value for t in inputs], layer.axis))
        layer.axis = 0  # TensorRT's default axis
        return layer

    def add_shuffle(self, input):
        def f(layer):
            v = input.value
            if layer.first_transpose is not None:
                v = v.permute(*layer.first_transpose)
            if layer.reshape_dims is not None:
                v = v.reshape(tuple(layer.reshape_dims))
            if layer.second_transpose is not None:
                v = v.permute(*layer.second_transpose)
            return v.contiguous()
        layer = self._layer("IShuffleLayer", f)
        layer.first_transpose = layer.reshape_dims = layer.second_transpose = None
        return layer

    def add_constant(self, shape, weights):
        return self._layer("IConstantLayer", lambda layer: torch.from_numpy(weights.numpy().reshape(shape)))

    def add_matrix_multiply(self, input0, op0, input1, op1):
        def f(layer):
            av = input0.value.t() if op0.name == "TRANSPOSE" else input0.value
            bv = input1.value.t() if op1.name == "TRANSPOSE" else input1.value
            return av @ bv
        return self._layer("IMatrixMultiplyLayer", f)

    def add_resize(self, input):
        def f(layer):
            v = input.value
            shape = tuple(layer.shape)
            assert shape[:2] == tuple(v.shape[:2]), (shape, v.shape)
            return _resize_axis(_resize_axis(v, 2, shape[2], layer), 3, shape[3], layer)
        layer = self._layer("IResizeLayer", f)
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
        return self._classes["INetworkDefinition"](self._version, self._classes)

    def create_builder_config(self):
        return self._classes["IBuilderConfig"](self._enums)

    def build_serialized_network(self, network, config):
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
            IResizeLayer, INetworkDefinition, IBuilderConfig, Builder, Logger, Runtime, ICudaEngine, IExecutionContext)
_STANDIN = {"value"}  # ITensor.value: how the tests read a tensor (not a TensorRT member)


def _missing(cls_name: str, version: str, name: str):
    def raise_(*args, **kwargs):
        raise AttributeError(f"TensorRT {version}: {cls_name} has no attribute {name!r}")
    return property(raise_)


def module(version: str = "10") -> types.ModuleType:
    """A module object standing in for ``tensorrt`` ``version`` ("10" or "11")."""
    api = MANIFEST["versions"][version]
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
