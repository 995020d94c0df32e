"""ios-bench compare RUN_A RUN_B"""

from __future__ import annotations

import sys

import click

from ios_bench.planning.options import FiniteFloat


def verdict_options(threshold_from: str | None, interval_over: str):
    """The options every verdict command shares (``compare``, ``ab``): the interval's confidence,
    the output format and, with ``threshold_from`` (what the default is measured from), the noise
    threshold (``compare`` only: ``ab`` judges on its pairs with a practical floor, ``--min-change``);
    ``interval_over`` says what the interval is over."""
    def apply(f):
        f = click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
                         show_default=True, help="table for people; json or csv (one row per cell) for CI jobs.")(f)
        f = click.option("--confidence", default=0.95, show_default=True,
                         type=click.FloatRange(0, 1, min_open=True, max_open=True),
                         help=f"Confidence level of each change's interval (a t interval over {interval_over}).")(f)
        if threshold_from is None:
            return f
        return click.option("--noise-threshold", "threshold", default=None, type=FiniteFloat(0, 1000),
                            metavar="PCT", help="Smallest change (percent) flagged as a regression or improvement "
                                                f"[default: {threshold_from}, at least 1%].")(f)
    return apply


@click.command("compare")
@click.argument("run_a")
@click.argument("run_b")
@verdict_options("measured from the two runs' between-round spread", "the two runs' round medians")
@click.option("--fail-on-regression", is_flag=True, help="Exit with code 1 when a regression is found.")
def command(run_a, run_b, threshold, confidence, fmt, fail_on_regression):
    """Per-cell verdict from RUN_A to RUN_B over the cells' rounds: regression, improvement, within
    noise, or unstable (too few undisturbed rounds). A change is flagged only when its interval
    over rounds (a t interval on the log round medians, their robust spread moderated by the runs'
    typical spread) excludes zero and the change exceeds the noise threshold (docs/harness.md,
    "Compare").

    Two separate runs cannot show what the machine did between them: compare says how far apart
    they were measured and each run's canary, and marks a regression or improvement within the
    between-run drift an `ios-bench ab` run measured on this machine 'drift possible'. To decide
    whether B is faster, measure both in one sweep: `ios-bench ab A B`."""
    from ios_bench.reporting.compare import compare_runs
    from ios_bench.reporting.drift import between_runs

    result = compare_runs(run_a, run_b, threshold / 100 if threshold is not None else None, confidence)
    between_runs(result, run_a, run_b)
    show(result, fmt, confidence, fail_on_regression, {"run_a": str(run_a), "run_b": str(run_b)},
         f"{run_a} -> {run_b} (median of the undisturbed rounds' medians)", "rounds")


def show(result, fmt: str, confidence: float, fail_on_regression: bool, head: dict, title: str,
         rounds_col: str = "rounds") -> None:
    """Print a :class:`~ios_bench.reporting.compare.Comparison` as ``compare`` does (``ab`` too): a table,
    or json / csv on stdout with the summary on stderr; exit 1 with ``fail_on_regression`` when
    a regression (or, for ``ab``, a failed side) is found. ``head``: the json's leading fields."""
    import json

    from rich.console import Console
    from rich.table import Table

    from ios_bench.planning.cells import label
    from ios_bench.reporting.escape import csv_cell, term

    err = Console(stderr=True, soft_wrap=True)
    for p in result.problems:
        err.print(f"[yellow]warning:[/] {term(p)}", highlight=False)
    counts = result.counts()
    regressions = [c for c in result.changes if c.verdict.startswith(("regression", "failed"))]
    summary = (f"{len(result.changes)} cells: {counts['regression']} regression(s), {counts['improvement']} "
               f"improvement(s), {counts['within noise']} within noise, {counts['unstable']} unstable"
               + (f", {counts['failed']} failed" if counts.get("failed") else "") + "; "
               f"{result.threshold_name} {result.threshold:.1%} ({result.threshold_source})")
    if fmt == "json":
        click.echo(json.dumps({**head, "threshold": result.threshold, "threshold_name": result.threshold_name,
                               "threshold_source": result.threshold_source, "confidence": confidence,
                               "typical_spread": result.typical_spread,
                               "counts": counts, "notes": result.notes,
                               "cells": [c.to_dict() for c in result.changes]}, indent=1))
    elif fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        cols = list(result.changes[0].to_dict()) if result.changes else ["cell", "verdict"]
        w = csv.writer(buf)
        w.writerow(cols)
        for c in result.changes:
            w.writerow([csv_cell(v) for v in c.to_dict().values()])
        click.echo(buf.getvalue(), nl=False)
    else:
        for note in result.notes:
            err.print(f"[yellow]note:[/] {term(note)}", highlight=False)
        table = Table(title=term(title))
        ci = f"{confidence:.0%} CI"
        numeric = ("batch", "A ms", "B ms", rounds_col, "change", ci)
        for col in ("model", "batch", "framework", "device", "A ms", "B ms", rounds_col, "change", ci, "verdict"):
            table.add_column(col, justify="right" if col in numeric else "left")
        colors = {"regression": "red", "failed": "red", "improvement": "green", "fixed": "green", "unstable": "yellow"}
        for c in result.changes:
            color = next((v for k, v in colors.items() if c.verdict.startswith(k)), None)
            # ab's verdicts all say why (the floor; what a "within noise" run could have detected)
            shown = c.why and (c.verdict in ("unstable", "failed") or c.floor is not None)
            text = term(c.verdict + (f" ({c.why})" if shown else ""), False)
            verdict = f"[{color}]{text}[/]" if color else text
            table.add_row(term(c.model), str(c.batch_size), term(label(c.framework, c.precision)), term(c.device),
                          f"{c.median_a:.3f}" if c.median_a is not None else "-",
                          f"{c.median_b:.3f}" if c.median_b is not None else "-",
                          f"{c.rounds_a}/{c.rounds_b}" if rounds_col == "rounds" else str(c.rounds_a),
                          f"{c.change:+.1%}" if c.change is not None else "-",
                          f"[{c.ci_low:+.1%}, {c.ci_high:+.1%}]" if c.ci_low is not None else "-", verdict)
        out = Console()
        (out if out.is_terminal else Console(width=170)).print(table)
        click.echo(summary)
    if fmt != "table":
        err.print(summary, highlight=False)
    if fail_on_regression and regressions:
        sys.exit(1)


def show_verdicts(folder, ab: dict, fmt: str = "table", confidence: float = 0.95,
                  fail_on_regression: bool = False) -> None:
    """Print the paired verdicts of an ab run folder (``ab``: its plan's ``ab``), as ``ab`` does at its end
    and ``run --resume`` of an ab folder does."""
    from ios_bench.running.ab import paired_comparison

    show(paired_comparison(folder, ab["min_change"], confidence), fmt, confidence, fail_on_regression,
         {"run": str(folder), "a": ab["a"], "b": ab["b"]},
         f"A -> B in {folder} (paired rounds: B's round against A's of the same pass)", "pairs")
