"""One command per lent GPU window: the doctor, the fidelity table, the search benchmark and the
headline, in that order, a report after each step, resumed by the next call.

    python benchmarks/gpu_headline.py --fetch-wheels   # here: the wheels a lent machine lacks -> .whl/,
                                                       # split in parts that fit one transfer with the tree
    python benchmarks/gpu_headline.py --check          # here or there: what is carried, in how many transfers
    python benchmarks/gpu_headline.py --dry-run        # the steps, their estimates, the `run` call to make
    python3 benchmarks/gpu_headline.py --out $OUT --deadline 540   # there: one window
    python benchmarks/gpu_headline.py --fake --out /tmp/w-out --work /tmp/w --deadline 300   # here: the
                                                       # whole window on the CPU (fake device, quick forms)

**The steps**, each run as its own process with what is left of the window, its output kept as
``logs/<step>.txt``: (1) ``doctor``: ``ios-bench doctor --device cuda --no-lock-clocks`` (the IOS
kernels against the oracle, host time per launch, the peers); (2) ``fidelity``:
``benchmarks/gpu_fidelity.py`` on squeezenet and inception_v3 (per-stage table, the critical-path
bound); (3) ``search``: ``benchmarks/bench_gpu_search.py`` on inception_v3 (cold, then only the
plan cache warm, then an independent cold search whose IOS-Both schedule is timed side by side
with the first's); (4) ``headline``: ``ios-bench experiment headline --device cuda --deadline S``
(batch 1 first, at fp32 and then its fp16 step), resumed by every later call until it finishes.
A step that does not fit what is left of the window (its estimate) waits for the next call; a step
that runs past the window gets SIGINT (the experiment records where it stopped), then SIGKILL to its process group.

**Where things live.** The device tool empties ``$OUT`` before each command and brings back at
most 8 files, so the working folder (``--work``, default ``/tmp/ios-bench-window``: the
experiment, ``profiles.sqlite`` with the stage costs and cuDNN plans, the logs, ``window.json``)
is outside it; after every step it is packed into ``$OUT/window.tar.gz`` (records and logs; never
build or compile caches), beside ``window.md`` (the report) and ``window.json``. The next call
continues from the working folder where the machine was kept, else from a carried copy of that
archive (``--resume-from``, default ``.window/window.tar.gz``: copy the archive that came back
there and name ``.window`` in ``carry``).

**Wheels.** ``.whl/`` is ignored by git; the device tool carries ignored paths named in ``carry``,
64 MiB per call *including the working tree that travels with them* (tracked and untracked-not-
ignored files, ``shared/``, the carried paths). ``--fetch-wheels`` splits a wheel larger than what
is left of that (``apache-tvm`` 0.27.0.post1 is about 100 MB) into parts (``<wheel>.part1of2``, ...)
with a manifest (``<wheel>.parts.json``: size and SHA-256); the parts travel in separate calls to
the same warm machine and are put together there, checked against the manifest. A missing part, a
damaged wheel or one built for another Python or platform is one line naming it; the window goes
on without that framework (its cells are skipped with their reason).

**TVM's CUDA compile** (adapters/tvm.py, read in TVM 0.27's own source): TVM compiles its kernels
with NVRTC when they are loaded on the GPU, through cuda-bindings (carried where it does not import),
with ``-I`` for the CUDA folder it picks (CUDA_PATH, else nvcc on PATH, else /usr/local/cuda; never
CUDA_HOME), which must hold the CUDA runtime headers and CCCL. Before the steps, where TVM's pick lacks
them, the steps get ``CUDA_PATH``: CUDA_HOME or /usr/local/cuda where they hold them, else a folder
made of the machine's CUDA 13 wheels' ``nvidia/cu13/include`` or of the carried nvidia-cuda-runtime and
nvidia-cuda-cccl wheels (installed apart, never on PYTHONPATH); then the toolchain's facts are printed
(``toolchain: ...`` lines: nvcc, CUDA_PATH, CUDA_HOME, /usr/local/cuda/include, where cuda_fp16.h and
CCCL are, cuda-bindings, NVRTC, TVM's verdict at fp32 and fp16).

**Bad input** (each one line, and the window goes on with what it can): a GPU that vanishes
mid-window (the GPU steps left are not started), a wheel that did not travel, a plan cache from
another cuDNN (its plans are rebuilt). The GPU's clocks and settings are never locked, reset or
changed: the report records their state at the start and the end, and that they were left alone.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import importlib.util
import json
import os
import re
import sqlite3
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script on a bare machine: the harness is not installed there
    sys.path.insert(0, str(ROOT))
WHEELS = ROOT / ".whl"
CARRY_LIMIT_MIB = 64  # what one call carries: the working tree and the carried paths together
MARGIN_MIB = 2.0  # left free beside the tree and a wheel part (the tree grows between calls)
PART_MIB = 40  # split_wheel's default where the tree is not measured
WINDOW_S = 540.0  # one device command is at most 10 minutes; the issue asks for 9
# a step's own deadline is what is left of the window less this: a step started just before its
# deadline (a round, a wave, a search) finishes inside the window; one that does not gets SIGINT at
# the window's end less PACK_S and KILL_AFTER_S (the experiment records it and rewrites its
# report), SIGKILL KILL_AFTER_S later; the last PACK_S pack the working folder into the output
RESERVE_S = 45.0
KILL_AFTER_S = 15.0  # after the SIGINT
PACK_S = 15.0  # the report and the archive, after the last step
MIN_HEADLINE_S = 60.0  # the headline is not started with less than this left
FAKE_MIN_HEADLINE_S = 10.0  # ... on the CPU (--fake)
TARGET_PYTHON = "3.12"  # the lent machines' Python (3.12.3 on the H200 of 2026-11-26)

# What the harness imports on the GPU machine: (import name, distribution, what needs it). The
# lent machines come with torch, CuPy, cuDNN and JAX; the rest travel as wheels.
NEEDS = (
    ("numpy", "numpy", "everything"), ("torch", "torch", "the oracle, torch peers"),
    ("click", "click", "the CLI"), ("rich", "rich", "the CLI"), ("pandas", "pandas", "reports"),
    ("matplotlib", "matplotlib", "plots"), ("scipy", "scipy", "statistics"), ("psutil", "psutil", "workers"),
    ("tqdm", "tqdm", "progress"), ("platformdirs", "platformdirs", "the profile database"),
    ("cupy", "cupy-cuda13x", "the IOS CUDA runtime"), ("cudnn", "nvidia-cudnn-frontend", "IOS convolutions"),
    ("pynvml", "nvidia-ml-py", "utilization, memory, clocks"), ("jax", "jax", "the jax-xla peer"),
    ("tvm", "apache-tvm", "the tvm peer on cuda (Relax, DLight, NVRTC)"),
    ("tvm_ffi", "apache-tvm-ffi", "the tvm peer"),
    ("cuda.bindings", "cuda-bindings", "the tvm peer's CUDA compile (TVM 0.27: NVRTC through cuda.bindings.nvrtc)"),
)
# What --fetch-wheels downloads (the H200 of 2026-11-26 lacked the first two; pinned as it ran there,
# TVM as pyproject.toml pins it)
FETCH = ("nvidia-cudnn-frontend==1.28.0", "platformdirs", "nvidia-ml-py", "apache-tvm==0.27.0.post1",
         "apache-tvm-ffi==0.1.14.post0", "cuda-bindings==13.0.3", "nvidia-cuda-runtime==13.0.96",
         "nvidia-cuda-cccl==13.0.85")
# What the tvm peer's CUDA compile needs beyond libcudart (read in apache-tvm 0.27's tvm/support/nvcc.py;
# adapters/tvm.py, "what TVM's CUDA compile needs"): cuda-bindings for NVRTC (above: installed where it
# does not import; 13.0.x for torch's CUDA 13.0 NVRTC, and it asks only cuda-pathfinder ~= 1.1, which
# CuPy 14 brings), NVRTC itself (torch's nvidia-cuda-nvrtc: 86 MiB, too large to carry beside TVM's
# parts) and a CUDA folder with the runtime headers and CCCL. These two header-only wheels make one
# where the machine has none: installed into a folder of their own (never on PYTHONPATH), their
# nvidia/cu13/include is what TVM is pointed at (CUDA_PATH). Checked here: TVM 0.27 compiles the tvm
# peer's fp32 and fp16 kernels for sm_90 with NVRTC 13.0.88 and exactly these headers.
HEADER_WHEELS = ("nvidia-cuda-runtime", "nvidia-cuda-cccl")
# the wheels added for the tvm peer's CUDA compile: their size as downloaded on 2026-11-27 (cp312,
# manylinux x86_64), for the dry run before they are fetched, and what each is for
FETCH_MIB = {"cuda-bindings==13.0.3": (11.6, "NVRTC for TVM's CUDA compile (cuda.bindings.nvrtc)"),
             "nvidia-cuda-runtime==13.0.96": (2.1, "CUDA runtime headers (cuda_runtime.h, cuda_fp16.h) for it, used "
                                                   "where the machine has no CUDA folder"),
             "nvidia-cuda-cccl==13.0.85": (3.0, "CCCL headers (cuda/std/...) for it, likewise")}


def tvm_compile_wheels(folder: Path) -> list[str]:
    """One line per wheel carried for the tvm peer's CUDA compile (:data:`FETCH_MIB`) with its size:
    in ``folder`` already, or to fetch (its size as downloaded), and whether they fit one transfer."""
    lines, total = [], 0.0
    for spec, (mib, why) in FETCH_MIB.items():
        found = wheels_for(spec.split("==")[0], folder)
        if found:
            mib = found[-1].stat().st_size / 2**20
            lines.append(f"for tvm on cuda: {found[-1].name}, {mib:.1f} MiB, carried: {why}")
        else:
            lines.append(f"for tvm on cuda: {spec}, {mib:.1f} MiB (as downloaded 2026-11-27), not fetched yet "
                         f"(--fetch-wheels): {why}")
        total += mib
    lines.append(f"for tvm on cuda: {total:.1f} MiB in all (a transfer has {CARRY_LIMIT_MIB:g} MiB less the tree)")
    return lines
PART = re.compile(r"^(?P<wheel>.+\.whl)\.part(?P<i>\d+)of(?P<n>\d+)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


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


# ---- wheels in parts ----------------------------------------------------------------------------
def split_wheel(wheel: Path, part_mib: float = PART_MIB) -> list[Path]:
    """``wheel`` as parts of at most ``part_mib`` MiB beside it, and its manifest
    (``<wheel>.parts.json``: size, SHA-256, the parts); the whole wheel is removed. A wheel that
    fits in one part is left as it is (returns [])."""
    size = wheel.stat().st_size
    limit = int(part_mib * 2**20)
    if size <= limit:
        return []
    data = wheel.read_bytes()
    n = -(-size // limit)
    parts = []
    for i in range(n):
        p = wheel.with_name(f"{wheel.name}.part{i + 1}of{n}")
        p.write_bytes(data[i * limit:(i + 1) * limit])
        parts.append(p)
    manifest = {"wheel": wheel.name, "size": size, "sha256": hashlib.sha256(data).hexdigest(),
                "parts": [p.name for p in parts]}
    wheel.with_name(wheel.name + ".parts.json").write_text(json.dumps(manifest, indent=1))
    wheel.unlink()
    return parts


def join_parts(folder: Path, write: bool = True) -> tuple[list[Path], list[str]]:
    """Put together every wheel carried in parts in ``folder`` whose parts are all there (checked
    against its manifest; the parts are removed once the wheel is whole). Returns (the wheels made,
    one line per wheel that could not be: a part missing, a size or SHA-256 that differs).
    ``write=False``: only check (``--check`` here, where the parts must stay parts)."""
    made, problems = [], []
    for manifest_path in sorted(folder.glob("*.whl.parts.json")):
        try:
            m = json.loads(manifest_path.read_text())
            name, size, digest, names = m["wheel"], int(m["size"]), m["sha256"], list(m["parts"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            problems.append(f"{manifest_path.name}: unreadable manifest ({type(e).__name__}): its wheel is not used")
            continue
        wheel = folder / name
        if wheel.is_file() and wheel.stat().st_size == size:
            continue  # put together in an earlier window
        absent = [p for p in names if not (folder / p).is_file()]
        if absent:
            problems.append(f"{name}: part {', '.join(absent)} not carried ({len(names) - len(absent)} of "
                            f"{len(names)} here): not installed")
            continue
        data = b"".join((folder / p).read_bytes() for p in names)
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            problems.append(f"{name}: its parts do not make the wheel its manifest names ({len(data)} bytes, "
                            f"{size} expected, or another SHA-256): damaged, not installed")
            continue
        if not write:
            made.append(wheel)
            continue
        tmp = wheel.with_name(wheel.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, wheel)
        for p in names:
            (folder / p).unlink()
        made.append(wheel)
    return made, problems


def wheel_problem(wheel: Path) -> str | None:
    """Why ``wheel`` cannot be installed on this Python (one line naming it), or None: not a zip
    or a damaged one, or built for another Python or platform."""
    try:
        with zipfile.ZipFile(wheel) as z:
            bad = z.testzip()
    except (OSError, zipfile.BadZipFile) as e:
        return f"{wheel.name}: damaged ({type(e).__name__}: not a whole wheel): not installed"
    if bad is not None:
        return f"{wheel.name}: damaged (file {bad} fails its CRC): not installed"
    parts = wheel.name[:-4].split("-")
    if len(parts) < 5:
        return f"{wheel.name}: not a wheel's name (name-version-python-abi-platform): not installed"
    py, abi, plat = parts[-3], parts[-2], parts[-1]
    here = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    if not any(t in ("py3", "py2.py3", here) or (t.startswith("cp3") and abi == "abi3" and int(t[3:] or 0) <=
                                                   sys.version_info[1]) for t in py.split(".")):
        return f"{wheel.name}: built for {py}, this Python is {here}: not installed"
    machine = sysconfig.get_platform().split("-")[-1].replace("-", "_")
    if plat != "any" and not all(("manylinux" in p or "linux" in p) and p.endswith(machine) for p in plat.split(".")):
        return f"{wheel.name}: built for {plat}, this machine is {sysconfig.get_platform()}: not installed"
    return None


def wheels_for(dist: str, folder: Path) -> list[Path]:
    """The whole wheels in ``folder`` of one distribution (by the wheel file name's first part)."""
    if not folder.is_dir():
        return []
    return sorted(w for w in folder.glob("*.whl") if _norm(w.name.split("-")[0]) == _norm(dist))


def wheel_report(folder: Path, needs=NEEDS, join: bool = True) -> tuple[list[str], list[Path], list[str]]:
    """(one line per missing package: carried and usable, or why not; the wheels to install; the
    distributions missing and not installable). Wheels in parts are put together first (``join``;
    otherwise only checked, and a whole set of parts counts as carried)."""
    lines, install, absent = [], [], []
    made, problems = join_parts(folder, write=join) if folder.is_dir() else ([], [])
    for module, dist, why in missing_packages(needs):
        found = wheels_for(dist, folder)
        if not join and any(_norm(w.name.split("-")[0]) == _norm(dist) for w in made):
            lines.append(f"missing: {dist} (import {module}; {why}): carried in parts, all of them here")
            continue
        bad = [p for p in problems if _norm(p.split("-")[0]) == _norm(dist)]
        usable = [w for w in found if wheel_problem(w) is None]
        if usable:
            install.append(usable[-1])  # one wheel per distribution (the last by name, when several)
            lines.append(f"missing: {dist} (import {module}; {why}): carried as {usable[-1].name}")
            continue
        absent.append(dist)
        reasons = bad + [wheel_problem(w) for w in found]
        lines.append(f"missing: {dist} (import {module}; {why}): "
                     + ("; ".join(reasons) if reasons else f"NOT carried in {folder}")
                     + "; the headline goes on without it")
    return lines, install, absent


def tree_mib(root: Path = ROOT, carry: tuple = ()) -> float:
    """What travels with every call besides the wheels, in MiB, as the device tool counts it: the
    tracked files and the untracked ones git does not ignore, ``shared/`` where the checkout has
    one, and the other carried paths (``carry``)."""
    seen: set[Path] = set()
    total = 0
    try:
        names = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                               capture_output=True, check=True, timeout=60).stdout.split(b"\0")
    except (OSError, subprocess.SubprocessError):
        names = []
    paths = [root / os.fsdecode(n) for n in names if n]
    for extra in (root / "shared", *(root / c for c in carry)):
        if extra.is_dir():
            paths += [f for f in extra.rglob("*")]
        elif extra.is_file():
            paths.append(extra)
    for f in paths:
        if f in seen or f.is_symlink() or not f.is_file():
            continue
        seen.add(f)
        total += f.stat().st_size
    return total / 2**20


