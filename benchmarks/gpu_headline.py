"""The GPU headline on a bare lent machine: what only such a machine needs, around one command.

The headline itself is an experiment (``ios-bench experiment headline --device cuda``: its plan,
deadline, resuming, doctor, dry run and report are ios_bench.experiments.headline and .runner).
This script adds only what a bare machine lacks: the packages the harness needs that are not
installed there, carried as wheels and installed into a private folder, never over the machine's
own packages.

    python benchmarks/gpu_headline.py --fetch-wheels   # here: the wheels a lent machine lacks -> .whl/,
                                                       # the ones over --part-mib split in parts
    python benchmarks/gpu_headline.py --check          # here or there: what is carried, in how many transfers
    python benchmarks/gpu_headline.py --dry-run        # --check, then the experiment's plan and estimate
    python3 benchmarks/gpu_headline.py --out $OUT/headline --deadline 540   # there: one window
    python3 benchmarks/gpu_headline.py --out $OUT/headline --deadline 540   # the next window resumes it

**Wheels.** ``.whl/`` is ignored by git; the device tool carries ignored paths named in ``carry``,
64 MiB in all per call. A wheel larger than that (``apache-tvm`` 0.27.0.post1 is about 100 MB) is
split by ``--fetch-wheels`` into parts (``<wheel>.part1of2``, ...) of at most ``--part-mib`` with a
manifest (``<wheel>.parts.json``: the whole wheel's size and SHA-256); the parts travel in separate
calls to the same warm machine and are put together there, checked against the manifest. A
missing part, a damaged wheel (size, SHA-256 or zip check) or one built for another Python or
platform is one line naming it; the headline goes on without that framework, whose cells are then
skipped with their reason (the framework is not importable).

**The window.** The wheels are installed (``pip install --no-index --no-deps --target``), then
``python -m ios_bench experiment headline --device cuda --deadline <what is left, less 45 s> --out OUT`` runs
with them on ``PYTHONPATH`` (``--resume`` where ``OUT`` holds the experiment already), the profile
database in ``OUT`` (its stage costs reused by the next window) and the builds in the machine's
user cache folder (``--build-cache user``). Exit 3: the deadline stopped it; run the same command
in the next window.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / ".whl"
CARRY_LIMIT_MIB = 64
PART_MIB = 60  # a part and the manifest fit one transfer with room to spare
WINDOW_S = 540.0  # one device command is at most 10 minutes; the issue asks for 9
# the experiment's --deadline is the window less this: a step started just before its deadline (a
# round, a wave, a search) finishes inside the window; one that does not is interrupted at the
# window's end (SIGINT: the experiment records it and rewrites its report), then killed
RESERVE_S = 45.0
KILL_AFTER_S = 30.0  # after the SIGINT at the window's end
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
)
# What --fetch-wheels downloads (the H200 of 2026-11-26 lacked the first two; pinned as it ran there,
# TVM as pyproject.toml pins it)
FETCH = ("nvidia-cudnn-frontend==1.28.0", "platformdirs", "nvidia-ml-py", "apache-tvm==0.27.0.post1",
         "apache-tvm-ffi==0.1.14.post0")
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


def fetch_wheels(folder: Path, part_mib: float = PART_MIB) -> int:
    """Download :data:`FETCH` for the lent machines' Python and platform into ``folder`` (here,
    with pip), then split the wheels over ``part_mib`` MiB into parts."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--python-version",
           TARGET_PYTHON, "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
           "--platform", "manylinux2014_x86_64", "-d", str(folder), *FETCH]
    print(" ".join(cmd))
    rc = subprocess.call(cmd)
    for w in sorted(folder.glob("*.whl")):
        parts = split_wheel(w, part_mib)
        if parts:
            print(f"{w.name}: {w.with_name(w.name + '.parts.json').name} and {len(parts)} parts of at most "
                  f"{part_mib:g} MiB (each travels in its own call)")
    print(transfers(folder))
    return rc


def transfers(folder: Path) -> str:
    """How the wheel folder travels: its files grouped into carries of at most the limit."""
    files = sorted((p for p in folder.iterdir() if p.is_file()), key=lambda p: -p.stat().st_size) \
        if folder.is_dir() else []
    loads: list[list] = []
    for f in files:
        mib = f.stat().st_size / 2**20
        for load in loads:
            if load[0] + mib <= CARRY_LIMIT_MIB:
                load[0] += mib
                load[1].append(f.name)
                break
        else:
            loads.append([mib, [f.name]])
    if not loads:
        return f"{folder}: no wheels"
    return f"{folder}: {len(loads)} transfer(s) of at most {CARRY_LIMIT_MIB} MiB: " + "; ".join(
        f"{i}. {load[0]:.1f} MiB ({', '.join(load[1])})" for i, load in enumerate(loads, 1))


