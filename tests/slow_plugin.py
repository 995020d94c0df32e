"""Test-only plugin (``IOS_BENCH_PLUGINS=tests.slow_plugin``): every worker process of a sweep
sleeps ``TEST_SLOW_WORKER_S`` seconds when it starts, so that a deadline falls inside an
experiment whatever this machine's speed (the deadline tests of tests/test_experiments_headline.py).
The sweep's own process (no ``IOS_BENCH_PARENT_PID``) does not sleep."""

from __future__ import annotations

import os
import time

from ios_bench.running.worker import PARENT_ENV

if os.environ.get(PARENT_ENV) and os.environ.get("TEST_SLOW_WORKER_S"):
    time.sleep(float(os.environ["TEST_SLOW_WORKER_S"]))
