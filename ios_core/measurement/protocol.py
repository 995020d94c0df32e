"""How many calls one round of a cell makes, by kind, under a plan's measurement protocol: the one
count the duration estimate (``ios_bench.planning.estimate``) and the worker's record can share.

Two protocols (the plan's fields; a plan written before ``sample_s`` existed is the fixed one):

* **fixed** (``sample_s`` None or absent): 1 output-check call (untimed), ``warmup`` warmup calls,
  the calibration of ``min_sample_ms`` (the calls per sample double from ``number`` until a sample
  lasts ``min_sample_ms``: ``number + 2*number + ... + N`` calls, at least one sample of ``number``;
  none without ``min_sample_ms``), then ``repeat`` samples of ``N`` calls.
* **time-bounded** (``sample_s`` seconds): 1 check call; ``w = min(warmup, max(1, ceil(warmup_s / L)))``
  warmup calls (0 when ``warmup`` is 0; ``warmup_s`` None: ``warmup`` calls); no calibration where one
  call of ``number`` lasts ``min_sample_ms`` (the last warmup call serves), else the same doubling;
  then ``n = clamp(ceil(sample_s / (N * L)), min_repeat, repeat)`` samples of ``N`` calls.

``L`` is the latency of one call. Only counts: what a call costs is the caller's figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FIXED, TIME_BOUNDED = "fixed", "time-bounded"
# the protocol's fields and their values where a plan does not have them: a plan written before the
# time-bounded protocol and capping (no ``sample_s``, no ``cap_factor``) is the fixed protocol and caps
# nothing; a new plan has its own (the Plan's defaults: sample_s 1.0, cap_factor 3.0)
DEFAULTS = {"warmup": 3, "warmup_s": 0.5, "repeat": 10, "min_repeat": 3, "sample_s": None, "number": 1,
            "min_sample_ms": 10.0, "cap_factor": None}
MAX_NUMBER = 1 << 20  # the calibration's own bound (ios_core.measurement.measure)


@dataclass(frozen=True)
class RoundCalls:
    """The calls of one round by kind; ``number``: calls per timed sample (after calibration)."""

    check: int
    warmup: int
    calibration: int
    samples: int
    number: int
    mode: str = FIXED

    @property
    def timed(self) -> int:
        return self.samples * self.number

    @property
    def total(self) -> int:
        return self.check + self.warmup + self.calibration + self.timed


def recorded_total(calls) -> int | None:
    """The calls a round's record says it made: a count, or a :class:`RoundCalls` as a dict
    (``dataclasses.asdict``); None where it says neither."""
    if isinstance(calls, int) and not isinstance(calls, bool):
        return calls
    if isinstance(calls, dict):
        try:
            return RoundCalls(**{k: calls[k] for k in ("check", "warmup", "calibration", "samples", "number")}).total
        except (KeyError, TypeError):
            return None
    return None


def protocol_fields(plan) -> dict:
    """The protocol's fields of ``plan`` (a ``Plan``, a ``plan.json`` dict or any object with such
    attributes), each missing one at :data:`DEFAULTS`: ``sample_s`` and ``cap_factor`` missing stay None
    (an older plan: the fixed protocol, no capping)."""
    get = plan.get if isinstance(plan, dict) else (lambda name, default: getattr(plan, name, default))
    return {name: get(name, default) for name, default in DEFAULTS.items()}


def calibration_calls(number: int, n: int) -> int:
    """The calls a calibration makes that doubles the calls per sample from ``number`` to ``n``:
    ``number + 2*number + ... + n`` (one sample of ``number`` at least)."""
    spent, k = number, number
    while k < n:
        k *= 2
        spent += k
    return spent


def calls_per_sample(latency_ms: float, number: int, min_sample_ms: float | None) -> tuple[int, int]:
    """(N, the calibration's calls, :func:`calibration_calls`): ``N`` doubles from ``number`` until ``N``
    calls last ``min_sample_ms``."""
    n = number
    while min_sample_ms and n * latency_ms < min_sample_ms and n < MAX_NUMBER:
        n *= 2
    return n, calibration_calls(number, n)


def round_calls(latency_ms: float, plan) -> RoundCalls:
    """The calls one round of a cell whose call takes ``latency_ms`` makes under ``plan``'s protocol
    (:func:`protocol_fields`; the module's docstring states both protocols)."""
    p = protocol_fields(plan)
    warmup, repeat, number = int(p["warmup"]), int(p["repeat"]), int(p["number"] or 1)
    min_sample = p["min_sample_ms"] or 0.0
    lat = max(0.0, float(latency_ms))
    if p["sample_s"] is None:
        n, calibration = calls_per_sample(lat, number, min_sample) if min_sample else (number, 0)
        return RoundCalls(1, warmup, calibration, repeat, n, FIXED)
    if warmup == 0:
        w = 0
    elif p["warmup_s"] is None or lat <= 0:
        w = warmup
    else:
        w = min(warmup, max(1, math.ceil(p["warmup_s"] * 1000 / lat)))
    if not min_sample or lat * number >= min_sample:
        n, calibration = number, 0
    else:
        n, calibration = calls_per_sample(lat, number, min_sample)
    low = min(int(p["min_repeat"]), repeat)
    samples = repeat if lat <= 0 else min(repeat, max(low, math.ceil(p["sample_s"] * 1000 / (n * lat))))
    return RoundCalls(1, w, calibration, samples, n, TIME_BOUNDED)
