"""ios-bench ab A [B]: a paired, interleaved A/B sweep and its verdict per cell."""

from __future__ import annotations

import click

from ios_bench.commands import run as run_command
from ios_bench.commands.compare import show_verdicts, verdict_options
from ios_bench.errors import InputError
from ios_bench.planning.options import FiniteFloat
from ios_bench.running.ab import MAX_AUTO_PAIRS, MIN_CHANGE
from ios_bench.running.rounds import AUTO

# run's options that ab does not take: the models are its arguments; a run folder of ab is one
# fresh sweep (no --resume); LoadGen scenarios are not paired here; its two sides are the answer, so no
# cell is capped; run's --dry-run (and its --format) is run's own (ab's --format prints its verdicts)
_NOT_OURS = {"models_", "resume", "retry_failed", "scenario", "quick", "scenario_setting", "instances",
             "profile", "dry_run", "format_", "cap_factor", "no_cap", "extra_rounds"}


# protocol=NAME: a side's rounds measured with the fixed counts (run's --fixed-counts) or time-bounded
SIDE_PROTOCOLS = ("fixed", "time")


def parse_side(items: tuple[str, ...], flag: str) -> dict:
    """``--a-option`` / ``--b-option`` -> ``{"options": {framework: {option: value}}, "schedule":
    name | None, "protocol": name | None}``: ``FRAMEWORK:OPTION=VALUE`` as ``run --adapter-option``
    (``ios:`` for every IOS cell), ``schedule=NAME`` (the side's IOS schedule), or ``protocol=fixed|time``
    (how the side's rounds are measured: the fixed counts or time-bounded; an A/A of the protocol)."""
    from ios_bench.planning.plan import SCHEDULES

    out: dict = {"options": {}, "schedule": None, "protocol": None}
    build = []
    for item in items:
        key, eq, value = item.partition("=")
        if ":" not in key and key.strip() == "schedule":
            if value.strip() not in SCHEDULES:
                raise InputError(f"bad {flag} {item!r}: unknown schedule {value.strip()!r}; choose from: "
                                 f"{', '.join(SCHEDULES)}")
            out["schedule"] = value.strip()
        elif ":" not in key and key.strip() == "protocol":
            if value.strip() not in SIDE_PROTOCOLS:
                raise InputError(f"bad {flag} {item!r}: unknown protocol {value.strip()!r}; choose from: "
                                 f"{', '.join(SIDE_PROTOCOLS)}")
            out["protocol"] = value.strip()
        else:
            build.append(item)
    try:
        out["options"] = run_command.parse_adapter_options(tuple(build))
    except InputError as e:
        raise InputError(str(e).replace("--adapter-option", flag)) from None
    return out


def check_sides(a: dict, b: dict, plan, flags=("--a-option", "--b-option")) -> None:
    """Options that do not exist, or that name a framework the sweep does not run; a schedule named
    on one side only; two identical sides: one line each (``InputError``)."""
    from ios_bench.running.ab import option_problem

    for side, flag in zip((a, b), flags):
        for fw, opts in side["options"].items():
            problem = option_problem(fw, opts)
            if problem:
                raise InputError(f"bad {flag}: {problem}")
            ios = fw == "ios" or fw.startswith("ios-")
            if ios and plan.schedules == [] or not ios and plan.frameworks is not None and fw not in plan.frameworks:
                raise InputError(f"bad {flag}: the sweep runs no {fw} cell (see --frameworks / --schedules)")
    if bool(a["schedule"]) != bool(b["schedule"]):
        raise InputError("schedule= names the IOS schedule of each side: give it in both --a-option and --b-option")
    if a["model"] == b["model"] and a["options"] == b["options"] and a["schedule"] == b["schedule"] \
            and a.get("protocol") == b.get("protocol"):
        raise InputError("A and B are the same: name two models, or give --a-option / --b-option that differ "
                         "(an A/A run is `ios-bench ab MODEL MODEL --a-option ...` with options that differ)")


def check_models(spec_a: str, spec_b: str, other_input: bool = False) -> None:
    """Two models whose input shapes differ (unless ``other_input``), or whose outputs cannot be
    paired: one line."""
    from ios_bench.planning.loading import load_graph

    ga, gb = load_graph(spec_a), load_graph(spec_b)
    if ga.input_shape != gb.input_shape and not other_input:
        raise InputError(f"A and B take different inputs: {ga.name} {list(ga.input_shape)}, "
                         f"{gb.name} {list(gb.input_shape)} (give --other-input if B is meant to take another "
                         "input shape, e.g. a larger image)")
    if ga.output_shape != gb.output_shape:
        raise InputError(f"the outputs of A and B cannot be paired: {ga.name} gives {list(ga.output_shape)}, "
                         f"{gb.name} {list(gb.output_shape)}")


@click.command("ab")
@click.argument("model_a", metavar="A")
@click.argument("model_b", metavar="[B]", required=False)
@click.option("--a-option", "a_option", multiple=True,
              metavar="FRAMEWORK:OPTION=VALUE|schedule=NAME|protocol=fixed|time",
              help="A build option of side A's cells (repeatable; as run's --adapter-option, 'ios:...' for every IOS "
                   "cell), schedule=NAME: side A's IOS schedule, or protocol=fixed|time: side A's rounds measured "
                   "with the fixed counts (run's --fixed-counts) or time-bounded (run's default).")
@click.option("--b-option", "b_option", multiple=True,
              metavar="FRAMEWORK:OPTION=VALUE|schedule=NAME|protocol=fixed|time",
              help="The same for side B.")
