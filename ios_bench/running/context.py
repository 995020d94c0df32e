"""What the sweep's steps share (:class:`SweepContext`): the plan, the run folder, where tasks
run and how to speak.

The orchestrator (:class:`ios_bench.running.sweep.Sweep`) makes one and hands it to the steps that start
workers: probing (:mod:`ios_bench.planning.probing`), the oracle references
(:mod:`ios_bench.running.references`), the IOS schedules (:mod:`ios_bench.running.schedules`) and the rounds
(:mod:`ios_bench.running.round_runner`). None of them reaches into the sweep itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ios_bench.planning.plan import Plan
from ios_bench.records.runfolder import RunFolder
from ios_bench.running.executors import Executor


@dataclass(frozen=True)
class SweepContext:
    plan: Plan
    run_folder: RunFolder
    executor: Executor
    say: Callable[[str], None]  # one line to the console (rich markup; callers escape with term())

    @property
    def folder(self) -> Path:
        return self.run_folder.path

    @property
    def local(self) -> bool:
        """Tasks run on this machine (the local executor), not on a fleet's nodes."""
        return self.executor.name == "local"
