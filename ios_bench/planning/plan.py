"""A sweep's plan: what to measure and how (``plan.json`` in the run folder), and its validation.

Every field is type-checked when a plan is read back (``--resume``), so a hand-edited or corrupt
``plan.json`` is refused in one line naming the field. The IOS optimizer settings a sweep may fix
(``ios_options``) and per-framework build options (``adapter_options``) are checked here too.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ios_bench.errors import InputError
from ios_bench.running.rounds import AUTO
from ios_core.measurement.threads import policy_name, usable_cores
from ios_core.optimizer import STRATEGIES

SCHEDULES = STRATEGIES  # the IOS schedules a sweep can ask for: the optimizer's one list
DEFAULT_SCHEDULES = ("sequential", "greedy", "both")
DEFAULT_MODELS = ("sample", "squeezenet")
DEFAULT_ROUNDS = 3  # rounds per cell (docs/harness.md)
DEFAULT_REPEAT = 10  # the most timing samples per round (fixed protocol: exactly this many)
# the time-bounded round (ios_core.measurement.measure; docs/harness.md "Rounds"): warmup until
# DEFAULT_WARMUP_S seconds of calls (1 to `warmup` calls), then samples for about DEFAULT_SAMPLE_S
# seconds, at least DEFAULT_MIN_REPEAT and at most `repeat`. A call of 100 ms or less keeps today's
# 3 warmup calls and 10 samples; a 12.7 s call (nasnet at batch 32 here) takes 1 and 3 instead of 3 and 10.
DEFAULT_WARMUP_S = 0.5
DEFAULT_SAMPLE_S = 1.0
DEFAULT_MIN_REPEAT = 3
DEFAULT_CAP_FACTOR = 3.0
# a cell still unstable after its rounds gets at most this many more, where a round is cheap (docs/harness.md);
# off by default: on the 2-core VM of 2026-11-28 three extra rounds took `make run` from about 4 to 8 min and
# left 24 of its 34 cells unstable (one slow round in six keeps an interval wide)
DEFAULT_EXTRA_ROUNDS = 0
# Left out of the default sweep's "every available framework"; named explicitly or with
# --frameworks all they run. Untuned TVM is a strawman here (hundreds of ms to seconds per run on
# these CPUs, far from what a TVM user would deploy); tuning takes far more than minutes.
SLOW_FRAMEWORKS = {
    "tvm": "untuned TVM (hundreds of ms to seconds per run here) is no fair peer; tvm-tuned is the tuned one",
    "tvm-tuned": "tuning takes far more than minutes",
}
# Every framework left out of the default sweep, the slow ones above and those that are another engine of a
# framework the default sweep runs already (named explicitly or with --frameworks all they run): TensorFlow
# Lite is TensorFlow's second engine (issue 57), and the headline sweep keeps the cells it had
OPT_IN_FRAMEWORKS = {
    **SLOW_FRAMEWORKS,
    "tflite": "TensorFlow Lite, TensorFlow's second engine: the default sweep keeps its cells",
}


def ios_providers() -> list[str]:
    """The IOS runtime's kernel providers: its registry's (``ios_core.runtime.providers``), asked only
    when a list must be checked (the registry imports torch, which the sweep's parent avoids)."""
    from ios_core.runtime import providers

    return providers.names()


IOS_ADAPTER = "ios"
DEFAULT_IOS_PROVIDER = "torch"
DEFAULT_PRECISION = "fp32"


def precisions_problem(v) -> str | None:
    """Why ``v`` is not a list of precisions a sweep can ask for (one line), or None."""
    from ios_core.check import PRECISIONS

    if not (_str_list(v) and v):
        return "expected a non-empty list of precisions"
    unknown = [p for p in v if p not in PRECISIONS]
    if unknown:
        return f"unknown precision {str(unknown[0])[:20]!r}; choose from: {', '.join(PRECISIONS)}"
    if len(set(v)) != len(v):
        return "a precision listed twice"
    return None

@dataclass
class Plan:
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))
    batch_sizes: list[int] = field(default_factory=lambda: [1])
    frameworks: list[str] | None = None  # None: every available framework except OPT_IN_FRAMEWORKS
    schedules: list[str] | None = None  # None: DEFAULT_SCHEDULES where the optimizer exists
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    warmup: int = 3
    number: int = 1
    repeat: int = DEFAULT_REPEAT
    min_sample_ms: float | None = 10.0
    # the time-bounded round (None: the fixed protocol, exactly `warmup` calls and `repeat` samples, which
    # is what every plan written before these fields means: Plan.from_dict)
    warmup_s: float | None = DEFAULT_WARMUP_S
    sample_s: float | None = DEFAULT_SAMPLE_S
    min_repeat: int = DEFAULT_MIN_REPEAT
    # a framework cell more than this many times slower than its group's best correct peer after its
    # first round gets no more rounds (status "capped"; docs/harness.md); None: never (plans from before)
    cap_factor: float | None = DEFAULT_CAP_FACTOR
    timeout: float = 600.0
    optimize_timeout: float = 3600.0  # added to an IOS cell's timeout while its schedule is searched
    threads: int | None = field(default_factory=usable_cores)  # the CPU affinity mask, not os.cpu_count()
    seed: int = 0
    input_seed: int = 0
    cost_model: str = "measured"
    # the precisions every cell is asked for (run --precision; docs/precision.md): one cell per framework and
    # precision, each checked against the fp32 oracle at its precision's bound (ios_core.check.tolerance_for)
    precisions: list[str] = field(default_factory=lambda: [DEFAULT_PRECISION])
    lock_clocks: bool = False
    gpu_clock_mhz: int | None = None
    # IOS kernel providers each schedule runs on (None: every one available on the device, so the
    # report shows IOS on its best kernels)
    ios_providers: list[str] | None = None
    # one spin/wait policy for every cell (ios_core.measurement.threads.SPIN_POLICIES; IOS_BENCH_SPIN_POLICY)
    spin_policy: str = field(default_factory=policy_name)
    executor: str = "local"  # where cells run (ios_bench.running.executors); --resume reuses it
    ray_address: str | None = None
    # settings of the IOS optimizer for every IOS cell of the sweep (IOS_OPTIONS; empty: each cell's
    # schedule is optimized for its own batch size and thread budget, pruning r=3, s=8)
    ios_options: dict = field(default_factory=dict)
    # {framework or "ios": {option: value}}: build options handed to adapter.build (e.g. tvm-tuned's
    # trials_per_task); "ios" applies to every IOS cell, "ios-both" to that schedule only
    adapter_options: dict = field(default_factory=dict)
    # per-core CPU (SM on cuda) utilization sampled during each cell's timed loop: util/<cell>.json
    sample_utilization: bool = False
    # the round protocol (docs/harness.md): each cell measured in ``rounds`` fresh worker processes,
    # interleaved with the other cells of its (model, batch, device) group in an order shuffled per
    # round from ``round_seed``; ``"auto"``: at least 3 rounds, more until the interval's half-width is
    # under ``target_ci`` percent or ``time_budget`` seconds of measuring are spent
    rounds: int | str = DEFAULT_ROUNDS
    target_ci: float = 2.0
    time_budget: float | None = None
    round_seed: int = 0
    # per cell: disturbed rounds measured again at most this often (beside a co-tenant busy half the
    # time, 3 undisturbed rounds need 6 on average; 6 re-runs get them in 9 of 10 cells)
    max_reruns: int = 6
    # with a whole ``rounds``: a cell whose figure is still unstable after them (its interval too wide:
    # ios_bench.running.rounds.unstable_reason) gets at most this many more rounds, where one is cheap
    # (ios_bench.running.round_runner.EXTRA_ROUND_MAX_S); 0: none (a plan from before them)
    extra_rounds: int = DEFAULT_EXTRA_ROUNDS
    # the measurement scenario (ios_bench.scenarios; docs/scenarios.md): "latency" (the protocol
    # above) or a LoadGen scenario; its settings' overrides, the reduced --quick form, and the
    # instance counts searched (None: 1..threads)
    scenario: str = "latency"
    scenario_settings: dict = field(default_factory=dict)
    quick: bool = False
    instances: list[int] | None = None
    # an ``ios-bench ab`` sweep's sides (ios_bench.running.ab): {"mode": "models" | "options", "a": {"model",
    # "options", "schedule"}, "b": {...}}; None for a plain sweep
    ab: dict | None = None
    # int8 cells calibrated on this folder of .npy inputs (run --calibration-data; an absolute path) instead of
    # the seeded calibration stream (ios_core.quantize.calibration_feeds); None: the seeded inputs
    calibration_data: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, base: str | os.PathLike | None = None) -> Plan:
        """A plan from ``plan.json``, every field type-checked (``InputError`` naming the field).
        Model files given by a relative path are relative to ``base`` (the run folder)."""
        if not isinstance(d, dict):
            raise InputError(f"not a JSON object ({type(d).__name__})")
        kwargs = {}
        if "precisions" not in d and isinstance(d.get("precision"), str):  # a plan.json of one precision
            d = {**d, "precisions": [d["precision"]]}
        for name in cls.__dataclass_fields__:
            if name not in d:
                continue
            value = d[name]
            check, what = _PLAN_TYPES.get(name, (lambda v: True, ""))
            if not check(value):
                if name == "ios_options" and isinstance(value, dict):
                    raise InputError(f"field 'ios_options': {ios_options_problem(value)}")
                raise InputError(f"field {name!r} is {str(value)[:40]!r}, expected {what}")
            kwargs[name] = value
        if "sample_s" not in d:  # a plan from before time-bounded rounds: its protocol stays the fixed one
            kwargs.update(sample_s=None, warmup_s=None)
        if "cap_factor" not in d:  # ... and it never capped a cell
            kwargs["cap_factor"] = None
        if "extra_rounds" not in d:  # ... nor gave an unstable cell more rounds
            kwargs["extra_rounds"] = 0
        plan = cls(**kwargs)
        problem = protocol_problem(plan)
        if problem:
            raise InputError(f"plan.json: {problem}")
        from ios_bench.scenarios.settings import settings_problem

        problem = settings_problem(plan.scenario, plan.scenario_settings)
        if problem:
            raise InputError(f"field 'scenario_settings': {problem}")
        if base is not None:
            plan.models = [_from_base(m, Path(base)) for m in plan.models]
        return plan


