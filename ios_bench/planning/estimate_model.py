"""The estimate's cost model of one sweep (``ios_bench.planning.estimate``): the stated figures
(:mod:`ios_bench.planning.estimate_stated`), replaced by earlier runs' (:mod:`ios_bench.planning.estimate_history`),
turned into a round's, a search's and a reference output's seconds, and a sweep's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ios_bench.planning.estimate_history import History
from ios_bench.planning.estimate_stated import (
    BUILD_BASE_OPS,
    BUILD_FULL_OPS,
    PRECISION_SEP,
    SPEED_BOUNDS,
    STATED,
    WORKER_START_S,
    _base_name,
    _fixed_key,
    _stated,
    band_factor,
    canary_band,
    series,
    speed_factor,
    stated_rate,
)
from ios_core.check import check_batches
from ios_core.measurement.protocol import round_calls
from ios_core.measurement.stats import median
from ios_core.quantize import calibration_batches

# the learnt rounds it takes to expect re-runs from their disturbed share (fewer say too little)
MIN_RERUN_EVIDENCE = 30
# the networks (batch-1 rounds, operators and parameters known) a worker kind's fixed part is fitted to its
# size from (Model.size_fit): as many as its three figures; fewer: the stated build part moved to the size
SIZE_FIT_MIN_NETWORKS = 3
# a round's kinds of cost (Model.round_parts), as the dry run names them
ROUND_PARTS = {"timed": "timed samples", "warmup": "warmup calls",
               "check_calibration": "output check and calibration calls",
               "start": "worker starts, canaries, the round's own work", "build": "builds (warm, each round)"}


def search_states(graph) -> int:
    """The states the IOS DP solves on ``graph`` (the optimizer's own count, for its progress bar;
    cheap next to the search): what a search's cost grows with besides its operators."""
    from ios_core.optimizer.optimize import graph_states

    return graph_states(graph)


# the build cache each framework's builds keep (adapters.build_cache): its directory's name
BUILD_CACHES = {"torch-compile": "torch-inductor", "torch-compile-cudagraphs": "torch-inductor", "jax-xla": "jax",
                "openvino": "openvino", "tensorflow-xla": "tensorflow-xla", "tvm": "tvm", "tvm-cudnn": "tvm",
                "tflite": "tflite"}


def warm_build_cache(framework: str, model: str | None = None, batch: int = 1) -> bool:
    """Whether the build cache this sweep's rounds will use (``IOS_BENCH_BUILD_CACHE``: the user
    scope of ``--build-cache user``, or a directory named there) already holds the cell's own build:
    ``model`` at ``batch`` by ``framework`` (a series: its precision, ``openvino@bf16``), as a manifest
    there names it (``adapters.build_cache.sealed_builds``), so that its first round is not cold. Another
    model's, batch's or precision's build in the same cache is not this cell's. The run scope (each run
    folder's own ``cache/``) starts empty.

    What it cannot tell: a manifest sealed before builds were named (or by a build no round's worker
    named) holds builds it does not list, so it is counted cold (the estimate then errs long by a
    first build); the device (a cache on any device, ``<name>`` or ``<name>@<gpu>``, counts: the GPU a
    cuda cell will get is not known here); and the versions (a cache an older version sealed is rebuilt,
    and the estimate is short by that build). A framework without a cache of its own (``BUILD_CACHES``)
    or a cell without a model is cold."""
    from adapters.build_cache import build_name, resolve, sealed_builds

    name = BUILD_CACHES.get(_base_name(framework))
    where = resolve(None)
    if name is None or where is None or model is None:
        return False
    want = build_name(model, batch, framework.partition(PRECISION_SEP)[2] or "fp32")
    root = Path(where).expanduser()
    try:
        return any(want in (sealed_builds(d) or []) for d in root.glob(f"{name}*")
                   if d.name == name or d.name.startswith(f"{name}@"))
    except OSError:
        return False


