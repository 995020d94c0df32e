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

import numpy as np

from ios_core.ir import Node, leaf_nodes
from ios_core.runtime import providers as _providers
from ios_core.runtime.passes import make_plan
from ios_core.runtime.plan import Piece, RuntimePlan
from ios_core.runtime.program import PieceIO, Program, emit_pieces
from ios_core.runtime.providers import make_piece
from ios_core.runtime.tensors import for_provider

ARENA_KINDS = ("concat", "value")


def plan_for_provider(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node],
                      outputs: Sequence[Node], batch_size: int) -> RuntimePlan:
    """The plan a provider executor runs: runs of single-group stages fused, every buffer in
    the arena."""
    return make_plan(stages, externals, outputs, batch_size, arena_kinds=ARENA_KINDS, fuse_sequential=True)


def stage_calibration(plan: RuntimePlan, prov, threads: int, batches: Sequence) -> dict[str, list[list]]:
    """Per piece of ``plan`` (by name), the calibration feeds of an int8 build: for each calibration batch
    of the network's input (``batches``: ``ios_core.quantize.calibration_inputs``), the arrays that reach
    the piece's inputs when that batch goes through the **fp32** graph, so a piece is quantized on what
    it sees in the whole model. They are computed by ``prov`` itself in fp32: the plan's pieces in
    order as one piece whose outputs are every value a piece reads (no torch, no second runtime)."""
    pieces = plan.pieces()
    inside: set[int] = set()
    for piece in pieces:
        for node in piece.nodes:
            inside.add(id(node))
            inside.update(id(leaf) for leaf in leaf_nodes(node))
    needed = list({id(x): x for piece in pieces for x in piece.inputs}.values())
    computed = [x for x in needed if id(x) in inside]
    whole = make_piece("calibration", [n for piece in pieces for n in piece.nodes], computed)
    if len(whole.inputs) != 1:
        raise ValueError(f"int8 calibration needs one external input, the plan has {len(whole.inputs)}")
    kernel = prov.compile(whole, plan.batch_size, threads) if computed else None
    out = {piece.name: [] for piece in pieces}
    for x in batches:
        values = {whole.inputs[0].name: np.ascontiguousarray(x, dtype=np.float32)}
        if kernel is not None:
            values.update({n.name: v for n, v in zip(computed, kernel([x]))})
        for piece in pieces:
            out[piece.name].append([values[i.name] for i in piece.inputs])
    return out


def engine_precision(kernels: Sequence, asked: str) -> tuple[str, str | None]:
    """What a program computes in, read back from its kernels (each kernel's ``info["precision"]``, what
    its library reported). bf16: ``asked`` only where every piece reports it. int8, by the whole-model
    adapters' rule (an int8 model is int8 where its convolutions run as integer kernels): int8 when
    the pieces run some convolutions as integer kernels; the pieces whose convolutions all stay in a
    float kernel (OpenVINO keeps grouped and depthwise ones in f32) are named in the note. Otherwise
    the precision the pieces report, with a note naming those that fell short."""
    if asked == "int8":
        convs = [k for k in kernels if k.info.get("convolutions")]
        short = [k for k in convs if k.info.get("precision") != "int8"]
        if convs and len(short) < len(convs):
            return "int8", (f"{len(short)} of {len(convs)} pieces with convolutions run none as integer kernels "
                            f"({_names(short)})" if short else None)
        if not convs:
            return "fp32", "no piece has a convolution to quantize"
    else:
        short = [k for k in kernels if k.info.get("precision", "fp32") != asked]
    if not short:
        return asked, None
    got = sorted({str(k.info.get("precision", "fp32")) for k in short})
    return "/".join(got), f"{len(short)} of {len(kernels)} pieces compute in {'/'.join(got)} ({_names(short)})"


def float_ops(kernels: Sequence) -> dict:
    """The program's ``float_ops`` (``ios_core.quantize.float_heavy``'s fields: convolutions and matrix
    products left in float), summed over its pieces' read-backs; a piece that reports none counts its
    convolutions as float (it computes in float: nothing says otherwise)."""
    out = {"conv": 0, "matmul": 0}
    for k in kernels:
        got = k.info.get("float_ops")
        if isinstance(got, dict):
            for key in out:
                out[key] += int(got.get(key, 0))
        else:
            out["conv"] += int(k.info.get("convolutions") or 0)
    return out


