"""``python -m tests.thread_probe FRAMEWORK [THREADS] [OPTIONS_JSON]``: build FRAMEWORK at THREADS
(default 1) on a compute-bound net and print one JSON line: the calls' CPU time over wall time
(``ios_core.measurement.threads.cpu_over_wall``), the call's milliseconds and the build's
``thread_pools`` record. Run in a fresh process with no thread variable in its environment
(:func:`clean_env`), so that what keeps the budget is the adapter itself, not the harness's worker."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from ios_core.ir import GraphBuilder
from ios_core.measurement.threads import ENV_VARS


def probe_graph(branches: int = 4, depth: int = 4, channels: int = 64, size: int = 64):
    """Independent branches of 3x3 convolutions: work an inter-op pool could run concurrently, and
    enough of it (tens of milliseconds at one thread) to dominate a call's fixed costs."""
    b = GraphBuilder("thread_probe", (channels, size, size))
    outs = []
    for _ in range(branches):
        x = b.input
        for _ in range(depth):
            x = b.conv(x, channels, 3, padding=1)
        outs.append(x)
    b.end_block(b.concat(outs))
    return b.finish()


def clean_env(base: dict | None = None) -> dict:
    """``base`` (default ``os.environ``) without any variable that carries a thread budget."""
    env = dict(os.environ if base is None else base)
    for k in ENV_VARS + ("XLA_FLAGS",):
        env.pop(k, None)
    return env


def main(argv: list[str]) -> None:
    import adapters
    from ios_core.measurement.threads import cpu_over_wall

    name, threads = argv[0], int(argv[1]) if len(argv) > 1 else 1
    options = json.loads(argv[2]) if len(argv) > 2 else {}
    graph = probe_graph().init_weights(0)
    compiled = adapters.get(name).build(graph, 1, "cpu", threads, **options)
    x = np.random.default_rng(0).standard_normal((1, *graph.input_shape)).astype(np.float32)
    prepared = compiled.prepare(x)

    def call():
        compiled.execute(prepared)
        compiled.sync()

    for _ in range(2):
        call()
    calls = 4
    ratio = cpu_over_wall(call, calls)
    import time

    t0 = time.perf_counter()
    call()
    print(json.dumps({"framework": name, "threads": threads, "cpu_over_wall": ratio,
                      "ms": 1000 * (time.perf_counter() - t0), "thread_pools": compiled.info.get("thread_pools"),
                      "info": {k: v for k, v in compiled.info.items() if "thread" in k}}, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
