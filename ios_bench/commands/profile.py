"""ios-bench profile --model M --batch B [--schedule FILE] [--strategy S]
ios-bench profile --model M --frameworks a,b,... [--by op|kind] [--format table|json] [--plot FILE]"""

from __future__ import annotations

import click

from ios_bench.errors import InputError
from ios_bench.planning.loading import load_graph
from ios_bench.planning.options import SEED, Threads
from ios_bench.reporting.escape import one_line, plain
from ios_core.check import PRECISIONS
from ios_core.cost.measured import MODES as MEASURED_MODES
from ios_core.optimizer import STRATEGIES


def _schedule(graph, strategy: str | None, cost: str, cost_mode: str | None, batch: int, threads: int | None,
              provider: str = "torch"):
    if strategy is None:
        return graph, None
    try:
        from ios_core import optimize
        from ios_core.cost import make_cost_model
    except ImportError as e:  # the scheduler not installed
        raise InputError(f"--strategy needs the IOS optimizer, which is not available ({e})") from None
    # measured costs are taken on the provider the schedule is then profiled on
    options = {"mode": cost_mode, "threads": threads, "provider": provider} if cost == "measured" else {}
    cm = make_cost_model(cost, **options)
    return optimize(graph, strategy, cm, batch_size=batch), cm


@click.command("profile")
@click.option("--model", "model", default=None, help="zoo model name, graph JSON file or .onnx model")
@click.option("--batch", "batch", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--schedule", "schedule", type=click.Path(dir_okay=False), default=None,
              help="a schedule file (graph JSON with stages, e.g. written by ios-bench optimize or the reference IOS)")
@click.option("--strategy", type=click.Choice(STRATEGIES), default=None,
              help="optimize the model first with this strategy (default: the graph's own stages, or sequential)")
@click.option("--cost", type=click.Choice(["synthetic", "measured"]), default="synthetic", show_default=True,
              help="cost model for --strategy")
@click.option("--cost-mode", type=click.Choice(list(MEASURED_MODES)), default=None,
              help="measured cost model mode (default: the model's own, calibrated on the CPU; docs/scheduler.md)")
@click.option("--threads", type=Threads(), default=None,
              help="thread budget, at most the cores this process may use (default: all of them)")
@click.option("--provider", default="torch", show_default=True,
              help="kernel provider of the runtime: torch, onnxruntime or openvino (docs/runtime.md)")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--number", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--repeat", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--seed", type=SEED, default=0, show_default=True, help="weights seed (when the graph has none)")
@click.option("--show-graph/--no-show-graph", default=True, show_default=True, help="print the scheduled graph")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="cuda: time the schedule on the IOS CUDA runtime while sampling SM utilization (NVML)")
@click.option("--util-plot", type=click.Path(dir_okay=False), default=None,
              help="with --device cuda: write the SM-utilization-over-time plot here [default: <model>-util.png]")
@click.option("--cuda-graph", is_flag=True, help="with --device cuda: replay the schedule as one CUDA graph")
@click.option("--frameworks", default=None,
              help="comma-separated frameworks: each one's own profiler, mapped to the IR operators, side by side "
                   "(docs/harness.md, 'Where the time goes')")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), default="fp32", show_default=True,
              help="with --frameworks: the precision asked of each build (a framework computing in another is "
                   "not available)")
@click.option("--by", "by", type=click.Choice(["op", "kind"]), default="op", show_default=True,
              help="with --frameworks: rows per IR operator (topological order) or per op kind")
@click.option("--format", "fmt_", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="with --frameworks: the table, or a JSON list, one object per framework (docs/harness.md)")
@click.option("--trace-dir", "trace_dir", type=click.Path(file_okay=False), default=None,
              help="with --frameworks: keep each framework's own profiler events here, one Chrome trace (Perfetto) "
                   "JSON file per framework whose profiler times events (its path in the output)")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="with --frameworks: write one stacked bar per framework (op kinds + overhead) here, as PNG")
