"""Where the time goes: one graph under every framework's own profiler, mapped back to the IR.

    results = profile_frameworks(graph, ["onnxruntime", "openvino", "torch", "ios"], batch_size=1)
    # one dict per framework (the shape of `profile --format json`: docs/harness.md, "Where the time goes")

For each framework: the cell's own build is timed unprofiled with the one way a worker times a
program (``ios_bench.running.task_cell.time_compiled``: ``ios_core.measurement.measure.measure``),
then a separate build with the profiler switched on (``Adapter.profile_options()``) runs under it
(``Compiled.profile``), so a profile never touches a cell's figures. What the profiler names
(ONNX node names, OpenVINO's original layer names, ``record_function`` ranges, IOS stages'
operators) is mapped to the IR operators **by name** (:func:`resolver`): every lowering names
its nodes after the operator they compute. A profiled item whose names map to several operators
is a fused group (one row for the group); one whose names map to none (a layout reorder, a
compiled region, the aten ops between ranges) is "fused, unmapped", never dropped. A row of an
imported model also names the model's own nodes its operators compute (``source_nodes``, whole:
``ios_core.ir.meta``). Then
``latency = attributed + unmapped + overhead``: "gaps and overhead" is the unprofiled latency
minus everything the profiler timed. Each operator's wall time is counted once per call (its events
on several threads or planes merged: ``adapters.base.per_call_ms``), but different operators that ran
at the same time (an inter-op pool, concurrent planes, IOS's parallel stages) each keep their own
time: the rows can then add up to more than the call took. "gaps and overhead" is negative when
everything timed adds up to more than the unprofiled latency: such overlapping operators, or a
profiler that made each operator slower (the profiler's cost). ``attributed_over_profiled`` (the
attributed time over the profiled call's, on the same calls' clock) stands beside
``attributed_share`` (over the unprofiled latency), and ``overlap`` says why, when the rows add up
to more than the profiled call (:func:`overlap_reason`).
A framework whose profiler is missing or fails gives ``{"framework", "error"}`` and the others
still run. On cuda the unprofiled window also gives joules per inference and average watts
(``ios_core.measurement.energy``); elsewhere ``energy`` says why it is not available.
"""

from __future__ import annotations

import re

import numpy as np

from ios_core.ir import Graph, leaf_nodes
from ios_core.ir.meta import source_nodes

# op kinds of the per-kind table and the stacked bars, in display order
KINDS = ("conv 1x1", "conv 3x3", "conv depthwise", "conv other", "pooling", "concat", "elementwise", "other",
         "fused (mixed kinds)")
UNMAPPED = "fused, unmapped"
OVERHEAD = "gaps and overhead"


def kind_of(op) -> str:
    """An IR operator's kind: convolutions by shape (depthwise, 1x1, 3x3, other), pooling, concat
    (an identity joining several terms), elementwise (sums, products, activations, affine), other."""
    t = op.TYPE
    if t == "conv":
        if op.groups > 1 and op.groups == op.input_shape[0]:
            return "conv depthwise"
        k = tuple(op.kernel)
        return {(1, 1): "conv 1x1", (3, 3): "conv 3x3"}.get(k, "conv other")
    if t == "pool":
        return "pooling"
    if t == "identity":
        return "concat" if len(op.inputs) > 1 else "other"
    if t in ("element", "relu", "activation", "affine"):
        return "elementwise"
    return "other"


_CUT = re.compile(r"[.:/_ ]")


def resolver(graph: Graph):
    """``resolve(name) -> [operator, ...]``: the IR operators a profiler's name stands for, found
    by name: the name itself, else its longest prefix ending before a separator (``.:/_`` or a
    space) that names a node ("7.conv:13_nchwc" -> "7"); a Sequential node stands for its
    operators. ``[]`` when nothing matches (a reorder the framework inserted)."""
    table: dict[str, list[str]] = {}
    for node in graph.nodes():
        if node is graph.input:
            continue
        table[node.name] = [op.name for op in leaf_nodes(node)]
        for op in leaf_nodes(node):
            table[op.name] = [op.name]

    def resolve(name: str) -> list[str]:
        name = name.removeprefix("fused ").removeprefix("ios:")
        if name in table:
            return table[name]
        for m in reversed(list(_CUT.finditer(name))):
            if name[:m.start()] in table:
                return table[name[:m.start()]]
        return []

    return resolve


