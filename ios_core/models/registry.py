"""The model registry: builders register under a name; ``get`` builds a fresh graph.

``names()`` is every registered model; ``default_names()`` the ones a sweep's ``--models all``
means: a model registered with ``in_all=False`` (the transformers and ConvNeXt, added after the
CNN zoo) runs only when named, so ``all`` keeps meaning the CNN zoo it meant."""

from __future__ import annotations

from collections.abc import Callable

from ios_core.ir import Graph

_BUILDERS: dict[str, Callable[..., Graph]] = {}
_INFO: dict[str, str] = {}
_NOT_IN_ALL: set[str] = set()


class UnknownModel(ValueError):
    pass


def register(name: str, description: str = "", in_all: bool = True):
    def deco(fn: Callable[..., Graph]):
        if name in _BUILDERS:
            raise ValueError(f"model {name!r} registered twice")
        _BUILDERS[name] = fn
        if not in_all:
            _NOT_IN_ALL.add(name)
        _INFO[name] = description or (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else description
        return fn

    return deco


def names() -> list[str]:
    """Every registered model, in registration order."""
    return list(_BUILDERS)


def default_names() -> list[str]:
    """The models ``--models all`` means: every registered one but those registered ``in_all=False``."""
    return [n for n in _BUILDERS if n not in _NOT_IN_ALL]


def describe(name: str) -> str:
    return _INFO.get(name, "")


def get(name: str, **options) -> Graph:
    """Build the named model (without weights: call ``graph.init_weights(seed)``)."""
    if name not in _BUILDERS:
        raise UnknownModel(f"unknown model {name!r}; known models: {', '.join(_BUILDERS)}")
    return _BUILDERS[name](**options)
