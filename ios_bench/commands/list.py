"""ios-bench list models|frameworks"""

from __future__ import annotations

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
                         "description": adapter.description})
        except Exception as e:  # a broken adapter module: report it, keep listing the others
            rows.append({"name": name, "available": False, "version": None, "tolerance": None, "precision": None,
                         "in_flight": None,
                         "reason": f"adapter failed to load ({type(e).__name__}: {str(e).splitlines()[0][:120]})",
                         "description": ""})
    return rows


def frameworks_table() -> Table:
    table = Table(title="Frameworks (device cpu)")
    for col in ("name", "status", "version / reason", "tolerance", "in flight", "description"):
        table.add_column(col)
    for row in framework_rows():
        status = "[green]available[/]" if row["available"] else "[yellow]unavailable[/]"
        tol = f"{row['tolerance']:.0e}" if row["tolerance"] is not None else ""
        table.add_row(term(row["name"]), status,
                      term((row["version"] or "") if row["available"] else row["reason"]), tol,
                      term(row["in_flight"] or ""), term(row["description"]))
    return table


@click.command("list")
@click.argument("what", type=click.Choice(["models", "frameworks"]), default="models")
def command(what: str):
    """List the model zoo (name, input shape, #operators, GMACs, params) or the frameworks
    (adapters) with whether each can run on this machine and why not, and how each keeps several
    requests in flight under a LoadGen scenario (docs/scenarios.md)."""
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=200)
    console.print(models_table() if what == "models" else frameworks_table())
