"""Throughput as services measure it: every CPU framework and IOS under MLPerf LoadGen's Offline
and Server scenarios (docs/scenarios.md), against today's batch-1 latency protocol.

Three sweeps over the same models, frameworks and IOS schedules (Sequential and Both, on every
kernel provider available: IOS on its best kernels):

- ``latency``: today's protocol, one request at a time; its batch-1 throughput is 1000 / latency;
- ``offline``: LoadGen Offline, every instance/thread split from 1 to the thread budget;
- ``server``: LoadGen Server, the same splits, the highest QPS whose latency percentile stays within
  2x the single-stream p90 (the single-stream cells are measured in the same sweep).

The report answers the issue's questions (:func:`goal_figures`, also printed by
``benchmarks/bench_scenarios.py``): offline throughput of each framework's best configuration
against its latency-derived throughput; N instances of IOS-Sequential against one IOS-Both on the
same provider; the highest valid Server QPS per framework; LoadGen's verdict on every cell.
"""

from __future__ import annotations

from pathlib import Path

from ios_bench.experiments import _common as c
from ios_bench.experiments.base import Context, Report, Run
from ios_bench.planning.cells import label
from ios_bench.scenarios.report import none_valid_text, winners

FULL_MODELS = ["squeezenet", "inception_v3"]
QUICK_MODELS = ["sample"]
QUICK_PEERS = ["onnxruntime"]
QUICK_SETTINGS = {"server_tries": 3}  # the quick form's Server search: three LoadGen runs per cell
# the reference form runs LoadGen's reduced settings, but judges Server at the p99 the goal names (a p99
# needs 459 queries before LoadGen's early stopping can pass)
REFERENCE_SERVER = {"server_percentile": 0.99, "min_query_count": 512}
NOTES = {"latency": "today's protocol, one request at a time",
         "multi-stream": "LoadGen MultiStream, every instance/thread split",
         "offline": "LoadGen Offline, every instance/thread split",
         "server": "LoadGen Server, every split, bound 2x single-stream p90 (single-stream cells included)"}
SCHEDULES = ["sequential", "both"]


class Throughput:
    name = "throughput"
    title = "Throughput under MLPerf LoadGen scenarios"
    summary = ("Offline and Server (LoadGen) for every CPU framework and IOS, each with its best instance/thread "
               "split, against the batch-1 latency-derived throughput")
    paper = ("no published counterpart (issue 23: does inter-operator parallelism inside one request beat several "
             "requests in flight?)")

    def runs(self, ctx: Context) -> list[Run]:
        models = c.models(ctx, FULL_MODELS, FULL_MODELS, QUICK_MODELS)
        peers = QUICK_PEERS if ctx.quick else None
        out = []
        scenarios = ("latency", "offline", "server") if ctx.quick else ("latency", "offline", "server", "multi-stream")
        for scenario in scenarios:
            settings = {}
            if scenario == "server":
                settings = dict(QUICK_SETTINGS if ctx.quick else REFERENCE_SERVER if ctx.form == "reference" else {})
            plan = c.plan(ctx, models=models, batch_sizes=[1], frameworks=peers, schedules=list(SCHEDULES),
                          scenario=scenario, quick=scenario != "latency" and ctx.form != "full",
                          scenario_settings=settings)
            plan.ios_providers = ["torch"] if ctx.quick else None  # IOS on every provider: its best kernels
            out.append(Run(scenario, plan, NOTES[scenario]))
        return out

    def reduced(self, ctx: Context) -> list[str]:
        notes = c.form_notes(ctx)
        if ctx.form != "full":
            from ios_bench.scenarios.settings import QUICK_NOTE

            notes.append(f"LoadGen scenarios in their {QUICK_NOTE}")
        if ctx.quick:
            notes.append(f"quick form: peers {', '.join(QUICK_PEERS)} only, IOS on its torch kernels, "
                         f"{QUICK_SETTINGS['server_tries']} LoadGen runs per Server search, no MultiStream sweep")
        if ctx.form == "reference":
            notes.append("Server judged at p99 (server_percentile 0.99, min_query_count 512) despite the reduced "
                         "settings: the goal's bound is on the p99")
        return notes

    def report(self, ctx: Context, folders: dict[str, Path]) -> Report:
        figs = goal_figures({k: c.records(v) for k, v in folders.items()})
        sections = [
            ("Offline against latency-derived throughput", c.table(
                "Offline samples/s (best configuration) / (1000 / batch-1 latency)",
                ["model", "framework", "latency (ms)", "latency-derived /s", "offline /s", "best config", "ratio"],
                [[r["model"], r["label"], c.cell(r["latency_record"]), c.fmt(r["latency_rate"]),
                  c.fmt(r["offline_rate"]), r["config"] or "-", f"{r['ratio']:.2f}x" if r["ratio"] else "-"]
                 for r in figs["offline"]],
                "offline: the configuration LoadGen judged VALID with the highest samples/s, correct outputs only")),
            ("N x IOS-Sequential against one IOS-Both", c.table(
                "Offline samples/s on the same provider",
                ["model", "provider", "IOS-Sequential (best N)", "IOS-Both (1 instance)", "ratio"],
                [[r["model"], r["provider"], f"{c.fmt(r['sequential'])} ({r['sequential_config']})"
                  if r["sequential"] else "-", c.fmt(r["both"]), f"{r['ratio']:.2f}x" if r["ratio"] else "-"]
                 for r in figs["ios"]],
                "ratio > 1: several requests in flight beat inter-operator parallelism inside one request")),
            ("Server: highest valid QPS", c.table(
                "Server, latency percentile within 2x the single-stream p90",
                ["model", "framework", "max valid QPS", "config", "bound (ms)"],
                [[r["model"], r["label"], c.fmt(r["qps"]) if r["qps"] else r["none_valid"], r["config"] or "-",
                  c.fmt(r["bound_ms"])]
                 for r in figs["server"]])),
            ("LoadGen's verdicts", f"{figs['valid']} of {figs['judged']} scenario cells VALID ("
             + ", ".join(f"{k}: {v[0]} of {v[1]}" for k, v in figs["verdicts"].items()) + ")"
             + ("; invalid: " + "; ".join(figs["invalid"][:20]) if figs["invalid"] else "")),
        ]
        return Report(self.title, sections, [], self.reduced(ctx))


