"""The one measurement function every runtime, schedule and adapter is timed with.

Protocol (the reference IOS implementation's and TVM's): ``warmup`` untimed calls, then
``repeat`` samples, each ``number`` back-to-back calls timed together; with ``min_sample_ms``
the number of calls per sample is raised (doubling) until one sample lasts at least that long.
Every sample is kept, as per-call milliseconds.

On a GPU the samples are taken on the device's own clock: pass ``timer`` (e.g.
``ios_core.gpu.CudaEventTimer(stream)``, or an adapter's ``Compiled.timer()``), whose
``start()`` records an event before a sample's calls and ``stop()`` records one after them,
waits for it and returns the milliseconds between the two. Without a timer the host clock
is read after ``sync()``. ``Measurement.meta["clock"]`` says which clock was used.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field


@dataclass
class Measurement:
    samples_ms: list[float]
    number: int
    warmup: int
    stage_ms: list[list[float]] | None = None  # per sample, the time of each stage (ms)
    meta: dict = field(default_factory=dict)

    @property
    def repeat(self) -> int:
        return len(self.samples_ms)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples_ms)

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def std(self) -> float:
        return statistics.stdev(self.samples_ms) if len(self.samples_ms) > 1 else 0.0

    @property
    def min(self) -> float:
        return min(self.samples_ms)

    @property
    def max(self) -> float:
        return max(self.samples_ms)

    def percentile(self, q: float) -> float:
        """Linear-interpolated percentile, q in [0, 100]."""
        xs = sorted(self.samples_ms)
        pos = (len(xs) - 1) * q / 100.0
        lo, hi = math.floor(pos), math.ceil(pos)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    @property
    def stage_mean_ms(self) -> list[float] | None:
        if not self.stage_ms:
            return None
        return [statistics.fmean(col) for col in zip(*self.stage_ms)]

    def summary(self) -> dict:
        return {"mean_ms": self.mean, "median_ms": self.median, "std_ms": self.std, "min_ms": self.min,
                "max_ms": self.max, "p10_ms": self.percentile(10), "p90_ms": self.percentile(90),
                "repeat": self.repeat, "number": self.number, "warmup": self.warmup}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Measurement:
        return cls(**{k: d[k] for k in ("samples_ms", "number", "warmup") },
                   stage_ms=d.get("stage_ms"), meta=d.get("meta") or {})

    def __str__(self) -> str:
        return (f"{self.median:.3f} ms median (mean {self.mean:.3f} ± {self.std:.3f}, "
                f"min {self.min:.3f}, {self.repeat}x{self.number})")


class HostTimer:
    """The host clock around a sample, read after ``sync()`` (the default timer)."""

    clock = "host"

    def __init__(self, sync: Callable[[], None] | None = None):
        self.sync = sync or (lambda: None)
        self._t0 = 0

    def start(self) -> None:
        self._t0 = time.perf_counter_ns()

    def stop(self) -> float:
        self.sync()
        return (time.perf_counter_ns() - self._t0) / 1e6


def measure(fn: Callable[[], object], *, warmup: int = 3, number: int = 1, repeat: int = 10,
            min_sample_ms: float | None = None, stage_times: Callable[[], list[float]] | None = None,
            sync: Callable[[], None] | None = None, timer=None) -> Measurement:
    """Time ``fn()``.

    ``sync`` (e.g. a CUDA stream synchronize) is called before each host clock read, so
    asynchronous devices are timed to completion. ``timer`` (``start()``, ``stop() -> ms``)
    replaces the host clock, e.g. with CUDA events. ``stage_times``, when given, is read after
    each sample and must return that sample's per-stage times (ms, per call); the callee is
    expected to accumulate them over the sample's calls and reset itself when read.
    """
    if warmup < 0 or number < 1 or repeat < 1:
        raise ValueError("need warmup >= 0, number >= 1, repeat >= 1")
    sync = sync or (lambda: None)
    timer = timer or HostTimer(sync)
    for _ in range(warmup):
        fn()
    sync()
    if min_sample_ms:
        while True:
            timer.start()
            for _ in range(number):
                fn()
            if timer.stop() >= min_sample_ms or number >= 1 << 20:
                break
            number *= 2
    if stage_times is not None:
        stage_times()  # discard what warmup and calibration accumulated
    samples: list[float] = []
    stages: list[list[float]] | None = [] if stage_times is not None else None
    for _ in range(repeat):
        timer.start()
        for _ in range(number):
            fn()
        samples.append(timer.stop() / number)
        if stages is not None:
            stages.append([t / number for t in stage_times()])
    sync()
    return Measurement(samples_ms=samples, number=number, warmup=warmup, stage_ms=stages,
                       meta={"clock": getattr(timer, "clock", type(timer).__name__)})
