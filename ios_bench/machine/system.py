"""The one door to the operating system: external commands and sysfs/procfs files.

Clock locking and environment capture read and change machine settings only through these
functions, so tests replace the machine at the process boundary: a fake ``nvidia-smi`` first on
``PATH`` and a fake sysfs/procfs tree named by ``IOS_BENCH_SYSFS`` / ``IOS_BENCH_PROCFS``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CommandResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def error(self) -> str:
        """A one-line description of a failure."""
        text = (self.stderr or self.stdout).strip().splitlines()
        return f"{' '.join(self.argv[:3])} exited {self.returncode}" + (f": {text[-1][:160]}" if text else "")


def which(name: str) -> str | None:
    return shutil.which(name)


def run(argv: list[str], timeout: float = 30.0) -> CommandResult:
    """Run a command; never raises (a missing program or a timeout is a failed result)."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return CommandResult(list(argv), p.returncode, p.stdout, p.stderr)
    except FileNotFoundError:
        return CommandResult(list(argv), 127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return CommandResult(list(argv), 124, "", f"{argv[0]}: timed out after {timeout:g} s")
    except OSError as e:
        return CommandResult(list(argv), 126, "", f"{argv[0]}: {e}")


def sysfs(*parts: str) -> Path:
    """A path under sysfs (``/sys`` unless ``IOS_BENCH_SYSFS`` names another root)."""
    return Path(os.environ.get("IOS_BENCH_SYSFS", "/sys"), *parts)


def procfs(*parts: str) -> Path:
    return Path(os.environ.get("IOS_BENCH_PROCFS", "/proc"), *parts)


def read(path: Path) -> str | None:
    """The stripped contents of a small system file, or None when unreadable."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def write(path: Path, value: str) -> str | None:
    """Write a system setting; returns None on success or the reason it failed."""
    try:
        with open(path, "w") as f:
            f.write(value)
        return None
    except PermissionError:
        return f"no permission to write {path}"
    except OSError as e:
        return f"cannot write {path}: {e.strerror or e}"
