"""A persistent pool of worker threads that run the groups of a parallel stage.

Intra-op threads per worker. PyTorch's CPU build uses OpenMP (``ATen parallel backend:
OpenMP``; oneDNN convolutions use the same runtime). ``torch.set_num_threads(n)`` stores
``n`` in a process-wide atomic *and* calls ``omp_set_num_threads(n)``, which sets the
OpenMP ``nthreads-var`` ICV of the *calling* thread only; ``torch.get_num_threads()`` and
every parallel region opened by that thread read that per-thread ICV. A thread that has
not run a parallel region yet lazily initializes its ICV from the process-wide atomic (a
thread-local "initialized" flag). So each worker first triggers its lazy initialization
(``torch.get_num_threads()``), then sets its own thread count; afterwards no other thread
can change it, and it does not change the caller's. ``tests/test_runtime_threads.py``
checks all of this.

The thread control is that of the program's tensors (:mod:`.tensors`): torch's for torch
kernels, none for ONNX Runtime's or OpenVINO's (their sessions keep the threads they were
compiled with), so a pool for those never imports torch.

The calling thread runs the first task itself (one fewer wake-up); the pool grows on demand
and is shared by every runtime of the process whose tensors are the same (guarded by a lock, so
two runtimes used from two threads take turns on it). Every task carries its own future: a run waits for the futures
of its own tasks only, so a run that was interrupted while its tasks were still running (they
finish later) can never make the next run return before its own tasks are done.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future

from ios_core.runtime.tensors import TORCH, Tensors

PoolTask = tuple[Callable[[], None], int]  # (function, intra-op threads)


class _Worker:
    def __init__(self, index: int, tensors: Tensors):
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.threads = 0
        self.tensors = tensors
        self.thread = threading.Thread(target=self._loop, name=f"ios-worker-{index}", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        self.threads = self.tensors.threads()  # lazy per-thread OpenMP initialization happens here
        # inference mode is thread-local: workers stay in it, as the runtime's caller is
        with self.tensors.mode():
            self._serve()

    def _serve(self) -> None:
        while True:
            item = self.inbox.get()
            if item is None:
                return
            fn, nthreads, future = item
            try:
                if self.threads is not None and nthreads != self.threads:
                    self.tensors.set_threads(nthreads)
                    self.threads = nthreads
                fn()
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                future.set_exception(e)
            else:
                future.set_result(None)


class WorkerPool:
    def __init__(self, tensors: Tensors = TORCH):
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.tensors = tensors

    @property
    def size(self) -> int:
        return len(self._workers)

    def _ensure(self, n: int) -> None:
        while len(self._workers) < n:
            self._workers.append(_Worker(len(self._workers), self.tensors))

    def run(self, tasks: list[PoolTask], caller_threads: int) -> None:
        """Run ``tasks`` concurrently: the first on the calling thread, the rest on workers;
        return when all are done (re-raising the first failure). The caller's intra-op thread
        count is restored to ``caller_threads`` afterwards."""
        with self._lock:
            self._ensure(len(tasks) - 1)
            futures: list[Future] = []
            for worker, (task_fn, task_threads) in zip(self._workers, tasks[1:]):
                future: Future = Future()
                futures.append(future)
                worker.inbox.put((task_fn, task_threads, future))
            error: BaseException | None = None
            fn, nthreads = tasks[0]
            switch = nthreads != caller_threads and self.tensors.threads() is not None
            try:
                if switch:
                    self.tensors.set_threads(nthreads)
                fn()
            except BaseException as e:  # noqa: BLE001
                error = e
            finally:
                if switch:
                    self.tensors.set_threads(caller_threads)
                for future in futures:  # this run's own tasks, whatever an earlier run left behind
                    r = future.exception()
                    if r is not None and error is None:
                        error = r
            if error is not None:
                raise error


_POOLS: dict[str, WorkerPool] = {}
_POOL_LOCK = threading.Lock()


def shared_pool(tensors: Tensors = TORCH) -> WorkerPool:
    """The process's pool for programs keeping their values in ``tensors``."""
    with _POOL_LOCK:
        pool = _POOLS.get(tensors.name)
        if pool is None:
            pool = _POOLS[tensors.name] = WorkerPool(tensors)
        return pool


def split_threads(total: int, workers: int) -> list[int]:
    """Divide ``total`` intra-op threads among ``workers`` (at least one each)."""
    base, extra = divmod(max(total, workers), workers)
    return [base + (1 if i < extra else 0) for i in range(workers)]


def assign_groups(costs: list[float], workers: int) -> list[list[int]]:
    """Longest-processing-time assignment of groups (by cost) to ``workers``; each worker's
    group indices in ascending order. The runtime runs stages this way and the measured cost
    model predicts them the same way."""
    loads = [0.0] * workers
    assigned: list[list[int]] = [[] for _ in range(workers)]
    for i in sorted(range(len(costs)), key=lambda i: -costs[i]):
        w = min(range(workers), key=lambda j: loads[j])
        assigned[w].append(i)
        loads[w] += costs[i]
    return [sorted(a) for a in assigned]
