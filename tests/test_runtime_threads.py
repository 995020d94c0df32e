"""Concurrency is real: groups of a parallel stage overlap in time on different threads, each
with its share of the intra-op threads, and the caller's thread count is left alone."""

from __future__ import annotations

import threading

import pytest
import torch

from ios_core.check import compare
from ios_core.ir import GraphBuilder
from ios_core.reference import random_input
from ios_core.reference import run as oracle
from ios_core.runtime import Runtime, split_threads


def _two_branch_graph():
    b = GraphBuilder("two", (64, 56, 56))
    x = b.input
    a = b.conv(b.conv(x, 64, 3, padding=1), 64, 3, padding=1)
    c = b.conv(b.conv(x, 64, 3, padding=1), 64, 3, padding=1)
    b.end_block(b.concat([a, c]))
    g = b.finish().init_weights(0)
    block = g.blocks[0]
    names = [n.name for n in block.nodes]  # conv a1, conv a2, conv c1, conv c2, concat
    block.stages = [[[names[0], names[1]], [names[2], names[3]]], [[names[4]]]]
    return g.validate()


def test_groups_overlap_in_time():
    g = _two_branch_graph()
    trace: list = []
    rt = Runtime(g, 1, threads=2, trace=trace)
    x = random_input(g, 1)
    caller = torch.get_num_threads()
    for _ in range(3):
        y = rt.run(x)
    assert compare(y, oracle(g, x)).passed
    assert torch.get_num_threads() == caller
    runs = [trace[i:i + 2] for i in range(0, len(trace), 2)]
    assert len(runs) == 3
    overlapped = 0
    for run in runs:
        a, b = sorted(run, key=lambda r: r["task"])
        assert a["thread"] != b["thread"]
        assert a["threads"] == 1 and b["threads"] == 1  # 2 cores shared by 2 groups
        if a["start_ns"] < b["end_ns"] and b["start_ns"] < a["end_ns"]:
            overlapped += 1
    assert overlapped >= 2, runs


def test_caller_thread_count_restored_even_if_different():
    g = _two_branch_graph()
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        rt = Runtime(g, 1, threads=2)
        rt.run(random_input(g, 1))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(old)


def test_set_num_threads_is_per_thread():
    """What the pool relies on: torch.set_num_threads in a thread that has initialized its
    OpenMP state changes only that thread's intra-op thread count."""
    main_before = torch.get_num_threads()
    seen = {}
    ready, go = threading.Event(), threading.Event()

    def worker(name, n):
        torch.get_num_threads()  # lazy per-thread initialization
        torch.set_num_threads(n)
        ready.set() if name == "a" else None
        go.wait(5)
        seen[name] = torch.get_num_threads()

    ta = threading.Thread(target=worker, args=("a", 1))
    ta.start()
    ready.wait(5)
    tb = threading.Thread(target=worker, args=("b", 2))
    tb.start()
    go.set()
    ta.join()
    tb.join()
    assert seen == {"a": 1, "b": 2}
    assert torch.get_num_threads() == main_before


def test_split_threads():
    assert split_threads(2, 2) == [1, 1]
    assert split_threads(16, 3) == [6, 5, 5]
    assert split_threads(2, 1) == [2]


def test_an_interrupted_run_never_lets_the_next_one_return_early():
    """Run 1 is interrupted while a worker still runs its task; run 2 queues behind it and must
    return only once its own task is done (not on run 1's late completion). In a fresh interpreter: the
    interruption is a SIGALRM to the process, and a suite's process holds other libraries' threads (after
    the OpenVINO profile test, the signal crashed the whole pytest process)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    code = "from tests.test_runtime_threads import interrupted_run_check; interrupted_run_check(); print('ok')"
    p = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-2000:]


def interrupted_run_check():
    """The check itself (raises on failure)."""
    import signal
    import threading
    import time

    from ios_core.runtime.pool import WorkerPool

    class Interrupted(Exception):
        pass

    pool = WorkerPool()
    release = threading.Event()
    done2 = []

    def handler(signum, frame):
        raise Interrupted

    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(Interrupted):
            pool.run([(lambda: None, 1), (release.wait, 1)], 1)  # interrupted while waiting for its worker
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    threading.Timer(0.2, release.set).start()  # run 1's task finishes while run 2 waits

    def second():
        time.sleep(0.3)
        done2.append(True)

    pool.run([(lambda: None, 1), (second, 1)], 1)
    if done2 != [True]:
        raise AssertionError(f"run 2 returned before its own task finished: {done2}")
