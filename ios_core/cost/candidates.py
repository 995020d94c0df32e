"""The end of a measured search: whole schedules timed end to end, as the cell that runs the one
kept will time it.

``ios_core.optimize`` ends a search with candidates (:data:`CANDIDATES`: the DP's schedule, the
sequential and greedy ones, the DP without merges, the DP under a fitted per-stage cost);
``MeasuredCostModel.time_candidates`` times them here (:func:`time_candidates`) with its device's
timing (``timing_cpu.CpuTiming`` or ``timing_cuda.CudaTiming``: ``candidate`` builds and warms a
schedule as a cell does, ``sample`` times one call as a cell does), interleaved; what they showed
(:func:`correction`) is in the cost model's stats.
"""

from __future__ import annotations

import time

from ios_core.cost.timing_cuda import reason
from ios_core.measurement.stats import median

CANDIDATES = ("schedule", "sequential", "greedy", "parallel", "overhead")
# the CPU's end-to-end candidates race: after this many interleaved rounds, a candidate whose median is
# more than RACE_DROP above the best's is timed no more (its figure is the median of what it has)
RACE_ROUNDS = 3
RACE_DROP = 0.10
# the rounds are also bounded by time, as a cell's round is (ios_core.measurement.protocol): after
# RACE_ROUNDS rounds, no further round starts once the rounds so far have spent RACE_S seconds. Calls of
# milliseconds keep every round asked for (7 rounds of four 50 ms candidates take 1.4 s); calls of a
# second or more (batch 16 and 32) stop at RACE_ROUNDS, where more rounds of seconds-long calls buy little
RACE_S = 2.0


def candidate_names(candidates) -> tuple[str, ...]:
    """The schedules a search ends by timing end to end (``ios_core.optimize``): every one of
    :data:`CANDIDATES` unless asked otherwise (a comma-separated list; ``"all"`` is every one)."""
    if candidates is None or candidates == "all":
        return CANDIDATES
    names = tuple(x.strip() for x in candidates.split(",")) if isinstance(candidates, str) else tuple(candidates)
    bad = [n for n in names if n not in CANDIDATES]
    if bad or "schedule" not in names:
        raise ValueError(f"candidates must include 'schedule' and be among {', '.join(CANDIDATES)}, not {names}")
    return names


def time_candidates(timing, graphs: dict, batch_size: int, repeat: int, runtimes: dict | None = None,
                    race: bool = False, seed: int = 0, budget_s: float | None = RACE_S, clock=None) -> dict:
    """Time whole schedules (``graphs``: name -> scheduled graph), each built and warmed by
    ``timing.candidate`` (a graph without weights gets seeded ones), then ``repeat`` rounds, each
    one sample (``timing.sample``) of every candidate, in forward order on even rounds and reversed
    on odd ones, so drift hits all alike. ``race``: after :data:`RACE_ROUNDS` rounds a candidate
    whose median so far is above the best's by more than :data:`RACE_DROP` is timed no more (its
    median is over the samples it has: ``samples_by``). ``budget_s``: after :data:`RACE_ROUNDS` rounds
    (or ``repeat``, if fewer), no further round starts once the rounds have spent ``budget_s`` seconds
    (``clock``, default ``time.perf_counter``; None: every round): ``rounds`` and ``stopped`` say how many
    ran and why. ``runtimes`` (name -> (graph, runtime)),
    when given, keeps each built and warm runtime for a later call with the same graph object
    (warmed again by one run only). Returns ``{"measured_ms": {name: median ms}, "failed": {name:
    reason}, "samples", "rounds", "stopped", "budget_s", "samples_by", "seconds", "number", "clock"}``
    (``samples``: the rounds asked for); a candidate that cannot be
    built or run (a GPU gone) is a reason."""
    from ios_core.ir import Graph

    tick = clock or time.perf_counter
    t0 = time.perf_counter()
    rts, failed = {}, {}
    kept = runtimes if runtimes is not None else {}
    for name, g in graphs.items():
        try:
            old = kept.get(name)
            if old is not None and old[0] is g:  # built and warmed by an earlier call
                rt = old[1]
                timing.sample(rt)
            else:
                rt = timing.candidate(g if g.has_weights else Graph.from_json(g.to_json()).init_weights(seed),
                                      batch_size)
            rts[name] = rt
            kept[name] = (g, rt)
        except Exception as e:  # this candidate cannot run here: its reason, the others go on
            failed[name] = reason(e)
    samples: dict[str, list[float]] = {k: [] for k in rts}
    order = list(rts)
    rounds, stopped, started = 0, f"the {max(1, repeat)} rounds asked for", tick()
    for i in range(max(1, repeat)):
        if budget_s is not None and i >= min(RACE_ROUNDS, repeat) and tick() - started >= budget_s:
            stopped = f"{budget_s:g} s of rounds spent after {i} rounds (at least {min(RACE_ROUNDS, repeat)})"
            break
        rounds += 1
        if race and i == RACE_ROUNDS and len(order) > 2:
            now = {k: median(samples[k]) for k in order if samples[k] and k not in failed}
            if now:
                best = min(now.values())
                order = [k for k in order if k not in now or now[k] <= best * (1.0 + RACE_DROP)]
        for k in order if i % 2 == 0 else order[::-1]:
            if k in failed:
                continue
            try:
                samples[k].append(timing.sample(rts[k]))
            except Exception as e:
                failed[k] = reason(e)
    med = {k: median(v) for k, v in samples.items() if v and k not in failed}
    return {"measured_ms": med, "failed": failed, "samples": repeat, "rounds": rounds, "stopped": stopped,
            "budget_s": budget_s, "number": 1, "clock": timing.clock,
            "samples_by": {k: len(v) for k, v in samples.items() if k not in failed},
            "seconds": time.perf_counter() - t0}


def correction(validation: dict, replay: dict | None) -> dict:
    """What the end-to-end candidates of ``validation`` (``ios_core.optimize``) showed: the fitted
    per-stage cost, each candidate's error, and with the replay constants (cuda) each candidate's
    ``corrected_ms`` (its prediction less the per-graph cost every stage figure carries but a whole
    replay pays once; written into the candidate rows) and its error. ``candidates_timed`` counts
    the distinct schedules timed (a row ``same_as`` another carries that one's figure and ran
    nothing); ``candidates_considered`` every row."""
    considered = validation.get("candidates", [])
    rows = [c for c in considered if c.get("measured_ms") is not None]
    timed = [c for c in rows if not c.get("same_as")]
    graph_ms = (replay or {}).get("graph_ms")
    if graph_ms is not None:
        for c in considered:
            c["corrected_ms"] = c["predicted_ms"] - max(c["stages"] - 1, 0) * graph_ms
    out = {"per_stage_ms": validation.get("per_stage_ms"), "candidates_timed": len(timed),
           "candidates_considered": len(considered),
           "error_pct": {c["name"]: round(100.0 * (c["predicted_ms"] / c["measured_ms"] - 1.0), 1)
                         for c in rows if c["measured_ms"] > 0}}
    if replay:
        out["replay"] = replay
    if graph_ms is not None:
        out["corrected_error_pct"] = {c["name"]: round(100.0 * (c["corrected_ms"] / c["measured_ms"] - 1.0), 1)
                                      for c in rows if c["measured_ms"] > 0}
    return out


__all__ = ["CANDIDATES", "RACE_DROP", "RACE_ROUNDS", "RACE_S", "candidate_names", "correction", "time_candidates"]
