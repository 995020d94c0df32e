"""ios-bench report RUN [--out reports/NAME]"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("run")
@click.option("--out", default=None, help="Report folder [default: reports/<run name> beside the run].")
def command(run, out):
    """Write report.md, report.html, results.csv and PNG plots for a run folder (latency and
    throughput tables with GeoMean, speedup of IOS-Both, normalized-throughput and vs-batch
    plots with their spread, output checks, failures, environment)."""
    from ios_bench.reporting.escape import one_line
    from ios_bench.reporting.paths import default_report_folder
    from ios_bench.reporting.report import write_report
    from ios_bench.running.outputs import check_report_folder

    run_path = Path(run)
    target = Path(out) if out else default_report_folder(run_path)
    check_report_folder(target, "--out")
    paths = write_report(run_path, target)
    for p in paths["problems"]:
        click.echo(f"warning: {one_line(p)}", err=True)
    click.echo(f"report: {paths['html']}")
    click.echo(f"        {paths['md']}")
    click.echo(f"        {paths['csv']}")