def part_mib_for(tree: float) -> float:
    """The largest wheel part that fits one transfer beside a working tree of ``tree`` MiB (and the
    part's manifest), with :data:`MARGIN_MIB` to spare for the tree's growth between calls."""
    return max(1.0, CARRY_LIMIT_MIB - tree - MARGIN_MIB)


def fetch_wheels(folder: Path, part_mib: float | None = None) -> int:
    """Download :data:`FETCH` for the lent machines' Python and platform into ``folder`` (here,
    with pip), then split the wheels over ``part_mib`` MiB (default: what one transfer leaves
    beside the working tree, :func:`part_mib_for`) into parts."""
    folder.mkdir(parents=True, exist_ok=True)
    tree = tree_mib()
    part_mib = part_mib or part_mib_for(tree)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--python-version",
           TARGET_PYTHON, "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
           "--platform", "manylinux2014_x86_64", "-d", str(folder), *FETCH]
    print(" ".join(cmd))
    rc = subprocess.call(cmd)
    for w in sorted(folder.glob("*.whl")):
        parts = split_wheel(w, part_mib)
        if parts:
            print(f"{w.name}: {w.with_name(w.name + '.parts.json').name} and {len(parts)} parts of at most "
                  f"{part_mib:.1f} MiB (the working tree, {tree:.1f} MiB, travels with each; each part in its own "
                  "call)")
    print(transfers(folder, tree))
    return rc


