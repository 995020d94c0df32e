"""A worker's setup tasks (``ios_bench.running.worker``): ``probe`` (which adapters and IOS providers run on
the device) and ``reference`` (the oracle's outputs and the seeded inputs of a model, once per run)."""

from __future__ import annotations

import os
import time


def _load_graph(spec: dict):
    from ios_bench.planning.loading import load_graph

    graph = load_graph(spec.get("model_path") or spec["model_spec"])  # model_path: the run's copy of a file
    if not graph.has_weights:
        graph.init_weights(spec["seed"])
    return graph


def _process_age() -> float | None:
    """Seconds since this process started (its interpreter's start and the harness's imports), from
    the kernel's clock since boot (``/proc``: 10 ms resolution; psutil's wall-clock start time is
    only good to a second); None where it cannot be read."""
    try:
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class _StartClock:
    """What a fresh worker of each framework takes to start, timed in the probe: this process's own
    start (the interpreter and the harness) plus the adapter's module, its framework's imports and
    its availability check, the way its cells do them (``Adapter.available`` imports the framework
    as the adapter's builds do, leaving out what the adapter keeps out: ``adapters.imports``). A
    library is imported once per process: a later check using a library an earlier one imported
    (``torch-compile`` after ``torch``) is charged that earlier check's time too."""

    def __init__(self):
        self.started = _process_age()
        self.first: dict[str, float] = {}  # library -> seconds of the check that imported it

    def check(self, fn, requires=lambda result: ()):
        """``fn()``, timed; returns (its result, the start of a worker of that framework in seconds,
        or None). ``requires(result)``: the libraries that framework imports."""
        import sys

        before = set(sys.modules)
        t0 = time.perf_counter()
        result = fn()
        spent = time.perf_counter() - t0
        for m in set(sys.modules) - before:
            if "." not in m:
                self.first.setdefault(m, spent)
        if self.started is None:
            return result, None
        earlier = sum(self.first.get(m, 0.0) for m in requires(result) if m in before)  # imported before: charged
        return result, round(self.started + spent + earlier, 3)


def task_probe(spec: dict) -> dict:
    import adapters

    clock = _StartClock()
    out = {}
    wanted = spec.get("names")
    for name in adapters.names():
        if wanted is not None and name not in wanted:
            continue
        try:
            def check(name=name):  # the adapter's module, its framework's imports, its own check
                a = adapters.get(name)
                return a, a.available(spec["device"])

            (a, reason), start = clock.check(check, lambda got: got[0].requires)
            out[name] = {"reason": reason, "version": a.version(), "precision": getattr(a, "precision", None),
                         "precisions": a.precisions(spec["device"]) if hasattr(a, "precisions") else None,
                         "devices": list(getattr(a, "devices", ())),
                         "concurrency": getattr(a, "concurrency", "instances"),
                         "concurrency_note": getattr(a, "concurrency_note", ""),
                         "start_s": None if reason else start}
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

            extras["providers"], starts = {}, {}
            for n in providers.names():
                p = providers.get(n)
                extras["providers"][n], starts[n] = clock.check(p.available, lambda _, p=p: p.requires)
            extras["provider_start_s"] = {n: s for n, s in starts.items() if extras["providers"][n] is None}
            # how each provider compiles a piece at each precision (an IOS cell's precision on its kernels)
            extras["provider_precisions"] = {n: providers.get(n).precisions() for n in providers.names()}
        except Exception as e:  # pragma: no cover - the IOS adapter's own reason says more
            extras["providers_reason"] = f"{type(e).__name__}: {e}"
    extras["process_start_s"] = clock.started
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
        if spec.get("check_size"):  # the int8 check's seeded batches (the same draws: input_seed + i)
            meta["check"] = _save_qsl(graph, bs, {**spec, "qsl_size": spec["check_size"]},
                                      spec["check_paths"][spec["batch_sizes"].index(bs)], x, y)
        if spec.get("int8_sim_paths"):  # int8 cells' RMS bound (ios_core.check.SIMULATED_RMS_FACTOR)
            meta["int8_simulated"] = _save_int8_simulation(graph, bs, spec,
                                                           spec["int8_sim_paths"][spec["batch_sizes"].index(bs)], y)
        out[str(bs)] = meta
    # the model's memory figures the sweep's pre-check reads (ios_bench.planning.estimate)
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


def _save_int8_simulation(graph, bs: int, spec: dict, path: str, y) -> dict:
    """The oracle's int8 simulation (``ios_core.reference.int8_simulation``, calibrated on what the int8 cells
    calibrate on: ``ios_core.quantize.calibration_feeds``, the ``--calibration-data`` folder where given) of
    every batch an int8 cell is checked on (``ios_core.check.check_batches``: the cell's seeded input, then
    ``input_seed + i``), stacked in one ``.npy``; with its own errors against the oracle's output ``y`` of the
    first, for the record."""
    import numpy as np

    from ios_core import reference
    from ios_core.atomic import atomic_write
    from ios_core.check import check_batches, compare, rms_rel_err
    from ios_core.quantize import calibration_feeds
    from ios_core.reference import random_input

    t0 = time.perf_counter()
    simulate = reference.int8_simulation(graph, calibration_feeds(graph, bs, data=spec.get("calibration_data"))[0])
    xs = [random_input(graph, bs, seed=spec["input_seed"] + i) for i in range(check_batches(bs, "int8"))]
    ys = simulate(np.concatenate(xs))  # as one batch, in the oracle's chunks: every operator is per image
    ys = ys.reshape(len(xs), bs, *ys.shape[1:])
    atomic_write(path, lambda f: np.save(f, ys))
    return {"batches": len(xs), "calibration_data": spec.get("calibration_data"),
            "max_rel_err": compare(ys[0], y).max_rel_err, "rms_rel_err": rms_rel_err(ys[0], y),
            "seconds": time.perf_counter() - t0}


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
