"""Where the harness may write: checked before any work starts, refused in one line.

- a run folder (``run --out``) is new, empty, or already an ios-bench run folder;
- a report folder (``--report-out``, ``report --out``) is new, empty, or holds only report files;
- an output file (``import -o`` and its ``.npz``, ``optimize -o`` and its ``.npz``,
  ``--stats-json``, ``export -o``) is new, or a regular file that ios-bench wrote (a graph, its
  weights, an exported model, search statistics: :func:`check_output_file` with ``kind``),
  which is replaced; never a folder, a symbolic link (whose target would be replaced by a
  file) or someone else's file;
- none of them is a system folder or lies inside one (nor, for a file, directly in ``/``), and
  the nearest existing folder above them is a writable directory. These rules hold for root too,
  whom the permission bits would not stop.

So the harness never overwrites or deletes a user's files, and a typo in ``--out`` does not
scatter a run into the home folder.
"""

from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path

from ios_bench.errors import InputError

# Folder trees that belong to the operating system: nothing of ours is written inside them.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                "/sys", "/usr", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/run", "/var/lock")
RUN_FOLDER_MARKERS = ("plan.json", "results.jsonl", ".lock")  # .lock: a sweep holds the folder
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
    if real == Path("/") or real.parent == Path("/"):
        return "a top-level system folder" if folder else "the root folder belongs to the operating system"
    if folder:
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
    """Only an earlier report's files, each a regular file (a symbolic link among them would be
    replaced by a file, or written through)."""
    return all((e in REPORT_FILES or e.endswith(".png")) and _regular(folder / e) for e in entries)


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def check_report_folder(path: str | os.PathLike, what: str = "--report-out") -> None:
    """A report folder: new, empty, or holding only an earlier report (which is replaced)."""
    _check_folder(Path(path), what, "report folder", _only_report_files)


# What an existing file must be for a command to replace it: one that ios-bench wrote.
_MAX_OWN_FILE = 2 ** 31  # bytes read to recognize one (protobuf's limit; our graphs are far smaller)


def _json_object(path: Path) -> dict | None:
    try:
        if path.stat().st_size > _MAX_OWN_FILE:
            return None
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _is_graph_json(path: Path) -> bool:
    """A graph or schedule in the reference IOS layout (``Graph.save``)."""
    doc = _json_object(path)
    return doc is not None and {"name", "input", "blocks"} <= doc.keys()


def _is_weights_npz(path: Path) -> bool:
    """The weights ``Graph.save`` writes beside a graph: an .npz of ``<node>/<name>`` arrays."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return False
    return bool(names) and all(n.endswith(".npy") and "/" in n for n in names)


def _is_own_onnx(path: Path) -> bool:
    """An ONNX model ``ios-bench export`` wrote (producer ``ios-bench``)."""
    try:
        if path.stat().st_size > _MAX_OWN_FILE:
            return False
        import onnx

        return onnx.ModelProto.FromString(path.read_bytes()).producer_name == "ios-bench"
    except Exception:  # unreadable, not protobuf, no onnx: not ours
        return False


def _is_stats_json(path: Path) -> bool:
    """The search statistics ``optimize --stats-json`` writes."""
    doc = _json_object(path)
    return doc is not None and "cost_ms_is" in doc and "cost_model" in doc


OWN_FILES = {
    "graph": ("an ios-bench graph", _is_graph_json),
    "weights": ("an ios-bench weights file", _is_weights_npz),
    "onnx": ("an ONNX model exported by ios-bench", _is_own_onnx),
    "stats": ("an ios-bench statistics file", _is_stats_json),
}


def check_output_file(path: str | os.PathLike, what: str, create_parents: bool = True,
                      kind: str | None = None) -> None:
    """A file the command will write: new or a regular file, outside system folders, in a folder
    we may write in (which must already exist unless ``create_parents``); never a symbolic link.
    With ``kind`` (a key of :data:`OWN_FILES`), an existing file is replaced only when it is one
    ios-bench wrote of that kind; a user's file there is refused, unchanged."""
    path = Path(path)
    try:
        os.lstat(path)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as e:  # a name too long, a file where a folder should be, a NUL byte
        raise InputError(f"{what} {path}: cannot write it ({getattr(e, 'strerror', None) or e})") from None
    reason = _system_reason(path, folder=False)
    if reason:
        raise InputError(f"{what} {path}: refusing to write there ({reason})")
    if path.is_symlink():
        raise InputError(f"{what} {path}: is a symbolic link; refusing to replace it (name the file itself, or a new "
                         "one)")
    if path.is_dir():
        raise InputError(f"{what} {path}: is a folder, not a file")
    if path.exists() and not path.is_file():
        raise InputError(f"{what} {path}: exists and is not a regular file")
    if not create_parents and not path.parent.is_dir():
        raise InputError(f"{what} {path}: folder {str(path.parent)!r} does not exist")
    if path.exists():
        if kind is not None:
            label, ours = OWN_FILES[kind]
            if not ours(path):
                raise InputError(f"{what} {path}: exists and is not {label}; refusing to overwrite it (move it away "
                                 "or choose another name)")
        if not os.access(path, os.W_OK):
            raise InputError(f"{what} {path}: cannot write it (permission denied)")
        _check_ancestor_writable(path, what)
    else:
        _check_ancestor_writable(path, what)
