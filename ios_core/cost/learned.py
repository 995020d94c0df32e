"""The learned cost model: a gradient-boosted predictor of stage latency, refined by measurement.

``ios-bench ops collect`` measures operators and their concurrent combinations into a dataset;
``ios-bench ops fit`` trains a LightGBM regressor of log(latency / roofline estimate) over the
features of :mod:`ios_core.cost.features` and saves it as one JSON file (the booster's text, the
feature names, the target, the attained throughputs of the roofline per provider and thread
budget, the machine and providers it was fitted for, its held-out error). This module loads
that file.

:class:`LearnedCostModel` answers ``stage_latency`` from the predictor. Predictions are memoized
by feature vector: repeated cells (randwire, nasnet) ask about hundreds of thousands of stages but
only thousands of distinct feature vectors. With ``refine=True`` (the default) the model also
takes part in the optimizer's refinement loop (:func:`ios_core.optimizer.optimize` calls
``cost_model.refine(stages, batch_size)`` after each search): the stages of the schedule the
search picked are measured with the measured cost model (the provider and thread budget the
schedule will run with; by default ``mode="stage"``, the whole stage alone, the protocol the
dataset was measured with, so that measured and predicted figures are the same quantity) and
their measured latencies replace the predictions; the search runs
again until it picks a schedule made only of measured stages. So the predictor ranks every
candidate, and only candidates it ranks best at some point are measured: the schedule's cost is
then a measured figure, and every alternative lost against it on predicted cost.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from ios_core.cost.cache import stage_signature
from ios_core.cost.features import ROOF_NAMES, Featurizer, feature_names, roof_terms
from ios_core.measurement.threads import resolve_threads

FORMAT = "ios-bench-learned-cost/2"
TARGET = "log(latency_ms) - log_roof_ms"
# What the dataset's latencies are measured at: ``ios-bench ops collect`` times every stage at fp32
# (its rows have no precision), so the model predicts fp32 costs and nothing else.
FITTED_PRECISION = "fp32"


def precision_reason(precision: str | None) -> str | None:
    """Why the learned cost model cannot rank a search at ``precision`` (one line), or None (fp32).

    Its predictor is fitted on fp32 operator timings: a bf16 or int8 search would rank stages by
    what they cost at fp32, and its refinement would measure them at another precision than the
    ones it predicts. A sweep skips such an IOS cell with this reason; the model refuses it."""
    if precision in (None, FITTED_PRECISION):
        return None
    return (f"the learned cost model is fitted on {FITTED_PRECISION} operator timings (ios-bench ops collect "
            f"measures at {FITTED_PRECISION}): it cannot rank a {precision} search; search it with the measured "
            f"cost model, which times stages at {precision}")


def peak_key(provider: str, threads: int) -> str:
    """The model file's key of the attained throughputs for ``provider`` at ``threads``."""
    return f"{provider}/{threads}"


def default_model_path() -> Path:
    """Where ``ios-bench ops fit`` writes and the learned cost model reads by default: beside the
    profile database (``IOS_BENCH_CACHE`` moves both)."""
    from ios_core.cost.cache import default_path

    return default_path().parent / "learned_cost.json"


def provider_features(provider: str, providers: list[str]) -> list[float]:
    return [float(provider == p) for p in providers]


