"""The measured GPU cost model's schedule search: what its bookkeeping costs per stage, and, on a
GPU, the goals of issue 32 (search times, predicted against measured latency, IOS-Both against
IOS-Sequential, both replayed as CUDA graphs).

Without a GPU the search runs on the tests' fake CUDA device (tests/stream_fakes.py: torch CPU
kernels behind the CUDA executor's device interface, streams as queues): its stage *times* mean
nothing, but everything the cost model does around each stage (windows, NVML, the process tree,
canaries, weights, the database) is the code a GPU runs, so its cost per stage is measured here.
On a GPU (CuPy, cuDNN) the same search runs on the GPU, then the goal table is measured.

    PYTHONPATH=. python benchmarks/bench_gpu_search.py                      # fake device, inception_v3
    PYTHONPATH=. python benchmarks/bench_gpu_search.py --models squeezenet,inception_v3 --pruned randwire,nasnet

The last line is always ``per-stage overhead X ms over N stages; NVML sessions S; weight draws W;
plans reused R of P; candidates timed C`` (over every measured search of the run): X is what a
stage measurement cost outside building its program and outside the timed region (the one
measurement function), in this thread's CPU time (the line before gives it on the wall clock,
which on a shared machine also counts the waits for a core), N the stages measured, S the NVML
sessions this process opened (attempts: 1 however many stages), W the random weight arrays drawn
for the stage programs, R of P the convolution geometries whose plan came from the plan cache
(``ios_core.cost.cache.CudnnPlanCache``: no plan timed) out of those built, C the schedules timed
end to end by the searches' candidate step (distinct schedules: a candidate identical to another is
timed once and counted once). Each network is searched twice: cold (a fresh
profile database and plan cache), then on a fresh device with only the plan cache warm (the
stage costs measured again). On a GPU each network of ``--models`` is then searched a third time,
cold and independent of the first (a fresh device, profile database and plan cache), and the two
cold searches' IOS-Both schedules are timed side by side (alternating, ``SIDE_ROUNDS`` rounds, the
median of the rounds' medians): whether two searches of one network agree (``--no-independent``
leaves it out). Every plan cache lives in one folder for the whole run, so no device is ever left
attached to a database that was deleted. Clocks are left alone (their state is printed).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._cli import script_parser, size_options  # noqa: E402
from ios_core import models  # noqa: E402
from ios_core.cost.measured import MeasuredCostModel  # noqa: E402
from ios_core.measurement import gpu  # noqa: E402
from ios_core.optimizer import schedule  # noqa: E402

# the paper's figures (IOS README, V100): search seconds and IOS-Both over sequential
PAPER = {"squeezenet": (1, 1.31), "inception_v3": (48, 1.59), "randwire": (4407, 1.48), "nasnet": (3653, 1.45)}
GOAL_SEARCH_S = {"squeezenet": 1, "inception_v3": 20, "randwire": 600, "nasnet": 600}
PRUNED_GOAL_S = 60
SIDE_ROUNDS = 5  # rounds of the side-by-side timing of two searches' schedules (each: every schedule once)


def _device(fake: bool, seed: int = 1):
    if fake:
        from tests.stream_fakes import TorchQueueDevice

        return TorchQueueDevice(seed)
    from ios_core.runtime.cuda_device import CupyDevice

    return CupyDevice(0)


class Totals:
    """The overhead line's figures, summed over every search of the run."""

    def __init__(self):
        self.overhead_cpu_s = self.overhead_wall_s = 0.0
        self.stages = 0
        self.draws = 0
        self.reused = self.geometries = self.candidates = 0

    def add(self, cm: MeasuredCostModel) -> None:
        st = cm.stats()
        self.overhead_cpu_s += st["overhead_cpu_seconds"]
        self.overhead_wall_s += st["overhead_seconds"]
        self.stages += st["measured"]
        self.draws += st["weight_draws"]
        self.reused += st.get("plans_reused", 0)
        self.geometries += st.get("conv_geometries", 0)
        self.candidates += st.get("candidates_timed", 0)

    def wall_line(self) -> str:
        per = 1e3 * self.overhead_wall_s / max(self.stages, 1)
        return (f"the same on the wall clock: {per:.3f} ms per stage (with the time this process waited for a core; "
                f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end)")

    def line(self) -> str:
        per = 1e3 * self.overhead_cpu_s / max(self.stages, 1)
        return (f"per-stage overhead {per:.3f} ms over {self.stages} stages; NVML sessions "
                f"{gpu.nvml_sessions_opened()}; weight draws {self.draws}; plans reused {self.reused} of "
                f"{self.geometries}; candidates timed {self.candidates}")