def _names(kernels: Sequence) -> str:
    return ", ".join(k.piece.name for k in kernels[:5]) + (" ..." if len(kernels) > 5 else "")


def emit_provider(plan: RuntimePlan, provider: str, threads: int, random_weights: bool = False,
                  max_workers: int | None = None, seed: int = 0, trace: list | None = None,
                  precision: str = "fp32", calibration: Sequence | None = None, store: str | None = None) -> Program:
    """The program of ``plan`` whose pieces run on ``provider``, each compiled at ``precision``
    (the provider's ``precisions``); an int8 program with the graph's own weights is calibrated per
    piece on the activations ``calibration`` (batches of the network's input) produce there
    (:func:`stage_calibration`). ``stats["precision"]`` is what the pieces' libraries report
    (:func:`engine_precision`), with ``precision_note`` where they fall short of it. ``store``: where
    int8 pieces' quantized models are kept and reused (a build cache's directory; ``Provider.compile``)."""
    prov = _providers.require(provider)
    reason = prov.precision_reason(precision)
    if reason is not None:
        raise ValueError(reason)
    kernels: list = []
    pieces: list[Piece] = []
    t0 = time.perf_counter()
    feeds = None
    if precision == "int8" and not random_weights:
        if calibration is None:
            raise ValueError("an int8 program needs its calibration inputs")
        feeds = stage_calibration(plan, prov, threads, calibration)
    calibration_seconds = time.perf_counter() - t0

    def compile_piece(piece: Piece, io: PieceIO, share: int):
        kernel = prov.compile(piece, plan.batch_size, share, random_weights=random_weights, seed=seed + len(kernels),
                              precision=precision, calibration=feeds[piece.name] if feeds is not None else None,
                              store=store)
        kernels.append(kernel)
        pieces.append(piece)
        return kernel.attach(io)

    program = emit_pieces(plan, threads, compile_piece, max_workers=max_workers, trace=trace,
                          tensors=for_provider(prov.name))
    program.kernels, program.pieces = kernels, pieces
    got, note = engine_precision(kernels, precision) if precision != "fp32" else ("fp32", None)
    program.stats.update({
        "provider": prov.name, "provider_version": prov.version(),
        "provider_settings": _providers.provider_settings(prov.name, threads, precision),
        "pieces": len(kernels), "compile_seconds": time.perf_counter() - t0,
        "staged_inputs": sum(k.attached.get("staged_inputs", 0) for k in kernels),
        "copied_outputs": sum(k.attached.get("copied_outputs", 0) for k in kernels),
        "precision": got,
    })
    if precision == "int8":  # the heavy operators every piece left in float, as a whole-model int8 build records them
        program.stats["float_ops"] = float_ops(kernels)
    if note:
        program.stats["precision_note"] = note
    if precision == "int8":
        calibs = [k.info["calibration"] for k in kernels if k.info.get("calibration")]
        calib = {k: v for k, v in (calibs[0] if calibs else {}).items() if k != "cache"}
        if store is not None:  # cold where any piece was quantized now
            calib["cache"] = "cold" if any(c.get("cache") != "warm" for c in calibs) else "warm"
        program.stats["calibration"] = {
            **calib, "pieces": len(kernels), "seconds": round(calibration_seconds, 3),
            "stage_inputs": ("seeded random inputs (random weights)" if feeds is None else
                             f"each piece's inputs as the calibration inputs reach them in the fp32 graph "
                             f"({prov.name} in f32)")}
    return program


def build_provider_program(stages: Sequence[Sequence[Sequence[Node]]], externals: Sequence[Node],
                           outputs: Sequence[Node], batch_size: int, threads: int, provider: str,
                           random_weights: bool = False, max_workers: int | None = None, seed: int = 0,
                           trace: list | None = None, precision: str = "fp32",
                           calibration: Sequence | None = None) -> Program:
    """Plan (``plan_for_provider``) and emit for ``provider``: the contract of
    ``emit_torch.build_torch_program`` for any other provider."""
    return emit_provider(plan_for_provider(stages, externals, outputs, batch_size), provider, threads,
                         random_weights=random_weights, max_workers=max_workers, seed=seed, trace=trace,
                         precision=precision, calibration=calibration)
