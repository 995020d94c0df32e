"""One way to do something per operator type: a visitor dispatching on ``node.TYPE``.

    class Emitter(OpVisitor):
        REFUSES = {"shuffle": "this library has no channel shuffle"}   # declared, with the reason
        def visit_conv(self, node, x): ...
        def visit_pool(self, node, x): ...

    y = Emitter().visit(node, x)        # calls visit_<node.TYPE>(node, x)

The model is torch.fx's ``Interpreter.run_node`` (``getattr(self, n.op)``). Every consumer of
op types (the oracle's kernels, the ONNX exporter, the runtime's torch and CUDA emitters, each
adapter's emitter) is one visitor; ``tests/test_ir_visitor.py`` checks that each covers every
operator type of :data:`OPERATOR_TYPES` or declares in ``REFUSES`` why it does not. Adding an
operator type therefore fails that test until every visitor has a ``visit_<type>`` method or a
reason (docs/architecture.md, "Adding an operator").

Several types may share one method: ``ALIASES = {"relu": "activation"}`` sends ``relu`` nodes
to ``visit_activation``. The IR's own aliases come by default (:data:`IR_ALIASES`, from the node
classes' ``COMPOSED`` fact): an ``element`` node goes to ``visit_identity`` when the visitor has
that method and no ``visit_element``, since the composition already combined its terms.

A visitor that maps activation kinds names its table in ``ACTIVATIONS`` (an
:class:`~.activations.ActivationMap`); ``tests/test_op_facts.py`` checks it maps every kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ios_core.ir.node_types import NODE_TYPES
from ios_core.ir.nodes import Node

# The types a visitor handles: every node type except the input placeholder and the Sequential
# container (a walk expands Sequential nodes into their operators, ``leaf_nodes``).
STRUCTURAL_TYPES = ("placeholder", "sequential")
OPERATOR_TYPES: tuple[str, ...] = tuple(t for t in NODE_TYPES if t not in STRUCTURAL_TYPES)
# Types every visitor handles with another type's method unless it says otherwise: a composed
# type (Node.COMPOSED: its output is its composed input) is an identity to a visitor.
IR_ALIASES: dict[str, str] = {t: "identity" for t, cls in NODE_TYPES.items() if cls.COMPOSED and t != "identity"}


class OpVisitor:
    """Dispatch on the node type. Subclasses define ``visit_<type>(node, *args, **kwargs)``
    methods, map types onto another type's method in ``ALIASES``, and name the types they do
    not handle, with the reason, in ``REFUSES``; a refused or unknown type raises
    NotImplementedError naming the visitor, the node and the reason."""

    ALIASES: ClassVar[dict[str, str]] = {}
    REFUSES: ClassVar[dict[str, str]] = {}
    # the visitor's table of activation kinds (an ActivationMap), if it maps them
    ACTIVATIONS: ClassVar[Mapping[str, Any] | None] = None
    _declared_aliases: ClassVar[dict[str, str]] = {}  # ALIASES as the classes wrote them

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Add the IR's aliases (IR_ALIASES) the subclass neither overrides nor could follow:
        one applies when the class has the target's method and none of the type's own."""
        super().__init_subclass__(**kwargs)
        declared = {**cls._declared_aliases, **cls.__dict__.get("ALIASES", {})}
        defaults = {kind: target for kind, target in IR_ALIASES.items()
                    if callable(getattr(cls, "visit_" + target, None)) and getattr(cls, "visit_" + kind, None) is None}
        cls._declared_aliases = declared
        cls.ALIASES = {**defaults, **declared}

    def visit(self, node: Node, *args: Any, **kwargs: Any) -> Any:
        kind = node.TYPE
        method = getattr(self, "visit_" + self.ALIASES.get(kind, kind), None)
        if method is None:
            return self.refuse(node, *args, **kwargs)
        return method(node, *args, **kwargs)

    __call__ = visit

    def refuse(self, node: Node, *args: Any, **kwargs: Any) -> Any:
        """What a node type without a method does: raise, with the declared reason."""
        raise NotImplementedError(self.refusal(node))

    @classmethod
    def refusal(cls, node: Node) -> str:
        why = cls.REFUSES.get(node.TYPE, "no visit method for this type")
        return f"{cls.__name__} cannot handle node {node.name!r} of type {node.TYPE!r}: {why}"

    @classmethod
    def check_handles(cls, nodes) -> None:
        """Raise NotImplementedError (the declared reason) for the first of ``nodes`` (operators)
        this visitor does not handle: a converter calls it before doing any work."""
        for node in nodes:
            if not cls.handles(node.TYPE):
                raise NotImplementedError(cls.refusal(node))

    @classmethod
    def handles(cls, kind: str) -> bool:
        return callable(getattr(cls, "visit_" + cls.ALIASES.get(kind, kind), None))

    @classmethod
    def coverage(cls) -> dict[str, list[str]]:
        """Which operator types this visitor ``handles``, ``refuses`` (with a declared reason)
        and ``misses`` (neither: a defect)."""
        out: dict[str, list[str]] = {"handles": [], "refuses": [], "misses": []}
        for kind in OPERATOR_TYPES:
            if cls.handles(kind):
                out["handles"].append(kind)
            elif cls.REFUSES.get(kind):
                out["refuses"].append(kind)
            else:
                out["misses"].append(kind)
        return out
