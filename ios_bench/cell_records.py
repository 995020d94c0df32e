"""A cell's record as the sweep builds it (the fields are declared once in :mod:`ios_bench.record`):
one round as kept in it, the record from its rounds (the figure over the undisturbed ones, every
round kept), the record of a cell whose schedule is another's, and the IOS cells' figures against
the sequential schedule."""

from __future__ import annotations

import datetime as _dt

from .cells import Cell, label, node_env_path, schedule_key
from .executors import Task
from .plan import DEFAULT_IOS_PROVIDER, Plan, adapter_options, optimized_for
from .record import SCHEMA, round_fields
from .rounds import MIN_ROUNDS_FOR_VERDICT, summarize
from .scenarios import cells as scenario_cells
from .scenarios import summary as scenario_summary
from .schedules import schedule_fields


def now() -> str:
    """The time a record or round says it started or finished (UTC, to the second)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def round_record(task: Task, res: dict, index: int, position: int, started: str | None, pass_index: int) -> dict:
    """One round as kept in the record: its samples, what else used the machine, and the
    worker's own figures (check, build info) the cell's record takes from its last round."""
    rnd = {"round": index, "pass": pass_index, "position": position, "started": started, "finished": now(),
           "status": res.get("status", "failed"), "log": task.log}
    for key in round_fields():
        if key in res and key not in rnd:
            rnd[key] = res[key]
    if rnd["status"] == "ok" and not (rnd.get("check") or {}).get("passed", False):
        rnd["status"] = "wrong"
    if isinstance(rnd.get("utilization"), dict) and task.spec.get("util_path"):
        rnd["utilization"]["trace"] = task.spec["util_path"]
    return rnd


class CellRecords:
    """Builds the records of one sweep's cells. ``local``: the tasks ran on this machine (its
    environment is env.json, not a node's); ``attempts``: {cell key: the attempts stored so far}."""

    def __init__(self, plan: Plan, local: bool, attempts: dict[str, int] | None = None):
        self.plan = plan
        self.local = local
        self.attempts = attempts or {}

    def base(self, cell: Cell) -> dict:
        """What every record of the cell says, measured or not."""
        plan = self.plan
        return {"schema": SCHEMA, "cell": cell.key, "model": cell.model, "batch_size": cell.batch_size,
                "framework": cell.framework, "label": label(cell.framework),
                "kind": "ios" if cell.schedule else "framework",
                "schedule": cell.schedule, "device": cell.device, "adapter": cell.adapter,
                **({"provider": cell.provider or DEFAULT_IOS_PROVIDER} if cell.schedule else {}),
                **({"optimized_for": optimized_for(plan.ios_options, cell.batch_size, plan.threads)}
                   if cell.schedule and plan.ios_options else {}),
                "threads": plan.threads, "seed": plan.seed, "input_seed": plan.input_seed, "started": now(),
                "round_seed": plan.round_seed,
                **({"options": o} if (o := adapter_options(plan, cell.framework, cell.adapter)) else {}),
                **({"attempt": self.attempts[cell.key] + 1} if cell.key in self.attempts else {}),
                **scenario_cells.record_fields(cell, plan)}

    def from_rounds(self, cell: Cell, rounds: list[dict], sched: dict | None, stopped: dict | None) -> dict:
        """A cell's record from its rounds: the figure over the undisturbed ones, every round kept."""
        record = self.base(cell)
        if rounds and rounds[0].get("started"):
            record["started"] = rounds[0]["started"]
        record["rounds"] = rounds
        if sched:
            record.update(schedule_fields(sched))
        measured = [r for r in rounds if r.get("status") in ("ok", "wrong")]
        last = measured[-1] if measured else (rounds[-1] if rounds else {})
        for key in ("info", "build_seconds", "precision", "precision_requested", "framework_version", "clock",
                    "stages", "torch_threads", "node", "node_id", "node_env", "clocks", "utilization", "affinity",
                    "independent_check", "gpu_memory"):
            if key in last:
                record[key] = last[key]
        if record.get("node") is not None and not record.get("node_env"):
            record["node_env"] = node_env_path(record["node"]) if not self.local else "env.json"
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
        timed = [{**r, "status": "ok"} if r.get("status") == "wrong" else r for r in rounds]
        summary = summarize(timed, seed=self.plan.round_seed)
        if not summary.get("rounds_used"):  # every round disturbed: said so, never silently pooled
            pooled = summarize([{**r, "status": "ok", "disturbed": None} for r in measured], seed=self.plan.round_seed)
            summary = {**pooled, "rounds_used": 0, "rounds_disturbed": summary["rounds_disturbed"],
                       "unstable": f"every round was disturbed ({len(measured)}): the figure is over disturbed "
                                   "rounds"}
        record.update(summary)
        record.update(repeat=last.get("repeat"), number=last.get("number"), warmup=last.get("warmup"),
                      percentiles_over="samples")
        checks = [r.get("check") or {} for r in measured]
        bad = next((c for c in checks if not c.get("passed")), None)
        record["check"] = bad or last.get("check") or {}
        if "sequential_ms" in last:  # timed beside the schedule in each round (no sequential cell in the sweep)
            seq = [r["sequential_ms"] for r in measured if isinstance(r.get("sequential_ms"), (int, float))]
            record["sequential_ms"] = float(sorted(seq)[len(seq) // 2])
            record["sequential_from"] = "timed in the same workers, after the schedule"
        bs = cell.batch_size
        if cell.scenario:  # LoadGen's figures over rounds; its verdict kept (ios_bench.scenarios.summary)
            for key in ("concurrency",):
                if key in last:
                    record[key] = last[key]
            record["percentiles_over"] = "the SUT's per-sample latencies (IssueQuery to completion)"
            record.update(scenario_summary.scenario_fields(cell.scenario, rounds, bs))
            # unstable: LoadGen's figures differ between rounds, or too few undisturbed rounds to say
            record["unstable"] = scenario_summary.unstable_reason(record) or (
                record.get("unstable") if (record.get("rounds_used") or 0) < MIN_ROUNDS_FOR_VERDICT else None)
        else:
            record["throughput"] = bs * 1000.0 / record["median_ms"]
            record["throughput_p10"] = bs * 1000.0 / record["p90_ms"]  # slow samples -> low throughput
            record["throughput_p90"] = bs * 1000.0 / record["p10_ms"]
        record["status"] = "ok" if record["check"].get("passed") else "wrong"
        return record

    def same_as(self, cell: Cell, canonical: dict, sched: dict) -> dict:
        """A cell whose schedule is the same as another's: that cell's measurement, said so."""
        record = self.base(cell)
        keep = set(record)
        record.update({k: v for k, v in canonical.items() if k not in keep})
        record.update(schedule_fields(sched), same_schedule_as=canonical["label"],
                      same_schedule_cell=canonical["cell"])
        return record


def sequential_figures(records: dict[str, dict]) -> None:
    """IOS cells: ``sequential_ms`` (the sequential schedule on the same provider, measured in the
    same interleaved rounds), the speedup over it, and the estimate's error."""
    for rec in records.values():
        if rec.get("kind") != "ios" or rec.get("status") not in ("ok", "wrong") or rec.get("scenario"):
            continue
        seq_key = rec["cell"].replace(rec["framework"], schedule_key("sequential", rec["provider"]))
        seq = records.get(seq_key)
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
