"""The thread budget: one rule for the runtime, the cost models and every adapter."""

from __future__ import annotations

import os


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def resolve_threads(threads: int | None) -> int:
    """The intra-op thread budget: ``threads`` or, when not given, the number of usable cores
    (never the process's current torch setting, which earlier work may have changed)."""
    if threads is None:
        return usable_cores()
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return int(threads)
