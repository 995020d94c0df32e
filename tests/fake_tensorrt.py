"""A CPU stand-in for the part of TensorRT's network-definition API the adapter uses, with the
semantics its documentation gives each layer, evaluated with torch. It lets the tests check the
adapter's lowering (layer choice, attributes, slices, padding rules) against the oracle on a
machine without TensorRT or a GPU; every method name here also exists in the real bindings
(``tests/test_gpu_api.py`` checks that)."""

from __future__ import annotations

import types

import numpy as np
import torch
import torch.nn.functional as F


class Weights:
    def __init__(self, a):
        self.array = np.asarray(a, dtype=np.float32)


class Tensor:
    def __init__(self, thunk):
        self._thunk = thunk
        self._value = None
        self.name = ""

    @property
    def value(self) -> torch.Tensor:
        if self._value is None:
            self._value = self._thunk()
        return self._value

    @property
    def shape(self):
        return tuple(self.value.shape)


class Layer:
    def __init__(self, fn):
        self.name = ""
        self._out = Tensor(lambda: fn(self))

    def get_output(self, i):
        assert i == 0
        return self._out


FEED: dict[str, np.ndarray] = {}  # input name -> value (set before building: shapes are read while building)


class Network:
    def __init__(self):
        self.layers: list[Layer] = []
        self.inputs: dict[str, Tensor] = {}
        self.outputs: list[Tensor] = []
        self.feed = FEED

    @property
    def num_layers(self):
        return len(self.layers)

    def _layer(self, fn):
        layer = Layer(fn)
        self.layers.append(layer)
        return layer

    def add_input(self, name, dtype, shape):
        assert dtype == "float32"
        t = Tensor(lambda: torch.from_numpy(self.feed[name]))
        self.inputs[name] = t
        return t

    def mark_output(self, t):
        self.outputs.append(t)

    def add_convolution_nd(self, x, num_output_maps, kernel_shape, kernel, bias):
        w = torch.from_numpy(kernel.array)
        b = torch.from_numpy(bias.array)
        assert w.shape[0] == num_output_maps and tuple(w.shape[2:]) == tuple(kernel_shape)

        def f(layer):
            return F.conv2d(x.value, w, b, layer.stride_nd, layer.padding_nd, layer.dilation_nd, layer.num_groups)
        layer = self._layer(f)
        layer.stride_nd, layer.padding_nd, layer.dilation_nd, layer.num_groups = (1, 1), (0, 0), (1, 1), 1
        return layer

    def add_activation(self, x, kind):
        fn = {"RELU": torch.relu, "SIGMOID": torch.sigmoid, "TANH": torch.tanh}[kind]
        return self._layer(lambda layer: fn(x.value))

    def add_pooling_nd(self, x, kind, window_size):
        def f(layer):
            if kind == "MAX":
                return F.max_pool2d(x.value, window_size, layer.stride_nd, layer.padding_nd)
            return F.avg_pool2d(x.value, window_size, layer.stride_nd, layer.padding_nd,
                                count_include_pad=not layer.average_count_excludes_padding)
        layer = self._layer(f)
        layer.stride_nd, layer.padding_nd = tuple(window_size), (0, 0)
        layer.average_count_excludes_padding = True  # TensorRT's default
        return layer

    def add_reduce(self, x, op, axes, keep_dims):
        dims = tuple(i for i in range(4) if axes & (1 << i))

        def f(layer):
            v = x.value
            return v.mean(dims, keepdim=keep_dims) if op == "AVG" else v.amax(dims, keepdim=keep_dims)
        return self._layer(f)

    def add_slice(self, x, start, shape, stride):
        def f(layer):
            idx = tuple(slice(s, s + n * st, st) for s, n, st in zip(start, shape, stride))
            return x.value[idx]
        return self._layer(f)

    def add_elementwise(self, a, b, op):
        fn = {"SUM": torch.add, "PROD": torch.mul}[op]
        return self._layer(lambda layer: fn(a.value, b.value))

    def add_concatenation(self, inputs):
        layer = self._layer(lambda layer: torch.cat([t.value for t in inputs], layer.axis))
        layer.axis = 0  # TensorRT's default axis
        return layer

    def add_shuffle(self, x):
        layer = self._layer(lambda layer: x.value.reshape(layer.reshape_dims))
        return layer

    def add_constant(self, shape, weights):
        return self._layer(lambda layer: torch.from_numpy(weights.array.reshape(shape)))

    def add_matrix_multiply(self, a, op_a, b, op_b):
        def f(layer):
            av = a.value.t() if op_a == "TRANSPOSE" else a.value
            bv = b.value.t() if op_b == "TRANSPOSE" else b.value
            return av @ bv
        return self._layer(f)


class BuilderConfig:
    def __init__(self):
        self.flags = {"TF32"}  # TensorRT enables TF32 by default
        self.max_aux_streams = -1
        self.pools = {}

    def clear_flag(self, flag):
        self.flags.discard(flag)

    def set_flag(self, flag):
        self.flags.add(flag)

    def get_flag(self, flag):
        return flag in self.flags

    def set_memory_pool_limit(self, pool, size):
        self.pools[pool] = size


class Builder:
    built: list = []

    def __init__(self, logger):
        self.logger = logger

    def create_network(self, flags=0):
        return Network()

    def create_builder_config(self):
        return BuilderConfig()

    def build_serialized_network(self, network, config):
        Builder.built.append((network, config))
        return b"fake-engine"


class Logger:
    WARNING = "WARNING"

    def __init__(self, level=None):
        self.level = level


def module() -> types.ModuleType:
    """A module object standing in for ``tensorrt``."""
    m = types.ModuleType("tensorrt")
    m.__version__ = "0.0-fake"
    m.Logger, m.Builder, m.Weights = Logger, Builder, Weights
    m.float32 = "float32"
    m.BuilderFlag = types.SimpleNamespace(TF32="TF32", FP16="FP16")
    m.MemoryPoolType = types.SimpleNamespace(WORKSPACE="WORKSPACE")
    m.ActivationType = types.SimpleNamespace(RELU="RELU", SIGMOID="SIGMOID", TANH="TANH")
    m.PoolingType = types.SimpleNamespace(MAX="MAX", AVERAGE="AVERAGE")
    m.ReduceOperation = types.SimpleNamespace(AVG="AVG", MAX="MAX")
    m.ElementWiseOperation = types.SimpleNamespace(SUM="SUM", PROD="PROD")
    m.MatrixOperation = types.SimpleNamespace(NONE="NONE", TRANSPOSE="TRANSPOSE")
    return m