def _is_int(v, lo: int | None = None) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and (lo is None or v >= lo)


def _is_num(v, lo: float = 0.0) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= lo


def _str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) and s for s in v)


MAX_ROUNDS = 100
MAX_PROTOCOL_S = 3600.0
MAX_CAP_FACTOR = 1000.0


def protocol_problem(plan: Plan) -> str | None:
    """Why the plan's round protocol makes no sense (one line), or None. (A ``min_repeat`` above ``repeat``
    is not one: ``repeat`` is the most, so such rounds take exactly ``repeat`` samples.)"""
    if (plan.sample_s is None) != (plan.warmup_s is None):
        return "warmup_s and sample_s are both set (time-bounded rounds) or both null (fixed counts)"
    return None

_PLAN_TYPES = {
    "models": (lambda v: _str_list(v) and bool(v), "a list of model names or files"),
    "batch_sizes": (lambda v: isinstance(v, list) and bool(v) and all(_is_int(b, 1) for b in v),
                    "a list of positive integers"),
    "frameworks": (lambda v: v is None or _str_list(v), "null or a list of names"),
    "schedules": (lambda v: v is None or _str_list(v), "null or a list of names"),
    "devices": (lambda v: _str_list(v) and bool(v), "a list of devices"),
    "warmup": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "number": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "repeat": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "min_sample_ms": (lambda v: v is None or _is_num(v), "null or a number >= 0"),
    "warmup_s": (lambda v: v is None or _is_num(v) and v <= MAX_PROTOCOL_S, "null or seconds from 0 to 3600"),
    "sample_s": (lambda v: v is None or _is_num(v) and v <= MAX_PROTOCOL_S, "null or seconds from 0 to 3600"),
    "min_repeat": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "cap_factor": (lambda v: v is None or _is_num(v, 1.0) and v <= MAX_CAP_FACTOR, "null or a number from 1 to 1000"),
    "timeout": (lambda v: _is_num(v) and v > 0, "a positive number"),
    "optimize_timeout": (lambda v: _is_num(v) and v > 0, "a positive number"),
    "threads": (lambda v: v is None or _is_int(v, 1), "null or an integer >= 1"),
    "seed": (_is_int, "an integer"),
    "input_seed": (_is_int, "an integer"),
    "cost_model": (lambda v: isinstance(v, str), "a string"),
    "precisions": (lambda v: precisions_problem(v) is None, "a list of known precisions (fp32, bf16, fp16, int8), "
                   "each once"),
    "lock_clocks": (lambda v: isinstance(v, bool), "true or false"),
    "gpu_clock_mhz": (lambda v: v is None or _is_int(v, 1), "null or a positive integer"),
    "executor": (lambda v: isinstance(v, str), "a string"),
    "ray_address": (lambda v: v is None or isinstance(v, str), "null or a string"),
    "ios_options": (lambda v: ios_options_problem(v) is None, "an object of IOS optimizer settings "
                    "(optimize_batch, optimize_threads, max_group_size, max_num_groups: positive integers; "
                    "cost_cache: default, off or private)"),
    "adapter_options": (lambda v: _options_map(v), "an object {framework: {option: value}}"),
    "sample_utilization": (lambda v: isinstance(v, bool), "true or false"),
    "ios_providers": (lambda v: v is None or _str_list(v) and bool(v), "null or a list of provider names"),
    "rounds": (lambda v: v == AUTO or _is_int(v, 1) and v <= MAX_ROUNDS, f"an integer from 1 to {MAX_ROUNDS}, or auto"),
    "target_ci": (lambda v: _is_num(v) and 0 < v < 100, "a percentage in (0, 100)"),
    "time_budget": (lambda v: v is None or _is_num(v) and v > 0, "null or a positive number of seconds"),
    "round_seed": (_is_int, "an integer"),
    "max_reruns": (lambda v: _is_int(v, 0) and v <= MAX_ROUNDS, f"an integer from 0 to {MAX_ROUNDS}"),
    "extra_rounds": (lambda v: _is_int(v, 0) and v <= MAX_ROUNDS, f"an integer from 0 to {MAX_ROUNDS}"),
    "scenario": (lambda v: v in _scenarios(), "one of latency, single-stream, multi-stream, offline, server"),
    "scenario_settings": (lambda v: isinstance(v, dict), "an object of scenario settings"),
    "quick": (lambda v: isinstance(v, bool), "true or false"),
    "ab": (lambda v: v is None or isinstance(v, dict) and v.get("mode") in ("models", "options")
           and all(isinstance(v.get(s), dict) for s in ("a", "b")), "null or the sides of an ab sweep"),
    "calibration_data": (lambda v: v is None or isinstance(v, str) and bool(v), "null or a folder"),
    "instances": (lambda v: v is None or isinstance(v, list) and bool(v) and all(_is_int(n, 1) for n in v),
                  "null or a list of positive integers"),
}


