"""ios-bench ops collect|fit|show: the operator performance dataset and the learned cost model."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ios_bench.errors import InputError
from ios_bench.ops import dataset as ds
from ios_bench.planning.loading import load_graph, parse_int_list, parse_list

DATASET_HELP = f"dataset folder (Parquet parts); default {ds.DEFAULT_DIR}"


@click.group("ops")
def command():
    """The operator performance dataset and the learned cost model.

    \b
      ios-bench ops collect --models inception_v3,squeezenet --threads 1,2
      ios-bench ops fit                     train the predictor, report held-out error
      ios-bench ops show                    the dataset as a table and plots
      ios-bench optimize --model randwire --cost learned
    """


@command.command("collect")
@click.option("--models", "models_", default="all", show_default=True,
              help="zoo models, graph JSON files or 'all' (the zoo), comma-separated")
@click.option("--providers", default="torch", show_default=True, help="kernel providers of the IOS runtime")
@click.option("--threads", "threads_", default=None, help="thread budgets, e.g. 1,2 (default: the usable cores)")
@click.option("--batch", "batches", default="1", show_default=True, help="batch sizes, e.g. 1,16")
@click.option("--dataset", "folder", type=click.Path(file_okay=False), default=str(ds.DEFAULT_DIR), help=DATASET_HELP)
@click.option("--max-stages", type=click.IntRange(min=0), default=150, show_default=True,
              help="most multi-group and merge stages kept per network (every operator is always kept)")
@click.option("-r", "r", type=click.IntRange(min=1, max=3), default=2, show_default=True,
              help="most operators in one group of the candidate stages")
@click.option("-s", "s", type=click.IntRange(min=2, max=3), default=3, show_default=True,
              help="most groups in the candidate stages (combinations of 2 and 3)")
@click.option("--repeat", type=click.IntRange(min=2), default=5, show_default=True, help="samples per stage")
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True)
@click.option("--min-sample-ms", type=click.FloatRange(min=0.0, max=10_000.0), default=1.0, show_default=True)
@click.option("--progress/--no-progress", default=None, help="progress bar (default: when stderr is a terminal)")
def collect_cmd(models_, providers, threads_, batches, folder, max_stages, r, s, repeat, warmup, min_sample_ms,
                progress):
    """Measure every distinct operator of the networks alone and in the concurrent combinations
    of 2 and 3 groups that IOS would form, per provider, thread budget and batch size, and append
    them to the dataset. Resumable: rows already in the dataset are skipped."""
    from ios_bench.ops.collect import CollectPlan, collect
    from ios_core import models as zoo
    from ios_core.measurement.threads import usable_cores

    names = zoo.default_names() if models_.strip() == "all" else parse_list(models_, "model")
    graphs = {}
    for name in names:
        g = load_graph(name)
        graphs[g.name if name.endswith(".json") else name] = g
    provider_list = parse_list(providers, "provider")
    thread_list = parse_int_list(threads_, "thread") if threads_ else [usable_cores()]
    over = [t for t in thread_list if t > usable_cores()]
    if over:
        raise InputError(f"--threads {over[0]} is more than the {usable_cores()} usable cores")
    plan = CollectPlan(graphs, provider_list, thread_list, parse_int_list(batches, "batch size"), r=r, s=s,
                       max_stages=max_stages, warmup=warmup, repeat=repeat, min_sample_ms=min_sample_ms)
    _check_providers(provider_list)
    machine = ds.machine_info()
    done = ds.keys(ds.read(folder))
    writer = ds.Writer(folder)
    show = sys.stderr.isatty() if progress is None else progress

    def bar(total):
        from tqdm import tqdm

        click.echo(f"{total} stages to measure", err=True)
        return tqdm(total=total, unit="stage", disable=not show, file=sys.stderr)

    try:
        counts = collect(plan, writer, done, machine, make_bar=bar)
    except KeyboardInterrupt:
        click.echo(f"interrupted: {writer.written} rows kept in {folder}; run the same command to resume", err=True)
        sys.exit(130)
    click.echo(f"measured {counts['measured']} stages ({counts['skipped']} already in the dataset); "
               f"{writer.written} rows written to {folder} (machine {machine['machine']})")


def _check_providers(providers: list[str]) -> None:
    """Refuse a provider the measured cost model cannot measure with, before anything is measured."""
    from ios_bench.ops.collect import provider_option
    from ios_core.cost.measured import make_measured_cost_model

    for p in providers:
        try:
            make_measured_cost_model(cache=False, **provider_option(p))
        except (TypeError, ValueError, RuntimeError) as e:
            raise InputError(f"provider {p!r}: {e}") from None


@command.command("fit")
@click.option("--dataset", "folder", type=click.Path(file_okay=False), default=str(ds.DEFAULT_DIR), help=DATASET_HELP)
@click.option("--holdout", default=None,
              help="networks to test on (train on the rest); default: leave each network out in turn")
@click.option("--machine", default=None, help="the machine (dataset column) to fit for, when it holds several")
@click.option("--rounds", type=click.IntRange(min=10, max=5000), default=300, show_default=True,
              help="boosting rounds")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="model file (default: beside the profile database, where --cost learned looks)")
def fit_cmd(folder, holdout, machine, rounds, output):
    """Train the stage-latency predictor (LightGBM) and report its error on held-out networks."""
    from ios_bench.ops.fit import fit, format_report
    from ios_core.cost.learned import default_model_path

    out = Path(output) if output else default_model_path()
    _check_writable(out)
    doc = fit(ds.read(folder), out, parse_list(holdout, "network") if holdout else None, machine, rounds)
    for line in format_report(doc):
        click.echo(line)
    click.echo(f"wrote {out}")


def _check_writable(path: Path) -> None:
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{path}: cannot create its folder ({e.strerror})") from None
    if path.is_dir() or not os.access(parent, os.W_OK):
        raise InputError(f"{path}: not writable")


@command.command("show")
@click.option("--dataset", "folder", type=click.Path(file_okay=False), default=str(ds.DEFAULT_DIR), help=DATASET_HELP)
@click.option("--plots", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="write latency_vs_macs.png and pair_speedup.png into this folder")
def show_cmd(folder, plot_dir):
    """The dataset: rows and median latency per provider, threads, batch and kind of stage."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ios_bench.ops.show import pair_speedups, plots, summary

    df = ds.read(folder)
    if df.empty:
        raise InputError(f"{folder}: the dataset is empty; run `ios-bench ops collect` first")
    table = Table(title=f"operator dataset {escape(str(folder))}: {len(df)} rows, "
                        f"{df['model'].nunique()} networks, {df['machine'].nunique()} machine(s)")
    for col in ("provider", "threads", "batch", "stage", "rows", "median ms", "median spread ms"):
        table.add_column(col, justify="left" if col in ("provider", "stage") else "right")
    for r in summary(df).itertuples():
        table.add_row(escape(str(r.provider)), str(r.threads), str(r.batch), r.stage, str(r.rows),
                      f"{r.median_ms:.4f}", f"{r.median_spread:.4f}")
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    sp = pair_speedups(df)
    if not sp.empty:
        for (prov, t), d in sp.groupby(["provider", "threads"]):
            click.echo(f"{prov}, {t} threads: {len(d)} combinations, concurrency speedup median "
                       f"{d['speedup'].median():.2f}x (p10 {d['speedup'].quantile(0.1):.2f}x, "
                       f"p90 {d['speedup'].quantile(0.9):.2f}x)")
    if plot_dir:
        for p in plots(df, Path(plot_dir)):
            click.echo(f"wrote {p}")
