"""The consumers of op types, found rather than listed: every module of ``ios_core`` and
``adapters`` is imported, then every :class:`~ios_core.ir.OpVisitor` subclass they define and
every :class:`~ios_core.ir.ActivationMap` they made is collected. A new backend (an adapter's
emitter) is therefore checked by ``test_ir_visitor`` and ``test_op_facts`` without being named."""

from __future__ import annotations

import functools
import importlib
import pkgutil

from ios_core.ir import ActivationMap, OpVisitor, activation_maps

PACKAGES = ("ios_core", "adapters")

# The visitors that existed when discovery replaced the hand-written list: discovery must find at
# least these (a floor, so a broken walk cannot pass by finding nothing).
KNOWN_VISITORS = {
    "ios_core.kernels.OracleKernels", "ios_core.lowering.onnx._Builder", "ios_core.runtime.emit_torch.TorchEmitter",
    "ios_core.runtime.cuda.CudaLaunchers", "adapters.pytorch.ModuleEmitter", "adapters.tensorflow._Emitter",
    "adapters.tvm.RelaxEmitter", "adapters.tensorrt.NetworkBuilder", "adapters.jax.JaxEmitter",
}


@functools.cache
def backend_modules() -> tuple[str, ...]:
    """Every module of the packages, imported (frameworks are imported lazily, so this is cheap)."""
    names = []
    for pkg in PACKAGES:
        root = importlib.import_module(pkg)
        for info in pkgutil.walk_packages(root.__path__, pkg + "."):
            if info.name.endswith("__main__"):
                continue
            importlib.import_module(info.name)
            names.append(info.name)
    return tuple(names)


def qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def visitor_classes() -> list[type[OpVisitor]]:
    """Every OpVisitor subclass defined in the packages' modules, sorted by name."""
    backend_modules()
    found, todo = {}, list(OpVisitor.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] in PACKAGES:
            found[qualname(cls)] = cls
    return [found[k] for k in sorted(found)]


def tables() -> list[ActivationMap]:
    """Every ActivationMap the packages' modules made."""
    backend_modules()
    return activation_maps()