def command(model, batch, schedule, strategy, cost, cost_mode, threads, provider, warmup, number, repeat, seed,
            show_graph, device, util_plot, cuda_graph, frameworks, precision, by, fmt_, trace_dir, plot_path):
    """Per-stage latency of a schedule on the IOS runtime, and the whole graph's latency.

    \b
    Examples:
      ios-bench profile --model sample
      ios-bench profile --model inception_v3 --strategy both
      ios-bench profile --schedule tests/data/tiny_schedule.json --batch 2
      ios-bench profile --model squeezenet --strategy both --provider onnxruntime

    With a provider other than torch, a run of consecutive one-group stages is one stage
    (compiled as one piece).

    \b
    With --frameworks, every framework's own profiler on the same graph, mapped to the IR:
      ios-bench profile --model squeezenet --frameworks onnxruntime,openvino,torch,ios
      ios-bench profile --model resnet50 --frameworks onnxruntime,torch --by kind --plot r50.png
      ios-bench profile --model squeezenet --frameworks onnxruntime,ios --format json
    """
    if frameworks is not None:
        _profile_frameworks(model, schedule, strategy, cost, cost_mode, threads, provider, frameworks, batch, device,
                            precision, warmup, repeat, seed, by, fmt_, plot_path, trace_dir)
        return
    import numpy as np

    from ios_core.runtime import Runtime, providers

    if provider not in providers.names():
        raise InputError(f"unknown provider {provider!r}; choose one of {', '.join(providers.names())}")
    reason = providers.get(provider).available()
    if reason is not None:
        raise InputError(f"provider {provider} cannot run here: {reason}")

    if model is None and schedule is None:
        raise InputError("give --model or --schedule")
    if device == "cuda":
        from ios_core.measurement.gpu import cuda_missing

        missing = cuda_missing()
        if missing is not None:
            raise InputError(f"--device cuda: {missing}")
    elif util_plot or cuda_graph:
        raise InputError("--util-plot and --cuda-graph need --device cuda")
    if schedule is not None and strategy is not None:
        raise InputError("--schedule already fixes the stages: drop --strategy")
    graph = load_graph(schedule if schedule is not None else model)
    graph.check_fits(batch)
    if model is not None and schedule is not None:
        base = load_graph(model)
        if base.name != graph.name:
            raise InputError(f"schedule {schedule} is for {graph.name!r}, not {base.name!r}")
    if not graph.has_weights:
        graph.init_weights(seed)
    graph, cm = _schedule(graph, strategy, cost, cost_mode, batch, threads, provider)
    if not graph.has_weights:
        graph.init_weights(seed)
    if device == "cuda":
        _profile_cuda(graph, batch, strategy, warmup, number, repeat, util_plot, cuda_graph, show_graph)
        return
    rt = Runtime(graph, batch, provider=provider, threads=threads)
    m = rt.measure(warmup=warmup, number=number, repeat=repeat, profile_stages=True)
    stage_ms = m.stage_mean_ms
    if show_graph:
        click.echo(plain(graph))
    label = strategy or ("given" if graph.has_stages else "sequential")
    click.echo(f"{label.capitalize()} schedule: {m.median:.3f} ms (median; mean {m.mean:.3f} ± {m.std:.3f}, "
               f"min {m.min:.3f}, {m.repeat}x{m.number}, batch {batch}, {rt.threads} threads, "
               f"provider {provider})")
    click.echo(f"      Stage latency: {np.array2string(np.array(stage_ms), precision=5, max_line_width=100)}")
    click.echo("")
    total = sum(stage_ms) or 1.0
    click.echo(f"{'stage':>5} {'groups':>6} {'ms':>9} {'share':>6}  operators")
    for i, (names, ms) in enumerate(zip(m.meta["stage_names"], stage_ms)):
        groups = " | ".join(",".join(_hint(graph, n) for n in g) for g in names)
        click.echo(f"{i:>5} {len(names):>6} {ms:>9.4f} {100 * ms / total:>5.1f}%  {one_line(groups)}")
    st = rt.stats
    if provider != "torch":
        click.echo(f"# {provider} {st['provider_version']}: {st['pieces']} pieces, "
                   f"compiled in {st['compile_seconds']:.2f} s")
    click.echo(f"# {one_line(graph.name)}: {st['stages']} stages ({st['parallel_stages']} parallel), {st['operators']} "
               f"operators, sum of stages {sum(stage_ms):.3f} ms, whole graph {m.median:.3f} ms, "
               f"peak activations {st['peak_activation_bytes'] / 2**20:.2f} MiB")
    if cm is not None and hasattr(cm, "stats"):
        click.echo(f"# cost model: {cm.stats()}")


