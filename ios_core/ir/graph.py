"""Blocks and graphs, JSON in the reference IOS layout, validation, weights."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ios_core.atomic import atomic_write, atomic_write_text
from ios_core.ir import fields
from ios_core.ir.errors import GraphError
from ios_core.ir.node_types import NODE_TYPES
from ios_core.ir.nodes import Node, Placeholder, Sequential, leaf_nodes
from ios_core.ir.rewrite import consumers_of, live_nodes, rewrite_uses

# A schedule of one block: stages run one after another; the groups of a stage run
# concurrently; the operators (names) of a group run in order.
Stages = list[list[list[str]]]


class Block:
    """Operators between an enter node (the previous block's exit, not part of this block)
    and an exit node (part of it), in a topological order."""

    def __init__(self, enter_node: Node, inner_nodes: list[Node] | None = None,
                 exit_node: Node | None = None, stages: Stages | None = None):
        self.enter_node = enter_node
        self.inner_nodes: list[Node] = list(inner_nodes or [])
        self.exit_node = exit_node
        self.stages = stages

    @property
    def nodes(self) -> list[Node]:
        """The schedulable operators of the block: inner nodes, then the exit node."""
        return self.inner_nodes + [self.exit_node]

    def add(self, node: Node, is_exit: bool = False) -> Node:
        node.infer_shape()
        if is_exit:
            self.exit_node = node
        else:
            self.inner_nodes.append(node)
        return node

    def sequential_stages(self) -> Stages:
        return [[[node.name]] for node in self.nodes]

    def to_json(self, meta: bool = True) -> dict:
        return {
            "enter_name": self.enter_node.name,
            "enter_node": self.enter_node.to_json(meta),
            "inner_nodes": [n.to_json(meta) for n in self.inner_nodes],
            "exit_node": self.exit_node.to_json(meta),
            "stages": self.stages,
        }

    def readable_lines(self, indent: int = 2) -> list[str]:
        by_name = {n.name: n for n in self.nodes}
        stages = self.stages if self.stages is not None else self.sequential_stages()
        pad = " " * indent
        lines: list[str] = []
        for stage in stages:
            stage_lines: list[str] = []
            for group in stage:
                if len(group) > 1:
                    group_lines = ["Sequential("]
                    for name in group:
                        group_lines += [pad + s for s in by_name[name].readable_lines(indent)]
                    group_lines.append(")")
                else:
                    group_lines = by_name[group[0]].readable_lines(indent)
                stage_lines.append(group_lines)
            if len(stage_lines) > 1:
                lines.append("Parallel(")
                for gl in stage_lines:
                    lines += [pad + s for s in gl]
                lines.append(")")
            else:
                lines += stage_lines[0]
        return lines


class Graph:
    """A CNN as a chain of blocks; ``graph.nodes()`` walks every schedulable operator once,
    in a topological order, starting with the input placeholder."""

    def __init__(self, name: str, input: Placeholder, blocks: list[Block]):
        self.name = name
        self.input = input
        self.blocks = blocks
        # Where an imported graph came from, e.g. {"format": "onnx", "path": ...}: lets the
        # harness check outputs against the original file too. Written to JSON only when set.
        self.source: dict | None = None

    # ---- walking ------------------------------------------------------------------------
    def nodes(self) -> Iterator[Node]:
        yield self.input
        for block in self.blocks:
            yield from block.nodes

    def operators(self) -> Iterator[Node]:
        """Every executable operator (Sequential nodes expanded), in order, without the input."""
        for block in self.blocks:
            for node in block.nodes:
                yield from leaf_nodes(node)

    @property
    def exit_node(self) -> Node:
        return self.blocks[-1].exit_node

    # ---- rewriting (torch.fx's Node.users, replace_all_uses_with, eliminate_dead_code) ------------
    def consumers(self) -> dict[str, list[Node]]:
        """Node name -> the schedulable nodes that read it, in order (computed once per call:
        hold on to the result rather than calling this in a loop)."""
        nodes = list(self.nodes())
        users = consumers_of(nodes)
        return {n.name: users.get(id(n), []) for n in nodes}

    def replace_all_uses_with(self, old: Node, new: Node) -> list[Node]:
        """Every node reading ``old`` reads ``new`` instead, channel ranges kept; returns those
        readers. ``old`` stays in the graph (drop it with :meth:`eliminate_dead_code`). The
        input and the blocks' exit nodes hold the graph's structure and cannot be replaced."""
        if old is self.input or any(old is b.exit_node for b in self.blocks):
            raise GraphError(f"node {old.name!r} is the input or a block's exit node; it cannot be replaced")
        readers = consumers_of(self.nodes()).get(id(old), [])
        for reader in readers:
            rewrite_uses(reader, old, new)
        return readers

    def eliminate_dead_code(self) -> list[Node]:
        """Remove the inner nodes the output does not depend on and return them; a block that
        loses a node loses its stages too (it runs sequentially until scheduled again)."""
        live = {id(n) for n in live_nodes(list(self.nodes()), [self.exit_node])}
        removed: list[Node] = []
        for block in self.blocks:
            dead = [n for n in block.inner_nodes if id(n) not in live]
            if dead:
                block.inner_nodes = [n for n in block.inner_nodes if id(n) in live]
                block.stages = None
                removed += dead
        return removed

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return tuple(self.input.output_shape)

    @property
    def output_shape(self) -> tuple[int, int, int]:
        return tuple(self.exit_node.output_shape)

    def node(self, name: str) -> Node:
        for n in self.nodes():
            if n.name == name:
                return n
            if isinstance(n, Sequential):
                for m in n.nodes:
                    if m.name == name:
                        return m
        raise KeyError(name)

    # ---- shapes, statistics -------------------------------------------------------------------
    def infer_shape(self) -> None:
        for node in self.nodes():
            node.infer_shape()

    def macs(self) -> int:
        return sum(n.macs() for n in self.nodes())

    def params(self) -> int:
        return sum(n.params() for n in self.nodes())

    def num_operators(self) -> int:
        return sum(len(b.nodes) for b in self.blocks)

    @property
    def has_stages(self) -> bool:
        return all(b.stages is not None for b in self.blocks)

    # ---- validation --------------------------------------------------------------------------
    def validate(self) -> Graph:
        """Check structure, references, channel slices, shapes and stages; raise GraphError
        naming the offending node. Returns ``self``."""
        if not self.blocks:
            raise GraphError(f"graph {self.name!r} has no blocks")
        self.input.check()
        seen: set[str] = {self.input.name}
        prev_exit: Node = self.input
        for bi, block in enumerate(self.blocks):
            if block.enter_node is not prev_exit:
                raise GraphError(f"block {bi}: enter node {block.enter_node.name!r} is not the previous "
                                 f"block's exit {prev_exit.name!r}")
            if block.exit_node is None:
                raise GraphError(f"block {bi} has no exit node")
            local = {block.enter_node.name}
            for node in block.nodes:
                for leaf in leaf_nodes(node):
                    for v in leaf.values():
                        if v.node.name not in local and v.node.name not in _inner_names(node, leaf):
                            where = "a later node (cycle?)" if v.node.name not in seen else "another block"
                            raise GraphError(f"node {leaf.name!r} reads {v.node.name!r}, which is {where}; "
                                             f"a node may read only earlier nodes of its block and the "
                                             f"block's enter node")
                names = [node.name] + ([m.name for m in node.nodes] if isinstance(node, Sequential) else [])
                for name in names:
                    if name in seen:
                        raise GraphError(f"node name {name!r} is used twice")
                    seen.add(name)
                stored = node.output_shape
                node.check()
                inferred = node.infer_shape()
                if stored is not None and tuple(stored) != tuple(inferred):
                    raise GraphError(f"node {node.name!r}: stored output shape {tuple(stored)} != inferred "
                                     f"{tuple(inferred)}")
                for leaf in leaf_nodes(node):
                    if min(leaf.output_shape) <= 0:
                        raise GraphError(f"node {leaf.name!r}: output shape {tuple(leaf.output_shape)} is empty "
                                         "(a window larger than its padded input?)")
                    fields.check_elements(leaf.output_shape, f"node {leaf.name!r}: output")
                    weight_shape = getattr(leaf, "weight_shape", None) if leaf.HAS_WEIGHTS else None
                    if weight_shape is not None:
                        fields.check_elements(weight_shape, f"node {leaf.name!r}: weight")
                local.add(node.name)
            if block.stages is not None:
                _check_stages(bi, block)
            prev_exit = block.exit_node
        self.check_fits(1)
        return self

    def check_fits(self, batch_size: int = 1) -> None:
        """Raise GraphError when the weights and activations at ``batch_size`` cannot fit in this
        machine's memory: checked before anything is allocated."""
        largest = max(math.prod(n.output_shape) for n in self.nodes())
        fields.check_fits(self.params(), largest, f"graph {self.name!r}", batch_size)

    # ---- JSON ------------------------------------------------------------------------------------
    def to_json(self, meta: bool = True) -> dict:
        """The graph's JSON (the reference IOS layout); ``meta=False``: without the nodes' ``meta``, the
        form every key of a graph hashes (ios_core.ir.meta)."""
        cfg = {"name": self.name, "input": self.input.to_json(meta),
               "blocks": [b.to_json(meta) for b in self.blocks]}
        if self.source:
            cfg["source"] = dict(self.source)
        return cfg

    @staticmethod
    def from_json(cfg: dict) -> Graph:
        """Build (and validate) a graph from the reference IOS JSON layout. Anything that does not
        describe a computable graph raises GraphError, whatever its shape or type."""
        if not isinstance(cfg, dict):
            raise GraphError("graph JSON must be an object with keys name, input, blocks")
        fields.check_depth(cfg)
        for key in ("name", "input", "blocks"):
            if key not in cfg:
                raise GraphError(f"graph JSON lacks the key {key!r}")
        name = fields.as_name(cfg["name"], "the graph's name")
        block_cfgs = fields.as_list(cfg["blocks"], "blocks")
        defined: dict[str, Node] = {}
        all_names = _collect_names(cfg)

        def lookup(name: str) -> Node:
            if name in defined:
                return defined[name]
            if name in all_names:
                raise GraphError(f"node {name!r} is read before it is defined (cycle or wrong order)")
            raise GraphError(f"unknown node {name!r}")

        def build(ncfg, where: str, inside_sequential: bool = False) -> Node:
            ncfg = fields.as_dict(ncfg, where)
            if "type" not in ncfg:
                raise GraphError(f"{where} has no type")
            kind = ncfg["type"]
            if not isinstance(kind, str) or kind not in NODE_TYPES:
                raise GraphError(f"node {ncfg.get('name')!r} has unknown type {fields.shown(kind)}; "
                                 f"known: {', '.join(NODE_TYPES)}")
            if kind == "sequential":
                seq_name = fields.as_name(ncfg.get("name"), "the name of a sequential node")
                if inside_sequential:
                    raise GraphError(f"sequential node {seq_name!r} is nested in another sequential")
                inner_cfgs = fields.as_list(ncfg.get("nodes"), f"sequential node {seq_name!r}: nodes")
                inner = [build(c, f"a node of sequential {seq_name!r}", True) for c in inner_cfgs]
                if not inner:
                    raise GraphError(f"sequential node {seq_name!r} has no nodes")
                hint = ncfg.get("hint_name")
                node = Sequential(seq_name, inner, None if hint is None else fields.as_name(hint, "hint_name"))
                if ncfg.get("output_shape") is not None:
                    node.output_shape = fields.as_shape(ncfg["output_shape"], f"node {seq_name!r}: output_shape")
            else:
                node = NODE_TYPES[kind].from_json(ncfg, lookup)
            if node.name in defined:
                raise GraphError(f"node name {node.name!r} is used twice")
            defined[node.name] = node
            return node

        graph_input = build(cfg["input"], "the graph's input")
        if not isinstance(graph_input, Placeholder):
            raise GraphError("graph input must be a placeholder")
        if not block_cfgs:
            raise GraphError(f"graph {name!r} has no blocks")
        blocks = []
        enter = graph_input
        for bi, bcfg in enumerate(block_cfgs):
            bcfg = fields.as_dict(bcfg, f"block {bi}")
            if "exit_node" not in bcfg:
                raise GraphError(f"block {bi} is malformed (needs inner_nodes and exit_node)")
            enter_cfg = bcfg.get("enter_node")
            enter_name = bcfg.get("enter_name", enter_cfg.get("name") if isinstance(enter_cfg, dict) else None)
            if enter_name != enter.name:
                raise GraphError(f"block {bi}: enter node {fields.shown(enter_name)} is not {enter.name!r}")
            inner_cfgs = fields.as_list(bcfg.get("inner_nodes", []), f"block {bi}: inner_nodes")
            inner = [build(c, f"an inner node of block {bi}") for c in inner_cfgs]
            exit_node = build(bcfg["exit_node"], f"the exit node of block {bi}")
            for node in inner + [exit_node]:
                if isinstance(node, Placeholder):
                    raise GraphError(f"block {bi}: {node.name!r} is a placeholder; only the graph's input may be one")
            blocks.append(Block(enter, inner, exit_node, _parse_stages(bcfg.get("stages"), bi)))
            enter = exit_node
        graph = Graph(name, graph_input, blocks).validate()
        source = cfg.get("source")
        if source is not None and not (isinstance(source, dict) and all(isinstance(k, str) for k in source)):
            raise GraphError("graph JSON: 'source' must be an object")
        graph.source = source
        return graph

    def save(self, path: str | os.PathLike, weights: bool = True) -> None:
        """Write ``path`` (JSON) and, if the graph has weights, ``path`` with ``.npz`` beside it."""
        path = Path(path)
        atomic_write_text(path, json.dumps(self.to_json(), indent=2))
        if weights and self.has_weights:
            self.save_weights(path.with_suffix(".npz"))

    @staticmethod
    def load(path: str | os.PathLike) -> Graph:
        path = Path(path)
        cfg = fields.read_json_file(path)
        try:
            graph = Graph.from_json(cfg)
        except GraphError as e:
            raise GraphError(f"{path}: {e}") from None
        if path.with_suffix(".npz").exists():
            graph.load_weights(path.with_suffix(".npz"))
        return graph

    # ---- weights -------------------------------------------------------------------------------
    def weighted_nodes(self) -> list[Node]:
        return [n for n in self.operators() if n.HAS_WEIGHTS]

    @property
    def has_weights(self) -> bool:
        return all(n.weights() for n in self.weighted_nodes())

    def init_weights(self, seed: int = 0) -> Graph:
        """Deterministic He-style weights: each operator draws from its own stream, derived
        from ``seed`` and its name, so the weights do not depend on traversal order."""
        for node in self.weighted_nodes():
            node.init_weights(np.random.default_rng([seed, _stable_hash(node.name)]))
        return self

    def weights_dict(self) -> dict[str, np.ndarray]:
        return {f"{n.name}/{k}": a for n in self.weighted_nodes() for k, a in n.weights().items()}

    def save_weights(self, path: str | os.PathLike) -> None:
        weights = self.weights_dict()
        atomic_write(path, lambda f: np.savez(f, **weights))

    def load_weights(self, path: str | os.PathLike) -> Graph:
        import zipfile

        try:
            with np.load(path, allow_pickle=False) as data:
                for node in self.weighted_nodes():
                    keys = [k for k in data.files if k.startswith(node.name + "/")]
                    if not keys:
                        raise GraphError(f"{path}: no weights for node {node.name!r}")
                    node.set_weights({k.split("/", 1)[1]: data[k] for k in keys})
        except GraphError:
            raise
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            raise GraphError(f"{path}: unreadable weights file ({type(e).__name__}: "
                             f"{str(e).splitlines()[0][:100] if str(e) else ''})") from None
        return self

    # ---- text -----------------------------------------------------------------------------------
    def readable_lines(self, indent: int = 2) -> list[str]:
        lines = ["Sequential("]
        for block in self.blocks:
            lines += [" " * indent + s for s in block.readable_lines(indent)]
        lines.append(")")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.readable_lines(2))

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {self.num_operators()} operators in {len(self.blocks)} blocks>"


