"""The IOS runtime as an adapter: runs the graph as given, with its stages (a graph without
stages runs sequentially), on ``ios_core.runtime``, with the kernel provider named by the
build option ``provider`` (``torch`` by default; ``onnxruntime``, ``openvino``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ios_core.ir import Graph
from ios_core.runtime import Runtime

from .base import Adapter, Compiled


class IOSCompiled(Compiled):
    def __init__(self, runtime: Runtime, info: dict):
        super().__init__(info)
        self.runtime = runtime

    def prepare(self, x):
        return self.runtime.prepare(x)

    def execute(self, prepared):
        return self.runtime.execute(prepared)

    def finish(self, out):
        return out.contiguous().numpy().copy()


@dataclass
class IOSAdapter(Adapter):
    def version(self) -> str | None:
        return torch.__version__

    def _build(self, graph: Graph, batch_size: int, device: str, threads: int | None,
               max_workers: int | None = None, provider: str = "torch") -> Compiled:
        rt = Runtime(graph, batch_size, device=device, provider=provider, threads=threads, max_workers=max_workers)
        if provider == "torch":
            kernels = f"torch {torch.__version__} (oneDNN)"
        else:
            kernels = f"{provider} {rt.stats.get('provider_version')}"
        info = {**rt.stats, "scheduled": graph.has_stages, "kernels": kernels, "provider": provider}
        info["threads"] = rt.threads
        return IOSCompiled(rt, info)


IOS = IOSAdapter(name="ios", description="IOS runtime (ios_core.runtime): the graph's schedule, kernels of a provider "
                 "(torch by default, onnxruntime, openvino), "
                 "concurrent groups on worker threads", requires=("torch",))
