"""A worker's ``cell`` task (``ios_bench.running.worker``): one round of one cell - build, check against the
oracle, time inside an interference window, check the last timed output again - and its sequential
baseline and independent check."""

from __future__ import annotations

import contextlib
import os
import time

from adapters.build_cache import BUILD_ENV, build_name
from ios_bench.records.record import RoundResult, jsonable
from ios_bench.running.task_optimize import _schedule
from ios_bench.running.task_setup import _load_graph, _source_path


def independent_check(graph, spec: dict, source) -> dict | None:
    """For an imported model (a graph with an ONNX ``source``), whether the cell's output was also
    checked against onnxruntime on the original file: ``{"ran": True, "passed": bool}``, or
    ``{"ran": False, "reason": ...}`` when that check could not run (onnxruntime could not load
    or run the file, the file is gone): the record then says the cell was checked against the
    oracle only. None for a model without an original file (a zoo model, a graph JSON)."""
    src = getattr(graph, "source", None) or {}
    if src.get("format") != "onnx":
        return None
    if source is not None:
        return {"ran": True, "passed": bool(source.passed)}
    reason = spec.get("source_error") or ("the original ONNX file is gone" if _source_path(graph) is None
                                          else "no reference output of the original ONNX file")
    return {"ran": False, "reason": f"independent check against the original ONNX file not run: {reason}"}


