"""The one measurement function every runtime, schedule and adapter is timed with.

Protocol (the reference IOS implementation's and TVM's): ``warmup`` untimed calls, then
``repeat`` samples, each ``number`` back-to-back calls timed together; with ``min_sample_ms``
the number of calls per sample is raised (doubling) until one sample lasts at least that long.
Every sample is kept, as per-call milliseconds (``samples_ms``: the sample's time / ``number``).

The clock is also read after every call, so the time of each single call is kept too
(``call_ms``): percentiles, median, std, min and max are over those per-call times (computed
with numpy), so a p90 is the tail of single calls, not a mean over many calls. The value the
last timed call returned is kept (``last``) so that callers can check it, not only a result
computed before timing.

On a GPU the samples are taken on the device's own clock: pass ``timer`` (e.g.
``ios_core.measurement.gpu.CudaEventTimer(stream)``, or an adapter's ``Compiled.timer()``), whose
``start()`` records an event before a sample's calls and ``stop()`` records one after them,
waits for it and returns the milliseconds between the two (per-call times are then not
available: statistics are over samples). Without a timer the host clock is read after
``sync()``. ``Measurement.meta["clock"]`` says which clock was used.

**Time-bounded rounds** (``sample_s``; docs/harness.md "The round protocol"): instead of a fixed
count, warmup runs until ``warmup_s`` seconds of calls are spent (at least one call, at most
``warmup``), the last warmup call serves as the calibration where it already lasts
``min_sample_ms``, and the number of samples is chosen *before* the first timed sample, from the
time one sample is expected to take: enough to spend ``sample_s`` seconds, between ``min_repeat``
and ``repeat``. The count never depends on the timed samples' own values (a rule that stopped
when a budget ran out would stop early on slow samples and bias the figure). What was done and
why is ``Measurement.meta["protocol"]``; ``ios_core.measurement.protocol`` holds the rule
(``warmup_done``, ``sample_count``), which the sweep's estimate applies too (``round_calls``).
"""

from __future__ import annotations

import math
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ios_core.measurement import stats
from ios_core.measurement.protocol import FIXED, TIME_BOUNDED, sample_count, warmup_done


@dataclass
class Measurement:
    samples_ms: list[float]
    number: int
    warmup: int
    stage_ms: list[list[float]] | None = None  # per sample, the time of each stage (ms)
    meta: dict = field(default_factory=dict)
    call_ms: list[float] | None = None  # every timed call's own time (ms)
    last: object = field(default=None, repr=False, compare=False)  # what the last timed call returned

    @property
    def repeat(self) -> int:
        return len(self.samples_ms)

    def _times(self) -> np.ndarray:
        return np.asarray(self.call_ms if self.call_ms else self.samples_ms, dtype=np.float64)

    @property
    def mean(self) -> float:
        return float(np.mean(self._times()))

    @property
    def median(self) -> float:
        return stats.median(self._times())

    @property
    def std(self) -> float:
        return stats.std(self._times())

    @property
    def min(self) -> float:
        return float(np.min(self._times()))

    @property
    def max(self) -> float:
        return float(np.max(self._times()))

    def percentile(self, q: float) -> float:
        """Linear-interpolated percentile of the per-call times, q in [0, 100]."""
        return float(np.percentile(self._times(), q))

    @property
    def stage_mean_ms(self) -> list[float] | None:
        if not self.stage_ms:
            return None
        return [float(np.mean(col)) for col in zip(*self.stage_ms)]

    def summary(self) -> dict:
        """The figures of this measurement (``ios_core.measurement.stats.summary`` over the per-call times)
        and its protocol."""
        return {**stats.summary(self._times()),
                "repeat": self.repeat, "number": self.number, "warmup": self.warmup,
                "calls": len(self.call_ms) if self.call_ms else self.repeat * self.number,
                "percentiles_over": "calls" if self.call_ms else "samples"}

    def to_dict(self) -> dict:
        return {"samples_ms": list(self.samples_ms), "number": self.number, "warmup": self.warmup,
                "stage_ms": self.stage_ms, "meta": self.meta,
                "call_ms": list(self.call_ms) if self.call_ms is not None else None}

    @classmethod
    def from_dict(cls, d: dict) -> Measurement:
        return cls(**{k: d[k] for k in ("samples_ms", "number", "warmup")},
                   stage_ms=d.get("stage_ms"), meta=d.get("meta") or {}, call_ms=d.get("call_ms"))

    def __str__(self) -> str:
        return (f"{self.median:.3f} ms median (mean {self.mean:.3f} ± {self.std:.3f}, "
                f"min {self.min:.3f}, {self.repeat}x{self.number})")


