"""Where a run's report goes when no folder is named: beside the run (``run``, ``ab``, ``report``)."""

from __future__ import annotations

import os
from pathlib import Path


def default_report_folder(run_folder: str | os.PathLike) -> Path:
    """``reports/<run name>`` beside the run: for a run in a folder named ``runs``, beside that folder
    (``runs/NAME`` -> ``reports/NAME``, ``/data/x/runs/NAME`` -> ``/data/x/reports/NAME``); for any
    other run folder, beside it (``/data/x/NAME`` -> ``/data/x/reports/NAME``). Never under the current
    folder for a run that ``--out`` put elsewhere."""
    run = Path(run_folder)
    parent = run.parent
    if parent.name == "runs":
        parent = parent.parent
    return parent / "reports" / run.resolve().name
