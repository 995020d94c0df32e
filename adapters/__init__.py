"""Framework adapters behind one protocol (see ``adapters.base``).

The registry maps names to ``module:attribute`` strings so that importing ``adapters``
imports no framework; a module is imported only when its adapter is asked for.
"""

from __future__ import annotations

import importlib

from .base import Adapter, Compiled

# name -> "module:attribute" (an Adapter instance). Filled in by each adapter module's author.
_REGISTRY: dict[str, str] = {}


class UnknownFramework(ValueError):
    pass


def register(name: str, target: str) -> None:
    _REGISTRY[name] = target


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> Adapter:
    if name not in _REGISTRY:
        raise UnknownFramework(f"unknown framework {name!r}; known: {', '.join(_REGISTRY)}")
    module, attr = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), attr)


__all__ = ["Adapter", "Compiled", "UnknownFramework", "get", "names", "register"]
