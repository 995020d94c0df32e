"""The cell record, declared once: its fields, their types, which are CSV columns, which are
flattened out of a nested object. :func:`ios_bench.results.check_record`, the CSV columns
(``results.COLUMNS``) and ``results.flatten`` all derive from :data:`FIELDS`.

Schema 2 (this version): a cell is measured in rounds (``rounds``, each a fresh worker process),
and its figures are statistics over rounds (``ios_bench.rounds``). Schema 1 records (one process
per cell) are read through :func:`migrate`, which turns each into a record of one round.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

SCHEMA = 2
SCHEMAS = (1, 2)  # what read_records reads (older ones migrated)
STATUSES = ("ok", "wrong", "failed", "skipped")


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # text, int, number, bool, object, list, numbers
    required: bool = False
    column: bool = True  # a column of results.csv / the DataFrame
    timed: bool = False  # required where the cell was timed (status ok or wrong)
    flatten: tuple[tuple[str, str], ...] = ()  # an object's (key, column) pairs
    doc: str = ""


FIELDS: tuple[Field, ...] = (
    Field("cell", "text", True, False, doc="model|bBATCH|framework|device"),
    Field("model", "text", True),
    Field("batch_size", "int", True),
    Field("framework", "text", True, doc="adapter name, or ios-<schedule>[<provider>]"),
    Field("label", "text"),
    Field("kind", "text", doc="framework or ios"),
    Field("schedule", "text"),
    Field("provider", "text", doc="IOS cells: the runtime's kernel provider"),
    Field("device", "text", True),
    Field("status", "text", True, doc="ok, wrong (timed, output check failed), failed, skipped"),
    Field("median_ms", "number", timed=True, doc="the median of the undisturbed rounds' medians"),
    Field("ci_low_ms", "number", doc="hierarchical bootstrap interval of the figure (rounds, then samples)"),
    Field("ci_high_ms", "number"),
    Field("between_round_cv", "number", doc="std of the round medians / the figure"),
    Field("unstable", "text", doc="why the figure should not be trusted as it stands (None: stable)"),
    Field("rounds_used", "int", doc="undisturbed rounds the figure is over"),
    Field("rounds_measured", "int"),
    Field("rounds_disturbed", "int"),
    Field("same_schedule_as", "text", doc="IOS: another cell of the group runs the identical schedule"),
    Field("mean_ms", "number"),
    Field("std_ms", "number", timed=True, doc="std of the samples of the rounds used (within-process spread)"),
    Field("min_ms", "number"),
    Field("max_ms", "number"),
    Field("p10_ms", "number", timed=True),
    Field("p90_ms", "number", timed=True),
    Field("p99_ms", "number", column=False),
    Field("throughput", "number"),
    Field("throughput_p10", "number"),
    Field("throughput_p90", "number"),
    Field("repeat", "int"),
    Field("number", "int"),
    Field("warmup", "int"),
    Field("check", "object", flatten=(("passed", "check_passed"), ("max_rel_err", "check_max_rel_err"),
                                      ("max_abs_err", "check_max_abs_err"), ("tolerance", "check_tolerance"),
                                      ("reason", "check_reason"))),
    Field("precision", "text"),
    Field("threads", "int"),
    Field("peak_rss_mib", "number", doc="the largest resident memory of the cell's workers"),
    Field("gpu_memory", "object", flatten=(("allocator_peak_mib", "gpu_allocator_peak_mib"),
                                           ("nvml_process_mib", "gpu_nvml_process_mib")),
          doc="cuda cells: peak device memory, the allocator's and NVML's view (ios_bench.device_memory)"),
    Field("build_seconds", "number"),
    Field("optimize_seconds", "number"),
    Field("framework_version", "text"),
    Field("predicted_ms", "number", column=False, doc="IOS: the optimizer's estimate (an estimate)"),
    Field("sequential_ms", "number", column=False),
    Field("schedule_hash", "text", column=False),
    Field("reason", "text"),
    Field("samples_ms", "numbers", column=False, doc="the pooled samples of the rounds used"),
    Field("rounds", "list", column=False, doc="every round: samples, interference, disturbed"),
    Field("info", "object", column=False, flatten=tuple((k, f"config_{k}") for k in (
        "threads", "intra_op_threads", "inter_op_threads", "precision", "execution_mode", "tuning"))),
    Field("clocks", "object", column=False),
    Field("stderr_tail", "text", column=False),
    Field("log", "text", column=False),
    Field("wall_seconds", "number", column=False),
    Field("attempt", "int", column=False),
    # LoadGen scenarios (ios_bench.scenarios; docs/scenarios.md): absent on latency cells
    Field("scenario", "text", doc="the LoadGen scenario (single-stream, multi-stream, offline, server)"),
    Field("variant", "text", doc="scenario:INSTANCESxTHREADS, part of the cell key"),
    Field("instances", "int", doc="requests in flight (programs, streams or run calls)"),
    Field("instance_threads", "int", doc="threads per instance (the budget's share)"),
    Field("reduced", "text", doc="why the scenario's settings are reduced (--quick), else absent"),
    Field("scenario_figure", "number", doc="the scenario's figure over undisturbed rounds (median): single-stream "
                                           "and multi-stream its target-percentile latency (ms), offline samples/s, "
                                           "server the highest valid QPS"),
    Field("scenario_unit", "text", doc="ms, samples/s or QPS"),
    Field("scenario_cv", "number", doc="between-round spread of the scenario's figure"),
    Field("scenario_valid", "bool", doc="LoadGen judged every round used VALID (server: found a valid QPS)"),
    Field("loadgen", "object", flatten=(("valid", "loadgen_valid"), ("invalid_reason", "loadgen_invalid_reason"),
                                        ("samples_per_s", "loadgen_samples_per_s"),
                                        ("completed_qps", "loadgen_qps"),
                                        ("target_latency_ms", "loadgen_target_latency_ms"),
                                        ("p50_ms", "loadgen_p50_ms"), ("p90_ms", "loadgen_p90_ms"),
                                        ("p99_ms", "loadgen_p99_ms"), ("max_ms", "loadgen_max_ms"),
                                        ("query_count", "loadgen_query_count"), ("duration_s", "loadgen_duration_s"),
                                        ("logs", "loadgen_logs")),
          doc="LoadGen's own result (its summary and detail logs) of the round the figure is nearest to"),
    Field("server", "object", column=False, doc="server: the latency bound, where it came from, every try"),
    Field("scenario_settings", "object", column=False, doc="what LoadGen was asked for"),
    Field("concurrency", "object", column=False, doc="how requests were kept in flight (kind, instances, threads)"),
)
BY_NAME = {f.name: f for f in FIELDS}

# what a round keeps of its worker's result (besides round, pass, position, started, finished, status, log)
_ROUND_KEYS = ("reason", "stderr_tail", "samples_ms", "median_ms", "std_ms", "p10_ms", "p90_ms", "repeat", "number",
               "warmup", "calls", "check", "interference", "disturbed", "sequential_ms", "info", "build_seconds",
               "precision", "precision_requested", "framework_version", "clock", "stages", "torch_threads",
               "peak_rss_mib", "worker_seconds", "wall_seconds", "node", "node_id", "threads", "clocks",
               "utilization", "affinity", "returncode", "pid", "independent_check",
               "loadgen", "server", "concurrency", "estimate_ms", "first_try", "gpu_memory")


def round_fields() -> tuple[str, ...]:
    return _ROUND_KEYS


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


_CHECKS = {
    "text": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": _number,
    "bool": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "list": lambda v: isinstance(v, list),
    "numbers": lambda v: isinstance(v, list) and all(_number(x) for x in v),
}


def problems(rec: dict) -> list[str]:
    """The declared fields of ``rec`` that are wrongly typed."""
    bad = [f.name for f in FIELDS if rec.get(f.name) is not None and not _CHECKS[f.kind](rec[f.name])]
    if "batch_size" not in bad and isinstance(rec.get("batch_size"), int) and rec["batch_size"] < 1:
        bad.append("batch_size")
    if isinstance(rec.get("check"), dict) and not isinstance(rec["check"].get("passed"), bool):
        bad.append("check.passed")
    for i, r in enumerate(rec.get("rounds") or [] if isinstance(rec.get("rounds"), list) else []):
        if not (isinstance(r, dict) and isinstance(r.get("round"), int) and isinstance(r.get("status"), str)
                and (r.get("samples_ms") is None or _CHECKS["numbers"](r["samples_ms"]))):
            bad.append(f"rounds[{i}]")
            break
    return bad


def required() -> tuple[str, ...]:
    return tuple(f.name for f in FIELDS if f.required)


def timed() -> tuple[str, ...]:
    return tuple(f.name for f in FIELDS if f.timed)


def columns() -> tuple[str, ...]:
    """The CSV / DataFrame columns, in order (flattened objects' columns where the object stands)."""
    out = []
    for f in FIELDS:
        if f.column and f.kind != "object":
            out.append(f.name)
        out += [col for _, col in f.flatten]
    return tuple(out)


def flatten(rec: dict) -> dict:
    """One row: every field of the record, with declared objects flattened into their columns."""
    objects = {f.name for f in FIELDS if f.kind == "object"}
    row = {k: v for k, v in rec.items() if k not in objects}
    for f in FIELDS:
        if f.flatten:
            obj = rec.get(f.name) if isinstance(rec.get(f.name), dict) else {}
            for key, col in f.flatten:
                row[col] = obj.get(key)
    clocks = rec.get("clocks") if isinstance(rec.get("clocks"), dict) else {}
    for k, v in clocks.items():
        row[f"clock_{k}"] = v if not isinstance(v, list) else (v[0] if len(v) == 1 else str(v))
    rounds = rec.get("rounds") if isinstance(rec.get("rounds"), list) else []
    row["round_medians_ms"] = rec.get("round_medians_ms")
    row["rounds_pids"] = [r.get("pid") for r in rounds if isinstance(r, dict)] or None
    return row


ONE_ROUND_NOTE = ("schema 1: measured in one process; its spread says nothing of between-process noise")


def migrate(rec: dict) -> dict:
    """A record of an older schema as this schema's (a new dict): a schema-1 cell was measured in
    one process, so it becomes a record of one round, marked unstable for that reason."""
    version = rec.get("schema", 1)
    if version == SCHEMA:
        return rec
    out = dict(rec)
    out["schema"] = SCHEMA
    out["migrated_from"] = version
    if rec.get("status") in ("ok", "wrong") and rec.get("samples_ms"):
        out["rounds"] = [{"round": 0, "status": rec["status"], "samples_ms": rec["samples_ms"],
                          "median_ms": rec.get("median_ms"), "check": rec.get("check"), "disturbed": None,
                          "interference": None, "migrated": True}]
        out.update(rounds_used=1, rounds_measured=1, rounds_disturbed=0, unstable=ONE_ROUND_NOTE)
    return out


def jsonable(v) -> bool:
    """Whether ``v`` can be stored in a record as it is (JSON)."""
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False