def transfers(folder: Path, tree: float | None = None) -> str:
    """How the wheel folder travels: its files grouped into calls whose wheels and the working
    tree (``tree`` MiB, measured by :func:`tree_mib` when not given) fit the limit together; a
    file that cannot fit beside the tree is named."""
    tree = tree_mib() if tree is None else tree
    room = CARRY_LIMIT_MIB - tree
    files = sorted((p for p in folder.iterdir() if p.is_file()), key=lambda p: -p.stat().st_size) \
        if folder.is_dir() else []
    loads: list[list] = []
    too_big = []
    for f in files:
        mib = f.stat().st_size / 2**20
        if mib > room:
            too_big.append(f"{f.name} ({mib:.1f} MiB)")
            continue
        for load in loads:
            if load[0] + mib <= room:
                load[0] += mib
                load[1].append(f.name)
                break
        else:
            loads.append([mib, [f.name]])
    head = f"{folder}: the working tree ({tree:.1f} MiB) travels with every call, leaving {room:.1f} MiB of " \
           f"{CARRY_LIMIT_MIB:g} for wheels"
    if too_big:
        head += f"; TOO LARGE for any call beside the tree: {', '.join(too_big)} (split it: --fetch-wheels)"
    if not loads:
        return f"{head}: no wheels"
    return f"{head}: {len(loads)} transfer(s): " + "; ".join(
        f"{i}. {load[0]:.1f} MiB ({', '.join(load[1])})" for i, load in enumerate(loads, 1))


