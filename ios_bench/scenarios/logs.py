"""LoadGen's own logs, read back: ``mlperf_log_summary.txt`` (the human summary: verdict, headline
figure, latency percentiles) and ``mlperf_log_detail.txt`` (``:::MLLOG {json}`` lines: the query
count, why a run is invalid, the test's start and end). :func:`parse` turns one run's pair into the
``loadgen`` object a record carries (``ios_bench.records.record``: ``loadgen``)."""

from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path

SUMMARY = "mlperf_log_summary.txt"
DETAIL = "mlperf_log_detail.txt"
KEPT = (SUMMARY, DETAIL)  # what the run folder keeps of each LoadGen run (accuracy/trace logs are removed)

_PERCENTILE = re.compile(r"^(\d+(?:\.\d+)?) percentile latency \(ns\)$")
_HEADLINE = re.compile(r"^(\d+(?:\.\d+)?)th percentile latency \(ns\)$")


def read_summary(path: str | Path) -> dict:
    """The summary's ``label : value`` lines (the first occurrence of each label; MultiStream's
    per-query latencies come first, as LoadGen prints them), and its recommendation lines."""
    out: dict = {}
    notes: list[str] = []
    section = None
    for raw in Path(path).read_text(errors="replace").splitlines():
        line = raw.strip()
        if line.startswith(("Recommendations:", "Early Stopping Result:")):
            section = line.rstrip(":")
            continue
        if not line or line.startswith("=") or line.startswith("Additional Stats"):
            section = None if not line or line.startswith("=") else section
            continue
        if section and line.startswith("*"):
            notes.append(f"{section}: {line.lstrip('* ').strip()}")
            continue
        if section and notes and not line.startswith("*") and ":" not in line:
            notes[-1] += " " + line  # a wrapped note
            continue
        key, sep, value = line.partition(":")
        if sep and key.strip() not in out:
            out[key.strip()] = value.strip()
    out["_notes"] = notes
    return out


def read_detail(path: str | Path) -> dict:
    """``{key: value}`` of the detail log's MLLOG lines (the last value of a repeated key; every
    ``generic_message`` kept in order under ``_messages``)."""
    out: dict = {"_messages": []}
    for raw in Path(path).read_text(errors="replace").splitlines():
        if not raw.startswith(":::MLLOG "):
            continue
        try:
            entry = json.loads(raw[len(":::MLLOG "):])
        except ValueError:
            continue
        key = entry.get("key")
        if key == "generic_message":
            out["_messages"].append(entry.get("value"))
        elif isinstance(key, str):
            out[key] = entry.get("value")
    return out


def _ns_ms(v) -> float | None:
    try:
        return float(v) / 1e6
    except (TypeError, ValueError):
        return None


def _float(v) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _when(text) -> _dt.datetime | None:
    try:
        return _dt.datetime.strptime(str(text), "%m-%d-%Y %H:%M:%S.%f")
    except ValueError:
        return None


def parse(folder: str | Path, samples_per_query: int = 1) -> dict:
    """One LoadGen run's result from its logs in ``folder``: ``valid`` (LoadGen's verdict) and
    ``invalid_reason`` (its recommendations and early-stopping result, in its words), the headline
    (``target_percentile`` latency for SingleStream/MultiStream; ``samples_per_s`` for Offline;
    completed and scheduled QPS for Server), ``p50_ms p90_ms p99_ms max_ms min_ms mean_ms`` (per
    query for MultiStream, as LoadGen reports it), ``query_count``, ``duration_s``."""
    folder = Path(folder)
    s = read_summary(folder / SUMMARY)
    d = read_detail(folder / DETAIL)
    scenario = s.get("Scenario") or d.get("effective_scenario")
    out: dict = {"scenario": scenario, "mode": s.get("Mode") or d.get("effective_test_mode"),
                 "validity": s.get("Result is") or d.get("result_validity")}
    out["valid"] = out["validity"] == "VALID"
    percentiles = {}
    for key, value in s.items():
        m = _PERCENTILE.match(key)
        if m:
            percentiles[float(m.group(1))] = _ns_ms(value)
        m = _HEADLINE.match(key)
        if m:
            out["target_percentile"] = float(m.group(1)) / 100
            out["target_latency_ms"] = _ns_ms(value)
    for pct, name in ((50.0, "p50_ms"), (90.0, "p90_ms"), (99.0, "p99_ms"), (99.9, "p999_ms")):
        out[name] = percentiles.get(pct)
    out["min_ms"] = _ns_ms(s.get("Min latency (ns)"))
    out["max_ms"] = _ns_ms(s.get("Max latency (ns)"))
    out["mean_ms"] = _ns_ms(s.get("Mean latency (ns)"))
    out["query_count"] = int(d["result_query_count"]) if isinstance(d.get("result_query_count"), int) else None
    begin, end = _when(d.get("power_begin")), _when(d.get("power_end"))
    out["duration_s"] = (end - begin).total_seconds() if begin and end else None
    if scenario == "Offline":
        out["samples_per_s"] = _float(s.get("Samples per second"))
    elif scenario == "Server":
        out["completed_qps"] = _float(s.get("Completed samples per second"))
        out["scheduled_qps"] = _float(s.get("Scheduled samples per second"))
        out["samples_per_s"] = out["completed_qps"]
        out["target_qps"] = _float(d.get("effective_target_qps"))
        out["latency_bound_ms"] = _ns_ms(d.get("effective_target_latency_ns"))
        out["server_percentile"] = _float(d.get("effective_target_latency_percentile"))
        out["overlatency_queries"] = d.get("result_overlatency_query_count")
    elif scenario == "SingleStream":
        out["samples_per_s"] = _float(d.get("result_qps_with_loadgen_overhead"))
    elif scenario == "MultiStream" and out["query_count"] and out["duration_s"]:
        out["samples_per_s"] = out["query_count"] * samples_per_query / out["duration_s"]
    checks = {"min duration": s.get("Min duration satisfied"), "min queries": s.get("Min queries satisfied"),
              "early stopping": s.get("Early stopping satisfied"),
              "performance constraints": s.get("Performance constraints satisfied")}
    out["constraints"] = {k: v.lower() == "yes" for k, v in checks.items() if isinstance(v, str)}
    if not out["valid"]:
        failed = [k for k, ok in out["constraints"].items() if not ok]
        notes = [n for n in s["_notes"] if n.startswith("Recommendations") or "early stopping" in failed]
        out["invalid_reason"] = ("not met: " + ", ".join(failed) if failed else "INVALID") + (
            "; " + " ".join(notes) if notes else "")
    out["errors"] = d.get("num_errors")
    return out


def keep_only_summary_and_detail(folder: str | Path) -> None:
    """Remove what else LoadGen wrote in ``folder`` (the empty accuracy log, the trace)."""
    for p in Path(folder).glob("mlperf_log_*"):
        if p.name not in KEPT:
            p.unlink(missing_ok=True)