def _inner_names(node: Node, leaf: Node) -> set[str]:
    """Names a leaf inside a Sequential may read besides the block: earlier inner nodes."""
    if not isinstance(node, Sequential):
        return set()
    names = set()
    for m in node.nodes:
        if m is leaf:
            break
        names.add(m.name)
    return names


def _check_stages(bi: int, block: Block) -> None:
    names = [n.name for n in block.nodes]
    position = {n: i for i, n in enumerate(names)}
    by_name = {n.name: n for n in block.nodes}
    done: set[str] = {block.enter_node.name}
    scheduled: list[str] = []
    for stage in block.stages:
        if not stage or any(not g for g in stage):
            raise GraphError(f"block {bi}: empty stage or group in its schedule")
        stage_names = [name for group in stage for name in group]
        for group in stage:
            local = set()
            for name in group:
                if name not in position:
                    raise GraphError(f"block {bi}: schedule names unknown operator {name!r}")
                for pred in by_name[name].predecessors():
                    if pred.name not in done and pred.name not in local:
                        raise GraphError(f"block {bi}: operator {name!r} is scheduled before its input "
                                         f"{pred.name!r} (or concurrently with it in another group)")
                local.add(name)
        done.update(stage_names)
        scheduled += stage_names
    if sorted(scheduled) != sorted(names):
        missing = sorted(set(names) - set(scheduled))
        extra = sorted(n for n in set(scheduled) if scheduled.count(n) > 1)
        raise GraphError(f"block {bi}: schedule must name every operator exactly once "
                         f"(missing {missing[:5]}, repeated {extra[:5]})")


