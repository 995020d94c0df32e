"""The provider protocol: how the runtime hands a piece of a graph to a kernel library.

A *piece* is a list of schedulable IR nodes (Sequential allowed) that run one after another
on one thread share: one group of a parallel stage, or a run of consecutive stages that run
one group each. Its external inputs are whole values of nodes computed elsewhere (the piece
reads channel slices of them itself), its outputs the values that later pieces or the caller
read. A provider compiles a piece once, at plan time, into a :class:`Kernel`:

    kernel = provider.compile(piece, batch_size=1, threads=1)
    run = kernel.bind(input_arrays, output_arrays)   # once: fixed buffers, no copies
    run()                                            # per call: the library's run, nothing else

Arrays are C-contiguous float32 numpy arrays shaped ``(N, C, H, W)``; a kernel reads its
inputs and writes its outputs in place (the runtime gives each value one buffer for the
whole run).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ios_core.deps import import_problem
from ios_core.ir import Node, leaf_nodes
from ios_core.runtime.plan import Piece


def shapes(nodes: Sequence[Node], batch_size: int) -> list[tuple[int, ...]]:
    """The ``(N, C, H, W)`` shapes of the nodes' values."""
    return [(batch_size, *n.output_shape) for n in nodes]


def make_piece(name: str, nodes: list[Node], outputs: list[Node] | None = None) -> Piece:
    """A piece of ``nodes`` whose inputs are every node they read but do not compute;
    ``outputs`` defaults to the last node."""
    inside: set[int] = set()
    for node in nodes:
        inside.add(id(node))
        inside.update(id(leaf) for leaf in leaf_nodes(node))
    inputs: dict[int, Node] = {}
    for node in nodes:
        for leaf in leaf_nodes(node):
            for v in leaf.values():
                if id(v.node) not in inside:
                    inputs.setdefault(id(v.node), v.node)
    return Piece(name, list(nodes), list(inputs.values()), list(outputs) if outputs is not None else [nodes[-1]])