@verdict_options(None, "the paired log-ratios")
@click.option("--min-change", default=MIN_CHANGE * 100, show_default=True, type=FiniteFloat(0, 1000), metavar="PCT",
              help="The practical floor: a change whose paired interval excludes zero is a regression or an "
                   "improvement when it is at least this large (percent); with --rounds auto, pairs are added "
                   "while the smallest change the run could flag is above it.")
@click.option("--other-input", is_flag=True,
              help="B takes another input shape than A (e.g. a larger image): each side gets its own seeded "
                   "input; the change is then the model's and the input's together.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit with code 1 when a regression is found, or a side of a cell failed.")
@click.pass_context
def command(ctx, model_a, model_b, a_option, b_option, min_change, confidence, fmt, other_input, fail_on_regression,
            **kw):
    """Measure A against B in one interleaved sweep and print one paired verdict per cell.

    \b
    ios-bench ab before.onnx after.onnx                    two models (ONNX, graph JSON, zoo names)
    ios-bench ab squeezenet --frameworks onnxruntime \\
        --a-option onnxruntime:optimization=basic \\
        --b-option onnxruntime:optimization=all             one model, two configurations
    ios-bench ab squeezenet --frameworks none \\
        --a-option schedule=sequential --b-option schedule=both    two IOS schedules
    ios-bench ab squeezenet --frameworks onnxruntime \
        --a-option protocol=fixed --b-option protocol=time  two measurement protocols

    Each cell (framework, batch size, device) is measured on both sides; in every round the
    pairs run in an order shuffled from --round-seed and A's and B's cell of a pair back to back,
    which side first drawn per round (recorded in each round's position), each in a fresh worker
    process. The verdict uses the paired log-ratios of B's round against A's round of the same
    pass, so drift common to both cancels: change = exp(median) - 1 with a t interval; regression /
    improvement when the interval excludes zero and the change is at least --min-change (the
    floor, printed with every verdict); within noise, with the smallest change the run could have
    flagged; unstable (fewer than two paired rounds); failed (a side failed or its output is wrong:
    reported, never a verdict). --rounds auto (the default) starts with 3 pairs per cell and adds
    pairs while the paired interval's half-width is over --target-ci or the smallest change it
    could flag is over --min-change, until --time-budget is spent (at most 10 pairs); the record
    (ab-pairs.json, and the json output's stopped_by) says which stopped it. --rounds N gives N
    paired rounds per cell. The run folder holds both sides (cells tagged A and B: `report` and `compare` read it)
    and ab-drift.json, the drift this machine showed between unpaired rounds, which `compare`
    uses. Use ab rather than two runs and `compare` to decide whether a change made something
    faster (docs/harness.md, "A/B in one sweep"). Two models with different output shapes (or
    input shapes, without --other-input), an option that does not exist, or a framework that
    cannot run here: one line, exit 2, nothing written.
    """
    from ios_bench.planning.plan import absolute_model_spec
    from ios_bench.running.ab import ABSweep
    from ios_bench.running.fleet import make_executor

    spec_a = run_command.parse_models(model_a)
    spec_b = run_command.parse_models(model_b) if model_b is not None else spec_a
    if len(spec_a) != 1 or len(spec_b) != 1:
        raise InputError("A and B are one model each (a zoo name, a graph .json file or an .onnx model)")
    spec_a, spec_b = absolute_model_spec(spec_a[0]), absolute_model_spec(spec_b[0])
    a, b = parse_side(a_option, "--a-option"), parse_side(b_option, "--b-option")
    a["model"], b["model"] = spec_a, spec_b
    mode = "models" if spec_a != spec_b else "options"
    if mode == "models":
        check_models(spec_a, spec_b, other_input)
    setup = run_command.prepare(ctx, {**kw, "models_": ""}, models=list(dict.fromkeys([spec_a, spec_b])))
    plan = setup.plan
    check_sides(a, b, plan)
    if a["schedule"]:
        plan.schedules = list(dict.fromkeys([a["schedule"], b["schedule"]]))
    plan.ab = {"mode": mode, "a": a, "b": b, "min_change": min_change / 100}
    sweep = ABSweep(plan, setup.folder, resume=False, progress=not kw["no_progress"],
                    executor=make_executor(plan.executor, plan.ray_address), max_time=kw["max_time"])
    run_command.finish(sweep, setup, paths_to_stderr=True)
    show_verdicts(setup.folder, plan.ab, fmt, confidence, fail_on_regression)


def _ab_param(p: click.Parameter) -> click.Parameter:
    """run's option as ab takes it: ``--rounds`` defaults to ``auto`` and counts pairs; ``--target-ci``
    is the paired interval's."""
    if p.name == "rounds":
        return click.Option(["--rounds", "rounds"], default=AUTO, show_default=True, metavar="N|auto",
                            help="Paired rounds per cell; 'auto': at least 3 pairs, more while the paired interval's "
                                 "half-width is over --target-ci or the smallest change it could flag is over "
                                 f"--min-change, until --time-budget is spent (at most {MAX_AUTO_PAIRS} pairs).")
    if p.name == "target_ci":
        return click.Option(["--target-ci"], default=2.0, show_default=True,
                            type=FiniteFloat(0, 100, min_open=True, max_open=True), metavar="PCT",
                            help="With --rounds auto: the half-width of each cell's paired interval to reach, "
                                 "in percent.")
    return p


command.params += [_ab_param(p) for p in run_command.command.params if p.name not in _NOT_OURS]
