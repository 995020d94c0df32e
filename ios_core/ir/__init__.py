"""The IOS graph IR: nodes with channel-slice inputs, blocks, graphs, JSON, validation."""

from ios_core.ir.activations import ACTIVATION_KINDS, PARAM_ACTIVATIONS, ActivationKind, ActivationMap, activation_maps
from ios_core.ir.builder import GraphBuilder, as_inputs, whole
from ios_core.ir.errors import GraphError
from ios_core.ir.graph import Block, Graph, Stages, atomic_write_text
from ios_core.ir.node_types import NODE_TYPES
from ios_core.ir.nodes import (
                    ACTIVATIONS,
                    FUSED_ACTIVATIONS,
                    Activation,
                    Affine,
                    Conv,
                    Element,
                    Flatten,
                    Identity,
                    Linear,
                    Node,
                    Placeholder,
                    Pool,
                    Relu,
                    Resize,
                    Sequential,
                    Shuffle,
                    leaf_nodes,
)
from ios_core.ir.tensor_nodes import (
    Constant,
    Dense,
    L2Norm,
    LayerNorm,
    MatMul,
    Prepend,
    Reshape,
    Softmax,
    Transpose,
)
from ios_core.ir.value import ChannelRange, Inputs, Value
from ios_core.ir.visitor import IR_ALIASES, OPERATOR_TYPES, OpVisitor

__all__ = [
    "ACTIVATION_KINDS", "ACTIVATIONS", "ActivationKind", "ActivationMap", "IR_ALIASES", "PARAM_ACTIVATIONS",
    "activation_maps", "FUSED_ACTIVATIONS", "NODE_TYPES", "Activation", "Affine", "Block", "ChannelRange", "Conv",
    "Element",
    "Flatten", "Graph", "GraphBuilder", "GraphError", "Identity", "Inputs", "Linear", "Node", "OPERATOR_TYPES",
    "OpVisitor", "Placeholder",
    "Pool", "Relu", "Resize", "Sequential", "Shuffle", "Stages", "Value", "as_inputs", "atomic_write_text",
    "leaf_nodes", "whole", "Constant", "Dense", "L2Norm", "LayerNorm", "MatMul", "Prepend", "Reshape", "Softmax",
    "Transpose",
]
