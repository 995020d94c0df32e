"""Every CUDA C source the project compiles, compiled here with NVRTC (``nvidia-cuda-nvrtc-cu12``:
the same compiler CuPy's ``RawModule`` uses on a GPU machine), without a GPU.

* :func:`ios_core.runtime.cuda_kernels.kernel_source` compiles at every precision (fp32, and the
  fp16 and bf16 kernels, which load and store 16-bit values and compute in float) for the oldest
  and newest architectures the gpu extra targets, with CuPy's default options and no header (CuPy
  adds none: ``INFINITY`` from ``math.h`` would not exist there, and did not, see issue 22; nor
  would ``cuda_fp16.h``).
* ... and assembles (``-arch=sm_XX``, as CuPy compiles on a GPU) for the oldest and newest GPU each
  precision runs on: the fp16 conversions are inline PTX, which only the assembly checks.
* Every kernel the Python side launches is an entry of the PTX, and each launch passes as many
  arguments as the entry has parameters, each of the PTX parameter's width (pointer, 32-bit,
  64-bit, float): a launch that disagrees with its kernel is caught here, not on a GPU.
* No other CUDA C is compiled anywhere in the project (no ``RawKernel``, ``ElementwiseKernel``,
  ``ReductionKernel`` or ``RawModule`` outside ``cuda_kernels.py``).
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHS = ("compute_70", "compute_90")
OPTIONS = ("-std=c++17",)  # CuPy 14's RawModule default


def _nvrtc():
    try:
        import nvidia.cuda_nvrtc
    except ImportError:
        pytest.skip("nvidia-cuda-nvrtc-cu12 is not installed (it is in the gpu-api extra: make setup)")
    lib = next(Path(list(nvidia.cuda_nvrtc.__path__)[0], "lib").glob("libnvrtc.so.*"), None)
    if lib is None:
        pytest.skip("nvidia-cuda-nvrtc-cu12 has no libnvrtc.so here")
    return ctypes.CDLL(str(lib))


def nvrtc_compile(source: str, options) -> tuple[bool, str, str]:
    """(ok, log, ptx) of NVRTC compiling ``source``."""
    lib = _nvrtc()
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"ios_kernels.cu", 0, None, None) == 0
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        ok = lib.nvrtcCompileProgram(prog, len(options), opts) == 0
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        ptx = ""
        if ok:
            lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, buf)
            ptx = buf.value.decode()
        return ok, log.value.decode(errors="replace"), ptx
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def ptx_entries(ptx: str) -> dict[str, list[str]]:
    """Kernel name -> its parameters' PTX types (``.u64``, ``.u32``, ``.f32``, ...)."""
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\((.*?)\)", ptx, flags=re.S):
        out[m.group(1)] = re.findall(r"\.param\s+(\.\w+)", m.group(2))
    return out


@pytest.fixture(scope="module")
def compiled_ptx():
    """(precision, arch) -> the PTX NVRTC makes of the runtime's kernels at that precision."""
    from ios_core.runtime.cuda_kernels import PRECISIONS, kernel_source

    out = {}
    for precision in PRECISIONS:
        for arch in ARCHS:
            ok, log, ptx = nvrtc_compile(kernel_source(precision), (*OPTIONS, f"-arch={arch}"))
            assert ok, f"NVRTC ({arch}) rejects the {precision} kernels:\n{log}"
            out[(precision, arch)] = ptx
    return out


@pytest.fixture(scope="module")
def compiled(compiled_ptx):
    return {key: ptx_entries(ptx) for key, ptx in compiled_ptx.items()}


def test_nvrtc_compiles_the_runtime_kernels(compiled):
    from ios_core.runtime.cuda_kernels import KERNEL_NAMES, PRECISIONS

    assert set(PRECISIONS) == {"fp32", "fp16", "bf16"}
    for key, entries in compiled.items():
        missing = [k for k in KERNEL_NAMES if k not in entries]
        assert not missing, (key, missing)


def _body(ptx: str, name: str) -> str:
    start = ptx.index(f".entry {name}(")
    end = ptx.find(".entry ", start + 1)
    return ptx[start:end if end > 0 else len(ptx)]


