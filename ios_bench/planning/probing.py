"""Which adapters and IOS kernel providers run where: each node offering a device is asked in a
worker of its own (``probe``), so that the sweep's process never imports a framework."""

from __future__ import annotations

from ios_bench.planning.cells import safe_name
from ios_bench.planning.plan import DEFAULT_IOS_PROVIDER, IOS_ADAPTER, Plan
from ios_bench.reporting.escape import term
from ios_bench.running.context import SweepContext
from ios_bench.running.executors import Task, device_kind


def probe(ctx: SweepContext, placement: dict[str, dict]) -> dict:
    """Which adapters run where (and their versions), asked in a worker on every node that offers
    each device. Only the named frameworks are probed when the plan names them. Returns {device:
    merged probe}: an adapter is available for a device when one of its nodes runs it (``nodes``
    lists those node ids). ``placement`` gets, per device, the nodes offering it and why the
    others do not."""
    plan, executor = ctx.plan, ctx.executor
    names = None
    if plan.frameworks is not None:
        names = list(plan.frameworks) + [IOS_ADAPTER]
    timeout = max(plan.timeout, 120)
    per_node: dict[tuple[str, str], dict] = {}  # (node id, kind) -> probe
    wanted: dict[str, list] = {}
    for device in plan.devices:
        nodes, why = executor.match(device)
        wanted[device] = nodes
        placement[device] = {"nodes": [n.name for n in nodes], "not": why}
        for n in nodes:
            per_node.setdefault((n.id, device_kind(device)), {})
    tasks = [probe_task(ctx, nid, kind, names, timeout) for nid, kind in per_node]
    for t, res in zip(tasks, executor.probe(tasks)):
        if res.get("status") != "ok":
            # frameworks imported together can clash (one crash takes all down): ask one by one
            ctx.say(f"[yellow]warning:[/] probing all frameworks at once failed on {term(res.get('node'))} "
                    f"({term(res.get('reason'))}); probing them one by one")
            import adapters

            nid, kind = t.payload
            res = {**res, "status": "ok", "adapters": {}, "optimize": False}
            ones = [probe_task(ctx, nid, kind, [name], timeout) for name in names or adapters.names()]
            for one_task, one in zip(ones, executor.probe(ones)):
                name = one_task.spec["names"][0]
                if one.get("status") == "ok":
                    res["adapters"].update(one.get("adapters") or {})
                    res["optimize"] = res["optimize"] or bool(one.get("optimize"))
                else:
                    res["adapters"][name] = {"reason": f"probe failed: {one.get('reason')}", "version": None}
        per_node[t.payload] = res
    probes = {}
    for device in plan.devices:
        nodes = wanted[device]
        if not nodes:
            why = "; ".join(f"{k} {v}" for k, v in placement[device]["not"].items()) or "no nodes"
            probes[device] = {"status": "ok", "no_node": f"no node offers {device} ({why})", "adapters": {},
                              "optimize": False}
            continue
        probes[device] = merge_probes([(n.id, per_node[(n.id, device_kind(device))]) for n in nodes])
    return probes


def probe_task(ctx: SweepContext, node_id: str, kind: str, names: list[str] | None, timeout: float) -> Task:
    """The probe worker of one node and device kind (``names``: the adapters to ask about; None: all)."""
    stem = safe_name(f"probe-{kind}" + (f"-{node_id[:12]}" if not ctx.local else "")
                     + (f"-{names[0]}" if names and len(names) == 1 else ""))
    spec = {"task": "probe", "spin_policy": ctx.plan.spin_policy, "device": kind, "names": names,
            "result_path": f"work/{stem}.json"}
    return Task(stem, spec, f"logs/{stem}.log", timeout, kind, ctx.plan.threads, nodes=[node_id],
                payload=(node_id, kind))


