"""Where the harness may write: checked before any work starts, refused in one line.

- a run folder (``run --out``) is new, empty, or already an ios-bench run folder;
- a report folder (``--report-out``, ``report --out``) is new, empty, or holds only report files;
- an output file (``optimize -o``/``--stats-json``, ``export -o``) is a regular file or new;
- none of them is a system folder or lies inside one, and the nearest existing folder above
  them is a writable directory.

So the harness never overwrites or deletes a user's files, and a typo in ``--out`` does not
scatter a run into the home folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError

# Folder trees that belong to the operating system: nothing of ours is written inside them.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                "/sys", "/usr", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/run", "/var/lock")
RUN_FOLDER_MARKERS = ("plan.json", "results.jsonl")
REPORT_FILES = ("report.md", "report.html", "results.csv")


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(os.path.expanduser(path)))


def _inside(path: Path, tree: str) -> bool:
    return path == Path(tree) or Path(tree) in path.parents


def _system_reason(path: Path, folder: bool) -> str | None:
    real = _resolved(path)
    for tree in SYSTEM_TREES:
        if _inside(real, tree):
            return f"{tree} belongs to the operating system"
    if folder:
        if real == Path("/") or real.parent == Path("/"):
            return "a top-level system folder"
        home = _resolved(Path.home())
        if real == home:
            return "your home folder itself"
    return None


def _check_ancestor_writable(path: Path, what: str) -> None:
    """The nearest existing folder above ``path`` is a directory we may write in."""
    parent = path.parent
    while not parent.exists():
        if parent == parent.parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot write to {path} ({what}): {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write to {path} ({what}): {parent} is not writable (permission denied)")


def _check_folder(path: Path, what: str, kind: str, accept) -> None:
    reason = _system_reason(path, folder=True)
    if reason:
        raise InputError(f"{what} {path}: refusing to write there ({reason}); choose a new folder")
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise InputError(f"{what} {path}: exists and is not a folder")
        entries = sorted(p.name for p in path.iterdir())
        if entries and not accept(path, entries):
            shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
            raise InputError(f"{what} {path}: exists and is not an ios-bench {kind} (it holds {shown}); "
                             "choose a new or empty folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise InputError(f"{what} {path}: cannot write there (permission denied)")
    else:
        _check_ancestor_writable(path, what)


def is_run_folder(path: Path) -> bool:
    return any((Path(path) / m).is_file() for m in RUN_FOLDER_MARKERS)


def check_run_folder(path: str | os.PathLike) -> None:
    """``run --out``: new, empty, or an ios-bench run folder (whose results --resume continues)."""
    _check_folder(Path(path), "--out", "run folder", lambda folder, entries: is_run_folder(folder))


def _only_report_files(folder: Path, entries: list[str]) -> bool:
    return all(e in REPORT_FILES or e.endswith(".png") for e in entries)


def check_report_folder(path: str | os.PathLike, what: str = "--report-out") -> None:
    """A report folder: new, empty, or holding only an earlier report (which is replaced)."""
    _check_folder(Path(path), what, "report folder", _only_report_files)


def check_output_file(path: str | os.PathLike, what: str, create_parents: bool = True) -> None:
    """A file the command will write: new or a regular file, outside system folders, in a folder
    we may write in (which must already exist unless ``create_parents``)."""
    path = Path(path)
    reason = _system_reason(path, folder=False)
    if reason:
        raise InputError(f"{what} {path}: refusing to write there ({reason})")
    if path.is_dir():
        raise InputError(f"{what} {path}: is a folder, not a file")
    if path.exists() and not path.is_file():
        raise InputError(f"{what} {path}: exists and is not a regular file")
    if not create_parents and not path.parent.is_dir():
        raise InputError(f"{what} {path}: folder {str(path.parent)!r} does not exist")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise InputError(f"{what} {path}: cannot write it (permission denied)")
    else:
        _check_ancestor_writable(path, what)
