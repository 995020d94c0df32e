"""One cell in its own process: ``python -m ios_bench.worker SPEC_JSON``.

The parent (:mod:`ios_bench.sweep`) starts one worker per task with the thread budget already in
its environment; the worker sets the same variables again before importing any framework, runs
the task and writes its result as JSON to ``spec["result_path"]`` (atomically). A worker that
crashes or hangs writes nothing; the parent then records the failure with the stderr tail.

Tasks:
  probe      which adapters can run on the device, and their versions
  reference  the oracle output for (model, batch), saved once per run (refs/)
  optimize   an IOS cell's schedule, searched and saved (schedules/): never timed in this process
  doctor     one framework's GPU path on a small graph against the oracle (ios-bench doctor)
  doctor_ios the IOS runtime's GPU paths against the oracle (ios_bench.gpu_paths)
  cell       one round of one cell (``ios_bench.cells.CellSpec``): build one framework (or load an
             IOS schedule), check its output, time it inside an interference window (what else
             used the machine, and the canary before and after: ``ios_core.interference``), check
             the output of the last timed call again (status ``wrong`` when either check fails)
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from ios_bench.record import RoundResult, jsonable
from ios_core.threads import THREAD_VARS, apply_spin_policy, thread_env  # noqa: F401 - re-exported

PARENT_ENV = "IOS_BENCH_PARENT_PID"


def die_with_parent() -> None:
    """On Linux: SIGKILL this worker when the sweep process that started it dies (a killed sweep
    leaves no orphan running). Set here, at the worker's start, rather than in a ``preexec_fn``
    (unsafe in a parent with threads); if the parent died before this ran, exit at once."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        return
    if os.getppid() != int(parent):
        os._exit(1)


def load_plugins() -> list[str]:
    """Import the modules named in ``IOS_BENCH_PLUGINS`` (comma-separated); they may register
    extra models (``ios_core.models.register``) or adapters (``adapters.register``)."""
    import importlib

    names = [m.strip() for m in os.environ.get("IOS_BENCH_PLUGINS", "").split(",") if m.strip()]
    for name in names:
        importlib.import_module(name)
    return names


def _load_graph(spec: dict):
    from .loading import load_graph

    graph = load_graph(spec.get("model_path") or spec["model_spec"])  # model_path: the run's copy of a file
    if not graph.has_weights:
        graph.init_weights(spec["seed"])
    return graph


def task_probe(spec: dict) -> dict:
    import adapters

    out = {}
    wanted = spec.get("names")
    for name in adapters.names():
        if wanted is not None and name not in wanted:
            continue
        try:
            a = adapters.get(name)
            reason = a.available(spec["device"])
            out[name] = {"reason": reason, "version": a.version(), "precision": getattr(a, "precision", None),
                         "devices": list(getattr(a, "devices", ())),
                         "concurrency": getattr(a, "concurrency", "instances"),
                         "concurrency_note": getattr(a, "concurrency_note", "")}
        except Exception as e:
            out[name] = {"reason": f"{type(e).__name__}: {e}", "version": None}
    extras = {}
    try:
        import ios_core

        extras["optimize"] = hasattr(ios_core, "optimize") and _has_optimizer()
    except Exception as e:  # pragma: no cover
        extras["optimize"] = False
        extras["optimize_reason"] = str(e)
    if wanted is None or "ios" in wanted:  # the IOS runtime's kernel providers that run here
        try:
            from ios_core.runtime import providers

            extras["providers"] = {n: providers.get(n).available() for n in providers.names()}
        except Exception as e:  # pragma: no cover - the IOS adapter's own reason says more
            extras["providers_reason"] = f"{type(e).__name__}: {e}"
    return {"status": "ok", "adapters": out, **extras}


def _has_optimizer() -> bool:
    import importlib.util

    try:
        import ios_core.optimizer as opt

        return hasattr(opt, "optimize") and importlib.util.find_spec("ios_core.cost") is not None
    except Exception:
        return False


