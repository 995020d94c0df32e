"""Builds reused across rounds, as a user's deployment would (issue 36): each round stays a fresh
process, but what a framework caches on disk (OpenVINO's model cache, XLA's persistent compilation
cache, torch.compile's inductor caches) is kept in a directory the rounds share, and reused.

A framework's cache lives in ``<dir>/<framework>/`` with a manifest written after every build that
finished (``ios-bench-cache.json``: the framework's version, the machine - processor model and
feature flags, architecture, Python - and every file's size, SHA-1 and modification time). Before a
build the cache is checked against it; one that is foreign or damaged (another version, another
machine, a file truncated or changed, files without a manifest: a build that did not finish) is
**ignored with a one-line note and rebuilt** (its directory emptied first). A file whose size and
modification time are the manifest's is not read again (its SHA-1 is the one recorded): checking
and sealing read only what a build added or changed, so warm builds do not grow with the cache.
The build's output is still checked against the oracle after every build, warm or cold: a cache
can never hide a wrong output.

    cache = BuildCache(cache_dir, "openvino", version).open()   # "cold", "warm" or "rejected"
    ...  # build with the framework's cache pointed at cache.dir
    cache.seal()                                                # the manifest of what is there now
    info.update(cache.info())                                   # the record says which it was

Where it is: the build option ``cache_dir``, else ``IOS_BENCH_BUILD_CACHE`` (:func:`resolve`).
The CLI's ``--build-cache off|run|user`` (``ios-bench run`` and ``ios-bench experiment``; default
``user``) sets it (:func:`scope_root`):

- ``user``: the user's cache folder (``platformdirs.user_cache_dir("ios-bench")/builds``, or
  ``IOS_BENCH_BUILD_CACHE_HOME``), kept across runs: a second run on the same machine reuses the
  first's builds (inductor's FX graphs, autotuning and Triton kernels, XLA's persistent cache,
  OpenVINO's model cache);
- ``run``: the run folder's ``cache/`` (an experiment's folder's ``cache/``, shared by its sweeps),
  so a sweep's rounds reuse their first round's build; the harness's default where nothing is set;
- ``off``: no cache, every round builds from nothing.

A directory a user names that cannot be written is :class:`CacheDirError` (one line; the CLI
checks it up front: :func:`dir_problem`).

Each cache is keyed by the framework, its versions and the device: ``<root>/<framework>/`` on the
CPU, ``<root>/<framework>@<device>/`` on a GPU (its name, e.g. ``torch-inductor@nvidia-h200``), and sealed
with the versions (e.g. torch and Triton for inductor on cuda), the machine and the device; a
cache that another version wrote is refused (a one-line note) and rebuilt. torch-compile and
torch-compile-cudagraphs share one inductor cache (``torch-inductor``): inductor keys its entries by
graph and options itself. The manifest also names the builds sealed into it (``builds``: the
model, batch and precision of each, :func:`build_name`; the round's worker names the one it makes in
:data:`BUILD_ENV`, and a warm cache's names are kept), since a framework's own entries (inductor's, XLA's
and OpenVINO's hashed files) do not say which model they hold: what lets the sweep's estimate tell a
cell's own build from another model's (:func:`sealed_builds`). The record's ``build_cache`` says where
the build looked (``dir``, ``scope``), whether it found a cache to reuse (``state`` cold, warm or
rejected; ``reused``), and a run's first build is still recorded apart (``first_build_seconds``), warm
or cold.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from ios_core.atomic import atomic_write_text

MANIFEST = "ios-bench-cache.json"
FORMAT = 1
# the directory a build keeps its cache in when its build option ``cache_dir`` is not given: the
# harness sets it to ``<run folder>/cache`` for each round's worker (``ios_bench.running.launch``)
ENV = "IOS_BENCH_BUILD_CACHE"
OFF = ("off", "none", "")
# --build-cache: which root the CLI puts in ENV (scope_root); the record names it (info)
SCOPES = ("off", "run", "user")
SCOPE_ENV = "IOS_BENCH_BUILD_CACHE_SCOPE"
HOME_ENV = "IOS_BENCH_BUILD_CACHE_HOME"  # the user scope's root instead of the user's cache folder
# the build a round's worker makes (build_name), set by the worker before the adapter builds
# (ios_bench.running.task_cell); seal() adds it to the manifest's builds
BUILD_ENV = "IOS_BENCH_BUILD"


def build_name(model: str, batch_size: int, precision: str | None) -> str:
    """How a manifest names a build sealed into the cache: ``model|bBATCH|precision``."""
    return f"{model}|b{int(batch_size)}|{precision or 'fp32'}"


def sealed_builds(folder) -> list[str] | None:
    """The builds (:func:`build_name`) the manifest in ``folder`` names, or None where it cannot say:
    no readable manifest, or one sealed before builds were named (or by a build no worker named)."""
    try:
        m = json.loads((Path(str(folder)) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    builds = m.get("builds") if isinstance(m, dict) else None
    return [b for b in builds if isinstance(b, str)] if isinstance(builds, list) and builds else None


def user_root() -> Path:
    """The user scope's root: ``IOS_BENCH_BUILD_CACHE_HOME``, else the user's cache folder's
    ``ios-bench/builds``."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser()
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("ios-bench")) / "builds"
    except ImportError:  # a bare machine without platformdirs: the XDG default
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ios-bench" / "builds"


