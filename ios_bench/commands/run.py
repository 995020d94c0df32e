"""ios-bench run: the sweep (models x batch sizes x frameworks + IOS schedules x devices)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import click
from click.core import ParameterSource

from ios_bench.errors import InputError
from ios_bench.planning.loading import parse_int_list, parse_list
from ios_bench.planning.options import MAX_SECONDS, SEED, FiniteFloat, check_threads, finite_json
from ios_bench.planning.plan import (
    DEFAULT_CAP_FACTOR,
    DEFAULT_EXTRA_ROUNDS,
    DEFAULT_MIN_REPEAT,
    DEFAULT_MODELS,
    DEFAULT_REPEAT,
    DEFAULT_ROUNDS,
    DEFAULT_SAMPLE_S,
    DEFAULT_WARMUP_S,
    IOS_ADAPTER,
    MAX_CAP_FACTOR,
    MAX_PROTOCOL_S,
    OPT_IN_FRAMEWORKS,
    SCHEDULES,
    Plan,
    absolute_model_spec,
    protocol_problem,
)
from ios_bench.planning.plan import ios_providers as ios_providers_registry
from ios_bench.records.runfolder import PLAN_FILE, default_run_name, latest_run
from ios_bench.reporting.escape import term
from ios_bench.running.executors import parse_device
from ios_bench.running.fleet import make_executor
from ios_bench.running.outputs import check_report_folder, check_run_folder
from ios_bench.running.rounds import AUTO
from ios_bench.running.sweep import Sweep
from ios_bench.scenarios import LATENCY, SCENARIOS
from ios_core.cost import COST_KINDS

# option name -> Plan field
_PLAN_OPTIONS = {"models": "models", "batch": "batch_sizes", "frameworks": "frameworks", "schedules": "schedules",
                 "ios_providers": "ios_providers",
                 "device": "devices", "warmup": "warmup", "number": "number", "repeat": "repeat",
                 "warmup_time": "warmup_s", "sample_time": "sample_s", "min_repeat": "min_repeat",
                 "cap_factor": "cap_factor", "extra_rounds": "extra_rounds",
                 "min_sample_ms": "min_sample_ms", "timeout": "timeout", "optimize_timeout": "optimize_timeout",
                 "threads": "threads", "seed": "seed",
                 "cost_model": "cost_model", "lock_clocks": "lock_clocks", "gpu_clock": "gpu_clock_mhz",
                 "executor": "executor", "ray_address": "ray_address",
                 "adapter_option": "adapter_options", "ios_option": "ios_options",
                 "sample_utilization": "sample_utilization",
                 "rounds": "rounds", "target_ci": "target_ci", "time_budget": "time_budget",
                 "round_seed": "round_seed", "scenario": "scenario", "scenario_setting": "scenario_settings",
                 "quick": "quick", "instances": "instances", "precision": "precisions",
                 "calibration_data": "calibration_data"}


def calibration_data_option(folder: str | None) -> str | None:
    """``--calibration-data DIR``: the folder, absolute (``--resume`` works from anywhere), checked to be a
    folder of .npy files here; each file's shape and dtype are checked against each model's input
    (``ios_core.quantize.read_calibration_data``) when the sweep has loaded its models, before it writes."""
    if folder is None:
        return None
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise InputError(f"--calibration-data {folder}: not a folder")
    if not any(p.suffix == ".npy" for p in path.iterdir()):
        raise InputError(f"--calibration-data {folder}: no .npy files in it")
    return str(path.resolve())


def parse_adapter_options(items: tuple[str, ...]) -> dict:
    """``FRAMEWORK:OPTION=VALUE`` (repeatable) -> ``{framework: {option: value}}``; VALUE is read as
    JSON where it parses (``4``, ``true``, ``"x"``), else kept as text."""
    import json

    out: dict = {}
    for item in items:
        fw, sep, rest = item.partition(":")
        key, eq, raw = rest.partition("=")
        if not (sep and eq and fw.strip() and key.strip()):
            raise InputError(f"bad --adapter-option {item!r}: expected FRAMEWORK:OPTION=VALUE, "
                             "e.g. tvm-tuned:trials_per_task=4")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"bad --adapter-option {item!r}: the value must be finite")
        if key.strip() == "cache_dir":  # a build cache a user names: usable, or one line (adapters.build_cache)
            from adapters.build_cache import dir_problem

            problem = dir_problem(value) if isinstance(value, str) and value.strip() else "an empty path"
            if problem:
                raise InputError(f"bad --adapter-option {item!r}: {problem}")
        out.setdefault(fw.strip(), {})[key.strip()] = value
    return out


def parse_ios_options(items: tuple[str, ...]) -> dict:
    """``KEY=VALUE`` (repeatable) -> the IOS optimizer settings of every IOS cell (``Plan.ios_options``:
    pruning ``max_group_size``/``max_num_groups``, ``optimize_batch``, ``optimize_threads``,
    ``cost_cache``), each checked (one line naming it)."""
    from ios_bench.planning.plan import IOS_OPTIONS, ios_options_problem

    out: dict = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not (eq and key.strip() and raw.strip()):
            raise InputError(f"bad --ios-option {item!r}: expected KEY=VALUE with KEY one of {', '.join(IOS_OPTIONS)}, "
                             "e.g. max_group_size=2")
        raw = raw.strip()
        out[key.strip()] = int(raw) if raw.lstrip("-").isdigit() else raw
    problem = ios_options_problem(out)
    if problem:
        raise InputError(f"bad --ios-option: {problem}")
    return out


def parse_models(text: str) -> list[str]:
    from ios_bench.running.worker import load_plugins
    from ios_core import models

    load_plugins()
    items = parse_list(text, "model")
    if items == ["all"]:
        return models.default_names()  # the CNN zoo: vit_tiny and convnext_tiny run when named
    unknown = [m for m in items if m not in models.names()
               and not (m.endswith((".json", ".onnx")) or Path(m).is_file())]
    if unknown:
        raise InputError(f"unknown model {', '.join(unknown)}; choose from: {', '.join(models.names())} "
                         "(or a graph .json file, or an .onnx model)")
    for m in items:
        if m.endswith((".json", ".onnx")) and not Path(m).is_file():
            raise InputError(f"{m}: no such file")
    return items


def parse_frameworks(text: str) -> list[str]:
    import adapters
    from ios_bench.running.worker import load_plugins

    load_plugins()
    peers = [n for n in adapters.names() if n != IOS_ADAPTER]
    if text.strip() == "none":  # IOS schedules only
        return []
    if text.strip() == IOS_ADAPTER:
        raise InputError(f"{IOS_ADAPTER!r} runs IOS schedules: choose them with --schedules")
    return parse_list(text, "framework", peers)


def parse_devices(text: str) -> list[str]:
    items = parse_list(text, "device")
    for d in items:
        parse_device(d)
    return items


def parse_rounds(text: str) -> int | str:
    """``--rounds``: a whole number of rounds from 1 to 100, or ``auto``."""
    from ios_bench.planning.plan import MAX_ROUNDS

    t = text.strip().lower()
    if t == AUTO:
        return AUTO
    try:
        n = int(t)
    except ValueError:
        raise InputError(f"bad --rounds {text!r}: expected a whole number from 1 to {MAX_ROUNDS}, or auto") from None
    if not 1 <= n <= MAX_ROUNDS:
        raise InputError(f"bad --rounds {text!r}: expected a whole number from 1 to {MAX_ROUNDS}, or auto")
    return n


def parse_scenario_settings(items: tuple[str, ...], scenario: str, quick: bool) -> dict:
    """``KEY=VALUE`` (repeatable) -> the scenario's overrides, each checked against the scenario
    (``ios_bench.scenarios.settings``); also checks that LoadGen is installed."""
    from ios_bench.scenarios import LATENCY, loadgen_problem
    from ios_bench.scenarios.settings import settings_for

    if scenario == LATENCY:
        if items:
            raise InputError("--scenario-setting needs a LoadGen scenario (--scenario single-stream, multi-stream, "
                             "offline or server)")
        return {}
    problem = loadgen_problem()
    if problem:
        raise InputError(f"--scenario {scenario}: {problem}")
    out: dict = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not (eq and key.strip()):
            raise InputError(f"bad --scenario-setting {item!r}: expected KEY=VALUE, e.g. min_query_count=256")
        try:
            value = finite_json(raw)
        except ValueError:
            value = raw.strip()
        out[key.strip()] = value
    settings_for(scenario, quick, out)  # every override checked (InputError naming it)
    return out


def parse_instances(text: str | None) -> list[int] | None:
    """``--instances 1,2`` or ``auto`` (None: every count from 1 to the thread budget)."""
    if text is None or text.strip().lower() == "auto":
        return None
    return parse_int_list(text, "instance count")


def parse_precisions(text: str) -> list[str]:
    """``--precision fp32,bf16,int8``: known precisions (``ios_core.check.PRECISIONS``), each once."""
    from ios_core.check import PRECISIONS

    return parse_list(text, "precision", list(PRECISIONS))


def precision_offer_problem(precisions: list[str], frameworks: list[str] | None, schedules: list[str] | None,
                            devices: list[str], ios_providers: list[str] | None = None,
                            cost_model: str = "measured") -> str | None:
    """Why the request as a whole cannot be met (one line): a precision that no framework of the
    sweep (nor IOS, where it has schedules: on the CPU on one of ``ios_providers``, every provider when
    None, and only where ``cost_model`` can search at it) offers on any of its devices, by the adapters'
    own tables (``Adapter.precisions``); None when each is offered by one at least (the others' cells
    are skipped with their reason)."""
    import adapters
    from ios_bench.planning.probing import search_precision_reason

    # None: the default sweep's frameworks (those left out of it offer nothing to it: OPT_IN_FRAMEWORKS)
    names = list(frameworks) if frameworks is not None else [n for n in adapters.names()
                                                             if n != IOS_ADAPTER and n not in OPT_IN_FRAMEWORKS]
    if schedules is None or schedules:
        names.append(IOS_ADAPTER)
    for p in precisions:
        if p == "fp32":
            continue
        offered = False
        unsearched = None  # why IOS, which offers it, cannot be searched at it
        for n in names:
            try:
                a = adapters.get(n)
            except Exception:  # noqa: BLE001 - a module that does not import offers nothing
                continue
            if n == IOS_ADAPTER and ios_providers is not None:  # IOS on the CPU: on the sweep's kernel providers
                ok = any(a.precision_reason(p, d, provider=prov) is None if d.split(":", 1)[0] == "cpu"
                         else a.precision_reason(p, d) is None for d in devices for prov in ios_providers)
            else:
                ok = any(a.precision_reason(p, d) is None for d in devices)
            if ok and n == IOS_ADAPTER:
                unsearched = search_precision_reason(cost_model, p)
                ok = unsearched is None
            if ok:
                offered = True
                break
        if not offered:
            if unsearched:
                return f"--precision {p}: only IOS offers it in this sweep, and --cost-model {cost_model}: {unsearched}"
            return (f"--precision {p}: no framework of this sweep offers it on {', '.join(devices)} "
                    "(`ios-bench list frameworks` shows who offers which precision)")
    return None


def parse_schedules(text: str) -> list[str]:
    if text.strip() == "none":
        return []
    return parse_list(text, "schedule", list(SCHEDULES))


@click.command("run")
@click.option("--models", "models_", default=",".join(DEFAULT_MODELS), show_default=True,
              help="Comma-separated zoo names, graph .json files or .onnx models (imported with their "
                   "weights), or 'all'.")
@click.option("--batch", default="1", show_default=True, help="Batch sizes, e.g. 1,16,32.")
@click.option("--frameworks", default=None,
              help="Comma-separated adapters, 'all', or 'none' (IOS schedules only) [default: every available one "
                   "except slow tuning ones].")
@click.option("--schedules", default=None,
              help=f"IOS schedules from {', '.join(SCHEDULES)}, or 'none' [default: sequential,greedy,both].")
@click.option("--ios-providers", default=None,
              help="Kernel providers the IOS runtime runs each schedule with (its registry: torch, onnxruntime, "
                   "openvino in this version); "
                   "one cell per schedule and provider, e.g. IOS-Both[onnxruntime] (torch: IOS-Both) "
                   "[default: every provider available on the device].")
@click.option("--precision", "precision", default="fp32", show_default=True, metavar="P,P",
              help="Precisions to ask of every framework, comma-separated from fp32, bf16, fp16, int8: one cell per "
                   "precision, each checked against the fp32 oracle at its precision's stated bound; a combination an "
                   "adapter cannot give is a skipped cell with its reason (docs/precision.md).")
@click.option("--calibration-data", "calibration_data", default=None, metavar="DIR",
              help="Calibrate every int8 cell on this folder's .npy files (each one input of the model's shape, "
                   "C,H,W, or a batch N,C,H,W; float) instead of seeded inputs; the record names the folder and "
                   "a digest of its files (docs/precision.md).")
@click.option("--device", default="cpu", show_default=True,
              help="Device kinds, comma-separated: cpu, cuda, or a kind with a node label (cuda:V100, cpu:epyc).")
@click.option("--warmup", default=3, show_default=True, type=click.IntRange(0),
              help="The most untimed calls a round makes first (with --fixed-counts: exactly this many).")
@click.option("--warmup-time", "warmup_time", default=DEFAULT_WARMUP_S, show_default=True,
              type=FiniteFloat(0, MAX_PROTOCOL_S), metavar="SECONDS",
              help="Warm up until this many seconds of calls are spent: at least 1 call, at most --warmup.")
@click.option("--number", default=1, show_default=True, type=click.IntRange(1), help="Runs per timing sample.")
@click.option("--repeat", default=DEFAULT_REPEAT, show_default=True, type=click.IntRange(1),
              help="The most timing samples per round (with --fixed-counts: exactly this many).")
@click.option("--sample-time", "sample_time", default=DEFAULT_SAMPLE_S, show_default=True,
              type=FiniteFloat(0, MAX_PROTOCOL_S), metavar="SECONDS",
              help="Seconds of timed samples a round aims for: the count is chosen before the first sample, "
                   "from the last warmup call, between --min-repeat and --repeat (docs/harness.md).")
@click.option("--min-repeat", "min_repeat", default=DEFAULT_MIN_REPEAT, show_default=True, type=click.IntRange(1),
              help="The fewest timing samples per round, however long a call is.")
@click.option("--cap-factor", "cap_factor", default=DEFAULT_CAP_FACTOR, show_default=True,
              type=FiniteFloat(1, MAX_CAP_FACTOR), metavar="F",
              help="A framework cell more than F times slower than its group's best correct peer after its first "
                   "round gets no more rounds: shown as capped, with that round's figure and no interval, in no "
                   "verdict or GeoMean (IOS cells and the best peer never are).")
@click.option("--no-cap", "no_cap", is_flag=True, help="Measure every cell in every round (no capping).")
@click.option("--fixed-counts", "fixed_counts", is_flag=True,
              help="The fixed protocol instead of time-bounded rounds: exactly --warmup calls and --repeat samples "
                   "per round, whatever a call costs.")
@click.option("--rounds", "rounds", default=str(DEFAULT_ROUNDS), show_default=True, metavar="N|auto",
              help="Rounds per cell, each in a fresh worker process, interleaved with the other cells of its "
                   "(model, batch, device) group; 'auto': at least 3, more until --target-ci is met or "
                   "--time-budget is spent (docs/harness.md).")
@click.option("--extra-rounds", "extra_rounds", default=DEFAULT_EXTRA_ROUNDS, show_default=True,
              type=click.IntRange(0, 100), metavar="N",
              help="With a whole number of --rounds: a cell still unstable after them (its interval wider than "
                   "the report can compare with) gets at most N more, where a round of it is cheap (0: none).")
@click.option("--target-ci", default=2.0, show_default=True, type=FiniteFloat(0, 100, min_open=True, max_open=True),
              metavar="PCT", help="With --rounds auto: the half-width of each cell's interval to reach, in percent.")
@click.option("--time-budget", default=None, type=FiniteFloat(1, MAX_SECONDS), metavar="SECONDS",
              help="Seconds of measuring after which no cell gets a further round (each keeps at least one).")
@click.option("--max-time", default=None, type=FiniteFloat(1, MAX_SECONDS), metavar="SECONDS",
              help="Stop the sweep cleanly once this many seconds have passed: no further worker starts, what "
                   "finished is kept, the report covers it, and the command exits 3; `--resume` continues "
                   "(not part of the plan: give it again).")
@click.option("--round-seed", default=0, show_default=True, type=SEED,
              help="Seed of the order the cells of a group run in, shuffled per round (recorded).")
@click.option("--min-sample-ms", default=10.0, show_default=True, type=FiniteFloat(0, 60_000),
              help="Raise runs per sample until a sample lasts this long (0: off).")
@click.option("--threads", default=None, type=click.IntRange(1),
              help="Thread budget for every framework, at most the cores this process may use "
                   "[default: all of them].")
@click.option("--timeout", default=600.0, show_default=True, type=FiniteFloat(1, MAX_SECONDS),
              help="Seconds per cell before it counts as hung.")
@click.option("--optimize-timeout", default=3600.0, show_default=True, type=FiniteFloat(1, MAX_SECONDS),
              help="Extra seconds an IOS cell may spend searching its schedule.")
@click.option("--seed", default=0, show_default=True, type=SEED, help="Weights seed (input seed is the same).")
@click.option("--cost-model", default="measured", show_default=True, type=click.Choice(COST_KINDS),
              help="IOS optimizer cost model: measured (stages timed on the device) or synthetic (analytical).")
@click.option("--lock-clocks", is_flag=True, help="Lock CPU governor/turbo and GPU clocks; restored at exit.")
@click.option("--gpu-clock", default=None, type=click.IntRange(1, 10_000), help="SM clock (MHz) for --lock-clocks.")
@click.option("--out", default=None, help="Run folder [default: runs/<date-time>].")
@click.option("--resume", is_flag=True, help="Continue a run folder (default: the latest), skipping finished cells.")
@click.option("--retry-failed", is_flag=True,
              help="With --resume (implied): run the cells whose last record failed again (skipped and "
                   "finished cells stay).")
@click.option("--report-out", default=None, help="Report folder [default: reports/<run name> beside the run].")
@click.option("--no-report", is_flag=True, help="Do not write the report at the end.")
@click.option("--no-progress", is_flag=True, help="No progress bar (one line per cell only).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where cells run: worker processes on this machine, or Ray tasks on a cluster's nodes "
                   "(the ray extra; see docs/fleet.md).")
@click.option("--ray-address", default=None, metavar="ADDRESS",
              help="Ray cluster to use with --executor ray (e.g. HEAD:6379) [default: start a local Ray instance].")
@click.option("--adapter-option", "adapter_option", multiple=True, metavar="FRAMEWORK:OPTION=VALUE",
              help="A build option for one framework's cells (repeatable), e.g. tvm-tuned:trials_per_task=4; "
                   "'ios:...' applies to every IOS cell (docs/harness.md).")
@click.option("--ios-option", "ios_option", multiple=True, metavar="KEY=VALUE",
              help="An IOS optimizer setting for every IOS cell (repeatable): max_group_size=R and max_num_groups=S "
                   "prune the search (the paper's r and s; default 3 and 8), optimize_batch, optimize_threads, "
                   "cost_cache=default|off|private.")
@click.option("--build-cache", "build_cache", default="user", show_default=True,
              type=click.Choice(["off", "run", "user"]),
              help="Where builds (torch-compile's inductor caches, XLA's persistent cache, OpenVINO's model cache) are "
                   "kept between rounds: off, run (the run folder's cache/) or user (the user's cache folder, across "
                   "runs); sealed by versions and device, a foreign one rebuilt; each run's first build is recorded "
                   "apart (docs/adapters.md).")
@click.option("--sample-utilization", is_flag=True,
              help="Sample per-core CPU utilization during each cell's timed loop: util/<cell>.json and a "
                   "summary in the record (docs/harness.md).")
@click.option("--scenario", type=click.Choice(SCENARIOS), default=LATENCY, show_default=True,
              help="What to measure: latency (one request at a time, the harness's own protocol) or an MLPerf "
                   "LoadGen scenario (docs/scenarios.md); LoadGen scenarios search the instance/thread split.")
@click.option("--quick", is_flag=True,
              help="With a LoadGen scenario: its reduced settings that fit a 2-core machine (labelled reduced).")
@click.option("--scenario-setting", "scenario_setting", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario setting (repeatable), e.g. min_query_count=256, server_latency_ms=50 "
                   "(docs/scenarios.md lists them).")
@click.option("--profile", "profile", is_flag=True,
              help="after the sweep, profile each model's frameworks (ios-bench profile --frameworks) for the "
                   "report's 'Where the time goes' section (separate runs)")
@click.option("--instances", "instances", default=None, metavar="N,N|auto",
              help="With a LoadGen scenario: the requests-in-flight counts to try [default: auto, 1 to --threads].")
@click.option("--dry-run", "dry_run", is_flag=True,
              help="Plan and estimate only: print the cells, rounds, searches, references, cells predicted capped, "
                   "what is reused, and the estimate by batch, model, framework and kind of cost (a probe worker "
                   "says which frameworks are available); nothing is measured or written.")
@click.option("--format", "format_", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="With --dry-run: text, or one JSON object for scripts.")
@click.pass_context
def command(ctx, **kw):
    """Run a sweep: each cell (model, batch size, framework or IOS schedule, device) in its own
    worker process, output checked against the oracle, timed with the shared protocol, appended
    to runs/NAME/results.jsonl as it finishes; then write the report and print its path.

    With no options: the quick CPU sweep (sample + squeezenet, batch 1, every available
    framework, IOS sequential/greedy/both). Full sweep: --models all --batch 1,16,32.
    """
    scope = kw.pop("build_cache")
    profile = kw.pop("profile")
    dry_run, fmt = kw.pop("dry_run"), kw.pop("format_")
    if fmt != "text" and not dry_run:
        raise InputError("--format json needs --dry-run (a sweep's results are in its run folder and report)")
    setup = prepare(ctx, kw)
    with use_build_cache(scope, explicit=ctx.get_parameter_source("build_cache") == ParameterSource.COMMANDLINE):
        if dry_run:  # plan and estimate only (ios_bench.running.dry_run): nothing measured or written
            from ios_bench.running.dry_run import plan_and_estimate, show

            got = plan_and_estimate(setup.plan, setup.folder, setup.resume,
                                    make_executor(setup.plan.executor, setup.plan.ray_address), quiet=fmt == "json")
            show(got, fmt, click.echo)
            return
        sweep_class = Sweep
        if setup.plan.ab:  # an `ab` run folder resumed: its cells are the pairs, its answer their verdicts
            from ios_bench.running.ab import ABSweep as sweep_class
        sweep = sweep_class(setup.plan, setup.folder, resume=setup.resume, progress=not kw["no_progress"],
                            retry_failed=setup.retry_failed, max_time=kw["max_time"],
                            executor=make_executor(setup.plan.executor, setup.plan.ray_address))
        finish(sweep, setup, profile=profile, paths_to_stderr=bool(setup.plan.ab))
        if setup.plan.ab:
            from ios_bench.commands.compare import show_verdicts

            show_verdicts(setup.folder, setup.plan.ab)


@contextlib.contextmanager
def use_build_cache(scope: str, shared=None, explicit: bool = True):
    """``--build-cache off|run|user``: while the command runs, where its rounds keep their builds
    (``adapters.build_cache``), put in the environment every worker inherits; restored afterwards
    (an in-process caller keeps its own). ``shared``: a folder whose sweeps share one ``cache/`` in
    the run scope (an experiment's folder). A value already in ``IOS_BENCH_BUILD_CACHE`` wins over
    the default scope (not over one given on the command line). A user-scope folder that cannot be
    written is one line (exit 2). Yields the directory, or None for each run folder's own
    ``cache/``."""
    import os

    from adapters.build_cache import ENV, SCOPE_ENV, dir_problem, scope_root

    saved = {k: os.environ.get(k) for k in (ENV, SCOPE_ENV)}
    if not explicit and os.environ.get(ENV):
        yield os.environ[ENV]
        return
    root = scope_root(scope, shared)
    if root not in (None, "off"):
        problem = dir_problem(root)
        if problem:
            raise InputError(f"--build-cache {scope}: {problem}")
    try:
        if root is None:
            os.environ.pop(ENV, None)  # the harness's default: each run folder's cache/
        else:
            os.environ[ENV] = root
        os.environ[SCOPE_ENV] = scope
        yield root
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class Setup:
    """What :func:`prepare` makes of ``run``'s options: the plan, the run and report folders."""

    plan: Plan
    folder: Path
    target: Path
    resume: bool
    retry_failed: bool
    no_report: bool


def prepare(ctx, kw: dict, models: list[str] | None = None) -> Setup:
    """The plan and folders of a sweep from ``run``'s options (``kw``: the callback's keyword
    arguments; ``models``: the model specs when the caller names them itself, as ``ab`` does),
    every option checked (``InputError``: one line, nothing written)."""
    import json

    models_, batch, frameworks, schedules = kw.get("models_", ""), kw["batch"], kw["frameworks"], kw["schedules"]
    ios_providers, device, warmup, number, repeat = (kw["ios_providers"], kw["device"], kw["warmup"], kw["number"],
                                                     kw["repeat"])
    rounds, target_ci, time_budget, round_seed = kw["rounds"], kw["target_ci"], kw["time_budget"], kw["round_seed"]
    min_sample_ms, threads, timeout, optimize_timeout = (kw["min_sample_ms"], kw["threads"], kw["timeout"],
                                                         kw["optimize_timeout"])
    seed, cost_model, lock_clocks, gpu_clock = kw["seed"], kw["cost_model"], kw["lock_clocks"], kw["gpu_clock"]
    out, resume, retry_failed = kw["out"], kw.get("resume", False), kw.get("retry_failed", False)
    report_out, no_report, executor, ray_address = kw["report_out"], kw["no_report"], kw["executor"], kw["ray_address"]
    adapter_option, ios_option, sample_utilization = kw["adapter_option"], kw["ios_option"], kw["sample_utilization"]
    scenario, quick = kw.get("scenario", LATENCY), kw.get("quick", False)
    scenario_setting, instances = kw.get("scenario_setting", ()), kw.get("instances")

    if threads is not None and executor != "ray":  # a Ray node's cores are checked on that node
        check_threads(threads, "--threads")
    values = {"models": models if models is not None else parse_models(models_),
              "batch": parse_int_list(batch, "batch size"),
              "frameworks": parse_frameworks(frameworks) if frameworks is not None else None,
              "schedules": parse_schedules(schedules) if schedules is not None else None,
              "ios_providers": (parse_list(ios_providers, "IOS provider", ios_providers_registry())
                                if ios_providers is not None else None),
              "rounds": parse_rounds(rounds), "target_ci": target_ci, "time_budget": time_budget,
              "round_seed": round_seed,
              "device": parse_devices(device), "warmup": warmup, "number": number,
              "repeat": repeat, "min_sample_ms": min_sample_ms or None, "timeout": timeout,
              "warmup_time": None if kw.get("fixed_counts") else kw.get("warmup_time", DEFAULT_WARMUP_S),
              "sample_time": None if kw.get("fixed_counts") else kw.get("sample_time", DEFAULT_SAMPLE_S),
              "min_repeat": kw.get("min_repeat", DEFAULT_MIN_REPEAT),
              "cap_factor": None if kw.get("no_cap") else kw.get("cap_factor", DEFAULT_CAP_FACTOR),
              "extra_rounds": kw.get("extra_rounds", DEFAULT_EXTRA_ROUNDS),
              "optimize_timeout": optimize_timeout, "threads": threads,
              "seed": seed, "cost_model": cost_model, "lock_clocks": lock_clocks, "gpu_clock": gpu_clock,
              "executor": executor, "ray_address": ray_address,
              "adapter_option": parse_adapter_options(adapter_option), "ios_option": parse_ios_options(ios_option),
              "sample_utilization": sample_utilization,
              "precision": parse_precisions(kw.get("precision") or "fp32"),
              "calibration_data": calibration_data_option(kw.get("calibration_data")),
              "scenario": scenario, "quick": quick, "instances": parse_instances(instances),
              "scenario_setting": parse_scenario_settings(scenario_setting, scenario, quick)}
    if values["calibration_data"] is not None and "int8" not in values["precision"]:
        raise InputError("--calibration-data calibrates int8 cells: give --precision int8 (with the others)")
    problem = precision_offer_problem(values["precision"], values["frameworks"], values["schedules"],
                                      values["device"], values["ios_providers"], cost_model)
    if problem:
        raise InputError(problem)
    if scenario == LATENCY and (quick or instances is not None):
        raise InputError(f"{'--quick' if quick else '--instances'} needs a LoadGen scenario (--scenario single-stream, "
                         "multi-stream, offline or server)")
    if executor == "local" and any(d.startswith("cuda") for d in values["device"]):
        # (with --executor ray the GPUs are the cluster's: the probes on its nodes answer)
        from ios_core.measurement.gpu import gpu_missing

        reason = gpu_missing()
        if reason is not None:
            raise InputError(f"--device cuda: {reason}; `ios-bench doctor` lists what runs here")
    resume = resume or retry_failed
    if out is None and resume:
        found = latest_run()
        if found is None:
            raise InputError("--resume: no run folder under runs/; name one with --out")
        folder = found
    else:
        folder = Path(out) if out else Path("runs") / default_run_name()
    from ios_bench.reporting.paths import default_report_folder

    target = Path(report_out) if report_out else default_report_folder(folder)
    check_run_folder(folder)
    if not no_report:
        check_report_folder(target)
    plan = Plan()
    values["models"] = [absolute_model_spec(m) for m in values["models"]]  # --resume works from anywhere
    same = [m for m in dict.fromkeys(values["models"]) if values["models"].count(m) > 1]
    if same:
        raise InputError(f"bad model list {models_!r}: {', '.join(same)} listed twice")
    if resume and (folder / PLAN_FILE).is_file():
        try:
            plan = Plan.from_dict(json.loads((folder / PLAN_FILE).read_bytes()), base=folder)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, InputError) as e:
            raise InputError(f"{folder / PLAN_FILE}: corrupt plan ({str(e)[:200]})") from None
        given = {k for k in _PLAN_OPTIONS if ctx.get_parameter_source(k if k != "models" else "models_")
                 == ParameterSource.COMMANDLINE}
        if ctx.get_parameter_source("fixed_counts") == ParameterSource.COMMANDLINE:
            given |= {"warmup_time", "sample_time"}
        if ctx.get_parameter_source("no_cap") == ParameterSource.COMMANDLINE:
            given.add("cap_factor")
    elif resume and not folder.is_dir():
        raise InputError(f"--resume: {folder} is not a run folder")
    else:
        given = set(_PLAN_OPTIONS)
    for opt in given:
        value = values[opt]
        if opt == "threads" and value is None:
            continue
        setattr(plan, _PLAN_OPTIONS[opt], value)
    plan.input_seed = plan.seed
    problem = protocol_problem(plan)
    if problem:
        raise InputError(problem)
    if ctx.get_parameter_source("min_repeat") == ParameterSource.COMMANDLINE and plan.min_repeat > plan.repeat:
        raise InputError(f"--min-repeat {plan.min_repeat} is more than --repeat {plan.repeat} (the most samples a "
                         "round takes)")
    if plan.scenario != LATENCY and plan.instances and plan.threads:
        over = [n for n in plan.instances if n > plan.threads]
        if over:
            raise InputError(f"--instances {','.join(map(str, over))}: more requests in flight than the "
                             f"{plan.threads} threads of the budget (each instance needs one)")
    if plan.executor == "ray":  # --resume continues with the run's executor unless told otherwise
        if plan.lock_clocks:
            raise InputError("--lock-clocks locks this machine's clocks only: with --executor ray, lock them on each "
                             "node instead (see docs/fleet.md)")
        if threads is None and "threads" in given:
            plan.threads = None  # every CPU of the node each cell runs on
    return Setup(plan, folder, target, resume, retry_failed, no_report)