# ---- the window ---------------------------------------------------------------------------------
WORK = Path("/tmp/ios-bench-window")  # the working folder: outside $OUT, which each call empties
CARRIED = ROOT / ".window" / "window.tar.gz"  # where a session puts the archive back for a fresh machine
ARCHIVE = "window.tar.gz"
STATE = "window.json"
REPORT = "window.md"
ARCHIVE_LIMIT_MIB = 15.0  # one file back is at most 16 MiB
# never packed: build and compile caches (rebuilt on the machine), installed wheels, bytecode
NOT_PACKED_DIRS = {"cache", "site", "__pycache__", "triton", "torchinductor", ".cache"}
NOT_PACKED_SUFFIXES = (".so", ".o", ".cubin", ".ptx", ".fatbin", ".pyc", ".whl")
STEPS = ("doctor", "fidelity", "search", "headline")
TITLES = {"doctor": "the doctor: IOS kernels against the oracle, host time per launch, the peers",
          "fidelity": "gpu_fidelity.py on squeezenet and inception_v3: per-stage table, critical-path bound",
          "search": "bench_gpu_search.py on inception_v3: cold, only the plan cache warm, an independent cold "
                    "search timed side by side",
          "headline": "the headline (ios-bench experiment headline --device cuda), batch 1 first (fp32, then its "
                      "fp16 step: IOS-Both vs the best GPU peer at fp16), then what the window leaves"}
DOCTOR_FRAMEWORKS = "ios,torch,jax-xla,tvm"
FIDELITY_MODELS = "squeezenet,inception_v3"
SEARCH_MODELS = "inception_v3"
# the steps' costs no GPU run has measured yet (seconds), named "assumed" wherever used
ASSUMED_S = {"doctor": (60.0, "the doctor with tvm's first cuda build (the H200 ran it without tvm)"),
             "fidelity": (240.0, "gpu_fidelity on squeezenet and inception_v3 (never run on a GPU: two searches "
                                 "with fresh databases, each stage timed twice more, 60 replays)"),
             "search_extra": (30.0, "bench_gpu_search's schedule timings (50 replays each, 5 side-by-side rounds)")}
BENCH_RECORD = ROOT / "docs" / "results" / "gpu-h200-2026-11-26-headline" / "bench_gpu_search.txt"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def step_estimates(gpu: str = "h200") -> dict[str, tuple[float, str]]:
    """Each step's estimated seconds and where the figure comes from: the committed H200 windows'
    records (``ios_bench.experiments.headline.MEASURED_RUNS``, the newest's step first) where they have
    it, :data:`ASSUMED_S` where not."""
    from ios_bench.experiments import headline as hl
    from ios_bench.experiments.base import Context

    costs = hl.measured_costs()
    out = {}
    steps = costs.get("steps") or {}  # {step: (seconds, the committed window's folder)}, the newest window's
    if costs.get("doctor"):
        where = steps["doctor"][1] if "doctor" in steps else "the committed window"
        out["doctor"] = (costs["doctor"], f"measured ({where}: window.json's doctor step)")
    else:
        out["doctor"] = (ASSUMED_S["doctor"][0], "assumed: " + ASSUMED_S["doctor"][1])
    if "fidelity" in steps:
        out["fidelity"] = (steps["fidelity"][0], f"measured ({steps['fidelity'][1]}: window.json's fidelity step)")
    else:
        out["fidelity"] = (ASSUMED_S["fidelity"][0], "assumed: " + ASSUMED_S["fidelity"][1])
    try:
        m = re.search(r"inception_v3 IOS-Both r=3 s=8: search ([\d.]+) s", BENCH_RECORD.read_text())
    except OSError:
        m = None
    extra = ASSUMED_S["search_extra"]
    if "search" in steps:
        out["search"] = (steps["search"][0], f"measured ({steps['search'][1]}: window.json's search step)")
    elif m:
        cold = float(m.group(1))
        out["search"] = (3 * cold + extra[0], f"3 inception_v3 searches at {cold:.1f} s each, measured (H200 "
                                               f"2026-11-26: bench_gpu_search.txt, cold; the plan-cache-warm one "
                                               f"costed as cold), + {extra[0]:.0f} s assumed: {extra[1]}")
    else:
        out["search"] = (3 * 80.0 + extra[0], f"assumed: 3 inception_v3 searches at 80 s and {extra[1]}")
    runs = hl.EXPERIMENT.runs(Context(out=Path("x"), devices=["cuda"]))
    first, _ = hl.estimate(runs, gpu, costs)
    reduced = [r.name for r in runs if max(r.plan.batch_sizes) == 1 and r.plan.precisions != ["fp32"]]
    out["headline"] = (first, "the experiment's own estimate of its batch-1 part (ios-bench experiment headline "
                              "--device cuda --dry-run: measured and assumed figures named there), its fp16 step "
                              f"({', '.join(reduced) or 'none'}) costed as fp32's figures, assumed; the rest "
                              "continues in later calls")
    return out


def run_call(deadline: float, out: str = "$OUT", kind: str | None = None) -> str:
    """The exact call of the device tool's ``run`` a session makes for one window."""
    carry = [".whl"] + ([".window"] if CARRIED.is_file() else [])
    cmd = f"PYTHONUNBUFFERED=1 python3 benchmarks/gpu_headline.py --out {out} --deadline {deadline:g}"
    args = {"command": cmd, "carry": carry, "timeout_s": 600}
    if kind:
        args["kind"] = kind
    return "run(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items()) + ")"


def plan_cache_problem(db: Path, cudnn) -> str | None:
    """One line where the profile database's cuDNN plan cache holds plans stored under another
    cuDNN than this machine's (``cudnn``): they are not used here (rebuilt); None otherwise."""
    if not db.is_file():
        return None
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            rows = con.execute("SELECT versions, COUNT(*) FROM cudnn_plans GROUP BY versions").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return None  # no plan table yet
    other: dict = {}
    for versions, n in rows:
        try:
            theirs = json.loads(versions).get("cudnn")
        except (ValueError, AttributeError):
            theirs = "?"
        if theirs != cudnn:
            other[theirs] = other.get(theirs, 0) + n
    if not other:
        return None
    return (f"plan cache {db}: " + ", ".join(f"{n} plan(s) from cuDNN {v}" for v, n in sorted(other.items(), key=str))
            + f", this machine has cuDNN {cudnn}: not used here (rebuilt and stored under this cuDNN)")


