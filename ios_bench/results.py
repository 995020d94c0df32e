"""The results store: ``runs/NAME/results.jsonl``, one JSON record per finished cell.

Each record is appended as one line with a single ``write`` on an ``O_APPEND`` descriptor and
``fsync``-ed before the next cell starts, so a killed sweep loses at most the cell in flight.
Opening a store for appending first cuts off an unterminated last line (the only way a partial
record could appear, e.g. power loss mid-write) and says so; reading reports every corrupt line
with its number and skips it - never silently.

    df = ios_bench.results.load("runs/NAME")     # one row per cell
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

from .errors import InputError

SCHEMA = 1
RESULTS_FILE = "results.jsonl"
REQUIRED = ("cell", "model", "batch_size", "framework", "device", "status")


class CorruptRecord(UserWarning):
    pass


def results_path(path: str | os.PathLike) -> Path:
    """``runs/NAME`` or ``runs/NAME/results.jsonl`` -> the results file."""
    p = Path(path)
    if p.is_dir():
        return p / RESULTS_FILE
    return p


def cell_key(model: str, batch_size: int, framework: str, device: str) -> str:
    return f"{model}|b{batch_size}|{framework}|{device}"


def _check(rec) -> str | None:
    if not isinstance(rec, dict):
        return f"not a JSON object ({type(rec).__name__})"
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        return f"missing {', '.join(missing)}"
    if rec["cell"] != cell_key(rec["model"], rec["batch_size"], rec["framework"], rec["device"]):
        return "cell key does not match its fields"
    return None


def read_records(path: str | os.PathLike, on_problem: Callable[[str], None] | None = None) -> list[dict]:
    """All valid records of a results file; each corrupt line is reported through ``on_problem``
    (default: a ``CorruptRecord`` warning) as ``FILE:LINE: reason`` and skipped."""
    path = results_path(path)
    if not path.exists():
        raise InputError(f"{path}: no such results file")
    report = on_problem or (lambda msg: warnings.warn(msg, CorruptRecord, stacklevel=3))
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from e
    records, bad = [], 0
    lines = data.split(b"\n")
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = i == len(lines)  # no newline after it: an unfinished write
        try:
            rec = json.loads(raw.decode("utf-8"))
            problem = _check(rec)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            problem = f"not valid JSON ({e.__class__.__name__}: {str(e)[:80]})"
        if problem is None and last:
            problem = "unterminated last line (partial write)"
        if problem:
            bad += 1
            report(f"{path}:{i}: corrupt record skipped: {problem}")
            continue
        records.append(rec)
    if bad and not records:
        raise InputError(f"{path}: corrupt results file: no valid record ({bad} corrupt line{'s' * (bad > 1)})")
    return records


class Store:
    """Append-only store of cell records in a run folder."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / RESULTS_FILE

    def repair(self) -> str | None:
        """Cut off an unterminated last line; returns a message when something was cut."""
        if not self.path.exists():
            return None
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return None
        keep = data.rfind(b"\n") + 1
        line_no = data[:keep].count(b"\n") + 1
        with open(self.path, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        return (f"{self.path}:{line_no}: removed an unfinished record ({len(data) - keep} bytes) left by an "
                "interrupted write")

    def records(self, on_problem: Callable[[str], None] | None = None) -> list[dict]:
        if not self.path.exists():
            return []
        return read_records(self.path, on_problem)

    def finished(self, on_problem: Callable[[str], None] | None = None) -> set[str]:
        return {r["cell"] for r in self.records(on_problem)}

    def append(self, record: dict) -> None:
        problem = _check(record)
        if problem:
            raise ValueError(f"refusing to store an invalid record: {problem}")
        line = (json.dumps({"schema": SCHEMA, **record}, default=_json_default) + "\n").encode()
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            if written != len(line):  # never seen on regular files; keep the store whole anyway
                os.ftruncate(fd, os.fstat(fd).st_size - written)
                raise OSError(f"short write to {self.path}")
            os.fsync(fd)
        finally:
            os.close(fd)


def _json_default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


COLUMNS = ("model", "batch_size", "framework", "label", "kind", "schedule", "device", "status", "median_ms",
           "mean_ms", "std_ms", "min_ms", "max_ms", "p10_ms", "p90_ms", "throughput", "throughput_p10",
           "throughput_p90", "repeat", "number", "warmup", "check_passed", "check_max_rel_err", "check_tolerance",
           "precision", "threads", "build_seconds", "optimize_seconds", "framework_version", "reason")


def flatten(rec: dict) -> dict:
    row = {k: v for k, v in rec.items() if k not in ("check", "info", "clocks")}
    check = rec.get("check") or {}
    row["check_passed"] = check.get("passed")
    row["check_max_rel_err"] = check.get("max_rel_err")
    row["check_max_abs_err"] = check.get("max_abs_err")
    row["check_tolerance"] = check.get("tolerance")
    row["check_reason"] = check.get("reason")
    clocks = rec.get("clocks") or {}
    for k, v in clocks.items():
        row[f"clock_{k}"] = v if not isinstance(v, list) else (v[0] if len(v) == 1 else str(v))
    return row


def load(path: str | os.PathLike, on_problem: Callable[[str], None] | None = None):
    """One call: a run folder (or its results.jsonl) -> pandas DataFrame, one row per cell
    (all timing samples in ``samples_ms``; summary statistics, check and status as columns)."""
    import pandas as pd

    rows = [flatten(r) for r in read_records(path, on_problem)]
    df = pd.DataFrame(rows)
    for col in COLUMNS:
        if col not in df.columns:
            df[col] = None
    front = [c for c in COLUMNS if c in df.columns]
    return df[front + [c for c in df.columns if c not in front]]