def search(graph, strategy: str, dev, r: int, s: int, protocol: dict, db: str | None, totals: Totals,
           cuda_graph: bool = True, sequential: bool = False, *, plans: str):
    """One cold search (a fresh profile database unless ``db``; the cuDNN plan cache in ``plans``,
    a database that outlives the search: ``dev`` stays attached to it, and is used again after the
    search): (result, cost model, seconds), and with ``sequential`` the sequential schedule costed
    by the same model (its stages were measured by the search: nothing is timed again) as a fourth
    item."""
    with tempfile.TemporaryDirectory(prefix="ios-gpu-search-") as tmp:
        cache = db or str(Path(tmp) / "profile.sqlite")
        cm = MeasuredCostModel(device="cuda", backend=dev, cache=cache, cuda_graph=cuda_graph,
                               plan_cache=plans, **protocol)
        t0 = time.perf_counter()
        result = schedule(graph, strategy, cm, batch_size=1, max_group_size=r, max_num_groups=s)
        seconds = time.perf_counter() - t0
        seq = schedule(graph, "sequential", cm, batch_size=1) if sequential else None
        totals.add(cm)
        cm.cache.close()
    return (result, cm, seconds, seq) if sequential else (result, cm, seconds)


def describe(name: str, result, cm: MeasuredCostModel, seconds: float) -> str:
    st = cm.stats()
    fails = f", {st['failed_stages']} stages could not run ({next(iter(cm.failures.values()))})" if cm.failures else ""
    return (f"{name}: search {seconds:.1f} s, {st['measured']} stages measured as {st['form']} "
            f"(build {st['build_seconds']:.1f} s, timed {st['timed_seconds']:.1f} s, bookkeeping "
            f"{st['overhead_seconds']:.2f} s, {st['overhead_cpu_seconds']:.2f} s of CPU), "
            f"{result.stats.rounds} search round(s), "
            f"{st['window_canaries']} canaries, {st['window_condemned_groups']} condemned groups "
            f"({st['revised_after_canary']} stages re-measured){fails}; plans reused {st.get('plans_reused', 0)} of "
            f"{st.get('conv_geometries', 0)}; {_kept(result)}; predicted {result.stats.cost_ms:.3f} ms")


def _kept(result) -> str:
    v = result.stats.validation or {}
    if "candidates" not in v:
        return "no candidate timed"
    timed = sum(c.get("measured_ms") is not None and not c.get("same_as") for c in v["candidates"])
    return f"{v['kept']} kept of {timed} candidates timed ({len(v['candidates'])} considered)"


def run_ms(graph, dev, cuda_graph: bool, repeat: int = 50) -> float:
    """The schedule's latency as a cell runs it: the CUDA runtime, CUDA events, median of
    ``repeat`` samples after a warmup."""
    from ios_core.runtime.cuda import CudaRuntime

    rt = CudaRuntime(graph, 1, "cuda", backend=dev, cuda_graph=cuda_graph)
    return rt.measure(warmup=10, repeat=repeat).median


def side_by_side(graphs: list, dev, rounds: int | None = None, repeat: int = 10) -> list[float]:
    """Each schedule's latency timed alongside the others (graph replays, CUDA events): every
    round times each schedule once (``repeat`` samples after a warmup), alternating, so that a
    drift of the clocks or of the machine falls on all of them alike; per schedule the median of
    its rounds' medians (the one median)."""
    from ios_core.measurement.stats import median
    from ios_core.runtime.cuda import CudaRuntime

    rts = []
    for g in graphs:  # each built and its warm-up finished before the next uploads its weights
        rts.append(CudaRuntime(g, 1, "cuda", backend=dev, cuda_graph=True))
        rts[-1].sync()
    per: list[list[float]] = [[] for _ in rts]
    for _ in range(SIDE_ROUNDS if rounds is None else rounds):
        for i, rt in enumerate(rts):
            per[i].append(rt.measure(warmup=2, repeat=repeat).median)
    return [median(v) for v in per]


def fake_run(args, totals: Totals) -> None:
    print(f"no GPU here ({gpu.gpu_missing() or gpu.cuda_missing()}): the search runs on the tests' fake CUDA device; "
          "stage times are CPU stand-ins, the bookkeeping around them is the GPU code's")
    for name in args.models:
        graph = models.get(name, **size_options(name, args.image_size))
        if not graph.has_weights:
            graph = graph.init_weights(0)
        # one sample per stage: the fake device's times mean nothing, its bookkeeping is what is measured
        with tempfile.TemporaryDirectory(prefix="ios-gpu-plans-") as tmp:
            plans = str(Path(tmp) / "plans.sqlite")
            for label in ("", ", again with only the plan cache warm"):
                result, cm, seconds = search(graph, args.strategy, _device(True), args.r, args.s,
                                             dict(warmup=0, number=1, repeat=1, min_sample_ms=None), None, totals,
                                             plans=plans)
                print(describe(f"{name} (fake device, image {args.image_size or 'default'}, {args.strategy}, "
                               f"r={args.r} s={args.s}{label})", result, cm, seconds))
    _, reason = gpu.nvml_session()
    print("NVML: " + ("one session, open for the process" if reason is None else f"not readable here ({reason}); "
                      "every stage's window records that reason"))


