"""Turning the user's words into graphs: a zoo model name or a JSON file."""

from __future__ import annotations

from pathlib import Path

from ios_bench.errors import InputError
from ios_core import models
from ios_core.ir import Graph


def load_graph(spec: str) -> Graph:
    """``spec`` is a zoo model name, a path to a graph/schedule JSON file, or an ONNX model
    (imported with its weights by ``ios_core.frontend.onnx``)."""
    path = Path(spec)
    if spec.lower().endswith(".onnx"):
        if not path.is_file():
            raise InputError(f"{spec}: no such file")
        from ios_core.frontend import onnx as onnx_frontend

        return onnx_frontend.load(path)
    if spec.endswith(".json") or path.is_file():
        if not path.is_file():
            raise InputError(f"{spec}: {'not a regular file' if path.exists() else 'no such file'}")
        return Graph.load(path)
    return models.get(spec)


def parse_list(text: str, what: str, choices: list[str] | None = None, all_word: str = "all") -> list[str]:
    """Parse ``a,b,c`` (or ``all``) strictly: empty items and unknown names are errors."""
    items = [s.strip() for s in text.split(",")]
    if any(not s for s in items):
        raise InputError(f"bad {what} list {text!r}: empty item")
    twice = [s for s in dict.fromkeys(items) if items.count(s) > 1]
    if twice:  # one cell per (model, batch, framework): a repeated item would run or be checked twice
        raise InputError(f"bad {what} list {text!r}: {', '.join(twice)} listed twice")
    if choices is not None:
        if items == [all_word]:
            return list(choices)
        unknown = [s for s in items if s not in choices]
        if unknown:
            raise InputError(f"unknown {what} {', '.join(unknown)}; choose from: {', '.join(choices)}")
    return items


def parse_int_list(text: str, what: str) -> list[int]:
    out = []
    for s in parse_list(text, what):
        if not s.isdigit() or int(s) < 1:
            raise InputError(f"bad {what} list {text!r}: {s!r} is not a positive integer")
        if int(s) in out:  # "1,01" names batch 1 twice
            raise InputError(f"bad {what} list {text!r}: {int(s)} listed twice")
        out.append(int(s))
    return out


def unique_names(graphs: dict) -> None:
    """Cells, reference outputs and schedules are keyed by a graph's name: two graphs of one sweep
    with the same name (two files, or a file named like a zoo model) are refused in one line."""
    seen: dict[str, str] = {}
    for spec, graph in graphs.items():
        if graph.name in seen:
            raise InputError(f"{seen[graph.name]} and {spec} are both named {graph.name!r}: every graph of a sweep "
                             "needs its own name (change the \"name\" of one file)")
        seen[graph.name] = spec