def probe_gpu(fake: bool, env: dict | None = None) -> dict:
    """The GPU's state, asked in a fresh process each time (a vanished GPU is seen): {missing: the
    reason there is no GPU, or None; cuda: why the IOS CUDA runtime cannot run (CuPy, cuDNN: a
    wheel that did not travel), or None; name, cudnn, clocks (their state: only read, never set)}."""
    if fake:
        return {"missing": os.environ.get("IOS_BENCH_WINDOW_FAKE_GPU_GONE") or None, "name": "fake device (CPU)",
                "cudnn": None, "clocks": "fake device: no clocks"}
    code = ("import json\nfrom ios_core.measurement import gpu\nr = gpu.gpu_missing()\n"
            "fp = {} if r else gpu.fingerprint()\n"
            "print(json.dumps({'missing': r, 'cuda': None if r else gpu.cuda_missing(), 'name': fp.get('name'), "
            "'cudnn': fp.get('cudnn'), 'clocks': None if r else gpu.clock_state(fp)}))\n")
    try:
        env = dict(env or os.environ)
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH", "")) if x)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90, cwd=ROOT,
                           env=env)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return {"missing": f"the GPU could not be asked ({type(e).__name__})", "name": None, "cudnn": None,
                "clocks": None}


def step_command(name: str, work: Path, room: float, fake: bool, extra: list[str]) -> list[str]:
    """Step ``name``'s command with ``room`` seconds (its own deadline or budget)."""
    py = sys.executable
    if name == "doctor":
        return [py, "-m", "ios_bench", "doctor", "--no-lock-clocks", "--timeout", "90", "--device",
                *(["cpu", "--frameworks", "ios"] if fake else ["cuda", "--frameworks", DOCTOR_FRAMEWORKS])]
    if name == "fidelity":
        return [py, str(ROOT / "benchmarks" / "gpu_fidelity.py"), "--budget", str(max(1, int(room / 2))),
                *(["--fake", "--models", "sample", "--image-size", "10"] if fake else ["--models", FIDELITY_MODELS])]
    if name == "search":
        return [py, str(ROOT / "benchmarks" / "bench_gpu_search.py"),
                *(["--fake", "--models", "sample", "--image-size", "10", "-r", "1", "-s", "2"] if fake
                  else ["--models", SEARCH_MODELS])]
    return headline_command(work / "headline", room, extra, fake)


def headline_command(out: Path, deadline: float, extra: list[str], fake: bool = False) -> list[str]:
    """The experiment's command for this window (``--resume`` where ``out`` holds it already)."""
    cmd = [sys.executable, "-m", "ios_bench", "experiment", "headline", "--device", "cpu" if fake else "cuda",
           *(["--quick"] if fake else []), "--out", str(out), "--deadline", str(max(1, int(deadline))),
           "--no-progress", *extra]
    if (out / "experiment.json").is_file():
        cmd.append("--resume")
    return cmd


def window_env(work: Path, site: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["IOS_BENCH_CACHE"] = str(work / "profiles.sqlite")  # stage costs and cuDNN plans, kept between calls
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return env


# ---- its state, report and archive ----------------------------------------------------------------
def load_state(work: Path, carried: Path | None, say) -> dict:
    """The window's state: from the working folder where the machine was kept, else from a carried
    copy of the last call's archive (unpacked into ``work``), else new."""
    path = work / STATE
    if not path.is_file() and carried is not None and carried.is_file():
        work.mkdir(parents=True, exist_ok=True)
        try:
            with tarfile.open(carried) as tar:
                members = [m for m in tar.getmembers() if (m.isfile() or m.isdir()) and not m.name.startswith("/")
                           and ".." not in Path(m.name).parts]
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(work, members=members, filter="data")
                else:  # pragma: no cover - Python before 3.11.4
                    tar.extractall(work, members=members)
            say(f"resumed from the carried copy {carried} (the machine was not kept)")
        except (OSError, tarfile.TarError) as e:
            say(f"the carried copy {carried} could not be unpacked ({type(e).__name__}: {str(e)[:120]}): starting "
                "over")
    elif path.is_file():
        say(f"continuing in {work} (the machine was kept)")
    try:
        state = json.loads(path.read_text())
        if not isinstance(state, dict):
            raise ValueError
    except (OSError, ValueError):
        state = {}
    state.setdefault("calls", [])
    state.setdefault("steps", {})
    return state


WEIGHTS_MIB = 1.0  # a saved graph's weights (.npz) above this are not packed, nor the graph beside them


def _packed(work: Path) -> list[Path]:
    """The working folder's files that travel back: records and logs. Not build or compile caches,
    and not a saved schedule whose weights are large (``<name>.npz`` with its ``<name>.json``: a
    resumed sweep searches it again, the profile database making that quick)."""
    out, heavy = [], set()
    for f in sorted(work.rglob("*.npz")):
        if f.is_file() and f.stat().st_size > WEIGHTS_MIB * 2**20:
            heavy |= {f, f.with_suffix(".json")}
    for f in sorted(work.rglob("*")):
        rel = f.relative_to(work)
        if not f.is_file() or f.is_symlink() or any(part in NOT_PACKED_DIRS for part in rel.parts[:-1]) \
                or f.name.endswith(NOT_PACKED_SUFFIXES) or f.name.endswith(("-wal", "-shm")) or f in heavy:
            continue
        out.append(f)
    return out


def pack(work: Path, out: Path, limit_mib: float = ARCHIVE_LIMIT_MIB) -> tuple[Path, list[str]]:
    """The working folder's records and logs as one archive in ``out`` (never build or compile
    caches); where it would pass ``limit_mib`` the largest files are left out, and named."""
    _checkpoint(work / "profiles.sqlite")
    files = _packed(work)
    left_out: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    target = out / ARCHIVE
    while True:
        tmp = out / (ARCHIVE + ".tmp")
        with tarfile.open(tmp, "w:gz") as tar:
            for f in files:
                tar.add(f, arcname=f.relative_to(work).as_posix(), recursive=False)
        if tmp.stat().st_size <= limit_mib * 2**20 or not files:
            os.replace(tmp, target)
            return target, left_out
        biggest = max(files, key=lambda f: f.stat().st_size)
        files.remove(biggest)
        left_out.append(f"{biggest.relative_to(work).as_posix()} ({biggest.stat().st_size / 2**20:.1f} MiB)")


def _checkpoint(db: Path) -> None:
    """A SQLite database in WAL mode holds its latest rows in ``-wal`` until checkpointed: write
    them into the file that is packed."""
    if db.is_file():
        try:
            con = sqlite3.connect(str(db), timeout=10)
            try:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                con.close()
        except sqlite3.Error:
            pass


def render(state: dict) -> str:
    lines = ["# GPU window", "", "One command per lent window (benchmarks/gpu_headline.py): the steps in order, each "
             "resumed by the next call until done.", "", "| step | status | seconds | exit | note | log |",
             "|---|---|---:|---:|---|---|"]
    for name in STEPS:
        st = state["steps"].get(name) or {}
        lines.append(f"| {name} | {st.get('status', 'not started')} | {st.get('seconds', '-')} | {st.get('rc', '-')} "
                     f"| {str(st.get('note', '')).replace('|', '/')} | {st.get('log', '-')} |")
    for i, call in enumerate(state["calls"], 1):
        lines += ["", f"## Call {i}: {call.get('started')} ({call.get('device') or '?'}, deadline "
                      f"{call.get('deadline_s')} s)", ""]
        lines += [f"- {x}" for x in call.get("lines") or []]
        lines.append(f"- clocks: {call.get('clocks_note', '-')}")
    return "\n".join(lines) + "\n"


def save(state: dict, work: Path, out: Path, say) -> None:
    """After every step: the state and report in the working folder, then packed into ``out``
    with copies of the report, the state and the headline's report beside the archive."""
    from ios_core.atomic import atomic_write_json, atomic_write_text

    work.mkdir(parents=True, exist_ok=True)
    atomic_write_json(work / STATE, state)
    atomic_write_text(work / REPORT, render(state))
    try:
        archive, left_out = pack(work, out)
        for name in (STATE, REPORT):
            atomic_write_text(out / name, (work / name).read_text())
        head = work / "headline" / "report.md"
        if head.is_file():
            atomic_write_text(out / "headline-report.md", head.read_text())
        if left_out:
            say(f"archive {archive.name}: left out to stay under {ARCHIVE_LIMIT_MIB:g} MiB: {', '.join(left_out)}")
    except OSError as e:
        say(f"the archive could not be written to {out} ({type(e).__name__}: {str(e)[:160]}): the working folder "
            f"{work} holds everything")


# ---- running it -----------------------------------------------------------------------------------
def install_wheels(wheels: list[Path], site: Path, together: bool = False) -> list[str]:
    """Each wheel installed on its own (one that fails does not stop the others), over any older
    version of it there (``--upgrade``: without it pip keeps an older wheel's files); one line per
    failure. ``together``: in one pip call, for wheels that share a top-level folder (the CUDA 13
    wheels' ``nvidia/``): ``--target --upgrade`` replaces a top-level folder whole, so the second of
    two calls would remove the first's files."""
    problems = []
    site.mkdir(parents=True, exist_ok=True)
    for group in ([wheels] if together and wheels else [[w] for w in wheels]):
        res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--upgrade",
                              "--no-compile", "--target", str(site), *map(str, group)], capture_output=True, text=True)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["?"])[-1][:200]
            problems.append(f"{', '.join(w.name for w in group)}: pip could not install it ({last}): the window goes "
                            "on without it")
    return problems