def finish(sweep: Sweep, setup: Setup, paths_to_stderr: bool = False, profile: bool = False) -> dict:
    """Run ``sweep``, say what it did, write the report (unless ``--no-report``); exits 1 where
    cells were left for ``--resume`` (lost nodes), 3 where ``--max-time`` was spent.
    ``paths_to_stderr``: the report's paths go to stderr (``ab`` keeps stdout for its verdicts)."""
    from ios_bench.reporting.report import write_report

    stats = sweep.run()
    sweep.say(f"{stats['ran']} cells run: {stats['ok']} ok, {stats['wrong']} with a wrong output, "
              f"{stats['failed']} failed, {stats['skipped']} skipped"
              + (f", {stats['capped']} capped after one round" if stats.get("capped") else "") + "; "
              f"results in {term(setup.folder)}")
    if profile:  # `run --profile`: separate profiled runs, after every cell (ios_bench.profiling.profile_run)
        from ios_bench.profiling import profile_run

        profile_run(setup.folder, setup.plan, say=sweep.say)
    if not setup.no_report:
        paths = write_report(setup.folder, setup.target)
        click.echo(f"report: {paths['html']}", err=paths_to_stderr)
        click.echo(f"        {paths['md']}", err=paths_to_stderr)
    if stats.get("missing"):
        raise SystemExit(1)  # cells left for --resume (their nodes were lost)
    if stats.get("stopped"):
        raise SystemExit(3)  # --max-time spent: cells left for --resume
    return stats