@dataclass
class Model:
    """The cost model of one sweep: the stated constants, overridden by an earlier run's figures."""

    history: History
    macs: dict[str, int]  # graph name -> multiply-accumulates per image
    ops: dict[str, int]  # graph name -> operators
    states: dict[str, int] = field(default_factory=dict)  # graph name -> the IOS DP's states (search_states)
    warmup: int = 3
    repeat: int = 10
    min_sample_ms: float = 0.0
    # the plan's protocol fields (ios_core.measurement.protocol.protocol_fields); None: the fixed protocol of
    # warmup, repeat (timed samples) and min_sample_ms above
    protocol: dict | None = None
    sources: dict[str, int] = field(default_factory=dict)  # where each latency came from -> cells
    calibrated: dict[str, float] = field(default_factory=dict)  # framework -> a fresh worker's start (calibrate)
    probe_ms: float | None = None  # the canary now (speed_probe); None: the figures are used as they are
    # this host's instruction sets (env.json's cpu isa_flags); None: not known (taken as the stated host's)
    isa: tuple | list | None = None
    max_reruns: int = 0  # the plan's re-runs of a disturbed round per cell (0: none expected)
    # (series, model, batch) -> whether the build cache the rounds will use holds that cell's own build
    # (warm_build_cache; a replay: what its records say)
    warm_cache: object = field(default=None, repr=False)
    params: dict[str, int] = field(default_factory=dict)  # graph name -> parameters (weights), as ops

    def speed(self, learnt: bool, kernels: bool = False) -> float:
        """The scale on a figure not measured now: the canary now against the range of the earlier
        runs' rounds' canaries (``learnt``: a figure they taught; :func:`band_factor`, 1.0 inside it)
        or against the stated figures' canary (without earlier runs' canaries, the stated speed).
        ``kernels``: a stated framework's compute (its latencies), which the canary scales on the stated
        figures' kind of host only: the canary is one core's scalar and memory work, as a worker's start,
        a build and a search's bookkeeping are, while a framework's kernels use the host's vector units
        (``stated_host``)."""
        if learnt and self.history.canary_ms:
            return band_factor(self.probe_ms, self.history.canary_ms)
        if kernels and not self.stated_host():
            return 1.0
        return speed_factor(self.probe_ms, STATED["canary_ms"])

    def disturbed_share(self) -> float | None:
        """The share of earlier runs' rounds on this machine that were disturbed (and measured again),
        None with fewer than :data:`MIN_RERUN_EVIDENCE` of them."""
        h = self.history
        return h.rounds_disturbed / h.rounds_seen if h.rounds_seen >= MIN_RERUN_EVIDENCE else None

    def expected_reruns(self, left: int) -> float:
        """The re-runs ``left`` planned rounds of a cell are expected to add: a round is disturbed as
        often as earlier runs' rounds here were, and so is its re-run (``left`` x d / (1 - d)), at most the
        plan's ``max_reruns``; none without enough earlier rounds."""
        d = self.disturbed_share()
        if not left or not self.max_reruns or d is None:
            return 0.0
        d = min(d, 0.9)
        return min(float(self.max_reruns), left * d / (1 - d))

    def stated_host(self) -> bool:
        """Whether this host is of the kind the stated figures and their canary were measured on (the same
        instruction sets; an unknown host is taken to be)."""
        return self.isa is None or sorted(self.isa) == sorted(STATED["canary_isa"])

    def _learnt_rates(self, framework: str) -> list[float]:
        """Multiply-accumulates per second of each earlier record of ``framework`` whose model's size is known."""
        return [self.macs[m] * b / (ms / 1000) for (m, b, fw), ms in self.history.latency_ms.items()
                if fw == framework and m in self.macs and ms > 0]

    def rate(self, framework: str) -> float:
        """Multiply-accumulates per second of ``framework`` over its earlier records."""
        got = self._learnt_rates(framework)
        return median(got) if got else stated_rate(framework)[0] * 1e9

    def rate_source(self, framework: str) -> tuple[float, str]:
        """(GMAC/s, where it comes from) of ``framework`` (a series) as :meth:`rate` uses it: its earlier
        records on this machine, else its stated rate (:func:`stated_rate`: measured or assumed)."""
        n = len(self._learnt_rates(framework))
        if n:
            return self.rate(framework) / 1e9, f"measured: earlier runs on this machine ({n} cells)"
        return stated_rate(framework)

    def latency_s(self, model: str, batch: int, framework: str, count: bool = True) -> float:
        h = self.history.latency_ms
        fp32 = framework.split(PRECISION_SEP, 1)[0]
        learnt = True
        if (model, batch, framework) in h:
            src, value = "earlier runs", h[(model, batch, framework)] / 1000
        elif fp32 != framework and (model, batch, fp32) in h:  # another precision: its fp32 figure, an upper bound
            src, value = "earlier runs (its fp32 figure)", h[(model, batch, fp32)] / 1000
        else:
            others = sorted(((b, ms) for (m, b, fw), ms in h.items() if m == model and fw == framework),
                            key=lambda x: abs(x[0] - batch))
            if others:
                src, value = "earlier runs (another batch size)", others[0][1] / 1000 * batch / others[0][0]
            else:
                from_runs = bool(self._learnt_rates(framework))  # what rate() learns from, or its stated figure
                src = ("earlier runs (the framework's rate)" if from_runs else
                       f"stated rate ({stated_rate(framework)[1].split(':', 1)[0]})")
                learnt = from_runs
                value = self.macs.get(model, 0) * batch / self.rate(framework)
        if count:
            self.sources[src] = self.sources.get(src, 0) + 1
        return value * self.speed(learnt, kernels=True)

    def fixed_s(self, framework: str, model: str | None = None) -> float:
        """A round's fixed part (``framework``: a series, ``openvino@int8``): earlier runs' where they
        measured its worker kind at its precision (:func:`_fixed_key`; their rounds of ``model`` where
        there are any, a build grows with the model; else their fit to the networks' size,
        :meth:`size_fit`, where ``model``'s operators and parameters are known; else their median less
        their stated build part plus ``model``'s), else the calibrated start of a worker plus the stated
        build part, else the stated figure."""
        key = _fixed_key(framework)
        got = self.history.fixed_by_model.get((key, model))
        if got:
            return median(got) * self.speed(True)
        if self.history.fixed_s.get(key):  # other models': their build part moved to this model's size
            fit = self.size_fit(key) if model in self.ops and model in self.params else None
            if fit is not None:
                coef, least = fit
                size = coef[0] + coef[1] * self.ops[model] + coef[2] * self.params[model] / 1e6
                return max(min(WORKER_START_S, least), size) * self.speed(True)
            k = _stated("build_latencies", framework)
            lat = {m: self._fp32_latency_s(m, framework) for (kk, m) in self.history.fixed_by_model if kk == key}
            rest = [f - k * lat[m] for (kk, m), fs in self.history.fixed_by_model.items() if kk == key for f in fs]
            if rest and model is not None:
                return max(WORKER_START_S, median(rest) * self.speed(True) + k * self._fp32_latency_s(model, framework))
            return median(self.history.fixed_s[key]) * self.speed(True)
        plain = framework.split(PRECISION_SEP, 1)[0]  # a worker's start does not depend on the precision
        if plain in self.calibrated:  # measured now: only the stated part is scaled
            return self.calibrated[plain] + (STATED["round_s"] + _stated("build_s", framework)) * self.speed(False)
        return _stated("fixed_s", framework) * self.speed(False)

    def size_fit(self, key: str) -> tuple[tuple[float, float, float], float] | None:
        """A round's fixed part of worker kind ``key`` (:func:`_fixed_key`) against a network's size, learnt
        from earlier runs' batch-1 rounds of at least :data:`SIZE_FIT_MIN_NETWORKS` networks whose operators
        and parameters are known: ((seconds, seconds per operator, seconds per million parameters), the least
        of their fixed parts), each network's median one point, least squares of each network's error as a
        share of its fixed part (a big network off the line does not swamp the small ones), none of the three
        negative. A worker's start, then a build that grows with the graph a compiler traces (operators) and
        with the weights it loads and converts (parameters): on this machine's runs (2026-11-28/29, 7
        networks of 5 to 371 operators and 1.2 to 89 M parameters) each network's fixed part predicted from
        the others' within 11 % at the median over the worker kinds, where their median was 70 % off
        (alexnet's 61 M parameters cost ONNX Runtime 4.0 s a round, squeezenet's 1.2 M 0.45 s; torch-compile's
        and TensorFlow-XLA's builds grow with the operators). None with fewer networks."""
        points = {}
        for (k, m, batch), fs in self.history.fixed_by_batch.items():
            if k == key and batch == 1 and fs and m in self.ops and m in self.params:
                points.setdefault(m, []).extend(fs)
        if len(points) < SIZE_FIT_MIN_NETWORKS:
            return None
        import numpy as np
        from scipy.optimize import nnls

        names = sorted(points)
        a = np.array([[1.0, float(self.ops[m]), self.params[m] / 1e6] for m in names])
        y = np.array([median(points[m]) for m in names])
        coef, _ = nnls(a / y[:, None], np.ones_like(y))  # each network's error as a share of its fixed part
        return (float(coef[0]), float(coef[1]), float(coef[2])), float(y.min())

    def _fp32_latency_s(self, model: str | None, framework: str) -> float:
        """The model's fp32 latency at batch 1 on ``framework``'s engine: what a build's size is counted
        in (a build does not grow with the batch: resnet50's at 1 and 16 alike, runs/prec-b)."""
        if model is None:
            return 0.0
        return self.latency_s(model, 1, framework.split(PRECISION_SEP, 1)[0], count=False)

    def build_s(self, model: str, batch: int, framework: str) -> float:
        """What a round's build adds with the model's size (:data:`STATED` ``build_latencies``, in full
        from :data:`BUILD_FULL_OPS` operators on, none up to :data:`BUILD_BASE_OPS`, a share between),
        where no earlier run measured the fixed part of ``framework``'s kind at its precision (theirs
        holds it)."""
        if self.history.fixed_s.get(_fixed_key(framework)):
            return 0.0
        ops = self.ops.get(model, BUILD_FULL_OPS)
        share = min(1.0, max(0.0, (ops - BUILD_BASE_OPS) / (BUILD_FULL_OPS - BUILD_BASE_OPS)))
        return _stated("build_latencies", framework) * self._fp32_latency_s(model, framework) * share

    def first_build_s(self, framework: str, model: str | None = None, batch: int = 1) -> float:
        """What a cell's first round adds to its fixed part (``framework``: a series): its cold build,
        int8's calibration included. None where the build cache the rounds will use holds the cell's own
        build (this model, batch and precision: :func:`warm_build_cache`; its first round loads it as the
        later ones do, whatever earlier runs' cold first builds took), else earlier runs' (their first
        rounds' wall less their later ones', per worker kind and precision: of ``model`` where they ran it,
        else in its fp32 latencies), else none where they measured the kind's rounds but not a first one
        apart, else the stated figure (seconds, plus the model's fp32 latencies where ``model`` is given)."""
        key = _fixed_key(framework)
        warm = self.warm_cache or warm_build_cache
        if warm(framework, model, batch):  # the cache holds this cell's own build: its first round is not cold
            return 0.0
        learnt = self.history.first_build_s.get(key)
        if learnt:
            same = [x for m, x in learnt if m == model]
            if same or model is None:
                return median(same or [x for _, x in learnt]) * self.speed(True)
            times = [x / lat for m, x in learnt if (lat := self._fp32_latency_s(m, framework)) > 0]
            return median(times) * self._fp32_latency_s(model, framework) if times else 0.0
        if self.history.fixed_s.get(key):
            return 0.0
        return (_stated("first_build_s", framework) * self.speed(False)
                + _stated("first_build_latencies", framework) * self._fp32_latency_s(model, framework))

    def protocol_fields(self) -> dict:
        """The measurement protocol its rounds follow (``ios_core.measurement.protocol``): the plan's
        (``protocol``), else the fixed one of ``warmup``, ``repeat`` and ``min_sample_ms``."""
        if self.protocol is not None:
            return self.protocol
        return {"warmup": self.warmup, "repeat": self.repeat, "number": 1, "min_sample_ms": self.min_sample_ms or None}

    def round_parts(self, model: str, batch: int, framework: str, count: bool = False) -> dict[str, float]:
        """One round's seconds by kind of cost (:data:`ROUND_PARTS`): every call it makes
        (``round_calls``: the timed samples, the warmup, the output check and calibration) at the
        cell's latency, its worker's start with the round's own work and canaries, and its build."""
        lat = self.latency_s(model, batch, framework, count)
        calls = round_calls(lat * 1000, self.protocol_fields())
        return {"timed": calls.timed * lat, "warmup": calls.warmup * lat,
                "check_calibration": (calls.check + calls.calibration) * lat,
                "start": self.fixed_s(framework, model) + 2 * STATED["canary_s"],
                "build": self.build_s(model, batch, framework)}

    def round_s(self, model: str, batch: int, framework: str, count: bool = False) -> float:
        return sum(self.round_parts(model, batch, framework, count).values())

    def cell_s(self, cell, count: bool = False) -> float:
        """One round of ``cell`` (a sweep's ``Cell``)."""
        return self.round_s(cell.model, cell.batch_size, series(cell.framework, getattr(cell, "precision", None)),
                            count)

    def optimize_s(self, model: str, batch: int, provider: str, schedules: int = 1, precision: str = "fp32") -> float:
        """One search worker of (model, batch, provider, precision) searching ``schedules`` schedules:
        its start (calibrated as that provider's IOS cells), then its search: an earlier run's worker of
        that key (the sum of its schedules' ``optimize_seconds``), else the stated model: per operator by
        provider and precision and per DP state once (its schedules share one cost model: the stages timed
        for the first are not timed again), plus ``optimize_schedule_s`` per schedule."""
        framework = "ios-sequential" + ("" if provider == "torch" else f"[{provider}]")
        start = self.calibrated.get(framework, STATED["fixed_s"]["default"] * self.speed(False))
        got = self.history.optimize_s.get((model, batch, provider, precision or "fp32"))
        if got:
            return start + sum(got.values()) * self.speed(True)
        per_op = _stated("optimize_s_per_op", series(f"ios[{provider}]", precision))
        engine = series(provider, precision)  # the stages' kernels: the provider's own engine at the precision
        more = 0.0 if batch <= 1 or model not in self.macs else STATED["optimize_batch_latencies"] * max(
            0.0, self.latency_s(model, batch, engine, count=False) - self.latency_s(model, 1, engine, count=False))
        return start + more + (STATED["optimize_schedule_s"] * max(1, schedules) + per_op * self.ops.get(model, 0)
                               + STATED["optimize_s_per_state"] * self.states.get(model, 0)) * self.speed(False)

    def reference_s(self, model: str, batch: int, int8: bool = False) -> float:
        """The reference step of (``model``, ``batch``): the oracle's output (2 batches' worth of torch), and for
        a plan with int8 cells (``int8``) the check's further seeded batches, the oracle's int8 simulation's
        calibration on the int8 cells' calibration samples and its run on every checked batch
        (``ios_bench.running.task_setup``)."""
        lat = self.latency_s(model, batch, "torch", count=False)
        seconds = STATED["reference_fixed_s"] * self.speed(False) + 2 * lat
        if int8:
            checked = check_batches(batch, "int8")
            seconds += lat * ((checked - 1) + calibration_batches(batch) + checked)
        return seconds

    def speed_note(self) -> str:
        """What the estimate was scaled by, for its printed line (empty without a probe)."""
        if self.probe_ms is None:
            return ""
        note = (f"scaled by {self.speed(False):.2f} for this machine's speed now (canary {self.probe_ms:.2f} ms "
                f"against {STATED['canary_ms']:.2f} ms stated")
        if not self.stated_host():
            note += ("), the stated latencies excepted (measured on a host with other instruction sets, whose "
                     "frameworks' kernels the canary does not compare with this one's")
        if self.history.canary_ms:
            low, high = canary_band(self.history.canary_ms)
            note += (f", {self.speed(True):.2f} for earlier runs' figures (1.00 while it lies within their rounds' "
                     f"canaries' 10th-90th percentile, {low:.2f}-{high:.2f} ms)")
        low, high = SPEED_BOUNDS
        return note + f"; bounded to {low}-{high})"



