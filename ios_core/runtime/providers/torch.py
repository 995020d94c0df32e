"""The torch provider: the runtime's own planned closures (``ios_core.runtime.plan``, torch
CPU kernels, oneDNN convolutions). ``Runtime(provider="torch")`` plans the whole graph with
them directly (zero-copy concatenation, arena); compiling a single piece here plans just that
piece the same way, and a call copies its outputs into the bound arrays. torch is imported when
this provider is used, never by the registry.

bf16 (:data:`BF16_HOW`): the planned closures at ``torch.bfloat16`` (``emit_torch``: weights cast once
at build, the arena and every activation in bf16, zero-copy concatenation included), the way a PyTorch
user gets bf16 on the CPU (the torch adapter's ``module.to(torch.bfloat16)``); a piece compiled here
converts its float32 inputs on entry and its outputs back to float32. The kernel's
``info["precision"]`` is what the program was built with (``emit_torch.computes_in``)."""

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
        entry = prog.tensors.from_numpy  # bf16: the bound float32 inputs converted on each call
        convert = prog.tensors.precision != "fp32"

        def call():
            caller = torch.get_num_threads()
            if caller != threads:
                torch.set_num_threads(threads)
            try:
                with torch.inference_mode():
                    for k, t in ins:
                        env[k] = entry(t.numpy()) if convert else t
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

    def _compile(self, piece, batch_size, threads, random_weights, seed, precision="fp32", calibration=None):
        from ios_core.runtime.emit_torch import build_torch_program

        prog = build_torch_program([[piece.nodes]], piece.inputs, piece.outputs, batch_size, threads,
                                   random_weights=random_weights, max_workers=1, seed=seed, precision=precision)
        info = {**provider_settings("torch", threads, precision), "precision": prog.stats["precision"]}
        return TorchKernel(piece, batch_size, threads, prog, info)


BF16_HOW = ("the planned closures in torch.bfloat16, as a PyTorch user runs bf16 on the CPU (module.to(torch.bfloat16) "
            "with a bf16 input: oneDNN's bf16 kernels on AVX512_BF16): weights cast once at build, the arena and every "
            "activation bf16 (zero-copy concatenation included), the input converted on entry and the output back to "
            "float32; read back from the program's weights and arena")

TORCH = TorchProvider(
    name="torch", requires=("torch",),
    description="torch CPU kernels (oneDNN convolutions), the runtime's planned closures",
    precision_table={"bf16": BF16_HOW,
                     "int8": "no: the torch provider's planned closures and arena are float32 (the torch adapter's "
                             "FX int8 quantizes a whole module, not a provider's pieces); IOS int8 runs on the "
                             "onnxruntime and openvino providers"})
