"""The IOS CPU runtime: executes a scheduled graph stage by stage on the CPU, with the kernels of
a provider (torch, onnxruntime, openvino). The CUDA runtime is :mod:`.cuda`;
:func:`ios_core.runtime.factory.make_runtime` chooses between them by device."""

from __future__ import annotations

import numpy as np

from ios_core.ir import Graph
from ios_core.measurement.measure import Measurement, measure
from ios_core.measurement.threads import resolve_threads
from ios_core.runtime import providers
from ios_core.runtime.base import check_graph, check_input
from ios_core.runtime.emit_provider import emit_provider, plan_for_provider
from ios_core.runtime.passes import make_plan
from ios_core.runtime.plan import RuntimePlan
from ios_core.runtime.program import Program, graph_stages
from ios_core.runtime.tensors import for_provider, running

PROVIDERS = tuple(providers.names())  # kernel providers implemented in this build (the registry's)


class Runtime:
    """Plan once, run many.

    ``Runtime(graph, batch_size, device="cpu", threads=None, provider="torch")`` plans the
    graph's schedule (``block.stages``; a block without stages runs sequentially) once
    (``self.plan``, :mod:`ios_core.runtime.plan`) and emits it for the provider (``torch``:
    closures over torch CPU kernels; ``onnxruntime``, ``openvino``: the plan's pieces, each
    compiled once by that library with its thread share, :mod:`.emit_provider`;
    ``self.program``): parallel stages run their
    groups concurrently on a persistent worker pool with the ``threads`` intra-op threads
    divided among the concurrent groups. ``max_workers`` caps the concurrency (1 runs every
    stage's groups one after another on the calling thread); ``trace`` (a list) records each
    concurrent task's thread and start/end times. ``precision`` (fp32, bf16, int8; what the provider
    offers, ``providers.get(provider).precisions()``): each piece compiled at it, int8 calibrated on
    the seeded calibration inputs (``ios_core.quantize``) as they reach each piece;
    ``stats["precision"]`` is what the libraries report back (``emit_provider.engine_precision``);
    on torch kernels at bf16 the closures' weights, the arena and every activation are bfloat16, the
    input converted on entry (``prepare``) and the output back to float32 (``finish``), and
    ``stats["precision"]`` is read back from the program's weights and arena
    (``emit_torch.computes_in``); ``store``: a directory where int8 pieces' quantized models are kept
    and reused (a build cache's).

    Values are torch tensors on torch kernels and numpy arrays on any other provider's
    (``self.tensors``, :mod:`.tensors`): a runtime on ONNX Runtime or OpenVINO kernels never
    imports torch. ``prepare`` and ``execute`` take and return that kind.

    This is the CPU runtime; ``make_runtime(graph, batch_size, device, ...)``
    (:mod:`.factory`) makes the runtime of any device, this one for ``"cpu"``.
    """

    def __init__(self, graph: Graph, batch_size: int = 1, device: str = "cpu", threads: int | None = None, *,
                 provider: str = "torch", max_workers: int | None = None, trace: list | None = None,
                 precision: str = "fp32", store: str | None = None, calibration_data=None):
        if provider not in PROVIDERS:
            raise ValueError(f"unknown kernel provider {provider!r}; this build has {', '.join(PROVIDERS)}")
        reason = providers.get(provider).precision_reason(precision)
        if reason is not None:
            raise ValueError(reason)
        if provider != "torch":
            providers.require(provider)  # says why the library cannot run here, before planning
        if isinstance(device, str) and device.startswith("cuda"):
            raise RuntimeError(f"Runtime is the CPU runtime; the CUDA runtime for device {device!r} is made by "
                               f"ios_core.runtime.make_runtime(graph, batch_size, device={device!r})")
        if device != "cpu":
            raise ValueError(f"unknown device {device!r}")
        check_graph(graph, batch_size)
        self.graph = graph
        self.batch_size = batch_size
        self.device = device
        self.threads = resolve_threads(threads)
        self.provider = provider
        self.precision = precision
        self.stages = graph_stages(graph)
        self.tensors = for_provider(provider, precision)
        self._thread_control = self.tensors.threads() is not None
        if provider == "torch":
            from ios_core.runtime.emit_torch import emit

            self.plan: RuntimePlan = make_plan(self.stages, [graph.input], [graph.exit_node], batch_size)
            self.program: Program = emit(self.plan, self.threads, max_workers=max_workers, trace=trace,
                                         precision=precision)
        else:
            self.plan = plan_for_provider(self.stages, [graph.input], [graph.exit_node], batch_size)
            calibration = None
            if precision == "int8":  # the seeded inputs every int8 cell is calibrated on (ios_core.quantize)
                # (or the samples of a --calibration-data folder, ``calibration_data``)
                from ios_core.quantize import CALIBRATION_SAMPLES, calibration_feeds

                calibration, note, _ = calibration_feeds(graph, batch_size, CALIBRATION_SAMPLES, calibration_data)
            self.program = emit_provider(self.plan, provider, self.threads, max_workers=max_workers, trace=trace,
                                         precision=precision, calibration=calibration, store=store)
            if calibration is not None:  # each piece's key holds its feeds' bytes: the source is in it
                self.program.stats["calibration"].update(note)
        self.program.stats.setdefault("provider", provider)
        self.trace = trace
        self._in = self.program.input_slots[graph.input.name]
        self._out = self.program.output_getters[graph.exit_node.name]
        self._shape = (batch_size, *graph.input_shape)

    # ---- running -------------------------------------------------------------------------------
    @property
    def stats(self) -> dict:
        return self.program.stats

    @property
    def peak_activation_bytes(self) -> int:
        return self.program.stats["peak_activation_bytes"]

    def prepare(self, x: np.ndarray):
        return self.tensors.from_numpy(check_input(x, self._shape))

    def execute(self, t):
        """Run on a prepared input; returns the output tensor (valid until the next call)."""
        env = self.program.env
        env[self._in] = t
        if not self._thread_control:  # a provider's kernels: their threads were fixed at compile time
            self.program.run()
            return self._out()
        torch = self.tensors.torch
        caller = torch.get_num_threads()
        if caller != self.threads:
            torch.set_num_threads(self.threads)
        try:
            with torch.inference_mode():
                self.program.run()
        finally:
            if caller != self.threads:
                torch.set_num_threads(caller)
        return self._out()

    def finish(self, out) -> np.ndarray:
        """An output of :meth:`execute` as a fresh numpy array."""
        return self.tensors.to_numpy(out)

    def run(self, x: np.ndarray) -> np.ndarray:
        return self.finish(self.execute(self.prepare(x)))

    # ---- timing ------------------------------------------------------------------------------
    def measure(self, warmup: int = 3, number: int = 1, repeat: int = 10, min_sample_ms: float | None = None,
                profile_stages: bool = False, x: np.ndarray | None = None) -> Measurement:
        """Time the whole graph with ``ios_core.measurement.measure.measure``; with ``profile_stages`` each
        sample also records the time of every stage (``Measurement.stage_ms``, ms per call;
        the clock reads add well under a microsecond per stage)."""
        from ios_core.inputs import random_input

        t = self.prepare(x if x is not None else random_input(self.graph, self.batch_size))
        env, prog = self.program.env, self.program
        env[self._in] = t
        with running(self.tensors, self.threads):
            if profile_stages:
                prog.enable_stage_profile()
                m = measure(prog.run_stage_profiled, warmup=warmup, number=number, repeat=repeat,
                            min_sample_ms=min_sample_ms, stage_times=prog.read_stage_times)
            else:
                m = measure(prog.run, warmup=warmup, number=number, repeat=repeat, min_sample_ms=min_sample_ms)
        m.meta.update({"threads": self.threads, "batch_size": self.batch_size, "device": self.device,
                       "stages": len(self.stages), "provider": self.provider,
                       **{k: v for k, v in self.stats.items() if k != "threads"}})
        if profile_stages:
            m.meta["stage_names"] = prog.stage_names
        return m

    def timeline(self, x: np.ndarray | None = None) -> list[dict]:
        """One run recording where each stage ran: per stage, its start and end on the calling
        thread, and for a stage whose groups ran concurrently each worker's task (the ``trace`` this
        runtime was built with). Returns bars ``{"stage", "worker", "thread", "groups", "start_ms",
        "end_ms"}`` (``groups``: the operator names of each group the bar ran), times from the
        call's start (``perf_counter``), worker 0 the calling thread.
        Only a runtime built with ``trace`` (a profiling build) can: a timed build carries no clocks."""
        import threading
        import time

        from ios_core.inputs import random_input

        if self.trace is None:
            raise RuntimeError("this runtime was built without trace=[]: no timeline")
        prog, clock = self.program, time.perf_counter_ns
        prog.env[self._in] = self.prepare(x if x is not None else random_input(self.graph, self.batch_size))
        self.trace.clear()
        spans = []
        with running(self.tensors, self.threads):
            t0 = clock()
            for f in prog.stage_fns:
                s = clock()
                f()
                spans.append((s, clock()))
        caller = threading.get_ident()
        workers = {caller: 0}
        for r in sorted(self.trace, key=lambda r: r["start_ns"]):
            workers.setdefault(r["thread"], len(workers))
        bars = []
        for si, (s, e) in enumerate(spans):
            names = prog.stage_names[si]
            tasks = [r for r in self.trace if r["stage"] == si]
            for r in tasks or [{"thread": caller, "groups": range(len(names)), "start_ns": s, "end_ns": e}]:
                bars.append({"stage": si, "worker": workers[r["thread"]], "thread": r["thread"],
                             "groups": [names[g] for g in r["groups"]],
                             "start_ms": (r["start_ns"] - t0) / 1e6, "end_ms": (r["end_ns"] - t0) / 1e6})
        self.trace.clear()
        return bars

    def measure_operators(self, warmup: int = 3, number: int = 1, repeat: int = 10,
                          x: np.ndarray | None = None) -> tuple[Measurement, list[str], list[float]]:
        """Run every operator in schedule order on the calling thread, timing each one; returns
        the measurement of the whole (with the per-operator clock reads), the operator names
        and each one's mean time (ms). ``meta["overhead_us_per_op"]``: per sample, the total
        minus the sum of the operator times (the runtime's own dispatch work: the stage loop,
        releases, pool dispatch), median, per operator."""
        from ios_core.inputs import random_input

        prog = self.program
        names = [name for stage in prog.op_names for name in stage]
        acc = [0] * len(names)
        t = self.prepare(x if x is not None else random_input(self.graph, self.batch_size))
        prog.env[self._in] = t

        def read():
            out = [a / 1e6 for a in acc]
            for i in range(len(acc)):
                acc[i] = 0
            return out

        with running(self.tensors, self.threads):
            m = measure(lambda: prog.run_op_profiled(acc), warmup=warmup, number=number, repeat=repeat,
                        stage_times=read)
        op_ms = [float(np.mean(col)) for col in zip(*m.stage_ms)]
        # same executions: each sample's total minus its operators' own times (includes the two
        # clock reads per operator, well under a microsecond)
        gaps = [total - sum(ops) for total, ops in zip(m.samples_ms, m.stage_ms)]
        m.meta["overhead_ms"] = float(np.median(gaps))
        m.meta["overhead_us_per_op"] = float(np.median(gaps)) * 1e3 / max(len(names), 1)
        return m, names, op_ms
