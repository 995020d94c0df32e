"""The adapter protocol: one small interface every framework implements.

An adapter turns an IOS graph (with its weights) into a framework's program:

    adapter = adapters.get("onnxruntime")
    reason = adapter.available()          # None, or why it cannot run here
    compiled = adapter.build(graph, batch_size=1, device="cpu", threads=2)
    y = compiled.run(x)                    # np.ndarray, NCHW float32, like the oracle

Timing is never done here: the harness times ``compiled.execute(compiled.prepare(x))`` with
``ios_core.measure.measure``. ``prepare`` moves/converts the input outside the timed region
(layout changes, device copies); ``execute`` is the timed call; ``finish`` turns its result
into the oracle's layout.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import numpy as np

from ios_core.check import DEFAULT_RTOL
from ios_core.ir import Graph


class Compiled:
    """A built program. Subclasses implement ``execute`` (and ``prepare``/``finish`` when the
    framework's input or output is not a NCHW numpy array)."""

    def __init__(self, info: dict | None = None):
        # Recorded with every result: build_seconds, threads, precision, framework version, ...
        self.info: dict = dict(info or {})

    def prepare(self, x: np.ndarray):
        return x

    def execute(self, prepared):
        raise NotImplementedError

    def finish(self, out) -> np.ndarray:
        return np.asarray(out)

    def sync(self) -> None:
        """Wait for asynchronous work (GPU); called by the measurement before each clock read."""

    def timer(self):
        """A device timer for ``ios_core.measure.measure`` (CUDA events on the stream this
        program runs on), or None: the host clock after ``sync``."""
        return None

    def run(self, x: np.ndarray) -> np.ndarray:
        return self.finish(self.execute(self.prepare(np.ascontiguousarray(x, dtype=np.float32))))


@dataclass
class Adapter:
    """Base class: subclasses set ``name``, ``description``, ``requires`` (import names) and
    implement ``_build``. ``available`` and ``version`` never raise."""

    name: str = ""
    description: str = ""
    requires: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    tolerance: float = DEFAULT_RTOL
    precision: str = "fp32"
    options: dict = field(default_factory=dict)

    def available(self, device: str = "cpu") -> str | None:
        if device not in self.devices:
            return f"{self.name} does not run on {device}"
        for module in self.requires:
            try:
                importlib.import_module(module)
            except Exception as e:  # ImportError, or a broken install raising anything
                return f"{module} is not importable ({type(e).__name__}: {str(e).splitlines()[0][:120]})"
        return None

    def version(self) -> str | None:
        if not self.requires:
            return None
        try:
            from importlib.metadata import version

            return version(self.distribution())
        except Exception:
            return None

    def distribution(self) -> str:
        """The installed distribution whose version is recorded (first requirement by default)."""
        return self.requires[0]

    def build(self, graph: Graph, batch_size: int, device: str = "cpu", threads: int | None = None,
              **options) -> Compiled:
        reason = self.available(device)
        if reason is not None:
            raise RuntimeError(f"{self.name} cannot run: {reason}")
        if not graph.has_weights:
            raise ValueError(f"graph {graph.name!r} has no weights")
        import time

        t0 = time.perf_counter()
        options = {**self.options, **options}
        self._check_options(options)
        compiled = self._build(graph, batch_size, device, threads, **options)
        compiled.info.setdefault("build_seconds", time.perf_counter() - t0)
        compiled.info.setdefault("threads", threads)
        compiled.info.setdefault("precision", self.precision)
        compiled.info.setdefault("framework_version", self.version())
        compiled.info.setdefault("tolerance", self.tolerance)
        return compiled

    def _check_options(self, options: dict) -> None:
        """Reject build options that ``_build`` does not name (unless it takes ``**options``)."""
        import inspect

        params = inspect.signature(self._build).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return
        unknown = sorted(set(options) - set(params))
        if unknown:
            raise TypeError(f"{self.name}: unknown build options {unknown}")

    def _build(self, graph: Graph, batch_size: int, device: str, threads: int | None, **options) -> Compiled:
        raise NotImplementedError
