"""The paper's experiments, one module each (``ios-bench experiment NAME``).

Every module of this package whose name does not start with ``_`` and is not one of
:data:`NOT_EXPERIMENTS` defines a module-level ``EXPERIMENT`` (an
:class:`ios_bench.experiments.base.Experiment`); its ``name`` is what the command line takes
(``spec_batch.py`` -> ``spec-batch``). Adding an experiment touches only its own file.
"""

from __future__ import annotations

import importlib
import pkgutil

from ios_bench.errors import InputError
from ios_bench.experiments.base import Experiment

NOT_EXPERIMENTS = ("base", "runner", "published")  # the machinery, not recipes


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__)
                  if not m.name.startswith("_") and m.name not in NOT_EXPERIMENTS)


def _load(module: str) -> Experiment:
    mod = importlib.import_module(f"{__name__}.{module}")
    exp = getattr(mod, "EXPERIMENT", None)
    if exp is None or not isinstance(exp, Experiment):
        raise TypeError(f"{mod.__name__} defines no EXPERIMENT (an ios_bench.experiments.base.Experiment)")
    return exp


def all_experiments() -> dict[str, Experiment]:
    """{name: experiment}, in the paper's order where known, then by name."""
    found = {}
    for module in _modules():
        exp = _load(module)
        if exp.name in found:
            raise TypeError(f"two experiments are named {exp.name!r}")
        found[exp.name] = exp
    order = {n: i for i, n in enumerate(PAPER_ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


# the order of the paper's README (seed 001, section 3)
PAPER_ORDER = ("schedules", "frameworks", "utilization", "spec-batch", "spec-device", "prune", "batchsize",
               "intra-inter")


def names() -> list[str]:
    return list(all_experiments())


def get(name: str) -> Experiment:
    """The experiment called ``name`` (``InputError`` with the choices otherwise)."""
    found = all_experiments()
    if name not in found:
        raise InputError(f"unknown experiment {name!r}; choose from: {', '.join(found)} (or: list, all)")
    return found[name]


__all__ = ["Experiment", "all_experiments", "get", "names"]