def _parse_stages(raw, bi: int) -> Stages | None:
    """None, or a list (stages) of lists (groups) of lists of operator names."""
    if raw is None:
        return None
    what = f"block {bi}: stages"
    return [[[fields.as_name(n, f"{what}: an operator name") for n in fields.as_list(g, f"{what}: a group")]
             for g in fields.as_list(stage, f"{what}: a stage")] for stage in fields.as_list(raw, what)]


def _collect_names(cfg: dict) -> set[str]:
    """Every node name the file defines (to tell 'defined later' from 'unknown'); tolerant of
    malformed entries, which the builder then reports."""
    names: set[str] = set()

    def add(n, depth=0):
        if isinstance(n, dict) and isinstance(n.get("name"), str):
            names.add(n["name"])
            if depth == 0 and isinstance(n.get("nodes"), list):
                for m in n["nodes"]:
                    add(m, 1)

    add(cfg.get("input"))
    blocks = cfg.get("blocks")
    for b in blocks if isinstance(blocks, list) else []:
        if isinstance(b, dict):
            inner = b.get("inner_nodes")
            for n in inner if isinstance(inner, list) else []:
                add(n)
            add(b.get("exit_node"))
    return names


def _stable_hash(name: str) -> int:
    import zlib

    return zlib.crc32(name.encode())
