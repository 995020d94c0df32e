"""The operator performance dataset: a folder of Parquet parts, one row per measured stage.

A row is one stage (a single operator, a group of operators run in order, or a concurrent
combination of 2 or 3 groups, or a merged convolution) measured on one machine with one kernel
provider, thread budget and batch size. It carries the stage's features
(:mod:`ios_core.cost.features`, columns ``f_<name>``), its measured latency with its spread and
every sample, and what it was measured on (machine, library versions, thread environment).

Each ``collect`` appends parts (``part-*.parquet``), written whole to a temporary name and then
renamed, so a crash never leaves half a part. A row's key is (machine, provider, threads, batch,
signature); ``collect`` skips keys already present, which makes it resumable.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path

from ios_bench.errors import InputError
from ios_core.atomic import atomic_write
from ios_core.cost.features import feature_names

KEY = ("machine", "provider", "threads", "batch", "signature")
DEFAULT_DIR = Path("datasets") / "ops"


def feature_columns() -> list[str]:
    return [f"f_{n}" for n in feature_names()]


def machine_info() -> dict:
    """What the measurements depend on beyond the stage: the CPU, the usable cores, the library
    versions and the thread environment (``machine`` is its short hash)."""
    from importlib import metadata

    from ios_bench.machine.envinfo import cpu_info
    from ios_core.measurement.threads import usable_cores

    versions = {}
    for dist in ("torch", "onnxruntime", "openvino", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    thread_env = {k: v for k, v in sorted(os.environ.items())
                  if k.startswith(("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_"))}
    info = {"cpu_model": cpu_info()["model"], "cores": usable_cores(), "versions": versions, "thread_env": thread_env}
    info["machine"] = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:12]
    return info


def read(folder: str | os.PathLike):
    """All rows of the dataset as a pandas DataFrame (empty, with no columns, when there are none)."""
    import pandas as pd

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder}: not a dataset folder")
    parts = sorted(folder.glob("part-*.parquet")) if folder.is_dir() else []
    if not parts:
        return pd.DataFrame()
    frames = []
    for p in parts:
        try:
            frames.append(pd.read_parquet(p))
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a bad file
            raise InputError(f"{p}: unreadable dataset part ({type(e).__name__}: {str(e)[:200]})") from None
    df = pd.concat(frames, ignore_index=True)
    missing = [c for c in (*KEY, "latency_ms", "model", "kind") if c not in df.columns]
    if missing:
        raise InputError(f"{folder}: dataset parts lack columns {missing}")
    return df


def keys(df) -> set[tuple]:
    if df.empty:
        return set()
    return set(map(tuple, df[list(KEY)].itertuples(index=False, name=None)))


class Writer:
    """Buffers rows and writes them as parts of at most ``every`` rows (atomically)."""

    def __init__(self, folder: str | os.PathLike, every: int = 25):
        self.folder = Path(folder)
        self.every = every
        self.rows: list[dict] = []
        self.parts: list[Path] = []
        self.written = 0

    def add(self, row: dict) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.every:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        # unique even for two writers of one process in one second (a resumed collect)
        path = self.folder / f"part-{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"
        table = pa.Table.from_pylist(self.rows)
        atomic_write(path, lambda f: pq.write_table(table, f))
        self.parts.append(path)
        self.written += len(self.rows)
        self.rows = []