class HostTimer:
    """The host clock around a sample, read after ``sync()`` (the default timer)."""

    clock = "host"

    def __init__(self, sync: Callable[[], None] | None = None, now: Callable[[], int] | None = None):
        self.sync = sync or (lambda: None)
        self.now = now or time.perf_counter_ns
        self._t0 = 0

    def start(self) -> None:
        self._t0 = self.now()

    def stop(self) -> float:
        self.sync()
        return (self.now() - self._t0) / 1e6


def measure(fn: Callable[[], object], *, warmup: int = 3, number: int = 1, repeat: int = 10,
            min_sample_ms: float | None = None, stage_times: Callable[[], list[float]] | None = None,
            sync: Callable[[], None] | None = None, timer=None, clock: str = "host",
            now: Callable[[], int] | None = None, warmup_s: float | None = None,
            sample_s: float | None = None, min_repeat: int = 1, checked_ms: float | None = None) -> Measurement:
    """Time ``fn()``.

    ``sync`` (e.g. a CUDA stream synchronize) is called after every call, before the clock is
    read, so asynchronous devices are timed to completion and each call's time is its latency.
    ``stage_times``, when given, is read after each sample and must return that sample's
    per-stage times (ms, per call); the callee is expected to accumulate them over the sample's
    calls and reset itself when read. ``timer`` (``start()``, ``stop() -> ms``) replaces the host
    clock, e.g. with CUDA events; samples are then timed as a whole. ``clock`` labels the host
    clock's protocol in ``meta["clock"]`` (e.g. that ``sync`` synchronizes the whole GPU); ``now``
    replaces the host clock itself (nanoseconds; the tests' fake GPU passes its simulated one).
    ``sample_s`` (with ``warmup_s`` and ``min_repeat``) makes the round time-bounded (module doc):
    ``warmup`` and ``repeat`` are then the most warmup calls and samples. ``checked_ms``: the time of
    the untimed call of ``fn`` the caller made just before (the output check); time-bounded, where it
    alone lasted ``warmup_s`` it is the warmup (no warmup call) and the expected time of a call, as long
    as the first timed call lasts at least half of it; else the check call was cold (a JIT's first call,
    lazy imports), the calls taken are the warmup and the round goes on as usual (``protocol["cold_check"]``).
    """
    if warmup < 0 or number < 1 or repeat < 1 or min_repeat < 1:
        raise ValueError("need warmup >= 0, number >= 1, repeat >= 1, min_repeat >= 1")
    for name, v in (("warmup_s", warmup_s), ("sample_s", sample_s)):
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a finite number of seconds >= 0, not {v!r}")
    label, clock = clock, now or time.perf_counter_ns
    # calibrate (and, time-bounded, warm up) on the clock the samples are taken with: the device
    # timer when one is given (the host clock would see only the asynchronous launches), else the
    # host clock after sync()
    calibration = timer if timer is not None else HostTimer(sync, now)
    timed_warmup = warmup_s is not None

    def timed(count: int, per: int):
        """``count`` samples of ``per`` calls: (samples ms, each call's ns or None, stages, last output)."""
        if stage_times is not None:
            stage_times()  # discard what came before (warmup, calibration)
        samples: list[float] = []
        calls = array("q")  # nanoseconds per call
        stages: list[list[float]] | None = [] if stage_times is not None else None
        last = None
        if timer is not None:  # a device clock: whole samples only
            for _ in range(count):
                timer.start()
                for _ in range(per):
                    last = fn()
                samples.append(timer.stop() / per)
                if stages is not None:
                    stages.append([t / per for t in stage_times()])
            if sync is not None:
                sync()
            return samples, None, stages, last
        for _ in range(count):
            start = prev = clock()
            if sync is None:
                for _ in range(per):
                    last = fn()
                    t = clock()
                    calls.append(t - prev)
                    prev = t
            else:
                for _ in range(per):
                    last = fn()
                    sync()
                    t = clock()
                    calls.append(t - prev)
                    prev = t
            samples.append((prev - start) / 1e6 / per)
            if stages is not None:
                stages.append([t / per for t in stage_times()])
        return samples, calls, stages, last

    def result(got, warm_calls: int, protocol: dict) -> Measurement:
        samples, calls, stages, last = got
        meta = {"clock": getattr(timer, "clock", type(timer).__name__) if timer is not None else label,
                "protocol": protocol}
        call_ms = None if calls is None else (np.frombuffer(calls, dtype=np.int64) / 1e6).tolist()
        return Measurement(samples_ms=samples, number=protocol["number"], warmup=warm_calls, stage_ms=stages,
                           call_ms=call_ms, last=last, meta=meta)

    def bounded(protocol: dict, sample_ms: float | None) -> dict:
        if timed_warmup:
            protocol["warmup_ms"] = round(warm_ms, 6)
        if sample_s is not None:
            protocol.update(sample_s=sample_s, warmup_s=warmup_s, min_repeat=min_repeat,
                            expected_sample_ms=None if sample_ms is None else round(sample_ms, 6))
        return protocol

    warm_calls, warm_ms, last_ms = 0, 0.0, None
    checked = float(checked_ms) if timed_warmup and checked_ms is not None and checked_ms > 0 else 0.0
    cold_check = None
    if (warmup and checked and warmup_done(0, 0.0, warmup, warmup_s, checked)
            and not (min_sample_ms and checked * number < min_sample_ms)):
        # the check call was the warmup, its time the expected call's: the samples are counted from it.
        # The first timed call confirms it: a call under half the check's says the check was cold (a
        # JIT's first call, lazy imports), and the calls just made become the warmup of the usual round
        count, why = sample_count(checked * number, repeat, sample_s, min_repeat)
        got = timed(count, number)
        first = got[1][0] / 1e6 if got[1] is not None and len(got[1]) else got[0][0]
        if first * 2.0 >= checked:
            protocol = {"mode": TIME_BOUNDED, "warmup_calls": 0, "calibration_calls": 0, "samples": count,
                        "number": number, "why": why, "warmup_by_check_ms": round(checked, 6)}
            return result(got, 0, bounded(protocol, checked * number))
        cold_check = {"check_ms": round(checked, 6), "first_call_ms": round(first, 6), "calls": count * number}
        warm_calls, warm_ms = count * number, float(sum(got[0])) * number
        last_ms = (got[1][-1] / 1e6) if got[1] is not None and len(got[1]) else got[0][-1]
    while not warmup_done(warm_calls, warm_ms, warmup, warmup_s):
        if timed_warmup:
            calibration.start()
            fn()
            last_ms = calibration.stop()
            warm_ms += last_ms
        else:
            fn()
        warm_calls += 1
    if sync is not None:
        sync()
    calibration_calls, sample_ms = 0, (last_ms * number if last_ms is not None else None)
    if min_sample_ms and not (sample_ms is not None and sample_ms >= min_sample_ms):
        # the last warmup call, where there was a timed one, already says whether one call is long
        # enough; else double the calls per sample until a sample lasts min_sample_ms
        while True:
            calibration.start()
            for _ in range(number):
                fn()
            sample_ms = calibration.stop()
            calibration_calls += number
            if sample_ms >= min_sample_ms or number >= 1 << 20:
                break
            number *= 2
    repeat, why = sample_count(sample_ms, repeat, sample_s, min_repeat)
    protocol = {"mode": FIXED if sample_s is None else TIME_BOUNDED, "warmup_calls": warm_calls,
                "calibration_calls": calibration_calls, "samples": repeat, "number": number, "why": why}
    if cold_check:  # the check call was not warm: what was taken for samples was warmup
        protocol["cold_check"] = cold_check
    return result(timed(repeat, number), warm_calls, bounded(protocol, sample_ms))
