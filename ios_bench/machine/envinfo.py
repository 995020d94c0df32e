"""Environment capture: everything a result depends on, recorded as ``env.json``.

CPU model, cores, memory, OS, Python, every framework's version, GPU and driver where present,
git commit, command line, thread settings. ``ios-bench env`` prints the same dictionary.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import sys
from pathlib import Path

from ios_bench.machine import system
from ios_core.measurement.threads import ENV_VARS as THREAD_ENV_VARS  # the one list (ios_core.measurement.threads)
from ios_core.measurement.threads import spin_policy, usable_cores

# distributions whose versions matter for the results
PACKAGES = ("numpy", "torch", "pandas", "onnx", "onnxruntime", "openvino", "tensorflow", "apache-tvm", "tensorrt",
            "cupy-cuda12x", "matplotlib")


def cpu_info() -> dict:
    text = system.read(system.procfs("cpuinfo")) or ""
    model = re.search(r"^model name\s*:\s*(.+)$", text, flags=re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, flags=re.M)
    flag_set = set(flags.group(1).split()) if flags else set()
    interesting = sorted(f for f in flag_set if f.startswith(("avx", "amx", "fma", "sse4", "f16c")))
    info = {"model": model.group(1).strip() if model else platform.processor() or platform.machine(),
            "architecture": platform.machine(), "logical_cores": os.cpu_count(), "isa_flags": interesting,
            "usable_cores": usable_cores()}  # the affinity mask: the default thread budget
    try:
        import psutil

        info["physical_cores"] = psutil.cpu_count(logical=False)
        info["affinity"] = len(psutil.Process().cpu_affinity()) if hasattr(psutil.Process, "cpu_affinity") else None
    except Exception:
        pass
    return info


def memory_info() -> dict:
    try:
        import psutil

        vm = psutil.virtual_memory()
        return {"total_gib": round(vm.total / 2**30, 2), "available_gib": round(vm.available / 2**30, 2)}
    except Exception:
        return {}


def os_info() -> dict:
    info = {"system": platform.system(), "release": platform.release(), "platform": platform.platform()}
    osr = system.read(Path("/etc/os-release")) or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', osr, flags=re.M)
    if m:
        info["distribution"] = m.group(1)
    virt = system.read(system.sysfs("class", "dmi", "id", "product_name"))
    if virt:
        info["product"] = virt
    return info


def package_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def framework_info(device: str = "cpu") -> dict:
    """Every registered adapter: version and availability (None, or why it cannot run)."""
    try:
        import adapters
    except Exception as e:  # pragma: no cover - broken install
        return {"error": str(e)}
    out = {}
    for name in adapters.names():
        try:
            a = adapters.get(name)
            out[name] = {"version": a.version(), "available": a.available(device) is None,
                         "reason": a.available(device), "precision": getattr(a, "precision", None)}
        except Exception as e:
            out[name] = {"available": False, "reason": f"{type(e).__name__}: {e}"}
    return out


def gpu_info() -> list[dict] | str:
    from ios_bench.machine.clocks import query_gpus

    gpus, reason = query_gpus()
    return gpus if gpus else reason


def git_info(root: str | os.PathLike | None = None) -> dict:
    """The commit of ios-bench's own checkout (and whether tracked files differ from it), read
    without writing to the repository: ``git status`` would otherwise refresh the index and take
    ``.git/index.lock``, which can make a user's concurrent git command fail. Git's
    ``--no-optional-locks`` mode (``GIT_OPTIONAL_LOCKS=0``) skips that refresh."""
    root = Path(root) if root is not None else Path(__file__).resolve().parents[2]
    git = ["git", "--no-optional-locks", "-C", str(root)]
    r = system.run([*git, "rev-parse", "HEAD"], timeout=10)
    if not r.ok:
        return {}
    info = {"commit": r.stdout.strip()}
    d = system.run([*git, "status", "--porcelain", "--untracked-files=no"], timeout=10)
    if d.ok:
        info["dirty"] = bool(d.stdout.strip())
    return info


def collect(device: str = "cpu", frameworks: bool = True) -> dict:
    from ios_bench.machine.clocks import read_cpu_settings

    env = {
        "captured": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "command_line": ["ios-bench" if Path(sys.argv[0]).name in ("__main__.py", "ios-bench") else sys.argv[0],
                         *sys.argv[1:]],
        "cpu": cpu_info(),
        "memory": memory_info(),
        "os": os_info(),
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "packages": package_versions(),
        "gpu": gpu_info(),
        "git": git_info(),
        "thread_env": {k: os.environ[k] for k in THREAD_ENV_VARS if k in os.environ},
        "spin_policy": spin_policy(),
        "cpu_clocks": read_cpu_settings(),
    }
    try:
        env["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    if frameworks:
        env["frameworks"] = framework_info(device)
    return env
