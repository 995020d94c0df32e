"""Cells and their names: what one table cell of a sweep is, what the driver sends a worker to
measure one round of it (:class:`CellSpec`), and the file names that come from both.

A cell is (model, batch size, framework or IOS schedule[provider], device, precision). Its key is
``model|bBATCH|framework|device`` (``ios_bench.results.cell_key``), ending ``|int8`` (its precision)
for a cell asked for another precision than fp32; its files are named by
:attr:`Cell.file_stem`, made safe for any model name (``ios_core.names.file_part``).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields

from ios_bench.planning.plan import DEFAULT_IOS_PROVIDER
from ios_bench.reporting.escape import file_part, term
from ios_bench.results import cell_key


def schedule_key(schedule: str, provider: str = DEFAULT_IOS_PROVIDER) -> str:
    """``ios-both`` (the default torch provider) or ``ios-both[onnxruntime]``."""
    return f"ios-{schedule}" if provider == DEFAULT_IOS_PROVIDER else f"ios-{schedule}[{provider}]"


def split_framework(framework: str) -> tuple[str, str | None]:
    """``ios-both[openvino]`` -> (``ios-both``, ``openvino``); ``ios-both`` -> (``ios-both``, ``torch``);
    a peer framework -> (name, None)."""
    if not framework.startswith("ios-"):
        return framework, None
    if framework.endswith("]") and "[" in framework:
        base, provider = framework[:-1].split("[", 1)
        return base, provider
    return framework, DEFAULT_IOS_PROVIDER


def label(framework: str, precision: str | None = None) -> str:
    """Display name: ``ios-both`` -> ``IOS-Both``, ``ios-both[onnxruntime]`` -> ``IOS-Both[onnxruntime]``;
    frameworks keep their registry name. A precision other than fp32 follows: ``onnxruntime int8``."""
    tail = f" {precision}" if precision and precision != "fp32" else ""
    if framework.startswith("ios-"):
        base, provider = split_framework(framework)
        return "IOS-" + base[4:].capitalize() + ("" if provider == DEFAULT_IOS_PROVIDER else f"[{provider}]") + tail
    return framework + tail


def safe_name(text: str) -> str:
    """A file name from names that come from files (model names): see ios_core.names.file_part."""
    return file_part(text)


@dataclass
class Cell:
    model: str  # graph name
    model_spec: str  # zoo name or JSON path
    batch_size: int
    framework: str  # adapter name, or ios-<schedule>
    device: str
    schedule: str | None = None
    adapter: str = ""
    weight: float = 1.0  # relative expected duration (progress ETA)
    skip_reason: str | None = None  # known before running (framework unavailable here)
    nodes: list[str] | None = None  # ids of the nodes that can run it (None: any offering the device)
    provider: str | None = None  # IOS cells: the runtime's kernel provider
    # LoadGen scenario cells (ios_bench.scenarios): the scenario, instances in flight and threads each
    scenario: str | None = None
    instances: int | None = None
    instance_threads: int | None = None
    # an ``ios-bench ab`` cell (ios_bench.running.ab): its side (A or B, part of its key), the build options
    # of its side (over the plan's) and the pair it belongs to (the same framework on the other side)
    side: str | None = None
    side_options: dict | None = None
    pair: str | None = None
    # an ``ab`` side's measurement protocol over the plan's: "fixed" (the fixed counts of --fixed-counts) or
    # "time" (time-bounded rounds; the plan's budgets, else the defaults); None: the plan's
    protocol: str | None = None
    precision: str = "fp32"  # what the sweep asks the engine to compute in (part of its key when not fp32)

    @property
    def variant(self) -> str | None:
        """``offline:2x1`` for a scenario cell, ``A``/``B`` for an ``ab`` cell (part of its key);
        None for a latency cell of a plain sweep."""
        if self.side:
            return self.side
        if not self.scenario:
            return None
        return f"{self.scenario}:{self.instances}x{self.instance_threads}"

    @property
    def key(self) -> str:
        return cell_key(self.model, self.batch_size, self.framework, self.device, self.variant, self.precision)

    @property
    def group(self) -> str:
        """Its (model, batch, device) group: the cells whose rounds are interleaved with its own
        (an ``ab`` sweep's: both sides of every pair at that batch size and device)."""
        if self.pair:
            return f"ab|b{self.batch_size}|{self.device}"
        return f"{self.model}|b{self.batch_size}|{self.device}"

    @property
    def file_stem(self) -> str:
        tail = f"-{self.scenario}-{self.instances}x{self.instance_threads}" if self.scenario else ""
        tail += f"-{self.side}" if self.side else ""
        tail += f"-{self.precision}" if self.precision != "fp32" else ""
        return safe_name(f"{self.model}-b{self.batch_size}-{self.framework}-{self.device}{tail}")


@dataclass
class CellSpec:
    """What the driver sends a worker to measure one round of one cell (``python -m
    ios_bench.running.worker SPEC_JSON``, task ``cell``). Paths (``*_path``) are relative to the run folder
    until the executor resolves them on the node that runs the round."""

    model_spec: str
    batch_size: int
    device: str  # the worker's device kind (cpu, cuda)
    adapter: str
    threads: int | None
    seed: int
    input_seed: int
    ref_path: str
    input_path: str
    result_path: str
    warmup: int
    number: int
    repeat: int
    min_sample_ms: float | None
    # the time-bounded round (ios_core.measurement.measure): None for the fixed protocol
    warmup_s: float | None = None
    sample_s: float | None = None
    min_repeat: int = 1
    precision: str = "fp32"
    spin_policy: str | None = None
    input_sha1: str | None = None
    round: int = 0  # which round of the cell this worker measures
    schedule: str | None = None  # IOS cells: the strategy, the provider and the optimized schedule file
    provider: str | None = None
    schedule_path: str | None = None
    sequential_baseline: bool = False  # IOS cells whose sweep has no sequential cell on their provider
    model_path: str | None = None  # a graph or ONNX file copied into the run folder
    source_ref_path: str | None = None  # an imported model: onnxruntime's output on the original file
    source_error: str | None = None  # ... or why onnxruntime could not run it (independent_check)
    util_path: str | None = None
    options: dict = field(default_factory=dict)  # adapter build options
    # a LoadGen scenario (ios_bench.scenarios.round): name, settings, instances, logs folder (run-relative)
    scenario: dict | None = None
    loadgen_path: str | None = None  # where LoadGen writes this round's logs
    qsl_path: str | None = None  # the query sample library (seeded inputs and the oracle's outputs)
    check_path: str | None = None  # int8: further seeded batches and their oracle outputs the check also runs
    int8_sim_path: str | None = None  # int8: the oracle's int8 simulation's outputs of the checked batches
    task: str = "cell"

    def to_dict(self) -> dict:
        """The JSON the worker gets: optional fields left out where unset."""
        optional = {f.name for f in fields(self) if f.default is not MISSING or f.default_factory is not MISSING}
        return {k: v for k, v in asdict(self).items() if not (k in optional and (v is None or v == {}))}

    @classmethod
    def from_dict(cls, d: dict) -> CellSpec:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"cell spec: unknown field(s) {', '.join(unknown)}")
        return cls(**d)