def _profile_frameworks(model, schedule, strategy, cost, cost_mode, threads, provider, frameworks, batch, device,
                        precision, warmup, repeat, seed, by, fmt_, plot_path, trace_dir=None):
    """``--frameworks``: ``ios_bench.profiling`` on each, the table (or JSON) and the bars."""
    import json

    import adapters
    from ios_bench.profiling import PROFILE_ROUNDS, profile_frameworks
    from ios_bench.reporting.profile_table import plot, plot_timeline, render, timeline_path

    names = [n.strip() for n in frameworks.split(",") if n.strip()]
    if not names:
        raise InputError("--frameworks: give at least one framework")
    for name in names:
        adapters.get(name)  # an unknown one: one line, exit 2
    if model is None and schedule is None:
        raise InputError("give --model or --schedule")
    graph = load_graph(schedule if schedule is not None else model)
    graph.check_fits(batch)
    if not graph.has_weights:
        graph.init_weights(seed)
    graph, _ = _schedule(graph, strategy, cost, cost_mode, batch, threads, provider)
    if not graph.has_weights:
        graph.init_weights(seed)
    if trace_dir is not None:
        from pathlib import Path

        try:
            Path(trace_dir).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"--trace-dir {trace_dir}: {e.strerror or e}") from None
    results = profile_frameworks(graph, names, batch, device=device, threads=threads, precision=precision,
                                 warmup=warmup, repeat=repeat, trace_dir=trace_dir)
    if fmt_ == "json":
        click.echo(json.dumps(results, indent=1))
    else:
        click.echo(f"# {one_line(graph.name)}, batch {batch}, {device}, {precision}, {PROFILE_ROUNDS} rounds of "
                   f"{repeat} unprofiled and {repeat} profiled runs per framework, in alternating order")
        click.echo(render(graph, results, by))
    if plot_path:
        path = plot(results, plot_path, f"{graph.name}, batch {batch}: where the time goes")
        click.echo(f"plot: {path}", err=fmt_ == "json")
        for r in results:  # IOS's stages per worker, beside it
            if r.get("timeline"):
                tl = plot_timeline(r["timeline"], timeline_path(path),
                                   f"{graph.name}, batch {batch}: IOS stages per worker")
                click.echo(f"plot: {tl}", err=fmt_ == "json")


def _hint(graph, name) -> str:
    try:
        return graph.node(name).hint_name
    except KeyError:
        return name


def _profile_cuda(graph, batch, strategy, warmup, number, repeat, util_plot, cuda_graph, show_graph):
    """The schedule on the IOS CUDA runtime, timed with CUDA events while NVML samples the SM
    utilization; the samples go to a plot (the seed's utilization experiment)."""
    from pathlib import Path

    from ios_core.measurement.gpu import UtilizationSampler
    from ios_core.runtime import make_runtime

    rt = make_runtime(graph, batch, device="cuda", cuda_graph=cuda_graph)
    rt.measure(warmup=warmup, number=1, repeat=1)
    with UtilizationSampler() as util:
        m = rt.measure(warmup=0, number=number, repeat=repeat, min_sample_ms=200.0)
    if show_graph:
        click.echo(str(graph))
    label = strategy or ("given" if graph.has_stages else "sequential")
    st = rt.stats
    click.echo(f"{label.capitalize()} schedule on cuda: {m.median:.3f} ms (median of {m.repeat}x{m.number}, "
               f"CUDA events), {st['streams']} streams, {st['events']} events, cuda_graph={cuda_graph}; "
               f"mean SM utilization {util.mean_gpu_percent or 0:.0f}% over {len(util.samples)} samples")
    path = Path(util_plot or f"{graph.name}-util.png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot([s[0] for s in util.samples], [s[1] for s in util.samples], lw=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("SM utilization (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"{graph.name}, batch {batch}, {label} schedule (measured, NVML)")
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    click.echo(f"utilization plot: {path}")
