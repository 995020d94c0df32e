"""Kernel providers: the libraries the IOS CPU runtime can execute its pieces with.

    from ios_core.runtime import providers
    providers.names()                      # ["torch", "onnxruntime", "openvino"]
    p = providers.get("onnxruntime")
    p.available()                          # None, or why not here
    kernel = p.compile(piece, batch_size=1, threads=2)

See ``base`` for the protocol and docs/runtime.md ("Kernel providers").
"""

from __future__ import annotations

from ios_core.runtime.providers.base import Kernel, Piece, Provider, make_piece
from ios_core.runtime.providers.onnxruntime import ONNXRUNTIME
from ios_core.runtime.providers.openvino import OPENVINO
from ios_core.runtime.providers.settings import provider_settings
from ios_core.runtime.providers.torch import TORCH

_PROVIDERS: dict[str, Provider] = {p.name: p for p in (TORCH, ONNXRUNTIME, OPENVINO)}
DEFAULT = "torch"


def names() -> list[str]:
    return list(_PROVIDERS)


def distribution(name: str) -> str:
    """The distribution whose version identifies provider ``name``'s kernels (for caches)."""
    return get(name).requires[0]


def get(name: str) -> Provider:
    try:
        return _PROVIDERS[name]
    except KeyError:
        raise ValueError(f"unknown provider {name!r}; choose one of {', '.join(_PROVIDERS)}") from None


def require(name: str) -> Provider:
    """The provider, or a RuntimeError saying why it cannot run here."""
    p = get(name)
    reason = p.available()
    if reason is not None:
        raise RuntimeError(f"provider {name} cannot run here: {reason}")
    return p


__all__ = ["DEFAULT", "Kernel", "Piece", "Provider", "distribution", "get", "make_piece", "names", "provider_settings",
           "require"]
