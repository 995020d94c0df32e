"""Where a sweep's estimated time goes (``run --dry-run``): the cells predicted capped, and every
second of the estimate (:mod:`ios_bench.planning.estimate_model`) attributed to a batch size, a model,
a framework and a kind of cost, with the figures it rests on labelled measured or assumed.

**Capping, predicted.** After the first pass of a (model, batch, precision, device) group, a peer
framework's cell whose round-0 median is more than ``cap_factor`` times the best correct peer's gets no
more rounds. The estimate has no round 0 yet: it predicts the rule from its own latencies (the group's
fastest peer by the model, never capped; IOS cells never capped), so a cell predicted capped costs one
round. It is a prediction: the sweep caps by what round 0 measures.
"""

from __future__ import annotations

from ios_bench.planning.estimate_model import ROUND_PARTS, Model, int8_references
from ios_bench.planning.estimate_stated import series

# the kinds of cost a breakdown names, in its order: a round's parts, then the sweep's own work
KINDS = {**ROUND_PARTS, "rerun": "re-runs of disturbed rounds (expected from earlier runs here)",
         "first_build": "first builds (cold; int8: calibration)", "search": "schedule searches",
         "reference": "reference outputs"}
SEARCH_ROW, REFERENCE_ROW = "(IOS schedule searches)", "(reference outputs)"


def _is_ios(cell) -> bool:
    return bool(getattr(cell, "schedule", None))


def predicted_caps(model: Model, cells: list, cap_factor: float | None) -> dict[str, dict]:
    """{cell key: {"ratio", "best"}} for the peer cells predicted capped (module docstring): a peer
    whose estimated latency is over ``cap_factor`` times its group's fastest peer's. None: no capping."""
    if cap_factor is None:
        return {}
    groups: dict[tuple, list] = {}
    for c in cells:
        if not _is_ios(c):
            groups.setdefault((c.model, c.batch_size, getattr(c, "precision", None) or "fp32", c.device), []).append(c)
    out = {}
    for peers in groups.values():
        lat = {c.key: model.latency_s(c.model, c.batch_size, series(c.framework, getattr(c, "precision", None)),
                                      count=False) for c in peers}
        best = min(peers, key=lambda c: lat[c.key])
        for c in peers:
            if c is not best and lat[best.key] > 0 and lat[c.key] > cap_factor * lat[best.key]:
                out[c.key] = {"ratio": lat[c.key] / lat[best.key], "best": best.framework}
    return out


def capped_rounds(left: dict[str, int], caps: dict, planned: int) -> dict[str, int]:
    """The rounds left per cell (``left`` of ``planned`` each) once a cell predicted capped makes one
    round in all (none left where it has one already)."""
    return {k: max(0, n - planned + 1) if k in caps else n for k, n in left.items()}


def breakdown(model: Model, cells: list, rounds: dict[str, int], refs: set, searches: dict,
              fresh: set | None = None) -> list[dict]:
    """Every second of the sweep's estimate as rows {"batch", "model", "framework", "kind", "seconds"}
    (``kind``: a key of :data:`KINDS`), for the same arguments as ``estimate_model.sweep_seconds`` (whose
    total the rows add up to): each cell's rounds left by :meth:`Model.round_parts`, its first build,
    each schedule search and each reference output. A model whose rounds are not the latency protocol's
    (a LoadGen scenario's) has its whole round counted as timed."""
    rows = []

    def add(batch, name, framework, kind, seconds):
        if seconds:
            rows.append({"batch": batch, "model": name, "framework": framework, "kind": kind, "seconds": seconds})

    for c in cells:
        left = rounds[c.key]
        fw = series(c.framework, getattr(c, "precision", None))
        if left > 0:
            parts = model.round_parts(c.model, c.batch_size, fw)
            whole = model.cell_s(c)
            if abs(sum(parts.values()) - whole) > 1e-9 * max(1.0, whole):
                parts = {"timed": whole}
            for kind, seconds in parts.items():
                add(c.batch_size, c.model, c.framework, kind, left * seconds)
            add(c.batch_size, c.model, c.framework, "rerun", model.expected_reruns(left) * whole)
        if left > 0 and (fresh is None or c.key in fresh):
            add(c.batch_size, c.model, c.framework, "first_build", model.first_build_s(fw, c.model, c.batch_size))
    int8 = int8_references(cells)
    for name, batch in sorted(refs):
        add(batch, name, REFERENCE_ROW, "reference", model.reference_s(name, batch, (name, batch) in int8))
    for key, n in searches.items():
        add(key[1], key[0], SEARCH_ROW, "search", model.optimize_s(*key[:3], n, *key[3:4]))
    return rows


