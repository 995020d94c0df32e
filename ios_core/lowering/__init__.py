"""Lowering the IR: input composition (written once), the graph walk every converter shares,
and the ONNX exporter. ``ios_core`` code (the oracle, the runtime's planner and kernel
providers) and the adapters all use these; see docs/adapters.md ("One walk").
"""

from ios_core.lowering.compose import (
           Composition,
           Primitives,
           Slice,
           Term,
           compose,
           composition,
           evaluate,
           evaluate_term,
           reader,
)
from ios_core.lowering.walk import SUPPORTED_TYPES, check_supported, lower, lower_nodes, schedulable_nodes

__all__ = ["SUPPORTED_TYPES", "Composition", "Primitives", "Slice", "Term", "check_supported", "compose",
           "composition", "evaluate", "evaluate_term", "lower", "lower_nodes", "reader", "schedulable_nodes"]
