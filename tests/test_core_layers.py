"""ios_core's layering: no import circle inside it, one factory for runtimes, one registry of
kernel providers."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from ios_core.reference import random_input
from ios_core.reference import run as oracle
from tests.runtime_helpers import mixed_graph

CORE = Path(__file__).resolve().parent.parent / "ios_core"


def _module_name(path: Path, root: Path = CORE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:`` (not imports at run time)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for n in ast.walk(node))
    return out


def import_graph(root: Path = CORE) -> dict[str, set[str]]:
    """Module -> the modules of the package ``root`` it imports (at any depth of the file: lazy
    imports count)."""
    files = {_module_name(p, root): p for p in root.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_only(tree)
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    if target in files and target != mod:
                        edges[mod].add(target)
            elif isinstance(node, ast.Import):
                edges[mod].update(a.name for a in node.names if a.name in files and a.name != mod)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_inside_ios_core():
    assert cycles(import_graph()) == []


def test_no_import_circle_in_the_harness():
    """ios_bench's orchestration (sweep, its rounds, executors, fleet) and everything else in it."""
    assert cycles(import_graph(CORE.parent / "ios_bench")) == []


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_ios_core_never_imports_the_harness_or_adapters():
    for path in CORE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                assert name.split(".")[0] not in ("adapters", "ios_bench"), f"{path} imports {name}"


def test_make_runtime_chooses_the_runtime_by_device():
    from ios_core.runtime import Runtime, RuntimeProtocol, make_runtime

    g = mixed_graph().init_weights(0)
    rt = make_runtime(g, 2, device="cpu", threads=1)
    assert type(rt) is Runtime and isinstance(rt, RuntimeProtocol)
    x = random_input(g, 2)
    np.testing.assert_allclose(rt.run(x), oracle(g, x), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="unknown device"):
        make_runtime(g, 1, device="tpu")
    # the CPU runtime's class is not a hidden factory: a CUDA device is named and refused
    with pytest.raises(RuntimeError, match="make_runtime"):
        Runtime(g, 1, device="cuda")


def test_make_runtime_makes_the_cuda_runtime_on_a_given_device():
    from ios_core.runtime import RuntimeProtocol, make_runtime
    from ios_core.runtime.cuda import CudaRuntime
    from tests.stream_fakes import TorchQueueDevice

    g = mixed_graph().init_weights(0)
    rt = make_runtime(g, 1, device="cuda", backend=TorchQueueDevice(0))
    assert type(rt) is CudaRuntime and isinstance(rt, RuntimeProtocol)
    x = random_input(g, 1)
    np.testing.assert_allclose(rt.run(x), oracle(g, x), rtol=1e-4, atol=1e-4)
    for bad in (np.zeros((2, *g.input_shape), np.float32), np.zeros((1, 1), np.float32)):
        with pytest.raises(ValueError, match="input shape"):
            rt.run(bad)


def test_provider_lists_derive_from_the_registry():
    from ios_core.cost import measured
    from ios_core.runtime import PROVIDERS, providers

    assert list(PROVIDERS) == providers.names() == list(measured.PROVIDERS)
    assert providers.names()[0] == providers.DEFAULT == "torch"
    assert [providers.distribution(p) for p in providers.names()] == [providers.get(p).requires[0]
                                                                       for p in providers.names()]
    with pytest.raises(ValueError, match="unknown provider"):
        providers.distribution("nonesuch")
