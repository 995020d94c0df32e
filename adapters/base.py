"""The adapter protocol: one small interface every framework implements.

An adapter turns an IOS graph (with its weights) into a framework's program:

    adapter = adapters.get("onnxruntime")
    reason = adapter.available()          # None, or why it cannot run here
    compiled = adapter.build(graph, batch_size=1, device="cpu", threads=2)
    y = compiled.run(x)                    # np.ndarray, NCHW float32, like the oracle

Timing is never done here: the harness times ``compiled.execute(compiled.prepare(x))`` with
``ios_core.measurement.measure.measure``. ``prepare`` moves/converts the input outside the timed region
(layout changes, device copies); ``execute`` is the timed call; ``finish`` turns its result
into the oracle's layout.

Profiling (``ios-bench profile``, ``ios_bench.profiling``) is one optional hook of the same
protocol: ``adapter.profile_options()`` are the build options that switch the framework's own
profiler on (ONNX Runtime's session profiling, OpenVINO's PERF_COUNT), and
``compiled.profile(x, warmup, repeat)`` runs the program under that profiler, timing the profiled
calls with the one measurement function, and returns what the profiler reports per operator as
:class:`OpTime` rows whose ``sources`` are the names the lowering gave (ONNX node names,
``record_function`` ranges, IR node names): the harness maps those to the IR operators by name.
A program without the hook raises :class:`ProfilerMissing`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ios_core.check import DEFAULT_RTOL
from ios_core.deps import import_problem
from ios_core.ir import Graph


class ProfilerMissing(RuntimeError):
    """This program has no per-operator profiler the harness can read (the reason is the message)."""


@dataclass(frozen=True)
class OpTime:
    """One thing a framework's profiler timed: its own ``name`` for it (node, layer, kernel,
    range), the mean ``ms`` per inference, the lowering's names it computes (``sources``: empty
    when the profiler does not say: counted as "fused, unmapped") and the framework's type for it;
    ``exec_type`` and ``self_ms`` where the framework's profiler gives them (else empty and None)."""

    name: str
    ms: float
    sources: tuple[str, ...] = ()
    kind: str = ""
    exec_type: str = ""  # the kernel the framework ran for it, where it says (OpenVINO's exec_type)
    self_ms: float | None = None  # its own time, its children's excluded, where the framework gives both (torch)


def median_per_name(calls: list[dict[str, float]]) -> dict[str, float]:
    """Per name, the median over ``calls`` (one ``{name: ms}`` per profiled call; a name missing
    from a call took 0 there) with the one median: a call a co-tenant disturbed moves no row."""
    from ios_core.measurement.stats import median

    names = dict.fromkeys(n for call in calls for n in call)
    return {n: median([call.get(n, 0.0) for call in calls]) for n in names}


def per_call_ms(windows: list[tuple[float, float]], events, units_per_ms: float) -> list[dict[str, float]]:
    """Per profiled call (``windows``: its ``(start, end)`` on the profiler's clock, sorted), per name,
    the wall time that name's events cover, **counted once**: an event ``(name, start, end)`` belongs
    to the call whose window holds its start and is clipped to that window, and one name's intervals
    are merged before they are added (the same operator's events on several threads or planes at
    once overlap; adding them would count the overlap twice, and a name could then take longer than
    its call). ``units_per_ms``: clock units per millisecond (ps: 1e9, ns: 1e6, us: 1e3)."""
    import bisect

    starts = [lo for lo, _ in windows]
    spans: list[dict[str, list[tuple[float, float]]]] = [{} for _ in windows]
    for name, s, t in events:
        i = bisect.bisect_right(starts, s) - 1
        if i < 0 or s > windows[i][1]:
            continue
        spans[i].setdefault(name, []).append((s, min(t, windows[i][1])))
    return [{name: union_length(iv) / units_per_ms for name, iv in call.items()} for call in spans]


def write_chrome_trace(path, events) -> None:
    """Keep a profiler's timed events as a Chrome trace (JSON object format, which Perfetto and
    chrome://tracing open), written atomically. ``events``: ``(name, process, thread, start_us,
    duration_us)`` tuples on one clock (microseconds), ``process`` and ``thread`` names or numbers."""
    from ios_core.atomic import atomic_write_json

    pids: dict = {}
    tids: dict = {}
    out = []
    for name, process, thread, start, dur in events:
        pid = pids.setdefault(process, len(pids) + 1)
        tid = tids.setdefault((process, thread), len(tids) + 1)
        out.append({"name": str(name), "ph": "X", "pid": pid, "tid": tid, "ts": float(start), "dur": float(dur)})
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": str(p)}} for p, pid in pids.items()]
    meta += [{"name": "thread_name", "ph": "M", "pid": pids[p], "tid": tid, "args": {"name": str(t)}}
             for (p, t), tid in tids.items()]
    atomic_write_json(path, {"traceEvents": meta + out, "displayTimeUnit": "ms"}, indent=None)


def union_length(intervals) -> float:
    """The length of the union of ``(start, end)`` intervals (overlaps counted once)."""
    total, end = 0.0, None
    for s, t in sorted(intervals):
        if end is None or s > end:
            total += t - s
            end = t
        elif t > end:
            total += t - end
            end = t
    return total


REFUSED = ("not yet:", "no:")  # how a precision table declares one it cannot give