def task_cell(spec: dict, result: dict) -> dict:
    import hashlib

    import numpy as np

    import adapters
    from ios_bench.planning.cells import CellSpec
    from ios_core.check import check_precision, combined_check, compare, tolerance_for
    from ios_core.measurement.interference import Window

    spec = CellSpec.from_dict(spec).to_dict()  # a spec the driver could not have written fails here
    result["phase"] = "load"
    graph = _load_graph(spec)
    original = graph
    options = dict(spec.get("options", {}))
    if spec.get("schedule"):
        result["provider"] = options["provider"] = spec.get("provider") or "torch"
        result["phase"] = "optimize"
        graph = _schedule(graph, spec, result)
        result["stages"] = sum(len(b.stages) for b in graph.blocks) if graph.has_stages else None
    adapter = adapters.get(spec["adapter"])
    reason = adapter.available(spec["device"])
    if reason is not None:
        result.pop("phase", None)
        result.update(status="skipped", reason=reason)
        return result
    # The tolerance follows the precision the sweep asked for, never the one the engine reports
    # (nor a looser tolerance it declares): an engine that ignores the request fails the cell.
    requested = spec.get("precision") or "fp32"
    result["precision_requested"] = requested
    # an adapter may only tighten it; its own tolerance is its fp32 one (a reduced precision has its stated bound)
    tol = min(tolerance_for(requested), adapter.tolerance) if requested == "fp32" else tolerance_for(requested)
    on = {"provider": options["provider"]} if spec.get("schedule") and "provider" in options else {}  # IOS's kernels
    reason = adapter.precision_reason(requested, spec["device"], **on)
    if reason is not None:  # a combination the adapter cannot give: a skipped cell with its reason
        result.pop("phase", None)
        result.update(status="skipped", reason=reason)
        return result
    if requested != "fp32":
        options["precision"] = requested
    # the build this worker makes, named in the build caches it seals (adapters.build_cache: the sweep's
    # estimate tells a cell's own build from another model's by it)
    os.environ[BUILD_ENV] = build_name(original.name, spec["batch_size"], requested)
    if spec.get("scenario"):  # a LoadGen scenario: its own round (ios_bench.scenarios.round)
        from ios_bench.scenarios.round import run_round

        return run_round(spec, result, adapter, graph, options, tol,
                         lambda a, info: precision_problem(a, info, requested))
    result["phase"] = "build"
    compiled = adapter.build(graph, spec["batch_size"], spec["device"], spec["threads"], **options)
    info = {k: v for k, v in compiled.info.items() if jsonable(v)}
    result.update(info=info, build_seconds=info.get("build_seconds"), precision=info.get("precision"),
                  framework_version=info.get("framework_version"))
    problem = precision_problem(adapter, info, requested)
    if problem:
        result.pop("phase", None)
        result.update(status="failed", reason=problem)
        return result
    result["phase"] = "input"
    x = np.load(spec["input_path"])
    sha = hashlib.sha1(x.tobytes()).hexdigest()
    if spec.get("input_sha1") and sha != spec["input_sha1"]:
        raise RuntimeError(f"seeded input differs from the reference's ({sha[:12]} != {spec['input_sha1'][:12]})")
    ref = np.load(spec["ref_path"])
    prepared = compiled.prepare(x)
    result["phase"] = "check"
    t_check = time.perf_counter()
    out = compiled.finish(compiled.execute(prepared))
    compiled.sync()
    checked_ms = (time.perf_counter() - t_check) * 1000.0  # the check's call: on the CPU, warmup where it is long
    checks = _check_batches(compiled, spec, x, out, ref)  # int8: its arg-max share over 16 seeded samples
    simulated = _simulated(spec, checks)  # int8: the bound on its RMS error
    before = check_precision(out, ref, requested, tol, more=checks, simulated=simulated)
    if checks is not None:
        prepared = compiled.prepare(x)  # a program that binds its input: the cell's own input again
    source = None
    if spec.get("source_ref_path"):
        # an imported model: also against onnxruntime on the original file (recorded as
        # check.source; a mismatch fails the check before timing, hence the cell)
        source = compare(out.reshape(-1), np.load(spec["source_ref_path"]).reshape(-1), tol)
        if not source.passed:
            before = type(before)(False, max(before.max_abs_err, source.max_abs_err),
                                  max(before.max_rel_err, source.max_rel_err), tol,
                                  f"against the original ONNX file: {source.reason}")
    result["phase"] = "measure"
    # on a GPU, other processes' use of it too (the worker sees its GPU as index 0)
    with _utilization(spec, result), Window(gpu=0 if spec["device"] == "cuda" else None) as window:
        cpu = not str(spec["device"]).startswith("cuda")  # on a GPU its first call may be a capture: not counted
        m = time_compiled(compiled, prepared, spec["device"], **round_protocol(spec),
                          **({"checked_ms": checked_ms} if cpu and spec.get("sample_s") is not None else {}))
    window.samples(m.samples_ms)
    if str(spec["device"]).startswith("cuda"):  # peak device memory, two views (ios_bench.machine.device_memory)
        from ios_bench.machine.device_memory import gpu_memory

        result["gpu_memory"] = gpu_memory(compiled, spec["device"])
    result["phase"] = "check"
    # the last timed call's output too (with the further batches' outputs of the check before timing)
    after = check_precision(compiled.finish(m.last), ref, requested, tol, more=checks, simulated=simulated)
    check = combined_check(before, after)
    if source is not None:
        check["source"] = source.to_dict()
    result.update(RoundResult.measured(m, check, window.figures))
    independent = independent_check(original, spec, source)
    if independent is not None:
        result["independent_check"] = independent
    if spec.get("sequential_baseline"):
        _sequential_baseline(spec, result, adapter, original, options, x)
    result["status"] = "ok" if result["check"]["passed"] else "wrong"
    result.pop("phase", None)
    return result


def _check_batches(compiled, spec: dict, x, out, ref):
    """int8's arg-max rule counted over ``ios_core.check.ARGMAX_SAMPLES`` seeded samples, not a batch-1
    cell's one: ``spec["check_path"]`` (``refs/<model>-b<N>.check.npz``: seeded batches ``input_seed + i``,
    batch 0 the cell's own input, and the oracle's output of each) run through ``compiled`` after the
    cell's own call. Returns (the further batches' outputs, their oracle outputs), or None without one."""
    import numpy as np

    path = spec.get("check_path")
    if not path:
        return None
    with np.load(path) as data:
        inputs, outputs = data["inputs"], data["outputs"]
    if not np.array_equal(inputs[0], x):
        raise RuntimeError(f"{path}: its first batch is not the cell's seeded input")
    ys = []
    for xi in inputs[1:]:
        y = compiled.finish(compiled.execute(compiled.prepare(np.ascontiguousarray(xi))))
        compiled.sync()
        ys.append(np.asarray(y))
    return ys, [np.asarray(o) for o in outputs[1:]]