def _scenarios() -> tuple[str, ...]:
    from ios_bench.scenarios import SCENARIOS

    return SCENARIOS

# The IOS optimizer settings a sweep may fix for its IOS cells (Plan.ios_options):
#   optimize_batch    the batch size the schedule is optimized for (default: the cell's own); a
#                     sweep over batch sizes then executes one schedule at every batch size
#   optimize_threads  the thread budget the measured cost model times stages with (default: the
#                     cell's own): a schedule specialized for another "device"
#   max_group_size    pruning r: most operators in one group of a parallel stage (default 3)
#   max_num_groups    pruning s: most groups in one parallel stage (default 8)
#   search_seconds    a time budget per search (each schedule file's): blocks are searched in order and,
#                     once it is spent, the rest are scheduled greedily; the schedule's record says how
#                     many (ios_core.optimizer.schedule; not set: the full search)
#   cost_cache        the measured cost model's profile database: "default" (the shared one, whose
#                     stage costs and block schedules are reused across runs), "off" (none: every
#                     stage timed again in each cell), "private" (a fresh one in the run folder, so
#                     search times are those of a cold search, yet shared by the run's cells)
IOS_OPTIONS = {"optimize_batch": "a positive integer", "optimize_threads": "a positive integer",
               "max_group_size": "a positive integer", "max_num_groups": "a positive integer",
               "search_seconds": "a positive integer", "cost_cache": "one of default, off, private"}
