"""Running an experiment: its sweeps, then its report.

Each :class:`~ios_bench.experiments.base.Run` is an ordinary sweep (:class:`ios_bench.running.sweep.Sweep`)
into ``<out>/runs/<run name>/`` (so ``ios-bench report``, ``show`` and ``--resume`` work on it as
on any run folder). With ``resume`` a run whose sweep finished is not started again, and an
unfinished one continues where it stopped. Then the experiment reads the run folders back and
its report is written, atomically, as ``<out>/report.md`` with a header (what it reproduces,
the form and what that form reduced, the environment), and ``<out>/env.json``: the environment of
the first run, with every run's own ``env.json`` listed under ``runs``.

``<out>/experiment.json`` records what was asked (experiment, form, models, devices, threads),
so that ``--resume`` continues with the same choices, and each session (command, start, end,
whether its deadline stopped it and before which step).

**Deadline** (``--deadline S``, any experiment): no step starts once ``S`` seconds have passed
since the command started. A step is an experiment's preflight (``Experiment.preflight``, where it
has one), a sweep, and inside a sweep its reference outputs, each wave of groups and each round of
a cell (the sweep's own ``max_time``): the one running finishes, nothing after it starts. The
report is rewritten after every sweep (what finished so far, and what is left), the session is
recorded as stopped, and :class:`Stopped` says how to continue: ``--resume`` runs only what is left
(a finished sweep is kept, a stopped one continues with the rounds its cells lack), so nothing is
measured twice.
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


class Stopped(Exception):
    """The experiment's deadline was spent: what finished is kept, the report says what is left,
    and ``--resume`` continues it. ``report`` is the report's path; the message is one line."""

    def __init__(self, message: str, report: Path):
        super().__init__(message)
        self.report = report