def precision_reason(name: str, table: dict, precision: str, device: str) -> str | None:
    """The one rule (an adapter's, or a probe's copy of its ``precisions(device)`` table): why
    ``name`` cannot give ``precision`` on ``device``, or None when its table offers it."""
    how = (table or {}).get(precision)
    kind = device.split(":", 1)[0]
    if how is None:
        return f"{name} does not offer {precision} on {kind}"
    if how.startswith(REFUSED):
        return f"{name} {precision} on {kind}: {how}"
    return None


class Compiled:
    """A built program. Subclasses implement ``execute`` (and ``prepare``/``finish`` when the
    framework's input or output is not a NCHW numpy array). ``info`` records its configuration:
    at least ``threads``, ``precision`` (what the engine reports it computes in),
    ``execution_mode`` and ``tuning`` (the budget spent, or "none"); the harness stores it with
    the cell and the report shows it per peer."""

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
        """A device timer for ``ios_core.measurement.measure.measure`` (CUDA events on the stream this
        program runs on), or None: the host clock after ``sync``."""
        return None

    def run(self, x: np.ndarray) -> np.ndarray:
        return self.finish(self.execute(self.prepare(np.ascontiguousarray(x, dtype=np.float32))))

    def profile(self, x: np.ndarray, warmup: int = 3, repeat: int = 10, trace=None):
        """Run under the framework's own profiler: ``(rows, measurement)``, ``rows`` a list of
        :class:`OpTime` (ms per inference), ``measurement`` the profiled calls timed with
        ``ios_core.measurement.measure.measure``. Build with ``Adapter.profile_options()`` first.
        ``trace``: a path where the profiler's own events of these calls are kept as a Chrome trace
        (Perfetto) JSON file, written atomically, by a framework whose profiler has timed events (one
        without them writes none). May be called again on the same build (rounds of profiled calls)."""
        raise ProfilerMissing("this adapter has no per-operator profiler hook")


@dataclass
class Adapter:
    """Base class: subclasses set ``name``, ``description``, ``requires`` (import names) and
    implement ``_build``. ``available`` and ``version`` never raise."""

    name: str = ""
    description: str = ""
    requires: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    tolerance: float = DEFAULT_RTOL  # may only be tighter than ios_core.check.tolerance_for(precision)
    precision: str = "fp32"
    # The precisions it offers beyond fp32, per device kind, and how its users get each one
    # ({"cpu": {"bf16": "INFERENCE_PRECISION_HINT=bf16"}}); a "how" that starts with "not yet:" or
    # "no:" declares a precision it cannot give, with the reason. fp32 is offered on every device
    # (``fp32_how`` says how it is forced). Read through :meth:`precisions`; the one place per adapter.
    precision_table: dict = field(default_factory=dict)
    fp32_how: str = "float32 (the framework's default)"
    options: dict = field(default_factory=dict)
    mode: str = ""  # how the framework executes (eager, ORT_PARALLEL, XLA, ...): shown in reports
    # How a user keeps several requests in flight with this framework (the LoadGen scenarios,
    # ios_bench.scenarios.concurrency): "instances" (N programs built with a share of the thread
    # budget each, one caller thread per program), "shared" (one program, N run calls in flight on
    # it), "async" (the framework's own asynchronous queue: ``Compiled.in_flight(jobs)``),
    # "contexts" (a GPU engine with one execution context and stream per request in flight:
    # ``Compiled.another_context()``), or None (cannot; ``concurrency_note`` says why).
    concurrency: str | None = "instances"
    concurrency_note: str = ""

    def in_flight_options(self, instances: int) -> dict:
        """Build options that configure the framework for ``instances`` requests in flight, as its
        users do (OpenVINO's throughput hint and stream count, TensorFlow's inter-op pool)."""
        return {}

    def precisions(self, device: str = "cpu") -> dict[str, str]:
        """{precision: how this adapter gets it on ``device``} for every precision it declares there,
        refused ones included ("not yet: <reason>"); fp32 first."""
        kind = device.split(":", 1)[0]
        return {"fp32": self.fp32_how, **(self.precision_table.get(kind) or {})}

    def precision_reason(self, precision: str, device: str = "cpu") -> str | None:
        """Why this adapter cannot give ``precision`` on ``device`` (one line), or None when it offers it."""
        return precision_reason(self.name, self.precisions(device), precision, device)

    def available(self, device: str = "cpu") -> str | None:
        if device not in self.devices:
            return f"{self.name} does not run on {device}"
        return import_problem(self.requires)

    def profile_options(self) -> dict:
        """Build options that switch the framework's per-operator profiler on (``Compiled.profile``);
        a profiled build is a separate build, never the one a cell times."""
        return {}

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
        precision = options.pop("precision", "fp32")  # asked for by the sweep's cell (run --precision)
        reason = self.precision_reason(precision, device)
        if reason is not None:
            raise ValueError(reason)
        if precision != "fp32":  # only an adapter that offers it takes the option
            options["precision"] = precision
        self._check_options(options)
        compiled = self._build(graph, batch_size, device, threads, **options)
        compiled.info.setdefault("build_seconds", time.perf_counter() - t0)
        compiled.info.setdefault("threads", threads)
        compiled.info.setdefault("precision", self.precision)
        compiled.info.setdefault("framework_version", self.version())
        compiled.info.setdefault("tolerance", self.tolerance)
        # The configuration every report shows per peer: threads, precision, execution mode and
        # tuning budget ("none" for frameworks that are not tuned).
        compiled.info.setdefault("execution_mode", self.mode or "default")
        compiled.info.setdefault("tuning", "none")
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
