"""What a lent GPU window (``benchmarks/gpu_headline.py``) keeps between its calls: its state,
loaded from the working folder or a carried copy of the last archive, its report, and the working
folder's records and logs packed into the output after every step (never build or compile caches)."""

from __future__ import annotations

import json
import os
import sqlite3
import tarfile
import zlib
from pathlib import Path

from benchmarks._window_steps import STEPS

ARCHIVE = "window.tar.gz"
STATE = "window.json"
REPORT = "window.md"
ARCHIVE_LIMIT_MIB = 15.0  # one file back is at most 16 MiB
# never packed: build and compile caches (rebuilt on the machine), installed wheels, bytecode
NOT_PACKED_DIRS = {"cache", "site", "__pycache__", "triton", "torchinductor", ".cache"}
NOT_PACKED_SUFFIXES = (".so", ".o", ".cubin", ".ptx", ".fatbin", ".pyc", ".whl")


def load_state(work: Path, carried: Path | None, say) -> dict:
    """The window's state: from the working folder where the machine was kept, else from a carried
    copy of the last call's archive (unpacked into ``work``), else new."""
    path = work / STATE
    if not path.is_file() and carried is not None and carried.is_file():
        work.mkdir(parents=True, exist_ok=True)
        try:
            with tarfile.open(carried) as tar:
                members = [m for m in tar.getmembers() if (m.isfile() or m.isdir()) and not m.name.startswith("/")
                           and ".." not in Path(m.name).parts]
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(work, members=members, filter="data")
                else:  # pragma: no cover - Python before 3.11.4
                    tar.extractall(work, members=members)
            say(f"resumed from the carried copy {carried} (the machine was not kept)")
        except (OSError, EOFError, zlib.error, tarfile.TarError) as e:  # a copy cut short: EOFError (gzip)
            say(f"the carried copy {carried} could not be unpacked ({type(e).__name__}: {str(e)[:120]}): starting "
                "over")
    elif path.is_file():
        say(f"continuing in {work} (the machine was kept)")
    try:
        state = json.loads(path.read_text())
        if not isinstance(state, dict):
            raise ValueError
    except (OSError, ValueError):
        state = {}
    state.setdefault("calls", [])
    state.setdefault("steps", {})
    return state


WEIGHTS_MIB = 1.0  # a saved graph's weights (.npz) above this are not packed, nor the graph beside them


def _packed(work: Path) -> list[Path]:
    """The working folder's files that travel back: records and logs. Not build or compile caches,
    and not a saved schedule whose weights are large (``<name>.npz`` with its ``<name>.json``: a
    resumed sweep searches it again, the profile database making that quick)."""
    out, heavy = [], set()
    for f in sorted(work.rglob("*.npz")):
        if f.is_file() and f.stat().st_size > WEIGHTS_MIB * 2**20:
            heavy |= {f, f.with_suffix(".json")}
    for f in sorted(work.rglob("*")):
        rel = f.relative_to(work)
        if not f.is_file() or f.is_symlink() or any(part in NOT_PACKED_DIRS for part in rel.parts[:-1]) \
                or f.name.endswith(NOT_PACKED_SUFFIXES) or f.name.endswith(("-wal", "-shm")) or f in heavy:
            continue
        out.append(f)
    return out


def pack(work: Path, out: Path, limit_mib: float = ARCHIVE_LIMIT_MIB) -> tuple[Path, list[str]]:
    """The working folder's records and logs as one archive in ``out`` (never build or compile
    caches); where it would pass ``limit_mib`` the largest files are left out, and named."""
    _checkpoint(work / "profiles.sqlite")
    files = _packed(work)
    left_out: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    target = out / ARCHIVE
    while True:
        tmp = out / (ARCHIVE + ".tmp")
        with tarfile.open(tmp, "w:gz") as tar:
            for f in files:
                tar.add(f, arcname=f.relative_to(work).as_posix(), recursive=False)
        if tmp.stat().st_size <= limit_mib * 2**20 or not files:
            os.replace(tmp, target)
            return target, left_out
        biggest = max(files, key=lambda f: f.stat().st_size)
        files.remove(biggest)
        left_out.append(f"{biggest.relative_to(work).as_posix()} ({biggest.stat().st_size / 2**20:.1f} MiB)")


def _checkpoint(db: Path) -> None:
    """A SQLite database in WAL mode holds its latest rows in ``-wal`` until checkpointed: write
    them into the file that is packed."""
    if db.is_file():
        try:
            con = sqlite3.connect(str(db), timeout=10)
            try:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                con.close()
        except sqlite3.Error:
            pass


def render(state: dict) -> str:
    lines = ["# GPU window", "", "One command per lent window (benchmarks/gpu_headline.py): the steps in order, each "
             "resumed by the next call until done.", "", "| step | status | seconds | exit | note | log |",
             "|---|---|---:|---:|---|---|"]
    for name in STEPS:
        st = state["steps"].get(name) or {}
        lines.append(f"| {name} | {st.get('status', 'not started')} | {st.get('seconds', '-')} | {st.get('rc', '-')} "
                     f"| {str(st.get('note', '')).replace('|', '/')} | {st.get('log', '-')} |")
    for i, call in enumerate(state["calls"], 1):
        lines += ["", f"## Call {i}: {call.get('started')} ({call.get('device') or '?'}, deadline "
                      f"{call.get('deadline_s')} s)", ""]
        lines += [f"- {x}" for x in call.get("lines") or []]
        lines.append(f"- clocks: {call.get('clocks_note', '-')}")
    return "\n".join(lines) + "\n"


def save(state: dict, work: Path, out: Path, say) -> None:
    """After every step: the state and report in the working folder, then packed into ``out``
    with copies of the report, the state and the headline's report beside the archive."""
    from ios_core.atomic import atomic_write_json, atomic_write_text

    work.mkdir(parents=True, exist_ok=True)
    atomic_write_json(work / STATE, state)
    atomic_write_text(work / REPORT, render(state))
    try:
        archive, left_out = pack(work, out)
        for name in (STATE, REPORT):
            atomic_write_text(out / name, (work / name).read_text())
        head = work / "headline" / "report.md"
        if head.is_file():
            atomic_write_text(out / "headline-report.md", head.read_text())
        if left_out:
            say(f"archive {archive.name}: left out to stay under {ARCHIVE_LIMIT_MIB:g} MiB: {', '.join(left_out)}")
    except OSError as e:
        say(f"the archive could not be written to {out} ({type(e).__name__}: {str(e)[:160]}): the working folder "
            f"{work} holds everything")

