"""A scenario cell's figures over its rounds (the record's scenario fields, ``ios_bench.records.record``):
each round's figure is LoadGen's (single-stream and multi-stream: its target-percentile latency;
offline: samples per second; server: the highest QPS it judged VALID), and the cell's is their
median over the undisturbed rounds, with their spread, as for every cell (``ios_bench.running.rounds``)."""

from __future__ import annotations

from ios_bench.reporting.escape import term
from ios_bench.reporting.numbers import fmt
from ios_bench.running.rounds import UNSTABLE_CV, good_rounds
from ios_core.measurement import stats

UNITS = {"single-stream": "ms", "multi-stream": "ms", "offline": "samples/s", "server": "QPS"}
HIGHER_IS_BETTER = {"single-stream": False, "multi-stream": False, "offline": True, "server": True}


def round_figure(scenario: str, rnd: dict) -> float | None:
    lgr = rnd.get("loadgen") or {}
    if scenario == "server":
        return (rnd.get("server") or {}).get("max_valid_qps")
    if scenario == "offline":
        return lgr.get("samples_per_s")
    return lgr.get("target_latency_ms")


def round_valid(scenario: str, rnd: dict) -> bool:
    if scenario == "server":
        return (rnd.get("server") or {}).get("max_valid_qps") is not None
    return bool((rnd.get("loadgen") or {}).get("valid"))


def scenario_fields(scenario: str, rounds: list[dict], batch_size: int) -> dict:
    """The record's scenario fields from its rounds (measured ones; the undisturbed where any)."""
    measured = [r for r in rounds if r.get("status") in ("ok", "wrong") and r.get("loadgen")]
    used = [r for r in good_rounds(rounds) if r.get("loadgen")] or measured
    if not used:
        return {}
    figures = [(r, f) for r in used if (f := round_figure(scenario, r)) is not None]
    out: dict = {"scenario_unit": UNITS[scenario], "scenario_valid": all(round_valid(scenario, r) for r in used)}
    if scenario == "server":
        # a round's answer is the highest QPS LoadGen judged VALID, or none; the cell has one when at
        # least half its rounds found one (the median of theirs), else none
        if len(figures) * 2 < len(used):
            figures = []
        out["scenario_valid"] = bool(figures)
    rates = [lg["samples_per_s"] for r in used if isinstance((lg := r["loadgen"]).get("samples_per_s"), (int, float))]
    if scenario == "server":
        rates = [f for _, f in figures]
    if rates:
        out["throughput"] = stats.median(rates) * batch_size
    if not figures:
        out["loadgen"] = used[-1]["loadgen"]
        out["server"] = _server(used[-1])
        if scenario == "server":
            out["server"].update(none_valid(used))
        return out
    values = [f for _, f in figures]
    figure = stats.median(values)
    out["scenario_figure"] = figure
    out["scenario_cv"] = stats.cv(values)  # the one coefficient of variation: std (n - 1) over the figure
    nearest = min(figures, key=lambda rf: abs(rf[1] - figure))[0]
    out["loadgen"] = nearest["loadgen"]
    if scenario == "server":
        out["server"] = _server(nearest, [f for _, f in figures])
    return out


def _server(rnd: dict, per_round: list[float] | None = None) -> dict:
    s = dict(rnd.get("server") or {})
    if per_round is not None:
        s["max_valid_qps_per_round"] = per_round
    return s


def none_valid(rounds: list[dict]) -> dict:
    """A Server cell without a valid QPS: from which load up none of its rounds that searched down to
    a plateau or floor found one (the highest of their lowest loads tried, so that it holds for each
    of them), as the record's ``server.none_valid_above_qps`` and ``server.verdict``."""
    from ios_bench.scenarios.server import verdict

    lows = [x for r in rounds if isinstance(x := (r.get("server") or {}).get("none_valid_above_qps"), (int, float))]
    top = max(lows) if lows else None
    return {"none_valid_above_qps": top, "none_valid_above_qps_per_round": lows, "verdict": verdict(top)}


def unstable_reason(summary: dict) -> str | None:
    cv = summary.get("scenario_cv")
    if cv is not None and cv > UNSTABLE_CV:
        return f"rounds' LoadGen figures differ by {cv:.1%} (threshold {UNSTABLE_CV:.0%})"
    return None


def describe_scenario(record: dict, head: str) -> str:
    """The terminal line of a finished scenario cell."""
    lgr = record.get("loadgen") or {}
    unit = record.get("scenario_unit") or ""
    fig = record.get("scenario_figure")
    none = (record.get("server") or {}).get("verdict") if fig is None else None
    text = f"{head}: " + (f"{fig:.4g} {unit}" if fig is not None else none or "no valid figure")
    cv = record.get("scenario_cv")
    used, measured = record.get("rounds_used"), record.get("rounds_measured")
    text += (f" (±{cv:.1%} between rounds, " if cv is not None else " (") + f"{used} of {measured} rounds)"
    verdict = "VALID" if record.get("scenario_valid") else "INVALID"
    why = lgr.get("invalid_reason") if not record.get("scenario_valid") else None
    text += f", LoadGen [{'green' if verdict == 'VALID' else 'yellow'}]{verdict}[/]"
    if why:
        text += f" ({term(why[:160], False)})"
    pct = "/".join(fmt(lgr[k]) for k in ("p50_ms", "p90_ms", "p99_ms") if isinstance(lgr.get(k), (int, float)))
    if pct:
        text += f", p50/p90/p99 {pct} ms"
    if record.get("reduced"):
        text += " [dim](reduced)[/]"
    check = record.get("check") or {}
    wrong = f", [red]WRONG OUTPUT[/] ({term(check.get('reason', '?'), False)})"
    text += ", output ok" if record["status"] == "ok" else wrong
    if record.get("unstable"):
        text += f" [yellow]UNSTABLE[/] ({term(record['unstable'], False)})"
    return text
