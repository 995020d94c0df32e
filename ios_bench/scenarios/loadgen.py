"""One LoadGen test on an engine (:mod:`.concurrency`): the system under test (SUT) and the query
sample library (QSL) LoadGen drives, the test itself, and what comes back of it.

- The QSL is the fixed, seeded set of inputs the sweep's reference task saved beside the oracle's
  outputs (``refs/<model>-b<batch>.qsl.npz``); every sample is prepared for every program before
  the test (``engine.load``), so LoadGen's load/unload callbacks have nothing to do.
- The SUT hands each query sample to the engine and, when the engine is done, tells LoadGen
  (``QuerySamplesComplete``). It also keeps its own clock of each sample, from LoadGen's
  ``IssueQuery`` call to that completion (``latencies_ms``: the round's samples), and a sampled
  subset of the responses (every k-th completion, at most ``checked_responses``) to check against
  the oracle after the test.
- LoadGen writes its logs into ``outdir``; only the summary and the detail log are kept, and
  :func:`ios_bench.scenarios.logs.parse` reads its verdict and figures back.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from ios_bench.scenarios import logs
from ios_bench.scenarios.settings import test_settings


class SUT:
    def __init__(self, lg, engine, expected: int, checked: int):
        self.lg, self.engine = lg, engine
        self.lock = threading.Lock()
        self.issued: dict[int, float] = {}
        self.latencies_ms: list[float] = []
        self.stride = max(1, expected // max(1, checked))
        self.checked = checked
        self.kept: list[tuple[int, np.ndarray]] = []  # (sample index, response) of the sampled completions
        self.completed = 0
        self.failed = 0

    def issue(self, query_samples) -> None:
        now = time.perf_counter()
        with self.lock:
            for q in query_samples:
                self.issued[q.id] = now
        for q in query_samples:
            self.engine.submit(q.index, q.id)

    def flush(self) -> None:
        pass

    def done(self, token: int, sample: int, output) -> None:
        t = time.perf_counter()
        with self.lock:
            self.latencies_ms.append((t - self.issued.pop(token, t)) * 1e3)
            k = self.completed
            self.completed += 1
            if output is None:
                self.failed += 1
            elif k % self.stride == 0 and len(self.kept) < self.checked:
                self.kept.append((sample, np.array(output, dtype=np.float32, copy=True)))
        self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(token, 0, 0)])


def expected_samples(scenario: str, settings: dict) -> int:
    """About how many samples a test issues (for spreading the checked responses over it)."""
    n = int(settings["min_query_count"])
    return n * int(settings.get("samples_per_query", 1)) if scenario == "multi-stream" else n


def run_test(engine, scenario: str, settings: dict, outdir: str | Path, estimate_ms: float, qsl_size: int,
             seed: int = 0, target_qps: float | None = None, latency_bound_ms: float | None = None,
             peak: bool = False, hint_scale: float = 1.0) -> dict:
    """One LoadGen test of ``scenario`` on ``engine`` (started here, stopped after). Returns
    ``{"loadgen": parsed logs, "latencies_ms": [...], "responses": [(sample, output)], "failed": n,
    "wall_s": s}``."""
    import mlperf_loadgen as lg

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    ts = test_settings(lg, scenario, settings, estimate_ms, engine.instances, seed, target_qps, latency_bound_ms,
                       peak, hint_scale)
    sut = SUT(lg, engine, expected_samples(scenario, settings), int(settings["checked_responses"]))
    log = lg.LogSettings()
    log.log_output.outdir = str(outdir)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    engine.start(sut.done)
    handle = lg.ConstructSUT(sut.issue, sut.flush)
    qsl = lg.ConstructQSL(qsl_size, qsl_size, lambda samples: None, lambda samples: None)
    t0 = time.perf_counter()
    try:
        lg.StartTestWithLogSettings(handle, qsl, ts, log)
    finally:
        wall = time.perf_counter() - t0
        lg.DestroyQSL(qsl)
        lg.DestroySUT(handle)
        engine.stop()
    logs.keep_only_summary_and_detail(outdir)
    spq = int(settings.get("samples_per_query", 1)) if scenario == "multi-stream" else 1
    parsed = logs.parse(outdir, spq)
    if getattr(engine, "error", None) is not None:
        e = engine.error
        raise RuntimeError(f"a request failed during the LoadGen test: {type(e).__name__}: {str(e)[:200]}")
    return {"loadgen": parsed, "latencies_ms": sut.latencies_ms, "responses": sut.kept, "failed": sut.failed,
            "wall_s": wall}