def build_options(plan, cell: Cell) -> dict:
    """A cell's adapter build options: the plan's (``ios_bench.planning.plan.adapter_options``), then its
    ``ab`` side's over them; an int8 cell of a plan with ``calibration_data`` (``--calibration-data``) is
    calibrated on that folder (every int8 adapter's build option ``calibration_data``)."""
    from ios_bench.planning.plan import adapter_options

    opts = {**adapter_options(plan, cell.framework, cell.adapter), **(cell.side_options or {})}
    if getattr(cell, "precision", None) == "int8" and getattr(plan, "calibration_data", None):
        opts["calibration_data"] = plan.calibration_data
    return opts


def ref_file(model: str, batch_size: int, ext: str = "npy") -> str:
    """Run-folder-relative path of a reference output (``npy``), its input (``input.npy``) or meta."""
    return f"refs/{safe_name(f'{model}-b{batch_size}')}.{ext}"


def util_file(cell: Cell) -> str:
    """Run-folder-relative path of a cell's utilization trace (``sample_utilization``)."""
    return f"util/{cell.file_stem}.json"


def node_env_path(node: str) -> str:
    return f"nodes/{safe_name(node)}/env.json"


def describe(record: dict) -> str:
    """One line of rich markup for a finished cell (names and reasons escaped): its figure with the
    interval over rounds, the between-round spread, rounds used and disturbed, peak memory, the
    output check, and an ``UNSTABLE`` flag where its interval is too wide."""
    head = term(f"{record['model']} b{record['batch_size']} {record.get('label') or record['framework']}", False)
    if record.get("scenario") and record["status"] in ("ok", "wrong"):
        from ios_bench.scenarios.summary import describe_scenario

        return describe_scenario(record, head)
    if record["status"] in ("ok", "wrong"):
        check = record.get("check") or {}
        mark = ("output ok" if record["status"] == "ok" else
                f"[red]WRONG OUTPUT[/] ({term(check.get('reason', '?'), False)})")
        text = f"{head}: {record['median_ms']:.3f} ms"
        if record.get("ci_low_ms") is not None and record.get("ci_high_ms") is not None:
            text += f" [{record['ci_low_ms']:.3f}-{record['ci_high_ms']:.3f}]"
        cv = record.get("between_round_cv")
        text += f" (±{cv:.1%} between rounds" if cv is not None else f" (±{record['std_ms']:.3f} in one process"
        used, measured = record.get("rounds_used"), record.get("rounds_measured")
        if used is not None:
            text += f", {used} of {measured} rounds" + (f", {record['rounds_disturbed']} disturbed"
                                                        if record.get("rounds_disturbed") else "")
        text += ")"
        if record.get("peak_rss_mib"):
            text += f", {record['peak_rss_mib']:.0f} MiB"
        if record.get("same_schedule_as"):
            text += f", same schedule as {term(record['same_schedule_as'], False)}"
        if (record.get("independent_check") or {}).get("ran") is False:
            mark += f" [yellow](oracle only: {term(record['independent_check'].get('reason', '?'), False)})[/]"
        text += f", {mark}"
        if record.get("load"):  # measured under a steady co-tenant: the condition, on the figure
            text += f" [yellow]{term(record['load'], False)}[/]"
        if record.get("unstable"):
            text += f" [yellow]UNSTABLE[/] ({term(record['unstable'], False)})"
        return text
    color = "yellow" if record["status"] in ("skipped", "capped") else "red"
    return f"{head}: [{color}]{term(record['status'])}[/]: {term(record.get('reason', ''), False)}"