def load_model_file(path: str | Path) -> dict:
    """Read a model file written by ``ios-bench ops fit``; ValueError if it is not one."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{p}: not a learned cost model file ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{p}: not a learned cost model file (format {FORMAT!r} expected)")
    if doc.get("features") != feature_names() + ROOF_NAMES or doc.get("target") != TARGET:
        raise ValueError(f"{p}: fitted with other features than this version computes; refit with "
                         f"`ios-bench ops fit`")
    return doc


class LearnedCostModel:
    """``LearnedCostModel(model, threads=None, provider="torch", refine=True, **measured_options)``.

    ``model`` is a path to a file written by ``ios-bench ops fit`` (or its loaded dict).
    ``measured_options`` go to the measured cost model used for refinement (warmup, repeat, cache...).
    ``precision``: the search's; only the one the model is fitted at (fp32, :func:`precision_reason`).
    """

    def __init__(self, model, threads: int | None = None, provider: str = "torch", refine: bool = True,
                 device: str = "cpu", refine_tolerance: float = 0.01, precision: str = FITTED_PRECISION,
                 **measured_options):
        why = precision_reason(precision)
        if why:  # never fp32 predictions under another precision's label
            raise ValueError(why)
        import lightgbm as lgb

        doc = model if isinstance(model, dict) else load_model_file(model)
        self.doc = doc
        self.path = None if isinstance(model, dict) else str(model)
        self.providers = list(doc["providers"])
        if provider not in self.providers:
            raise ValueError(f"the learned model was fitted for providers {self.providers}, not {provider!r}")
        self.provider = provider
        self.threads = resolve_threads(threads)
        peak = doc.get("peaks", {}).get(peak_key(provider, self.threads))
        if peak is None:
            raise ValueError(f"the learned model has no measurements with {provider} at {self.threads} threads "
                             f"(it has {', '.join(sorted(doc.get('peaks', {})))}): collect them and refit")
        self.peak = (float(peak[0]), float(peak[1]))
        self.booster = lgb.Booster(model_str=doc["booster"])
        self._prov = np.array(provider_features(provider, self.providers))
        self._featurizers: dict[int, Featurizer] = {}
        self._memo: dict[bytes, float] = {}
        self._by_stage: dict[tuple, float] = {}
        self._measured: dict[tuple, tuple[str, float]] = {}  # names key -> (stage signature, measured ms)
        self._ratios: dict[str, list[float]] = {}  # class of stage -> measured / predicted, per refined stage
        self._factor: dict[str, float] = {}
        self.device = device
        self.refine_enabled = bool(refine)
        # the optimizer stops refining when a search promises less than this fraction over the
        # best schedule measured so far (ios_core.optimizer.optimize)
        self.refine_tolerance = float(refine_tolerance)
        if not 0.0 <= self.refine_tolerance < 1.0:
            raise ValueError(f"refine_tolerance must be a fraction in [0, 1), not {refine_tolerance!r}")
        self._measured_options = measured_options
        self._measurer = None
        self.calls = 0
        self.predictions = 0
        self.predict_seconds = 0.0
        self.refined = 0

    # ---- the cost model protocol --------------------------------------------------------------
    def stage_latency(self, stage, batch_size: int) -> float:
        self.calls += 1
        hit = self._measured.get(self._key(stage, batch_size))
        if hit is not None and hit[0] == stage_signature(stage.kind, stage.groups)[0]:
            return hit[1]
        # Each search round asks again about the same stages (of a fresh copy of the graph):
        # predictions are kept by names, shapes and types, which is cheaper than featurizing.
        k = (stage.kind, batch_size, tuple(len(g) for g in stage.groups),
             tuple((n.name, n.TYPE, n.output_shape) for g in stage.groups for n in g))
        ms = self._by_stage.get(k)
        if ms is None:
            ms = self._by_stage[k] = self.predict(stage.kind, stage.groups, batch_size)
        return ms * self.factor(_klass(stage))

    def factor(self, klass: str) -> float:
        """The calibration of the predictions of one class of stage (a merge, one group, two,
        three or more) by the stages measured so far: the median of measured / predicted over
        the refined stages of that class (at least 3), else over all of them, else 1."""
        f = self._factor.get(klass)
        if f is None:
            own = self._ratios.get(klass, [])
            every = [r for rs in self._ratios.values() for r in rs]
            f = float(np.median(own)) if len(own) >= 3 else float(np.median(every)) if len(every) >= 3 else 1.0
            self._factor[klass] = f
        return f

    def predict(self, kind: str, groups, batch_size: int) -> float:
        """The predicted latency (ms) of a stage, memoized by feature vector."""
        fz = self._featurizers.get(batch_size)
        if fz is None:
            fz = self._featurizers[batch_size] = Featurizer(batch_size)
        vec, work = fz.stage_inputs(kind, groups, self.threads)
        roof = roof_terms(work, self.threads, self.peak)
        x = np.concatenate([vec, roof, self._prov])
        k = x.tobytes()
        hit = self._memo.get(k)
        if hit is None:
            t0 = time.perf_counter()
            hit = float(math.exp(self.booster.predict(x[None, :], num_threads=1)[0] + roof[0]))
            self.predict_seconds += time.perf_counter() - t0
            self.predictions += 1
            self._memo[k] = hit
        return hit

    # ---- refinement: measure what the search picked --------------------------------------------
    def refine(self, stages, batch_size: int) -> int:
        """Measure the stages among ``stages`` not measured yet; returns how many were measured
        (0: the schedule's cost is entirely measured, the optimizer can stop)."""
        if not self.refine_enabled:
            return 0
        todo = []
        for s in stages:
            sig = stage_signature(s.kind, s.groups)[0]
            hit = self._measured.get(self._key(s, batch_size))
            if hit is None or hit[0] != sig:
                todo.append((s, sig))
        if not todo:
            return 0
        m = self.measurer()
        for s, sig in todo:
            ms = float(m.stage_latency(s, batch_size))
            self._measured[self._key(s, batch_size)] = (sig, ms)
            self._ratios.setdefault(_klass(s), []).append(ms / self.predict(s.kind, s.groups, batch_size))
        self._factor.clear()
        self.refined += len(todo)
        return len(todo)

    def measurer(self):
        if self._measurer is None:
            from ios_core.cost.measured import make_measured_cost_model

            opts = dict(self._measured_options)
            opts.setdefault("mode", "stage")  # the quantity the predictor learned: the stage alone
            # only the best-ranked stages are measured, but whole schedules of them (hundreds of
            # stages for nasnet): a shorter protocol than the collector's
            opts.setdefault("warmup", 1)
            opts.setdefault("repeat", 3)
            if self.provider != "torch":
                opts["provider"] = self.provider
            self._measurer = make_measured_cost_model(threads=self.threads, device=self.device, **opts)
        return self._measurer

    def validate_schedule(self, schedule, sequential, batch_size: int, repeat: int = 5) -> dict | None:
        """The measured cost model's check of the final schedule against sequential (see
        ``MeasuredCostModel.validate_schedule``): a learned schedule is kept only if it measured faster."""
        return self.measurer().validate_schedule(schedule, sequential, batch_size, repeat=repeat)

    @staticmethod
    def _key(stage, batch_size: int) -> tuple:
        """Names, not node objects: the optimizer searches a fresh copy of the graph each round.
        A hit is confirmed by the stage's signature (names alone could come from another graph)."""
        return (stage.kind, batch_size, tuple(tuple(n.name for n in g) for g in stage.groups))

    def stats(self) -> dict:
        out = {"model": self.path, "provider": self.provider, "threads": self.threads, "calls": self.calls,
               "predictions": self.predictions, "predict_seconds": round(self.predict_seconds, 3),
               "measured_stages": self.refined,
               "calibration": {k: round(self.factor(k), 3) for k in sorted(self._ratios)}}
        if self._measurer is not None:
            out["measured"] = self._measurer.stats()
        return out

    def __repr__(self) -> str:
        return f"LearnedCostModel({self.stats()})"


def _klass(stage) -> str:
    return "merge" if stage.kind == "merge" else str(min(len(stage.groups), 3))


def make_learned_cost_model(model=None, **options) -> LearnedCostModel:
    """Factory for ``make_cost_model("learned", model=PATH, ...)``."""
    why = precision_reason(options.get("precision"))
    if why:  # said before looking for a model file: no file would change it
        raise ValueError(why)
    if model is None:
        model = default_model_path()
        if not model.is_file():
            raise ValueError(f"no learned model at {model}: run `ios-bench ops collect` then `ios-bench ops fit`, "
                             f"or pass model=PATH")
    return LearnedCostModel(model, **options)


__all__ = ["FITTED_PRECISION", "FORMAT", "TARGET", "LearnedCostModel", "default_model_path", "load_model_file",
           "make_learned_cost_model", "peak_key", "precision_reason", "provider_features"]
