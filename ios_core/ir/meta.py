"""Facts kept on a node beside what it computes (torch.fx's ``node.meta``): ``Node.meta``, a dict.

It is saved with the graph (its JSON's ``"meta"``, written only when not empty, so a graph without
any reads and writes byte for byte as before) and read back, but it keys nothing: what keys a graph
(``Graph.to_json(meta=False)``: a TensorRT engine's ``graph_hash``, a block's plan in the optimizer's
store) and a stage's cost (``ios_core.cost.cache.stage_signature``: types, attributes, shapes) leave it
out, and no lowering reads it (an exported ONNX node is named after the operator's ``name``), so two
graphs that differ only in their meta build, schedule and measure as one.

:data:`SOURCE_NODES`: the nodes of the imported file an operator computes, in the file's order (the ONNX
importer's: the node the operator was made for, and those folded into it: a BatchNormalization, a
constant Add or Mul, an activation, a zero Pad, a channel Concat it reads, the nodes of a GELU or
channel-shuffle pattern). A node without a name in the file is shown as ONNX tools show it: its type
and its first output, ``(unnamed Relu -> y)``.
"""

from __future__ import annotations

from ios_core.ir import fields
from ios_core.ir.errors import GraphError

SOURCE_NODES = "source_nodes"
MAX_SOURCE_NODES = 10_000  # names on one operator (a file from anywhere): more is refused on load


def source_nodes(node) -> list[str]:
    """The names of the imported file's nodes ``node`` computes (``[]``: none recorded)."""
    return list(getattr(node, "meta", {}).get(SOURCE_NODES, ()))


def add_source_nodes(node, names) -> None:
    """Record that ``node`` computes the file's nodes ``names`` too (after those it has, each once)."""
    have = source_nodes(node)
    new = [n for n in dict.fromkeys(names) if n not in have]
    if new:
        node.meta[SOURCE_NODES] = have + new


def absorb(into, *others) -> None:
    """``into`` now computes what ``others`` did (a rewrite folded them into it): their source nodes
    join its own, after them (a folded BatchNormalization or activation comes after its convolution in
    the file; :func:`absorb_before` for those that came before)."""
    for other in others:
        add_source_nodes(into, source_nodes(other))


def absorb_before(into, *others) -> None:
    """:func:`absorb`, the others' source nodes put before ``into``'s (they came first in the file)."""
    names = [n for other in others for n in source_nodes(other)] + source_nodes(into)
    into.meta.pop(SOURCE_NODES, None)
    add_source_nodes(into, names)


def unnamed(op_type: str, output: str | None, index: int | None = None) -> str:
    """How a node without a name is shown: its type and first output (Netron, OpenVINO's layer names),
    else its position."""
    if output:
        return f"(unnamed {op_type} -> {output})"
    return f"(unnamed {op_type} #{index})" if index is not None else f"(unnamed {op_type})"


def meta_to_json(meta: dict) -> dict:
    """``Node.meta`` as JSON (lists copied)."""
    return {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in meta.items()}


def meta_from_json(raw, where: str) -> dict:
    """A node's ``"meta"`` read back; GraphError (one line) for one that is not an object with string
    keys, or a ``source_nodes`` that is not a list of names."""
    meta = fields.as_dict(raw, f"{where}: meta")
    if not all(isinstance(k, str) for k in meta):
        raise GraphError(f"{where}: meta keys must be strings")
    if SOURCE_NODES in meta:
        names = fields.as_list(meta[SOURCE_NODES], f"{where}: meta {SOURCE_NODES}")
        if len(names) > MAX_SOURCE_NODES:
            raise GraphError(f"{where}: meta {SOURCE_NODES} has {len(names)} names (at most {MAX_SOURCE_NODES})")
        meta = {**meta, SOURCE_NODES: [fields.as_name(n, f"{where}: a name of meta {SOURCE_NODES}") for n in names]}
    return meta
