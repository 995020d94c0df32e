"""Test-only models and adapters for the harness tests, loaded in the sweep and in every worker
through ``IOS_BENCH_PLUGINS=tests.harness_plugin``.

Adapters: ``test-ref`` / ``test-ref2`` compute the oracle (two "frameworks" that agree),
``test-wrong`` returns a perturbed output, ``test-racy`` is right on its first call only (a racy
schedule), ``test-lowprec`` reports bf16 and declares a loose tolerance, ``test-loose`` claims
fp32 but declares a loose tolerance (both 1 % off), ``test-raise`` fails to build (unless
``TEST_RAISE_OK`` is set), ``test-crash`` segfaults in the timed call, ``test-hang`` hangs in the
timed call, ``test-probecrash`` segfaults when asked whether it is available, ``test-noflight``
cannot keep several requests in flight (``concurrency=None``: LoadGen scenarios refuse it),
``test-delay`` computes the oracle and sleeps its build option ``delay_ms`` (``ios-bench ab``).
``TEST_SLOW_EXECUTE_S`` makes the reference adapters sleep in each timed call (to kill a sweep
mid-way). ``TEST_REFERENCE_FAIL_BATCH=N`` makes the oracle raise MemoryError at batch size N (a
reference that fails at one batch size only); ``TEST_AVAILABLE_MIB`` is the memory the sweep's
pre-check sees as available (a fake memory figure).
"""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

import adapters
from adapters.base import Adapter, Compiled
from ios_core import models
from ios_core.ir import GraphBuilder


def _tiny(name: str, channels: int, hw: int):
    def build():
        b = GraphBuilder(name, (channels, hw, hw))
        x = b.input
        a = b.conv(x, channels, 3, padding=1)
        c = b.conv(x, channels, 1)
        a = b.conv(a, channels, 3, padding=1)
        b.end_block(b.concat([a, c]))
        return b.finish()

    return build


if "tiny_a" not in models.names():
    models.register("tiny_a", "test: 3 convs on 4x6x6")(_tiny("tiny_a", 4, 6))
    models.register("tiny_b", "test: 3 convs on 6x5x5")(_tiny("tiny_b", 6, 5))


class _RefCompiled(Compiled):
    def __init__(self, graph, mode: str):
        super().__init__({"precision": "bf16"} if mode == "lowprec" else {})
        self.graph = graph
        self.mode = mode
        self.calls = 0

    def execute(self, x):
        from ios_core import reference

        if self.mode == "crash":
            ctypes.string_at(0)  # a real segfault
        if self.mode == "hang":
            while True:
                time.sleep(1)
        delay = float(os.environ.get("TEST_SLOW_EXECUTE_S", "0") or 0)
        if delay:
            time.sleep(delay)
        y = reference.run(self.graph, x)
        self.calls += 1
        if self.mode == "wrong" or (self.mode == "racy" and self.calls > 1):
            y = y + 1.0
        if self.mode in ("lowprec", "loose"):
            y = y * np.float32(1.01)
        return y


class _RefAdapter(Adapter):
    def __init__(self, name: str, mode: str = "ok"):
        super().__init__(name=name, description=f"test adapter ({mode})", requires=("numpy",), devices=("cpu", "cuda"),
                         tolerance=5e-2 if mode in ("lowprec", "loose") else 1e-3, mode=f"test ({mode})")
        self.kind = mode

    def _build(self, graph, batch_size, device, threads, **options):
        if self.kind == "raise" and not os.environ.get("TEST_RAISE_OK"):
            raise RuntimeError("this test adapter fails to build (unless TEST_RAISE_OK is set)")
        return _RefCompiled(graph, self.kind)


class _DelayCompiled(_RefCompiled):
    def __init__(self, graph, delay_ms: float):
        super().__init__(graph, "ok")
        self.delay_s = delay_ms / 1000

    def execute(self, x):
        y = super().execute(x)
        if self.delay_s:
            time.sleep(self.delay_s)  # real extra work in the timed call: B slower than A by this much
        return y


class _DelayAdapter(_RefAdapter):
    """Computes the oracle, then sleeps ``delay_ms`` (a named build option: two configurations of one
    framework for ``ios-bench ab``)."""

    def _build(self, graph, batch_size, device, threads, delay_ms=0.0):
        return _DelayCompiled(graph, float(delay_ms))


class _NoFlight(_RefAdapter):
    """Computes the oracle but cannot keep several requests in flight (a LoadGen scenario refuses it)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.concurrency = None
        self.concurrency_note = "a test adapter that runs one request at a time"


class _ProbeCrash(_RefAdapter):
    """Crashes the process that asks whether it is available (a framework whose import segfaults)."""

    def available(self, device="cpu"):
        if "IOS_BENCH_PARENT_PID" not in os.environ:  # not a sweep's worker (a test process that
            return "crashes only in a sweep's worker"  # imported this plugin): say so, never crash it
        ctypes.string_at(0)


def _fake_machine() -> None:
    """The test hooks that replace a figure of the machine (see the module's docstring)."""
    fail_at = os.environ.get("TEST_REFERENCE_FAIL_BATCH")
    if fail_at:
        from ios_core import reference

        plain = reference.run

        def run(graph, x):
            if len(x) == int(fail_at):
                raise MemoryError(f"test: the oracle fails at batch {fail_at}")
            return plain(graph, x)

        reference.run = run
    avail = os.environ.get("TEST_AVAILABLE_MIB")
    if avail:
        from ios_bench.planning import estimate

        estimate.available_mib = lambda: float(avail)


_fake_machine()
REF = _RefAdapter("test-ref")
PROBE_CRASH = _ProbeCrash("test-probecrash")
REF2 = _RefAdapter("test-ref2")
WRONG = _RefAdapter("test-wrong", "wrong")
RACY = _RefAdapter("test-racy", "racy")
LOWPREC = _RefAdapter("test-lowprec", "lowprec")
LOOSE = _RefAdapter("test-loose", "loose")
RAISE = _RefAdapter("test-raise", "raise")
CRASH = _RefAdapter("test-crash", "crash")
HANG = _RefAdapter("test-hang", "hang")
NOFLIGHT = _NoFlight("test-noflight")
DELAY = _DelayAdapter("test-delay")
for _name, _attr in [("test-ref", "REF"), ("test-ref2", "REF2"), ("test-wrong", "WRONG"), ("test-racy", "RACY"),
                     ("test-lowprec", "LOWPREC"), ("test-loose", "LOOSE"), ("test-raise", "RAISE"),
                     ("test-crash", "CRASH"), ("test-hang", "HANG"), ("test-probecrash", "PROBE_CRASH"),
                     ("test-noflight", "NOFLIGHT"), ("test-delay", "DELAY")]:
    adapters.register(_name, f"tests.harness_plugin:{_attr}")

__all__ = ["np"]