def sweep_seconds(model: Model, cells: list, rounds: dict[str, int], todo_refs: set, todo_searches,
                  fresh: set | None = None) -> dict:
    """The estimated duration of measuring ``cells`` (``rounds[cell.key]`` rounds left each; a cell
    in ``fresh``, none of whose rounds ran yet (None: every cell), pays its first round's cold build,
    :meth:`Model.first_build_s`), plus the reference outputs and schedule searches still to make
    (``todo_searches``: {(model, batch, provider[, precision[, device]]): schedules to search}, or a set of
    those keys: one each; without a precision, fp32; the device tells workers apart, it does not cost).
    Returns {"seconds", "cells", "per_cell", "from"}."""
    per_cell = {}
    for c in cells:
        left = rounds[c.key]
        cold = left > 0 and (fresh is None or c.key in fresh)
        cold_s = model.first_build_s(series(c.framework, getattr(c, "precision", None)), c.model, c.batch_size) \
            if cold else 0.0
        per_cell[c.key] = (left + model.expected_reruns(left)) * model.cell_s(c, count=True) + cold_s
    total = sum(per_cell.values())
    int8 = int8_references(cells)
    total += sum(model.reference_s(m, b, (m, b) in int8) for m, b in todo_refs)
    searches = todo_searches if isinstance(todo_searches, dict) else dict.fromkeys(todo_searches, 1)
    total += sum(model.optimize_s(*key[:3], n, *key[3:4]) for key, n in searches.items())
    return {"seconds": total, "cells": len(cells), "per_cell": per_cell, "from": dict(model.sources)}



def human(seconds: float) -> str:
    """``3 h 05 min``, ``12 min``, ``40 s``."""
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"



def int8_references(cells) -> set[tuple[str, int]]:
    """The (model, batch) references whose step also makes the int8 check's batches and simulation: those with
    an int8 cell (``Model.reference_s``)."""
    return {(c.model, c.batch_size) for c in cells if getattr(c, "precision", None) == "int8"}
