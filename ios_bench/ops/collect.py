"""``ios-bench ops collect``: measure operators and the stages IOS would form into the dataset.

For each network, the candidate stages are the ones the IOS dynamic program asks its cost model
about (strategy ``both``, pruned by ``r`` and ``s``): every distinct operator alone, groups of
operators run in order, concurrent combinations of 2 and 3 groups, and merged convolutions. The
search is run with a recording cost model over the analytical one (no device time); the set of
stages it asks about does not depend on the costs. Every operator is kept; of the multi-group
and merge stages a deterministic sample of at most ``max_stages`` per network is kept, and each
group of a kept combination is also measured alone (so a combination's speedup over running its
groups one after another can be read from the dataset).

Each stage is timed by the measured cost model (the runtime's planner and the one measurement
function), per provider and thread budget, with all samples kept.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from ios_core.cost.cache import stage_signature
from ios_core.cost.features import Featurizer, feature_names
from ios_core.ir import Graph, leaf_nodes
from ios_core.measurement.interference import CanaryReference, canary_ms
from ios_core.optimizer import Stage


@dataclass
class Candidate:
    model: str
    stage: Stage
    signature: str
    description: str
    group_signatures: list[str]


class _Recorder:
    """A cost model that records every stage it is asked about and answers analytically."""

    def __init__(self):
        from ios_core.cost import SyntheticCostModel

        self.inner = SyntheticCostModel()
        self.stages: list[Stage] = []

    def stage_latency(self, stage, batch_size):
        self.stages.append(stage)
        return self.inner.stage_latency(stage, batch_size)


def _alone(group) -> Stage:
    return Stage("parallel", [list(group)])


def candidates(graph: Graph, model: str, batch_size: int, r: int = 2, s: int = 3, max_stages: int = 150,
               seed: int = 0) -> list[Candidate]:
    """The stages of ``graph`` to measure (see the module docstring), distinct by signature."""
    from ios_core import optimize

    rec = _Recorder()
    optimize(graph, "both", rec, batch_size=batch_size, max_group_size=r, max_num_groups=s)
    singles = [Stage("parallel", [[leaf]]) for leaf in _leaves(graph)]
    combos = [st for st in rec.stages if (st.kind == "merge" and len(st.groups) >= 2)
              or (st.kind == "parallel" and 2 <= len(st.groups) <= 3)]
    rng = random.Random(seed)
    rng.shuffle(combos)
    out: dict[str, Candidate] = {}

    def add(stage: Stage, groups_alone: list[str]) -> str:
        sig, desc = stage_signature(stage.kind, stage.groups)
        if sig not in out:
            out[sig] = Candidate(model, stage, sig, desc, groups_alone)
        return sig

    for st in singles:
        add(st, [])
    kept = 0
    for st in combos:
        if kept >= max_stages:
            break
        sig, _ = stage_signature(st.kind, st.groups)
        if sig in out:
            continue
        alone = [add(_alone(g), []) for g in st.groups] if st.kind == "parallel" else []
        add(st, alone)
        kept += 1
    return list(out.values())


def _leaves(graph: Graph):
    for block in graph.blocks:
        for node in block.nodes:
            yield from leaf_nodes(node)


_canary = CanaryReference()  # the usual canary of this collect's rows


def measure_row(cand: Candidate, provider: str, threads: int, batch_size: int, machine: dict, measurer) -> dict:
    """Time one candidate; the dataset row."""
    from ios_core.measurement.interference import Window

    with Window(canary_reps=3) as window:
        m = measurer.measure_stage(cand.stage, batch_size)
    window.samples(m.samples_ms)
    disturbed = _canary.judge(window.figures)
    vec, work = Featurizer(batch_size).stage_inputs(cand.stage.kind, cand.stage.groups, threads)
    feats = dict(zip(feature_names(), vec.tolist()))
    row = {"machine": machine["machine"], "provider": provider, "threads": threads, "batch": batch_size,
           "signature": cand.signature, "model": cand.model, "kind": cand.stage.kind,
           "n_groups": len(cand.stage.groups), "n_ops": int(feats["ops"]),
           "op_types": ",".join(sorted({leaf.TYPE for n in cand.stage.nodes for leaf in leaf_nodes(n)})),
           "group_signatures": ",".join(cand.group_signatures), "description": cand.description[:2000],
           "op_work": _json(work),
           "latency_ms": m.median, "mean_ms": m.mean, "std_ms": m.std, "p10_ms": m.percentile(10),
           "p90_ms": m.percentile(90), "samples_ms": list(m.samples_ms), "number": m.number, "warmup": m.warmup,
           "cpu_model": machine["cpu_model"], "cores": machine["cores"],
           "versions": _json(machine["versions"]), "thread_env": _json(machine["thread_env"]),
           "created": time.time(),
           # what else used the machine; a row measured on a disturbed machine is kept, marked, and
           # `ops fit` leaves it out (and says how many)
           "disturbed": disturbed or "", "other_cpu": window.figures.get("other_cpu"),
           "steal": window.figures.get("steal"), "load1": window.figures.get("load1"),
           "canary_ms": canary_ms(window.figures)}
    row.update({f"f_{k}": v for k, v in feats.items()})
    return row


def _json(d) -> str:
    import json

    return json.dumps(d, sort_keys=True)


def provider_option(provider: str) -> dict:
    """The measured cost model's provider option (torch, the runtime's default, needs none)."""
    return {} if provider == "torch" else {"provider": provider}


@dataclass
class CollectPlan:
    graphs: dict[str, Graph]
    providers: list[str]
    threads: list[int]
    batches: list[int]
    r: int = 2
    s: int = 3
    max_stages: int = 150
    warmup: int = 2
    repeat: int = 5
    min_sample_ms: float = 1.0


def collect(plan: CollectPlan, writer, done: set[tuple], machine: dict, make_bar: Callable | None = None,
            make_measurer: Callable | None = None) -> dict:
    """Measure every (candidate, provider, threads, batch) not in ``done``; rows go to ``writer``.
    Returns counts. ``make_bar(total)`` makes a progress bar (``update(n)``, ``close()``);
    ``make_measurer(provider, threads)`` builds the measured cost model."""
    from ios_core.cost.measured import make_measured_cost_model

    make_measurer = make_measurer or (lambda provider, threads: make_measured_cost_model(
        threads=threads, cache=False, warmup=plan.warmup, repeat=plan.repeat, min_sample_ms=plan.min_sample_ms,
        **provider_option(provider)))
    jobs = []
    skipped = 0
    for batch in plan.batches:
        for model, graph in plan.graphs.items():
            cands = candidates(graph, model, batch, plan.r, plan.s, plan.max_stages)
            for provider in plan.providers:
                for threads in plan.threads:
                    for c in cands:
                        key = (machine["machine"], provider, threads, batch, c.signature)
                        if key in done:
                            skipped += 1
                        else:
                            jobs.append((c, provider, threads, batch))
                            done.add(key)
    bar = make_bar(len(jobs)) if make_bar is not None else None
    measurers: dict[tuple, object] = {}
    counts = {"measured": 0, "stages": len(jobs), "skipped": skipped}
    try:
        for c, provider, threads, batch in jobs:
            m = measurers.get((provider, threads))
            if m is None:
                m = measurers[(provider, threads)] = make_measurer(provider, threads)
            writer.add(measure_row(c, provider, threads, batch, machine, m))
            counts["measured"] += 1
            if bar is not None:
                bar.update(1)
    finally:  # an interrupted collect keeps every row it measured
        writer.flush()
        if bar is not None:
            bar.close()
    return counts
