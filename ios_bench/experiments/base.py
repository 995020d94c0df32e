"""What an experiment is: a recipe over the sweep.

An experiment (``ios-bench experiment NAME``) names one or more sweeps (each a
:class:`ios_bench.running.sweep.Plan`, run into its own run folder under the experiment's folder, so
``--resume`` and the results store work as for ``ios-bench run``), and then reads those run
folders back to write the paper's form of result (table, heat map, curve) as its report.
It is never a second harness: cells are isolated, checked against the oracle and timed by the
sweep; the experiment only chooses plans and reads records.

    class MyExperiment:
        name = "schedules"
        title = "Comparison of schedules"
        summary = "Sequential, Greedy, IOS-Merge, IOS-Parallel and IOS-Both on the IOS runtime"
        paper = "Table 2 of the IOS paper"     # which published result it reproduces

        def runs(self, ctx: Context) -> list[Run]: ...
        def report(self, ctx: Context, folders: dict[str, Path]) -> Report: ...

Published figures (the paper's V100 numbers) are shown beside ours, labelled published and not
measured (``ios_bench.experiments.published``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from ios_bench.planning.plan import Plan


@dataclass
class Context:
    """What the user asked for: the experiment folder and the choices every recipe honours."""

    out: Path  # the experiment folder: runs/<sub-run>/ and report.md live here
    models: list[str] | None = None  # None: the experiment's own default models
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    quick: bool = False  # small inputs, short protocol: minutes, for tests and CI
    threads: int | None = None  # thread budget per cell (None: the usable cores)
    resume: bool = False
    # the committed reference form (docs/results/): the full form reduced to fit this machine's
    # budget; each experiment says what it reduced in its Report.reduced
    reference: bool = False
    sweeps: list[str] | None = None  # only these of the experiment's sweeps (None: all of them)

    @property
    def form(self) -> str:
        """``quick``, ``reference`` or ``full`` (the default: the paper's models and batch sizes)."""
        return "quick" if self.quick else "reference" if self.reference else "full"


@dataclass
class Run:
    """One sweep of an experiment: ``name`` is its sub-folder under ``<out>/runs/``."""

    name: str
    plan: Plan
    note: str = ""  # what this sweep is for, shown in the report


@dataclass
class Report:
    """An experiment's result: markdown sections; figures are files written beside report.md."""

    title: str
    sections: list[tuple[str, str]]  # (heading, markdown body)
    figures: list[Path] = field(default_factory=list)
    reduced: list[str] = field(default_factory=list)  # what this form left out of the paper's, and why


@runtime_checkable
class Experiment(Protocol):
    name: str
    title: str
    summary: str
    paper: str

    def runs(self, ctx: Context) -> list[Run]:
        """The sweeps to run (in order)."""
        ...

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        """Read the finished run folders (``{run name: folder}``) and build the report; figures go
        under ``ctx.out``."""
        ...
