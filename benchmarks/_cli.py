"""What the benchmark scripts' command lines share: a parser whose errors are one line and exit 2."""

from __future__ import annotations

import argparse


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit code 2
        self.exit(2, f"error: {message}\n")


def script_parser(doc: str) -> argparse.ArgumentParser:
    """A script's parser: its docstring's first paragraph as the description, the whole as the epilog."""
    return _OneLineParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog=doc)


def run_sweep(cmd: list[str], root) -> int | None:
    """Run a benchmark's sweep (``cmd``: its ``ios_bench run`` command) from ``root`` with the checkout on
    the path: 2 where the sweep refused its input (its own one-line error), else None (a stopped or failed
    sweep is warned of: the tables cover what finished)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run(cmd, cwd=root, env=env)
    if res.returncode == 2:
        return 2
    if res.returncode not in (0, 3):
        print(f"warning: the sweep exited {res.returncode}; its tables cover what finished", file=sys.stderr)
    return None


def size_options(name: str, size: int | None) -> dict:
    """A zoo model's keyword arguments for a smaller input of side ``size`` on the fake device (CPU
    kernels stand in): ``image_size`` for the networks, ``input_shape`` (16 channels) for ``sample``."""
    if not size:
        return {}
    return {"input_shape": (16, size, size)} if name == "sample" else {"image_size": size}