def install_header_wheels(folder: Path, dest: Path) -> tuple[Path | None, list[str]]:
    """The carried header-only wheels (:data:`HEADER_WHEELS`) installed into ``dest`` (a folder of
    their own, never on PYTHONPATH): (their include folder, where it has the CUDA runtime headers,
    else None; one line per wheel that could not be installed)."""
    wheels = [w for dist in HEADER_WHEELS for w in wheels_for(dist, folder)[-1:] if wheel_problem(w) is None]
    problems = install_wheels(wheels, dest, together=True) if wheels else []
    include = dest / "nvidia" / "cu13" / "include"
    return (include if (include / "cuda_runtime.h").is_file() else None), problems


def tvm_cuda_path(env: dict, carried: Path | None, dest: Path) -> tuple[str | None, str]:
    """Where TVM's CUDA compile finds its headers for the steps (``env``): (a CUDA_PATH to set, or None
    to leave TVM's own choice; one line saying which and why). TVM reads CUDA_PATH, else nvcc on
    PATH, else /usr/local/cuda, and never CUDA_HOME (adapters/tvm.py); a wrapper script ``nvcc`` outside
    the CUDA folder (``/usr/local/bin/nvcc`` running ``/usr/local/cuda-13.0/bin/nvcc``, as on the
    development machines) sends it to the wrong folder. Tried in turn where TVM's pick lacks a header:
    CUDA_HOME, /usr/local/cuda, the machine's CUDA 13 wheels' include folder, the carried header wheels'."""
    import site

    from adapters.tvm import DEFAULT_CUDA, cuda_folder, cuda_folder_from, missing_headers

    if "CUDA_PATH" in env:
        return None, f"CUDA_PATH={env['CUDA_PATH']} is set here: TVM uses it, left as it is"
    folder, how = cuda_folder(env)
    if folder is not None and not missing_headers(folder, "fp16"):
        return None, f"TVM finds its CUDA headers in {folder} ({how})"
    pick = (f"TVM's own pick, {folder} ({how}), lacks {', '.join(missing_headers(folder, 'fp16'))}"
            if folder is not None else f"TVM finds no CUDA folder ({how})")
    homes = [(Path(env["CUDA_HOME"]), "CUDA_HOME")] if env.get("CUDA_HOME") else []
    homes.append((DEFAULT_CUDA, str(DEFAULT_CUDA)))
    for path, name in homes:
        if path.is_dir() and not missing_headers(path, "fp16"):
            return str(path), f"{pick}: CUDA_PATH={path} for the steps ({name} has them)"
    includes = [(Path(sp) / "nvidia" / "cu13" / "include", f"this machine's CUDA 13 wheels ({sp})")
                for sp in site.getsitepackages()]
    if carried is not None:
        includes.append((carried, "the carried " + " and ".join(HEADER_WHEELS) + " wheels"))
    for i, (include, name) in enumerate(includes):
        if (include / "cuda_runtime.h").is_file():
            made = cuda_folder_from(include, dest / f"cuda-{i}")
            if not missing_headers(made, "fp16"):
                return str(made), f"{pick}: CUDA_PATH={made} for the steps (made of {include}: {name})"
    return None, (f"{pick}, and no CUDA folder here or carried has them (carry {' and '.join(HEADER_WHEELS)}: "
                  "--fetch-wheels): the tvm cells are skipped with that reason")


TOOLCHAIN_PROBE = """
import json
from adapters.imports import absent
with absent("torch", unless="tvm"):  # as a tvm worker imports it: torch (which loads NVRTC's builtins) hidden
    try:
        import tvm  # noqa: F401
    except Exception:
        pass
from adapters.tvm import cuda_toolchain_facts
print(json.dumps(cuda_toolchain_facts()))
"""


