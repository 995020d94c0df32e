"""The ``tvm`` and ``tvm-cudnn`` builds kept in the shared build cache (``adapters.build_cache``), so a
sweep's later rounds (fresh processes) load the compiled module instead of compiling it again.

A build's compiled Relax VM executable is exported (``Executable.export_library``: the host code as a
shared library, its device modules, CUDA's included, packed into it) as ``<key>.so`` in the cache's
``tvm`` directory (``tvm@<gpu>`` on a GPU), and a later build with the same key loads it
(``tvm.runtime.load_module``, run by ``relax.VirtualMachine``) instead of compiling. The key
(:func:`build_key`) changes whenever the build would: the Relax module that is compiled (its text:
structure, shapes, scalar constants, the fp16 casts; and the bytes of every tensor constant in it,
the weights bound into it), the batch, the precision, the target string (host, ``-mcpu``, cores),
cuDNN offload on or off, the pipeline, TVM's and tvm-ffi's versions (also the cache's version, so a
cache another TVM wrote is rejected whole). A damaged or foreign cache is emptied and rebuilt by
``BuildCache.open``; an entry that does not load is removed and rebuilt here. A cold build runs the
exported and reloaded library too, so cold and warm rounds run the same code; the harness checks
the output against the oracle after every build, warm or cold.

On the CPU exporting costs about what it saves at the first call: ``tvm.compile`` for llvm leaves the
machine code to be generated when the module is first loaded into a VM (squeezenet here: 2.6 s), and
the export generates it instead (2.0 s, linking included), so a cold build costs about what it did.
Measured here under load (2026-11-28): squeezenet b1 cold 5.3 s, warm 0.08-0.14 s (4.3-5.8 s a round
without the cache); inception_v3 b1 cold 14.3 s (compile 8.6, export 5.1), warm 0.57 s (load 0.20). An
entry holds its weights (inception_v3: 96 MB), one per model, batch, precision and target.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from ios_core.atomic import atomic_write_path

FRAMEWORK = "tvm"  # the cache's directory (tvm and tvm-cudnn share it: cuDNN is in the key)
SUFFIX = ".so"


def versions() -> str:
    """TVM's and tvm-ffi's versions, as the cache is sealed with them."""
    import tvm

    try:
        from importlib.metadata import version

        ffi = version("apache-tvm-ffi")
    except Exception:  # noqa: BLE001 - a TVM built from source: its own version alone
        ffi = "?"
    return f"{tvm.__version__} tvm-ffi {ffi}"


def gpu_name(device: str) -> str:
    """The GPU's name for the cache's directory (``tvm@<gpu>``): TVM's own word for ``device``."""
    import tvm

    try:
        return str(tvm.cuda(int(device.split(":")[1]) if ":" in device else 0).device_name or "cuda")
    except Exception:  # noqa: BLE001 - no GPU here (a cuda build compiled for later): the kind alone
        return "cuda"


def constants(mod) -> list:
    """The tensor constants of ``mod``'s Relax functions (the bound weights, and any other), in order."""
    from tvm import relax

    found: list = []

    @relax.expr_functor.visitor
    class _Constants(relax.PyExprVisitor):
        def visit_generic_const_(self, op) -> None:  # TVM 0.27's hook for every constant kind
            data = getattr(op, "value", getattr(op, "data", None))  # a tensor (a scalar is in the text)
            if data is not None and hasattr(data, "numpy"):
                found.append(data)

    v = _Constants()
    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            v.visit_expr(func)
    return found


def build_key(mod, *, batch_size: int, precision: str, target, cudnn: bool, pipeline: str) -> str:
    """The cache key of compiling ``mod`` (a Relax module, weights bound) so: SHA-1 of its text (where
    a tensor constant is a metadata reference), every tensor constant's shape, dtype and bytes, and
    the build's settings; 32 hex digits."""
    h = hashlib.sha1()
    for part in (versions(), f"b{int(batch_size)}", precision, str(target), f"cudnn={bool(cudnn)}", pipeline):
        h.update(part.encode() + b"|")
    h.update(mod.script().encode())
    for c in constants(mod):
        a = c.numpy()
        h.update(f"|{a.shape}{a.dtype}|".encode())
        h.update(memoryview(np.ascontiguousarray(a)).cast("B"))  # its bytes, not copied again
    return h.hexdigest()[:32]


def compiled(cache, key: str, compile_fn):
    """The module of build ``key``: loaded from ``cache`` (a ``BuildCache`` or None) where it holds it,
    else ``compile_fn()`` exported there and loaded back. Returns (module or executable, info): the
    record's ``compile_seconds`` (a compile), ``load_seconds`` (a load), ``export_seconds`` and the
    ``build_cache`` entry (``state`` warm only where this build's own entry was loaded)."""
    import tvm

    info: dict = {}
    if cache is None:
        t0 = time.perf_counter()
        ex = compile_fn()
        info["compile_seconds"] = time.perf_counter() - t0
        return ex, info
    entry = Path(cache.dir) / f"{key}{SUFFIX}"
    record = cache.info()["build_cache"]
    record["entry"] = entry.name
    if entry.is_file():
        t0 = time.perf_counter()
        try:
            mod = tvm.runtime.load_module(str(entry))
            info["load_seconds"] = time.perf_counter() - t0
            record.update(state="warm", reused=True)
            return mod, {**info, "build_cache": record}
        except Exception as e:  # noqa: BLE001 - an entry that does not load: removed, rebuilt below
            entry.unlink(missing_ok=True)
            record["note"] = f"entry {entry.name} did not load ({type(e).__name__}: {str(e)[:160]}); rebuilt"
    # not this build's entry: a cold build, whatever else the cache holds
    record.update(state="rejected" if cache.state == "rejected" else "cold", reused=False)
    t0 = time.perf_counter()
    ex = compile_fn()
    info["compile_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        # whole or absent: a build killed while exporting leaves no entry
        atomic_write_path(entry, lambda tmp: ex.export_library(tmp))
        mod = tvm.runtime.load_module(str(entry))
    except Exception as e:  # noqa: BLE001 - not exportable here (no C compiler, a module that cannot be saved)
        entry.unlink(missing_ok=True)
        record["note"] = f"not kept: export failed ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
        return ex, {**info, "build_cache": record}
    info["export_seconds"] = time.perf_counter() - t0
    cache.seal()
    return mod, {**info, "build_cache": record}