def task_reference(spec: dict) -> dict:
    """Oracle outputs for one model at every batch size of the sweep (refs/<model>-b<N>.npy), and
    the seeded inputs (ios_core.reference.random_input) every cell then loads, so that a cell
    worker imports no framework it does not use (torch only when its adapter needs it)."""
    import hashlib

    import numpy as np

    from ios_core import reference
    from ios_core.atomic import atomic_write
    from ios_core.reference import random_input

    graph = _load_graph(spec)
    source = _source_path(graph)
    out = {}
    for bs, path, in_path in zip(spec["batch_sizes"], spec["ref_paths"], spec["input_paths"]):
        x = random_input(graph, bs, seed=spec["input_seed"])
        t0 = time.perf_counter()
        y = reference.run(graph, x)
        seconds = time.perf_counter() - t0
        arrays = [(x, in_path), (y, path)]
        meta = {"input_sha1": hashlib.sha1(x.tobytes()).hexdigest(), "output_shape": list(y.shape),
                "seconds": seconds}
        if source is not None:
            # an imported model: onnxruntime on the original file is a second, independent reference
            from ios_core.check import compare

            try:
                ys = run_onnx_source(source, x).reshape(y.shape)
            except Exception as e:  # no onnxruntime, or it cannot run the file: the oracle check remains
                meta.update(source=source, source_error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            else:
                src_path = source_ref_path(path)
                arrays.append((ys, src_path))
                meta.update(source=source, source_ref_path=src_path, source_check=compare(y, ys, 1e-4).to_dict())
        for arr, target in arrays:
            atomic_write(target, lambda f, arr=arr: np.save(f, arr))
        if spec.get("qsl_size"):  # a LoadGen scenario's query sample library, beside the oracle's outputs
            meta["qsl"] = _save_qsl(graph, bs, spec, spec["qsl_paths"][spec["batch_sizes"].index(bs)], x, y)
        out[str(bs)] = meta
    # the model's memory figures the sweep's pre-check reads (ios_bench.estimate)
    return {"status": "ok", "batches": out, "graph_name": graph.name, "macs": graph.macs(),
            "params": graph.params(), "operators": graph.num_operators(),
            "activation_mib": reference.activation_bytes(graph) / 2**20, "weights_mib": graph.params() * 4 / 2**20}


def _save_qsl(graph, bs: int, spec: dict, path: str, x, y) -> dict:
    """The query sample library of a LoadGen scenario: ``qsl_size`` seeded inputs (sample i is
    ``random_input(graph, bs, seed=input_seed + i)``; sample 0 is the cells' one input) and the
    oracle's output of each, in one ``.npz`` (``inputs``, ``outputs``)."""
    import numpy as np

    from ios_core import reference
    from ios_core.atomic import atomic_write
    from ios_core.reference import random_input

    xs, ys = [x], [y]
    for i in range(1, int(spec["qsl_size"])):
        xi = random_input(graph, bs, seed=spec["input_seed"] + i)
        xs.append(xi)
        ys.append(reference.run(graph, xi))
    atomic_write(path, lambda f: np.savez(f, inputs=np.stack(xs), outputs=np.stack(ys)))
    return {"path": path, "size": len(xs)}


def task_doctor(spec: dict) -> dict:
    """One path (an adapter with options, on a device) on a small graph: built, run once
    against the oracle, timed briefly with the shared measurement (``ios-bench doctor``)."""
    import numpy as np

    import adapters
    from ios_core import reference
    from ios_core.check import compare
    from ios_core.reference import random_input

    graph = _load_graph(spec)
    adapter = adapters.get(spec["adapter"])
    reason = adapter.available(spec["device"])
    if reason is not None:
        return {"status": "skipped", "reason": reason}
    x = random_input(graph, spec["batch_size"], seed=spec["seed"])
    ref = reference.run(graph, x)
    compiled = adapter.build(graph, spec["batch_size"], spec["device"], spec.get("threads"), **spec.get("options", {}))
    out = np.asarray(compiled.run(x))
    compiled.sync()
    tol = compiled.info.get("tolerance") or adapter.tolerance
    check = compare(out, ref, tol)
    prepared = compiled.prepare(x)
    m = time_compiled(compiled, prepared, spec["device"], warmup=3, number=1, repeat=5)
    info = {k: v for k, v in compiled.info.items() if jsonable(v)}
    clocks = None
    if str(spec["device"]).startswith("cuda"):  # the clock state every GPU figure is recorded with
        from ios_core.gpu import clock_state

        clocks = clock_state()
    return {"status": "ok", "check": check.to_dict(), "median_ms": m.median, "clock": m.meta.get("clock"),
            "info": info, "clocks": clocks}


def task_doctor_ios(spec: dict) -> dict:
    """The IOS runtime's GPU paths (``ios_bench.gpu_paths``: sequential, parallel schedule, CUDA
    graph, a cost-model stage, a clock lock), each against the oracle (``ios-bench doctor``)."""
    from ios_core import gpu

    from . import gpu_paths

    reason = gpu.cuda_missing()
    if reason is not None:
        return {"status": "skipped", "reason": reason}
    graph = _load_graph(spec)
    lines = gpu_paths.run_paths(graph, spec["batch_size"], gpu_paths.default_device_factory(), seed=spec["seed"],
                                lock_clocks=spec.get("lock_clocks", False))
    return {"status": "ok", "paths": [{k: v for k, v in line.items() if jsonable(v)} for line in lines]}


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


def _source_path(graph) -> str | None:
    """The original ONNX file of an imported graph, when it is still there."""
    src = getattr(graph, "source", None) or {}
    path = src.get("path") if src.get("format") == "onnx" else None
    return path if path and os.path.isfile(path) else None


def source_ref_path(ref_path: str) -> str:
    return ref_path[: -len(".npy")] + ".source.npy" if ref_path.endswith(".npy") else ref_path + ".source.npy"


def run_onnx_source(path: str, x):
    """Run the original ONNX file with onnxruntime (CPU, no graph rewrites beyond ORT's defaults) on
    ``x``; a file with a fixed batch size runs ``x`` in chunks of that size."""
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    fixed = inp.shape[0] if isinstance(inp.shape[0], int) and inp.shape[0] > 0 else None
    if fixed is None or fixed == x.shape[0]:
        return sess.run(None, {inp.name: x})[0]
    if x.shape[0] % fixed:
        raise ValueError(f"{path} has a fixed batch size {fixed}, which does not divide batch {x.shape[0]}")
    return np.concatenate([sess.run(None, {inp.name: x[i:i + fixed]})[0] for i in range(0, x.shape[0], fixed)])


def _make_cost_model(kind: str, device: str, threads: int | None, provider: str = "torch", cache=True):
    """``ios_core.cost.make_cost_model``: the measured model times stages on this device with the
    cell's thread budget and kernel provider (and its persistent profile cache - ``cache``: True
    for the shared one, False for none, or a database file; its default mode, ``calibrated``);
    the synthetic one needs nothing."""
    from ios_core.cost import make_cost_model

    if kind == "measured":
        return make_cost_model("measured", device=device, threads=threads, provider=provider, cache=cache)
    return make_cost_model(kind)


# what a schedule's .stats file keeps (a cell that reuses the schedule reports them too)
_SAVED_KEYS = ("predicted_ms", "cost_model", "optimize_stats", "validation", "optimized_for", "optimize_figures",
               "cost_model_stats", "schedule_search_seconds")
# the search's figures kept in the record (OptimizeStats fields)
_SEARCH_FIGURES = ("states", "transitions", "stages_costed", "search_seconds", "num_stages", "merged",
                   "blocks_reused", "rounds")


def optimize_target(spec: dict) -> dict:
    """What an IOS cell's schedule is optimized for: its own batch size and thread budget, pruning
    r=3, s=8 and the shared profile database, unless the sweep's IOS options
    (``spec["ios_options"]``, see ``ios_bench.plan.IOS_OPTIONS``) say otherwise."""
    opts = spec.get("ios_options") or {}
    return {"batch_size": int(opts.get("optimize_batch", spec["batch_size"])),
            "threads": opts.get("optimize_threads", spec.get("threads")),
            "max_group_size": int(opts.get("max_group_size", 3)),
            "max_num_groups": int(opts.get("max_num_groups", 8)),
            "cost_cache": opts.get("cost_cache", "default")}


def _schedule(graph, spec: dict, result: dict, cost=None):
    """The IOS schedule for this (model, batch, device): optimized now, or loaded from the run.

    The schedule is persisted only through ``Graph.save``/``Graph.load`` (the JSON in the
    reference layout and its weights as ``.npz`` beside it; the optimizer's figures - estimate,
    cost model, stats, validation - in a ``.stats`` file written before them, so a reused cell
    reports them too), so a model's own weights - and those the optimizer derived for merged
    operators - are kept exactly; nothing is re-seeded. A
    schedule whose weights are missing (a run killed between the two files) is searched again.
    """
    from ios_core.ir import Graph

    path = spec["schedule_path"]
    if os.path.exists(path):
        sched = Graph.load(path)
        if sched.has_weights:
            result["optimize_seconds"] = None
            result["schedule_reused"] = True
            saved = _read_json(path[: -len(".json")] + ".stats") or {}
            for key in _SAVED_KEYS:
                if key in saved:
                    result[key] = saved[key]
            return sched
    if not spec.get("optimize"):  # a round never searches: its schedule was optimized in a worker of its own
        raise RuntimeError(f"no schedule at {path} (it is optimized by an optimize task before any round)")
    from ios_core.optimizer import schedule

    target = optimize_target(spec)
    if cost is None:
        cost = _cost_model_for(spec, target)
    t0 = time.perf_counter()
    optimized = schedule(graph, spec["schedule"], cost, batch_size=target["batch_size"],
                         max_group_size=target["max_group_size"], max_num_groups=target["max_num_groups"])
    sched = optimized.graph
    result["optimize_seconds"] = time.perf_counter() - t0
    result["schedule_search_seconds"] = result["optimize_seconds"]  # kept with the schedule (.stats)
    result["optimized_for"] = target
    result["cost_model"] = spec["cost_model"]
    if callable(getattr(cost, "stats", None)):
        result["cost_model_stats"] = {k: v for k, v in cost.stats().items() if jsonable(v)}
    stats = optimized.stats
    result["predicted_ms"] = stats.cost_ms  # the DP's estimate of the schedule handed over (an estimate)
    if stats.validation:
        result["validation"] = {k: v for k, v in stats.validation.items() if jsonable(v)}
    result["optimize_stats"] = stats.summary()
    result["optimize_figures"] = {k: getattr(stats, k) for k in _SEARCH_FIGURES}
    if not sched.has_weights:
        raise RuntimeError(f"the optimizer returned {spec['schedule']!r} schedule without weights")
    from ios_core.atomic import atomic_write_text

    saved = {k: result[k] for k in _SAVED_KEYS if k in result}
    atomic_write_text(path[: -len(".json")] + ".stats", json.dumps(saved, indent=1, default=str))
    sched.save(path)  # the schedule and its weights (Graph.save), after its figures
    return sched


def _cost_model_for(spec: dict, target: dict):
    """The cost model an IOS schedule is searched with: the sweep's kind, on the cell's provider, with
    the thread budget and profile database it is optimized for (``optimize_target``)."""
    cache = {"default": True, "off": False}.get(target["cost_cache"], spec.get("profile_db_path"))
    return _make_cost_model(spec["cost_model"], spec["device"], target["threads"], spec.get("provider", "torch"),
                            cache=cache)


def task_optimize(spec: dict) -> dict:
    """The schedules of one (model, batch, device, provider): each searched, validated by the
    optimizer and saved with its figures (``schedules/``), sharing one cost model (its stage
    costs measured once for all of them). The process that searched them never times them: rounds
    run in fresh ones. A schedule that fails is reported alone (``schedules[i]``, in the spec's order)."""
    graph = _load_graph(spec)
    out: list[dict] = []
    cost = None
    target = optimize_target(spec)
    for strategy, path in zip(spec["schedules"], spec["schedule_paths"]):
        result: dict = {}
        one = {**spec, "schedule": strategy, "schedule_path": path, "optimize": True}
        try:
            if cost is None:
                cost = _cost_model_for(spec, target)
            _schedule(graph, one, result, cost)
            out.append({"status": "ok", **{k: v for k, v in result.items() if jsonable(v)}})
        except Exception as e:  # this schedule fails; the others may still be searched
            import traceback

            traceback.print_exc()
            msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
            out.append({"status": "failed", "reason": f"{type(e).__name__}" + (f": {msg}" if msg else "")})
    return {"status": "ok", "schedules": out}


def task_cell(spec: dict, result: dict) -> dict:
    import hashlib

    import numpy as np

    import adapters
    from ios_core.check import combined_check, compare, tolerance_for
    from ios_core.interference import Window

    from .cells import CellSpec

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
    tol = min(tolerance_for(requested), adapter.tolerance)  # an adapter may only tighten it
    if spec.get("scenario"):  # a LoadGen scenario: its own round (ios_bench.scenarios.round)
        from .scenarios.round import run_round

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
    out = compiled.finish(compiled.execute(prepared))
    before = compare(out, ref, tol)
    compiled.sync()
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
        m = time_compiled(compiled, prepared, spec["device"], warmup=spec["warmup"], number=spec["number"],
                          repeat=spec["repeat"], min_sample_ms=spec.get("min_sample_ms") or None)
    window.samples(m.samples_ms)
    if str(spec["device"]).startswith("cuda"):  # peak device memory, two views (ios_bench.device_memory)
        from .device_memory import gpu_memory

        result["gpu_memory"] = gpu_memory(compiled, spec["device"])
    result["phase"] = "check"
    after = compare(compiled.finish(m.last), ref, tol)  # the last timed call's output, checked too
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
    (:mod:`ios_bench.utilization`), write the trace there (atomically) and its summary to the
    record as ``utilization``. Without it: nothing."""
    if not spec.get("util_path"):
        yield
        return
    from ios_core.atomic import atomic_write_json

    from .utilization import sampler, summarize

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
    m = time_compiled(seq, prepared, spec["device"], warmup=spec["warmup"], number=spec["number"],
                      repeat=spec["repeat"], min_sample_ms=spec.get("min_sample_ms") or None)
    if result.get("clock") is not None and m.meta.get("clock") != result["clock"]:
        raise RuntimeError(f"the sequential baseline was timed on {m.meta.get('clock')}, the schedule on "
                           f"{result['clock']}: not comparable")
    from .rounds import round_median

    result["sequential_ms"] = round_median(m.samples_ms)  # the same statistic as the cell's figure
    result["sequential_clock"] = m.meta.get("clock")


def time_compiled(compiled, prepared, device: str, **protocol):
    """The one way a worker times a built program (a cell, its sequential baseline, a doctor
    path): ``ios_core.measure.measure`` of ``compiled.execute(prepared)``.

    On a GPU every cell is timed the same way whatever the framework: the host clock, read after
    the program's own sync and a device-wide synchronize following every call
    (``ios_core.gpu.GPU_CELL_CLOCK``). Frameworks that expose no stream (TensorFlow, ONNX Runtime,
    TVM) cannot be timed with CUDA events, so none is: a schedule, its baseline and every peer
    share one clock. On the CPU: the host clock after ``sync`` (the program's own timer if it has
    one). ``meta["clock"]`` records the protocol."""
    from ios_core.measure import measure

    if str(device).startswith("cuda"):
        from ios_core.gpu import GPU_CELL_CLOCK, device_synchronizer

        device_sync = device_synchronizer()

        def sync():
            compiled.sync()
            if device_sync is not None:
                device_sync()
        return measure(lambda: compiled.execute(prepared), sync=sync, timer=None, clock=GPU_CELL_CLOCK, **protocol)
    return measure(lambda: compiled.execute(prepared), sync=compiled.sync, timer=compiled.timer(), **protocol)


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


# the frameworks' top-level modules; a worker records which it imported (``frameworks_imported``):
# none but those its cell runs (an IOS cell on ONNX Runtime kernels imports no torch)
FRAMEWORK_MODULES = ("torch", "tensorflow", "jax", "onnxruntime", "openvino", "tvm", "tensorrt", "cupy")


def _threads_seen(result: dict) -> None:
    result["frameworks_imported"] = [m for m in FRAMEWORK_MODULES if m in sys.modules]
    if "torch" in sys.modules:
        try:
            result["torch_threads"] = sys.modules["torch"].get_num_threads()
        except Exception:
            pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()
    spec = json.loads(argv[0])
    threads = spec.get("threads")
    if threads:  # before any framework import
        os.environ.update(thread_env(int(threads)))
    for warning in apply_spin_policy(spec.get("spin_policy")):  # before any framework import, too
        print(f"warning: {warning}", file=sys.stderr)
    if str(spec.get("device", "")).startswith("cuda"):
        # fp32 means fp32 in every library of a GPU worker (cuDNN and cuBLAS called by TVM, ONNX
        # Runtime, TensorFlow, ...): the driver-level switch that disables TF32 everywhere
        os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
    from .sideeffects import quiet_environment

    quiet_environment()  # no telemetry files in the home folder (a Ray worker inherits no parent env)
    import faulthandler

    faulthandler.enable()  # a segfault leaves a Python traceback in the stderr tail
    result: dict = {"pid": os.getpid()}
    t0 = time.perf_counter()
    try:
        load_plugins()
        task = spec["task"]
        if task == "probe":
            result.update(task_probe(spec))
        elif task == "reference":
            result.update(task_reference(spec))
        elif task == "optimize":
            result.update(task_optimize(spec))
        elif task == "cell":
            result = task_cell(spec, result)
        elif task == "doctor":
            result.update(task_doctor(spec))
        elif task == "doctor_ios":
            result.update(task_doctor_ios(spec))
        else:
            raise ValueError(f"unknown task {task!r}")
    except BaseException as e:  # noqa: B036 - every failure becomes this cell's record
        import traceback

        traceback.print_exc()
        phase = result.pop("phase", None)
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        from .device_memory import oom_reason

        oom = oom_reason(e, spec.get("device", ""))  # a cell that does not fit the GPU says so
        result.update(status="failed", reason=f"{phase + ': ' if phase else ''}" + (oom or f"{type(e).__name__}"
                      + (f": {msg}" if msg else "")))
    _threads_seen(result)
    try:
        import resource

        result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    except Exception:
        pass
    result["worker_seconds"] = time.perf_counter() - t0
    from ios_core.atomic import atomic_write_json

    atomic_write_json(spec["result_path"], result, indent=None)
    return 0 if result.get("status") in ("ok", "skipped") else 1


if __name__ == "__main__":
    sys.exit(main())
