"""CUDA folders as TVM's CUDA compile looks for them (adapters/tvm.py, issue 45), made of empty header
files: one place for the tests of the tvm peer's check and of the GPU window's ``CUDA_PATH``."""

from __future__ import annotations


def cuda_headers(include, runtime=True, cccl=True):
    """A CUDA include folder with (empty) header files where TVM's compile looks for them: the runtime's
    (``cuda_runtime.h``, ``cuda_fp16.h``) and CCCL's in its ``cccl/``."""
    include.mkdir(parents=True, exist_ok=True)
    if runtime:
        for h in ("cuda_runtime.h", "cuda_fp16.h"):
            (include / h).write_text("")
    if cccl:
        std = include / "cccl" / "cuda" / "std"
        std.mkdir(parents=True, exist_ok=True)
        for h in ("cstdint", "type_traits", "limits"):
            (std / h).write_text("")
    return include


def cuda_toolkit(root, **kw):
    """A CUDA 13 toolkit's layout: include/ a link to targets/<triple>/include, CCCL in its cccl/ (TVM
    looks for cccl/ there only)."""
    from adapters import tvm as tvm_adapter

    inc = cuda_headers(root / "targets" / tvm_adapter._target_triples()[0] / "include", **kw)
    (root / "include").symlink_to(inc, target_is_directory=True)
    return root
