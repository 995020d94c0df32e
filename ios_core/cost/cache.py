"""The persistent profile database: measured stage latencies, reused across runs, batch
sizes and models.

One SQLite file (``profiles.sqlite``), by default in the user cache directory
(``platformdirs.user_cache_dir("ios-bench")``). ``IOS_BENCH_CACHE`` overrides the location:
a path ending in ``.sqlite`` or ``.db`` names the database file, anything else a directory
that holds ``profiles.sqlite``. An explicit ``path`` argument wins over both.

Rows are keyed by the device fingerprint (CPU model, logical core count, torch and numpy
versions, machine, the spin/wait environment of ``ios_core.measurement.threads``; on CUDA also the GPU's
name, compute capability, driver, CUDA runtime, cuDNN version and SM clock,
``ios_core.measurement.gpu.fingerprint``), the batch size, the thread budget, the measurement method
(protocol, mode, provider and the provider library's version) and a canonical stage signature
(operator parameters and input shapes, never node names). The database runs in WAL mode with a
busy timeout, so two processes optimizing at once both read and write it safely (writes are
single INSERT OR REPLACE statements).

The same file keeps the cuDNN execution plan chosen for each convolution geometry
(:class:`CudnnPlanCache`, table ``cudnn_plans``), keyed by the GPU, its driver, the cuDNN library
and the cuDNN Frontend versions: every later process on that GPU builds the stored plan only,
instead of building and timing every plan cuDNN offers. ``cudnn_plan_cache(versions, path)`` is
the one function other modules call to open it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sqlite3
import threading
import time
from functools import cache
from pathlib import Path

from ios_core.ir import Node, Sequential

ENV_VAR = "IOS_BENCH_CACHE"
DB_NAME = "profiles.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS stage_latency (
    device TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    threads INTEGER NOT NULL,
    method TEXT NOT NULL,
    signature TEXT NOT NULL,
    latency_ms REAL NOT NULL,
    std_ms REAL,
    samples INTEGER,
    created REAL NOT NULL,
    description TEXT,
    disturbed TEXT,
    interference TEXT,
    PRIMARY KEY (device, batch_size, threads, method, signature)
);
CREATE TABLE IF NOT EXISTS block_plans (
    device TEXT NOT NULL,
    key TEXT NOT NULL,
    plan TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (device, key)
);
CREATE TABLE IF NOT EXISTS cudnn_plans (
    versions TEXT NOT NULL,
    geometry TEXT NOT NULL,
    gpu TEXT NOT NULL,
    record TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (versions, geometry)
);
CREATE TABLE IF NOT EXISTS devices (
    device TEXT PRIMARY KEY,
    description TEXT NOT NULL
);
"""


