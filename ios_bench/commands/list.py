"""ios-bench list models|frameworks"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ios_bench.reporting.escape import term
from ios_core import models


def models_table() -> Table:
    table = Table(title="Model zoo (batch 1)")
    for col in ("name", "input (C,H,W)", "operators", "GMACs", "params (M)", "description"):
        table.add_column(col, justify="right" if col in ("operators", "GMACs", "params (M)") else "left")
    for name in models.names():
        g = models.get(name)
        table.add_row(term(name), "x".join(map(str, g.input_shape)), str(g.num_operators()), f"{g.macs() / 1e9:.3f}",
                      f"{g.params() / 1e6:.2f}", term(models.describe(name)))
    return table


def framework_rows() -> list[dict]:
    """One row per registered adapter: name, available (bool), version or the reason it cannot
    run here, output tolerance, precision and description. Never raises for one bad adapter."""
    import adapters

    rows = []
    for name in adapters.names():
        try:
            adapter = adapters.get(name)
            reason = adapter.available()
            rows.append({"name": name, "available": reason is None, "reason": reason, "version": adapter.version(),
                         "tolerance": adapter.tolerance, "precision": adapter.precision,
                         "in_flight": getattr(adapter, "concurrency", "instances") or "cannot",
                         "precisions": {d: adapter.precisions(d) for d in adapter.devices},
                         "description": adapter.description})
        except Exception as e:  # a broken adapter module: report it, keep listing the others
            rows.append({"name": name, "available": False, "version": None, "tolerance": None, "precision": None,
                         "in_flight": None,
                         "reason": f"adapter failed to load ({type(e).__name__}: {str(e).splitlines()[0][:120]})",
                         "description": ""})
    return rows


LOG_NAME = "list-frameworks.log"


def log_path() -> Path:
    """Where the frameworks' own log output of ``list frameworks`` goes: ``logs/`` in the user's
    cache folder (``platformdirs.user_cache_dir("ios-bench")``, as the profile database's)."""
    try:
        import platformdirs

        base = Path(platformdirs.user_cache_dir("ios-bench"))
    except ImportError:  # pragma: no cover - platformdirs comes with the project
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ios-bench"
    return base / "logs" / LOG_NAME


@contextlib.contextmanager
def framework_output_to(path: Path):
    """The process's standard output and error (file descriptors 1 and 2, which the frameworks'
    C++ logging writes to directly: absl's preamble, TensorFlow's cudart stub and CPU feature lines)
    go to ``path`` inside the block, and so do those of any process started in it; the console
    gets them back after. Yields the path (a temporary file where ``path`` cannot be written)."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:
        fd, name = tempfile.mkstemp(prefix="ios-bench-", suffix=f"-{LOG_NAME}")
        path = Path(name)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield path
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)


def frameworks_table(rows: list[dict] | None = None) -> Table:
    table = Table(title="Frameworks (device cpu)")
    for col in ("name", "status", "version / reason", "tolerance", "in flight", "description"):
        table.add_column(col)
    for row in framework_rows() if rows is None else rows:
        status = "[green]available[/]" if row["available"] else "[yellow]unavailable[/]"
        tol = f"{row['tolerance']:.0e}" if row["tolerance"] is not None else ""
        table.add_row(term(row["name"]), status,
                      term((row["version"] or "") if row["available"] else row["reason"]), tol,
                      term(row["in_flight"] or ""), term(row["description"]))
    return table


def precisions_table(rows: list[dict]) -> Table:
    """Per framework and device, each precision its adapter declares and how it gets it
    (``Adapter.precisions``): "not yet: <reason>" where it cannot give it (a skipped cell in a sweep)."""
    from adapters.base import REFUSED

    table = Table(title="Precisions per framework and device (run --precision)")
    for col in ("name", "device", "precision", "how"):
        table.add_column(col)
    for row in rows:
        for device, offered in (row.get("precisions") or {}).items():
            for p, how in offered.items():
                text = f"[yellow]{term(how)}[/]" if how.startswith(REFUSED) else term(how)
                table.add_row(term(row["name"]), term(device), term(p), text)
    return table


@click.command("list")
@click.argument("what", type=click.Choice(["models", "frameworks"]), default="models")
def command(what: str):
    """List the model zoo (name, input shape, #operators, GMACs, params) or the frameworks
    (adapters) with whether each can run on this machine and why not, and how each keeps several
    requests in flight under a LoadGen scenario (docs/scenarios.md). The frameworks' own log
    lines (TensorFlow's C++ logging, ...) go to a log file in the user's cache folder, named at
    the end, not to the console."""
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=200)
    if what == "models":
        console.print(models_table())
        return
    with framework_output_to(log_path()) as log:  # importing each framework to ask whether it runs
        rows = framework_rows()
    console.print(frameworks_table(rows))
    console.print(precisions_table(rows))
    try:
        noisy = log.stat().st_size > 0
    except OSError:
        noisy = False
    if noisy:
        Console(stderr=True, soft_wrap=True).print(f"[dim]the frameworks' own log output: {term(log)}[/]",
                                                   highlight=False)