# ---- the window ---------------------------------------------------------------------------------
def install_wheels(wheels: list[Path], site: Path) -> list[str]:
    """Each wheel installed on its own (one that fails does not stop the others); one line per
    failure."""
    problems = []
    site.mkdir(parents=True, exist_ok=True)
    for w in wheels:
        res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                              str(site), str(w)], capture_output=True, text=True)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["?"])[-1][:200]
            problems.append(f"{w.name}: pip could not install it ({last}): the headline goes on without it")
    return problems


def headline_command(out: Path, deadline: float, extra: list[str]) -> list[str]:
    """The experiment's one command for this window (``--resume`` where ``out`` holds it already)."""
    cmd = [sys.executable, "-m", "ios_bench", "experiment", "headline", "--device", "cuda", "--out", str(out),
           "--deadline", str(max(1, int(deadline))), "--no-progress", *extra]
    if (out / "experiment.json").is_file():
        cmd.append("--resume")
    return cmd


def window_env(out: Path, site: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["IOS_BENCH_CACHE"] = str(out / "profiles.sqlite")  # the profile database travels with the results
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return env


def run_window(args, extra: list[str]) -> int:
    t0 = time.monotonic()
    lines, install, absent = wheel_report(Path(args.wheels))
    print(f"packages missing before starting: {len(lines) or 'none'}")
    for line in lines:
        print(f"  {line}")
    for problem in install_wheels(install, Path(args.site)):
        print(f"  {problem}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    left = args.deadline - (time.monotonic() - t0)
    cmd = headline_command(out, left - RESERVE_S, extra)
    print(" ".join(cmd), flush=True)
    return run_until(cmd, window_env(out, Path(args.site)), left)


def run_until(cmd: list[str], env: dict, seconds: float) -> int:
    """``cmd`` until it ends or ``seconds`` pass; then SIGINT (the experiment stops as on ^C, its
    report rewritten), and SIGKILL to its process group 30 s later. Its exit code (130 or -9 when
    stopped)."""
    import signal

    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=max(1.0, seconds))
    except subprocess.TimeoutExpired:
        print(f"the window's {seconds:.0f} s are spent: interrupting the step that ran over", flush=True)
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=KILL_AFTER_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="the experiment folder (the next window: the same folder)")
    ap.add_argument("--deadline", type=float, default=WINDOW_S, help="seconds this window may take")
    ap.add_argument("--wheels", default=str(WHEELS), help="folder of carried wheels (and wheels in parts)")
    ap.add_argument("--site", default="/tmp/ios-bench-headline/site", help="where carried wheels are installed")
    ap.add_argument("--fetch-wheels", action="store_true", help="download the wheels a lent machine lacks (here)")
    ap.add_argument("--part-mib", type=float, default=PART_MIB, help="largest part of a wheel split for transfer")
    ap.add_argument("--check", action="store_true", help="say what is missing, what is carried and how it travels")
    ap.add_argument("--dry-run", action="store_true",
                    help="--check, then the experiment's own dry run (ios-bench experiment headline --device cuda "
                         "--dry-run): its last line is 'estimated duration N s on <GPU>'")
    args, extra = ap.parse_known_args(argv)
    if not 60 <= args.deadline <= 600:
        print(f"error: bad --deadline {args.deadline:g}: expected 60 to 600 seconds (one device command is at most "
              "600)", file=sys.stderr)
        return 2
    if not 1 <= args.part_mib < CARRY_LIMIT_MIB:
        print(f"error: bad --part-mib {args.part_mib:g}: expected 1 to {CARRY_LIMIT_MIB} (less)", file=sys.stderr)
        return 2
    if args.fetch_wheels:
        return fetch_wheels(Path(args.wheels), args.part_mib)
    if args.check or args.dry_run:
        lines, _, _ = wheel_report(Path(args.wheels), join=False)
        print("\n".join(lines) or "nothing missing here")
        print(transfers(Path(args.wheels)), flush=True)
        if not args.dry_run:
            return 0
        return subprocess.call([sys.executable, "-m", "ios_bench", "experiment", "headline", "--device", "cuda",
                                "--dry-run", *extra], cwd=ROOT)
    if not args.out:
        print("error: --out is required for a window (the experiment folder; the next window names it again)",
              file=sys.stderr)
        return 2
    return run_window(args, extra)


if __name__ == "__main__":
    sys.exit(main())
