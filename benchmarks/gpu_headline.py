"""The GPU headline in one window (issue 33): `ios-bench run --device cuda` over the IOS paper's four
networks, IOS-Sequential and IOS-Both against every GPU peer present, from a bare lent machine, in
one command of at most 9 minutes, resumable in a second window; the report in
docs/results/gpu-<kind>-<date>/.

    python benchmarks/gpu_headline.py --dry-run [--gpu h100|h200]   # the plan and its estimate (no GPU needed)
    python benchmarks/gpu_headline.py --fetch-wheels                 # here: the wheels a lent machine lacks -> .whl/
    python benchmarks/gpu_headline.py --root $OUT        # on the lent machine: one window -> $OUT/gpu-<kind>-<date>/
    python benchmarks/gpu_headline.py --root $OUT --resume-from docs/results/gpu-h100-2026-11-26  # window two

A window does, in order, each step stopping cleanly at the window's deadline (``--window``, 540 s):

1. **Wheels.** Says which packages the harness needs are missing here before anything starts, and
   installs those carried in the wheel folder (``--wheels``, default ``.whl/``: git ignores it; the
   device tool carries ignored paths named in ``carry``, 64 MiB in all) into a private folder
   (``pip --no-index --no-deps --target``), never over the machine's own packages.
2. **A brief doctor**: ``ios-bench doctor --device cuda --no-lock-clocks`` (the IOS runtime's GPU
   paths and the jax-xla path against the oracle), kept as ``doctor.txt``; ``env.txt`` and
   ``env.json`` keep the machine, versions and clock state (left alone: nothing is locked).
3. **The headline at batch 1**: the four networks, IOS-Sequential and IOS-Both with the measured
   search, replayed as CUDA graphs (``--adapter-option ios:cuda_graph=true``), against torch,
   torch-compile, torch-compile-cudagraphs, jax-xla (and TensorRT, TensorFlow, ONNX Runtime, TVM
   where present; each absent one is a skipped cell with its reason), ``--rounds 3``; randwire and
   nasnet searched with pruning parameters that fit the window (``--ios-option max_group_size=1
   --ios-option max_num_groups=3``, labelled as such) unless ``--prune off`` asks for the full
   search (give it with a carried profile database that holds it, ``--profile-db`` or the one in
   ``--resume-from``'s folder: its keys are hashes, so the script cannot tell); then the no-graph
   form of both schedules (``--adapter-option ios:cuda_graph=false``).
4. **Batches 16 and 32** (the same run folders, ``--resume --batch 1,16,32``), then **the rest of
   the zoo** (``--models all`` less the four) as time allows.

Every sweep is ``python -m ios_bench run --device cuda ... --max-time T``: it starts no worker once
its share of the window is spent, keeps what finished and exits 3; the next window continues it
with ``--resume``. The profile database (``IOS_BENCH_CACHE``) lives in the output folder, so the
stage costs of one window are reused by the next. After each step the report (``README.md``,
``headline.json``, one latency-vs-batch plot per network) and ``window.json`` are rewritten with
the crash-safe writer (``ios_core.atomic``): a window that ends early leaves the report of what
finished and resumable run folders, nothing half-written. The published V100 figures of the IOS
paper stand beside ours, labelled as not measured here (``ios_bench.experiments.published``).

``--dry-run`` prints the plan and ends with one line, ``estimated duration N s on <GPU>``: the first
window's part (wheels, doctor, the four networks at batch 1), from the stated per-step costs below
(assumptions, not measurements: no GPU has run this script yet).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # a bare machine runs the repository as it is, not an installed package

PAPER_NETS = ("inception_v3", "randwire", "nasnet", "squeezenet")
PRUNED_NETS = ("randwire", "nasnet")  # their full searches take an hour each in the paper (V100)
WINDOW_PRUNE = (1, 3)  # (r, s): the paper's smallest pruning setting (its nasnet: 137 s, 17.54 vs 15.91 ms)
FULL_SEARCH = (3, 8)  # the optimizer's defaults
GPU_PEERS = ("torch", "torch-compile", "torch-compile-cudagraphs", "jax-xla")
MORE_PEERS = ("tensorrt", "tensorrt-noaux", "onnxruntime", "tensorflow", "tensorflow-xla", "tvm-cudnn")
LATER_BATCHES = (16, 32)
ROUNDS = 3
WINDOW_S = 540.0  # one device command is at most 10 minutes; the issue asks for 9
REPORT_RESERVE_S = 25.0  # kept at the end of a window for the report
GRACE_S = 20.0  # a sweep past its --max-time (a worker still running) is stopped this long after
MIN_STEP_S = 30.0  # a step is not started with less of the window left
GPUS = {"h100": "NVIDIA H100", "h200": "NVIDIA H200"}
WHEELS = ROOT / ".whl"
CARRY_LIMIT_MIB = 64

# What the harness imports on the GPU machine: (import name, distribution, what needs it). The
# lent machines come with torch, CuPy, cuDNN and JAX (issue 33); the rest travel as wheels.
NEEDS = (
    ("numpy", "numpy", "everything"), ("torch", "torch", "the oracle, torch peers"),
    ("click", "click", "the CLI"), ("rich", "rich", "the CLI"), ("pandas", "pandas", "reports"),
    ("matplotlib", "matplotlib", "plots"), ("scipy", "scipy", "statistics"), ("psutil", "psutil", "workers"),
    ("tqdm", "tqdm", "progress"), ("platformdirs", "platformdirs", "the profile database"),
    ("cupy", "cupy-cuda13x", "the IOS CUDA runtime"), ("cudnn", "nvidia-cudnn-frontend", "IOS convolutions"),
    ("pynvml", "nvidia-ml-py", "utilization, memory, clocks"), ("jax", "jax", "the jax-xla peer"),
)
# What --fetch-wheels downloads (the H200 of 2026-11-26 lacked the first two; pinned as it ran there)
FETCH = ("nvidia-cudnn-frontend==1.28.0", "platformdirs", "nvidia-ml-py")
TARGET_PYTHON = "3.12"  # the lent machines' Python (3.12.3 on the H200)

# ---- the stated cost model of the dry run's estimate (assumptions, not measurements) -----------------
# Operators per network (ios_core.models), and the stages a search queries, counted with the
# synthetic cost model's search (ios_core.optimize, strategy both) on 2026-11-26: the measured
# search asks for the same stages.
OPERATORS = {"inception_v3": 120, "randwire": 121, "nasnet": 371, "squeezenet": 38}
STAGES = {("inception_v3", 3, 8): 5362, ("inception_v3", 1, 3): 954, ("squeezenet", 3, 8): 96,
          ("squeezenet", 1, 3): 54, ("nasnet", 3, 8): 322930, ("nasnet", 1, 3): 9157,
          ("randwire", 3, 8): 706297, ("randwire", 1, 3): 4831}
ASSUMED = {
    "wheels_s": (15.0, "pip --no-index --no-deps --target of a few carried wheels"),
    "preflight_s": (10.0, "importing torch, CuPy and JAX once to check them"),
    "doctor_s": (60.0, "doctor's probe, the IOS paths and the jax-xla path on the coverage graph"),
    "probe_s": (12.0, "a sweep's probe worker (imports every framework once)"),
    "reference_s": (5.0, "one oracle output per network and batch (a CPU worker)"),
    "worker_s": (4.0, "a worker's start: Python, torch, CuPy/JAX imports, weights"),
    "measure_s": (0.5, "warmup 3 + 10 samples of at least 10 ms, and the two output checks"),
    "search_ms_per_stage": (3.7, "issue 32's target rate: inception_v3's 5,362 stages in 20 s"),
    "search_start_s": (5.0, "an optimize worker's start and the graph's weights"),
}
# build seconds per round: (first round: cold caches, later rounds: warm), each base + per operator
BUILD = {
    "ios": ((1.0, 0.02), (1.0, 0.02)),  # cuDNN plans timed per convolution geometry, every round
    "torch": ((0.5, 0.002), (0.5, 0.002)),
    "torch-compile": ((10.0, 0.25), (3.0, 0.05)),  # inductor + Triton; its caches persist on disk
    "torch-compile-cudagraphs": ((11.0, 0.25), (4.0, 0.05)),
    "jax-xla": ((3.0, 0.05), (1.0, 0.005)),  # XLA; the persistent compilation cache for later rounds
}


@dataclass
class Sweep:
    """One run folder of the window: a network set under one IOS search setting and one IOS form."""

    name: str
    models: tuple[str, ...]
    graph: bool  # IOS cells replay a CUDA graph
    prune: tuple[int, int] | None  # (r, s), None: the full search
    frameworks: tuple[str, ...]
    batches: tuple[int, ...] = (1,)
    rounds: int | None = None  # None: the plan's

    def label(self) -> str:
        form = "CUDA graph" if self.graph else "no graph"
        search = ("full search (r=3, s=8)" if self.prune is None
                  else f"pruned search r={self.prune[0]}, s={self.prune[1]}")
        rounds = f", {self.rounds} round(s) first" if self.rounds else ""
        return f"{', '.join(self.models)}: IOS {form}, {search}{rounds}"


@dataclass
class Step:
    name: str
    what: str
    sweep: Sweep | None = None
    first_window: bool = True


@dataclass
class Plan:
    gpu: str
    prune: tuple[int, int] | None
    rounds: int = ROUNDS
    steps: list[Step] = field(default_factory=list)


def plan(gpu: str = "h100", prune: tuple[int, int] | None = WINDOW_PRUNE, rounds: int = ROUNDS,
         rest: tuple[str, ...] | None = None, first_rounds: int = 1) -> Plan:
    """The window's steps in order: wheels, doctor, the four networks at batch 1 (graph-replayed
    with ``first_rounds`` rounds each first, so that one window sees all four; then up to
    ``rounds``; then the no-graph form), then batches 16 and 32, then the rest of the zoo. The
    steps up to the no-graph sweeps at batch 1 are "the first window's part" of the issue."""
    peers = GPU_PEERS + MORE_PEERS
    full = tuple(m for m in PAPER_NETS if prune is None or m not in PRUNED_NETS)
    pruned = tuple(m for m in PAPER_NETS if m not in full)
    tag = "" if prune is None else f"-r{prune[0]}s{prune[1]}"
    sweeps = [Sweep("graph-full", full, True, None, peers)]
    if pruned:
        sweeps.append(Sweep(f"graph{tag}", pruned, True, prune, peers))
    sweeps.append(Sweep("nograph-full", full, False, None, ()))
    if pruned:
        sweeps.append(Sweep(f"nograph{tag}", pruned, False, prune, ()))
    p = Plan(gpu, prune, rounds)
    p.steps = [Step("wheels", "say which packages are missing; install the carried wheels"),
               Step("doctor", "ios-bench doctor --device cuda --no-lock-clocks (IOS paths, jax-xla), env")]
    graphs = [s for s in sweeps if s.graph]
    if 0 < first_rounds < rounds:
        p.steps += [Step(f"b1-{s.name}-first", f"batch 1: {s.label()}, {first_rounds} round(s) first",
                         Sweep(s.name, s.models, True, s.prune, s.frameworks, (1,), first_rounds)) for s in graphs]
    p.steps += [Step(f"b1-{s.name}", f"batch 1: {s.label()}", s) for s in sweeps]
    for s in sweeps:
        later = Sweep(s.name, s.models, s.graph, s.prune, s.frameworks, (1, *LATER_BATCHES))
        p.steps.append(Step(f"b16-32-{s.name}", f"batches 16, 32: {s.label()}", later, False))
    if rest is None:
        rest = tuple(m for m in _zoo() if m not in PAPER_NETS)
    if rest:
        sw = Sweep("rest", rest, True, None, peers, (1, *LATER_BATCHES))
        p.steps.append(Step("rest", f"--models all, the rest of the zoo: {', '.join(rest)} (CUDA graph, full search)",
                            sw, False))
    return p


def _zoo() -> list[str]:
    from ios_core import models

    return models.names()


def run_command(sweep: Sweep, folder: Path, rounds: int, max_time: float, resume: bool) -> list[str]:
    """``ios-bench run --device cuda`` for one sweep (``--resume`` continues its folder)."""
    cmd = [sys.executable, "-m", "ios_bench", "run", "--device", "cuda", "--models", ",".join(sweep.models),
           "--batch", ",".join(map(str, sweep.batches)),
           "--frameworks", ",".join(sweep.frameworks) if sweep.frameworks else "none",
           "--schedules", "sequential,both", "--rounds", str(sweep.rounds or rounds), "--sample-utilization",
           "--adapter-option", f"ios:cuda_graph={'true' if sweep.graph else 'false'}",
           "--timeout", "300", "--optimize-timeout", "300", "--no-progress", "--no-report",
           "--out", str(folder), "--max-time", str(max(1, int(max_time)))]
    if sweep.prune is not None:
        cmd += ["--ios-option", f"max_group_size={sweep.prune[0]}", "--ios-option", f"max_num_groups={sweep.prune[1]}"]
    if resume:
        cmd.append("--resume")
    return cmd


# ---- the estimate ---------------------------------------------------------------------------------
def _build_s(framework: str, model: str, first: bool) -> float:
    base, per = BUILD["ios" if framework.startswith("ios") else framework][0 if first else 1]
    return base + per * OPERATORS.get(model, 150)


def estimate(p: Plan, first_window_only: bool = True) -> tuple[float, list[tuple[str, float, str]]]:
    """Seconds for the plan's steps (by default the first window's part: wheels, doctor and the four
    networks at batch 1), with a line per step saying what it counts. A run folder computes each
    reference output and searches each schedule once; a resumed sweep runs only the rounds its
    cells lack. Every figure comes from :data:`ASSUMED`, :data:`BUILD` and :data:`STAGES`."""
    a = {k: v[0] for k, v in ASSUMED.items()}
    lines = []
    prepared: set = set()  # (folder, model, batch): reference output and searches done
    done: dict = {}  # (folder, model, batch, cell) -> rounds run
    for step in p.steps:
        if first_window_only and not step.first_window:
            continue
        if step.sweep is None:
            s = a["wheels_s"] + a["preflight_s"] if step.name == "wheels" else a["doctor_s"]
            lines.append((step.name, s, ASSUMED["wheels_s" if step.name == "wheels" else "doctor_s"][1]))
            continue
        sw = step.sweep
        want = sw.rounds or p.rounds
        s, searches, rounds_run = a["probe_s"], 0, 0
        cells = ["ios-sequential", "ios-both"] + [f for f in sw.frameworks if f in BUILD]
        for m in sw.models:
            for b in sw.batches:
                if (sw.name, m, b) not in prepared:
                    prepared.add((sw.name, m, b))
                    r, s_ = sw.prune or FULL_SEARCH
                    s += a["reference_s"] + a["search_start_s"] + STAGES.get((m, r, s_), 5000) * \
                        a["search_ms_per_stage"] / 1000.0
                    searches += 1
                for f in cells:
                    have = done.get((sw.name, m, b, f), 0)
                    for rnd in range(have, want):
                        s += a["worker_s"] + a["measure_s"] + _build_s(f, m, rnd == 0)
                        rounds_run += 1
                    done[(sw.name, m, b, f)] = max(have, want)
        lines.append((step.name, s, f"{len(sw.models)} network(s) x batch {','.join(map(str, sw.batches))}: "
                                    f"{searches} search(es), {rounds_run} cell rounds (up to {want} per cell)"))
    return sum(s for _, s, _ in lines), lines


# ---- wheels and the machine -----------------------------------------------------------------------
def missing_packages(needs=NEEDS) -> list[tuple[str, str, str]]:
    """The needed packages this Python cannot import (checked without importing them)."""
    out = []
    for module, dist, why in needs:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append((module, dist, why))
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def wheels_for(dist: str, folder: Path) -> list[Path]:
    """The wheels in ``folder`` of one distribution (by the wheel file name's first part)."""
    if not folder.is_dir():
        return []
    return sorted(w for w in folder.glob("*.whl") if _norm(w.name.split("-")[0]) == _norm(dist))


def wheel_report(folder: Path, needs=NEEDS) -> tuple[list[str], list[Path], list[str]]:
    """(lines saying what is missing and whether it is carried, the wheels to install, the
    distributions missing and not carried)."""
    lines, install, absent = [], [], []
    for module, dist, why in missing_packages(needs):
        found = wheels_for(dist, folder)
        if found:
            install.append(found[-1])  # one wheel per distribution (the last by name, when several)
            lines.append(f"missing: {dist} (import {module}; {why}): carried as {found[-1].name}")
        else:
            absent.append(dist)
            lines.append(f"missing: {dist} (import {module}; {why}): NOT carried in {folder}")
    return lines, install, absent


def fetch_wheels(folder: Path) -> int:
    """Download :data:`FETCH` for the lent machines' Python and platform into ``folder`` (here, with pip)."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--python-version",
           TARGET_PYTHON, "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
           "--platform", "manylinux2014_x86_64", "-d", str(folder), *FETCH]
    print(" ".join(cmd))
    rc = subprocess.call(cmd)
    size = sum(w.stat().st_size for w in folder.glob("*.whl")) / 2**20
    print(f"{folder}: {size:.1f} MiB of wheels (the device tool carries at most {CARRY_LIMIT_MIB} MiB)")
    return rc


def gpu_kind_of(name: str) -> str:
    """``h100`` from "NVIDIA H100 80GB HBM3", ``h200`` from "NVIDIA H200", else a safe short name."""
    m = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", name.upper())
    return (m.group(1) if m else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu").lower()


# ---- the window -------------------------------------------------------------------------------------
class Window:
    """One window's run: its deadline, its output folder, the journal (``window.json``)."""

    def __init__(self, out: Path, seconds: float, env: dict, echo=print):
        self.out, self.env, self.echo = out, env, echo
        self.t0 = time.monotonic()
        self.deadline = self.t0 + seconds
        self.journal_path = out / "window.json"
        self.journal = _read_json(self.journal_path) or {"windows": []}
        self.this = {"started": _now(), "window_s": seconds, "steps": []}
        self.journal["windows"].append(self.this)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        from ios_core.atomic import atomic_write_json

        self.this["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        atomic_write_json(self.journal_path, self.journal)

    def step(self, name: str, cmd: list[str], hard_s: float, log: Path | None = None, note: str = "") -> dict:
        """Run ``cmd`` (its own process group) until it ends or ``hard_s`` pass; then it is stopped
        (SIGTERM, then SIGKILL). Its output goes to ``log``; the journal records the step."""
        entry = {"step": name, "command": cmd, "started": _now(), "note": note}
        self.this["steps"].append(entry)
        self.save()
        t = time.monotonic()
        log = log or self.out / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as f:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=max(1.0, hard_s))
                entry["stopped"] = False
            except subprocess.TimeoutExpired:
                entry["stopped"] = True  # over the window: stopped, its folder is resumable
                _stop(proc)
                rc = proc.returncode
            except BaseException:  # this script is stopped (SIGTERM, ^C): its step with it
                entry["stopped"] = True
                _stop(proc)
                entry.update(rc=proc.returncode, seconds=round(time.monotonic() - t, 1), finished=_now())
                self.save()
                raise
        entry.update(rc=rc, seconds=round(time.monotonic() - t, 1), finished=_now())
        self.save()
        return entry


def _stop(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _capture(cmd: list[str], env: dict, timeout: float = 60) -> str:
    try:
        res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        return (res.stdout + res.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"({' '.join(cmd[:3])}: {type(e).__name__})"


def install_wheels(wheels: list[Path], site: Path, echo) -> tuple[bool, str]:
    if not wheels:
        return True, "nothing to install"
    site.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site),
           *map(str, wheels)]
    echo(" ".join(cmd))
    res = subprocess.run(cmd, capture_output=True, text=True)
    return res.returncode == 0, (res.stdout + res.stderr).strip()[-500:]


def machine_facts(env: dict) -> dict:
    """GPU name, memory, driver, clocks (NVML: current, application, max; left alone), versions."""
    code = r"""
import json, os, platform, sys
from importlib import metadata
out = {"python": sys.version.split()[0], "cpus": len(os.sched_getaffinity(0)), "platform": platform.platform()}
for d in ("torch", "cupy-cuda13x", "cupy-cuda12x", "nvidia-cudnn-frontend", "nvidia-cudnn-cu13",
          "nvidia-cudnn-cu12", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "numpy",
          "nvidia-ml-py", "onnxruntime", "tensorrt"):
    try:
        out.setdefault("versions", {})[d] = metadata.version(d)
    except Exception:
        pass
try:
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    name = pynvml.nvmlDeviceGetName(h)
    out["gpu"] = name.decode() if isinstance(name, bytes) else name
    out["driver"] = pynvml.nvmlSystemGetDriverVersion()
    out["memory_mib"] = pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20
    sm = pynvml.NVML_CLOCK_SM
    out["sm_clock_mhz"] = {"current": pynvml.nvmlDeviceGetClockInfo(h, sm),
                           "application": pynvml.nvmlDeviceGetApplicationsClock(h, sm),
                           "max": pynvml.nvmlDeviceGetMaxClockInfo(h, sm)}
    out["other_processes"] = len(pynvml.nvmlDeviceGetComputeRunningProcesses(h) or [])
except Exception as e:
    out["nvml"] = f"{type(e).__name__}: {e}"
try:
    import torch
    out["torch_cuda"] = torch.version.cuda
    if "gpu" not in out and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
except Exception as e:
    out["torch_error"] = str(e)[:200]
print(json.dumps(out))
"""
    text = _capture([sys.executable, "-c", code], env, timeout=120)
    try:
        facts = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        facts = {"error": text[-300:]}
    facts["clocks"] = "left alone (not locked, not reset: --no-lock-clocks everywhere)"
    facts["commit"] = _capture(["git", "rev-parse", "--short", "HEAD"], env, 10) or None
    return facts


def window_env(out: Path, site: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["IOS_BENCH_CACHE"] = str(out / "profiles.sqlite")  # the profile database travels with the results
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(site.parent / "jax-cache"))  # builds only, never timed
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return env


def carry_in(previous: Path, out: Path, echo) -> None:
    """A previous window's output (run folders, profile database, journal) copied into ``out``."""
    for name in ("runs", "profiles.sqlite", "profiles.sqlite-wal", "window.json"):
        src, dst = previous / name, out / name
        if not src.exists() or dst.exists():
            continue
        echo(f"carried in: {src}")
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            out.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def run_window(args) -> int:
    echo = print
    wheels = Path(args.wheels)
    lines, install, absent = wheel_report(wheels)
    echo(f"packages missing before starting: {len(lines) or 'none'}")
    for line in lines:
        echo(f"  {line}")
    site = Path(args.site)
    ok, msg = install_wheels(install, site, echo)
    if not ok:
        echo(f"  wheels did not install: {msg}")
    out = Path(args.out) if args.out else None
    env0 = window_env(out or ROOT, site)
    facts = machine_facts(env0)
    if not facts.get("gpu"):
        why = facts.get("nvml") or facts.get("torch_error") or "NVML and torch see none"
        print(f"error: no NVIDIA GPU here ({why})", file=sys.stderr)
        return 2
    if out is None:
        day = datetime.date.today().isoformat()
        out = Path(args.root) / f"gpu-{gpu_kind_of(facts['gpu'])}-{day}"
    out.mkdir(parents=True, exist_ok=True)
    if args.resume_from:
        carry_in(Path(args.resume_from), out, echo)
    if args.profile_db and not (out / "profiles.sqlite").exists():
        shutil.copy2(args.profile_db, out / "profiles.sqlite")
    env = window_env(out, site)
    win = Window(out, args.window, env, echo)
    journal = win.journal
    carried_db = (out / "profiles.sqlite").exists()
    if "prune" not in journal:  # decided once, kept by every later window (the run folders' names follow)
        # auto: pruned. A carried database's content is not proof that it holds the full search (its
        # keys are hashes), so the full search is asked for, not guessed: --prune off
        journal["prune"] = (None if args.prune == "off"
                            else list(WINDOW_PRUNE if args.prune == "auto" else _pair(args.prune)))
    prune = tuple(journal["prune"]) if journal["prune"] else None
    win.this.update(machine=facts, missing=lines, not_carried=absent, profile_db_carried=carried_db)
    win.save()
    _write_text(out / "env.txt", json.dumps(facts, indent=1) + "\n")
    p = plan(gpu_kind_of(facts["gpu"]), prune, args.rounds, first_rounds=args.first_rounds)
    finished = done_steps(journal)
    for step in p.steps:
        left = win.left() - REPORT_RESERVE_S
        if step.name in finished:
            continue
        if step.name == "wheels":
            win.this["steps"].append({"step": "wheels", "installed": [w.name for w in install], "ok": ok,
                                      "not_carried": absent})
            win.save()
            continue
        if left < MIN_STEP_S:
            win.this["steps"].append({"step": step.name,
                                      "skipped": "the window is spent: continue it with --resume-from"})
            win.save()
            continue
        if step.name == "doctor":
            entry = win.step("doctor", doctor_command(), min(left, 150))
            log = out / "logs" / "doctor.log"
            if log.is_file():  # whole, once it ended (the log itself is appended as it runs)
                _write_text(out / "doctor.txt", log.read_text(errors="replace"))
            journal["doctor_done"] = entry["rc"] in (0, 1)  # 1: a path failed (it says which)
            win.save()
            continue
        folder = out / "runs" / step.sweep.name
        resume = (folder / "plan.json").is_file()
        cmd = run_command(step.sweep, folder, p.rounds, max_time=left - GRACE_S, resume=resume)
        win.step(step.name, cmd, left, note=step.what)
        _report_safely(win, p, quiet=True)
    _report_safely(win, p, quiet=False)
    win.save()
    h = _read_json(out / "headline.json") or {}
    print_goals([tuple(g) for g in h.get("goals") or []], echo)
    return 0


def doctor_command() -> list[str]:
    """The window's brief doctor: availability of every framework on cuda, then the IOS runtime's
    GPU paths, jax-xla and torch on the coverage graph against the oracle; the clocks left alone."""
    return [sys.executable, "-m", "ios_bench", "doctor", "--device", "cuda", "--no-lock-clocks", "--timeout", "90",
            "--frameworks", "ios,jax-xla,torch"]


def _report_safely(win: Window, p: Plan, quiet: bool) -> None:
    """The report after a step; a report that cannot be written is a note in the journal (the files
    of the previous report stay whole), never the end of the window."""
    try:
        write_report(win.out, p, echo=(lambda s: None) if quiet else win.echo)
    except Exception as e:  # noqa: BLE001
        win.this.setdefault("report_errors", []).append(f"{type(e).__name__}: {str(e)[:200]}")
        win.save()
        win.echo(f"report not written: {type(e).__name__}: {e}")


def _pair(text: str) -> tuple[int, int]:
    r, _, s = text.partition(",")
    return int(r), int(s)


def _write_text(path: Path, text: str) -> None:
    from ios_core.atomic import atomic_write_text

    atomic_write_text(path, text)


# ---- the report ---------------------------------------------------------------------------------
def _records(out: Path) -> list[dict]:
    from ios_bench.results import read_records

    recs = []
    for folder in sorted((out / "runs").glob("*")):
        if (folder / "results.jsonl").is_file():
            for r in read_records(folder / "results.jsonl", on_problem=lambda m: None):
                recs.append({**r, "_run": folder.name})
    return recs


def _label(r: dict) -> str:
    """The headline's name for a cell: IOS-Sequential/IOS-Both with the form, or the adapter."""
    if r.get("schedule"):
        name = r.get("label") or {"sequential": "IOS-Sequential", "both": "IOS-Both"}.get(r["schedule"],
                                                                                         f"IOS-{r['schedule']}")
        return name + ("" if r["_run"].startswith("graph") or r["_run"] == "rest" else " (no graph)")
    return r["framework"]


def headline(recs: list[dict]) -> dict:
    """Per network and batch: IOS-Both against IOS-Sequential (both graph-replayed), against the
    best GPU peer (named), the no-graph forms, GPU utilization, and the published V100 ratios."""
    from ios_bench.experiments import published as pub

    rows: dict = {}
    for r in recs:
        key = (r["model"], int(r["batch_size"]))
        row = rows.setdefault(key, {"model": key[0], "batch": key[1], "cells": {}})
        row["cells"][_label(r)] = r
    out = []
    for (model, batch), row in sorted(rows.items(), key=lambda kv: (PAPER_NETS.index(kv[0][0])
                                                                  if kv[0][0] in PAPER_NETS else 99, kv[0])):
        cells = row["cells"]
        ms = _ms_of(cells)

        seq, both = ms("IOS-Sequential"), ms("IOS-Both")
        peers = {lab: c["median_ms"] for lab, c in cells.items()
                 if not c.get("schedule") and c.get("status") == "ok" and c.get("median_ms")}
        best = min(peers, key=peers.get) if peers else None
        search = cells.get("IOS-Both", {}).get("_run", "")
        entry = {"model": model, "batch": batch, "ios_sequential_ms": seq, "ios_both_ms": both,
                 "schedule_gain": seq / both if seq and both else None,
                 "best_peer": best, "best_peer_ms": peers.get(best) if best else None,
                 "vs_best_peer": peers[best] / both if best and both else None,
                 "ios_sequential_nograph_ms": ms("IOS-Sequential (no graph)"),
                 "ios_both_nograph_ms": ms("IOS-Both (no graph)"),
                 "search": "pruned " + search.split("-", 1)[1] if "-r" in search else ("full" if search else None),
                 "utilization": {lab: (cells[lab].get("utilization") or {}).get("mean_sm_pct")
                                 for lab in ("IOS-Sequential", "IOS-Both", "IOS-Sequential (no graph)",
                                             "IOS-Both (no graph)") if lab in cells},
                 "peers": peers,
                 "unstable": sorted(lab for lab, c in cells.items() if c.get("status") == "ok" and c.get("unstable")),
                 "not_run": {lab: f"{c.get('status')}: {c.get('reason') or ''}".strip() for lab, c in cells.items()
                             if c.get("status") != "ok"}}
        pubs = pub.SCHEDULES_MS.get(model)
        if batch == 1 and pubs:
            entry["published_schedule_gain"] = pubs["Sequential"] / pubs["IOS-Both"]
            fw = {k: v for k, v in pub.FRAMEWORKS_MS.get(model, {}).items() if k != "IOS"}
            if fw:
                pbest = min(fw, key=fw.get)
                entry["published_best_peer"] = pbest
                entry["published_vs_best_peer"] = fw[pbest] / pub.FRAMEWORKS_MS[model]["IOS"]
        elif model == "inception_v3" and batch in pub.BATCHSIZE_MS["IOS-Both"]:
            b = pub.BATCHSIZE_MS
            entry["published_schedule_gain"] = b["Sequential"][batch] / b["IOS-Both"][batch]
            entry["published_best_peer"] = "TensorRT"
            entry["published_vs_best_peer"] = b["TensorRT"][batch] / b["IOS-Both"][batch]
        out.append(entry)
    return {"rows": out, "published_source": f"{pub.SOURCE}; {pub.DEVICE}: published, not measured here"}


def _ms_of(cells: dict):
    def ms(label):
        c = cells.get(label)
        return c.get("median_ms") if c and c.get("status") == "ok" else None
    return ms


# The goal table: (goal, today, target); the third column is what a window measured.
GOALS = (
    ("GPU frameworks in the headline", "3 (IOS, torch, torch-compile)",
     "5 or more: + torch-compile-cudagraphs, jax-xla"),
    ("the 4 nets at batch 1, every framework, rounds", "not possible (search)",
     "inside one 9-minute command from a bare machine; 16 and 32 in a second"),
    ("IOS-Both (graph) vs the best GPU peer, batch 1", "inception_v3 2.11 vs torch 4.71 ms (hand run)",
     "at least 1.2x on each of the 4 nets, in the same run"),
    ("--models all --batch 1,16,32 on the GPU", "never run", "within two windows, resumed"),
)


def print_goals(measured: list[tuple[str, str, str]] | None, echo=print) -> None:
    """The goal table: today and the target (issue 33), and what was measured (or "not measured")."""
    got = {g: v for g, _, v in measured or []}
    echo("goals (issue 33):")
    for goal, today, target in GOALS:
        echo(f"  {goal}: today {today}; target {target}; measured: {got.get(goal, 'not measured (no GPU run)')}")


def _f(v, fmt="{:.3f}") -> str:
    return "-" if v is None else fmt.format(v)


def goals(h: dict, journal: dict) -> list[tuple[str, str, str]]:
    """The issue's goal table with what this folder shows (measured, or not yet)."""
    rows = h["rows"]
    frameworks = sorted({lab for r in rows for lab in r["peers"]} | ({"IOS"} if any(r["ios_both_ms"] for r in rows)
                                                                      else set()))
    b1 = {r["model"]: r for r in rows if r["batch"] == 1 and r["model"] in PAPER_NETS}
    windows = journal.get("windows") or []
    first = windows[0] if windows else {}
    b1_done = len(b1) == 4 and all(r["ios_both_ms"] and r["ios_sequential_ms"] for r in b1.values())
    vs = {m: r["vs_best_peer"] for m, r in b1.items()}
    return [
        ("GPU frameworks in the headline", "5 or more",
         f"{len(frameworks)} measured: {', '.join(frameworks) or 'none'}"),
        ("the 4 nets at batch 1, every framework, rounds", "inside one 9-minute window",
         ("done" if b1_done else "not yet") + (f" (first window {first.get('elapsed_s')} s)" if first else "")),
        ("IOS-Both (graph) vs the best GPU peer, batch 1", "at least 1.2x on each of the 4 nets",
         ", ".join(f"{m} {_f(v, '{:.2f}x')}" for m, v in vs.items()) or "not measured yet"),
        ("--models all --batch 1,16,32 on the GPU", "within two windows", f"{len(windows)} window(s) so far"),
    ]


def write_report(out: Path, p: Plan, echo=print) -> dict:
    """README.md, headline.json and the plots from the run folders' records: each file written
    whole (ios_core.atomic) or not at all."""
    from ios_core.atomic import atomic_write_json

    recs = _records(out)
    h = headline(recs)
    journal = _read_json(out / "window.json") or {}
    h["goals"] = goals(h, journal)
    plots = _plots(out, h)
    text = _markdown(out, h, recs, journal, plots, p)  # everything made before anything is replaced
    atomic_write_json(out / "headline.json", h)
    _write_text(out / "README.md", text)
    echo(f"report: {out / 'README.md'}")
    return h


def _plots(out: Path, h: dict) -> list[str]:
    import io

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # no matplotlib there: the report without its plots
        return []

    from ios_core.atomic import atomic_write_bytes

    names = []
    for model in dict.fromkeys(r["model"] for r in h["rows"]):
        rows = sorted((r for r in h["rows"] if r["model"] == model), key=lambda r: r["batch"])
        series: dict = {}
        for r in rows:
            for lab, v in [("IOS-Sequential", r["ios_sequential_ms"]), ("IOS-Both", r["ios_both_ms"]),
                           ("IOS-Sequential (no graph)", r["ios_sequential_nograph_ms"]),
                           ("IOS-Both (no graph)", r["ios_both_nograph_ms"]), *r["peers"].items()]:
                if v is not None:
                    series.setdefault(lab, []).append((r["batch"], v))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for lab, pts in series.items():
            ax.plot([b for b, _ in pts], [v for _, v in pts], marker="o", label=lab,
                    linestyle="-" if lab.startswith("IOS") else "--")
        ax.set_xlabel("batch size")
        ax.set_ylabel("latency (ms, median over rounds)")
        ax.set_title(f"{model}: latency against batch size")
        ax.legend(fontsize=7)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        name = f"latency_vs_batch_{model}.png"
        atomic_write_bytes(out / name, buf.getvalue())
        names.append(name)
    return names


def _markdown(out: Path, h: dict, recs: list[dict], journal: dict, plots: list[str], p: Plan) -> str:
    windows = journal.get("windows") or []
    facts = next((w.get("machine") for w in reversed(windows) if w.get("machine")), {}) or {}
    lines = [f"# The GPU headline: {facts.get('gpu', 'GPU')} ({out.name})", ""]
    lines += ["Made by `benchmarks/gpu_headline.py` (issue 33): `ios-bench run --device cuda` over the IOS paper's "
              "four networks, IOS-Sequential and IOS-Both against every GPU peer present, fp32, the GPU's clocks left "
              "alone. Figures are medians over rounds (each round a fresh worker process), measured here unless "
              "labelled *published (V100, not measured here)*.", ""]
    lines += ["## Machine", "", "| | |", "|---|---|"]
    for k in ("gpu", "memory_mib", "driver", "torch_cuda", "cpus", "python", "platform", "clocks", "sm_clock_mhz",
              "other_processes", "commit"):
        if facts.get(k) is not None:
            lines.append(f"| {k} | {facts[k]} |")
    for k, v in (facts.get("versions") or {}).items():
        lines.append(f"| {k} | {v} |")
    lines += ["", "## Windows", ""]
    for i, w in enumerate(windows, 1):
        steps = ", ".join(f"{s['step']}" + (" (stopped at the window's end)" if s.get("stopped") else "")
                          + (f" (skipped: {s['skipped']})" if s.get("skipped") else "")
                          + (f" rc {s['rc']}" if s.get("rc") not in (None, 0) else "") for s in w.get("steps", []))
        lines.append(f"{i}. started {w.get('started')}, {w.get('elapsed_s', '?')} s of {w.get('window_s')} s: {steps}")
        if w.get("missing"):
            lines += [f"   - {m}" for m in w["missing"]]
    prune = journal.get("prune")
    lines += ["", "Search: inception_v3 and squeezenet with the full measured search (r=3, s=8); "
              + (f"randwire and nasnet **pruned to r={prune[0]}, s={prune[1]}** to fit the window (the paper's "
                 "pruning experiment; their full searches took 4,407 s and 3,653 s on the V100)."
                 if prune else "randwire and nasnet with the full search too (a carried profile database)."), ""]
    lines += ["## Headline", "",
              "IOS cells replay a CUDA graph; the schedule's gain is IOS-Sequential / IOS-Both, the gain over the "
              "best GPU peer is that peer's latency / IOS-Both's (the peer named; torch-compile-cudagraphs is the "
              "peer that replays graphs too). Published: the IOS README's V100 figures (batch 1: its schedules and "
              "frameworks tables, best of TensorFlow, TensorFlow-XLA, TASO, TVM-cuDNN, TensorRT; batches 16 and 32: "
              "its batch-size table, inception_v3 only, TensorRT), **published (V100, not measured here)**.", "",
              "| network | batch | search | IOS-Sequential ms | IOS-Both ms | gain | published gain (V100) | "
              "best GPU peer | its ms | IOS-Both vs it | published vs best peer (V100) |",
              "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in h["rows"]:
        star = {lab: "*" for lab in r.get("unstable") or []}
        lines.append(f"| {r['model']} | {r['batch']} | {r['search'] or '-'} | "
                     f"{_f(r['ios_sequential_ms'])}{star.get('IOS-Sequential', '')} | "
                     f"{_f(r['ios_both_ms'])}{star.get('IOS-Both', '')} | {_f(r['schedule_gain'], '{:.2f}x')} | "
                     f"{_f(r.get('published_schedule_gain'), '{:.2f}x')} | {r['best_peer'] or '-'} | "
                     f"{_f(r['best_peer_ms'])}{star.get(r['best_peer'], '')} | {_f(r['vs_best_peer'], '{:.2f}x')} | "
                     + (f"{r['published_vs_best_peer']:.2f}x ({r['published_best_peer']})"
                        if r.get("published_vs_best_peer") else "-") + " |")
    lines += ["", "\\* the harness flags this figure unstable (the reason is in the table of every cell below: too few "
              "rounds, rounds disturbed by other work, or a spread between rounds too wide to trust).",
              "", "### Without CUDA graphs, and GPU utilization", "",
              "The no-graph form of both schedules (`--adapter-option ios:cuda_graph=false`, its own search), and the "
              "mean SM utilization NVML reported during each IOS cell's timed loop (`--sample-utilization`).", "",
              "| network | batch | IOS-Sequential (no graph) ms | IOS-Both (no graph) ms | SM % IOS-Sequential | "
              "SM % IOS-Both | SM % no graph (Seq / Both) |", "|---|---:|---:|---:|---:|---:|---|"]
    for r in h["rows"]:
        u = r["utilization"]
        lines.append(f"| {r['model']} | {r['batch']} | {_f(r['ios_sequential_nograph_ms'])} | "
                     f"{_f(r['ios_both_nograph_ms'])} | {_f(u.get('IOS-Sequential'), '{:.0f}')} | "
                     f"{_f(u.get('IOS-Both'), '{:.0f}')} | {_f(u.get('IOS-Sequential (no graph)'), '{:.0f}')} / "
                     f"{_f(u.get('IOS-Both (no graph)'), '{:.0f}')} |")
    if plots:
        lines += ["", "### Latency against batch size", ""] + [f"![{n}]({n})" for n in plots]
    lines += ["", "## Goals (issue 33)", "", "| goal | target | here |", "|---|---|---|"]
    lines += [f"| {g} | {t} | {v} |" for g, t, v in h["goals"]]
    lines += ["", "## Every cell", "", "| run | network | batch | framework | status | median ms | rounds | "
              "check | GPU memory (allocator / NVML, MiB) | reason |", "|---|---|---:|---|---|---:|---:|---|---|---|"]
    for r in sorted(recs, key=lambda r: (r["_run"], r["model"], r["batch_size"], r["framework"])):
        mem = r.get("gpu_memory") or {}
        check = r.get("check") or {}
        lines.append(f"| {r['_run']} | {r['model']} | {r['batch_size']} | {_label(r)} | {r.get('status')} | "
                     f"{_f(r.get('median_ms'))} | {r.get('rounds_used', '-')} | "
                     f"{'ok' if check.get('passed') else ('-' if not check else 'WRONG')} | "
                     f"{_f(mem.get('allocator_peak_mib'), '{:.0f}')} / {_f(mem.get('nvml_process_mib'), '{:.0f}')} | "
                     f"{(r.get('reason') or r.get('unstable') or '').replace('|', '/')[:160]} |")
    finished = done_steps(journal)
    left = [s.name for s in p.steps if s.sweep is not None and s.name not in finished]
    lines += ["", "## What is left", "",
              ("Nothing: every step finished." if not left else
               f"Steps not finished: {', '.join(left)}. The next window continues them: "
               f"`python benchmarks/gpu_headline.py --root $OUT --resume-from docs/results/{out.name}` "
               "(the run folders and the profile database are in this folder)."), ""]
    return "\n".join(lines)


def done_steps(journal: dict) -> set[str]:
    """The steps some window finished (exit 0, not stopped at the window's end): not run again."""
    return {s["step"] for w in journal.get("windows") or [] for s in w.get("steps") or []
            if s.get("rc") == 0 and not s.get("stopped")} | ({"doctor"} if journal.get("doctor_done") else set())


# ---- the dry run -------------------------------------------------------------------------------------
def dry_run(args) -> int:
    gpu = args.gpu
    prune = None if args.prune == "off" else (WINDOW_PRUNE if args.prune == "auto" else _pair(args.prune))
    p = plan(gpu, prune, args.rounds, first_rounds=args.first_rounds)
    print(f"The GPU headline window (benchmarks/gpu_headline.py), planned for one {GPUS[gpu]}: at most "
          f"{args.window:.0f} s per window, {REPORT_RESERVE_S:.0f} s of it kept for the report.")
    lines, install, absent = wheel_report(Path(args.wheels))
    carried = sorted(Path(args.wheels).glob("*.whl")) if Path(args.wheels).is_dir() else []
    size = sum(w.stat().st_size for w in carried) / 2**20
    here = ", ".join(d for _, d, _ in missing_packages()) or "none"
    print(f"wheels folder {args.wheels}: {len(carried)} wheel(s), {size:.1f} MiB (carry limit {CARRY_LIMIT_MIB} MiB)"
          f"{': ' + ', '.join(w.name for w in carried) if carried else ''}")
    print(f"missing on THIS machine: {here} (the lent machine is checked again, and says so, before it starts)")
    for line in lines:
        print(f"  {line}")
    print("\nsteps, in order (the first window's part: up to the no-graph sweeps at batch 1; each sweep stops at "
          "the window's end and the next window continues it with --resume-from):")
    for i, step in enumerate(p.steps, 1):
        print(f"{i:2d}. [{'first part' if step.first_window else 'later     '}] {step.name}: {step.what}")
        if step.sweep is not None:
            folder = Path("$OUT") / f"gpu-{gpu}-DATE" / "runs" / step.sweep.name
            print("      " + " ".join(run_command(step.sweep, folder, p.rounds, max_time=0, resume=False)[1:])
                  .replace("--max-time 1", "--max-time <left>"))
    total, parts = estimate(p)
    later, _ = estimate(p, first_window_only=False)
    print("\nestimate of the first window, from stated per-step costs (assumptions, not measurements: no GPU has "
          "run this script; an H100 and an H200 are costed alike, the costs being worker starts, builds and searches):")
    cum = 0.0
    for name, s, what in parts:
        cum += s
        print(f"  {name:<26} {s:6.0f} s (to here {cum:5.0f} s)  {what}")
    print("  assumed: " + "; ".join(f"{k} {v[0]:g} ({v[1]})" for k, v in ASSUMED.items()))
    print("  builds (s, first round / later rounds, base + per operator): "
          + "; ".join(f"{k} {a[0]:g}+{a[1]:g}/op, {b[0]:g}+{b[1]:g}/op" for k, (a, b) in BUILD.items()))
    print_goals(None)
    fits = "fits" if total <= args.window - REPORT_RESERVE_S else "does NOT fit"
    print(f"  the first window's part {fits} one window of {args.window:.0f} s; all steps: about {later:.0f} s "
          f"({later / args.window:.1f} windows)")
    print(f"estimated duration {total:.0f} s on {GPUS[gpu]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true",
                    help="print the plan and the first window's estimate; run nothing")
    ap.add_argument("--gpu", choices=sorted(GPUS), default="h100", help="the GPU kind the dry run plans for")
    ap.add_argument("--out", default=None, help="output folder [default: --root/gpu-<kind>-<date>]")
    ap.add_argument("--root", default=str(ROOT / "docs" / "results"), help="where the output folder is made")
    ap.add_argument("--resume-from", default=None, help="a previous window's output folder to continue")
    ap.add_argument("--profile-db", default=None, help="a carried profile database (profiles.sqlite) to start from")
    ap.add_argument("--prune", default="auto",
                    help="randwire/nasnet search: auto (r=1,s=3), off (the full search: with a carried profile "
                         "database that holds it), or R,S")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="rounds per cell")
    ap.add_argument("--first-rounds", type=int, default=1,
                    help="rounds of the batch-1 graph sweeps before any gets more (all four networks seen first)")
    ap.add_argument("--window", type=float, default=WINDOW_S, help="seconds this window may take")
    ap.add_argument("--wheels", default=str(WHEELS), help="folder of carried wheels")
    ap.add_argument("--site", default="/tmp/ios-bench-headline/site", help="where carried wheels are installed")
    ap.add_argument("--fetch-wheels", action="store_true", help="download the wheels a lent machine lacks (here)")
    args = ap.parse_args(argv)
    bad = _bad_args(args)
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    if args.fetch_wheels:
        return fetch_wheels(Path(args.wheels))
    if args.dry_run:
        return dry_run(args)
    signal.signal(signal.SIGTERM, _terminated)  # the running step is stopped and journaled, then we exit
    return run_window(args)


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def _bad_args(args) -> str | None:
    if args.prune not in ("auto", "off"):
        try:
            r, s = _pair(args.prune)
            if r < 1 or s < 1:
                raise ValueError
        except ValueError:
            return f"bad --prune {args.prune!r}: expected auto, off or R,S (positive integers)"
    if not 1 <= args.rounds <= 100:
        return f"bad --rounds {args.rounds}: expected 1 to 100"
    if not 0 <= args.first_rounds <= args.rounds:
        return f"bad --first-rounds {args.first_rounds}: expected 0 to --rounds ({args.rounds})"
    if not 60 <= args.window <= 600:
        return f"bad --window {args.window:g}: expected 60 to 600 seconds (one device command is at most 600)"
    for name in ("resume_from",):
        v = getattr(args, name)
        if v and not Path(v).is_dir():
            return f"--resume-from {v}: no such folder"
    if args.profile_db and not Path(args.profile_db).is_file():
        return f"--profile-db {args.profile_db}: no such file"
    return None


if __name__ == "__main__":
    sys.exit(main())