COST_CACHES = ("default", "off", "private")
PRIVATE_PROFILE_DB = "profiles.sqlite"  # cost_cache=private: in the run folder


def ios_options_problem(options) -> str | None:
    """Why ``options`` are not valid IOS optimizer settings (one line), or None."""
    if not isinstance(options, dict):
        return f"IOS options must be an object, not {type(options).__name__}"
    for key, value in options.items():
        if key not in IOS_OPTIONS:
            return f"unknown IOS option {str(key)[:40]!r}; choose from: {', '.join(IOS_OPTIONS)}"
        if key == "cost_cache":
            if value not in COST_CACHES:
                return f"IOS option cost_cache is {str(value)[:40]!r}, expected {IOS_OPTIONS[key]}"
        elif not _is_int(value, 1):
            return f"IOS option {key} is {str(value)[:40]!r}, expected {IOS_OPTIONS[key]}"
    return None


def ios_options_tag(options: dict) -> str:
    """The part of a schedule file's name that says what it was optimized under (empty for the
    defaults), e.g. ``-t1-r2-s3-cprivate``; the optimized-for batch size is the file's batch."""
    parts = [f"t{options['optimize_threads']}" if "optimize_threads" in options else "",
             f"r{options['max_group_size']}" if "max_group_size" in options else "",
             f"s{options['max_num_groups']}" if "max_num_groups" in options else "",
             f"b{options['search_seconds']}" if "search_seconds" in options else "",
             f"c{options['cost_cache']}" if options.get("cost_cache", "default") != "default" else ""]
    return "".join(f"-{p}" for p in parts if p)


