"""The IOS runtime's GPU paths that ``ios-bench doctor`` runs, each checked against the oracle
and reported in one line (a dict: ``path``, ``status`` ok/WRONG/FAIL/skip, ``max_rel_err``,
``median_ms``, ``clock``, ``detail``).

On the graph given (by default ``ios_core.models.coverage``: every op type and attribute value):

* ``sequential``: no schedule: one stream, no event.
* ``parallel schedule``: every block in ASAP levels (``level_schedule``): at least two streams,
  events, fork and join, unfused convolutions, aligned copies where slices are misaligned.
* ``CUDA graph``: the same schedule captured once and replayed.
* ``CUDA graph fp16``, ``CUDA graph bf16`` (issue 46): the same, on a device of that precision (every
  buffer, cuDNN tensor and kernel at it, float compute), checked against the fp32 oracle at the
  precision's bound (``ios_core.check.check_precision``); skipped where the device factory has no
  ``at(precision)`` and where the GPU is too old for the precision (``cuda_kernels.arch_problem``: bf16
  before compute capability 8.0). Written, not yet run on a GPU.
* ``cost-model stage``: the measured cost model times the widest stage as its own CUDA
  program; that program, with the graph's weights and the oracle's values as inputs, is
  checked against the oracle's values of the stage's operators.
* ``host overhead``: the no-graph launch path's host time per operator launch (cuDNN execute,
  our kernels, events: what ``program.run()`` costs the CPU, divided by the operators it
  launches), the unscheduled graph checked too.
* ``clock lock`` (only when asked: ``--lock-clocks``): the GPU's SM clock locked (NVML, a
  sustainable clock), the schedule run and checked under the lock, the clock reset; skipped
  with the reason when locking is not allowed. Nothing else touches a clock.

Every line with a time carries the clock state it was measured under (``clocks``:
``ios_core.measurement.gpu.clock_state``).

``run_paths(graph, batch, device_factory)``: ``device_factory()`` gives the CUDA executor's
device (the CuPy device on a GPU: one, shared; the tests pass the fake device). On a machine
without a GPU nothing here runs except through the tests' fake device: it has not run on a
GPU in this project's development.
"""

from __future__ import annotations

import os


def default_device_factory():
    """One CuPy device for every path (its cuDNN handles, streams and tuned convolutions are
    shared, as in a sweep's worker). Needs a GPU."""
    from ios_core.runtime.cuda_device import CupyDevice

    dev = CupyDevice(0)
    half: dict = {}

    def at(precision: str):  # one device per precision, created when first asked
        if precision not in half:
            half[precision] = CupyDevice(0, precision=precision)
        return half[precision]

    factory = lambda: dev  # noqa: E731 - a factory with an attribute
    factory.at = at
    return factory


def _first_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return f"{type(e).__name__}" + (f": {msg}" if msg else "")


def oracle_values(graph, x) -> dict:
    """Every node's value (by name) as the oracle's kernels compute it, as numpy arrays."""
    import torch

    from ios_core.kernels import ORACLE_KERNELS, TORCH_PRIMS
    from ios_core.lowering.walk import lower_nodes, schedulable_nodes

    with torch.no_grad():
        values = lower_nodes(schedulable_nodes(graph), {graph.input.name: torch.from_numpy(x)}, TORCH_PRIMS,
                             ORACLE_KERNELS.visit)
    return {k: v.contiguous().numpy() for k, v in values.items()}


HOST_OVERHEAD_RUNS = 20  # runs of the no-graph path whose host time is averaged


