"""The one crash-safe file writer: a file is either its old self or wholly the new content.

Every writer goes through :func:`atomic_write`: the content is written to a temporary file in the
same folder (a unique name per process and call), flushed and ``fsync``-ed, then renamed over the
target with ``os.replace`` (atomic on POSIX and Windows), and the folder is ``fsync``-ed so the
rename survives a power loss. On any error the temporary file is removed.

    atomic_write_text(path, text)
    atomic_write_json(path, obj)
    atomic_write(path, lambda f: np.save(f, array))      # any writer taking a binary file object
    atomic_write_path(path, lambda tmp: lib.export_library(tmp))  # a tool that writes only by name
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(f)`` on a temporary binary file beside ``path``, then put it in place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        _place(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    return path


def atomic_write_path(path: str | os.PathLike, make: Callable[[str], object]) -> Path:
    """Call ``make(tmp)`` for a tool that writes a file only by its name (TVM's ``export_library``, which
    picks its format by the suffix: the temporary name keeps ``path``'s), then put it in place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        make(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _place(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    return path


def _place(tmp: str, path: Path) -> None:
    try:
        mode = path.stat().st_mode & 0o7777  # keep the permissions of a file being replaced
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # what a plain open() would have given
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj, indent: int | None = 1, default=str) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, default=default) + "\n")


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - not possible on every platform
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
