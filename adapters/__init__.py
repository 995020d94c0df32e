"""Framework adapters behind one protocol (see ``adapters.base``).

The registry maps names to ``module:attribute`` strings so that importing ``adapters``
imports no framework; a module is imported only when its adapter is asked for.
"""

from __future__ import annotations

import importlib
import importlib.util

from .base import Adapter, Compiled

# name -> "module:attribute" (an Adapter instance). A name is listed only once its module
# exists, so each adapter lands by adding its own module.
_REGISTRY: dict[str, str] = {
    "ios": "adapters.ios:IOS",  # the IOS runtime on a scheduled graph (ios_core.runtime)
    "torch": "adapters.pytorch:EAGER",
    "torch-compile": "adapters.pytorch:COMPILE",
    "torch-compile-cudagraphs": "adapters.pytorch:COMPILE_CUDAGRAPHS",  # GPU only
    "tensorflow": "adapters.tensorflow:PLAIN",
    "tensorflow-xla": "adapters.tensorflow:XLA",
    "tflite": "adapters.tflite:TFLITE",  # TensorFlow Lite (fp32, int8), CPU; named, not in the default sweep
    "jax-xla": "adapters.jax:JAX_XLA",  # JAX jit (XLA), CPU and CUDA
    "onnxruntime": "adapters.onnxruntime:SEQUENTIAL",
    "onnxruntime-parallel": "adapters.onnxruntime:PARALLEL",
    "openvino": "adapters.openvino:OPENVINO",
    "tvm": "adapters.tvm:DEFAULT",
    "tvm-tuned": "adapters.tvm:TUNED",
    "tvm-cudnn": "adapters.tvm:CUDNN",  # GPU only
    "tensorrt": "adapters.tensorrt:TENSORRT",  # GPU only
    "tensorrt-noaux": "adapters.tensorrt:TENSORRT_NOAUX",  # GPU only
}


class UnknownFramework(ValueError):
    pass


def register(name: str, target: str) -> None:
    """Add an adapter (e.g. a test-only one) under ``name``: ``target`` is "module:attribute"."""
    _REGISTRY[name] = target


def names() -> list[str]:
    return [name for name, target in _REGISTRY.items() if _module_exists(target.split(":")[0])]


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def get(name: str) -> Adapter:
    if name not in names():
        raise UnknownFramework(f"unknown framework {name!r}; known: {', '.join(_REGISTRY)}")
    module, attr = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), attr)


__all__ = ["Adapter", "Compiled", "UnknownFramework", "get", "names", "register"]
