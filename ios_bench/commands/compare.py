"""ios-bench compare RUN_A RUN_B"""

from __future__ import annotations

import sys

import click

from ..options import FiniteFloat


@click.command("compare")
@click.argument("run_a")
@click.argument("run_b")
@click.option("--min-change", default=0.05, show_default=True, type=FiniteFloat(0, 100),
              help="Smallest relative change reported as a regression/improvement, whatever the noise.")
@click.option("--fail-on-regression", is_flag=True, help="Exit with code 1 when a regression is found.")
def command(run_a, run_b, min_change, fail_on_regression):
    """Per-cell change of median latency from RUN_A to RUN_B; flags regressions beyond noise
    (the larger of --min-change and the cells' combined p10-p90 half-spread)."""
    from rich.console import Console
    from rich.table import Table

    from ..compare import compare_runs
    from ..escape import term
    from ..sweep import label

    changes, problems = compare_runs(run_a, run_b, min_change)
    err = Console(stderr=True, soft_wrap=True)
    for p in problems:
        err.print(f"[yellow]warning:[/] {term(p)}", highlight=False)
    table = Table(title=term(f"{run_a} -> {run_b} (median latency)"))
    for col in ("model", "batch", "framework", "device", "A ms", "B ms", "change", "noise", "verdict"):
        table.add_column(col, justify="right" if col in ("batch", "A ms", "B ms", "change", "noise") else "left")
    colors = {"regression": "red", "improvement": "green", "fixed": "green"}
    for c in changes:
        color = next((v for k, v in colors.items() if c.verdict.startswith(k)), None)
        verdict = f"[{color}]{c.verdict}[/]" if color else c.verdict
        table.add_row(term(c.model), str(c.batch_size), term(label(c.framework)), term(c.device),
                      f"{c.median_a:.3f}" if c.median_a is not None else "-",
                      f"{c.median_b:.3f}" if c.median_b is not None else "-",
                      f"{c.change:+.1%}" if c.change is not None else "-",
                      f"±{c.noise:.1%}" if c.noise is not None else "-", verdict)
    out = Console()
    (out if out.is_terminal else Console(width=160)).print(table)
    regressions = [c for c in changes if c.verdict.startswith("regression")]
    improvements = [c for c in changes if c.verdict.startswith(("improvement", "fixed"))]
    click.echo(f"{len(changes)} cells: {len(regressions)} regression(s), {len(improvements)} improvement(s)")
    if fail_on_regression and regressions:
        sys.exit(1)
