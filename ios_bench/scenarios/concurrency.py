"""Several requests in flight, each framework its own way (``Adapter.concurrency``), and the
instance/thread configurations a sweep searches.

Every engine has one interface: ``load(inputs)`` hands it the query sample library,
``start(done)``, ``submit(sample, token)`` (never blocks: the caller is LoadGen's issue thread) and
``stop()``. A request is served as a service serves it: its input is prepared for the program
(``Compiled.prepare``: layout change, a copy to the device), run, and its output materialized in
the oracle's layout (``Compiled.finish``); the engine then calls ``done(token, sample, output)``
from whichever thread finished it. (Inputs are prepared per request, not once up front: a program
may prepare into one fixed buffer per context, as TensorRT and ONNX Runtime's I/O binding do.)

- ``instances`` (torch, TensorFlow, TVM, IOS, and any adapter by default): N programs, each built
  with ``threads // N`` threads, one caller thread each (:class:`CallerThreads`).
- ``shared`` (ONNX Runtime): one session built with ``threads // N`` intra-op threads and N caller
  threads with run calls in flight on it.
- ``async`` (OpenVINO): one compiled model with the THROUGHPUT hint and N streams
  (``Adapter.in_flight_options``), requests kept in flight by its ``AsyncInferQueue``
  (:class:`AsyncQueue`), the whole thread budget given to the plugin.
- ``contexts`` (TensorRT, GPU only): one engine with N execution contexts, each on its own CUDA
  stream, one caller thread each. Written against TensorRT's documented API; **not run here** (no
  GPU on the development machines).
- CUDA streams: on ``cuda``, a program that offers ``own_stream()`` (torch) runs each caller
  thread's calls on a CUDA stream of its own; the IOS CUDA runtime has its own streams per
  instance. Run once, LoadGen Offline on an H200 (docs/results/gpu-h200-2026-11-26/).
"""

from __future__ import annotations

import contextlib
import queue
import threading

import numpy as np

KINDS = ("instances", "shared", "async", "contexts")
GPU_ONLY = {"contexts": "TensorRT execution contexts need an NVIDIA GPU"}