def test_half_kernels_load_and_store_16_bit_values_and_compute_in_float(compiled_ptx):
    """The fp16 and bf16 kernels move 16-bit values (``ld/st.global.u16``) and convert at each load
    and store: fp16 with the cvt instructions (round to nearest even when storing), bf16 by shifting
    its bits into a float's top half; the arithmetic stays f32. fp32 moves 32-bit values, no cvt."""
    from ios_core.runtime.cuda_kernels import KERNEL_NAMES

    for arch in ARCHS:
        fp32, fp16, bf16 = (compiled_ptx[(p, arch)] for p in ("fp32", "fp16", "bf16"))
        assert "cvt.f32.f16" not in fp32 and "ld.global.u16" not in fp32
        for name in KERNEL_NAMES:
            for precision, ptx in (("fp16", fp16), ("bf16", bf16)):
                body = _body(ptx, name)
                assert "ld.global.u16" in body or "ld.global.nc.u16" in body, (precision, arch, name)
                assert "st.global.u16" in body or "st.global.b16" in body, (precision, arch, name)
                assert "ld.global.f32" not in body and "st.global.f32" not in body, (precision, arch, name)
            if name != "ios_shuffle":  # a shuffle copies the 16 bits as they are
                assert "cvt.f32.f16" in _body(fp16, name) and "cvt.rn.f16.f32" in _body(fp16, name), (arch, name)
                assert "cvt.f32.f16" not in _body(bf16, name), (arch, name)
        assert "fma.rn.f32" in _body(fp16, "ios_linear") and "fma.rn.f32" in _body(bf16, "ios_linear")


# The GPUs each precision's kernels are loaded on (CuPy's form): fp32 and fp16 on every GPU CUDA 13 still
# compiles for (7.5 is the oldest) up to the H100/H200; bf16 only from 8.0 (cuda_kernels.arch_problem).
CUBIN_ARCHS = {"fp32": ("75", "90"), "fp16": ("75", "90"), "bf16": ("80", "90")}


def cubin_problem(source: str, arch: str) -> str | None:
    """NVRTC compiling ``source`` as CuPy's ``RawModule`` does on a GPU of ``arch``: ``-arch=sm_XX``,
    straight to a cubin (cupy/cuda/compiler.py, ``_get_arch_for_options_for_nvrtc``; cupy#5097), which
    assembles the PTX: an inline ``asm`` instruction the GPU lacks fails here, where ``compute_XX`` (PTX
    only) copies it unchecked. None, or NVRTC's log."""
    ok, log, _ = nvrtc_compile(source, (*OPTIONS, f"-arch=sm_{arch}"))
    return None if ok else log


def test_each_precisions_kernels_assemble_for_the_gpus_they_run_on():
    """The fp16 kernels' PTX ``cvt`` instructions (inline asm: NVRTC's PTX step does not read them) are
    assembled for the oldest and newest GPU each precision runs on, as CuPy compiles them there."""
    from ios_core.runtime.cuda_kernels import PRECISIONS, kernel_source

    assert set(CUBIN_ARCHS) == set(PRECISIONS)
    for precision, archs in CUBIN_ARCHS.items():
        for arch in archs:
            problem = cubin_problem(kernel_source(precision), arch)
            assert problem is None, f"sm_{arch} cannot assemble the {precision} kernels:\n{problem}"


def test_an_instruction_the_gpu_lacks_fails_the_assembly():
    """The check can fail: fp16's store with the ``.relu`` modifier (PTX ISA: sm_80 and later) passes
    NVRTC's PTX step and fails to assemble for a 7.5 GPU."""
    from ios_core.runtime.cuda_kernels import kernel_source

    broken = kernel_source("fp16").replace("cvt.rn.f16.f32", "cvt.rn.relu.f16.f32")
    assert nvrtc_compile(broken, (*OPTIONS, "-arch=compute_75"))[0]
    assert "requires .target sm_80" in (cubin_problem(broken, "75") or "")
    assert cubin_problem(broken, "80") is None