def default_path() -> Path:
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env).expanduser()
        return p if p.suffix in (".sqlite", ".db") else p / DB_NAME
    import platformdirs

    return Path(platformdirs.user_cache_dir("ios-bench")) / DB_NAME


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def library_version(dist: str) -> str | None:
    """Installed version of a distribution (without importing it), or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def measurement_environment() -> dict:
    """What of this process's environment changes a measurement besides the hardware: the
    spin/wait policy and the OpenMP variables actually set (``ios_core.measurement.threads``)."""
    from ios_core.measurement.threads import environment_record

    rec = environment_record()
    return {"spin_policy": rec["spin_policy"],
            **{k: v for k, v in rec["vars"].items() if k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "KMP_BLOCKTIME")}}


def device_fingerprint(device: str = "cpu") -> tuple[str, str]:
    """(short key, description) of the machine and environment measurements are valid for: CPU
    model, logical cores, machine, torch and numpy versions, and the spin/wait environment.
    (The provider and its library's version are part of the cost model's method key.)"""
    return _fingerprint(device, json.dumps(measurement_environment(), sort_keys=True))


@cache
def _fingerprint(device: str, environment: str) -> tuple[str, str]:
    # torch's version as installed, read without importing torch (a cost model for ONNX Runtime or
    # OpenVINO kernels imports none; the string is torch.__version__'s)
    parts = {"device": device, "cpu": _cpu_model(), "cores": os.cpu_count(),
             "machine": platform.machine(), "torch": library_version("torch"), "numpy": library_version("numpy"),
             "environment": json.loads(environment)}
    if device.startswith("cuda"):
        # the GPU's name, driver, CUDA runtime, cuDNN and clock setting (locked clock or application
        # clock: a different setting gives different latencies, a different key); never the
        # instantaneous SM clock, which moves between idle and boost
        from ios_core.measurement.gpu import clock_setting, fingerprint

        fp = fingerprint(int(device.split(":")[1]) if ":" in device else 0)
        parts["gpu"] = {**{k: fp.get(k) for k in ("name", "compute_capability", "driver", "cuda_runtime", "cudnn")},
                        "clock": clock_setting(fp)}
    desc = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(desc.encode()).hexdigest()[:16], desc


# ---- canonical stage signatures --------------------------------------------------------------
def _node_desc(node: Node, local: dict[int, int], externals: dict[int, int]) -> dict:
    if isinstance(node, Sequential):
        inner = []
        for leaf in node.nodes:
            inner.append(_node_desc(leaf, local, externals))
            local[id(leaf)] = len(local)
        return {"type": "sequential", "nodes": inner}
    d: dict = {"type": node.TYPE, "shape": list(node.output_shape)}
    for key, _ in node.ATTRS:
        if key == "inplace":
            continue
        v = getattr(node, key)
        d[key] = list(v) if isinstance(v, tuple) else v
    ins = []
    for term in node.inputs:
        t = []
        for v in term:
            src = v.node
            if id(src) in local:
                ref = ["s", local[id(src)]]
            else:
                ref = ["x", externals.setdefault(id(src), len(externals)), list(src.output_shape)]
            t.append(ref + [v.begin, v.end])
        ins.append(t)
    d["inputs"] = ins
    return d


def stage_signature(kind: str, groups: list[list[Node]]) -> tuple[str, str]:
    """(sha256 key, JSON description) of a stage: the kind, and for each group, each node's
    type, attributes, output shape and inputs, where an input is either an earlier node of the
    stage (by position) or an external value (numbered in first-use order, with its shape)."""
    local: dict[int, int] = {}
    externals: dict[int, int] = {}
    out = []
    for group in groups:
        g = []
        for node in group:
            g.append(_node_desc(node, local, externals))
            local[id(node)] = len(local)
        out.append(g)
    desc = json.dumps({"kind": kind, "groups": out}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(desc.encode()).hexdigest(), desc


class ProfileCache:
    """The SQLite profile database, with hit/miss counters for this process."""

    def __init__(self, path: str | os.PathLike | None = None, device: str = "cpu"):
        self.path = Path(path).expanduser() if path is not None else default_path()
        if self.path.suffix not in (".sqlite", ".db") and (self.path.is_dir() or not self.path.suffix):
            self.path = self.path / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.device, self.device_description = device_fingerprint(device)
        self.hits = 0
        self.misses = 0
        self.disturbed_skipped = 0  # rows not reused: measured on a disturbed machine
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False, isolation_level=None)
        self._retry(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
        # WAL with synchronous=NORMAL: a commit does not wait for the disk (it is synced at checkpoints);
        # the database stays consistent, and a power cut may lose the last rows of a cache, which are
        # measured again. A commit that waited for the disk cost ~0.15 ms of each GPU stage's bookkeeping.
        self._retry(lambda: self._conn.execute("PRAGMA synchronous=NORMAL"))
        self._retry(lambda: self._conn.executescript(_SCHEMA))
        cols = {r[1] for r in self._retry(lambda: self._conn.execute("PRAGMA table_info(stage_latency)").fetchall())}
        for col in ("disturbed", "interference"):  # a database written before disturbance was recorded
            if col not in cols:
                self._retry(lambda col=col: self._conn.execute(f"ALTER TABLE stage_latency ADD COLUMN {col} TEXT"))
        self._retry(lambda: self._conn.execute("INSERT OR IGNORE INTO devices VALUES (?, ?)",
                                               (self.device, self.device_description)))

    def _retry(self, fn, attempts: int = 20):
        for i in range(attempts):
            try:
                with self._lock:
                    return fn()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e) or i == attempts - 1:
                    raise
                time.sleep(0.05 * (i + 1))

    def get(self, batch_size: int, threads: int, method: str, signature: str) -> float | None:
        """A stored stage latency; None where there is none, or where it was measured on a disturbed
        machine (``ios_core.measurement.interference``: a search never reuses such a row, it measures again)."""
        row = self._retry(lambda: self._conn.execute(
            "SELECT latency_ms, disturbed FROM stage_latency WHERE device=? AND batch_size=? AND threads=? "
            "AND method=? AND signature=?", (self.device, batch_size, threads, method, signature)).fetchone())
        if row is None or row[1]:
            self.misses += 1
            self.disturbed_skipped += bool(row is not None)
            return None
        self.hits += 1
        return float(row[0])

    def snapshot(self, batch_size: int, threads: int, method: str) -> dict[str, float | None]:
        """Every stored stage latency of this device for one batch size, thread budget and method,
        read in one query: signature -> latency (None for a row measured on a disturbed machine).
        The measured GPU cost model asks about thousands of stages; one SELECT per stage cost
        ~0.2 ms of each stage's bookkeeping. Rows another process writes later are not in it."""
        rows = self._retry(lambda: self._conn.execute(
            "SELECT signature, latency_ms, disturbed FROM stage_latency WHERE device=? AND batch_size=? AND "
            "threads=? AND method=?", (self.device, batch_size, threads, method)).fetchall())
        return {sig: (None if dis else float(ms)) for sig, ms, dis in rows}

    def count_lookup(self, value: float | None, present: bool) -> None:
        """Count a lookup answered from a :meth:`snapshot` as :meth:`get` counts its own."""
        if value is None:
            self.misses += 1
            self.disturbed_skipped += bool(present)
        else:
            self.hits += 1

    def put(self, batch_size: int, threads: int, method: str, signature: str, latency_ms: float,
            std_ms: float | None = None, samples: int | None = None, description: str | None = None,
            disturbed: str | None = None, interference: dict | None = None) -> None:
        """Store a stage latency with what else used the machine while it was measured
        (``interference``) and, when that was too much, why (``disturbed``)."""
        self._retry(lambda: self._conn.execute(
            "INSERT OR REPLACE INTO stage_latency (device, batch_size, threads, method, signature, latency_ms, "
            "std_ms, samples, created, description, disturbed, interference) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?)",
            (self.device, batch_size, threads, method, signature, float(latency_ms), std_ms, samples, time.time(),
             description, disturbed, json.dumps(interference) if interference else None)))

    def put_many(self, rows: list[tuple]) -> None:
        """Store several stage latencies in one transaction: ``rows`` of :meth:`put`'s arguments
        (batch_size, threads, method, signature, latency_ms, std_ms, samples, description,
        disturbed, interference). One commit instead of one per row: a commit waits for the disk
        (milliseconds), which the measured GPU cost model cannot pay per stage."""
        if not rows:
            return
        now = time.time()
        values = [(self.device, b, t, m, sig, float(ms), std, n, now, desc, dis, json.dumps(inter) if inter else None)
                  for b, t, m, sig, ms, std, n, desc, dis, inter in rows]

        def write():
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO stage_latency (device, batch_size, threads, method, signature, latency_ms, "
                    "std_ms, samples, created, description, disturbed, interference) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
                    "?, ?, ?, ?)", values)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        self._retry(write)

    def get_plan(self, key: str) -> list | None:
        """A block's schedule the optimizer found before with the same costs (``put_plan``)."""
        row = self._retry(lambda: self._conn.execute(
            "SELECT plan FROM block_plans WHERE device=? AND key=?", (self.device, key)).fetchone())
        return json.loads(row[0]) if row else None

    def put_plan(self, key: str, plan: list) -> None:
        text = json.dumps(plan, separators=(",", ":"))
        self._retry(lambda: self._conn.execute("INSERT OR REPLACE INTO block_plans VALUES (?, ?, ?, ?)",
                                               (self.device, key, text, time.time())))

    def rows(self, batch_size: int) -> list[tuple[int, str, str, float]]:
        """Every stored (threads, method, signature, latency_ms) of this device for one batch
        size (for analyses such as ``measured.concurrency_pairs``)."""
        return self._retry(lambda: self._conn.execute(
            "SELECT threads, method, signature, latency_ms FROM stage_latency WHERE device=? AND batch_size=? "
            "AND disturbed IS NULL",
            (self.device, batch_size)).fetchall())

    def count(self) -> int:
        return self._retry(lambda: self._conn.execute(
            "SELECT COUNT(*) FROM stage_latency WHERE device=?", (self.device,)).fetchone()[0])

    def stats(self) -> dict:
        return {"path": str(self.path), "hits": self.hits, "misses": self.misses, "device": self.device,
                "disturbed_rows_remeasured": self.disturbed_skipped}

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# ---- the cuDNN plan chosen per convolution geometry ---------------------------------------------
PLAN_VERSION_KEYS = ("gpu", "compute_capability", "driver", "cudnn", "cudnn_frontend")


