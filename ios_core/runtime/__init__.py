"""The IOS runtime: plans a scheduled graph once and runs it many times on the CPU.

    from ios_core.runtime import Runtime
    rt = Runtime(graph, batch_size=1, threads=2)
    y = rt.run(x)                       # == ios_core.reference.run(graph, x) within float32 tolerance
    m = rt.measure(warmup=3, number=1, repeat=10, profile_stages=True)

See docs/runtime.md.
"""

from .emit_torch import Program, build_program, emit
from .plan import Buffer, Piece, Plan, Step, ValueRef, make_plan
from .pool import WorkerPool, shared_pool, split_threads
from .runtime import PROVIDERS, Runtime, graph_stages

__all__ = ["PROVIDERS", "Buffer", "Piece", "Plan", "Program", "Runtime", "Step", "ValueRef", "WorkerPool",
           "build_program", "emit", "graph_stages", "make_plan", "shared_pool", "split_threads"]
