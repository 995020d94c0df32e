"""The torch provider: the runtime's own planned closures (``ios_core.runtime.plan``, torch
CPU kernels, oneDNN convolutions). ``Runtime(provider="torch")`` plans the whole graph with
them directly (zero-copy concatenation, arena); compiling a single piece here plans just that
piece the same way, and a call copies its outputs into the bound arrays. torch is imported when
this provider is used, never by the registry."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ios_core.runtime.providers.base import Kernel, Piece, Provider
from ios_core.runtime.providers.settings import provider_settings


class TorchKernel(Kernel):
    def __init__(self, piece: Piece, batch_size: int, threads: int, program, info: dict):
        super().__init__(piece, batch_size, info)
        self.threads = threads
        self.program = program

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Callable[[], None]:
        import torch

        self._check(inputs, outputs)
        prog, env = self.program, self.program.env
        ins = [(prog.input_slots[n.name], torch.from_numpy(a)) for n, a in zip(self.piece.inputs, inputs)]
        outs = [(prog.output_getters[n.name], torch.from_numpy(a)) for n, a in zip(self.piece.outputs, outputs)]
        threads = self.threads

        def call():
            caller = torch.get_num_threads()
            if caller != threads:
                torch.set_num_threads(threads)
            try:
                with torch.inference_mode():
                    for k, t in ins:
                        env[k] = t
                    prog.run()
                    for get, t in outs:
                        t.copy_(get())
            finally:
                if caller != threads:
                    torch.set_num_threads(caller)
        return call


class TorchProvider(Provider):
    def version(self) -> str | None:
        import torch

        return torch.__version__

    def _compile(self, piece, batch_size, threads, random_weights, seed):
        from ios_core.runtime.emit_torch import build_torch_program

        prog = build_torch_program([[piece.nodes]], piece.inputs, piece.outputs, batch_size, threads,
                                   random_weights=random_weights, max_workers=1, seed=seed)
        return TorchKernel(piece, batch_size, threads, prog, provider_settings("torch", threads))


TORCH = TorchProvider(
    name="torch", requires=("torch",),
    description="torch CPU kernels (oneDNN convolutions), the runtime's planned closures",
    precision_table={"bf16": "not yet: the torch provider's planned closures, arena and zero-copy concatenation are "
                             "float32 (bf16 weights and buffers are not planned)",
                     "int8": "no: the torch provider's planned closures and arena are float32 (the torch adapter's "
                             "FX int8 quantizes a whole module, not a provider's pieces); IOS int8 runs on the "
                             "onnxruntime and openvino providers"})