def plan_versions_key(versions: dict) -> str:
    """The key a plan is valid under: the GPU, driver, cuDNN and cuDNN Frontend (``versions``
    holds :data:`PLAN_VERSION_KEYS`; others, such as a fake device's, are part of it too)."""
    return json.dumps({k: versions.get(k) for k in sorted(set(PLAN_VERSION_KEYS) | set(versions))},
                      sort_keys=True, separators=(",", ":"))


class CudnnPlanCache:
    """The cuDNN execution plan chosen for each convolution geometry, persisted in the profile
    database (table ``cudnn_plans``) under the GPU, driver, cuDNN and cuDNN Frontend versions
    (``versions``). :meth:`get` answers only rows written under the same versions; a geometry
    stored under other versions on the same GPU is not used (its plans are rebuilt) and the
    reason is kept in :attr:`reasons` (never raised). Thread-safe, shared by processes (WAL)."""

    def __init__(self, versions: dict, path: str | os.PathLike | None = None):
        self.path = Path(path).expanduser() if path is not None else default_path()
        if self.path.suffix not in (".sqlite", ".db") and (self.path.is_dir() or not self.path.suffix):
            self.path = self.path / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.versions = dict(versions)
        self.key = plan_versions_key(self.versions)
        self.hits = self.misses = self.stale = 0
        self.reasons: list[str] = []
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False, isolation_level=None)
        self._retry(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
        self._retry(lambda: self._conn.executescript(_SCHEMA))

    _retry = ProfileCache._retry

    def get(self, geometry: str) -> dict | None:
        """The plan stored for ``geometry`` (a canonical string, ``cuda_kernels.conv_key``) under
        these versions, or None (then the caller tunes, and :meth:`put` stores the choice)."""
        row = self._retry(lambda: self._conn.execute(
            "SELECT record FROM cudnn_plans WHERE versions=? AND geometry=?", (self.key, geometry)).fetchone())
        if row is not None:
            self.hits += 1
            return json.loads(row[0])
        self.misses += 1
        other = self._retry(lambda: self._conn.execute(
            "SELECT versions FROM cudnn_plans WHERE gpu=? AND geometry=? AND versions<>? LIMIT 1",
            (str(self.versions.get("gpu")), geometry, self.key)).fetchone())
        if other is not None:
            self.stale += 1
            if len(self.reasons) < 5:
                theirs = json.loads(other[0])
                diff = ", ".join(f"{k} {theirs.get(k)} (here {self.versions.get(k)})" for k in sorted(theirs)
                                 if theirs.get(k) != self.versions.get(k))
                self.reasons.append(f"a cuDNN plan stored under other versions ({diff}) was not used: rebuilt")
        return None

    def put(self, geometry: str, record: dict) -> None:
        text = json.dumps(record, sort_keys=True, separators=(",", ":"))
        self._retry(lambda: self._conn.execute("INSERT OR REPLACE INTO cudnn_plans VALUES (?, ?, ?, ?, ?)",
                                               (self.key, geometry, str(self.versions.get("gpu")), text,
                                                time.time())))

    def count(self) -> int:
        return self._retry(lambda: self._conn.execute(
            "SELECT COUNT(*) FROM cudnn_plans WHERE versions=?", (self.key,)).fetchone()[0])

    def stats(self) -> dict:
        return {"path": str(self.path), "hits": self.hits, "misses": self.misses, "other_versions": self.stale,
                **({"reasons": list(self.reasons)} if self.reasons else {})}

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def cudnn_plan_cache(versions: dict, path: str | os.PathLike | None = None) -> CudnnPlanCache:
    """The cuDNN plan cache of the profile database at ``path`` (default: the profile database's
    location, ``IOS_BENCH_CACHE`` or the user cache directory) for the GPU and library versions in
    ``versions`` (a device's ``plan_versions()``: ``ios_core.runtime.cuda_device.CupyDevice``)."""
    return CudnnPlanCache(versions, path)