def gpu_run(args, totals: Totals) -> None:
    fp = gpu.fingerprint()
    print(f"GPU: {fp.get('name')} (driver {fp.get('driver')}, CUDA {fp.get('cuda_runtime')}, cuDNN {fp.get('cudnn')}); "
          f"{gpu.clock_state(fp)}; batch 1, fp32")
    dev = _device(False)
    protocol = dict(warmup=args.warmup, number=1, repeat=args.repeat, min_sample_ms=None)
    # every plan cache of the run, cold (no plan stored before this run); it outlives each search, since
    # the shared device stays attached to the plan cache of its last search while it times schedules
    plan_dir = tempfile.TemporaryDirectory(prefix="ios-gpu-plans-")
    rows = []
    for name in args.models + [m for m in args.pruned if m not in args.models]:
        graph = models.get(name).init_weights(0)
        row = {"model": name}
        if name in args.models:
            plans = str(Path(plan_dir.name) / f"{name}-plans.sqlite")
            result, cm, seconds, seq = search(graph, "both", dev, 3, 8, protocol, None, totals, sequential=True,
                                              plans=plans)
            print(describe(f"{name} IOS-Both r=3 s=8", result, cm, seconds), flush=True)
            both = result.graph
            kept = next((c for c in (result.stats.validation or {}).get("candidates", [])
                         if c["name"] == result.stats.validation["kept"]), {})
            row.update(corrected=kept.get("corrected_ms"))
            row.update(search_s=seconds, stages=cm.measured, predicted=result.stats.cost_ms,
                       both_graph=run_ms(both, dev, True), both_launch=run_ms(both, dev, False))
            # the same search on a fresh device whose only warm part is the plan cache the first one filled
            wres, wcm, wseconds = search(graph, "both", _device(False), 3, 8, protocol, None, totals, plans=plans)
            print(describe(f"{name} IOS-Both r=3 s=8, only the plan cache warm", wres, wcm, wseconds), flush=True)
            row.update(warm_s=wseconds, warm_graph=run_ms(wres.graph, dev, True))
            row.update(seq_graph=run_ms(seq.graph, dev, True), seq_launch=run_ms(seq.graph, dev, False),
                       seq_predicted=seq.stats.cost_ms)
            if args.independent:  # a second cold search of its own: a fresh device, database and plan cache
                ires, icm, iseconds = search(graph, "both", _device(False), 3, 8, protocol, None, totals,
                                             plans=str(Path(plan_dir.name) / f"{name}-independent-plans.sqlite"))
                print(describe(f"{name} IOS-Both r=3 s=8, an independent cold search", ires, icm, iseconds),
                      flush=True)
                first, second = side_by_side([both, ires.graph], dev)
                row.update(indep_s=iseconds, side=(first, second))
                print(f"{name}: the two cold searches' IOS-Both schedules timed side by side ({SIDE_ROUNDS} rounds, "
                      f"alternating): {_two(first, second)}", flush=True)
        if name in args.pruned:
            r, s = args.pruned_rs
            pres, pcm, pseconds = search(graph, "both", dev, r, s, protocol, None, totals,
                                         plans=str(Path(plan_dir.name) / f"{name}-pruned-plans.sqlite"))
            print(describe(f"{name} IOS-Both pruned r={r} s={s}", pres, pcm, pseconds), flush=True)
            row.update(pruned_s=pseconds, pruned_stages=pcm.measured, pruned_graph=run_ms(pres.graph, dev, True))
        rows.append(row)
    plan_dir.cleanup()
    print(goal_table(rows, fp, args))


def _f(v, fmt="{:.3f}") -> str:
    return fmt.format(v) if isinstance(v, (int, float)) else "-"


def _two(a, b) -> str:
    if not (isinstance(a, float) and isinstance(b, float)):
        return "-"
    return f"{a:.3f} / {b:.3f} ({abs(a - b) / min(a, b):.1%})"