def run_paths(graph, batch: int, device_factory, seed: int = 0, lock_clocks: bool = False) -> list[dict]:
    from ios_core import reference
    from ios_core.check import check_precision, compare, tolerance_for
    from ios_core.models.coverage import level_schedule
    from ios_core.reference import random_input
    from ios_core.runtime.cuda import CudaRuntime
    from ios_core.runtime.cuda_kernels import arch_problem

    tol = tolerance_for("fp32")
    x = random_input(graph, batch, seed=seed)
    ref = reference.run(graph, x)
    sched = level_schedule(graph)
    lines: list[dict] = []

    def checked(out, expected=ref) -> dict:
        chk = compare(out, expected, tol)
        return {"status": "ok" if chk.passed else "WRONG", "max_rel_err": chk.max_rel_err,
                **({} if chk.passed else {"reason": chk.reason})}

    def runtime_line(g, cuda_graph: bool, runs: int, precision: str = "fp32") -> dict:
        backend = device_factory() if precision == "fp32" else device_factory.at(precision)
        rt = CudaRuntime(g, batch, "cuda", backend=backend, cuda_graph=cuda_graph, precision=precision)
        for _ in range(runs):  # later runs reuse every buffer (and replay the graph)
            out = rt.run(x)
        if precision == "fp32":
            line = checked(out)
        else:  # against the fp32 oracle at the precision's bound
            chk = check_precision(out, ref, precision)
            line = {"status": "ok" if chk.passed else "WRONG", "max_rel_err": chk.max_rel_err,
                    **({} if chk.passed else {"reason": chk.reason})}
        m = rt.measure(warmup=2, repeat=5, x=x)
        st = rt.stats
        line.update(median_ms=m.median, clock=m.meta.get("clock"), streams=st["streams"], events=st["events"],
                    detail=f"{st['streams']} stream(s), {st['events']} event(s), convs fused/unfused "
                           f"{st.get('convs_fused', '-')}/{st.get('convs_unfused', '-')}, "
                           f"{st.get('aligned_copies', 0)} aligned copies"
                           + (", replayed" if cuda_graph else "")
                           + (f", {precision} (bound {tolerance_for(precision):g}, cuDNN "
                              f"{st.get('cudnn_data_type', '?')}/{st.get('cudnn_compute_type', '?')})"
                              if precision != "fp32" else ""))
        return line

    def sequential():
        return runtime_line(graph, False, 2)

    def parallel():
        line = runtime_line(sched, False, 2)
        if line["streams"] < 2 or line["events"] < 1:
            line.update(status="FAIL", reason="the schedule did not run on several streams with events")
        return line

    def cuda_graph():
        return runtime_line(sched, True, 3)

    def reduced(precision: str):
        def path():
            if not callable(getattr(device_factory, "at", None)):
                return {"status": "skip", "detail": f"this device factory gives fp32 devices only (no {precision})"}
            # a precision this GPU has no kernels for (bf16 before compute capability 8.0: cuDNN's
            # PSEUDO_BFLOAT16_CONFIG) is a path it does not have: skipped with the reason, not failed
            # (CupyDevice refuses to be built there; a FAIL would fail every doctor on a T4 or a V100)
            problem = arch_problem(precision, getattr(device_factory(), "compute_capability", None))
            if problem is not None:
                return {"status": "skip", "detail": f"not on this GPU: {problem}"}
            return runtime_line(sched, True, 3, precision)
        return path

    def cost_stage():
        return _cost_model_stage(sched, batch, x, device_factory, checked)

    def host_overhead():
        return _host_overhead(graph, batch, x, device_factory, checked)

    def clock_lock():
        return _clock_lock(sched, batch, x, device_factory, checked) if lock_clocks else \
            {"status": "skip", "detail": "not asked (clocks are left alone unless --lock-clocks)"}

    from ios_core.measurement.gpu import clock_state

    for name, fn in (("sequential", sequential), ("parallel schedule", parallel), ("CUDA graph", cuda_graph),
                     ("CUDA graph fp16", reduced("fp16")), ("CUDA graph bf16", reduced("bf16")),
                     ("cost-model stage", cost_stage), ("host overhead", host_overhead), ("clock lock", clock_lock)):
        try:
            line = fn()
        except Exception as e:  # the path fails; the others still run
            import traceback

            traceback.print_exc()
            # the traceback travels in the line: the worker's log dies with the doctor's temporary folder
            line = {"status": "FAIL", "reason": _first_line(e), "traceback": traceback.format_exc()[-3000:]}
        if line.get("median_ms") is not None or line.get("host_us_per_launch") is not None:
            line.setdefault("clocks", clock_state())
        lines.append({"path": name, **line})
    return lines


