"""The runtime's factories: the one place that chooses an executor.

    rt = make_runtime(graph, batch_size, device="cpu", provider="torch", threads=2)   # Runtime
    rt = make_runtime(graph, batch_size, device="cuda", cuda_graph=True)              # CudaRuntime
    prog = build_program(stages, externals, outputs, batch_size, threads, provider="onnxruntime")

Both runtimes follow :class:`~.base.RuntimeProtocol`; the kernel providers of the CPU runtime
are those of the registry (:func:`ios_core.runtime.providers.names`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ios_core.ir import Graph, Node
from ios_core.runtime.base import RuntimeProtocol
from ios_core.runtime.emit_provider import build_provider_program
from ios_core.runtime.program import Program


def is_cuda(device: str) -> bool:
    return isinstance(device, str) and (device == "cuda" or device.startswith("cuda:"))


def make_runtime(graph: Graph, batch_size: int = 1, device: str = "cpu", threads: int | None = None,
                 **options) -> RuntimeProtocol:
    """The runtime of ``graph`` on ``device``: the CPU runtime (:class:`~.runtime.Runtime`;
    options ``provider``, ``max_workers``, ``trace``) for ``"cpu"``, the CUDA runtime
    (:class:`~.cuda.CudaRuntime`; options ``cuda_graph``, ``backend``) for ``"cuda"`` or
    ``"cuda:N"``. Unknown devices are a ValueError."""
    if is_cuda(device):
        from ios_core.runtime.cuda import CudaRuntime  # imports CuPy lazily, only when a GPU runtime is asked for

        return CudaRuntime(graph, batch_size, device, threads, **options)
    from ios_core.runtime.runtime import Runtime

    return Runtime(graph, batch_size, device, threads, **options)


def build_program(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node], outputs: Sequence[Node],
                  batch_size: int, threads: int, random_weights: bool = False, max_workers: int | None = None,
                  seed: int = 0, trace: list | None = None, provider: str = "torch", precision: str = "fp32",
                  calibration: Sequence | None = None) -> Program:
    """Plan ``stages`` (stage -> groups -> schedulable nodes) whose inputs are ``externals``
    (filled by the caller through ``input_slots``) and emit the CPU program for ``provider``:
    torch closures (:func:`~.emit_torch.build_torch_program`), or the plan's pieces compiled by
    that library (:func:`~.emit_provider.build_provider_program`); ``outputs`` keep their
    values after the run (``Program.output(name)``). ``precision``: each piece compiled at it (the
    provider's ``precisions``; int8 calibrated on ``calibration``, or with random weights on seeded
    random inputs; torch at bf16: the whole program in bfloat16, its inputs made by
    ``program.tensors.from_numpy``)."""
    if provider == "torch":
        from ios_core.runtime import providers

        reason = providers.get("torch").precision_reason(precision)
        if reason is not None:
            raise ValueError(reason)
        from ios_core.runtime.emit_torch import build_torch_program  # torch only for torch kernels

        return build_torch_program(stages, externals, outputs, batch_size, threads, random_weights=random_weights,
                                   max_workers=max_workers, seed=seed, trace=trace, precision=precision)
    return build_provider_program(stages, externals, outputs, batch_size, threads, provider,
                                  random_weights=random_weights, max_workers=max_workers, seed=seed, trace=trace,
                                  precision=precision, calibration=calibration)
