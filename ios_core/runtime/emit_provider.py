"""Emission for a kernel provider other than torch, through the plan's provider hook
(``program.emit_pieces``): the plan is made with ``fuse_sequential=True`` (a run of
consecutive single-group stages is one piece, so there are few library calls; a sequential
schedule is a single piece, the library running the whole graph itself) and
``arena_kinds=("concat", "value")`` (every value crossing pieces has a fixed arena view);
each piece is compiled once by the provider with the thread share the stage gives it, and
bound to those views (``Kernel.attach``: ONNX Runtime IO binding, OpenVINO tensors sharing
memory), so a call moves no data where the views are contiguous. The values are numpy arrays
(``tensors.for_provider``): a program on ONNX Runtime or OpenVINO kernels never imports torch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ios_core.ir import Node
from ios_core.runtime import providers as _providers
from ios_core.runtime.passes import make_plan
from ios_core.runtime.plan import Piece, RuntimePlan
from ios_core.runtime.program import PieceIO, Program, emit_pieces
from ios_core.runtime.tensors import for_provider

ARENA_KINDS = ("concat", "value")


def plan_for_provider(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node],
                      outputs: Sequence[Node], batch_size: int) -> RuntimePlan:
    """The plan a provider executor runs: runs of single-group stages fused, every buffer in
    the arena."""
    return make_plan(stages, externals, outputs, batch_size, arena_kinds=ARENA_KINDS, fuse_sequential=True)


def emit_provider(plan: RuntimePlan, provider: str, threads: int, random_weights: bool = False,
                  max_workers: int | None = None, seed: int = 0, trace: list | None = None) -> Program:
    """The program of ``plan`` whose pieces run on ``provider``."""
    prov = _providers.require(provider)
    kernels: list = []
    pieces: list[Piece] = []
    t0 = time.perf_counter()

    def compile_piece(piece: Piece, io: PieceIO, share: int):
        kernel = prov.compile(piece, plan.batch_size, share, random_weights=random_weights, seed=seed + len(kernels))
        kernels.append(kernel)
        pieces.append(piece)
        return kernel.attach(io)

    program = emit_pieces(plan, threads, compile_piece, max_workers=max_workers, trace=trace,
                          tensors=for_provider(prov.name))
    program.kernels, program.pieces = kernels, pieces
    program.stats.update({
        "provider": prov.name, "provider_version": prov.version(),
        "provider_settings": _providers.provider_settings(prov.name, threads),
        "pieces": len(kernels), "compile_seconds": time.perf_counter() - t0,
        "staged_inputs": sum(k.attached.get("staged_inputs", 0) for k in kernels),
        "copied_outputs": sum(k.attached.get("copied_outputs", 0) for k in kernels),
    })
    return program


def build_provider_program(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node],
                           outputs: Sequence[Node], batch_size: int, threads: int, provider: str,
                           random_weights: bool = False, max_workers: int | None = None, seed: int = 0,
                           trace: list | None = None) -> Program:
    """Plan (``plan_for_provider``) and emit for ``provider``: the contract of
    ``emit_torch.build_torch_program`` for any other provider."""
    return emit_provider(plan_for_provider(stages, externals, outputs, batch_size), provider, threads,
                         random_weights=random_weights, max_workers=max_workers, seed=seed, trace=trace)
