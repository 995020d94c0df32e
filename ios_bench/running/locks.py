"""Exclusive locks that die with their holder: ``flock`` on a lock file.

The kernel releases an ``flock`` when the last descriptor of its open file closes, so a holder
that dies in any way (SIGKILL included) never leaves a stale lock behind. The holder's pid and
what it is doing are written into the file, only to say who holds it.

    with FileLock(folder / ".lock", "a sweep of runs/NAME"):
        ...            # a second FileLock on the same file raises Busy (an InputError)
"""

from __future__ import annotations

import os
from pathlib import Path

from ios_bench.errors import InputError


class Busy(InputError):
    """Someone else holds the lock."""


class FileLock:
    def __init__(self, path: str | os.PathLike, what: str):
        self.path = Path(path)
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> FileLock:
        import fcntl

        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read(fd)
                os.close(fd)
                raise Busy(f"{self.path.parent}: busy, {holder or 'another process'} holds {self.path.name}; "
                           "wait for it to finish (a lock dies with its holder)") from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # its holder removed the file (and its folder) before releasing it: take the new one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{self.what} (pid {os.getpid()})\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            try:
                os.ftruncate(self._fd, 0)
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 300, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
