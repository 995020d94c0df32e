"""How many calls one round of a cell makes, by kind, under a plan's measurement protocol: the one
count the duration estimate (``ios_bench.planning.estimate``) and the worker's record can share.

Two protocols (the plan's fields; a plan written before ``sample_s`` existed is the fixed one):

* **fixed** (``sample_s`` None or absent): 1 output-check call (untimed), ``warmup`` warmup calls,
  the calibration of ``min_sample_ms`` (the calls per sample double from ``number`` until a sample
  lasts ``min_sample_ms``: ``number + 2*number + ... + N`` calls, at least one sample of ``number``;
  none without ``min_sample_ms``), then ``repeat`` samples of ``N`` calls.
* **time-bounded** (``sample_s`` seconds): 1 check call; ``w = min(warmup, max(1, ceil(warmup_s / L)))``
  warmup calls (0 when ``warmup`` is 0; ``warmup_s`` None: ``warmup`` calls), none where the check call
  alone lasted ``warmup_s`` (on the CPU: it warmed the program; ``measure`` checks it by the first
  timed call, which must last half the check's, else the calls made are its warmup and the round goes on as
  an ordinary one); no calibration where one call of
  ``number`` lasts ``min_sample_ms`` (the last warmup call, or that check call, serves; with no timed
  call before, one calibration sample), else the same doubling; then ``n = clamp(ceil(sample_s / (N *
  L)), min_repeat, repeat)`` samples of ``N`` calls.

:func:`warmup_done` and :func:`sample_count` are the rule itself: ``ios_core.measurement.measure`` applies
them to the calls it times, :func:`round_calls` to a latency the estimate assumes.

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


def recorded_total(round_: dict) -> int | None:
    """Every call a round's record says it made: its ``protocol`` (the worker's: ``warmup_calls``,
    ``calibration_calls``, ``samples``, ``number``) with the output check's one call, or a
    :class:`RoundCalls` as a dict (``dataclasses.asdict``) under ``calls``; None where it says neither.
    A count under ``calls`` is the timed calls only (``samples x number``: what its percentiles are
    over), not the round's total."""
    p = round_.get("protocol") if isinstance(round_, dict) else None
    if isinstance(p, dict):
        try:
            return RoundCalls(1, *(int(p[k]) for k in ("warmup_calls", "calibration_calls", "samples", "number"))).total
        except (KeyError, TypeError, ValueError):
            pass
    calls = round_.get("calls") if isinstance(round_, dict) else None
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


def warmup_done(calls: int, spent_ms: float, warmup: int, warmup_s: float | None, checked_ms: float = 0.0) -> bool:
    """Whether warmup is over after ``calls`` warmup calls that took ``spent_ms`` in all: the fixed
    protocol (``warmup_s`` None) makes exactly ``warmup`` calls; the time-bounded one at least one
    (where ``warmup`` >= 1), at most ``warmup``, and stops once ``warmup_s`` seconds are spent. The
    output check's call made just before (``checked_ms``, 0: none counted) counts as warmup where it
    alone lasted ``warmup_s``: then no warmup call is made (a call of seconds warms itself)."""
    if calls >= warmup:
        return True
    if warmup_s is None:
        return False
    if checked_ms >= warmup_s * 1000.0:
        return True
    return calls >= 1 and spent_ms >= warmup_s * 1000.0


def sample_count(sample_ms: float | None, repeat: int, sample_s: float | None = None,
                 min_repeat: int = 1) -> tuple[int, str]:
    """How many timed samples a round takes, and why: ``repeat`` in the fixed protocol (``sample_s``
    None); else enough samples of ``sample_ms`` (the expected time of one, from the warmup or the
    calibration) to spend ``sample_s`` seconds, at least ``min_repeat``, at most ``repeat``."""
    if sample_s is None:
        return repeat, "fixed count"
    lo = min(min_repeat, repeat)
    if not sample_ms or sample_ms <= 0:
        return repeat, "no time for a sample known: the most samples"
    want = math.ceil(sample_s * 1000.0 / sample_ms)
    if want <= lo:
        return lo, (f"the fewest samples ({lo}): one sample takes {sample_ms:.4g} ms, "
                    f"{lo} exceed the {sample_s:g} s budget")
    if want >= repeat:
        return repeat, f"the most samples ({repeat}): {sample_s:g} s would hold {want} of {sample_ms:.4g} ms"
    return want, f"{sample_s:g} s of samples of {sample_ms:.4g} ms"


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


def round_calls(latency_ms: float, plan, check_warms: bool = True) -> RoundCalls:
    """The calls one round of a cell whose call takes ``latency_ms`` makes under ``plan``'s protocol
    (:func:`protocol_fields`; the module's docstring states both protocols). ``check_warms``: the output
    check's call counts as warmup (:func:`warmup_done`), as a CPU round's does."""
    p = protocol_fields(plan)
    warmup, repeat, number = int(p["warmup"]), int(p["repeat"]), int(p["number"] or 1)
    min_sample = p["min_sample_ms"] or 0.0
    lat = max(0.0, float(latency_ms))
    if p["sample_s"] is None:
        n, calibration = calls_per_sample(lat, number, min_sample) if min_sample else (number, 0)
        return RoundCalls(1, warmup, calibration, repeat, n, FIXED)
    w = 0  # the warmup rule measure() applies, each call lasting ``lat``
    checked = lat if check_warms else 0.0
    while not warmup_done(w, w * lat, warmup, p["warmup_s"] if lat > 0 else None, checked):
        w += 1
    served = w or (warmup and checked and checked >= (p["warmup_s"] or 0) * 1000.0)  # a timed call came first
    if min_sample and not (served and lat * number >= min_sample):  # the last warmup call serves where it can
        n, calibration = calls_per_sample(lat, number, min_sample)
    else:
        n, calibration = number, 0
    samples, _ = sample_count(n * lat, repeat, p["sample_s"], int(p["min_repeat"]))
    return RoundCalls(1, w, calibration, samples, n, TIME_BOUNDED)
