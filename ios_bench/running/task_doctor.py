"""A worker's ``doctor`` tasks (``ios_bench.running.worker``, ``ios-bench doctor``): one framework's path, or
the IOS runtime's GPU paths, on a small graph against the oracle."""

from __future__ import annotations

from ios_bench.records.record import jsonable
from ios_bench.running.task_cell import time_compiled
from ios_bench.running.task_setup import _load_graph


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
        from ios_core.measurement.gpu import clock_state

        clocks = clock_state()
    return {"status": "ok", "check": check.to_dict(), "median_ms": m.median, "clock": m.meta.get("clock"),
            "info": info, "clocks": clocks}


def task_doctor_ios(spec: dict) -> dict:
    """The IOS runtime's GPU paths (``ios_bench.machine.gpu_paths``: sequential, parallel schedule, CUDA
    graph, a cost-model stage, a clock lock), each against the oracle (``ios-bench doctor``)."""
    from ios_bench.machine import gpu_paths
    from ios_core.measurement import gpu

    reason = gpu.cuda_missing()
    if reason is not None:
        return {"status": "skipped", "reason": reason}
    graph = _load_graph(spec)
    lines = gpu_paths.run_paths(graph, spec["batch_size"], gpu_paths.default_device_factory(), seed=spec["seed"],
                                lock_clocks=spec.get("lock_clocks", False))
    return {"status": "ok", "paths": [{k: v for k, v in line.items() if jsonable(v)} for line in lines]}
