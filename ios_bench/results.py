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
from dataclasses import dataclass
from pathlib import Path

from ios_bench.errors import InputError
from ios_bench.records import record as _record
from ios_bench.records.record import SCHEMA, SCHEMAS, STATUSES, migrate

RESULTS_FILE = "results.jsonl"
ENV_FILE = "env.json"  # the machine a run was measured on (ios_bench.records.runfolder writes it)
# ok: ran and its output matched the oracle (before and after timing); wrong: ran and was timed,
# but an output check failed (kept out of every aggregate); failed: did not run; skipped: could not.
REQUIRED = _record.required()


class CorruptRecord(UserWarning):
    pass


def results_path(path: str | os.PathLike) -> Path:
    """``runs/NAME`` or ``runs/NAME/results.jsonl`` -> the results file."""
    p = Path(path)
    if p.is_dir():
        return p / RESULTS_FILE
    return p


def cell_key(model: str, batch_size: int, framework: str, device: str, variant: str | None = None,
             precision: str | None = None) -> str:
    """``model|bBATCH|framework|device``; a LoadGen scenario's cell adds its scenario and
    configuration: ``...|device|offline:2x1`` (``ios_bench.scenarios.concurrency.variant``); a cell
    at a precision other than fp32 (``run --precision``) ends with it: ``...|device|int8`` (an fp32
    cell's key is the one it always had, so older runs resume and compare unchanged)."""
    return (f"{model}|b{batch_size}|{framework}|{device}" + (f"|{variant}" if variant else "")
            + (f"|{precision}" if precision and precision != "fp32" else ""))


TIMING_FIELDS = _record.timed()  # required where a cell was timed


def check_record(rec) -> str | None:
    """Why ``rec`` is not a record this version can use (None when it is): required fields with
    their types (``ios_bench.records.record.FIELDS``), a known status, finite numbers, and timings wherever
    a cell was timed."""
    if not isinstance(rec, dict):
        return f"not a JSON object ({type(rec).__name__})"
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        return f"missing {', '.join(missing)}"
    bad = _record.problems(rec)
    if bad:
        return f"wrongly typed field{'s' * (len(bad) > 1)} {', '.join(dict.fromkeys(bad))}"
    if rec["status"] not in STATUSES:
        return f"unknown status {rec['status']!r} (known: {', '.join(STATUSES)})"
    if rec["status"] in ("ok", "wrong"):
        absent = [k for k in TIMING_FIELDS if rec.get(k) is None]
        if absent or rec.get("check") is None:
            return f"a timed cell without {', '.join(absent + ['check'] * (rec.get('check') is None))}"
    if rec["cell"] != cell_key(rec["model"], rec["batch_size"], rec["framework"], rec["device"], rec.get("variant"),
                                rec.get("precision")):
        return "cell key does not match its fields"
    return None


def read_records(path: str | os.PathLike, on_problem: Callable[[str], None] | None = None) -> list[dict]:
    """All valid records of a results file, in file order; each corrupt or wrongly typed line is
    reported through ``on_problem`` (default: a ``CorruptRecord`` warning) as ``FILE:LINE:
    reason`` and skipped, a cell recorded twice is reported (a retry, with ``attempt``, is not),
    a record of an older schema is migrated (``ios_bench.records.record.migrate``), and a record of an
    unknown schema version refuses the whole file (``InputError``)."""
    path = results_path(path)
    if not path.exists():
        raise InputError(f"{path}: no such results file")
    report = on_problem or (lambda msg: warnings.warn(msg, CorruptRecord, stacklevel=3))
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from e
    records, bad = [], 0
    seen: dict[str, int] = {}
    lines = data.split(b"\n")
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = i == len(lines)  # no newline after it: an unfinished write
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            rec, problem = None, f"not valid JSON ({e.__class__.__name__}: {str(e)[:80]})"
        else:
            if isinstance(rec, dict) and rec.get("schema", 1) not in SCHEMAS:
                raise InputError(f"{path}:{i}: record schema {str(rec.get('schema'))[:20]!r} is not one this "
                                 f"ios-bench reads (schemas {', '.join(map(str, SCHEMAS))}); use the ios-bench "
                                 "version that wrote it")
            if isinstance(rec, dict):
                rec = migrate(rec)
            problem = check_record(rec)
        if problem is None and last:
            problem = "unterminated last line (partial write)"
        if problem:
            bad += 1
            report(f"{path}:{i}: corrupt record skipped: {problem}")
            continue
        cell = rec["cell"]
        if cell in seen and not rec.get("attempt"):
            report(f"{path}:{i}: cell {cell} recorded again (first at line {seen[cell]}); the later record is used")
        seen[cell] = i
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

    def latest(self, on_problem: Callable[[str], None] | None = None) -> dict[str, dict]:
        """Each cell's last record (a retried cell's latest attempt)."""
        return {r["cell"]: r for r in self.records(on_problem)}

    def append(self, record: dict) -> None:
        problem = check_record(record)
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


