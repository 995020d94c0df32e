"""The IOS runtime: plans a scheduled graph once and runs it many times, on the CPU or a GPU.

    from ios_core.runtime import make_runtime, Runtime
    rt = make_runtime(graph, batch_size=1, device="cpu", threads=2)   # == Runtime(graph, 1, threads=2)
    y = rt.run(x)                       # == ios_core.reference.run(graph, x) within float32 tolerance
    m = rt.measure(warmup=3, number=1, repeat=10, profile_stages=True)

Layers, each importing only the ones above it:

* ``plan`` (data), ``passes`` (the plan's passes and ``make_plan``): device-independent;
* ``program``: the CPU program machinery (storage, stage functions, worker pool, pieces);
* ``emit_torch`` (torch closures), ``providers`` (the kernel-provider registry),
  ``emit_provider`` (pieces compiled by a provider); ``streams``, ``cuda``: the GPU executor;
* ``base`` (the runtime protocol and its checks), ``runtime`` (the CPU runtime), ``cuda``
  (the CUDA runtime), ``factory`` (``make_runtime``, ``build_program``).

Importing the package imports no torch: ``emit`` (torch closures) is loaded when first used, and
a runtime on ONNX Runtime or OpenVINO kernels keeps its values in numpy arrays (:mod:`.tensors`).

See docs/runtime.md.
"""

from ios_core.runtime.base import RuntimeProtocol
from ios_core.runtime.factory import build_program, make_runtime
from ios_core.runtime.passes import make_plan
from ios_core.runtime.plan import Buffer, Piece, RuntimePlan, Step, ValueRef
from ios_core.runtime.pool import WorkerPool, shared_pool, split_threads
from ios_core.runtime.program import Program, graph_stages
from ios_core.runtime.runtime import PROVIDERS, Runtime

__all__ = ["PROVIDERS", "Buffer", "Piece", "RuntimePlan", "Program", "Runtime", "RuntimeProtocol", "Step", "ValueRef",
           "WorkerPool", "build_program", "emit", "graph_stages", "make_plan", "make_runtime", "shared_pool",
           "split_threads"]


def __getattr__(name: str):
    if name == "emit":  # torch closures: torch is imported only when they are asked for
        from ios_core.runtime.emit_torch import emit

        return emit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
