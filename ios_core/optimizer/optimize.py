"""``schedule`` / ``optimize``: schedule every block of a graph with one strategy.

    result = schedule(graph, "both", cost_model, batch_size=1)   # OptimizeResult
    result.graph, result.schedule, result.stats                    # Graph, Schedule, OptimizeStats
    scheduled = optimize(graph, "both", cost_model)              # just the graph

Strategies: ``sequential`` (one operator per stage, block order), ``greedy`` (the paper's
baseline: every ready operator goes into the next parallel stage, at most ``max_num_groups``
per stage), ``merge`` / ``parallel`` / ``both`` (IOS-Merge / IOS-Parallel / IOS-Both: the
dynamic program of :mod:`ios_core.optimizer.dp`).

The result is a new graph (the input is never modified): merge stages are applied as graph
transforms (a merged convolution replaces the originals and its consumers read their channel
slices) and every block carries ``stages``; the search figures are returned beside it
(:class:`OptimizeStats`), never attached to the graph.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from ios_core.ir import Block, Graph, GraphError, Node, Value, leaf_nodes
from ios_core.optimizer.dp import PartSearch, count_states, descendants, iter_bits
from ios_core.optimizer.merge import can_merge, merge_convs, merge_key, merge_offsets
from ios_core.optimizer.stage import Schedule, Stage

# The one list of strategies (the CLI's choices, the sweep's schedules, the benchmarks).
STRATEGIES = ("sequential", "greedy", "merge", "parallel", "both")
DEFAULT_MAX_PART_SIZE = 100


@dataclass
class OptimizeStats:
    """Figures of one ``optimize`` call (``states``/``transitions`` are 0 for the baselines)."""

    strategy: str
    batch_size: int
    r: int  # max_group_size
    s: int  # max_num_groups
    max_part_size: int
    blocks: int = 0
    parts: int = 0
    states: int = 0
    transitions: int = 0
    stages_costed: int = 0  # distinct stages the cost model was asked about (each once)
    search_seconds: float = 0.0  # the searches (and cost model calls), not the graph copy or transform
    cost_ms: float = 0.0  # the schedule's total latency under the cost model
    num_stages: int = 0
    merged: int = 0  # merge stages applied (convolutions merged into one)
    blocks_reused: int = 0  # blocks whose schedule came from the cost model's plan store (no search)
    cost_model: str = ""
    rounds: int = 1  # searches run: more than one when the cost model refines its answers (refine)
    per_block: list[dict] = field(default_factory=list)
    # the end-of-search check against the sequential schedule (cost models that can run schedules:
    # ``cost_model.validate_schedule``); None when not done
    validation: dict | None = None
    # a chain graph (only_sequential) whose DP schedule the cost model priced no lower than the sequential
    # one: the sequential schedule is returned (the tie broken towards it) and not validated
    chain_tie: bool = False
    # a search bounded in time (``search_seconds``): the budget, and the blocks scheduled greedily because
    # it was spent before their turn (the schedule is then the best found within the budget, said so)
    search_budget_s: float | None = None
    budget_greedy_blocks: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return (f"strategy={self.strategy} batch={self.batch_size} r={self.r} s={self.s}: "
                f"{self.states} states, {self.transitions} transitions, {self.stages_costed} stages costed, "
                f"{self.search_seconds:.3f} s search; {self.num_stages} stages ({self.merged} merges), "
                f"cost {self.cost_ms:.4f} ms"
                + (f"; {self.blocks_reused} block schedules reused (no search)" if self.blocks_reused else "")
                + (f"; search budget {self.search_budget_s:g} s spent: {self.budget_greedy_blocks} of {self.blocks} "
                   "blocks scheduled greedily" if self.budget_greedy_blocks else "")
                + ("; a chain graph: the sequential schedule, priced no higher than any grouping (not validated)"
                   if self.chain_tie else "")
                + (f"; {validation_text(self.validation)}" if self.validation else ""))


def validation_text(v: dict) -> str:
    """One line saying what the end-of-search check measured and which schedule was kept."""
    if "candidates" in v:
        parts = []
        for c in v["candidates"]:
            ms = c.get("measured_ms")
            if c.get("same_as"):
                parts.append(f"{c['name']} (= {c['same_as']})")
            else:
                parts.append(f"{c['name']} {ms:.3f}" if ms is not None else f"{c['name']} -")
        return (f"candidates timed end to end ({v.get('form', 'runtime')}, ms): " + ", ".join(parts)
                + f" -> {v['kept'].upper() if v['kept'] != 'schedule' else 'schedule'} kept"
                + (f" ({v['reason']})" if v.get("reason") else ""))
    head = (f"measured with the runtime: schedule {v['schedule_ms']:.3f} ms, sequential {v['sequential_ms']:.3f} ms")
    if v["kept"] == "sequential":
        return head + " -> the schedule was slower: the SEQUENTIAL schedule is returned instead"
    return head + " -> schedule kept"


class StageCoster:
    """Asks the cost model about each distinct stage once. Keys are canonical: a stage is
    identified by its kind and the set of its operators (which determines its groups); a
    single operator is always the same stage, whichever strategy produced it."""

    def __init__(self, cost_model, batch_size: int):
        self.cost_model = cost_model
        self.batch_size = batch_size
        self.cache: dict[tuple, float] = {}

    def latency(self, kind: str, key: object, groups: list[list[Node]]) -> float:
        if kind == "merge" and len(groups) == 1:
            kind = "parallel"
        k = (kind, key)
        hit = self.cache.get(k)
        if hit is None:
            hit = float(self.cost_model.stage_latency(Stage(kind, groups), self.batch_size))
            self.cache[k] = hit
        return hit

    @property
    def count(self) -> int:
        return len(self.cache)


def copy_graph(graph: Graph) -> Graph:
    """A deep, independent copy (through the JSON layout; weights copied)."""
    new = Graph.from_json(graph.to_json())
    originals = {n.name: n for n in graph.operators()}
    for node in new.operators():
        src = originals[node.name]
        if src.HAS_WEIGHTS and src.weights():
            node.set_weights({k: a.copy() for k, a in src.weights().items()})
    return new


@dataclass(frozen=True)
class OptimizeResult:
    """What :func:`schedule` returns: the scheduled graph (a new graph carrying its stages,
    merges applied), its :class:`Schedule`, and the search figures."""

    graph: Graph
    stats: OptimizeStats

    @property
    def schedule(self) -> Schedule:
        return Schedule.of(self.graph)


def optimize(graph: Graph, strategy: str, cost_model, batch_size: int = 1, max_group_size: int = 3,
             max_num_groups: int = 8, max_part_size: int = DEFAULT_MAX_PART_SIZE, progress: bool = False,
             validate: bool = True, search_seconds: float | None = None) -> Graph:
    """Schedule ``graph``; returns a new graph carrying its stages (see :func:`schedule` for
    the search figures and ``validate``)."""
    return schedule(graph, strategy, cost_model, batch_size=batch_size, max_group_size=max_group_size,
                    max_num_groups=max_num_groups, max_part_size=max_part_size, progress=progress,
                    validate=validate, search_seconds=search_seconds).graph


def schedule(graph: Graph, strategy: str, cost_model, batch_size: int = 1, max_group_size: int = 3,
             max_num_groups: int = 8, max_part_size: int = DEFAULT_MAX_PART_SIZE,
             progress: bool = False, validate: bool = True, search_seconds: float | None = None) -> OptimizeResult:
    """Schedule ``graph`` with ``strategy`` (one of :data:`STRATEGIES`) under ``cost_model``;
    returns the scheduled graph with its statistics. The input graph is never modified.

    ``validate``: when the cost model can run schedules (``validate_schedule``, the measured
    cost model), a schedule other than sequential is timed against the sequential one with the
    real runtime at the end; if it is not faster, the sequential schedule is returned instead,
    and ``stats.validation`` says so (``kept``, both times).

    ``search_seconds``: a time budget for the search. Blocks are searched in order; once the budget
    is spent, the blocks left are scheduled greedily (each ready set in one parallel stage, costed
    but not searched), and ``stats.budget_greedy_blocks`` says how many: the schedule is the best
    found within the budget, never presented as the full search's. (Blocks whose schedule the
    cost model's plan store holds are reused whatever the budget.)"""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    for label, v in (("batch_size", batch_size), ("max_group_size", max_group_size),
                     ("max_num_groups", max_num_groups), ("max_part_size", max_part_size)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{label} must be a positive integer, not {v!r}")
    if search_seconds is not None and not (isinstance(search_seconds, (int, float)) and search_seconds > 0):
        raise ValueError(f"search_seconds must be a positive number of seconds, not {search_seconds!r}")
    deadline = None if search_seconds is None else time.perf_counter() + float(search_seconds)
    if not hasattr(cost_model, "stage_latency"):
        raise TypeError("cost_model must have stage_latency(stage, batch_size) -> ms")
    graph.validate()
    # A cost model that estimates first may ask to see what the search picked
    # (``refine(stages, batch_size) -> number of stages it re-costed``); while it re-costs any,
    # the search runs again with its new answers (ios_core.cost.learned measures the picks).
    # Each round's pick is then measured whole; the best measured pick is kept, and the rounds stop
    # when a search promises less than ``cost_model.refine_tolerance`` (a fraction) over it.
    refine = getattr(cost_model, "refine", None)
    tolerance = float(getattr(cost_model, "refine_tolerance", 0.0) or 0.0)
    originals = {n.name: n for b in graph.blocks for n in b.nodes}
    rounds = 0
    best: tuple[float, OptimizeResult] | None = None
    while True:
        rounds += 1
        result, picked = _search(graph, strategy, cost_model, batch_size, max_group_size, max_num_groups,
                                 max_part_size, progress and rounds == 1, deadline)
        result.stats.search_budget_s = None if search_seconds is None else float(search_seconds)
        if refine is None or strategy in ("sequential", "greedy"):  # their stages do not depend on costs
            break
        if best is not None and result.stats.cost_ms >= best[0] * (1.0 - tolerance):
            result = best[1]  # not worth measuring: the best measured pick stands
            break
        stages = [Stage(kind, [[originals[n.name] for n in g] for g in groups]) for kind, groups in picked]
        if not refine(stages, batch_size):
            break  # every stage of this pick was measured already: its cost is a measured one
        measured = sum(float(cost_model.stage_latency(st, batch_size)) for st in stages)
        if best is None or measured < best[0]:
            result.stats.cost_ms = measured
            best = (measured, result)
    result.stats.rounds = rounds
    end = getattr(cost_model, "end_search", None)  # a cost model that buffers what it measured stores it now
    if callable(end):
        end()
    new, stats = result.graph, result.stats
    opts = dict(max_group_size=max_group_size, max_num_groups=max_num_groups, max_part_size=max_part_size)
    if strategy not in ("sequential", "greedy") and getattr(cost_model, "composes_groups", False) \
            and only_sequential(graph):
        # a chain: no operator can run beside another, so the DP can only group runs of it into one stage's
        # group; a cost model that composes a group as the sum of its operators (``composes_groups``: the
        # measured one on the CPU) prices that as the operators one by one, and the tie goes to the sequential
        # schedule (its stages already costed: the model's memo answers), never validated against itself
        seq = schedule(graph, "sequential", cost_model, batch_size, validate=False, **opts)
        if seq.stats.cost_ms <= stats.cost_ms * (1.0 + 1e-9):
            stats.cost_ms, stats.num_stages, stats.merged = seq.stats.cost_ms, seq.stats.num_stages, 0
            stats.chain_tie = True
            return OptimizeResult(seq.graph, stats)
    if not validate or strategy == "sequential":
        return result
    if callable(getattr(cost_model, "time_candidates", None)):
        return _keep_fastest(graph, strategy, cost_model, batch_size, result, opts)
    check = getattr(cost_model, "validate_schedule", None)
    verdict = None
    if callable(check):
        seq = schedule(graph, "sequential", cost_model, batch_size, validate=False, **opts)
        verdict = check(new, seq.graph, batch_size)
    if verdict is not None:  # None: the cost model could not run this schedule
        verdict = dict(verdict)
        verdict["schedule_cost_ms"] = stats.cost_ms
        verdict["sequential_cost_ms"] = seq.stats.cost_ms
        stats.validation = verdict
        if verdict["kept"] == "sequential":
            # the DP's figures stay; the schedule returned (and its estimate) are the sequential one's
            stats.cost_ms = seq.stats.cost_ms
            stats.num_stages = seq.stats.num_stages
            stats.merged = 0
            return OptimizeResult(seq.graph, stats)
    return result