COLUMNS = _record.columns()
flatten = _record.flatten


def load(path: str | os.PathLike, on_problem: Callable[[str], None] | None = None):
    """One call: a run folder (or its results.jsonl) -> pandas DataFrame, one row per cell
    (all timing samples in ``samples_ms``; summary statistics, check and status as columns)."""
    return Run(Path(path), read_records(path, on_problem), {}, []).frame()


# ---- the one loader: report, compare and experiments read a run folder through it ----------------

# columns every report table reads, present (empty) even when no record has them
_FRAME_COLUMNS = ("cell", "model", "batch_size", "framework", "device", "status", "median_ms", "std_ms", "p10_ms",
                  "p90_ms", "throughput", "throughput_p10", "throughput_p90", "check_passed", "reason", "label",
                  "schedule", "build_seconds", "precision", "check_max_rel_err", "optimize_seconds", "stderr_tail",
                  "provider", "predicted_ms", "sequential_ms", "between_round_cv", "unstable", "rounds_used",
                  "rounds_measured", "rounds_disturbed", "same_schedule_as", "ci_low_ms", "ci_high_ms",
                  "peak_rss_mib", "sequential_ci_ms")


@dataclass
class Run:
    """A run folder as read once: each cell's latest record (older schemas migrated; a record that
    says ``ok`` without a passed check is ``wrong``), its environment and what was wrong with the
    files (corrupt lines, a corrupt env.json), never silently."""

    folder: Path
    records: list[dict]
    env: dict
    problems: list[str]

    def frame(self):
        """One row per cell (pandas), objects flattened (:func:`flatten`); numeric columns as floats
        (absent values NaN), every column a report reads present."""
        import pandas as pd

        df = pd.DataFrame([flatten(r) for r in self.records])
        for col in (*_FRAME_COLUMNS, *COLUMNS):
            if col not in df.columns:
                df[col] = None
        numeric = [f.name for f in _record.FIELDS if f.kind in ("number",) and f.name in df.columns]
        for col in (*numeric, "check_max_rel_err"):
            df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
        front = [c for c in COLUMNS if c in df.columns]
        return df[front + [c for c in df.columns if c not in front]]


def load_run(folder: str | os.PathLike) -> Run:
    """Read a run folder (:class:`Run`). Raises ``InputError`` for a folder that is not a run."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: not a run folder")
    if not (folder / RESULTS_FILE).exists():
        raise InputError(f"{folder}: no {RESULTS_FILE} (not a run folder, or no cell has finished yet)")
    problems: list[str] = []
    latest: dict[str, dict] = {}
    for r in read_records(folder, on_problem=problems.append):
        if r.get("status") == "ok" and not (r.get("check") or {}).get("passed", False):
            r = {**r, "status": "wrong"}  # records written before the "wrong" status existed
        latest.pop(r["cell"], None)  # a retried cell: its latest attempt, in the order cells finished
        latest[r["cell"]] = r
    env: dict = {}
    env_path = folder / ENV_FILE
    if env_path.exists():
        try:
            env = json.loads(env_path.read_bytes())
        except (ValueError, RecursionError) as e:
            problems.append(f"{env_path}: corrupt ({type(e).__name__}: {str(e)[:80]}); environment not shown")
        if not isinstance(env, dict):
            problems.append(f"{env_path}: corrupt (not a JSON object); environment not shown")
            env = {}
    return Run(folder, list(latest.values()), env, problems)