def toolchain_facts(env: dict) -> list[str]:
    """This machine's CUDA toolchain as the steps see it (``env``), asked in a fresh process as a tvm
    worker imports TVM: nvcc, CUDA_PATH, CUDA_HOME, /usr/local/cuda/include, where cuda_fp16.h and CCCL
    are, cuda-bindings, NVRTC, TVM's CUDA folder and its compile at fp32 and fp16."""
    try:
        p = subprocess.run([sys.executable, "-c", TOOLCHAIN_PROBE], capture_output=True, text=True, timeout=120,
                           cwd=ROOT, env=env)
        return [str(x) for x in json.loads(p.stdout.strip().splitlines()[-1])]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1][:200] if "p" in locals() else ""
        return [f"the toolchain could not be asked ({type(e).__name__}{': ' + tail if tail else ''})"]


def _child_setup() -> None:  # pragma: no cover - runs in the child, between fork and exec
    """In the step's process: SIGINT at its default (an inherited 'ignore' would make the window's
    interrupt a no-op), and on Linux SIGKILL when this script dies (PR_SET_PDEATHSIG), so that a
    step never outlives the command that started it and keeps the GPU busy into the next call."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # an ignored signal stays ignored across exec; a default one not
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_RUNNING: list = []  # the step running now: killed with its group when this script exits


def _kill_running() -> None:
    import signal

    for proc in list(_RUNNING):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def run_until(cmd: list[str], env: dict, seconds: float, log: Path | None = None) -> int:
    """``cmd`` until it ends or ``seconds`` pass; then SIGINT (an experiment stops as on ^C, its
    report rewritten), and SIGKILL to its process group :data:`KILL_AFTER_S` later. Its exit code
    (130 or -9 when stopped). Its output goes to ``log`` (else this script's)."""
    import atexit
    import signal

    atexit.register(_kill_running)
    out = open(log, "ab") if log is not None else None
    try:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True, preexec_fn=_child_setup,
                                stdout=out, stderr=subprocess.STDOUT if out else None, stdin=subprocess.DEVNULL)
        _RUNNING.append(proc)
        try:
            return proc.wait(timeout=max(1.0, seconds))
        except subprocess.TimeoutExpired:
            print(f"the window's {seconds:.0f} s for this step are spent: interrupting it", flush=True)
            proc.send_signal(signal.SIGINT)
            try:
                return proc.wait(timeout=KILL_AFTER_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                return proc.wait()
        except BaseException:  # this script interrupted or killed softly: the step goes with it
            _kill_running()
            raise
        finally:
            if proc in _RUNNING:
                _RUNNING.remove(proc)
            try:  # what the step left behind in its group
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    finally:
        if out is not None:
            out.close()


def _tail(path: Path, n: int = 8) -> list[str]:
    try:
        return path.read_text(errors="replace").rstrip().splitlines()[-n:]
    except OSError:
        return []


def run_window(args, extra: list[str]) -> int:
    t0 = time.monotonic()
    end = t0 + args.deadline
    work, out, fake = Path(args.work), Path(args.out), args.fake
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    carried = Path(args.resume_from) if args.resume_from else CARRIED
    state = load_state(work, carried, say)
    call = {"started": _now(), "deadline_s": args.deadline, "fake": fake, "lines": lines, "steps": []}
    state["calls"].append(call)
    wl, install, absent = wheel_report(Path(args.wheels))
    for line in wl:
        say(line)
    for problem in install_wheels(install, Path(args.site)):
        say(problem)
    if install and str(Path(args.site)) not in sys.path:
        sys.path.insert(0, str(Path(args.site)))  # this script's own imports (the estimates) see them too
    env = window_env(work, Path(args.site))
    include, problems = install_header_wheels(Path(args.wheels), Path(args.site).parent / "cuda-headers")
    for problem in problems:
        say(problem)
    cuda_path, why = tvm_cuda_path(env, include, Path(args.site).parent)
    if cuda_path:
        env["CUDA_PATH"] = cuda_path
    say(f"tvm's CUDA compile: {why}")
    for fact in toolchain_facts(env):  # what the next session needs to know about this machine's toolchain
        say(f"toolchain: {fact}")
    gpu = probe_gpu(fake, env)
    call["device"] = gpu.get("name")
    call["clocks_start"] = gpu.get("clocks")
    if gpu.get("missing"):
        say(f"no GPU here ({gpu['missing']}): the GPU steps are not started; the next call tries again")
    else:
        say(f"GPU: {gpu.get('name')}; {gpu.get('clocks')}; the clocks and settings are left alone (never locked, "
            "reset or changed by this window)")
        if gpu.get("cuda"):
            say(f"the IOS CUDA runtime cannot run here ({gpu['cuda']}): its paths and cells fail or are skipped "
                "with that reason; the window goes on")
        problem = plan_cache_problem(work / "profiles.sqlite", gpu.get("cudnn"))
        if problem:
            say(problem)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    estimates = {k: 1.0 for k in STEPS}
    if not fake:
        try:
            estimates = {k: v[0] for k, v in step_estimates().items()}
        except Exception as e:  # noqa: BLE001 - a package the estimates import is missing: assume
            say(f"the steps' estimates could not be made here ({type(e).__name__}: {str(e)[:120]}): each step is "
                "assumed to take 60 s")
            estimates = {k: 60.0 for k in STEPS}
    gone = gpu.get("missing")
    save(state, work, out, say)
    for name in STEPS:
        st = state["steps"].setdefault(name, {})
        if st.get("status") in ("done", "failed"):
            continue
        if gone is None and name != STEPS[0]:
            gone = probe_gpu(fake, env).get("missing")
            if gone:
                say(f"the GPU vanished before step {name} ({gone}): the steps left wait for the next call")
        if gone:
            st.update(status="waiting", note=f"no GPU ({str(gone)[:120]})")
            continue
        left = end - time.monotonic()
        room = left - RESERVE_S
        need = (FAKE_MIN_HEADLINE_S if fake else MIN_HEADLINE_S) if name == "headline" else estimates.get(name, 60.0)
        if room < need:
            st.update(status="waiting", note=f"not started: needs about {need:.0f} s, {max(room, 0):.0f} s were left; "
                                             "the next call runs it")
            say(f"{name}: {st['note']}")
            save(state, work, out, say)
            break
        cmd = step_command(name, work, room, fake, extra if name == "headline" else [])
        log = work / "logs" / f"{name}.txt"
        with open(log, "a") as f:
            f.write(f"\n==== {_now()}: {' '.join(cmd)}\n")
        say(f"{name}: {TITLES[name]}: {' '.join(cmd)}")
        t = time.monotonic()
        rc = run_until(cmd, env, left - PACK_S - KILL_AFTER_S, log)
        seconds = round(time.monotonic() - t, 1)
        if name == "headline":
            status = {0: "done", 3: "stopped"}.get(rc, "stopped" if rc in (130, -2, -9) else "failed")
        elif name == "doctor":
            status = "done" if rc in (0, 1) else "stopped" if rc in (130, -2, -9) else "failed"
        else:
            status = "done" if rc == 0 else "stopped" if rc in (130, -2, -9) else "failed"
        note = {"done": "", "stopped": "stopped at the window's end: the next call runs it again"
                if name != "headline" else "the next call resumes it", "failed": "see its log"}[status]
        if status == "stopped" and name != "headline" and st.get("calls", 0) >= 1:
            # stopped in two windows: a step that does not fit one is not started a third time
            status, note = "failed", "stopped at the window's end twice: run it alone, in a call of its own"
        if name == "doctor" and rc == 1:
            note = "a path failed or computed a wrong output: see its log"
        st.update(status=status, rc=rc, seconds=seconds, note=note, log=f"logs/{name}.txt",
                  calls=st.get("calls", 0) + 1)
        call["steps"].append({"step": name, "status": status, "rc": rc, "seconds": seconds})
        say(f"{name}: {status} (exit {rc}, {seconds:.1f} s)" + (f": {note}" if note else ""))
        for line in _tail(log):
            print(f"    {line}")
        save(state, work, out, say)
        if status == "stopped":
            break
    after = probe_gpu(fake, env) if not gone else {}
    call["clocks_end"] = after.get("clocks")
    call["clocks_note"] = (f"left alone (nothing here locks, resets or sets them); at the start: "
                           f"{call.get('clocks_start') or '-'}; at the end: {call.get('clocks_end') or '-'}")
    call["seconds"] = round(time.monotonic() - t0, 1)
    todo = [n for n in STEPS if (state["steps"].get(n) or {}).get("status") not in ("done", "failed")]
    say("window: " + ("every step done" if not todo else f"left for the next call: {', '.join(todo)}")
        + f" ({call['seconds']:.0f} s); the records: {out / ARCHIVE}")
    if todo:
        say("next call: copy window.tar.gz from this call's files to .window/window.tar.gz (if the machine is not "
            f"kept), then {run_call(args.deadline)}")
    save(state, work, out, say)
    return 0 if not todo else 3


def dry_run(args, extra: list[str]) -> int:
    lines, _, _ = wheel_report(Path(args.wheels), join=False)
    print("\n".join(lines) or "nothing missing here")
    print("\n".join(tvm_compile_wheels(Path(args.wheels))))
    tree = tree_mib()
    print(transfers(Path(args.wheels), tree), flush=True)
    gpu = args.gpu or "h200"
    est = step_estimates(gpu)
    from ios_bench.experiments.headline import GPUS

    print(f"\nthe window, step by step (estimates for an {GPUS[gpu]}; a step that does not fit what is left waits for "
          f"the next call; the headline takes what the window leaves, at least {MIN_HEADLINE_S:.0f} s):")
    total = 0.0
    for i, name in enumerate(STEPS, 1):
        seconds, how = est[name]
        total += seconds
        print(f"  {i}. {name:<9}{seconds:7.0f} s  {TITLES[name]}; {how}")
    windows = total / (args.deadline - RESERVE_S)
    print(f"  working folder {args.work} (outside $OUT), packed into $OUT/{ARCHIVE} after every step (records and "
          f"logs, never compile caches; at most {ARCHIVE_LIMIT_MIB:g} MiB), with {REPORT} and {STATE} beside it")
    print("  the clocks and settings of the GPU are left alone (only read, at the start and the end)")
    print(f"\nthe call to make (device tool), once per window, the same each time:\n  {run_call(args.deadline)}")
    print(f"  a fresh machine resumes from .window/{ARCHIVE}: copy the last call's {ARCHIVE} there and carry "
          "'.window' (it is named above once the file is there)")
    print(f"estimated duration {total:.0f} s on {GPUS[gpu]} ({windows:.1f} windows of {args.deadline:g} s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="where the archive and report go ($OUT there)")
    ap.add_argument("--work", default=str(WORK), help="the working folder (outside --out)")
    ap.add_argument("--resume-from", default=None,
                    help=f"a carried copy of the last call's archive (default {CARRIED.relative_to(ROOT)} when there)")
    ap.add_argument("--deadline", type=float, default=WINDOW_S, help="seconds this window may take")
    ap.add_argument("--wheels", default=str(WHEELS), help="folder of carried wheels (and wheels in parts)")
    ap.add_argument("--site", default="/tmp/ios-bench-headline/site", help="where carried wheels are installed")
    ap.add_argument("--fetch-wheels", action="store_true", help="download the wheels a lent machine lacks (here)")
    ap.add_argument("--part-mib", type=float, default=None,
                    help="largest part of a wheel split for transfer (default: what a call leaves beside the tree)")
    ap.add_argument("--check", action="store_true", help="say what is missing, what is carried and how it travels")
    ap.add_argument("--dry-run", action="store_true",
                    help="the steps in order with their estimates, and the device tool's call to make")
    ap.add_argument("--gpu", choices=("h100", "h200"), default=None, help="--dry-run: the GPU costed")
    ap.add_argument("--fake", action="store_true",
                    help="the whole window on the CPU: the fake device, the quick forms (a run before the real one)")
    args, extra = ap.parse_known_args(argv)
    if not 60 <= args.deadline <= 600:
        print(f"error: bad --deadline {args.deadline:g}: expected 60 to 600 seconds (one device command is at most "
              "600)", file=sys.stderr)
        return 2
    if args.part_mib is not None and not 1 <= args.part_mib < CARRY_LIMIT_MIB:
        print(f"error: bad --part-mib {args.part_mib:g}: expected 1 to {CARRY_LIMIT_MIB} (less)", file=sys.stderr)
        return 2
    if args.fetch_wheels:
        return fetch_wheels(Path(args.wheels), args.part_mib)
    if args.dry_run:
        return dry_run(args, extra)
    if args.check:
        lines, _, _ = wheel_report(Path(args.wheels), join=False)
        print("\n".join(lines) or "nothing missing here")
        print("\n".join(tvm_compile_wheels(Path(args.wheels))))
        print(transfers(Path(args.wheels)), flush=True)
        return 0
    if not args.out:
        print("error: --out is required for a window (where its archive and report go: $OUT there)", file=sys.stderr)
        return 2
    try:
        Path(args.work).resolve().relative_to(Path(args.out).resolve())
        print(f"error: --work {args.work} is inside --out {args.out}: the device tool empties --out before each call",
              file=sys.stderr)
        return 2
    except ValueError:
        pass
    return run_window(args, extra)


if __name__ == "__main__":
    sys.exit(main())