def scope_root(scope: str, run_root=None) -> str | None:
    """The directory ``--build-cache scope`` keeps builds in: ``off`` -> "off", ``user`` -> the
    user's (:func:`user_root`), ``run`` -> ``<run_root>/cache`` where a folder shared by several
    sweeps is given (an experiment's), else None (each run folder's ``cache/``, the harness's
    default)."""
    if scope not in SCOPES:
        raise ValueError(f"build cache scope {scope!r}: expected one of {', '.join(SCOPES)}")
    if scope == "off":
        return "off"
    if scope == "user":
        return str(user_root())
    return None if run_root is None else str(Path(str(run_root)).expanduser().resolve() / "cache")


def device_key(name: str | None) -> str | None:
    """A directory name for a device (``NVIDIA H200`` -> ``nvidia-h200``); None on the CPU."""
    if not name:
        return None
    import re

    return re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")[:60] or "gpu"


def resolve(cache_dir) -> str | None:
    """The cache directory a build uses: its ``cache_dir`` option, else :data:`ENV`; ``off`` (or an
    empty value, or ``False``) for none."""
    import os

    value = os.environ.get(ENV) if cache_dir is None else cache_dir
    if value is None or value is False or str(value).strip().lower() in OFF:
        return None
    return str(value)


class CacheDirError(ValueError):
    """A build cache directory that cannot be used (one line)."""


def machine() -> dict:
    """What makes a build belong to this machine: the processor's model and feature flags, the
    architecture and the Python version."""
    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not model:
                model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = " ".join(sorted(value.split()))
            if model and flags:
                break
    except OSError:
        pass
    model = model or platform.processor()
    return {"cpu": model, "cpu_flags_sha1": hashlib.sha1(flags.encode()).hexdigest()[:16],
            "arch": platform.machine(), "python": sys.version.split()[0]}


def dir_problem(path) -> str | None:
    """Why ``path`` cannot hold build caches (one line), or None. Nothing is left on disk: an
    existing directory gets a probe file written and removed; a missing one needs its nearest
    existing parent to be a writable directory (it is created when a build opens its cache)."""
    p = Path(str(path)).expanduser()
    where = p
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        if not where.is_dir():
            raise NotADirectoryError(20, "not a directory")
        if where == p:
            fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=p)
            os.close(fd)
            os.unlink(probe)
        elif not os.access(where, os.W_OK | os.X_OK):
            raise PermissionError(13, "permission denied")
    except OSError as e:
        return f"build cache directory {str(path)[:200]} is not writable ({e.strerror or type(e).__name__})"
    return None


