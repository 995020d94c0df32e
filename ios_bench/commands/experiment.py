"""ios-bench experiment: the IOS paper's experiments, one command each."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ios_bench.errors import InputError
from ios_bench.planning.options import MAX_SECONDS, FiniteFloat, check_threads
from ios_bench.reporting.escape import one_line, plain, term

EXPERIMENTS_ROOT = Path("runs") / "experiments"


def _echo_list() -> None:
    from rich.console import Console
    from rich.table import Table

    from ios_bench.experiments import all_experiments

    table = Table(title="ios-bench experiment NAME [--quick]", show_lines=False)
    for col in ("name", "what it measures", "paper result it reproduces"):
        table.add_column(col, overflow="fold")
    for name, exp in all_experiments().items():
        table.add_row(term(name), term(exp.summary), term(exp.paper))
    Console(soft_wrap=False).print(table)


def _default_out(name: str) -> Path:
    from ios_bench.records.runfolder import default_run_name

    return EXPERIMENTS_ROOT / f"{name}-{default_run_name()}"


def _latest(name: str) -> Path | None:
    if not EXPERIMENTS_ROOT.is_dir():
        return None
    found = [p for p in EXPERIMENTS_ROOT.glob(f"{name}-*") if (p / "experiment.json").is_file()
             or any(p.glob("*/experiment.json"))]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


@click.command("experiment", context_settings={"max_content_width": 100})
@click.argument("name", metavar="NAME")
@click.option("--models", "models_", default=None,
              help="Comma-separated models instead of the experiment's own (zoo names or graph files).")
@click.option("--device", default="cpu", show_default=True,
              help="Device kinds, comma-separated: cpu, cuda (cuda needs a GPU and its libraries).")
@click.option("--quick", is_flag=True, help="Small inputs and a short protocol: a smoke test in about a minute.")
@click.option("--reference", is_flag=True,
              help="The committed reference form (docs/results/): the full form reduced to fit a 2-core machine; "
                   "each report says what was reduced.")
@click.option("--threads", default=None, type=click.IntRange(1),
              help="Thread budget per cell [default: every core this process may use].")
@click.option("--out", default=None,
              help="Experiment folder [default: runs/experiments/NAME-<date-time>]; with NAME 'all', one "
                   "sub-folder per experiment.")
@click.option("--resume", is_flag=True,
              help="Continue an experiment folder (default: the latest of NAME) with its own options: finished "
                   "sweeps are kept, unfinished ones continue.")
@click.option("--deadline", default=None, type=FiniteFloat(1, MAX_SECONDS), metavar="SECONDS",
              help="No step (a sweep, its reference outputs, a wave of cells, a round) starts once SECONDS have "
                   "passed: a clean stop (exit 3), the report of what finished written; --resume continues it.")
@click.option("--dry-run", is_flag=True,
              help="Print the plan (every sweep with its models, batches, frameworks and options) and the estimate; "
                   "run nothing.")
@click.option("--gpu", "gpu_kind", default="h200", show_default=True, type=click.Choice(["h100", "h200"]),
              help="With --dry-run --device cuda: the GPU the estimate is for.")
@click.option("--build-cache", "build_cache", default="user", show_default=True,
              type=click.Choice(["off", "run", "user"]),
              help="Where builds are kept between rounds: off, run (the experiment folder's cache/, shared by its "
                   "sweeps) or user (the user's cache folder, across runs; sealed by versions and device).")
@click.option("--no-progress", is_flag=True, help="No progress bars (one line per cell only).")
def command(name, models_, device, quick, reference, threads, out, resume, deadline, dry_run, gpu_kind, build_cache,
            no_progress):
    """Run one of the IOS paper's experiments (NAME), or list them (NAME = list), or run every one
    of them (NAME = all, each into OUT/<name>/).

    Each experiment is a recipe over the sweep: its sweeps run into OUT/runs/<run>/ (ordinary run
    folders: isolated cells, outputs checked against the oracle, --resume), then OUT/report.md shows
    the paper's table or figure with our measured numbers (median ±std and the output check) beside
    the paper's published V100 figures, labelled as not measured here.

    \b
    Examples:
      ios-bench experiment list
      ios-bench experiment schedules --quick
      ios-bench experiment spec-batch --models squeezenet
      ios-bench experiment all --reference --out docs/results     (the committed reference report)
      ios-bench experiment headline --device cuda --deadline 540   (the GPU headline, one window)
      ios-bench experiment headline --device cuda --dry-run         (its plan and estimate, no GPU needed)
    """
    from ios_bench import experiments

    if name == "list":
        _echo_list()
        return
    if quick and reference:
        raise InputError("--quick and --reference are two different forms: choose one")
    # all: the paper's experiments (a recipe with in_all = False, the GPU headline, runs on its own)
    chosen = [n for n, e in experiments.all_experiments().items() if getattr(e, "in_all", True)] \
        if name == "all" else [experiments.get(name).name]
    if threads is not None:
        check_threads(threads, "--threads")
    from ios_bench.commands.run import parse_devices, parse_models

    devices = parse_devices(device)
    if dry_run and name == "all":
        raise InputError("--dry-run plans one experiment: name it")
    if any(d.startswith("cuda") for d in devices) and not dry_run:
        from ios_core.measurement.gpu import gpu_missing

        reason = gpu_missing()
        if reason is not None:
            raise InputError(f"--device cuda: {reason}; `ios-bench doctor` lists what runs here")
    models = None
    if models_ is not None:
        from ios_bench.planning.plan import absolute_model_spec

        models = [absolute_model_spec(m) for m in parse_models(models_)]
    if out is None:
        if resume:
            found = _latest(name)
            if found is None:
                raise InputError(f"--resume: no experiment folder {EXPERIMENTS_ROOT}/{name}-*; name one with --out")
            root = found
        else:
            root = _default_out(name)
    else:
        root = Path(out)
    given = {"models": models, "devices": devices if device != "cpu" else None, "quick": quick or None,
             "reference": reference or None, "threads": threads}
    command_line = ["ios-bench", "experiment", *sys.argv[sys.argv.index("experiment") + 1:]] \
        if "experiment" in sys.argv else ["ios-bench", "experiment", name]
    if dry_run:
        from ios_bench.experiments.base import Context
        from ios_bench.experiments.runner import dry_run as plan_only

        values = {k: v for k, v in given.items() if v is not None}
        ctx = Context(out=root, models=values.get("models"), devices=list(values.get("devices") or ["cpu"]),
                      quick=bool(values.get("quick")), threads=values.get("threads"),
                      reference=bool(values.get("reference")))
        for line in plan_only(experiments.get(chosen[0]), ctx, gpu_kind):
            click.echo(line)
        return
    from ios_bench.commands.run import use_build_cache

    click_ctx = click.get_current_context()
    explicit = click_ctx.get_parameter_source("build_cache") == click.core.ParameterSource.COMMANDLINE
    with use_build_cache(build_cache, root, explicit=explicit):
        _run(name, chosen, root, given, resume, no_progress, command_line, deadline)


def _run(name, chosen, root, given, resume, no_progress, command_line, deadline):
    import time

    from ios_bench import experiments
    from ios_bench.experiments.runner import Stopped

    end = None if deadline is None else time.monotonic() + deadline
    if name != "all":
        try:
            report = _run_one(experiments.get(chosen[0]), root, given, resume, not no_progress, command_line,
                              deadline=deadline)
        except Stopped as e:
            click.echo(f"stopped: {one_line(e)}", err=True)
            click.echo(f"report: {plain(e.report)}")
            raise SystemExit(3) from None
        click.echo(f"report: {plain(report)}")
        return
    if not resume:
        held = [n for n in chosen if (root / n).exists()]
        if held:
            raise InputError(f"{root} already holds {', '.join(held)}; use --resume to continue or another --out")
    # every experiment: one that fails does not stop the others (each is resumable on its own)
    reports, failed = [], []
    for i, exp_name in enumerate(chosen, 1):
        click.echo(f"== experiment {i}/{len(chosen)}: {exp_name} -> {plain(root / exp_name)}", err=True)
        try:
            rest = None if end is None else end - time.monotonic()
            if rest is not None and rest <= 0:
                click.echo(f"stopped: --deadline {deadline:g} s spent before experiment {exp_name}; continue with "
                           f"the same command and --resume", err=True)
                raise SystemExit(3)
            reports.append(_run_one(experiments.get(exp_name), root / exp_name, given, resume, not no_progress,
                                    command_line, all_=True, deadline=rest))
        except Stopped as e:
            click.echo(f"stopped: {one_line(e)}", err=True)
            raise SystemExit(3) from None
        except Exception as e:  # noqa: BLE001 - reported, and the exit code says so
            failed.append(f"{exp_name}: {type(e).__name__}: {one_line(e)}")
            click.echo(f"error: experiment {exp_name} stopped: {failed[-1]}", err=True)
    for r in reports:
        click.echo(f"report: {plain(r)}")
    if failed:
        click.echo(f"{len(failed)} of {len(chosen)} experiments did not finish ({'; '.join(failed)}); continue "
                   f"with the same command and --resume", err=True)
        raise SystemExit(1)


_OPTION = {"models": "--models", "devices": "--device", "quick": "--quick", "reference": "--reference",
           "threads": "--threads"}


def _run_one(exp, folder: Path, given: dict, resume: bool, progress: bool, command_line: list[str],
             all_: bool = False, deadline: float | None = None) -> Path:
    from ios_bench.experiments.base import Context
    from ios_bench.experiments.runner import run_experiment, saved_context

    values = {"models": None, "devices": ["cpu"], "quick": False, "reference": False, "threads": None}
    if resume and all_ and saved_context(folder) is None:
        resume = False  # `all --resume`: an experiment the interrupted run had not reached starts now
        if any(v is None for v in given.values()):
            first = next((s for s in (saved_context(p.parent) for p in sorted(folder.parent.glob("*/experiment.json")))
                          if s), None)
            for k in values:
                if given[k] is None and first and first.get(k) is not None:
                    given = {**given, k: first[k]}
    if resume:
        saved = saved_context(folder)
        if saved is None:
            raise InputError(f"--resume: {folder} holds no experiment (experiment.json missing)")
        for k in values:
            if saved.get(k) is not None:
                values[k] = saved[k]
        changed = [_OPTION[k] for k, v in given.items() if v is not None and v != values[k]]
        if changed:
            raise InputError(f"--resume continues {folder} with the options it was started with; "
                             f"{', '.join(changed)} differ (start a new folder with --out instead)")
    else:
        for k, v in given.items():
            if v is not None:
                values[k] = v
    ctx = Context(out=folder, models=values["models"], devices=list(values["devices"]), quick=bool(values["quick"]),
                  threads=values["threads"], resume=resume, reference=bool(values["reference"]))
    return run_experiment(exp, ctx, progress=progress, command=command_line, deadline=deadline)