def test_unknown_kernel_precision_is_refused():
    from ios_core.runtime.cuda_kernels import kernel_source

    with pytest.raises(ValueError, match="int8"):
        kernel_source("int8")


def test_host_bf16_rounding_matches_torch():
    """The host's bf16 cast (weights, the input) rounds to nearest even, as torch's and as the
    kernels' ``ios_st``; reading back is exact."""
    import torch

    from ios_core.runtime.cuda_kernels import from_storage, to_storage

    rng = np.random.default_rng(0)
    a = np.concatenate([rng.standard_normal(4000).astype(np.float32) * 10.0 ** rng.integers(-8, 8, 4000),
                        np.array([0.0, -0.0, np.inf, -np.inf, 1.00390625, 1.01171875, 3.4e38], np.float32)])
    bits = to_storage(a, "bf16")
    assert bits.dtype == np.uint16
    want = torch.from_numpy(a).to(torch.bfloat16).float().numpy()
    assert np.array_equal(from_storage(bits, "bf16"), want)
    nan = from_storage(to_storage(np.array([np.nan], np.float32), "bf16"), "bf16")
    assert np.isnan(nan).all()
    with np.errstate(over="ignore"):
        assert np.array_equal(from_storage(to_storage(a, "fp16"), "fp16"), a.astype(np.float16).astype(np.float32))


def test_nvrtc_rejects_what_cupy_would_reject():
    """The check can fail: the pooling source of issue 22 (``-INFINITY`` without math.h)."""
    ok, log, _ = nvrtc_compile('extern "C" __global__ void k(float* y) { y[0] = -INFINITY; }',
                               (*OPTIONS, "-arch=compute_70"))
    assert not ok and "INFINITY" in log


class _Recorder:
    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    def __call__(self, grid, block, args):
        self.calls.append((self.name, args))


def _width(arg) -> str:
    if isinstance(arg, np.ndarray):
        return "ptr"
    if isinstance(arg, np.int32):
        return "32"
    if isinstance(arg, np.int64):
        return "64"
    if isinstance(arg, np.float32):
        return "f32"
    raise AssertionError(f"kernel argument of type {type(arg).__name__} (CuPy packs numpy scalars and arrays)")


_PTX_WIDTH = {".u64": ("ptr", "64"), ".s64": ("64",), ".u32": ("32",), ".s32": ("32",), ".f32": ("f32",)}