class StageOverhead:
    """Another cost hypothesis for the end-to-end candidates: each stage costs what the cost model
    says plus ``per_stage_ms`` (the per-stage cost fitted from the candidates' measured against
    predicted latencies: what a stage costs in the whole schedule beyond its time alone, launch and
    join gaps; less, on cuda, the per-graph cost every stage figure carries once but a whole replay
    pays once, so it may be negative). The cost model's memo answers every stage it has seen: the
    search costs little."""

    def __init__(self, base, per_stage_ms: float):
        self.base, self.per_stage_ms = base, float(per_stage_ms)

    def stage_latency(self, stage, batch_size: int) -> float:
        return float(self.base.stage_latency(stage, batch_size)) + self.per_stage_ms


def fit_per_stage_ms(rows: list[dict], per_graph_ms: float | None = None) -> float | None:
    """Least squares of ``measured - corrected = k * stages`` over candidates measured (k >= 0):
    the per-stage cost the end-to-end runs show beyond the stage costs; None without one.
    ``corrected`` is the prediction less ``(stages - 1) * per_graph_ms`` (the per-graph cost that
    each stage figure carries and a whole replay pays once: ``replay_constants()["graph_ms"]`` on
    cuda); without it the prediction itself. Fitted against the raw prediction on cuda, the
    overstated per-graph cost of every stage but one would hide any per-stage cost (k clamped to 0)."""
    g = float(per_graph_ms or 0.0)
    pairs = [(r["measured_ms"] - (r["predicted_ms"] - max(r["stages"] - 1, 0) * g), r["stages"]) for r in rows
             if r.get("measured_ms") is not None and r.get("predicted_ms") is not None and r.get("stages")]
    den = sum(n * n for _, n in pairs)
    if not den:
        return None
    return max(0.0, sum(d * n for d, n in pairs) / den)