def _config(rec: dict | None) -> str | None:
    return f"{rec['instances']}x{rec['instance_threads']}" if rec else None


def goal_figures(runs: dict[str, list[dict]]) -> dict:
    """The issue's goal figures from the experiment's records ({run name: records}): per model and
    framework the offline/latency ratio, N x IOS-Sequential / one IOS-Both per provider, the highest
    valid Server QPS, and LoadGen's verdict counts."""
    lat, off, srv = runs.get("latency", []), runs.get("offline", []), runs.get("server", [])
    scen = off + srv + runs.get("multi-stream", [])
    wins = winners(scen)
    out: dict = {"offline": [], "ios": [], "server": [], "valid": 0, "judged": 0, "invalid": [], "verdicts": {}}
    for r in lat:
        if not c.passed(r):
            continue
        w = wins.get(("offline", r["device"], r["batch_size"], r["model"], r["framework"]))
        rate = r["batch_size"] * 1000.0 / r["median_ms"]
        off_rate = w["throughput"] if w else None
        out["offline"].append({"model": r["model"], "framework": r["framework"], "label": label(r["framework"]),
                               "latency_ms": r["median_ms"], "latency_record": r, "latency_rate": rate,
                               "offline_rate": off_rate,
                               "config": _config(w), "ratio": off_rate / rate if off_rate else None})
    for (scenario, device, bs, model, fw), w in wins.items():
        if scenario == "offline" and fw.startswith("ios-sequential"):
            provider = fw[len("ios-sequential"):] or "[torch]"
            both_fw = "ios-both" + fw[len("ios-sequential"):]
            both = next((r for r in off if r["framework"] == both_fw and r["model"] == model and r["device"] == device
                         and r["batch_size"] == bs and r.get("instances") == 1 and r["status"] == "ok"
                         and r.get("scenario_valid")), None)
            seq_n = max((r for r in off if r["framework"] == fw and r["model"] == model and r["status"] == "ok"
                         and r.get("scenario_valid") and (r.get("instances") or 1) > 1
                         and r.get("throughput") is not None), key=lambda r: r["throughput"], default=None)
            seq = seq_n or w
            out["ios"].append({"model": model, "provider": provider.strip("[]"), "sequential": seq["throughput"],
                               "sequential_config": _config(seq), "both": both["throughput"] if both else None,
                               "ratio": seq["throughput"] / both["throughput"] if both else None})
    for model, fw in dict.fromkeys((r["model"], r["framework"]) for r in srv if r.get("scenario") == "server"):
        w = next((x for k, x in wins.items() if k[0] == "server" and k[3] == model and k[4] == fw), None)
        any_rec = next(r for r in srv if r["model"] == model and r["framework"] == fw and r["scenario"] == "server")
        out["server"].append({"model": model, "framework": fw, "label": label(fw),
                              "qps": w["scenario_figure"] if w else None, "config": _config(w),
                              "none_valid": None if w else none_valid_text(srv, model, fw, "none valid"),
                              "bound_ms": ((w or any_rec).get("server") or {}).get("latency_bound_ms")})
    for r in scen:
        if r.get("status") in ("ok", "wrong") and r.get("scenario"):
            out["judged"] += 1
            counts = out["verdicts"].setdefault(r["scenario"], [0, 0])  # [valid, judged]
            counts[1] += 1
            if r.get("scenario_valid"):
                out["valid"] += 1
                counts[0] += 1
            else:
                reason = (r.get("loadgen") or {}).get("invalid_reason") or "no valid QPS"
                out["invalid"].append(f"{r['cell']}: {reason[:100]}")
    return out


EXPERIMENT = Throughput()