def _finished(folder: Path) -> bool:
    """A run folder whose sweep ran to its end (nothing left for --resume; a sweep its deadline
    stopped is not finished)."""
    try:
        env = json.loads((folder / ENV_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(env, dict):
        return False
    last = (env.get("sessions") or [env])[-1] if isinstance(env.get("sessions"), list) else env
    return (bool(last.get("finished")) and not last.get("interrupted") and not last.get("stopped")
            and not (last.get("stats") or {}).get("missing"))


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
                   command: list[str] | None = None, deadline: float | None = None) -> Path:
    """Run ``exp``'s sweeps into ``ctx.out`` and write its report; returns the report's path.
    ``deadline``: seconds from now after which no step starts (:class:`Stopped` is raised once
    the report of what finished is written)."""
    from rich.console import Console

    console = console or Console(stderr=True, soft_wrap=True)
    t0 = time.monotonic()
    end = None if deadline is None else t0 + float(deadline)
    out = Path(ctx.out)
    runs = prepare(exp, ctx)
    check_writable(out)
    started = _now()
    meta = saved_context(out) if ctx.resume else None
    meta = meta or {"experiment": exp.name, "title": exp.title, "paper": exp.paper, "form": ctx.form,
                    **{k: getattr(ctx, k) for k in _KEPT}, "command": command, "started": started, "sessions": []}
    session = {"started": started, "command": command, "deadline_s": deadline}
    meta["sessions"] = list(meta.get("sessions") or []) + [session]
    meta["runs"] = [{"name": r.name, "note": r.note, "folder": f"{RUNS_DIR}/{r.name}"} for r in runs]
    meta.pop("finished", None)
    atomic_write_json(out / EXPERIMENT_FILE, meta)
    resume_hint = f"ios-bench experiment {exp.name} --resume --out {out}"

    def left() -> float | None:
        return None if end is None else end - time.monotonic()

    def spent(before: str) -> str | None:
        rest = left()
        if rest is not None and rest <= 0:
            return f"--deadline {deadline:g} s spent before {before}"
        return None

    folders: dict[str, Path] = {r.name: out / RUNS_DIR / r.name for r in runs}
    totals = {"ran": 0, "ok": 0, "wrong": 0, "failed": 0, "skipped": 0}
    stopped: str | None = None
    preflight = getattr(exp, "preflight", None)
    if preflight is not None and not meta.get("preflight_done"):
        stopped = spent("the preflight")
        if stopped is None:
            console.print(term(f"[0/{len(runs)}] {exp.name}: preflight"), highlight=False)
            try:
                entry = preflight(ctx, console, left())
            except KeyboardInterrupt:  # marked like an interrupted sweep: the next --resume runs the preflight
                console.print(term(f"{exp.name} interrupted in the preflight: continue the experiment with: "
                                   f"{resume_hint}"), highlight=False)
                session.setdefault("steps", []).append({"step": "preflight", "done": False, "interrupted": True})
                session["stopped"] = "interrupted in the preflight"
                session["seconds"] = round(time.monotonic() - t0, 1)
                _rewrite_partial(exp, ctx, runs, folders, meta, console, stopped=session["stopped"], hint=resume_hint)
                atomic_write_json(out / EXPERIMENT_FILE, meta)
                raise
            session.setdefault("steps", []).append({"step": "preflight", **entry})
            meta["preflight_done"] = bool(entry.get("done"))
            atomic_write_json(out / EXPERIMENT_FILE, meta)
    for i, run in enumerate(runs, 1):
        if stopped:
            break
        folder = folders[run.name]
        head = f"[{i}/{len(runs)}] {exp.name}: {run.name}" + (f" ({run.note})" if run.note else "")
        if ctx.resume and _finished(folder):
            console.print(term(f"{head}: finished earlier, kept"), highlight=False)
            continue
        stopped = spent(f"sweep {run.name}")
        if stopped:
            break
        console.print(f"[bold]{term(head)}[/]", highlight=False)
        resume = ctx.resume and (folder / PLAN_FILE).exists()
        # the sweep's steps that fit a fresh session of the whole deadline wait for it (Sweep.check_time)
        # rather than starting with seconds of this one left and being cut off
        sweep = Sweep(run.plan, folder, console=console, resume=resume, progress=progress, max_time=left(),
                      session_s=deadline)
        t_run = time.monotonic()
        try:
            stats = sweep.run()
        except KeyboardInterrupt:
            console.print(term(f"{exp.name} interrupted in sweep {run.name}: continue the experiment with: "
                               f"{resume_hint}"), highlight=False)
            # what finished stays reported (a window's hard stop interrupts the step that ran over)
            session["stopped"] = f"interrupted in sweep {run.name}"
            session["seconds"] = round(time.monotonic() - t0, 1)
            _rewrite_partial(exp, ctx, runs, folders, meta, console, stopped=session["stopped"], hint=resume_hint)
            atomic_write_json(out / EXPERIMENT_FILE, meta)
            raise
        session.setdefault("steps", []).append({"step": run.name, "seconds": round(time.monotonic() - t_run, 1),
                                                "stopped": stats.get("stopped")})
        for k in totals:
            totals[k] += stats.get(k, 0)
        if stats.get("missing"):
            raise InputError(f"{folder}: {stats['missing']} cells were not run; continue with --resume")
        if stats.get("stopped"):
            stopped = f"--deadline {deadline:g} s spent in sweep {run.name} ({stats['stopped']})"
        else:
            # the report of what finished so far: a stop between two sweeps leaves it current
            _rewrite_partial(exp, ctx, runs, folders, meta, console)
    elapsed = time.monotonic() - t0
    session["seconds"] = round(elapsed, 1)
    if stopped:
        session["stopped"] = stopped
        path = _rewrite_partial(exp, ctx, runs, folders, meta, console, stopped=stopped, hint=resume_hint)
        atomic_write_json(out / EXPERIMENT_FILE, meta)
        raise Stopped(f"{exp.name} stopped: {stopped}; {totals['ran']} cells run in this session; what finished is "
                      f"in {path}; continue with: {resume_hint}", path)
    console.print(term(f"{exp.name}: {len(runs)} sweeps done in {elapsed:.0f} s ({totals['ran']} cells run now: "
                       f"{totals['ok']} ok, {totals['wrong']} wrong, {totals['failed']} failed, "
                       f"{totals['skipped']} skipped); writing the report"), highlight=False)
    report = exp.report(ctx, folders)
    path = write_report(exp, ctx, runs, folders, report, meta)
    meta["finished"] = _now()
    session["finished"] = meta["finished"]
    atomic_write_json(out / EXPERIMENT_FILE, meta)
    return path


def _rewrite_partial(exp: Experiment, ctx: Context, runs: list[Run], folders: dict[str, Path], meta: dict,
                     console, stopped: str | None = None, hint: str = "") -> Path:
    """The report of what has finished so far, written whole (``ios_core.atomic``): the
    experiment's own tables where it can make them from the sweeps that ran, and what is left.
    A report that cannot be made yet (a recipe that needs every sweep) says so instead; it never
    ends the experiment."""
    done = [r for r in runs if _finished(folders[r.name])]
    begun = {r.name: folders[r.name] for r in runs if (folders[r.name] / "results.jsonl").exists()}
    left = [r.name for r in runs if r not in done]
    try:
        report = exp.report(ctx, begun)
    except Exception as e:  # noqa: BLE001 - a recipe that needs every sweep: its tables come at the end
        report = Report(exp.title, [("Results", f"The experiment's tables need every sweep; they are written once "
                                               f"the sweeps below have run ({type(e).__name__}: "
                                               f"{md(str(e)[:200])}).")], [], [])
    note = ""
    if left:
        note = ("**Not finished.** " + (f"{md(stopped)}. " if stopped else "")
                + f"Sweeps not finished: {', '.join(md(n) for n in left)}. "
                + (f"Continue with `{md(hint)}`: only what is left runs." if hint else ""))
    report = Report(report.title, ([("Progress", note)] if note else []) + list(report.sections), report.figures,
                    report.reduced)
    try:
        return write_report(exp, ctx, runs, folders, report, meta)
    except OSError as e:  # the previous report stays whole
        console.print(term(f"report not rewritten: {type(e).__name__}: {e}"), highlight=False)
        return Path(ctx.out) / REPORT_FILE


def dry_run(exp: Experiment, ctx: Context, gpu: str = "h200") -> list[str]:
    """``--dry-run``: the experiment's sweeps with what each runs, and, where the experiment states
    one (``Experiment.estimate(ctx, runs, gpu) -> (seconds, lines, device)``), its estimate, ending
    with the line ``estimated duration N s on <device>``. Nothing is run or written."""
    runs = selected_runs(exp, ctx)
    check_runs(exp, runs)
    out = [f"{exp.name}: {exp.title} ({ctx.form} form, devices {', '.join(ctx.devices)}); {len(runs)} sweeps, in order"
           + (" (the preflight first: " + (exp.preflight.__doc__ or "").strip().splitlines()[0] + ")"
              if getattr(exp, "preflight", None) else "") + ":"]
    for i, run in enumerate(runs, 1):
        p = run.plan
        opts = "".join(f"; {k} {v}" for k, v in (("ios options", p.ios_options), ("adapter options",
                                                                                   p.adapter_options)) if v)
        frameworks = "IOS only" if p.frameworks == [] else ", ".join(p.frameworks) if p.frameworks else \
            "every available"
        out.append(f"{i:3d}. {run.name}: {run.note}")
        out.append(f"       models {', '.join(p.models)}; batch {', '.join(map(str, p.batch_sizes))}; frameworks "
                   f"{frameworks}; schedules {', '.join(p.schedules or ['default'])}; rounds {p.rounds}{opts}")
    est = getattr(exp, "estimate", None)
    got = est(ctx, runs, gpu) if est is not None else None
    if got is None:
        out.append(f"{exp.name} states no per-step costs here; each sweep prints its own estimate as it starts")
        return out
    seconds, lines, device = got
    out.append("estimate, sweep by sweep (each figure says whether it was measured or assumed):")
    out += lines
    out.append(f"estimated duration {seconds:.0f} s on {device}")
    return out


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
    rows = [[r.name, r.note or "", _run_counts(folders[r.name]) if folders[r.name].exists() else "not started",
             f"{RUNS_DIR}/{r.name}"] for r in runs]
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
