"""One visitor per consumer of op types: each covers every operator type of the IR or declares
which it refuses and why; the op-type lists derive from NODE_TYPES."""

from __future__ import annotations

import pytest

from ios_core.ir import NODE_TYPES, OPERATOR_TYPES, Activation, OpVisitor, Placeholder, whole
from tests.op_backends import KNOWN_VISITORS, qualname, visitor_classes

# every consumer of op types, found by importing ios_core and adapters (tests/op_backends.py)
VISITORS = {qualname(cls): cls for cls in visitor_classes()}


def test_discovery_finds_every_visitor():
    assert KNOWN_VISITORS <= set(VISITORS), KNOWN_VISITORS - set(VISITORS)


@pytest.mark.parametrize("name", sorted(VISITORS))
def test_every_visitor_covers_every_operator_type_or_says_why_not(name):
    cls = VISITORS[name]
    cov = cls.coverage()
    assert cov["misses"] == [], f"{name} neither handles nor refuses {cov['misses']}"
    assert sorted(cov["handles"] + cov["refuses"]) == sorted(OPERATOR_TYPES)
    for kind in cov["refuses"]:
        assert len(cls.REFUSES[kind]) > 10, f"{name} refuses {kind!r} without a reason"
    # an alias points at a method that exists
    for kind, target in cls.ALIASES.items():
        assert kind in OPERATOR_TYPES and callable(getattr(cls, "visit_" + target, None)), (kind, target)


def test_a_new_operator_type_fails_the_coverage_until_every_visitor_has_it(monkeypatch):
    import ios_core.ir.visitor as visitor

    monkeypatch.setattr(visitor, "OPERATOR_TYPES", (*OPERATOR_TYPES, "newop"))
    for name, cls in VISITORS.items():
        assert cls.coverage()["misses"] == ["newop"], name


def test_dispatch_aliases_and_refusals():
    class Probe(OpVisitor):
        ALIASES = {"relu": "activation"}
        REFUSES = {"pool": "pools are out of scope for this probe"}

        def visit_activation(self, node, tag):
            return ("activation", node.name, tag)

    x = Placeholder("x", (2, 3, 3))
    act = Activation("a", [[whole(x)]], act_type="tanh")
    assert Probe().visit(act, 7) == ("activation", "a", 7)
    assert Probe()(act, 8) == ("activation", "a", 8)
    from ios_core.ir import Pool, Relu

    relu = Relu("r", [[whole(x)]])
    assert Probe().visit(relu, 1)[0] == "activation"
    pool = Pool("p", [[whole(x)]], pool_type="max", kernel=(2, 2), stride=(1, 1))
    with pytest.raises(NotImplementedError, match="Probe cannot handle node 'p' of type 'pool': pools are out"):
        Probe().visit(pool, 0)
    cov = Probe.coverage()
    assert cov["handles"] == ["activation", "relu"] and cov["refuses"] == ["pool"]
    assert set(cov["misses"]) == set(OPERATOR_TYPES) - {"activation", "relu", "pool"}


def test_op_type_lists_derive_from_node_types():
    from ios_core.cost.features import OP_TYPES
    from ios_core.lowering.walk import SUPPORTED_TYPES

    assert OPERATOR_TYPES == tuple(t for t in NODE_TYPES if t not in ("placeholder", "sequential"))
    assert OP_TYPES == OPERATOR_TYPES
    assert SUPPORTED_TYPES == (*OPERATOR_TYPES, "sequential")
    # the learned cost model's feature order is unchanged by the derivation
    # (the general-tensor types of issue 56 come after the feature-map types, which keep their places)
    assert OP_TYPES == ("conv", "pool", "element", "identity", "activation", "relu", "flatten", "linear", "affine",
                        "shuffle", "resize", "matmul", "softmax", "layernorm", "dense", "reshape", "transpose",
                        "constant", "prepend", "l2norm")