def optimized_for(options: dict, batch_size: int, threads: int | None) -> dict:
    """What an IOS cell's schedule is optimized for, given the sweep's IOS options and the cell."""
    return {"batch_size": options.get("optimize_batch", batch_size),
            "threads": options.get("optimize_threads", threads),
            "max_group_size": options.get("max_group_size", 3), "max_num_groups": options.get("max_num_groups", 8),
            "cost_cache": options.get("cost_cache", "default"),
            **({"search_seconds": options["search_seconds"]} if "search_seconds" in options else {})}


def _options_map(v) -> bool:
    """``{framework: {option: JSON value}}`` with non-empty names (values must survive plan.json)."""
    if not isinstance(v, dict):
        return False
    for fw, opts in v.items():
        if not (isinstance(fw, str) and fw and isinstance(opts, dict) and all(isinstance(k, str) and k for k in opts)):
            return False
        try:
            json.dumps(opts, allow_nan=False)
        except (TypeError, ValueError):
            return False
    return True


def adapter_options(plan: Plan, framework: str, adapter: str) -> dict:
    """The build options of one cell: the adapter's entry (``ios`` for every IOS cell), then the
    framework's own (``ios-both``, ``tvm-tuned``) over it."""
    opts = plan.adapter_options or {}
    return {**(opts.get(adapter) or {} if adapter != framework else {}), **(opts.get(framework) or {})}


def _from_base(spec: str, base: Path) -> str:
    """A model file named relative to the run folder becomes absolute; zoo names stay."""
    if (spec.endswith(".json") or "/" in spec) and not Path(spec).is_absolute():
        return str((base / spec).resolve())
    return spec


def absolute_model_spec(spec: str) -> str:
    """What plan.json stores for a model: zoo names as given, files as absolute paths (so that
    ``--resume`` works from any folder)."""
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        return str(path.resolve())
    return spec


