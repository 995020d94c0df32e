"""What earlier runs on this machine measured, for the estimate (``ios_bench.planning.estimate``): their
records' latencies, rounds' fixed parts, first builds, searches and peak memory (:class:`History`)."""

from __future__ import annotations

import datetime as _dt
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from ios_bench.planning.estimate_stated import _fixed_key, series
from ios_core.measurement.protocol import calibration_calls, recorded_total
from ios_core.measurement.stats import median


@dataclass
class History:
    """What earlier runs on this machine measured: latencies per (model, batch, framework series),
    round overheads and first rounds' cold builds per worker kind and precision (:func:`_fixed_key`),
    peak memory per framework, schedule searches per (model, batch, provider, precision)."""

    latency_ms: dict[tuple[str, int, str], float] = field(default_factory=dict)
    fixed_s: dict[str, list[float]] = field(default_factory=dict)
    peak: list[tuple[str, str, int, float]] = field(default_factory=list)  # (framework, model, batch, MiB)
    gpu_peak: list[tuple[str, str, int, float]] = field(default_factory=list)  # the same on the GPU (gpu_memory)
    # a search worker's schedules: (model, batch, provider, precision) -> {schedule: optimize_seconds}
    optimize_s: dict[tuple[str, int, str, str], dict[str, float]] = field(default_factory=dict)
    # a first round's wall less the later ones' median: (model, seconds) per worker kind and precision
    first_build_s: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    fixed_by_model: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (kind, model): fixed_s's
    # the same by batch: (kind, model, batch) -> fixed_s's (what Model.size_fit learns a network's size's part from)
    fixed_by_batch: dict[tuple[str, str, int], list[float]] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    canary_ms: list[float] = field(default_factory=list)  # each learnt round's canary (its machine's speed then)
    # the rounds the learnt records measured, and how many of them were disturbed (each measured again)
    rounds_seen: int = 0
    rounds_disturbed: int = 0

    def add(self, rec: dict, run: str | None = None) -> None:
        if rec.get("status") not in ("ok", "wrong") or not isinstance(rec.get("median_ms"), (int, float)):
            return
        if rec.get("scenario"):  # a LoadGen cell's latencies are under load, its rounds LoadGen tests: not a model
            return
        if rec.get("rounds_used") == 0 and rec.get("rounds_disturbed"):
            # every round of it was disturbed: its figure was taken beside other work, not this machine's speed
            # (only its memory is kept: a co-tenant slows a cell, it does not shrink it)
            self._memory(rec)
            return
        key = (rec["model"], int(rec["batch_size"]), series(rec["framework"], rec.get("precision")))
        self.latency_ms[key] = float(rec["median_ms"])
        seen, disturbed = rec.get("rounds_measured"), rec.get("rounds_disturbed")
        if isinstance(seen, int) and isinstance(disturbed, int) and 0 <= disturbed <= seen:
            self.rounds_seen += seen
            self.rounds_disturbed += disturbed
        lat = rec["median_ms"] / 1000
        from ios_core.measurement.interference import canary_ms

        fixed_key = _fixed_key(series(rec["framework"], rec.get("precision")))
        walls = {r.get("round"): r.get("wall_seconds") or _span(r.get("started"), r.get("finished"))
                 for r in rec.get("rounds") or []}
        later = [w for k, w in walls.items() if k != 0 and isinstance(w, (int, float))]
        if isinstance(walls.get(0), (int, float)) and later:
            self.first_build_s.setdefault(fixed_key, []).append((rec["model"], max(0.0, walls[0] - median(later))))
        for r in rec.get("rounds") or [rec]:
            c = canary_ms(r.get("interference") or {})
            if c:
                self.canary_ms.append(float(c))
            if later and r.get("round") == 0:  # its cold build is learnt apart (first_build_s)
                continue
            if r.get("disturbed"):  # a round beside other work: its start and build took longer than they do
                continue
            wall = r.get("wall_seconds") or _span(r.get("started"), r.get("finished"))
            reps, warm = r.get("repeat") or rec.get("repeat"), r.get("warmup") or rec.get("warmup") or 0
            number = r.get("number") or rec.get("number") or 1
            if isinstance(wall, (int, float)) and isinstance(reps, int):
                # every call the round made: its output check, warmup, calibration (from 1 call per sample,
                # the default, to its number) and samples; what a round's record counts itself where it does
                # (its protocol: the count under "calls" is its timed calls only)
                calls = recorded_total(r)
                if calls is None:
                    calls = 1 + warm + calibration_calls(1, number) + reps * number
                fixed = wall - calls * lat
                if fixed > 0:
                    self.fixed_s.setdefault(fixed_key, []).append(fixed)
                    self.fixed_by_model.setdefault((fixed_key, rec["model"]), []).append(fixed)
                    self.fixed_by_batch.setdefault((fixed_key, rec["model"], key[1]), []).append(fixed)
        self._memory(rec)
        if isinstance(rec.get("optimize_seconds"), (int, float)) and not rec.get("schedule_reused"):
            self.optimize_s.setdefault((rec["model"], int(rec["batch_size"]), rec.get("provider") or "torch",
                                        rec.get("precision") or "fp32"), {})[rec.get("schedule") or ""] = \
                float(rec["optimize_seconds"])
        if run and run not in self.runs:
            self.runs.append(run)

    def _memory(self, rec: dict) -> None:
        if isinstance(rec.get("peak_rss_mib"), (int, float)):
            self.peak.append((rec["framework"], rec["model"], int(rec["batch_size"]), float(rec["peak_rss_mib"])))
        gpu = rec.get("gpu_memory") if isinstance(rec.get("gpu_memory"), dict) else {}
        seen = gpu.get("nvml_process_mib") or gpu.get("allocator_peak_mib")  # NVML's view holds the context too
        if isinstance(seen, (int, float)):
            self.gpu_peak.append((rec["framework"], rec["model"], int(rec["batch_size"]), float(seen)))