def test_every_launch_matches_its_kernels_parameters(compiled):
    """Each ``Kernels`` method's launch, on host arrays with the shapes and strides of device
    views (a channel slice, a broadcast 1x1 value), against the PTX entry it launches."""
    pytest.importorskip("cupy")
    from ios_core.runtime import cuda_kernels, cuda_tensor_kernels

    calls: list = []
    k = cuda_kernels.Kernels()  # defines the module; compiling and loading it needs a GPU
    k._fns = {name: _Recorder(name, calls) for name in cuda_kernels.KERNEL_NAMES}
    buf = np.zeros((2, 8, 5, 5), dtype=np.float32)
    x, y = buf[:, 2:6], np.zeros((2, 4, 5, 5), dtype=np.float32)
    one = np.zeros((2, 4, 1, 1), dtype=np.float32)
    per_c = np.zeros(4, dtype=np.float32)
    k.map(x, y)
    k.map(x, y, b=one, op=cuda_kernels.MAP_MUL, scale=per_c, shift=per_c, act="clip", alpha=-1.0, beta=1.0)
    k.pool2d(x, np.zeros((2, 4, 3, 3), np.float32), (3, 3), (2, 2), (1, 1), False, False)
    k.global_pool(x, one, True)
    k.shuffle(x, y, 2)
    k.resize(x, np.zeros((2, 4, 9, 7), np.float32), "bilinear", True)
    k.linear(np.zeros((2, 20), np.float32), np.zeros((20, 4), np.float32), per_c, one, act="relu")
    assert f"#define IOS_TILE {cuda_kernels.LINEAR_TILE}\n" in cuda_kernels.CUDA_SOURCE  # the launch's block size
    # the general tensors' kernels (cuda_tensor_kernels), on views as the program hands them: a token slice
    tk = cuda_tensor_kernels
    seq = np.zeros((2, 7, 6), np.float32)[:, 1:5]  # 4 tokens x 6 features of 7, each sample contiguous
    w = np.zeros((6, 3), np.float32)
    tk.matmul_launch(k, seq, [42, 0, 6, 1], w, [0, 0, 3, 1], np.zeros((2, 4, 3), np.float32), [12, 0, 3, 1],
                     (2, 1, 4, 6, 3), shift=np.zeros(3, np.float32), act_code=10)()
    tk.layernorm_launch(k, seq, np.zeros(6, np.float32), np.zeros(6, np.float32), np.zeros((2, 4, 6), np.float32), 1,
                        1e-6)()
    tk.rownorm_launch(k, seq, np.zeros((2, 4, 6), np.float32), 1, tk.ROWNORM_SOFTMAX)()
    tk.strided_launch(k, seq, tk.transpose_strides(seq, (1, 0)), np.zeros((2, 6, 4), np.float32))()
    assert f"#define IOS_RED {tk.REDUCE_THREADS}\n" in cuda_kernels.CUDA_SOURCE  # their block size
    assert f"#define IOS_TILE {tk.MATMUL_TILE}\n" in cuda_kernels.CUDA_SOURCE
    with pytest.raises(ValueError, match="do not fit"):
        k.linear(np.zeros((2, 20), np.float32), np.zeros((21, 4), np.float32), per_c, one)
    assert {name for name, _ in calls} == set(cuda_kernels.KERNEL_NAMES)
    for arch, entries in compiled.items():  # (precision, arch): every precision's kernels take the same arguments
        for name, args in calls:
            params = entries[name]
            assert len(args) == len(params), (arch, name, len(args), len(params))
            for i, (a, p) in enumerate(zip(args, params)):
                assert _width(a) in _PTX_WIDTH[p], (arch, name, i, _width(a), p)


def test_a_broadcast_value_gets_stride_zero():
    from ios_core.runtime.cuda_kernels import strides_for

    one = np.zeros((2, 4, 1, 1), dtype=np.float32)
    assert strides_for(one, (2, 4, 5, 5)) == [4, 1, 0, 0]
    sliced = np.zeros((2, 8, 5, 5), dtype=np.float32)[:, 2:6]
    assert strides_for(sliced, (2, 4, 5, 5)) == [200, 25, 5, 1]


_COMPILERS = re.compile(r"\b(RawModule|RawKernel|ElementwiseKernel|ReductionKernel|SourceModule|cupy\.fuse|"
                        r"load_inline|nvrtcCompileProgram)\b")


def test_no_other_cuda_source_is_compiled_anywhere():
    allowed = {ROOT / "ios_core" / "runtime" / "cuda_kernels.py"}
    offenders = []
    for folder in ("ios_core", "adapters", "ios_bench", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            if path in allowed:
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if _COMPILERS.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "CUDA C compiled outside cuda_kernels.CUDA_SOURCE (add it there):\n" + "\n".join(offenders)
    text = (ROOT / "ios_core" / "runtime" / "cuda_kernels.py").read_text()
    assert len(re.findall(r"\bRawModule\(", text)) == 1 and "RawModule(code=kernel_source(precision))" in text


def test_the_device_calls_no_cupy_library_routine():
    """CuPy refuses every cuBLAS call while a stream is captured ("calling cuBLAS API during
    stream capture is currently unsupported"), so the CUDA device and its kernels launch only our
    own kernels and cuDNN graphs. The fake device implements each kernel method itself and cannot
    see such a call; the first GPU run found ``cupy.matmul`` for linear layers this way."""
    import ast

    banned = {"matmul", "dot", "tensordot", "einsum", "linalg", "cublas", "inner", "outer", "vdot"}
    root = Path(__file__).resolve().parents[1] / "ios_core" / "runtime"
    found = []
    for name in ("cuda_device.py", "cuda_kernels.py", "cuda_tensor_kernels.py", "cuda.py"):
        tree = ast.parse((root / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in banned:
                found.append(f"{name}:{node.lineno}: .{node.attr}")
    assert not found, found