def goal_table(rows: list[dict], fp: dict, args) -> str:
    r, s = args.pruned_rs
    out = [f"\nGoals of issues 32 and 40 on {fp.get('name')} ({gpu.clock_state(fp)}), batch 1, fp32, CUDA events; "
           "IOS figures are CUDA-graph replays unless marked launches",
           f"| network | search s (goal) | stages measured | pruned r={r} s={s} search s (goal {PRUNED_GOAL_S}) "
           "| pruned / full latency (goal <= 1.05) | predicted ms | measured ms | predicted vs measured (goal 15 %) "
           "| sequential ms | IOS-Both speedup (paper) | IOS-Both ms, launches | sequential ms, launches "
           "| search s, only plans warm (goal 5) | two cold searches' IOS-Both ms, side by side (goal within 5 %) "
           "| corrected prediction vs measured (goal 15 %) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        m = row["model"]
        pred, meas, seq = row.get("predicted"), row.get("both_graph"), row.get("seq_graph")
        ratio = f"{pred / meas - 1:+.0%}" if pred and meas else "-"
        speed = (f"{seq / meas:.2f}x" + (f" ({PAPER[m][1]:.2f}x)" if m in PAPER else "")) if meas and seq else "-"
        pruned_vs = f"{row['pruned_graph'] / meas:.3f}" if meas and row.get("pruned_graph") else "-"
        corrected = f"{row['corrected'] / meas - 1:+.0%}" if meas and row.get("corrected") else "-"
        out.append(f"| {m} | {_f(row.get('search_s'), '{:.1f}')} ({GOAL_SEARCH_S.get(m, '-')}) "
                   f"| {row.get('stages', '-')} | {_f(row.get('pruned_s'), '{:.1f}')} | {pruned_vs} | {_f(pred)} "
                   f"| {_f(meas)} | {ratio} | {_f(seq)} | {speed} | {_f(row.get('both_launch'))} "
                   f"| {_f(row.get('seq_launch'))} | {_f(row.get('warm_s'), '{:.1f}')} "
                   f"| {_two(*row['side']) if row.get('side') else '-'} "
                   f"| {corrected} |")
    out.append("predicted: the search's estimate (the sum of its stages, each timed as a CUDA-graph replay); "
               "measured: the schedule run by the CUDA runtime as one graph replay (median of 50, CUDA events); "
               "corrected: the prediction less the per-graph replay cost each stage figure carries (measured on "
               "the device: MeasuredCostModel.replay_constants); two cold searches: the first search's IOS-Both "
               "schedule and an independent cold search's, timed side by side (alternating rounds); "
               "speedup: sequential / IOS-Both, both graph replays. Search times are cold (a fresh profile "
               "database); the paper's (V100, its own runtime): " +
               ", ".join(f"{k} {v[0]} s" for k, v in PAPER.items()) + ".")
    return "\n".join(out)


def main(argv=None) -> int:
    p = script_parser(__doc__)
    p.add_argument("--models", default=None,
                   help="networks searched with r=3 s=8 (default: inception_v3 on the fake device; "
                        "squeezenet,inception_v3 on a GPU)")
    p.add_argument("--pruned", default="",
                   help="networks (GPU) also searched pruned (--pruned-rs), e.g. randwire,nasnet")
    p.add_argument("--pruned-rs", default="2,3", help="r,s of the pruned search (default 2,3)")
    p.add_argument("--fake", action="store_true", help="use the fake device even where a GPU is")
    p.add_argument("--image-size", type=int, default=None,
                   help="fake device: the network's input size (default 75 for inception_v3: CPU kernels stand in)")
    p.add_argument("--strategy", default="both", help="fake device: the search's strategy (default both)")
    p.add_argument("-r", type=int, default=3, help="fake device: max group size (default 3)")
    p.add_argument("-s", type=int, default=8, help="fake device: max number of groups (default 8)")
    p.add_argument("--warmup", type=int, default=2, help="GPU: warmup runs per stage (default 2)")
    p.add_argument("--repeat", type=int, default=5, help="GPU: samples per stage (default 5)")
    p.add_argument("--no-independent", dest="independent", action="store_false",
                   help="GPU: leave out the second, independent cold search and the side-by-side timing")
    args = p.parse_args(argv)
    raw = args.pruned_rs
    try:
        args.pruned_rs = tuple(int(v) for v in raw.split(","))
    except ValueError:
        args.pruned_rs = ()
    if len(args.pruned_rs) != 2 or min(args.pruned_rs) < 1:
        p.error(f"--pruned-rs must be two positive integers R,S, not {raw!r}")
    fake = args.fake or gpu.cuda_missing() is not None
    known = set(models.names())
    args.models = [m for m in (args.models or ("inception_v3" if fake else "squeezenet,inception_v3")).split(",") if m]
    args.pruned = [m for m in args.pruned.split(",") if m]
    bad = [m for m in args.models + args.pruned if m not in known]
    if bad:
        p.error(f"unknown model(s) {', '.join(bad)}; choose from {', '.join(sorted(known))}")
    if fake and args.image_size is None and args.models == ["inception_v3"]:
        args.image_size = 75
    totals = Totals()
    if fake:
        fake_run(args, totals)
    else:
        gpu_run(args, totals)
    print(totals.wall_line())
    print(totals.line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