def merge_probes(probes: list[tuple[str, dict]]) -> dict:
    """One probe for a device from its nodes' probes: an adapter is available when one node runs
    it (``nodes``: those node ids; ``reason``: the first node's reason when none does)."""
    merged = {"status": "failed", "adapters": {}, "optimize": False, "optimize_nodes": []}
    reasons = []
    for nid, p in probes:
        if p.get("status") != "ok":
            reasons.append(p.get("reason"))
            continue
        merged["status"] = "ok"
        if p.get("optimize"):
            merged["optimize"] = True
            merged["optimize_nodes"].append(nid)
        for name, seconds in (p.get("provider_start_s") or {}).items():  # the first node's: the estimate's
            merged.setdefault("provider_start_s", {}).setdefault(name, seconds)
        for name, table in (p.get("provider_precisions") or {}).items():
            merged.setdefault("provider_precisions", {}).setdefault(name, table)
        for name, reason in (p.get("providers") or {}).items():  # a provider is available where one node runs it
            providers = merged.setdefault("providers", {})
            if reason is None or name not in providers:
                providers[name] = reason
        for name, info in (p.get("adapters") or {}).items():
            m = merged["adapters"].setdefault(name, {**info, "nodes": []})
            if not info.get("reason"):
                if m.get("reason"):
                    m.update({**info, "nodes": m["nodes"]})
                m["nodes"].append(nid)
    if merged["status"] != "ok":
        merged["reason"] = "; ".join(str(r) for r in reasons)
    return merged


def ios_providers(plan: Plan, probe: dict, device: str, notes: list[str]) -> list[str]:
    """The IOS kernel providers of a device's IOS cells: the plan's, or every one available
    there (the CPU's; a CUDA device runs its own kernels, labelled as the default). Why a
    provider is unavailable is added to ``notes`` (once)."""
    if plan.ios_providers is not None:
        return list(plan.ios_providers)
    if device_kind(device) != "cpu":
        return [DEFAULT_IOS_PROVIDER]
    avail = probe.get("providers") or {}
    got = [p for p, reason in avail.items() if reason is None]
    for p, reason in avail.items():
        note = f"IOS provider {p} unavailable on {device}: {reason}"
        if reason is not None and note not in notes:
            notes.append(note)
    return got or [DEFAULT_IOS_PROVIDER]


def precision_reason(avail: dict, name: str, precision: str, device: str) -> str | None:
    """Why adapter ``name`` cannot give ``precision`` on ``device`` by its probe's table (the
    adapter's ``precisions(device)``, ``adapters.base.precision_reason``'s rule), or None; fp32 is
    never refused here (every adapter computes in it, as before precisions were an axis)."""
    if precision == "fp32":
        return None
    from adapters.base import precision_reason as rule

    entry = avail.get(name) or {}
    return rule(name, entry.get("precisions") or {}, precision, device)


def search_precision_reason(cost_model: str, precision: str) -> str | None:
    """Why an IOS cell's schedule cannot be searched at ``precision`` with the sweep's cost model, or
    None: the learned one is fitted at fp32 (``ios_core.cost.learned.precision_reason``); the measured
    one times each stage at the cell's precision."""
    if cost_model != "learned":
        return None
    from ios_core.cost.learned import precision_reason

    return precision_reason(precision)


def provider_precision_reason(probe: dict, provider: str, precision: str, device: str) -> str | None:
    """Why an IOS cell on ``provider``'s kernels cannot give ``precision`` on a CPU ``device`` by its
    probe's table (each provider's ``precisions()``, ``ios_core.runtime.providers``), or None; a probe
    without the table (an older worker) refuses nothing here (the cell's build then says why)."""
    if precision == "fp32" or device_kind(device) != "cpu":
        return None
    table = (probe.get("provider_precisions") or {}).get(provider)
    if table is None:
        return None
    from adapters.base import precision_reason as rule

    return rule(f"IOS on {provider} kernels", {"fp32": "", **table}, precision, device)
