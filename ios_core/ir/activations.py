"""The IR's activation kinds, declared once, and the table type every backend maps them with.

Adding an activation is one entry in :data:`ACTIVATION_KINDS` here, then one entry in each
backend's :class:`ActivationMap`; ``tests/test_op_facts.py`` fails until every backend has it
(it finds the backends' tables by importing ``ios_core`` and ``adapters``).

A kind without parameters may be fused into a conv, linear or affine node (their ``act``
attribute); a kind with parameters (``alpha``, ``beta``) exists only as an ``activation`` node.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ActivationKind:
    """One activation: its name, the node attributes it reads (of ``alpha``, ``beta``) and its
    definition (what every backend must compute, the oracle's ``ios_core.kernels``)."""

    name: str
    formula: str
    params: tuple[str, ...] = ()

    @property
    def fusable(self) -> bool:
        """Whether a conv, linear or affine node may carry it as its fused ``act``."""
        return not self.params


# The order is the IR's (and the fused kinds come first): keep it, append new kinds (a fusable kind
# after the last fusable one).
ACTIVATION_KINDS: dict[str, ActivationKind] = {k.name: k for k in (
    ActivationKind("identity", "x"),
    ActivationKind("relu", "max(x, 0)"),
    ActivationKind("sigmoid", "1 / (1 + exp(-x))"),
    ActivationKind("tanh", "tanh(x)"),
    ActivationKind("relu6", "clip(x, 0, 6)"),
    ActivationKind("hardswish", "x * relu6(x + 3) / 6"),
    ActivationKind("silu", "x * sigmoid(x)"),
    ActivationKind("gelu", "x * (1 + erf(x / sqrt(2))) / 2"),
    ActivationKind("gelu_tanh", "x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) / 2"),
    ActivationKind("leaky_relu", "x if x > 0 else alpha * x", ("alpha",)),
    ActivationKind("hardsigmoid", "clip(alpha * x + beta, 0, 1)", ("alpha", "beta")),
    ActivationKind("clip", "clip(x, alpha, beta)", ("alpha", "beta")),
)}

FUSED_ACTIVATIONS: tuple[str, ...] = tuple(n for n, k in ACTIVATION_KINDS.items() if k.fusable)
PARAM_ACTIVATIONS: tuple[str, ...] = tuple(n for n, k in ACTIVATION_KINDS.items() if not k.fusable)
ACTIVATIONS: tuple[str, ...] = FUSED_ACTIVATIONS + PARAM_ACTIVATIONS

# Every ActivationMap made (weakly held, by id): what the coverage test checks.
_MAPS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class ActivationMap(dict):
    """A backend's one table from IR activation kind to its own form of that activation (an
    op name, a function, a code). ``fused_only`` marks a table consulted only for the fused
    ``act`` attribute of conv, linear and affine nodes (it then needs only the fusable kinds).

    Looking up a kind the table lacks raises NotImplementedError naming the backend;
    :meth:`missing` lists what it lacks against the IR's current kinds."""

    def __init__(self, backend: str, entries: Mapping | Iterable = (), *, fused_only: bool = False):
        super().__init__(entries)
        self.backend = str(backend)
        self.fused_only = bool(fused_only)
        _MAPS[id(self)] = self

    def __missing__(self, kind):
        raise NotImplementedError(f"{self.backend}: no mapping for activation {kind!r}")

    def required(self) -> tuple[str, ...]:
        """The kinds this table must map: every kind, or the fusable ones for a fused-only table."""
        from ios_core.ir import activations as facts  # read at call time: a test may add a kind

        return tuple(n for n, k in facts.ACTIVATION_KINDS.items() if k.fusable or not self.fused_only)

    def missing(self) -> list[str]:
        return [k for k in self.required() if not dict.__contains__(self, k)]

    def unknown(self) -> list[str]:
        from ios_core.ir import activations as facts

        return [k for k in self if k not in facts.ACTIVATION_KINDS]

    def __repr__(self) -> str:
        return f"ActivationMap({self.backend!r}, {len(self)} kinds{', fused only' if self.fused_only else ''})"


def activation_maps() -> list[ActivationMap]:
    """Every backend table made so far in this process (those of imported modules)."""
    return sorted(_MAPS.values(), key=lambda m: m.backend)