def attribute(graph: Graph, optimes, latency_ms: float, profiled_ms: float) -> dict:
    """The mapped figures of one framework's profile rows (``adapters.base.OpTime``)."""
    resolve = resolver(graph)
    order = {op.name: i for i, op in enumerate(graph.operators())}
    kinds = {op.name: kind_of(op) for op in graph.operators()}
    sources = {op.name: source_nodes(op) for op in graph.operators()}  # an imported model's own node names
    groups: dict[tuple[str, ...], dict] = {}
    unmapped: dict[str, float] = {}
    unmapped_kernels: dict[str, str] = {}
    for t in optimes:
        ops = sorted({o for s in t.sources for o in resolve(s)} | _fused_conv(graph, t, resolve), key=order.__getitem__)
        if not ops:
            unmapped[t.name] = unmapped.get(t.name, 0.0) + t.ms
            if t.exec_type:
                unmapped_kernels[t.name] = t.exec_type
            continue
        g = groups.setdefault(tuple(ops), {"ms": 0.0, "framework_ops": [], "exec_types": {}, "self_ms": None})
        g["ms"] += t.ms
        g["framework_ops"].append(t.name)
        if t.exec_type:
            g["exec_types"][t.name] = t.exec_type
        if t.self_ms is not None:
            g["self_ms"] = (g["self_ms"] or 0.0) + t.self_ms
    rows = []
    for ops, g in sorted(groups.items(), key=lambda kv: (order[kv[0][0]], len(kv[0]))):
        ks = {kinds[o] for o in ops}
        row = {"name": "+".join(ops), "kind": ks.pop() if len(ks) == 1 else KINDS[-1], "ms": g["ms"],
               "operators": list(ops), "framework_ops": g["framework_ops"]}
        if g["exec_types"]:  # the kernel each framework op ran (OpenVINO's exec_type)
            row["exec_types"] = g["exec_types"]
        if g["self_ms"] is not None:  # the framework's self time beside its total (torch)
            row["self_ms"] = g["self_ms"]
        if any(sources[o] for o in ops):  # the file's node names (ONNX) the row's operators compute, whole
            row["source_nodes"] = [n for o in ops for n in sources[o]]
        rows.append(row)
    attributed = sum(r["ms"] for r in rows)
    unmapped_ms = sum(unmapped.values())
    out = {"latency_ms": latency_ms, "profiled_ms": profiled_ms, "attributed_ms": attributed,
           "unmapped_ms": unmapped_ms, "overhead_ms": latency_ms - attributed - unmapped_ms,
           "attributed_share": attributed / latency_ms if latency_ms > 0 else None,
           "attributed_over_profiled": attributed / profiled_ms if profiled_ms > 0 else None,
           "profiler_cost": profiled_ms / latency_ms - 1 if latency_ms > 0 else None}
    reason = overlap_reason(attributed + unmapped_ms, profiled_ms)
    if reason:
        out["overlap"] = reason
    return {**out, "rows": rows, "unmapped_rows": [{"name": n, "ms": ms, **({"exec_type": unmapped_kernels[n]}
                                                                          if n in unmapped_kernels else {})}
                                            for n, ms in sorted(unmapped.items(), key=lambda kv: -kv[1])]}


def overlap_reason(timed_ms: float, profiled_ms: float) -> str | None:
    """Why a framework's profile rows (``timed_ms``: attributed + unmapped) add up to more than its
    profiled call (``profiled_ms``), or None when they do not."""
    if profiled_ms <= 0 or timed_ms <= profiled_ms:
        return None
    return (f"its rows add up to {timed_ms:.3g} ms, {100 * timed_ms / profiled_ms:.0f}% of the profiled call's "
            f"{profiled_ms:.3g} ms: operators that ran at the same time (on an inter-op pool's threads or "
            "concurrent planes) each count their own wall time, and each row is its own median over the calls; "
            "the shares count the overlapping time more than once")


def _fused_conv(graph: Graph, t, resolve) -> set[str]:
    """A node the framework reports as a convolution (its type names one) but named after an
    activation only (ONNX Runtime names a fused Conv+Relu after the Relu): the convolution feeding
    that activation, which it holds too."""
    if "conv" not in t.kind.lower():
        return set()
    ops = [graph.node(o) for s in t.sources for o in resolve(s)]
    if not ops or any(op.TYPE == "conv" for op in ops):
        return set()
    first = ops[0]
    if first.TYPE in ("relu", "activation") and len(first.inputs) == 1 and len(first.inputs[0]) == 1:
        producer = first.inputs[0][0].node
        if producer.TYPE == "conv":
            return {producer.name}
    return set()


PROFILE_ROUNDS = 4  # rounds of one unprofiled and one profiled block, in alternating order


