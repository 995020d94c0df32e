"""The model registry: builders register under a name; ``get`` builds a fresh graph."""

from __future__ import annotations

from collections.abc import Callable

from ios_core.ir import Graph

_BUILDERS: dict[str, Callable[..., Graph]] = {}
_INFO: dict[str, str] = {}


class UnknownModel(ValueError):
    pass


def register(name: str, description: str = ""):
    def deco(fn: Callable[..., Graph]):
        if name in _BUILDERS:
            raise ValueError(f"model {name!r} registered twice")
        _BUILDERS[name] = fn
        _INFO[name] = description or (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else description
        return fn

    return deco


def names() -> list[str]:
    return list(_BUILDERS)


def describe(name: str) -> str:
    return _INFO.get(name, "")


def get(name: str, **options) -> Graph:
    """Build the named model (without weights: call ``graph.init_weights(seed)``)."""
    if name not in _BUILDERS:
        raise UnknownModel(f"unknown model {name!r}; known models: {', '.join(_BUILDERS)}")
    return _BUILDERS[name](**options)