class Kernel:
    """A compiled piece. ``bind`` fixes the buffers once and returns the per-call function;
    ``info`` records how the library was configured (threads, precision, optimization)."""

    def __init__(self, piece: Piece, batch_size: int, info: dict | None = None):
        self.piece = piece
        self.batch_size = batch_size
        self.info: dict = dict(info or {})
        self.attached: dict = {}

    def attach(self, io) -> Callable[[], None]:
        """The closure the runtime runs for this piece, over a ``PieceIO`` of the plan
        (``program.emit_pieces``): outputs are bound straight to their preallocated arena
        views when contiguous (else to a private buffer, then copied there), inputs to the
        tensors the plan's getters return (a strided channel slice is first copied to a
        contiguous staging buffer). The binding is made once and remade only when an input's
        memory changes (a caller handing in another input tensor). The tensors are those of
        ``io.tensors`` (numpy arrays for every provider but torch: no torch import)."""
        tn = io.tensors
        piece, n = self.piece, self.batch_size
        outs, stores, copied = [], [], 0
        for o, shape in zip(piece.outputs, shapes(piece.outputs, n)):
            d = io.destinations.get(o.name)
            if d is None or not tn.is_contiguous(d):
                copied += d is not None
                d = tn.empty(shape)
            outs.append(tn.array(d))
            stores.append((io.outputs[o.name], d))
        getters = [io.inputs[x.name] for x in piece.inputs]
        staging: list = [None] * len(getters)
        state: dict = {"ptrs": None, "run": None}
        self.attached = {"outputs": outs, "copied_outputs": copied, "staged_inputs": 0}
        contiguous, address, copy = tn.is_contiguous, tn.address, tn.copy

        def call():
            ts = []
            for i, get in enumerate(getters):
                t = get()
                if not contiguous(t):
                    s = staging[i]
                    if s is None:
                        s = staging[i] = tn.empty(tuple(t.shape))
                        self.attached["staged_inputs"] += 1
                    copy(s, t)
                    t = s
                ts.append(t)
            ptrs = [address(t) for t in ts]
            if ptrs != state["ptrs"]:
                state["run"] = self.bind([tn.array(t) for t in ts], outs)
                state["ptrs"] = ptrs
                state["inputs"] = ts  # the binding holds raw pointers: keep the tensors alive
                self.attached["bound"] = state["run"]
            state["run"]()
            for store, t in stores:
                store(t)
        return call

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Callable[[], None]:
        raise NotImplementedError

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """One-shot convenience (tests, tools): fresh output arrays, bound and run once."""
        outs = [np.empty(s, np.float32) for s in shapes(self.piece.outputs, self.batch_size)]
        self.bind([np.ascontiguousarray(x, dtype=np.float32) for x in inputs], outs)()
        return outs

    def _check(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        p, n = self.piece, self.batch_size
        for kind, arrays, want in (("input", inputs, shapes(p.inputs, n)), ("output", outputs, shapes(p.outputs, n))):
            if len(arrays) != len(want):
                raise ValueError(f"piece {p.name!r}: {len(arrays)} {kind}s bound, expected {len(want)}")
            for a, s in zip(arrays, want):
                if a.shape != s or a.dtype != np.float32 or not a.flags.c_contiguous:
                    raise ValueError(f"piece {p.name!r}: {kind} must be a C-contiguous float32 array of shape {s}, "
                                     f"got {a.dtype} {a.shape}")


REFUSED = ("not yet:", "no:")  # how a precision table declares one it cannot give (as the adapters')
CALIBRATION_BATCHES = 2  # seeded random batches a random-weight piece (the cost model's) is calibrated on


def random_feeds(piece: Piece, batch_size: int, seed: int, batches: int = CALIBRATION_BATCHES) -> list[list]:
    """Seeded standard-normal batches for the piece's inputs: the calibration of a piece with random
    weights (a measured cost model's stage, timed at int8: its figure is the kernels' time, not their
    accuracy). A piece of a real cell is calibrated on its real activations (``emit_provider``)."""
    rng = np.random.default_rng(seed + 7919)
    return [[rng.standard_normal(s, dtype=np.float32) for s in shapes(piece.inputs, batch_size)]
            for _ in range(batches)]


def transformer_piece(piece: Piece) -> bool:
    """Whether a piece holds a general-tensor operator (a transformer's: ``ios_core.quantize.has_tensor_nodes``),
    which int8 quantizes as a transformer even where the piece is a dense layer alone (its input a layer norm's
    output elsewhere: the whole-model quantizers' rule, ``ios_core.quantize``)."""
    from ios_core.quantize import has_tensor_nodes

    return has_tensor_nodes(leaf for n in piece.nodes for leaf in leaf_nodes(n))


def convolutions(piece: Piece) -> int:
    """The convolutions among a piece's operators (what int8 quantizes and the read-back counts)."""
    return sum(leaf.TYPE == "conv" for n in piece.nodes for leaf in leaf_nodes(n))


@dataclass
class Provider:
    """Base class: subclasses set ``name``, ``requires`` and implement ``_compile``.
    ``precision_table`` declares the precisions beyond fp32 a piece can be compiled at and how the
    library gets each (``"not yet: <reason>"`` / ``"no: <reason>"`` where it cannot), as an
    adapter's ``precision_table`` does; read through :meth:`precisions`."""

    name: str = ""
    description: str = ""
    requires: tuple[str, ...] = ()
    options: dict = field(default_factory=dict)
    precision_table: dict = field(default_factory=dict)

    def available(self) -> str | None:
        """None, or why this provider cannot run here."""
        return import_problem(self.requires)

    def precisions(self) -> dict[str, str]:
        """{precision: how} beyond fp32, refused ones included."""
        return dict(self.precision_table)

    def precision_reason(self, precision: str) -> str | None:
        """Why a piece cannot be compiled at ``precision`` by this provider, or None."""
        if precision == "fp32":
            return None
        how = self.precisions().get(precision)
        if how is None:
            return f"provider {self.name} does not offer {precision}"
        if how.startswith(REFUSED):
            return f"provider {self.name} {precision}: {how}"
        return None

    def version(self) -> str | None:
        if not self.requires:
            return None
        try:
            return str(importlib.import_module(self.requires[0]).__version__)
        except Exception:
            return None

    def compile(self, piece: Piece, batch_size: int, threads: int, random_weights: bool = False,
                seed: int = 0, precision: str = "fp32", calibration: list | None = None,
                store: str | None = None) -> Kernel:
        """Compile ``piece`` for ``batch_size`` with ``threads`` intra-op threads.
        ``random_weights`` gives nodes without weights seeded random ones (the measured cost
        model times stages of merged convolutions that have none); otherwise the graph's own
        weights are used, never re-seeded. ``precision`` (fp32, bf16, int8; :meth:`precisions`):
        what the library is asked to compute in; the kernel's ``info["precision"]`` is what it
        reports back. int8 is calibrated on ``calibration`` (per batch, one array per piece input:
        the activations that reach the piece, ``emit_provider.stage_calibration``); a random-weight
        piece without one is calibrated on seeded random inputs (:func:`random_feeds`). ``store``: a
        directory (a build cache's) where an int8 piece's quantized model is kept under a key of its
        model and calibration (``ios_core.quantize.stored_key``) and reused by a later build."""
        reason = self.available()
        if reason is not None:
            raise RuntimeError(f"provider {self.name} cannot run: {reason}")
        if int(threads) < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        reason = self.precision_reason(precision)
        if reason is not None:
            raise ValueError(reason)
        if precision == "int8" and calibration is None:
            if not random_weights:
                raise ValueError(f"piece {piece.name!r}: int8 needs the calibration feeds that reach it")
            calibration = random_feeds(piece, int(batch_size), seed)
        if precision == "fp32":
            return self._compile(piece, int(batch_size), int(threads), random_weights, seed)
        extra = {"store": store} if store is not None and precision == "int8" else {}
        return self._compile(piece, int(batch_size), int(threads), random_weights, seed, precision=precision,
                             calibration=calibration, **extra)

    def _compile(self, piece: Piece, batch_size: int, threads: int, random_weights: bool, seed: int,
                 precision: str = "fp32", calibration: list | None = None, store: str | None = None) -> Kernel:
        raise NotImplementedError