def profile_one(name: str, graph: Graph, batch_size: int = 1, device: str = "cpu", threads: int | None = None,
                precision: str = "fp32", warmup: int = 3, repeat: int = 10, x: np.ndarray | None = None,
                rounds: int = PROFILE_ROUNDS, trace_dir=None) -> dict:
    """One framework's profile of ``graph`` (see the module's docstring); never raises for a
    framework that cannot be profiled: ``{"framework": name, "error": "not available: ..."}``.

    The cell's own build and the profiled build are timed in ``rounds`` rounds, each one block of
    ``repeat`` unprofiled calls and one block of ``repeat`` profiled calls (``Compiled.profile``),
    the blocks' order alternating from round to round (unprofiled first, then profiled first, ...):
    a drift of the machine (a co-tenant, the clock) falls on both sides alike. The latency and the
    profiled call are each the median of their blocks' medians (``ios_bench.running.rounds``); the
    profiler's cost is the paired change of each round's profiled block over its unprofiled one
    with its interval (``rounds.paired_interval``, the one ``ios-bench ab`` gives); the rows are, per
    name, the median of the rounds' rows. ``trace_dir``: where the framework's own trace of the
    first profiled block is kept (:func:`trace_file`), for the frameworks that write one."""
    import adapters
    from ios_bench.reporting.escape import one_line
    from ios_bench.running import rounds as stats_rounds
    from ios_bench.running.task_cell import precision_problem, time_compiled
    from ios_core.inputs import random_input
    from ios_core.measurement.energy import EnergyMeter

    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    out: dict = {"framework": name}
    adapter = adapters.get(name)
    reason = adapter.available(device)
    if reason is not None:
        return {**out, "error": f"not available: {one_line(reason)}"}
    if x is None:
        x = random_input(graph, batch_size)
    import os

    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    trace = trace_file(trace_dir, graph.name, name, batch_size, device) if trace_dir is not None else None
    unprofiled: list[list[float]] = []
    profiled_blocks: list[list[float]] = []
    round_rows: list[list] = []
    energy: dict = {}
    pm = None
    try:
        compiled = adapter.build(graph, batch_size, device, threads, precision=precision)  # the cell's own build
        problem = precision_problem(adapter, compiled.info, precision)
        if problem:
            return {**out, "error": f"not available: {one_line(problem)}"}
        profiled = adapter.build(graph, batch_size, device, threads, precision=precision, **adapter.profile_options())
        prepared = compiled.prepare(x)

        def unprofiled_block(first: bool):
            nonlocal energy
            meter = EnergyMeter(device) if first else None  # NVML's energy counter around one unprofiled block
            if meter is not None:
                meter.start()
            m = time_compiled(compiled, prepared, device, warmup=warmup, number=1, repeat=repeat)
            if meter is not None:
                energy = meter.stop(calls=warmup + m.repeat * m.number)
            unprofiled.append(list(m.samples_ms))

        def profiled_block(first: bool):
            nonlocal pm
            kwargs = {"trace": trace} if first and trace is not None else {}
            rows, pm = profiled.profile(x, warmup=warmup, repeat=repeat, **kwargs)
            round_rows.append(rows)
            profiled_blocks.append(list(pm.samples_ms))

        for i in range(rounds):
            blocks = (unprofiled_block, profiled_block) if i % 2 == 0 else (profiled_block, unprofiled_block)
            for block in blocks:
                block(i == 0)
    except Exception as e:  # a profiler missing or failing: this column only
        return {**out, "error": f"not available: {one_line(f'{type(e).__name__}: {e}')}"}
    finally:  # a build that narrowed this thread's cores (jax-xla's thread budget) leaves the next framework's alone
        if cores is not None and os.sched_getaffinity(0) != cores:
            os.sched_setaffinity(0, cores)
    latency = stats_rounds.figure_over_rounds(unprofiled)
    profiled_ms = stats_rounds.figure_over_rounds(profiled_blocks)
    out.update(attribute(graph, merge_rounds(round_rows), latency, profiled_ms))
    out.update(profiler_cost_figures(unprofiled, profiled_blocks))
    if (getattr(pm, "meta", None) or {}).get("timeline"):  # IOS: one profiled call's stages per worker
        out["timeline"] = pm.meta["timeline"]
    if trace is not None and trace.is_file():
        out["trace"] = str(trace)
    out.update(energy)
    out.update(batch_size=batch_size, device=device, precision=precision, repeat=repeat, rounds=rounds,
               framework_version=adapter.version())
    return out


def merge_rounds(round_rows: list[list]) -> list:
    """One row per name over the rounds' profile rows (``OpTime``): its time (and self time, where
    the framework gives one) the median over the rounds (a round without it: 0 there, as
    ``adapters.base.median_per_name`` counts a call), its sources, kind and kernel from its first round."""
    from dataclasses import replace

    from adapters.base import median_per_name

    first: dict = {}
    for rows in round_rows:
        for t in rows:
            first.setdefault(t.name, t)
    medians = median_per_name([{t.name: t.ms for t in rows} for rows in round_rows])
    selfs = median_per_name([{t.name: t.self_ms for t in rows if t.self_ms is not None} for rows in round_rows])
    return [replace(t, ms=medians[n], self_ms=selfs.get(n) if t.self_ms is not None else None)
            for n, t in first.items()]