def _simulated(spec: dict, checks):
    """The oracle's int8 simulation's outputs of the batches the cell is checked on (``spec["int8_sim_path"]``,
    ``refs/<model>-b<N>.int8sim.npy``: the cell's own batch, then ``checks``'), or None without one."""
    import numpy as np

    path = spec.get("int8_sim_path")
    if not path:
        return None
    sims = list(np.load(path))
    if len(sims) != 1 + (len(checks[0]) if checks else 0):
        raise RuntimeError(f"{path}: {len(sims)} batches, the check runs {1 + (len(checks[0]) if checks else 0)}")
    return sims


def precision_problem(adapter, info: dict, requested: str) -> str | None:
    """Why a built program fails its cell on precision (it computes in another precision than the
    sweep asked for), or None."""
    got = info.get("precision") or adapter.precision
    if got != requested:
        return (f"precision: asked for {requested}, {adapter.name} computes in {got}"
                + (f" ({info['precision_note']})" if info.get("precision_note") else ""))
    return None


@contextlib.contextmanager
def _utilization(spec: dict, result: dict):
    """With ``util_path`` in the spec: sample the device's busy-ness during the timed loop
    (:mod:`ios_bench.machine.utilization`), write the trace there (atomically) and its summary to the
    record as ``utilization``. Without it: nothing."""
    if not spec.get("util_path"):
        yield
        return
    from ios_bench.machine.utilization import sampler, summarize
    from ios_core.atomic import atomic_write_json

    s = sampler(spec["device"])
    with s:
        yield
    trace = s.trace()
    atomic_write_json(spec["util_path"], trace, indent=None)
    result["utilization"] = summarize(trace)  # the sweep adds the trace's run-folder-relative path


def _sequential_baseline(spec: dict, result: dict, adapter, original, options: dict, x) -> None:
    """``sequential_ms``: the sequential schedule on the same provider, timed in this worker after
    the schedule with the same protocol; used only where the sweep has no sequential cell on that
    provider (otherwise the sequential cell's rounds, interleaved with this cell's, give it)."""
    result["phase"] = "sequential baseline"
    seq = adapter.build(original, spec["batch_size"], spec["device"], spec["threads"], **options)
    prepared = seq.prepare(x)
    m = time_compiled(seq, prepared, spec["device"], **round_protocol(spec))
    if result.get("clock") is not None and m.meta.get("clock") != result["clock"]:
        raise RuntimeError(f"the sequential baseline was timed on {m.meta.get('clock')}, the schedule on "
                           f"{result['clock']}: not comparable")
    from ios_bench.running.rounds import round_median

    result["sequential_ms"] = round_median(m.samples_ms)  # the same statistic as the cell's figure
    result["sequential_clock"] = m.meta.get("clock")


def round_protocol(spec: dict) -> dict:
    """The timing protocol of a round, from its cell spec: the arguments of
    ``ios_core.measurement.measure.measure`` (fixed counts, or time-bounded where ``sample_s`` is set)."""
    out = {"warmup": spec["warmup"], "number": spec["number"], "repeat": spec["repeat"],
           "min_sample_ms": spec.get("min_sample_ms") or None}
    if spec.get("sample_s") is not None:
        out.update(sample_s=spec["sample_s"], warmup_s=spec.get("warmup_s"), min_repeat=spec.get("min_repeat") or 1)
    return out


def time_compiled(compiled, prepared, device: str, **protocol):
    """The one way a worker times a built program (a cell, its sequential baseline, a doctor
    path): ``ios_core.measurement.gpu.time_calls`` of ``compiled.execute(prepared)``.

    On a GPU every cell is timed the same way whatever the framework: the host clock, read after
    the program's own sync and a device-wide synchronize following every call
    (``ios_core.measurement.gpu.GPU_CELL_CLOCK``). Frameworks that expose no stream (TensorFlow, ONNX Runtime,
    TVM) cannot be timed with CUDA events, so none is: a schedule, its baseline and every peer
    share one clock. On the CPU: the host clock after ``sync`` (the program's own timer if it has
    one). ``meta["clock"]`` records the protocol."""
    from ios_core.measurement.gpu import time_calls

    timer = None if str(device).startswith("cuda") else compiled.timer()  # on a GPU the host clock, whatever it has
    return time_calls(lambda: compiled.execute(prepared), compiled.sync, device, timer, **protocol)