def _digest(path: Path) -> str:
    """A file's SHA-1, read in blocks."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(folder: Path, known: dict | None = None, times: dict | None = None) -> tuple[dict, dict]:
    """({relative path: [size, SHA-1]}, {relative path: modification time in ns}) of the cache's
    files. A file whose size and modification time are those ``known`` and ``times`` record (a
    manifest's ``files`` and ``mtimes``) is not read again: its SHA-1 is the one recorded. So
    checking a cache before a build and sealing it after cost a stat per file and a read of the new
    or changed ones only, not a read of the whole cache (which made warm build times grow with the
    cache)."""
    files: dict[str, list] = {}
    mtimes: dict[str, int] = {}
    known, times = known or {}, times or {}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.name != MANIFEST:
            rel = f.relative_to(folder).as_posix()
            st = f.stat()
            was = known.get(rel)
            if isinstance(was, list) and len(was) >= 2 and was[0] == st.st_size and times.get(rel) == st.st_mtime_ns:
                files[rel] = [st.st_size, was[1]]
            else:
                files[rel] = [st.st_size, _digest(f)]
            mtimes[rel] = st.st_mtime_ns
    return files, mtimes


class BuildCache:
    def __init__(self, root, framework: str, version: str | None, device: str | None = None):
        """``device``: the GPU's name for a GPU build (its own directory, and sealed with it);
        None on the CPU (the machine's processor is in every manifest)."""
        self.root = Path(str(root)).expanduser()
        self.framework = framework
        self.version = str(version)
        self.device = device or None
        key = device_key(self.device)
        self.dir = self.root / (f"{framework}@{key}" if key else framework)
        self.state: str | None = None
        self.note: str | None = None
        self._known: tuple[dict, dict] = ({}, {})  # the files open() found intact: seal() reads only changes
        self._builds: list[str] = []  # the builds a warm cache's manifest named (kept by seal())

    def _foreign(self) -> str | None:
        """Why the cache in ``self.dir`` cannot be reused (one line), or None."""
        try:
            m = json.loads((self.dir / MANIFEST).read_text())
        except FileNotFoundError:
            return "files without a manifest (a build that did not finish, or not ios-bench's)"
        except (OSError, ValueError) as e:
            return f"its manifest is unreadable ({type(e).__name__})"
        if not isinstance(m, dict) or m.get("format") != FORMAT or not isinstance(m.get("files"), dict):
            return "its manifest is not this harness's"
        if m.get("framework") != self.framework or m.get("version") != self.version:
            return f"built by {m.get('framework')} {m.get('version')}, this is {self.framework} {self.version}"
        if m.get("device") != self.device:
            return f"built for another device ({str(m.get('device'))[:60]}), this is {self.device}"
        here = machine()
        if m.get("machine") != here:
            theirs = m.get("machine") if isinstance(m.get("machine"), dict) else {}
            return f"built on another machine ({str(theirs.get('cpu') or '?')[:60]}, {theirs.get('arch')})"
        mtimes = m.get("mtimes") if isinstance(m.get("mtimes"), dict) else {}
        now, now_times = _files(self.dir, m["files"], mtimes)
        for rel, want in m["files"].items():
            got = now.get(rel)
            if got is None:
                return f"file {rel} is missing"
            if got[0] != want[0]:
                return f"file {rel} is truncated or grown ({got[0]} bytes, {want[0]} when built)"
            if got[1] != want[1]:
                return f"file {rel} changed since it was built"
        self._known = (now, now_times)
        self._builds = [b for b in m.get("builds") or [] if isinstance(b, str)]
        return None

    def open(self) -> BuildCache:
        """Check the cache before a build: ``state`` is ``cold`` (nothing there), ``warm`` (reused)
        or ``rejected`` (ignored, emptied and rebuilt; ``note`` says why, in one line)."""
        problem = dir_problem(self.root)
        if problem:
            raise CacheDirError(problem)
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.dir.exists() or not any(self.dir.iterdir()):
            self.dir.mkdir(parents=True, exist_ok=True)
            self.state = "cold"
            return self
        why = self._foreign()
        if why is None:
            self.state = "warm"
            return self
        self._known, self._builds = ({}, {}), []
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state = "rejected"
        self.note = f"{self.framework} build cache in {self.dir} ignored: {why}; rebuilt"
        print(f"note: {self.note}", file=sys.stderr)
        return self

    def seal(self) -> None:
        """After a build that finished: the manifest of what the cache holds now (written last,
        atomically: a build killed before it leaves files that the next round rejects), and the builds
        sealed into it: a warm cache's, and this one where the worker named it (:data:`BUILD_ENV`)."""
        files, mtimes = _files(self.dir, *self._known)
        this = os.environ.get(BUILD_ENV)
        self._builds += [this] if this and this not in self._builds else []
        manifest = {"format": FORMAT, "framework": self.framework, "version": self.version, "machine": machine(),
                    "device": self.device, "files": files, "mtimes": mtimes, "builds": self._builds}
        atomic_write_text(str(self.dir / MANIFEST), json.dumps(manifest, indent=1))

    def info(self) -> dict:
        """The record's ``build_cache``: the directory, its scope (where the CLI chose it),
        cold/warm/rejected and why, and ``reused`` (this build started from a cache an earlier
        build sealed)."""
        out = {"dir": str(self.dir), "state": self.state, "reused": self.state == "warm"}
        scope = os.environ.get(SCOPE_ENV)
        if scope:
            out["scope"] = scope
        if self.device:
            out["device"] = self.device
        if self.note:
            out["note"] = self.note
        return {"build_cache": out}


def open_cache(cache_dir, framework: str, version, device: str | None = None) -> BuildCache | None:
    """A build's cache, checked (:meth:`BuildCache.open`), in the directory :func:`resolve` gives, or
    None where there is none. ``device``: the GPU's name for a GPU build."""
    where = resolve(cache_dir)
    return BuildCache(where, framework, version, device).open() if where else None
