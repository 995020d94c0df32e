"""Strict readers for graph files: every field has the type and range a computable graph needs.

A graph file is input from anywhere (a colleague, a download, a fuzzer), so nothing in it is
trusted: sizes are plain integers (never ``true``, ``2.5``, ``"3"`` or ``NaN``), names are
strings, lists are lists, the file is UTF-8 JSON of bounded size and nesting, and every tensor
the graph describes must fit in this machine's memory. Each refusal is a :class:`GraphError`
whose message names the field.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ios_core.ir.errors import GraphError

# A graph file larger than this is refused before it is read (the largest zoo schedule is ~2 MB).
MAX_FILE_BYTES = 64 * 2**20
# Nesting of JSON containers: a graph needs about 10 levels (graph, blocks, node, inputs, term, value).
MAX_DEPTH = 64
# One tensor (an activation for one image, or a weight) with more elements is refused: no framework
# here indexes beyond 2**31 elements reliably, and 8 GiB per tensor is not a CNN we can benchmark.
MAX_TENSOR_ELEMENTS = 2**31 - 1
# Longest node or graph name accepted.
MAX_NAME_CHARS = 1000


def as_int(value, what: str, minimum: int | None = None) -> int:
    """A JSON integer (not a bool, float or string) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise GraphError(f"{what} must be an integer, got {shown(value)}")
    if minimum is not None and value < minimum:
        raise GraphError(f"{what} must be >= {minimum}, got {value}")
    return value


def as_pair(value, what: str, minimum: int) -> tuple[int, int]:
    """An integer or a list of two integers (height, width), each at least ``minimum``."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise GraphError(f"{what} must be an integer or a list of two, got {shown(value)}")
        return (as_int(value[0], what, minimum), as_int(value[1], what, minimum))
    v = as_int(value, what, minimum)
    return (v, v)


# The ranks a value's shape (one image's, without the batch) may have: (C, H, W) feature maps, and
# general tensors (features; tokens x features; heads x tokens x features; windows ...).
MIN_RANK, MAX_RANK = 1, 5


def as_shape(value, what: str) -> tuple[int, ...]:
    """A value's shape without the batch: (channels, height, width) for a feature map, or any
    rank from MIN_RANK to MAX_RANK, each size a positive integer."""
    if not isinstance(value, (list, tuple)) or not MIN_RANK <= len(value) <= MAX_RANK:
        raise GraphError(f"{what} must be a list of {MIN_RANK} to {MAX_RANK} positive integers (e.g. C, H, W), "
                         f"got {shown(value)}")
    return tuple(as_int(v, what, 1) for v in value)


def as_name(value, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise GraphError(f"{what} must be a non-empty string, got {shown(value)}")
    if len(value) > MAX_NAME_CHARS:
        raise GraphError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise GraphError(f"{what} is not valid Unicode (a lone surrogate)") from None
    return value


def as_list(value, what: str) -> list:
    if not isinstance(value, list):
        raise GraphError(f"{what} must be a list, got {shown(value)}")
    return value


def as_dict(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise GraphError(f"{what} must be an object, got {shown(value)}")
    return value


def as_choice(value, what: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise GraphError(f"{what} must be one of {', '.join(choices)}, got {shown(value)}")
    return value


def as_bool(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise GraphError(f"{what} must be true or false, got {shown(value)}")
    return value


def check_elements(shape, what: str) -> None:
    n = math.prod(shape)
    if n > MAX_TENSOR_ELEMENTS:
        raise GraphError(f"{what} {tuple(shape)} has {n:.3g} elements; at most {MAX_TENSOR_ELEMENTS:.3g} are "
                         "supported (it would not fit in memory)")


def memory_bytes() -> int | None:
    """Physical memory of this machine, or None where it cannot be read."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def check_fits(weight_elements: int, largest_activation: int, what: str, batch_size: int = 1) -> None:
    """Refuse (before anything is allocated) a graph whose float32 weights and two largest
    activations at ``batch_size`` exceed the machine's physical memory."""
    total = 4 * (weight_elements + 2 * largest_activation * batch_size)
    mem = memory_bytes()
    if mem is not None and total > mem:
        raise GraphError(f"{what} needs at least {total / 2**30:.1f} GiB (weights and activations, float32, batch "
                         f"{batch_size}); this machine has {mem / 2**30:.1f} GiB")


def _reject_constant(name: str):
    raise GraphError(f"{name} is not a number a graph may hold (JSON has no NaN or Infinity)")


def parse_json_bytes(data: bytes, source: str):
    """Decode a graph file: UTF-8 JSON, no NaN/Infinity, nesting at most MAX_DEPTH."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GraphError(f"{source}: not a text file (not UTF-8 at byte {e.start})") from None
    try:
        cfg = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise GraphError(f"{source}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except GraphError as e:
        raise GraphError(f"{source}: {e}") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of more than 4300 digits
        if isinstance(e, RecursionError):
            raise GraphError(f"{source}: JSON nested too deeply for a graph (at most {MAX_DEPTH} levels)") from None
        raise GraphError(f"{source}: not a usable JSON file ({str(e).splitlines()[0][:100]})") from None
    check_depth(cfg, source)
    return cfg


def check_depth(obj, source: str = "graph JSON") -> None:
    """Refuse containers nested deeper than MAX_DEPTH (an iterative walk: no recursion)."""
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise GraphError(f"{source}: JSON nested more than {MAX_DEPTH} levels deep; a graph needs "
                                 "about 10")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


def read_json_file(path: str | os.PathLike):
    """A graph file's JSON, refusing non-files, files over MAX_FILE_BYTES and bad content."""
    path = Path(path)
    try:
        if not path.is_file():
            raise GraphError(f"{path}: not a regular file")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise GraphError(f"{path}: {size / 2**20:.0f} MiB is too large for a graph file "
                             f"(limit {MAX_FILE_BYTES // 2**20} MiB)")
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise GraphError(f"{path}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_FILE_BYTES:
        raise GraphError(f"{path}: too large for a graph file (limit {MAX_FILE_BYTES // 2**20} MiB)")
    return parse_json_bytes(data, str(path))


def shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
