"""Running an experiment: its sweeps, then its report.

Each :class:`~ios_bench.experiments.base.Run` is an ordinary sweep (:class:`ios_bench.running.sweep.Sweep`)
into ``<out>/runs/<run name>/`` (so ``ios-bench report``, ``show`` and ``--resume`` work on it as
on any run folder). With ``resume`` a run whose sweep finished is not started again, and an
unfinished one continues where it stopped. Then the experiment reads the run folders back and
its report is written, atomically, as ``<out>/report.md`` with a header (what it reproduces,
the form and what that form reduced, the environment), and ``<out>/env.json``: the environment of
the first run, with every run's own ``env.json`` listed under ``runs``.

``<out>/experiment.json`` records what was asked (experiment, form, models, devices, threads),
so that ``--resume`` continues with the same choices.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from pathlib import Path

from ios_bench.errors import InputError
from ios_bench.experiments import _common
from ios_bench.experiments.base import Context, Experiment, Report, Run
from ios_bench.records.runfolder import ENV_FILE, PLAN_FILE, check_writable
from ios_bench.reporting.escape import md, term
from ios_bench.running.sweep import Sweep
from ios_core.atomic import atomic_write_json, atomic_write_text

EXPERIMENT_FILE = "experiment.json"
REPORT_FILE = "report.md"
RUNS_DIR = "runs"
# what experiment.json keeps of the context (what --resume must not change)
_KEPT = ("models", "devices", "quick", "reference", "threads")


def saved_context(out: Path) -> dict | None:
    """The choices an experiment folder was run with (experiment.json), or None."""
    path = Path(out) / EXPERIMENT_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as e:
        raise InputError(f"{path}: corrupt ({type(e).__name__}); start again with another --out") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: corrupt (not a JSON object); start again with another --out")
    return data


def check_runs(exp: Experiment, runs: list[Run]) -> None:
    names = [r.name for r in runs]
    if not runs:
        raise InputError(f"experiment {exp.name!r} has nothing to run with these options")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TypeError(f"experiment {exp.name!r} names two runs {dup[0]!r}")
    for n in names:
        if not n or "/" in n or n.startswith("."):
            raise TypeError(f"experiment {exp.name!r}: bad run name {n!r}")


def _finished(folder: Path) -> bool:
    """A run folder whose sweep ran to its end (nothing left for --resume)."""
    try:
        env = json.loads((folder / ENV_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(env, dict):
        return False
    last = (env.get("sessions") or [env])[-1] if isinstance(env.get("sessions"), list) else env
    return bool(last.get("finished")) and not last.get("interrupted") and not (last.get("stats") or {}).get("missing")


def selected_runs(exp: Experiment, ctx: Context) -> list[Run]:
    """The experiment's sweeps, only those ``ctx.sweeps`` names when it names some (an unknown
    name is bad input)."""
    runs = exp.runs(ctx)
    if ctx.sweeps is None:
        return runs
    known = [r.name for r in runs]
    unknown = [n for n in ctx.sweeps if n not in known]
    if unknown or not ctx.sweeps:
        raise InputError(f"unknown sweep {', '.join(unknown)[:60]!r} of {exp.name}; choose from: {', '.join(known)}")
    return [r for r in runs if r.name in ctx.sweeps]


def prepare(exp: Experiment, ctx: Context) -> list[Run]:
    """Check the experiment folder and list the runs (before anything is written)."""
    out = Path(ctx.out)
    runs = selected_runs(exp, ctx)
    check_runs(exp, runs)
    if not ctx.resume and out.exists():
        if (out / EXPERIMENT_FILE).exists() or (out / RUNS_DIR).exists():
            raise InputError(f"{out} already holds an experiment; use --resume to continue it or another --out")
        if out.is_dir() and any(out.iterdir()):
            raise InputError(f"{out} is not empty; choose a new or empty folder with --out")
        if not out.is_dir():
            raise InputError(f"{out} is not a folder")
    if ctx.resume:
        saved = saved_context(out)
        if saved is None:
            raise InputError(f"--resume: {out} holds no experiment ({EXPERIMENT_FILE} missing)")
        if saved.get("experiment") != exp.name:
            raise InputError(f"--resume: {out} holds experiment {saved.get('experiment')!r}, not {exp.name!r}")
    return runs


def run_experiment(exp: Experiment, ctx: Context, console=None, progress: bool = True,
                   command: list[str] | None = None) -> Path:
    """Run ``exp``'s sweeps into ``ctx.out`` and write its report; returns the report's path."""
    from rich.console import Console

    console = console or Console(stderr=True, soft_wrap=True)
    out = Path(ctx.out)
    runs = prepare(exp, ctx)
    check_writable(out)
    started = _now()
    meta = saved_context(out) if ctx.resume else None
    meta = meta or {"experiment": exp.name, "title": exp.title, "paper": exp.paper, "form": ctx.form,
                    **{k: getattr(ctx, k) for k in _KEPT}, "command": command, "started": started, "sessions": []}
    meta["sessions"] = list(meta.get("sessions") or []) + [{"started": started, "command": command}]
    meta["runs"] = [{"name": r.name, "note": r.note, "folder": f"{RUNS_DIR}/{r.name}"} for r in runs]
    atomic_write_json(out / EXPERIMENT_FILE, meta)
    folders: dict[str, Path] = {}
    totals = {"ran": 0, "ok": 0, "wrong": 0, "failed": 0, "skipped": 0}
    t0 = time.perf_counter()
    for i, run in enumerate(runs, 1):
        folder = out / RUNS_DIR / run.name
        folders[run.name] = folder
        head = f"[{i}/{len(runs)}] {exp.name}: {run.name}" + (f" ({run.note})" if run.note else "")
        if ctx.resume and _finished(folder):
            console.print(term(f"{head}: finished earlier, kept"), highlight=False)
            continue
        console.print(f"[bold]{term(head)}[/]", highlight=False)
        resume = ctx.resume and (folder / PLAN_FILE).exists()
        sweep = Sweep(run.plan, folder, console=console, resume=resume, progress=progress)
        try:
            stats = sweep.run()
        except KeyboardInterrupt:
            console.print(term(f"{exp.name} interrupted in sweep {run.name}: continue the experiment with: "
                               f"ios-bench experiment {exp.name} --resume --out {out}"), highlight=False)
            raise
        for k in totals:
            totals[k] += stats.get(k, 0)
        if stats.get("missing"):
            raise InputError(f"{folder}: {stats['missing']} cells were not run; continue with --resume")
    elapsed = time.perf_counter() - t0
    console.print(term(f"{exp.name}: {len(runs)} sweeps done in {elapsed:.0f} s ({totals['ran']} cells run now: "
                       f"{totals['ok']} ok, {totals['wrong']} wrong, {totals['failed']} failed, "
                       f"{totals['skipped']} skipped); writing the report"), highlight=False)
    report = exp.report(ctx, folders)
    path = write_report(exp, ctx, runs, folders, report, meta)
    meta["finished"] = _now()
    meta["sessions"][-1]["finished"] = meta["finished"]
    meta["sessions"][-1]["seconds"] = round(elapsed, 1)
    atomic_write_json(out / EXPERIMENT_FILE, meta)
    return path


# ---- the report ----------------------------------------------------------------------------------

def _env(folder: Path) -> dict:
    try:
        env = json.loads((folder / ENV_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(env, dict):
        return {}
    return env


def env_summary(env: dict) -> list[str]:
    """The header's environment lines: CPU, threads, spin policy, library versions, load."""
    from ios_bench.reporting.report import _policy_text

    def part(key):
        v = env.get(key)
        return v if isinstance(v, dict) else {}

    cpu, plan = part("cpu"), part("plan")
    fws = []
    for _dev, adapters in part("frameworks").items():
        for name, info in (adapters if isinstance(adapters, dict) else {}).items():
            if isinstance(info, dict) and not info.get("reason") and info.get("version"):
                fws.append(f"{name} {info['version']}")
    pk = part("packages")
    lines = [
        f"CPU: {cpu.get('model', '?')}, {cpu.get('physical_cores', '?')} cores / {cpu.get('logical_cores', '?')} "
        f"threads; memory {part('memory').get('total_gib', '?')} GiB; GPU: {env.get('gpu', '?')}",
        f"threads per cell: {plan.get('threads', '?')}; spin/wait policy: {_policy_text(env)}",
        "libraries: " + (", ".join(f"{k} {v}" for k, v in pk.items()) or "?"),
        "frameworks run: " + (", ".join(sorted(set(fws))) or "none but the IOS runtime"),
        f"git commit: {part('git').get('commit', '?')}" + (" (dirty)" if part("git").get("dirty") else ""),
        f"measured: {env.get('captured', '?')}"
        + (f"; load average then {env.get('load_average')}" if env.get("load_average") else ""),
    ]
    for w in env.get("warnings") or []:
        lines.append(f"warning: {w}")
    return lines


