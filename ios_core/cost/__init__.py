"""Cost models: what the optimizer asks how long a stage takes.

A cost model is any object with ``stage_latency(stage, batch_size) -> float`` (milliseconds),
where ``stage`` is an :class:`ios_core.optimizer.Stage`. The optimizer memoizes every answer,
so a cost model is asked about each distinct stage once per search.

- :class:`SyntheticCostModel` (``"synthetic"``): analytical, deterministic, no device needed.
- ``"measured"``: times stages on a device through the runtime
  (``ios_core.cost.measured.make_measured_cost_model``).
- ``"learned"``: a LightGBM stage-latency predictor fitted by ``ios-bench ops fit``, whose picks
  are refined by measurement (``ios_core.cost.learned.make_learned_cost_model``; needs lightgbm).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ios_core.cost.synthetic import SyntheticCostModel

__all__ = ["CostModel", "SyntheticCostModel", "make_cost_model", "COST_KINDS"]

COST_KINDS = ("synthetic", "measured", "learned")


@runtime_checkable
class CostModel(Protocol):
    def stage_latency(self, stage, batch_size: int) -> float:  # pragma: no cover - protocol
        """Latency of ``stage`` at ``batch_size`` in milliseconds."""
        ...


def make_cost_model(kind: str = "synthetic", **options) -> CostModel:
    """Build a cost model by name: ``"synthetic"`` (options go to :class:`SyntheticCostModel`)
    or ``"measured"`` (options go to ``ios_core.cost.measured.make_measured_cost_model``)."""
    if kind == "synthetic":
        return SyntheticCostModel(**options)
    if kind == "measured":
        try:
            from ios_core.cost import measured
        except ImportError as e:
            raise RuntimeError(f"the measured cost model is not available: ios_core.cost.measured could not be "
                               f"imported ({e}); it comes with the IOS runtime") from None
        factory = getattr(measured, "make_measured_cost_model", None)
        if factory is None:
            raise RuntimeError("ios_core.cost.measured has no make_measured_cost_model(**options)")
        return factory(**options)
    if kind == "learned":
        try:
            from ios_core.cost.learned import make_learned_cost_model
        except ImportError as e:
            raise RuntimeError(f"the learned cost model needs lightgbm ({e}); install ios-bench[learned]") from None
        return make_learned_cost_model(**options)
    raise ValueError(f"unknown cost model {kind!r}; choose one of {', '.join(COST_KINDS)}")