def configurations(scenario: str, threads: int, wanted: list[int] | None = None) -> list[tuple[int, int]]:
    """(instances, threads per instance) to try: every N in 1..threads (or the ``wanted`` ones that fit),
    each with ``threads // N`` threads. SingleStream has one request in flight by definition: one
    instance with the whole budget."""
    if scenario == "single-stream":
        return [(1, threads)]
    ns = sorted({n for n in (wanted or range(1, threads + 1)) if 1 <= n <= threads})
    return [(n, max(1, threads // n)) for n in ns]


def variant(scenario: str, instances: int, instance_threads: int) -> str:
    """The part of a cell's key that says its scenario and configuration: ``offline:2x1``."""
    return f"{scenario}:{instances}x{instance_threads}"


def scenario_problem(adapter, scenario: str, device: str) -> str | None:
    """Why ``adapter`` cannot run ``scenario`` on ``device`` (one phrase), or None."""
    kind = getattr(adapter, "concurrency", "instances")
    if kind is None:
        return (f"{adapter.name} cannot keep several requests in flight"
                + (f": {adapter.concurrency_note}" if getattr(adapter, "concurrency_note", "") else ""))
    if kind not in KINDS:
        return f"{adapter.name} declares an unknown concurrency {kind!r}"
    if kind in GPU_ONLY and device == "cpu":
        return f"{adapter.name}: {GPU_ONLY[kind]}"
    return None


class _Engine:
    kind = ""

    def __init__(self, programs: list, instances: int):
        self.programs = programs  # distinct built programs (checked against the oracle before timing)
        self.instances = instances
        self.inputs: list[np.ndarray] = []
        self._done = None

    def load(self, inputs: list[np.ndarray]) -> None:
        self.inputs = [np.ascontiguousarray(x, dtype=np.float32) for x in inputs]


class CallerThreads(_Engine):
    """N caller threads over a work queue; thread i runs program ``i % len(programs)`` (N programs
    for ``instances``/``contexts``, one shared program for ``shared``)."""

    def __init__(self, programs: list, instances: int, kind: str):
        super().__init__(programs, instances)
        self.kind = kind
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.error: BaseException | None = None

    def start(self, done) -> None:
        self._done = done
        for i in range(self.instances):
            t = threading.Thread(target=self._serve, args=(i % len(self.programs),), daemon=True,
                                 name=f"ios-bench-instance-{i}")
            t.start()
            self._threads.append(t)

    def _serve(self, which: int) -> None:
        program = self.programs[which]
        own = getattr(program, "own_stream", None)  # CUDA streams: each caller on its own (torch on cuda)
        with own() if own is not None else contextlib.nullcontext():
            self._loop(program)

    def _loop(self, program) -> None:
        inputs = self.inputs
        while True:
            item = self._queue.get()
            if item is None:
                return
            sample, token = item
            try:
                out = program.execute(program.prepare(inputs[sample]))
                program.sync()
                y = program.finish(out)
            except BaseException as e:  # noqa: B036 - reported after the run; the query still completes
                self.error = self.error or e
                y = None
            self._done(token, sample, y)

    def submit(self, sample: int, token) -> None:
        self._queue.put((sample, token))

    def stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=60)
        self._threads = []


class AsyncQueue(_Engine):
    """The framework's own asynchronous queue (``Compiled.in_flight(jobs)``, OpenVINO's
    ``AsyncInferQueue``): a feeder thread hands requests to it (its ``start_async`` waits for a free
    request, so LoadGen's issue thread never blocks); completions arrive on its callback."""

    kind = "async"

    def __init__(self, program, instances: int):
        super().__init__([program], instances)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._feeder: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self, done) -> None:
        self._done = done
        self._aq = self.programs[0].in_flight(self.instances)
        finish = self.programs[0].finish

        def completed(request, userdata):
            sample, token = userdata
            try:
                y = finish(request.get_output_tensor(0).data)
            except BaseException as e:  # noqa: B036
                self.error = self.error or e
                y = None
            done(token, sample, y)

        self._aq.set_callback(completed)
        self._feeder = threading.Thread(target=self._feed, daemon=True, name="ios-bench-async-feeder")
        self._feeder.start()

    def _feed(self) -> None:
        program, inputs = self.programs[0], self.inputs
        while True:
            item = self._queue.get()
            if item is None:
                return
            sample, token = item
            self._aq.start_async({0: program.prepare(inputs[sample])}, (sample, token))

    def submit(self, sample: int, token) -> None:
        self._queue.put((sample, token))

    def stop(self) -> None:
        self._queue.put(None)
        if self._feeder is not None:
            self._feeder.join(timeout=60)
        self._aq.wait_all()


def build_engine(adapter, graph, batch_size: int, device: str, instances: int, threads: int, options: dict):
    """The programs and the engine for ``instances`` requests in flight within ``threads``, built
    the framework's own way (``adapter.concurrency``); returns (engine, info) where ``info`` says
    how (kind, instances, threads per instance, and the first program's build info)."""
    kind = adapter.concurrency
    share = max(1, threads // instances)
    opts = {**options, **adapter.in_flight_options(instances)}
    if kind == "async":
        # the whole budget to the plugin, which divides it between its streams (threads // N each)
        program = adapter.build(graph, batch_size, device, threads, **opts)
        engine = AsyncQueue(program, instances)
    elif kind == "shared":
        engine = CallerThreads([adapter.build(graph, batch_size, device, share, **opts)], instances, kind)
    elif kind == "contexts":
        first = adapter.build(graph, batch_size, device, share, **opts)
        engine = CallerThreads([first] + [first.another_context() for _ in range(instances - 1)], instances, kind)
    else:
        engine = CallerThreads([adapter.build(graph, batch_size, device, share, **opts) for _ in range(instances)],
                               instances, "instances")
    info = {"kind": engine.kind, "instances": instances, "threads_per_instance": share, "threads": threads,
            "options": {k: v for k, v in opts.items() if isinstance(v, (str, int, float, bool)) or v is None}}
    return engine, info