def under_budget(model: Model, cells: list, rounds: dict[str, int], refs: set, searches: dict, budget_s: float,
                 fresh: set | None = None) -> dict:
    """What ``--time-budget budget_s`` leaves of the sweep the other arguments describe (those of
    :func:`breakdown`): the sweep measures its (model, batch, device) groups one after another (in the
    order of ``cells``); each cell's first round is made whatever the budget, its later rounds only while
    fewer than ``budget_s`` seconds of measuring have passed (``RoundRunner.budget_left``: searches and
    reference outputs count, as they happen between the groups' rounds). Returns {"seconds": the
    budgeted estimate, "first": every group's searches, reference outputs and first rounds, "later": the
    later rounds made, "later_planned", "cut_rounds": later rounds the budget is estimated to leave out,
    "one_round_groups": groups estimated to get only their first rounds}. An estimate: a round that
    starts just before the budget is spent still runs in full."""
    from ios_bench.planning.estimate_model import sweep_seconds

    groups: dict[str, list] = {}
    for c in cells:
        groups.setdefault(c.group, []).append(c)
    spent = first_all = later_all = planned_all = 0.0
    cut, one_round = 0, 0
    for members in groups.values():
        names = {(c.model, c.batch_size) for c in members}
        mine = {k: n for k, n in searches.items() if (k[0], k[1]) in names}
        first = sweep_seconds(model, members, {c.key: min(1, rounds[c.key]) for c in members},
                              {r for r in refs if r in names}, mine, fresh=fresh)["seconds"]
        per = {c.key: model.cell_s(c, count=True) for c in members}
        later_n = {c.key: max(0, rounds[c.key] - 1) for c in members}
        planned = sum(later_n[k] * per[k] for k in per)
        spent += first
        room = max(0.0, budget_s - spent)
        made = planned if planned <= room else 0.0
        if planned > room:  # the passes go on, a round per cell in turn, until the budget is spent
            left = dict(later_n)
            while made < room and any(left.values()):
                for k in left:
                    if left[k] and made < room:
                        made += per[k]
                        left[k] -= 1
            cut += sum(left.values())
            one_round += bool(planned) and made == 0.0
        spent += made
        first_all, later_all, planned_all = first_all + first, later_all + made, planned_all + planned
    return {"seconds": spent, "first": first_all, "later": later_all, "later_planned": planned_all,
            "cut_rounds": cut, "one_round_groups": one_round, "groups": len(groups)}


def totals(rows: list[dict], by: str) -> dict:
    """{value of ``by``: seconds} over ``rows``, largest first."""
    out: dict = {}
    for r in rows:
        out[r[by]] = out.get(r[by], 0.0) + r["seconds"]
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def rates(model: Model, cells: list) -> list[dict]:
    """The speed each (framework, precision) of ``cells`` is costed at: {"framework", "gmacs_per_s",
    "source"} (``source`` says measured, with where, or assumed: :meth:`Model.rate_source`)."""
    out = []
    for fw in dict.fromkeys(series(c.framework, getattr(c, "precision", None)) for c in cells):
        gmacs, source = model.rate_source(fw)
        out.append({"framework": fw, "gmacs_per_s": round(gmacs, 1), "source": source})
    return out
