"""The wheels a lent GPU machine lacks, for ``benchmarks/gpu_headline.py``: which packages the
harness needs there, the wheels fetched here for them, split into parts that fit one transfer beside
the working tree (and put together again there, checked against their manifest), checked for this
Python and platform, and installed apart from the machine's own packages."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / ".whl"
CARRY_LIMIT_MIB = 64  # what one call carries: the working tree and the carried paths together
MARGIN_MIB = 2.0  # left free beside the tree and a wheel part (the tree grows between calls)
PART_MIB = 40  # split_wheel's default where the tree is not measured
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