def _host_overhead(graph, batch, x, device_factory, checked) -> dict:
    """Host time per operator launch of the no-graph path: ``program.run()`` (which only enqueues)
    timed on the host clock, ``HOST_OVERHEAD_RUNS`` runs each followed by a synchronize outside
    the clock, divided by the operators (stream tasks: their kernels, events and waits) a run
    launches. An upper bound on the host time per kernel (a task launches one kernel or more)."""
    import time

    from ios_core.runtime.cuda import CudaRuntime

    rt = CudaRuntime(graph, batch, "cuda", backend=device_factory(), cuda_graph=False)
    line = checked(rt.run(x))
    prog = rt.program
    launches = len(prog.streams.tasks)
    host = 0.0
    for _ in range(HOST_OVERHEAD_RUNS):
        t0 = time.perf_counter()
        prog.run()
        host += time.perf_counter() - t0
        rt.sync()
    us = 1e6 * host / HOST_OVERHEAD_RUNS / max(launches, 1)
    line.update(host_us_per_launch=round(us, 2), launches=launches,
                detail=f"{us:.1f} us of host time per operator launch ({launches} per run, no CUDA graph: cuDNN "
                       f"execute, our kernels, events; mean of {HOST_OVERHEAD_RUNS} runs; the goal is at most 15 us)")
    return line


def _widest_stage(sched):
    from ios_core.optimizer.stage import Stage

    block = max(sched.blocks, key=lambda b: max(len(s) for s in b.stages))
    names = max(block.stages, key=len)
    by_name = {n.name: n for n in block.nodes}
    return Stage("parallel", [[by_name[n] for n in group] for group in names])


def _cost_model_stage(sched, batch, x, device_factory, checked) -> dict:
    """The measured cost model's estimate of the widest stage (its own CUDA program, timed),
    and that program with real weights checked against the oracle's values."""
    from ios_core.cost.measured import MeasuredCostModel, _externals
    from ios_core.runtime.cuda import CudaProgram
    from ios_core.runtime.passes import make_plan

    stage = _widest_stage(sched)
    dev = device_factory()
    cm = MeasuredCostModel(device="cuda", backend=dev, cache=False, warmup=1, repeat=3, min_sample_ms=None)
    ms = cm.stage_latency(stage, batch)
    values = oracle_values(sched, x)
    groups = [list(g) for g in stage.groups]
    externals = _externals(groups)
    outputs = [n for g in groups for n in g]
    plan = make_plan([groups], externals, outputs, batch, arena_kinds=("concat", "value"))
    prog = CudaProgram(plan, dev)
    s0 = prog.stream_objs[0]
    for ext in externals:
        dev.write(prog.input_view(ext.name), values[ext.name], s0)
    prog.run()
    dev.sync(s0)
    lines = [checked(dev.read(prog.value_view(plan.value(n)), s0), values[n.name]) for n in outputs]
    bad = [line for line in lines if line["status"] != "ok"]
    worst = bad[0] if bad else max(lines, key=lambda line: line["max_rel_err"])
    worst.update(detail=f"stage of {len(groups)} groups on {prog.streams.streams} streams, its program checked; "
                        f"the cost model's estimate {ms:.3f} ms")
    return worst


def _clock_lock(sched, batch, x, device_factory, checked) -> dict:
    """Lock the GPU's clock (not the CPU's), run the schedule under the lock, reset it."""
    from ios_bench.machine.clocks import ClockLock
    from ios_core.measurement.gpu import LOCKED_CLOCK_ENV, clock_state
    from ios_core.runtime.cuda import CudaRuntime

    msgs: list[str] = []
    lock = ClockLock(True, ["cuda"], echo=msgs.append, cpu=False)
    with lock:
        state = lock.state.get("clocks", "")
        locked = os.environ.get(LOCKED_CLOCK_ENV)
        if not locked:
            return {"status": "skip", "detail": state}
        rt = CudaRuntime(sched, batch, "cuda", backend=device_factory())
        line = checked(rt.run(x))
        m = rt.measure(warmup=2, repeat=5, x=x)
        line["clocks"] = clock_state()  # under the lock
    reset = bool(lock.state.get("restored")) and not lock.state.get("restore_problems")
    after = os.environ.get(LOCKED_CLOCK_ENV)
    line.update(median_ms=m.median, clock=m.meta.get("clock"),
                detail=f"{state}; reset {'ok' if reset and not after else 'FAILED: ' + '; '.join(msgs)}")
    if not reset or after:
        line["status"] = "FAIL"
    return line
