"""The IOS runtime: plans a scheduled graph once and runs it many times on the CPU.

    from ios_core.runtime import Runtime
    rt = Runtime(graph, batch_size=1, threads=2)
    y = rt.run(x)                       # == ios_core.reference.run(graph, x) within float32 tolerance
    m = rt.measure(warmup=3, number=1, repeat=10, profile_stages=True)

See docs/runtime.md.
"""

from .plan import Program, build_program
from .pool import WorkerPool, shared_pool, split_threads
from .runtime import Runtime, graph_stages

__all__ = ["Program", "Runtime", "WorkerPool", "build_program", "graph_stages", "shared_pool", "split_threads"]
