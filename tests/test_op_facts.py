"""Facts about ops are declared once, in the IR (ios_core/ir/activations.py, the node classes'
COMPOSED / VIEW / INTO_CONCAT / WINDOWED), and every backend maps the activation kinds in one
table: a kind added to the IR fails here until every backend's table has it."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import ios_core.ir.activations as facts
from ios_core.ir import (
    ACTIVATION_KINDS,
    ACTIVATIONS,
    FUSED_ACTIVATIONS,
    IR_ALIASES,
    NODE_TYPES,
    PARAM_ACTIVATIONS,
    Activation,
    ActivationKind,
    ActivationMap,
    GraphBuilder,
    OpVisitor,
    Placeholder,
    whole,
)
from tests.op_backends import KNOWN_VISITORS, qualname, tables, visitor_classes

# the backends whose tables existed when the tables were introduced: each must still be found
KNOWN_TABLES = {"torch (oracle)", "torch runtime (fused)", "pytorch", "onnx", "tvm", "tensorrt", "tensorflow",
                "cuda", "jax"}


def _maps_activations(cls) -> bool:
    """Whether a visitor emits activations: it handles activation nodes or a node type with a
    fused ``act`` (conv, linear, affine)."""
    fused = [t for t, c in NODE_TYPES.items() if any(k == "act" for k, _ in c.ATTRS)]
    return any(cls.handles(t) for t in ("activation", *fused))


# ---- the declaration ------------------------------------------------------------------------------
def test_the_kind_lists_derive_from_the_one_declaration():
    assert ACTIVATIONS == tuple(ACTIVATION_KINDS)  # the fusable kinds come first, in declared order
    assert FUSED_ACTIVATIONS == tuple(n for n, k in ACTIVATION_KINDS.items() if not k.params)
    assert PARAM_ACTIVATIONS == ("leaky_relu", "hardsigmoid", "clip")
    assert all(set(k.params) <= {"alpha", "beta"} and k.formula for k in ACTIVATION_KINDS.values())
    x = Placeholder("x", (2, 3, 3))
    for kind in ACTIVATIONS:  # every declared kind is a valid activation node
        Activation(f"a_{kind}", [[whole(x)]], act_type=kind, alpha=0.0, beta=1.0)
    with pytest.raises(ValueError, match="act_type must be one of identity, relu, .*clip, got .swish2."):
        Activation("bad", [[whole(x)]], act_type="swish2")
    b = GraphBuilder("g", (2, 3, 3))
    with pytest.raises(ValueError, match="fused activation"):  # a parametrized kind is never fused
        b.conv(b.input, 2, 1, act="leaky_relu")


# ---- every backend has one table, and it is complete ----------------------------------------------
def test_every_backend_table_maps_every_activation_kind():
    found = {t.backend: t for t in tables()}
    assert KNOWN_TABLES <= set(found), KNOWN_TABLES - set(found)
    for name, table in found.items():
        assert table.missing() == [], f"backend {name!r} has no mapping for {table.missing()}"
        assert table.unknown() == [], f"backend {name!r} maps kinds the IR lacks: {table.unknown()}"


def test_every_visitor_that_emits_activations_names_its_complete_table():
    visitors = visitor_classes()
    assert KNOWN_VISITORS <= {qualname(c) for c in visitors}
    for cls in visitors:
        if not _maps_activations(cls):
            continue
        table = cls.ACTIVATIONS
        assert isinstance(table, ActivationMap), (
            f"{qualname(cls)} emits activations but names no ActivationMap in ACTIVATIONS (got {type(table)})")
        assert not table.fused_only and table.missing() == [], (qualname(cls), table.missing())


def test_a_new_activation_kind_fails_until_every_backend_maps_it(monkeypatch):
    kinds = dict(ACTIVATION_KINDS)
    kinds["softsign"] = ActivationKind("softsign", "x / (1 + |x|)")  # fusable: even fused-only tables need it
    kinds["elu"] = ActivationKind("elu", "x if x > 0 else alpha * (exp(x) - 1)", ("alpha",))
    monkeypatch.setattr(facts, "ACTIVATION_KINDS", kinds)
    found = tables()
    assert KNOWN_TABLES <= {t.backend for t in found}
    for table in found:
        assert table.missing() == (["softsign"] if table.fused_only else ["softsign", "elu"]), table
    for cls in visitor_classes():
        if _maps_activations(cls) and isinstance(cls.ACTIVATIONS, ActivationMap):
            assert "elu" in cls.ACTIVATIONS.missing()


def test_a_missing_kind_raises_naming_the_backend():
    table = ActivationMap("probe", {"identity": 0}, fused_only=True)
    assert table.missing() == [k for k in FUSED_ACTIVATIONS if k != "identity"]
    with pytest.raises(NotImplementedError, match="probe: no mapping for activation 'relu'"):
        table["relu"]
    assert table["identity"] == 0


# ---- tables that can be checked here against the oracle or their source --------------------------
def test_the_cuda_codes_are_distinct_and_each_is_a_case_of_ios_act():
    from ios_core.runtime.cuda_kernels import ACT_CODES, CUDA_SOURCE, CUDNN_ACT_OPS

    assert len(set(ACT_CODES.values())) == len(ACT_CODES)
    body = CUDA_SOURCE[CUDA_SOURCE.index("float ios_act("):]
    body = body[:body.index("\n}\n")]
    cases = {int(c) for c in re.findall(r"case (\d+):", body)}
    assert ACT_CODES["identity"] == 0 and "default: return v;" in body
    assert cases == set(ACT_CODES.values()) - {0}
    assert set(CUDNN_ACT_OPS) <= set(FUSED_ACTIVATIONS)


def test_the_torch_runtime_fast_paths_compute_the_oracles_activation():
    from ios_core.kernels import act_fn, activation
    from ios_core.runtime.emit_torch import FUSED_ACTS

    x = torch.linspace(-8.0, 8.0, 97).reshape(1, 1, 97, 1)
    for kind in FUSED_ACTIVATIONS:
        want = act_fn(kind)(x.clone())
        inplace, into = FUSED_ACTS[kind]
        if inplace is not None:
            torch.testing.assert_close(inplace(x.clone()), want)
        if into is not None:
            out = torch.empty_like(x)
            into(x.clone(), out)
            torch.testing.assert_close(out, want)
    np.testing.assert_allclose(activation(x, "clip", -1.0, 2.0).numpy(), np.clip(x.numpy(), -1.0, 2.0))
    np.testing.assert_allclose(activation(x, "leaky_relu", 0.1).numpy(), np.where(x > 0, x, 0.1 * x), rtol=1e-6)


# ---- node facts -------------------------------------------------------------------------------------
def test_node_facts_are_declared_on_the_node_classes():
    def having(fact):
        return {t for t, c in NODE_TYPES.items() if getattr(c, fact)}

    assert having("COMPOSED") == {"identity", "element"}
    assert having("VIEW") == {"identity", "element", "flatten", "reshape"}
    assert {t for t, c in NODE_TYPES.items() if not c.INTO_CONCAT} == {"identity", "flatten", "reshape", "prepend"}
    assert having("WINDOWED") == {"conv", "pool"}
    assert having("OPERANDS") == {"matmul"}
    assert {t for t, c in NODE_TYPES.items() if c.RANKS == (3,)} == {"conv", "pool", "shuffle", "resize"}
    assert IR_ALIASES == {"element": "identity"}


def test_visitors_get_the_ir_aliases_by_default_and_may_override_them():
    class Plain(OpVisitor):
        def visit_identity(self, node):
            return "identity"

    class Own(Plain):
        def visit_element(self, node):
            return "element"

    class Declared(Plain):
        ALIASES = {"relu": "identity"}

    class NoIdentity(OpVisitor):
        def visit_conv(self, node):
            return "conv"

    x = Placeholder("x", (2, 3, 3))
    el = NODE_TYPES["element"]("e", [[whole(x), whole(x)]])
    assert Plain().visit(el) == "identity" and Own().visit(el) == "element"
    assert Declared.ALIASES == {"element": "identity", "relu": "identity"}
    assert NoIdentity.ALIASES == {} and not NoIdentity.handles("element")
    # no backend repeats an alias the IR already declares
    for cls in visitor_classes():
        repeated = {k: v for k, v in cls._declared_aliases.items() if IR_ALIASES.get(k) == v}
        assert repeated == {}, f"{qualname(cls)} repeats the IR's aliases {repeated}"