def _per_graph_ms(cost_model) -> float | None:
    """The per-graph cost every stage figure of ``cost_model`` carries once but a whole run pays once
    (``replay_constants()["graph_ms"]``: cuda's measured cost model), or None (the CPU, or constants
    that could not be timed)."""
    rc = getattr(cost_model, "replay_constants", None)
    constants = rc() if callable(rc) else None
    g = (constants or {}).get("graph_ms")
    return max(0.0, float(g)) if isinstance(g, (int, float)) else None  # below 0: noise, no correction


def _stage_keys(g: Graph) -> list:
    return [(st.kind, [[n.name for n in grp] for grp in st.groups]) for st in Schedule.of(g)]


# the candidates a strategy may end with: those in its own search space (a baseline or an ablation
# never returns another strategy's schedule: greedy is checked against sequential only, IOS-Merge
# gets no parallel stage)
CANDIDATE_SPACE = {"greedy": ("sequential",), "merge": ("sequential", "overhead"),
                   "parallel": ("sequential", "greedy", "overhead"),
                   "both": ("sequential", "greedy", "parallel", "overhead")}


def _takes(fn, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _keep_fastest(graph, strategy, cost_model, batch_size, result, opts) -> OptimizeResult:
    """The search's end where whole schedules are cheap to run (``cost_model.time_candidates``):
    the DP's schedule, the sequential and greedy ones, the DP without merges (``parallel``) and the
    DP's best under a per-stage overhead fitted from those measurements (``overhead``) are timed
    end to end, interleaved, on the device; the fastest is returned. Every candidate's predicted
    and measured latency is in ``stats.validation["candidates"]`` (the cell record gets it)."""
    names = tuple(n for n in (getattr(cost_model, "candidates", None) or ("schedule", "sequential"))
                  if n == "schedule" or n in CANDIDATE_SPACE[strategy])
    stats = result.stats
    found: dict[str, OptimizeResult] = {"schedule": result}
    for name in names:
        if name in found or name == "overhead" or name == strategy:
            continue
        if name in STRATEGIES:
            found[name] = schedule(graph, name, cost_model, batch_size, validate=False, **opts)
    rows: dict[str, dict] = {}

    def row(name, res):
        same = next((k for k, v in found.items() if k != name and k in rows and
                     _stage_keys(v.graph) == _stage_keys(res.graph)), None)
        rows[name] = {"name": name, "predicted_ms": res.stats.cost_ms, "stages": res.stats.num_stages,
                      "merged": res.stats.merged, **({"same_as": same} if same else {})}

    for name, res in found.items():
        row(name, res)
    timed = {k: found[k].graph for k, r in rows.items() if "same_as" not in r}
    # the runtimes built and warmed for the first timing serve the second (the overhead candidate's)
    runtimes: dict = {}
    reuse = {"runtimes": runtimes} if _takes(cost_model.time_candidates, "runtimes") else {}
    # the overhead candidate against the best one: 5 rounds (not the first timing's 7 on the CPU, 11 on cuda)
    few = {"repeat": 5} if reuse else {}
    verdict = cost_model.time_candidates(timed, batch_size, **reuse)
    for name, ms in verdict.get("measured_ms", {}).items():
        rows[name]["measured_ms"] = ms
        if name in verdict.get("samples_by", {}):
            rows[name]["samples"] = verdict["samples_by"][name]
    for name, why in verdict.get("failed", {}).items():
        rows[name]["reason"] = why
    per_graph = _per_graph_ms(cost_model)
    per_stage = fit_per_stage_ms([r for r in rows.values() if "measured_ms" in r], per_graph)
    if "overhead" in names and per_stage is not None and strategy in ("merge", "parallel", "both"):
        # each stage: its figure, less the per-graph cost it carries (cuda), plus the fitted per-stage cost
        offset = per_stage - (per_graph or 0.0)
        alt = schedule(graph, strategy, StageOverhead(cost_model, offset), batch_size, validate=False, **opts)
        end = getattr(cost_model, "end_search", None)
        if callable(end):
            end()
        # its prediction under the cost model itself, as the others' (the fitted overhead apart)
        alt.stats.cost_ms -= offset * alt.stats.num_stages
        found["overhead"] = alt
        row("overhead", alt)
        rows["overhead"]["per_stage_ms"] = per_stage
        if "same_as" not in rows["overhead"]:
            best = min((r for r in rows.values() if "measured_ms" in r), key=lambda r: r["measured_ms"], default=None)
            pair = {"overhead": alt.graph, **({best["name"]: found[best["name"]].graph} if best else {})}
            for k in [k for k in runtimes if k not in pair]:  # only the best's runtime is timed again
                del runtimes[k]
            again = cost_model.time_candidates(pair, batch_size, **reuse, **few)
            verdict["seconds"] = verdict.get("seconds", 0.0) + again.get("seconds", 0.0)
            if "overhead" in again.get("failed", {}):
                rows["overhead"]["reason"] = again["failed"]["overhead"]
            elif "overhead" in again.get("measured_ms", {}):
                ms = again["measured_ms"]
                # on the scale of the first timing: the best's first figure times the ratio measured now
                scale = rows[best["name"]]["measured_ms"] / ms[best["name"]] if best and ms.get(best["name"]) else 1.0
                rows["overhead"]["measured_ms"] = ms["overhead"] * scale
                rows["overhead"]["measured_raw_ms"] = ms["overhead"]
                if "overhead" in again.get("samples_by", {}):
                    rows["overhead"]["samples"] = again["samples_by"]["overhead"]
    for r in rows.values():  # a candidate identical to another measured as that one
        if "same_as" in r and "measured_ms" in rows.get(r["same_as"], {}):
            r["measured_ms"] = rows[r["same_as"]]["measured_ms"]
    ran = {k: r for k, r in rows.items() if r.get("measured_ms") is not None}
    # the fastest measured; on a tie the simpler schedule (sequential first, as the CPU check always did)
    kept = min(ran, key=lambda k: (ran[k]["measured_ms"], k != "sequential")) if ran else "schedule"
    chosen = found[kept]
    validation = {"candidates": list(rows.values()), "kept": kept,
                  "schedule_ms": rows["schedule"].get("measured_ms"),
                  "sequential_ms": rows.get("sequential", {}).get("measured_ms"),
                  "schedule_cost_ms": rows["schedule"]["predicted_ms"],
                  "sequential_cost_ms": rows.get("sequential", {}).get("predicted_ms"),
                  "per_stage_ms": per_stage, **({"per_graph_ms": per_graph} if per_graph is not None else {}),
                  **{k: v for k, v in verdict.items() if k not in ("measured_ms", "failed", "samples_by")}}
    if not ran:
        validation["reason"] = "no candidate could be timed end to end: the DP's schedule is kept unmeasured"
    note = getattr(cost_model, "note_candidates", None)
    if callable(note):
        note(validation)
    stats.validation = validation
    if kept != "schedule":
        # the DP's search figures stay; the schedule returned (and its estimate) are the kept one's
        stats.cost_ms = chosen.stats.cost_ms
        stats.num_stages = chosen.stats.num_stages
        stats.merged = chosen.stats.merged
        return OptimizeResult(chosen.graph, stats)
    return result


def _search(graph, strategy, cost_model, batch_size, max_group_size, max_num_groups, max_part_size, progress,
            deadline: float | None = None):
    """One search: (result, the picked stages as (kind, groups of the copy's nodes) before merging); past
    ``deadline`` (``time.perf_counter``) the blocks left are scheduled greedily (:func:`schedule`)."""
    new = copy_graph(graph)
    stats = OptimizeStats(strategy, batch_size, max_group_size, max_num_groups, max_part_size,
                          blocks=len(new.blocks), cost_model=type(cost_model).__name__)
    coster = StageCoster(cost_model, batch_size)
    picked: list[tuple[str, list[list[Node]]]] = []
    bar = _progress_bar(new, strategy, max_part_size) if progress else None
    # a cost model with a persistent store (the measured one) keeps each block's schedule: the same
    # block, strategy and costs give the same schedule again without a search
    store = cost_model.plan_store() if callable(getattr(cost_model, "plan_store", None)) else None
    if strategy in ("sequential", "greedy"):
        store = None
    taken = set(n.name for n in new.nodes()) | set(n.name for n in new.operators())
    try:
        for bi, block in enumerate(new.blocks):
            t0 = time.perf_counter()
            states0, trans0, costed0 = stats.states, stats.transitions, coster.count
            key = None if store is None else _plan_key(store[1], new, bi, strategy, batch_size, max_group_size,
                                                        max_num_groups, max_part_size)
            saved = store[0].get_plan(key) if key else None
            over = (deadline is not None and saved is None and strategy not in ("sequential", "greedy")
                    and time.perf_counter() >= deadline)
            if over:  # the budget is spent: this block greedily, never stored as the strategy's plan
                plan = _schedule_block(bi, block, "greedy", coster, max_group_size, max_num_groups, max_part_size,
                                       stats, bar)
                stats.budget_greedy_blocks += 1
            elif saved is not None:
                plan = [(kind, groups, cost) for kind, groups, cost in saved]
                stats.blocks_reused += 1
                if bar is not None:
                    bar.update(_block_states(block, max_part_size))
            else:
                plan = _schedule_block(bi, block, strategy, coster, max_group_size, max_num_groups, max_part_size,
                                       stats, bar)
                if key:
                    store[0].put_plan(key, [[kind, groups, cost] for kind, groups, cost in plan])
            search_time = time.perf_counter() - t0
            stats.search_seconds += search_time
            block_cost = sum(c for _, _, c in plan)
            stats.cost_ms += block_cost
            stats.per_block.append({"block": bi, "operators": len(block.nodes), "states": stats.states - states0,
                                    "transitions": stats.transitions - trans0,
                                    "stages_costed": coster.count - costed0, "stages": len(plan),
                                    "cost_ms": block_cost, "seconds": search_time,
                                    **({"greedy": "the search budget was spent"} if over else {})})
            stats.num_stages += len(plan)
            for kind, groups, _ in plan:
                kind = "merge" if kind == "merge" and len(groups) > 1 else "parallel"
                picked.append((kind, [[block.nodes[u] for u in g] for g in groups]))
            stats.merged += _apply(block, plan, taken)
    finally:
        if bar is not None:
            bar.close()
    stats.stages_costed = coster.count
    new.validate()
    return OptimizeResult(new, stats), picked


# ---- per block -----------------------------------------------------------------------------------------
def _block_edges(block: Block) -> list[int]:
    nodes = block.nodes
    index = {id(n): i for i, n in enumerate(nodes)}
    succ = [0] * len(nodes)
    for i, node in enumerate(nodes):
        for pred in node.predecessors():
            j = index.get(id(pred))
            if j is not None:
                succ[j] |= 1 << i
    return succ


def _schedule_block(bi, block, strategy, coster, r, s, part_size, stats, bar):
    """[(kind, groups of operator indices, latency)] in execution order."""
    nodes = block.nodes
    n = len(nodes)
    succ = _block_edges(block)
    pred = [0] * n
    for i in range(n):
        for j in iter_bits(succ[i]):
            pred[j] |= 1 << i
    desc = descendants(succ)

    def parallel_cost(mask, groups):
        return coster.latency("parallel", (bi, mask), [[nodes[u] for u in g] for g in groups])

    def merge_cost(mask, members):
        return coster.latency("merge", (bi, mask), [[nodes[u]] for u in members])

    if strategy == "sequential":
        return [("parallel", [[u]], parallel_cost(1 << u, [[u]])) for u in range(n)]
    if strategy == "greedy":
        plan, done = [], 0
        left = (1 << n) - 1
        while left:
            ready = [u for u in iter_bits(left) if pred[u] & ~done == 0]
            for k in range(0, len(ready), s):
                chunk = ready[k:k + s]
                mask = sum(1 << u for u in chunk)
                plan.append(("parallel", [[u] for u in chunk], parallel_cost(mask, [[u] for u in chunk])))
            for u in ready:
                done |= 1 << u
                left &= ~(1 << u)
        return plan

    exit_index = n - 1
    merge_class = [None] * n
    if strategy in ("merge", "both"):
        for u, node in enumerate(nodes):
            if u != exit_index:
                merge_class[u] = merge_key(node)
    mergeable_cache: dict[int, bool] = {}

    def mergeable(mask, members):
        ok = mergeable_cache.get(mask)
        if ok is None:
            ok = mergeable_cache[mask] = can_merge([nodes[u] for u in members])
        return ok

    on_state = None
    if bar is not None:
        def on_state():
            bar.update(1)

    plan = []
    for begin in range(0, n, part_size):
        part = sum(1 << u for u in range(begin, min(n, begin + part_size)))
        search = PartSearch(part, desc, max_group_size=r, max_num_groups=s,
                            use_parallel=strategy in ("parallel", "both"), use_merge=strategy in ("merge", "both"),
                            merge_class=merge_class, parallel_cost=parallel_cost, merge_cost=merge_cost,
                            mergeable=mergeable, on_state=on_state)
        search.solve()
        stats.parts += 1
        stats.states += search.states
        stats.transitions += search.transitions
        for kind, groups in search.stages():
            mask = sum(1 << u for g in groups for u in g)
            cost = merge_cost(mask, [g[0] for g in groups]) if kind == "merge" else parallel_cost(mask, groups)
            plan.append((kind, groups, cost))
    return plan


def _apply(block: Block, plan, taken: set[str]) -> int:
    """Rewrite ``block`` to follow ``plan``: order its operators by stage, build merged
    convolutions, point consumers at their channel slices, set ``block.stages``."""
    nodes = block.nodes
    exit_node = block.exit_node
    order: list[Node] = []
    stages: list[list[list[str]]] = []
    remap: dict[int, tuple[Node, int]] = {}
    merged = 0
    for kind, groups, _ in plan:
        if kind == "merge" and len(groups) > 1:
            convs = [nodes[g[0]] for g in groups]
            name = _fresh_name(convs[0].name + "_merged", taken)
            conv = merge_convs(convs, name)
            for c, (b, _) in zip(convs, merge_offsets(convs)):
                remap[id(c)] = (conv, b)
            order.append(conv)
            stages.append([[conv.name]])
            merged += 1
        else:
            stage = []
            for g in groups:
                stage.append([nodes[u].name for u in g])
                order.extend(nodes[u] for u in g)
            stages.append(stage)
    if remap:
        for node in order:
            for leaf in leaf_nodes(node):
                _rewrite_inputs(leaf, remap)
    if exit_node not in order:  # pragma: no cover - the exit never merges
        raise GraphError("internal error: the block's exit operator was merged away")
    block.inner_nodes = [nd for nd in order if nd is not exit_node]
    block.stages = stages
    # keep the exit node last in the node list, as the IR requires; stages say when it runs
    return merged


def _rewrite_inputs(node: Node, remap: dict[int, tuple[Node, int]]) -> None:
    changed = False
    terms = []
    for term in node.inputs:
        new_term = []
        for v in term:
            hit = remap.get(id(v.node))
            if hit is not None:
                conv, off = hit
                v = Value(conv, v.begin + off, v.end + off)
                changed = True
            new_term.append(v)
        terms.append(new_term)
    if not changed:
        return
    # concatenating adjacent slices of one output is reading the wider slice
    compact: list[list[Value]] = []
    for term in terms:
        if compact and len(term) == 1 and len(compact[-1]) == 1:
            a, b = compact[-1][0], term[0]
            if a.node is b.node and a.end == b.begin:
                compact[-1] = [Value(a.node, a.begin, b.end)]
                continue
        compact.append(term)
    node.inputs[:] = compact  # in place: a Sequential shares its first node's input list


def _fresh_name(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    taken.add(name)
    return name


def _plan_key(ident: str, graph: Graph, bi: int, strategy: str, batch_size: int, r: int, s: int, part: int) -> str:
    """The block's structure (operators, names, attributes, output shapes; not the nodes' ``meta``),
    the search parameters and the cost model's identity."""
    import hashlib
    import json

    block = graph.blocks[bi]
    desc = {k: v for k, v in block.to_json(meta=False).items() if k != "stages"}
    desc["shapes"] = [list(n.output_shape) for n in block.nodes]
    desc["search"] = [strategy, batch_size, r, s, part, ident]
    return hashlib.sha256(json.dumps(desc, sort_keys=True, default=str).encode()).hexdigest()


def _block_states(block: Block, part_size: int) -> int:
    desc = descendants(_block_edges(block))
    n = len(block.nodes)
    return sum(count_states(sum(1 << u for u in range(b, min(n, b + part_size))), desc) for b in range(0, n, part_size))


def graph_states(graph: Graph, max_part_size: int = DEFAULT_MAX_PART_SIZE) -> int:
    """The states the DP of a ``merge``/``parallel``/``both`` search solves on ``graph`` (its blocks
    cut in parts of ``max_part_size`` operators), counted without searching: what its progress bar
    counts to and what a search's cost grows with besides its operators (the estimate of a sweep)."""
    return sum(_block_states(block, max_part_size) for block in graph.blocks)


def only_sequential(graph: Graph) -> bool:
    """Whether ``graph`` has one execution order only: each block's operators form one chain (each
    depends on the one before it), so no two can share a stage and no two convolutions share an input to
    merge. Then ``greedy`` finds the sequential schedule (every ready set is one operator); the DP may
    still group a run of the chain into one stage's group, which :func:`schedule` gives up for the
    sequential schedule where the cost model prices it no lower (a composed cost model always)."""
    for block in graph.blocks:
        desc = descendants(_block_edges(block))
        if any(not desc[i] >> (i + 1) & 1 for i in range(len(desc) - 1)):  # i+1 not reachable from i
            return False
    return True


def _progress_bar(graph: Graph, strategy: str, part_size: int):
    """A tqdm bar over the DP states to solve (counted beforehand; cheap next to the search)."""
    if strategy in ("sequential", "greedy"):
        return None
    from tqdm import tqdm

    return tqdm(total=graph_states(graph, part_size), desc=f"IOS {strategy} {graph.name}", unit="state",
                leave=False, mininterval=0.25)


def schedule_cost(graph: Graph, cost_model, batch_size: int = 1) -> float:
    """Total latency of a scheduled graph's stages under ``cost_model``, each stage asked as a
    parallel stage of its groups (merged convolutions are plain operators by now)."""
    if not graph.has_stages:
        raise ValueError(f"graph {graph.name!r} has no schedule (stages) on every block")
    return sum(float(cost_model.stage_latency(stage, batch_size)) for stage in Schedule.of(graph))
