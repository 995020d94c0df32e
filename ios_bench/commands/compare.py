"""ios-bench compare RUN_A RUN_B"""

from __future__ import annotations

import sys

import click

from ..options import FiniteFloat


@click.command("compare")
@click.argument("run_a")
@click.argument("run_b")
@click.option("--min-change", default=0.05, show_default=True, type=FiniteFloat(0, 100),
              help="Smallest relative change reported as a regression/improvement, however significant.")
@click.option("--alpha", default=0.05, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Significance level of the Mann-Whitney U test.")
@click.option("--confidence", default=0.95, show_default=True,
              type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Confidence level of the bootstrap interval of each change.")
@click.option("--fail-on-regression", is_flag=True, help="Exit with code 1 when a regression is found.")
def command(run_a, run_b, min_change, alpha, confidence, fail_on_regression):
    """Per-cell change of median latency from RUN_A to RUN_B over the stored timing samples, with
    a bootstrap confidence interval; a change is flagged only when a Mann-Whitney U test rejects
    (p < --alpha), the interval excludes zero and the change is at least --min-change."""
    from rich.console import Console
    from rich.table import Table

    from ..compare import compare_runs
    from ..escape import term
    from ..sweep import label

    changes, problems = compare_runs(run_a, run_b, min_change, alpha, confidence)
    err = Console(stderr=True, soft_wrap=True)
    for p in problems:
        err.print(f"[yellow]warning:[/] {term(p)}", highlight=False)
    table = Table(title=term(f"{run_a} -> {run_b} (median of the timing samples)"))
    ci = f"{confidence:.0%} CI"
    numeric = ("batch", "A ms", "B ms", "change", ci, "p")
    for col in ("model", "batch", "framework", "device", "A ms", "B ms", "change", ci, "p", "verdict"):
        table.add_column(col, justify="right" if col in numeric else "left")
    colors = {"regression": "red", "improvement": "green", "fixed": "green"}
    for c in changes:
        color = next((v for k, v in colors.items() if c.verdict.startswith(k)), None)
        verdict = f"[{color}]{c.verdict}[/]" if color else c.verdict
        table.add_row(term(c.model), str(c.batch_size), term(label(c.framework)), term(c.device),
                      f"{c.median_a:.3f}" if c.median_a is not None else "-",
                      f"{c.median_b:.3f}" if c.median_b is not None else "-",
                      f"{c.change:+.1%}" if c.change is not None else "-",
                      f"[{c.ci_low:+.1%}, {c.ci_high:+.1%}]" if c.ci_low is not None else "-",
                      f"{c.p_value:.3g}" if c.p_value is not None else "-", verdict)
    out = Console()
    (out if out.is_terminal else Console(width=160)).print(table)
    regressions = [c for c in changes if c.verdict.startswith("regression")]
    improvements = [c for c in changes if c.verdict.startswith(("improvement", "fixed"))]
    click.echo(f"{len(changes)} cells: {len(regressions)} regression(s), {len(improvements)} improvement(s)")
    if fail_on_regression and regressions:
        sys.exit(1)