def _run_counts(folder: Path) -> str:
    recs = _common.records(folder) if (folder / "results.jsonl").exists() else []
    counts = {}
    for r in recs:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no cells"


def render(exp: Experiment, ctx: Context, runs: list[Run], folders: dict[str, Path], report: Report,
           meta: dict) -> str:
    out = Path(ctx.out)
    first_env = next((e for e in (_env(folders[r.name]) for r in runs) if e), {})
    lines = [f"# {md(report.title or exp.title)}", "",
             f"- experiment: `{exp.name}`: {md(exp.summary)}",
             f"- reproduces: {md(exp.paper)}",
             f"- form: **{ctx.form}**" + {"full": " (the paper's models and batch sizes)",
                                          "reference": " (the full form reduced to fit this machine: see below)",
                                          "quick": " (small inputs: a smoke test, not a result)"}[ctx.form],
             f"- command: `{' '.join(meta.get('command') or []) or '?'}`",
             ""]
    lines += ["## Environment", ""] + [f"- {md(x)}" for x in env_summary(first_env)] + [
        f"- every run's full environment: `env.json` here and in each run folder (`{RUNS_DIR}/<run>/env.json`)", ""]
    lines += ["## What this form reduced", ""]
    reduced = list(report.reduced)
    lines += [f"- {md(x)}" for x in reduced] if reduced else ["- nothing: the paper's full form"]
    lines += ["", _common.LEGEND, ""]
    for heading, body in report.sections:
        lines += [f"## {md(heading)}", "", body.rstrip(), ""]
    for fig in report.figures:
        rel = Path(fig).resolve().relative_to(out.resolve()) if Path(fig).resolve().is_relative_to(out.resolve()) \
            else Path(fig)
        lines += [f"![{md(Path(fig).stem)}]({rel.as_posix()})", ""]
    rows = [[r.name, r.note or "", _run_counts(folders[r.name]), f"{RUNS_DIR}/{r.name}"] for r in runs]
    lines += ["## Runs", "", _common.table("The sweeps of this experiment (each an ordinary run folder: "
                                           "`ios-bench report` works on it)",
                                           ["run", "what", "cells", "folder"], rows)]
    return "\n".join(lines).rstrip() + "\n"


def write_report(exp: Experiment, ctx: Context, runs: list[Run], folders: dict[str, Path], report: Report,
                 meta: dict) -> Path:
    out = Path(ctx.out)
    text = render(exp, ctx, runs, folders, report, meta)
    env = next((e for e in (_env(folders[r.name]) for r in runs) if e), {})
    env = {**env, "experiment": {k: meta.get(k) for k in ("experiment", "form", "models", "devices", "threads",
                                                          "command")},
           "runs": {r.name: f"{RUNS_DIR}/{r.name}/{ENV_FILE}" for r in runs if (folders[r.name] / ENV_FILE).exists()}}
    atomic_write_json(out / ENV_FILE, env)
    path = out / REPORT_FILE
    atomic_write_text(path, text)
    return path


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
