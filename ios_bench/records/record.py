"""The cell record, declared once: its fields, their types, which are CSV columns, which are
flattened out of a nested object. :func:`ios_bench.results.check_record`, the CSV columns
(``results.COLUMNS``) and ``results.flatten`` all derive from :data:`FIELDS`.

Schema 2: a cell is measured in rounds (``rounds``, each a fresh worker process), and its figures
are statistics over rounds (``ios_bench.running.rounds``). Schema 3 (this version): ``precision`` is
the precision the sweep asked of the cell (part of its key, ``run --precision``) and
``engine_precision`` what the engine reported it computed in (schema 2 kept the engine's under
``precision``). Older records are read through :func:`migrate`: a schema-1 record (one process per
cell) becomes a record of one round; a schema-2 record's ``precision`` moves to ``engine_precision``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

SCHEMA = 3
SCHEMAS = (1, 2, 3)  # what read_records reads (older ones migrated)
# capped: timed in one round and measured no further, too slow to change the answer (its figure, with no
# interval, in no verdict, GeoMean, speedup or plot: docs/harness.md "Capped cells")
STATUSES = ("ok", "wrong", "failed", "skipped", "capped")


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
    Field("status", "text", True, doc="ok, wrong (timed, output check failed), failed, skipped, capped (one round: "
                                      "too slow against the best peer to change the answer)"),
    Field("capped", "object", column=False, doc="capped cells: the factor, its one round's figure, the best peer "
                                                "and its figure, their ratio"),
    Field("median_ms", "number", timed=True, doc="the median of the undisturbed rounds' medians"),
    Field("ci_low_ms", "number", doc="hierarchical bootstrap interval of the figure (rounds, then samples)"),
    Field("ci_high_ms", "number"),
    Field("between_round_cv", "number", doc="std of the round medians / the figure"),
    Field("unstable", "text", doc="why the figure should not be trusted as it stands (None: stable)"),
    Field("rounds_used", "int", doc="undisturbed rounds the figure is over"),
    Field("rounds_measured", "int"),
    Field("rounds_disturbed", "int"),
    Field("load", "text", doc="the steady load the figure was measured under (a co-tenant at about the same share "
                              "through the run: 'under load: python3 pid 1234 50% of the CPUs'); absent when quiet"),
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
    Field("protocol", "object", column=False,
          doc="how the rounds were timed: 'time-bounded' (samples for a time budget, between a least and a most count, "
              "chosen before the first sample) or 'fixed' (counts); each round's warmup, calibration and sample "
              "counts and why (ios_core.measurement.measure)"),
    Field("check", "object", flatten=(("passed", "check_passed"), ("max_rel_err", "check_max_rel_err"),
                                      ("max_abs_err", "check_max_abs_err"), ("tolerance", "check_tolerance"),
                                      ("reason", "check_reason"), ("argmax_agreement", "check_argmax_agreement"),
                                      ("rms_rel_err", "check_rms_rel_err"), ("rms_bound", "check_rms_bound"))),
    Field("precision", "text", doc="the precision the sweep asked for (fp32, bf16, fp16, int8): part of the cell key"),
    Field("engine_precision", "text", doc="what the engine reports it computed in (a cell whose engine computes in "
                                          "another precision than asked fails, never passes as the asked one)"),
    Field("calibration", "object", flatten=(("method", "calibration_method"), ("samples", "calibration_samples"),
                                            ("tool", "calibration_tool")),
          doc="int8 cells: how the quantized model was calibrated (tool, method, seeded samples)"),
    Field("float_ops", "object", flatten=(("conv", "float_conv"), ("matmul", "float_matmul")),
          doc="int8 cells: the convolutions and matrix products the built engine left in float (read back)"),
    Field("threads", "int"),
    Field("peak_rss_mib", "number", doc="the largest resident memory of the cell's workers"),
    Field("gpu_memory", "object", flatten=(("allocator_peak_mib", "gpu_allocator_peak_mib"),
                                           ("nvml_process_mib", "gpu_nvml_process_mib")),
          doc="cuda cells: peak device memory, the allocator's and NVML's view (ios_bench.machine.device_memory)"),
    Field("build_seconds", "number"),
    Field("frameworks_imported", "list", column=False,
          doc="the frameworks its worker imported (an IOS cell on ONNX Runtime kernels: onnxruntime only)"),
    Field("first_build_seconds", "number", doc="the first measured round's build (cold where the framework keeps a "
                                               "build cache: adapters.build_cache); build_seconds is the last's"),
    Field("optimize_seconds", "number"),
    Field("framework_version", "text"),
    Field("predicted_ms", "number", column=False, doc="IOS: the optimizer's estimate (an estimate)"),
    Field("sequential_ms", "number", column=False),
    Field("schedule_hash", "text", column=False),
    Field("reason", "text"),
    Field("samples_ms", "numbers", column=False, doc="the pooled samples of the rounds used"),
    Field("rounds", "list", column=False, doc="every round: samples, interference, disturbed"),
    Field("info", "object", column=False, flatten=tuple((k, f"config_{k}") for k in (
        "threads", "intra_op_threads", "inter_op_threads", "precision", "execution_mode", "tuning",
        "execution"))),
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
               "frameworks_imported", "peak_rss_mib", "worker_seconds", "wall_seconds", "node", "node_id", "threads",
               "clocks", "utilization", "affinity", "returncode", "pid", "independent_check",
               "loadgen", "server", "concurrency", "estimate_ms", "first_try", "gpu_memory", "protocol")


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
    # schemas 1 and 2 kept the engine's precision as "precision"; each of their cells asked for fp32
    if rec.get("precision") is not None:
        out["engine_precision"] = rec["precision"]
    out["precision"] = rec.get("precision_requested") or "fp32"
    if version == 2:
        return out
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


# ---- the result types: the only places a round's or a cell's record is assembled -------------------

def now() -> str:
    """The time a record or round says it started or finished (UTC, to the second)."""
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# what a cell's record takes over from its last measured round (the worker's own facts)
_FROM_LAST_ROUND = ("info", "build_seconds", "framework_version", "clock",
                    "stages", "torch_threads", "frameworks_imported", "node", "node_id", "node_env", "clocks",
                    "utilization", "affinity", "independent_check", "concurrency", "gpu_memory")
# what a record keeps when a worker's result could not be stored as it was
_IDENTITY = ("cell", "model", "batch_size", "framework", "device", "label", "started", "log", "node", "attempt")


class RoundResult:
    """One round of a cell (one fresh worker process), as its record keeps it (``rounds[i]``).

    :meth:`measured` is the one place a worker turns what it timed (an ``ios_core.measurement.measure``
    ``Measurement``, the output check and the interference window's figures) into a round's
    figures; :meth:`from_worker` is the one place the sweep turns a worker's result into the round
    kept in the record. Statistics come from ``ios_core.measurement.stats`` only."""

    @staticmethod
    def measured(measurement, check: dict, window: dict | None) -> dict:
        """The timed part of a worker's result: the measurement's samples and summary
        (``Measurement.summary``: ``ios_core.measurement.stats``), its clock, the check and the window."""
        out = {**measurement.summary(), "samples_ms": [float(v) for v in measurement.samples_ms], "check": check}
        if measurement.meta.get("clock") is not None:
            out["clock"] = measurement.meta["clock"]
        if measurement.meta.get("protocol") is not None:
            out["protocol"] = measurement.meta["protocol"]
        if window is not None:
            out["interference"] = window
        return out

    @staticmethod
    def from_worker(res: dict, *, index: int, position: int, started: str | None, pass_index: int,
                    log: str | None, util_trace: str | None = None) -> dict:
        """The round as the record keeps it: its place in the sweep (``round``, ``pass``,
        ``position``, times, log) and what the worker measured (:func:`round_fields`). A round whose
        output check failed is ``wrong`` (timed, never pooled into a correct figure)."""
        rnd = {"round": index, "pass": pass_index, "position": position, "started": started, "finished": now(),
               "status": res.get("status", "failed"), "log": log}
        for key in round_fields():
            if key in res and key not in rnd:
                rnd[key] = res[key]
        if rnd["status"] == "ok" and not (rnd.get("check") or {}).get("passed", False):
            rnd["status"] = "wrong"
        if isinstance(rnd.get("utilization"), dict) and util_trace:
            rnd["utilization"]["trace"] = util_trace
        return rnd


def protocol_summary(rounds: list[dict]) -> dict | None:
    """The cell's ``protocol``: the timing protocol its measured rounds ran under (a sweep resumed
    under another protocol says so: ``mode`` 'mixed') and, per round, the calls each kind took and why
    its sample count was chosen; None where no round recorded one (records written before rounds were
    time-bounded)."""
    per = [r["protocol"] for r in rounds if isinstance(r.get("protocol"), dict)]
    if not per:
        return None
    modes = sorted({p.get("mode") for p in per})
    out = {"mode": modes[0] if len(modes) == 1 else "mixed",
           "rounds": [{k: p.get(k) for k in ("warmup_calls", "calibration_calls", "samples", "number", "why")}
                      for p in per]}
    for key in ("sample_s", "warmup_s", "min_repeat"):
        if per[-1].get(key) is not None:
            out[key] = per[-1][key]
    return out


class CellResult:
    """A cell's record: every round kept, and its figures derived in one place
    (:meth:`from_rounds`, over ``ios_bench.running.rounds.summarize`` and ``ios_core.measurement.stats``). The record
    itself stays a plain dict (JSON lines in ``results.jsonl``, declared by :data:`FIELDS`);
    this type builds it, reads its figures and formats them (:meth:`figure_text`)."""

    def __init__(self, record: dict):
        self.record = record

    # -- building -------------------------------------------------------------------------------
    @staticmethod
    def unmeasured(base: dict, status: str, reason: str, **more) -> dict:
        """A cell that was not timed (skipped, failed before a round, stopped)."""
        return {**base, "status": status, "reason": reason, **more, "finished": now()}

    @staticmethod
    def invalid(rec: dict, problem: str) -> dict:
        """What is kept of a worker result that is not a valid record: the cell's identity, failed."""
        out = {k: rec[k] for k in _IDENTITY if k in rec}
        out.update(status="failed", reason=f"invalid result from the worker: {problem}", finished=now())
        return out

    @staticmethod
    def capped(record: dict, why: dict) -> dict:
        """A cell measured no further after its first round (``ios_bench.running.round_runner.cap_decisions``):
        its one round's figure stays, its interval and spread go (one round cannot give them), and its
        status keeps it out of every comparison."""
        out = {k: v for k, v in record.items() if k not in ("ci_low_ms", "ci_high_ms", "between_round_cv", "unstable")}
        out.update(status="capped", capped=dict(why),
                   reason=(f"capped after one round: {why['ms']:.4g} ms, {why['ratio']:.1f}x the best peer "
                           f"({why['best']}, {why['best_ms']:.4g} ms; cap factor {why['factor']:g})"))
        return out

    @staticmethod
    def same_as(base: dict, canonical: dict, schedule: dict) -> dict:
        """A cell whose schedule is the same as another's: that cell's measurement, said so."""
        record = dict(base)
        record.update({k: v for k, v in canonical.items() if k not in base})
        record.update(schedule, same_schedule_as=canonical["label"], same_schedule_cell=canonical["cell"])
        return record

    @staticmethod
    def from_rounds(base: dict, rounds: list[dict], *, seed: int, schedule: dict | None = None,
                    stopped: dict | None = None, node_env=None) -> dict:
        """A cell's record from its rounds: the figure over the undisturbed ones (the median of
        their medians), its spread and interval, the check of every measured round, every round
        kept. ``base``: what every record of the cell says (identity, plan); ``schedule``: an IOS
        cell's schedule figures; ``stopped``: the cell's last task was failed or skipped;
        ``node_env(node) -> str``: the environment file of the node the rounds ran on."""
        from ios_bench.running.rounds import MIN_ROUNDS_FOR_VERDICT, summarize
        from ios_bench.scenarios import summary as scenario_summary
        from ios_core.measurement import stats

        record = dict(base)
        if rounds and rounds[0].get("started"):
            record["started"] = rounds[0]["started"]
        record["rounds"] = rounds
        if schedule:
            record.update(schedule)
        measured = [r for r in rounds if r.get("status") in ("ok", "wrong")]
        last = measured[-1] if measured else (rounds[-1] if rounds else {})
        for key in _FROM_LAST_ROUND:
            if key in last and not (key == "concurrency" and not base.get("scenario")):
                record[key] = last[key]
        if last.get("precision") is not None:  # the round's "precision" is what the engine reported
            record["engine_precision"] = last["precision"]
        if isinstance((last.get("info") or {}).get("calibration"), dict):
            record["calibration"] = last["info"]["calibration"]
        if isinstance((last.get("info") or {}).get("float_ops"), dict):  # int8: heavy operators left in float
            record["float_ops"] = last["info"]["float_ops"]
        if measured and isinstance(measured[0].get("build_seconds"), (int, float)):
            record["first_build_seconds"] = measured[0]["build_seconds"]  # the cold build, kept apart
        if record.get("node") is not None and not record.get("node_env") and node_env is not None:
            record["node_env"] = node_env(record["node"])
        peaks = [r["peak_rss_mib"] for r in rounds if isinstance(r.get("peak_rss_mib"), (int, float))]
        if peaks:
            record["peak_rss_mib"] = max(peaks)
        record["log"] = last.get("log")
        record["finished"] = now()
        if stopped is not None and stopped.get("status") in ("failed", "skipped"):
            record.update(status=stopped["status"], reason=stopped.get("reason") or "",
                          stderr_tail=stopped.get("stderr_tail", ""))
            return record
        if not measured:
            record.update(status="failed", reason="no round was measured")
            return record
        # a round whose output was wrong was still timed: its samples count (the record is "wrong")
        timed_rounds = [{**r, "status": "ok"} if r.get("status") == "wrong" else r for r in rounds]
        summary = summarize(timed_rounds, seed=seed)
        if not summary.get("rounds_used"):  # every round disturbed: said so, never silently pooled
            pooled = summarize([{**r, "status": "ok", "disturbed": None} for r in measured], seed=seed)
            summary = {**pooled, "rounds_used": 0, "rounds_disturbed": summary["rounds_disturbed"],
                       "unstable": f"every round was disturbed ({len(measured)}): the figure is over disturbed "
                                   "rounds"}
        record.update(summary)
        record.update(repeat=last.get("repeat"), number=last.get("number"), warmup=last.get("warmup"),
                      percentiles_over="samples")
        protocol = protocol_summary(measured)
        if protocol:
            record["protocol"] = protocol
        checks = [r.get("check") or {} for r in measured]
        bad = next((c for c in checks if not c.get("passed")), None)
        record["check"] = bad or last.get("check") or {}
        if "sequential_ms" in last:  # timed beside the schedule in each round (no sequential cell in the sweep)
            record["sequential_ms"] = stats.median(
                r["sequential_ms"] for r in measured if isinstance(r.get("sequential_ms"), (int, float)))
            record["sequential_from"] = "timed in the same workers, after the schedule"
        bs = record["batch_size"]
        scenario = base.get("scenario")
        if scenario:  # LoadGen's figures over rounds; its verdict kept (ios_bench.scenarios.summary)
            record["percentiles_over"] = "the SUT's per-sample latencies (IssueQuery to completion)"
            record.update(scenario_summary.scenario_fields(scenario, rounds, bs))
            # unstable: LoadGen's figures differ between rounds, or too few undisturbed rounds to say
            record["unstable"] = scenario_summary.unstable_reason(record) or (
                record.get("unstable") if (record.get("rounds_used") or 0) < MIN_ROUNDS_FOR_VERDICT else None)
        else:
            record["throughput"] = bs * 1000.0 / record["median_ms"]
            record["throughput_p10"] = bs * 1000.0 / record["p90_ms"]  # slow samples -> low throughput
            record["throughput_p90"] = bs * 1000.0 / record["p10_ms"]
        record["status"] = "ok" if record["check"].get("passed") else "wrong"
        return record

    @staticmethod
    def sequential_figures(records: dict[str, dict], sequential_key) -> None:
        """IOS cells: ``sequential_ms`` (the sequential schedule on the same provider, measured in
        the same interleaved rounds: ``sequential_key(record)`` names its cell), the speedup over
        it, and the estimate's error. Both figures are the same statistic (the median over rounds)."""
        for rec in records.values():
            if rec.get("kind") != "ios" or rec.get("status") not in ("ok", "wrong") or rec.get("scenario"):
                continue
            seq = records.get(sequential_key(rec))
            if seq is not None and seq.get("status") == "ok":
                rec["sequential_ms"] = seq["median_ms"]
                rec["sequential_from"] = "the sequential cell's rounds (interleaved with this one's)"
                if seq.get("ci_low_ms") is not None:
                    rec["sequential_ci_ms"] = [seq["ci_low_ms"], seq["ci_high_ms"]]
            if rec.get("sequential_ms"):
                rec["speedup_over_sequential"] = rec["sequential_ms"] / rec["median_ms"]
            target = rec.get("optimized_for") or {}
            elsewhere = (target.get("batch_size", rec["batch_size"]) != rec["batch_size"]
                         or target.get("threads", rec.get("threads")) != rec.get("threads"))
            if rec.get("predicted_ms") and not elsewhere:  # an estimate for another batch/budget: no error
                rec["prediction_error"] = (rec["predicted_ms"] - rec["median_ms"]) / rec["median_ms"]

    # -- reading --------------------------------------------------------------------------------
    @property
    def passed(self) -> bool:
        r = self.record
        return bool(r) and r.get("status") == "ok" and bool((r.get("check") or {}).get("passed"))

    @property
    def median_ms(self) -> float | None:
        """A correct cell's figure (ms); None for anything else."""
        return float(self.record["median_ms"]) if self.passed else None

    def spread_ms(self) -> float | None:
        """The figure's spread in ms: the between-round spread (a fraction of the figure) where the
        cell has rounds; a one-process cell's, the std of its samples."""
        r = self.record
        v = r.get("median_ms")
        if not _number(v):
            return None
        cv = r.get("between_round_cv")
        if _number(cv):
            return float(cv) * float(v)
        sd = r.get("std_ms")
        return float(sd) if _number(sd) else None

    def figure_text(self, unit: str = "") -> str:
        """The figure as every table shows it: ``12.35 ±0.21`` (``ios_bench.reporting.numbers``), with
        ``(unstable)`` where its interval is too wide; the status for a cell that was not timed."""
        from ios_bench.reporting.numbers import fmt_pm

        r = self.record
        if r.get("status") == "capped" and _number(r.get("median_ms")) and isinstance(r.get("capped"), dict):
            from ios_bench.reporting.numbers import fmt

            return f"{fmt(float(r['median_ms']))} capped ({r['capped'].get('ratio', 0):.1f}x the best)"
        if r.get("status") not in ("ok", "wrong") or not _number(r.get("median_ms")):
            return str(r.get("status") or "?")
        text = fmt_pm(float(r["median_ms"]), self.spread_ms()) + (f" {unit}" if unit else "")
        if isinstance(r.get("unstable"), str) and r["unstable"]:
            text += " (unstable)"
        return text
