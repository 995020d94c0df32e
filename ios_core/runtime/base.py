"""What every IOS runtime is, whatever its device: the small protocol the CPU runtime
(:class:`ios_core.runtime.runtime.Runtime`) and the CUDA runtime
(:class:`ios_core.runtime.cuda.CudaRuntime`) share, and the checks both make of their
arguments and inputs. :func:`ios_core.runtime.factory.make_runtime` chooses one by device."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from ios_core.ir import Graph
from ios_core.measurement.measure import Measurement


@runtime_checkable
class RuntimeProtocol(Protocol):
    """Plan once, run many. ``prepare(x)`` checks and places an input, ``execute(prepared)``
    runs on it (asynchronously on a GPU), ``run(x)`` does both and returns the output as a numpy
    array, ``measure(...)`` times it with :func:`ios_core.measurement.measure.measure`."""

    graph: Graph
    batch_size: int
    device: str

    @property
    def stats(self) -> dict: ...

    def prepare(self, x: np.ndarray) -> Any: ...

    def execute(self, prepared: Any) -> Any: ...

    def run(self, x: np.ndarray) -> np.ndarray: ...

    def measure(self, warmup: int = 3, number: int = 1, repeat: int = 10, min_sample_ms: float | None = None,
                profile_stages: bool = False, x: np.ndarray | None = None) -> Measurement: ...


def check_graph(graph: Graph, batch_size: int) -> None:
    """The arguments every runtime refuses: a batch below 1, a graph without weights."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if not graph.has_weights:
        raise ValueError(f"graph {graph.name!r} has no weights: call graph.init_weights(seed)")


def check_input(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` as a C-contiguous float32 array of ``shape`` (the runtime's batch and the graph's
    input shape), or a ValueError."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape != tuple(shape):
        raise ValueError(f"input shape {x.shape} != {tuple(shape)}")
    return x