def _span(start, end) -> float | None:
    try:
        return (_dt.datetime.fromisoformat(end) - _dt.datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


def same_machine(env: dict | None, cpu: dict) -> bool:
    """Whether a run folder's ``env.json`` was written on a machine like this one (CPU model, usable
    cores, and instruction sets where both say: a VM's model name, "AMD EPYC", names several hosts)."""
    theirs = (env or {}).get("cpu") or {}
    isa = theirs.get("isa_flags"), cpu.get("isa_flags")
    return (bool(theirs.get("model")) and theirs.get("model") == cpu.get("model")
            and theirs.get("usable_cores") == cpu.get("usable_cores")
            and (None in isa or sorted(isa[0]) == sorted(isa[1])))


def learn(folders: list[Path], cpu: dict, threads: int | None = None, zoo: dict[str, bool] | None = None) -> History:
    """Every finished record of the run folders measured on a machine like this one. With ``threads``
    (the plan's threads per cell), a record of another thread count is not learnt: it measured another
    speed. With ``zoo`` ({name: whether the plan's model of that name is the zoo's, not a file's}), a record
    is learnt only where its model came from the same kind of source (its run's ``--models`` gave the name
    as it is: the zoo's; else a file): a zoo model and a file named like it (torchvision's alexnet
    imported, the zoo's alexnet) are two networks."""
    from ios_bench.results import read_records

    hist = History()
    for folder in folders:
        try:
            env = json.loads((folder / "env.json").read_bytes())
        except (OSError, ValueError):
            continue
        if not same_machine(env, cpu) or not (folder / "results.jsonl").is_file():
            continue
        try:
            specs = json.loads((folder / "plan.json").read_bytes()).get("models")
        except (OSError, ValueError, AttributeError):
            specs = None
        for rec in read_records(folder / "results.jsonl", on_problem=lambda m: None):
            if threads is not None and isinstance(rec.get("threads"), int) and rec["threads"] != threads:
                continue
            name = rec.get("model")
            if zoo is not None and specs is not None and name in zoo and (name in specs) != zoo[name]:
                continue
            hist.add(rec, folder.name)
    return hist


def history_macs(history: History, known: dict[str, int]) -> dict[str, int]:
    """Multiply-accumulates per image of the zoo models earlier runs measured that ``known`` lacks
    (what :meth:`Model.rate` needs to learn a framework's rate from them); a model the zoo does not
    name is left out."""
    return {name: got[0] for name in dict.fromkeys(m for m, _, _ in history.latency_ms)
            if name not in known and (got := _zoo_sizes(name)) is not None}


def history_sizes(history: History, known) -> dict[str, tuple[int, int]]:
    """(operators, parameters) of the zoo models whose rounds' fixed parts earlier runs measured that
    ``known`` (names) lacks: what :meth:`Model.size_fit` learns a round's fixed part against; a model the zoo
    does not name is left out."""
    return {name: got[1:] for name in dict.fromkeys(m for _, m, _ in history.fixed_by_batch)
            if name not in known and (got := _zoo_sizes(name)) is not None}


@functools.cache
def _zoo_sizes(name: str) -> tuple[int, int, int] | None:
    """(multiply-accumulates per image, operators, parameters) of the zoo model ``name``, None where the zoo
    does not name it (a JSON model of another run, not here)."""
    from ios_bench.planning.loading import load_graph

    try:
        g = load_graph(name)
        return int(g.macs()), int(g.num_operators()), int(g.params())
    except Exception:  # noqa: BLE001 - a JSON model of another run, not here: no figure from it
        return None


def earlier_runs(folder: Path) -> list[Path]:
    """The run folders beside ``folder`` (and ``folder`` itself), newest last."""
    parent = Path(folder).resolve().parent
    try:
        found = [p for p in parent.iterdir() if p.is_dir() and (p / "results.jsonl").is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime)

