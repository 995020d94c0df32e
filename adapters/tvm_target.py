"""TVM's compilation targets for the host CPU (``adapters.tvm``): LLVM's name for the processor, less
the instruction sets the operating system does not offer.

LLVM names the processor from its model (``znver4``, ``sapphirerapids``) and then assumes every
instruction set that model has. A virtual machine may hide some of them: the AMD EPYC (Zen 4) VM of
2026-11-28 is ``znver4`` to LLVM, whose AVX-512 its hypervisor masks (``/proc/cpuinfo`` lists no
``avx512*`` flag), and code built for ``-mcpu=znver4`` died there of SIGILL. So the target turns off
(``-mattr=-avx512f,...``) each instruction set of :data:`GATED` that ``/proc/cpuinfo`` does not list.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

# LLVM's x86 feature names whose instructions a model may have and a hypervisor may hide; each is
# compared with /proc/cpuinfo's flags without '_' and '-' (cpuinfo writes avx512_vnni, amx_tile)
GATED = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi", "avx512vbmi2",
         "avx512vnni", "avx512bitalg", "avx512vpopcntdq", "avx512bf16", "avx512fp16", "avx512vp2intersect",
         "avxvnni", "gfni", "vaes", "vpclmulqdq", "amx-tile", "amx-int8", "amx-bf16")


def cpu_flags(cpuinfo: str | None = None) -> set[str] | None:
    """The processor's flags as the operating system lists them (``/proc/cpuinfo``'s first ``flags``
    line), normalized (no '_' or '-'); None where there is no such list (not Linux, not x86)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and ":" in line:
            return {f.replace("_", "").replace("-", "") for f in line.split(":", 1)[1].split()}
    return None


def hidden_features(flags: set[str] | None) -> list[str]:
    """The features of :data:`GATED` the flags do not list, as LLVM turns them off (``-avx512f``); none
    where the flags are unknown."""
    if flags is None:
        return []
    return [f"-{f}" for f in GATED if f.replace("-", "") not in flags]


def host_target(threads: int | None = None, spec=None):
    """The compilation target: ``spec`` (a target string or dict) if given, else the host CPU
    (``llvm -mcpu=<LLVM's name for this CPU> -mattr=<the hidden features off> -num-cores <threads>``)."""
    import tvm
    from tvm.target import codegen

    if spec is not None:
        return tvm.target.Target(spec)
    config: dict = {"kind": "llvm", "mcpu": str(codegen.llvm_get_system_cpu())}
    off = hidden_features(cpu_flags())
    if off:
        config["mattr"] = off
    if threads:
        config["num-cores"] = int(threads)
    return tvm.target.Target(config)


def target_key(target) -> str:
    """A short stable hash naming a target's tuning database folder."""
    return hashlib.sha1(str(target).encode()).hexdigest()[:12]
