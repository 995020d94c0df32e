"""Where the measured GPU cost model's prediction and the runtime part (issue 40, item 1 and 5).

For each network (default: the paper's four, randwire and nasnet searched pruned r=1 s=3 so the
run fits 9 minutes on an H100/H200) it searches IOS-Sequential and IOS-Both with the measured cost
model on cuda (a fresh profile database; the cuDNN plan cache shared by the run) and prints, for
each schedule, per stage:

* ``model``: the cost model's figure (the stage captured alone and replayed, as the search times it);
* ``alone``: the stage timed again alone, the same way;
* ``cold L2``: the stage timed alone with a buffer larger than the GPU's L2 written before each
  sample (outside the timed region);
* ``in replay``: the stage inside the whole schedule's CUDA-graph replay, from timing events
  recorded before and after every task on its stream inside the graph (event-record nodes,
  ``cuda_device.CudaTaskMarks``): the earliest begin to the latest end of its tasks;
* ``gap``: from the previous stage's latest end to this stage's earliest begin (negative: they
  overlapped);

then the sums, the whole replay measured without the marks (what a cell measures) and with them,
and a diagnosis line: the difference between measured and predicted split into the model against
the stages re-timed alone, stages slower inside the replay than alone (of which the part a cold L2
explains, and the part in merged convolutions), the gaps between stages (joins across streams
where a stage has several groups) and the per-graph launch cost (the replay's time outside its
first task's begin and last task's end); the largest names the effect. Per network it prints the
critical-path bound (every operator at its isolated time, unlimited streams: the longest path
through the graph) and IOS-Both's ratio to it.

    python benchmarks/gpu_fidelity.py                                # a GPU: the four networks
    python benchmarks/gpu_fidelity.py --models inception_v3 --budget 240

Without a GPU (or with ``--fake``) it runs on the tests' fake CUDA device (CPU kernels behind the
CUDA executor's device interface): every figure is then meaningless and labelled so; it checks
that the script runs. ``--budget`` (seconds, default 480) skips networks not started in time (a
network started just before still finishes: on a first run give the four networks as two commands,
``--models inception_v3,squeezenet`` and ``--models randwire,nasnet``, if one does not fit);
``--profile-db PATH`` keeps the stage costs between runs (the searches then cost seconds).
Clocks are left alone; their state is printed.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._cli import script_parser, size_options  # noqa: E402
from ios_bench.reporting.numbers import fmt  # noqa: E402
from ios_core import models  # noqa: E402
from ios_core.cost.measured import MeasuredCostModel  # noqa: E402
from ios_core.cost.timing_cuda import run_timed  # noqa: E402
from ios_core.ir import leaf_nodes  # noqa: E402
from ios_core.measurement import gpu  # noqa: E402
from ios_core.measurement.stats import median  # noqa: E402
from ios_core.optimizer import Stage, schedule  # noqa: E402

NETWORKS = ("inception_v3", "randwire", "nasnet", "squeezenet")
PRUNED = {"randwire": (1, 3), "nasnet": (1, 3)}  # the search's r, s where the full one does not fit 9 minutes
FAKE_IMAGE = {"inception_v3": 75, "squeezenet": 64, "randwire": 64, "nasnet": 64}  # CPU kernels stand in
REPLAYS = 30  # marked and unmarked whole-schedule replays
_now = time.perf_counter  # the budget's clock


def _device(fake: bool):
    if fake:
        from tests.stream_fakes import TorchQueueDevice

        return TorchQueueDevice(1)
    from ios_core.runtime.cuda_device import CupyDevice

    return CupyDevice(0, plan_cache=None)


def _program(graph, dev, marks: bool):
    from ios_core.runtime.cuda import CudaProgram
    from ios_core.runtime.passes import make_plan
    from ios_core.runtime.program import graph_stages

    stages = graph_stages(graph)
    plan = make_plan(stages, [graph.input], [graph.exit_node], 1, arena_kinds=("concat", "value"))
    return CudaProgram(plan, dev, cuda_graph=True, task_marks=marks), len(stages)


def replay(graph, dev, replays: int = REPLAYS) -> dict:
    """The whole schedule replayed as one CUDA graph: unmarked (as a cell runs it; median ms on the
    device's timer), and with task marks (each task's begin and end inside the replay, medians)."""
    import numpy as np

    from ios_core.reference import random_input

    out = {}
    x = random_input(graph, 1, seed=3)
    for marks in (False, True):
        prog, nstages = _program(graph, dev, marks)
        s0 = prog.stream_objs[0]
        dev.write(prog.input_view(graph.input.name), np.ascontiguousarray(x, dtype=np.float32), s0)
        for _ in range(3):
            prog.run()
        dev.sync(s0)
        timer, total, tasks = dev.timer(s0), [], []
        for _ in range(replays):
            total.append(run_timed(prog, dev, s0, timer))
            if marks:
                dev.sync(s0)
                tasks.append(prog.task_times())
        key = "marked" if marks else "whole"
        out[key] = median(total)
        if marks:
            per_task = [(median(t[i][0] for t in tasks), median(t[i][1] for t in tasks))
                        for i in range(len(tasks[0]))]
            stage_of = prog.streams.stage_of
            spans: dict[int, list[float]] = {}
            for i, (b, e) in enumerate(per_task):
                sp = spans.setdefault(stage_of[i], [b, e])
                sp[0], sp[1] = min(sp[0], b), max(sp[1], e)
            out["spans"] = [spans.get(k) for k in range(nstages)]
    return out


def critical_path_ms(graph, cm: MeasuredCostModel, graph_ms: float = 0.0) -> float:
    """Every operator at its isolated time (a one-operator stage, as the cost model times it), with
    unlimited streams: the longest path through the graph. ``graph_ms``: the per-graph replay cost
    each isolated figure carries (``MeasuredCostModel.replay_constants``), then counted once."""
    finish: dict[int, float] = {}
    ops = [leaf for n in graph.operators() for leaf in leaf_nodes(n)]
    for op in ops:
        t = max(float(cm.stage_latency(Stage("parallel", [[op]]), 1)) - graph_ms, 0.0)
        start = max((finish.get(id(p), 0.0) for p in _preds(op)), default=0.0)
        finish[id(op)] = start + t
    return max(finish.values(), default=0.0) + graph_ms


def _preds(node):
    out = []
    for p in node.predecessors():
        out.extend(leaf_nodes(p)[-1:] if hasattr(p, "nodes") else [p])
    return out


def diagnose(rows: list[dict], whole: float, marked: float, multi: bool) -> tuple[str, dict]:
    """The measured-minus-predicted difference split into effects (ms), and the largest named."""
    def total(k):
        return sum(r[k] for r in rows if r.get(k) is not None)

    pred, alone, cold = total("model"), total("alone"), total("cold")
    inside = total("replay")
    gaps = total("gap")
    span = inside + gaps
    slower = [(r["replay"] - r["alone"], r) for r in rows if r.get("replay") is not None]
    cache = sum(min(d, max(r["cold"] - r["alone"], 0.0)) for d, r in slower if d > 0)
    merged = sum(d for d, r in slower if r["merged"])
    parts = {
        "the model against the stages timed alone again (measurement state or noise)": alone - pred,
        "cache state (stages slower in the replay than alone, up to what a cold L2 costs them)": cache,
        "merged convolutions (slower in the replay than alone)": merged,
        "stages otherwise slower in the replay than alone": sum(d for d, _ in slower) - cache - merged,
        ("joins across streams (gaps between stages)" if multi else "gaps between stages (launch latency inside "
         "the graph)"): gaps,
        "per-graph launch cost (replay time outside its first and last task)": marked - span,
        "the timing marks themselves (marked replay less the unmarked one; negative)": whole - marked,
    }
    err = whole - pred
    name, val = max(parts.items(), key=lambda kv: abs(kv[1]) if kv[1] == kv[1] else -1.0)
    same_sign = (val >= 0) == (err >= 0)
    line = (f"diagnosis: measured {fmt(whole)} ms against predicted {fmt(pred)} ms "
            f"({(pred / whole - 1) * 100:+.0f} %); the difference ({fmt(err)} ms) splits into "
            + "; ".join(f"{k} {fmt(v)}" for k, v in parts.items())
            + f". Largest: {name} ({fmt(val)} ms" + ("" if same_sign else ", against the error's sign") + ")."
            + f" A cold L2 alone would add {fmt(cold - alone)} ms over the stages timed alone.")
    return line, {"predicted": pred, "alone": alone, "cold": cold, "in_replay": inside, "gaps": gaps,
                  "whole": whole, "marked": marked, **{"largest": name}}


def _merged_sources(node, block, present: set[str]) -> list | None:
    """The original convolutions a merged convolution of the scheduled graph stands for, in the
    order the search merged them (its hint name joins theirs in that order; the first one's name
    is its own less ``_merged``), or None where they cannot be told."""
    from itertools import permutations

    from ios_core.ir import Conv

    if not isinstance(node, Conv) or "_merged" not in node.name:
        return None
    first = node.name.rsplit("_merged", 1)[0]
    inputs = [[(v.node.name, v.begin, v.end) for v in term] for term in node.inputs]
    gone = [n for n in block.nodes if isinstance(n, Conv) and n.name not in present
            and [[(v.node.name, v.begin, v.end) for v in term] for term in n.inputs] == inputs]
    head = [n for n in gone if n.name == first]
    rest = [n for n in gone if n.name != first]
    if not head or sum(n.out_channels for n in gone) < node.out_channels:
        return None
    for k in range(1, len(rest) + 1):  # the fewest convolutions whose channels and hint names make it
        for combo in permutations(rest, k):
            convs = head + list(combo)
            if sum(c.out_channels for c in convs) == node.out_channels and \
                    " ".join(c.hint_name for c in convs) == node.hint_name:
                return convs
        if k >= 7:  # the search merges at most max_num_groups convolutions
            break
    return None


def search_stages(scheduled, graph) -> list[tuple[Stage, bool]]:
    """The scheduled graph's stages as the search costed them, each with whether it is a merge:
    every operator the original one (the search costed the block's operators before it rewrote
    their inputs to read merged convolutions' channels), and a merged convolution's stage the
    merge of the original convolutions (kind ``merge``). The stage signature includes the kind and
    the inputs, so the stage rebuilt from the scheduled graph (``parallel``, the rewritten
    operators) would miss the search's figure and be measured afresh."""
    out = []
    for block, new_block in zip(graph.blocks, scheduled.blocks):
        originals = {n.name: n for n in block.nodes}
        present = {n.name for n in new_block.nodes}
        by_name = {n.name: n for n in new_block.nodes}
        names = new_block.stages if new_block.stages is not None else new_block.sequential_stages()
        for st in names:
            if len(st) == 1 and len(st[0]) == 1 and st[0][0] not in originals:
                convs = _merged_sources(by_name[st[0][0]], block, present)
                if convs:
                    out.append((Stage("merge", [[c] for c in convs]), True))
                    continue
            out.append((Stage("parallel", [[originals.get(n, by_name[n]) for n in g] for g in st]),
                        any(n not in originals for g in st for n in g)))
    return out


def schedule_table(label: str, result, cm: MeasuredCostModel, dev, tag: str, graph=None) -> tuple[list[str], dict]:
    """``graph``: the graph that was searched (default: the scheduled one, whose stages are then
    costed as they run)."""
    stages = search_stages(result.graph, graph if graph is not None else result.graph)
    rp = replay(result.graph, dev)
    spans = rp["spans"]
    if len(spans) != len(stages):
        raise RuntimeError(f"{len(spans)} runtime stages for {len(stages)} scheduled ones")
    rows, lines = [], []
    prev_end = None
    for i, (stage, merged) in enumerate(stages):
        st = stage
        row = {"model": float(cm.stage_latency(stage, 1)), "alone": cm.measure_stage(stage, 1).median,
               "cold": cm.measure_stage(stage, 1, cold_l2=True).median, "replay": None, "gap": None,
               "merged": merged, "groups": len(st.groups), "ops": sum(len(g) for g in st.groups)}
        if spans[i] is not None:
            b, e = spans[i]
            row["replay"] = e - b
            row["gap"] = (b - prev_end) if prev_end is not None else None
            prev_end = e
        rows.append(row)
        lines.append(f"| {i} | {row['groups']} x {row['ops']}{' merged' if merged else ''} | {fmt(row['model'])} "
                     f"| {fmt(row['alone'])} | {fmt(row['cold'])} | {fmt(row['replay'])} | {fmt(row['gap'])} |")
    multi = any(r["groups"] > 1 for r in rows)
    diag, sums = diagnose(rows, rp["whole"], rp["marked"], multi)
    head = [f"\n{label}{tag}: {len(stages)} stages; predicted {fmt(result.stats.cost_ms)} ms (the search's figure); "
            f"whole replay {fmt(rp['whole'])} ms unmarked, {fmt(rp['marked'])} ms with task marks (median of "
            f"{REPLAYS})",
            "| stage | groups x ops | model ms | alone ms | alone, cold L2 ms | in replay ms | gap before ms |",
            "|---:|---|---:|---:|---:|---:|---:|"]
    return head + lines + [f"sums: model {fmt(sums['predicted'])}, alone {fmt(sums['alone'])}, cold L2 "
                           f"{fmt(sums['cold'])}, in replay {fmt(sums['in_replay'])}, gaps {fmt(sums['gaps'])} ms",
                           diag], sums


def network(name: str, dev, plans: str, args, tag: str) -> list[str]:
    opts = size_options(name, args.image_size or FAKE_IMAGE.get(name)) if args.fake_device else {}
    graph = models.get(name, **opts)
    if not graph.has_weights:
        graph = graph.init_weights(0)
    r, s = PRUNED.get(name, (3, 8)) if not args.full else (3, 8)
    protocol = (dict(warmup=0, number=1, repeat=1, min_sample_ms=None) if args.fake_device
                else dict(warmup=args.warmup, number=1, repeat=args.repeat, min_sample_ms=None))
    out = []
    with tempfile.TemporaryDirectory(prefix="ios-fidelity-") as tmp:
        cm = MeasuredCostModel(device="cuda", backend=dev, cache=args.profile_db or str(Path(tmp) / "profile.sqlite"),
                               plan_cache=plans, **protocol)
        t0 = time.perf_counter()
        seq = schedule(graph, "sequential", cm, batch_size=1, validate=False)
        both = schedule(graph, "both", cm, batch_size=1, max_group_size=r, max_num_groups=s)
        searched = time.perf_counter() - t0
        v = both.stats.validation or {}
        out.append(f"\n## {name}{tag}: IOS-Both searched r={r} s={s} in {searched:.1f} s ({cm.measured} stages "
                   f"measured); the search kept {v.get('kept', 'schedule')!r} of its end-to-end candidates")
        t_both = None
        for label, res in (("IOS-Sequential", seq), (f"IOS-Both (r={r} s={s})", both)):
            lines, sums = schedule_table(f"{name} {label}", res, cm, dev, tag, graph)
            out.extend(lines)
            t_both = sums["whole"]
        bound = critical_path_ms(graph, cm)
        graph_ms = (cm.replay_constants() or {}).get("graph_ms")
        corrected = critical_path_ms(graph, cm, graph_ms) if graph_ms is not None else None
        out.append(f"critical-path bound{tag}: {fmt(bound)} ms (every operator at its isolated time, unlimited "
                   f"streams: the longest path); IOS-Both {fmt(t_both)} ms = {t_both / bound:.2f}x the bound"
                   + (f"; with the per-graph replay cost each isolated figure carries ({fmt(graph_ms)} ms) counted "
                      f"once: {fmt(corrected)} ms, IOS-Both = {t_both / corrected:.2f}x"
                      if corrected else "")
                   if bound > 0 else f"critical-path bound{tag}: -")
        cm.cache.close()
    return out


def main(argv=None) -> int:
    p = script_parser(__doc__)
    p.add_argument("--models", default=",".join(NETWORKS), help="networks (default: the paper's four)")
    p.add_argument("--budget", type=float, default=480.0,
                   help="seconds: a network not started within them is skipped (default 480)")
    p.add_argument("--profile-db", default=None,
                   help="the profile database the searches use (default: a fresh one per network; a database "
                        "an earlier run filled makes the searches seconds)")
    p.add_argument("--full", action="store_true", help="search randwire and nasnet with r=3 s=8 too")
    p.add_argument("--fake", action="store_true", help="use the fake device even where a GPU is")
    p.add_argument("--image-size", type=int, default=None, help="fake device: the networks' input size")
    p.add_argument("--warmup", type=int, default=2, help="GPU: warmup runs per stage (default 2)")
    p.add_argument("--repeat", type=int, default=5, help="GPU: samples per stage (default 5)")
    args = p.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    known = set(models.names())
    bad = [m for m in names if m not in known]
    if bad or not names:
        p.error(f"unknown model(s) {', '.join(bad) or '(none)'}; choose from {', '.join(sorted(known))}")
    if args.budget <= 0:
        p.error(f"--budget must be positive, not {args.budget}")
    args.fake_device = args.fake or gpu.cuda_missing() is not None
    t0 = _now()
    if args.fake_device:
        print(f"FAKE DEVICE ({gpu.gpu_missing() or gpu.cuda_missing() or '--fake'}): CPU kernels stand in for the "
              "GPU; EVERY FIGURE BELOW IS MEANINGLESS (it checks that the script runs)")
        tag = " [fake device: meaningless]"
    else:
        fp = gpu.fingerprint()
        print(f"GPU: {fp.get('name')} (driver {fp.get('driver')}, CUDA {fp.get('cuda_runtime')}, cuDNN "
              f"{fp.get('cudnn')}); {gpu.clock_state(fp)}; batch 1, fp32; CUDA events")
        tag = ""
    dev = _device(args.fake_device)
    failed = []
    with tempfile.TemporaryDirectory(prefix="ios-fidelity-plans-") as tmp:
        plans = str(Path(tmp) / "plans.sqlite")
        for name in names:
            spent = _now() - t0
            if spent > args.budget:
                print(f"\n## {name}: skipped (the budget of {args.budget:.0f} s was spent: {spent:.0f} s)")
                continue
            try:
                for line in network(name, dev, plans, args, tag):
                    print(line, flush=True)
            except Exception as e:  # one network failing leaves the others their tables
                why = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
                print(f"\n## {name}: failed ({type(e).__name__}: {why})", flush=True)
                failed.append(name)
    # a network that failed is the script's failure (exit 1: the GPU window records the step failed,
    # never done), after the others have their tables
    print(f"\ndone in {_now() - t0:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
