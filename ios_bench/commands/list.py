"""ios-bench list models|frameworks"""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from ios_core import models


def models_table() -> Table:
    table = Table(title="Model zoo (batch 1)")
    for col in ("name", "input (C,H,W)", "operators", "GMACs", "params (M)", "description"):
        table.add_column(col, justify="right" if col in ("operators", "GMACs", "params (M)") else "left")
    for name in models.names():
        g = models.get(name)
        table.add_row(name, "x".join(map(str, g.input_shape)), str(g.num_operators()), f"{g.macs() / 1e9:.3f}",
                      f"{g.params() / 1e6:.2f}", models.describe(name))
    return table


def frameworks_table() -> Table:
    import adapters

    table = Table(title="Frameworks")
    for col in ("name", "status", "version / reason"):
        table.add_column(col)
    for name in adapters.names():
        adapter = adapters.get(name)
        reason = adapter.available()
        status = "[green]available[/]" if reason is None else "[yellow]unavailable[/]"
        table.add_row(name, status, reason or adapter.version() or "")
    return table


@click.command("list")
@click.argument("what", type=click.Choice(["models", "frameworks"]), default="models")
def command(what: str):
    """List the model zoo (name, input shape, #operators, GMACs, params) or the frameworks
    (adapters) with whether each can run on this machine and why not."""
    Console().print(models_table() if what == "models" else frameworks_table())