def profiler_cost_figures(unprofiled: list[list[float]], profiled: list[list[float]],
                          confidence: float = 0.95) -> dict:
    """The profiler's cost from interleaved rounds (``unprofiled[i]``, ``profiled[i]``: round i's
    samples of each block): ``profiler_cost`` (the paired change, ``rounds.paired_interval``), its
    interval ``profiler_cost_low``/``_high`` and how it was taken (``profiler_cost_how``)."""
    from ios_bench.running.rounds import paired_interval

    change, lo, hi = paired_interval(unprofiled, profiled, confidence)
    k = len(unprofiled)
    return {"profiler_cost": change, "profiler_cost_low": lo, "profiler_cost_high": hi,
            "profiler_cost_how": (f"{k} round{'s' * (k != 1)} of {len(unprofiled[0])} unprofiled and "
                                  f"{len(profiled[0])} profiled calls, the blocks' order alternating; the paired "
                                  f"change of the round medians with its {confidence:.0%} interval")}


def trace_file(folder, model: str, framework: str, batch_size: int, device: str):
    """Where a framework's own trace is kept: ``<folder>/<model>-<framework>-b<B>-<device>.trace.json``
    (Chrome trace / Perfetto JSON: chrome://tracing, ui.perfetto.dev)."""
    from pathlib import Path

    from ios_bench.reporting.escape import file_part

    return Path(folder) / f"{file_part(model)}-{file_part(framework)}-b{batch_size}-{file_part(device)}.trace.json"


def profile_frameworks(graph: Graph, names: list[str], batch_size: int = 1, **kwargs) -> list[dict]:
    """:func:`profile_one` for each framework, on the same seeded input."""
    from ios_core.inputs import random_input

    x = random_input(graph, batch_size)
    return [profile_one(n, graph, batch_size, x=x, **kwargs) for n in names]


PROFILE_FILE = "profile.json"  # in a run folder: `ios-bench run --profile`'s profiles, read by the report
TRACE_FOLDER = "profile-traces"  # in a run folder: the frameworks' own traces (Chrome trace / Perfetto JSON)


def profile_run(folder, plan, say=print) -> list[dict]:
    """``ios-bench run --profile``: after the sweep, each (model, batch size, device) of the run's
    correct cells profiled once per framework those cells used (every IOS cell as ``ios``, on the
    graph as loaded: sequential unless the model carries stages), written to ``folder/profile.json``
    as ``[{"model", "batch_size", "device", "results": [...]}]``, each framework's own trace in
    ``folder/profile-traces/`` (its path, relative to the folder, in its result's ``trace``). Separate
    runs: no cell's figures change."""
    import json
    from pathlib import Path

    import adapters
    from ios_bench.planning.loading import load_graph
    from ios_bench.results import load_run
    from ios_core.atomic import atomic_write_text

    records = [r for r in load_run(folder).records if r.get("status") == "ok" and not r.get("scenario")]
    traces = Path(folder) / TRACE_FOLDER  # each framework's own trace, beside profile.json
    traces.mkdir(parents=True, exist_ok=True)
    known = set(adapters.names())
    out = []
    for spec in plan.models:
        graph = load_graph(spec)
        for (bs, device) in dict.fromkeys((r["batch_size"], r["device"]) for r in records if r["model"] == graph.name):
            names = list(dict.fromkeys("ios" if r["framework"].startswith("ios") else r["framework"]
                                       for r in records if r["model"] == graph.name and r["batch_size"] == bs
                                       and r["device"] == device))
            names = [n for n in names if n in known]
            if not names:
                continue
            say(f"profiling {graph.name} b{bs} {device}: {', '.join(names)}")
            if not graph.has_weights:
                graph.init_weights(plan.seed)
            results = profile_frameworks(graph, names, bs, device=device, threads=plan.threads,
                                         warmup=plan.warmup, repeat=plan.repeat, trace_dir=traces)
            for r in results:  # the run folder moves as a whole: a trace's path is relative to it
                if r.get("trace"):
                    r["trace"] = Path(r["trace"]).relative_to(Path(folder)).as_posix()
            out.append({"model": graph.name, "batch_size": bs, "device": device, "results": results})
    atomic_write_text(Path(folder) / PROFILE_FILE, json.dumps(out, indent=1))
    return out
