"""The run folder's layout, in one place (:class:`RunFolder`).

    runs/NAME/
      plan.json        the sweep's plan (--resume reuses it)
      env.json         where and how it was measured (sessions of a resumed run appended)
      results.jsonl    one record per finished cell (ios_bench.results)
      rounds/          each cell's rounds as they finish (<cell>.jsonl), so --resume keeps them
      refs/            seeded inputs and oracle outputs per (model, batch)
      schedules/       IOS schedules (Graph.save) with their optimizer figures (.stats)
      models/          graph and ONNX files the sweep was given, copied
      logs/            every worker's output
      work/            workers' result files in flight
      util/            utilization traces (sample_utilization)
      loadgen/         LoadGen's summary and detail logs of scenario cells (ios_bench.scenarios)
      nodes/           each fleet node's env.json
      .lock            held while a sweep runs on the folder
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

from ios_bench.errors import InputError
from ios_bench.planning.cells import safe_name
from ios_bench.results import ENV_FILE  # noqa: F401 - the run folder's layout (re-exported)
from ios_core.atomic import atomic_write, atomic_write_json

PLAN_FILE = "plan.json"
LOCK_FILE = ".lock"
ROUNDS_DIR = "rounds"
SUBFOLDERS = ("refs", "schedules", "logs", "work", ROUNDS_DIR)


class RunFolder:
    """Paths of one run folder, and the few operations on its files that are not the store's."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __truediv__(self, rel: str) -> Path:
        return self.path / rel

    @property
    def plan_file(self) -> Path:
        return self.path / PLAN_FILE

    @property
    def env_file(self) -> Path:
        return self.path / ENV_FILE

    @property
    def lock_file(self) -> Path:
        return self.path / LOCK_FILE

    def make_subfolders(self) -> None:
        for sub in SUBFOLDERS:
            (self.path / sub).mkdir(exist_ok=True)

    # -- rounds in flight ---------------------------------------------------------------------------
    def rounds_file(self, cell_key: str) -> Path:
        return self.path / ROUNDS_DIR / (safe_name(cell_key.replace("|", "-")) + ".jsonl")

    def add_round(self, cell_key: str, round_record: dict) -> None:
        """Append one finished round of a cell (one line, fsync-ed)."""
        path = self.rounds_file(cell_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(round_record, default=_default) + "\n").encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def rounds(self, cell_key: str) -> list[dict]:
        """The rounds of a cell measured so far (an unfinished last line is ignored)."""
        path = self.rounds_file(cell_key)
        if not path.exists():
            return []
        out = []
        for raw in path.read_bytes().split(b"\n"):
            try:
                rec = json.loads(raw)
            except (ValueError, UnicodeDecodeError, RecursionError):
                continue
            if isinstance(rec, dict) and isinstance(rec.get("round"), int):
                out.append(rec)
        return out

    def clear_rounds(self, cell_key: str) -> None:
        self.rounds_file(cell_key).unlink(missing_ok=True)

    # -- files the sweep was given ------------------------------------------------------------------
    @staticmethod
    def model_file(spec: str) -> str | None:
        """Run-folder-relative copy of a graph file or an ONNX model (None for a zoo name)."""
        if not (spec.endswith(".json") or Path(spec).is_file()):
            return None
        if spec.lower().endswith(".onnx"):  # keeps its file name: the imported graph is named after it
            return f"models/{safe_name(spec[: -len('.onnx')])}/{Path(spec).name}"
        return f"models/{safe_name(spec.removesuffix('.json'))}.json"

    def keep_model_files(self, specs: list[str]) -> None:
        """A graph given as a file is copied into the run folder (``models/``): the run keeps the
        graph it measured, and every node reads that copy (shipped to it with the task)."""
        import shutil

        for spec in specs:
            src = Path(spec)
            rel = self.model_file(spec)
            if rel is None:
                continue
            dst = self.path / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists():
                atomic_write(dst, lambda f, src=src: shutil.copyfileobj(open(src, "rb"), f))
            weights = src.with_suffix(".npz")
            if weights.exists() and not dst.with_suffix(".npz").exists():
                atomic_write(dst.with_suffix(".npz"), lambda f, w=weights: shutil.copyfileobj(open(w, "rb"), f))

    def write_env(self, env: dict, previous: dict | None) -> None:
        """``env.json``; a resumed run keeps its first session's and appends this one under ``sessions``."""
        if previous:
            sessions = previous.get("sessions", [])
            first = {k: v for k, v in previous.items() if k != "sessions"}
            atomic_write_json(self.env_file, {**first, "sessions": sessions + [env]})
        else:
            atomic_write_json(self.env_file, env)


def _default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise InputError(f"cannot write to {folder}: {e.strerror or e}") from e


def default_run_name() -> str:
    return _dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def latest_run(root: Path = Path("runs")) -> Path | None:
    runs = [p for p in root.glob("*") if (p / PLAN_FILE).exists()] if root.is_dir() else []
    return max(runs, key=lambda p: (p / PLAN_FILE).stat().st_mtime) if runs else None


def npy_ok(path: Path) -> bool:
    """A readable .npy file (header and size), e.g. not truncated by a crash or edited by hand."""
    import numpy as np

    try:
        np.load(path, mmap_mode="r")
        return True
    except (OSError, ValueError):
        return False


def read_json(path: Path, on_problem=None) -> dict | None:
    """A JSON object from ``path``; None if absent or corrupt (reported through ``on_problem``)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        problem = f"{type(e).__name__}: {str(e)[:80]}"
    else:
        if isinstance(data, dict):
            return data
        problem = f"not a JSON object ({type(data).__name__})"
    if on_problem:
        on_problem(f"{path}: corrupt ({problem})")
    return None
