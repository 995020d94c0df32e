"""The CUDA runtime's kernels: convolutions through NVIDIA's cuDNN Frontend, everything else
in one CUDA C module of our own (:data:`CUDA_SOURCE`, compiled by CuPy's ``RawModule`` with
NVRTC). All of them write into preallocated memory (never a temporary), so a run can be
captured into a CUDA graph, and all of them take explicit strides in elements, so inputs and
outputs may be strided views (a channel slice of a concatenation buffer) and a 1x1 value may
broadcast (stride 0).

* Convolution: a cuDNN Frontend graph per convolution geometry, ``conv_fprop`` (pre- and
  post-padding) -> ``bias`` -> the activation when cuDNN has it (relu, sigmoid, tanh), fp32
  in and out with fp32 compute. Every execution plan cuDNN offers is built (engines whose
  numerical notes say tensor cores, down-converted inputs or reduced-precision reductions are
  deselected first), each is timed on the device and the fastest is kept (``CudnnConv.plan``); a
  geometry is built and tuned once per device (``ConvCache``). Other activations, and GPUs
  with no fused fp32 engine, run ``conv_fprop`` alone followed by :data:`CUDA_SOURCE`'s
  ``ios_map`` (bias + activation): recorded per convolution (``CudnnConv.fused``).
* :data:`CUDA_SOURCE`: ``ios_map`` (copies, sums, products, bias, per-channel scale and every
  IR activation), ``ios_pool2d`` (max; average with or without the padding counted),
  ``ios_global_pool``, ``ios_shuffle`` and ``ios_resize`` (nearest, bilinear), and the general
  tensors' kernels (:mod:`ios_core.runtime.cuda_tensor_kernels`: matrix products, layer norm,
  softmax, strided copies). It includes no
  header (CuPy's ``RawModule`` adds none): ``tests/test_cuda_sources.py`` compiles it with
  NVRTC on every test run, and checks that no other CUDA C is compiled anywhere.
* Linear layers are ``ios_linear``: a tiled fp32 GEMM with the bias and activation fused, not
  ``cupy.matmul``: CuPy refuses every cuBLAS call while a stream is being captured
  ("calling cuBLAS API during stream capture is currently unsupported"), so a network with a
  linear layer could not be replayed as a CUDA graph (the first GPU run, an H200 on 2026-11-26,
  found it). A classifier's GEMM is a few microseconds on a GPU either way.

Written against the documented APIs (cupy 14, nvidia-cudnn-frontend 1.32); the CUDA C is
compiled here by NVRTC, the cuDNN graphs are described here; both ran once, on an H200
(docs/results/gpu-h200-2026-11-26/).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ios_core.ir import ActivationMap
from ios_core.runtime.cuda_tensor_kernels import TENSOR_BODY, TENSOR_KERNEL_NAMES

# IR activation kind (ios_core.ir.activations) -> the code ``ios_act`` in CUDA_SOURCE switches on
# (alpha/beta parametrize the kinds that read them)
ACT_CODES: ActivationMap = ActivationMap("cuda", {
    "identity": 0, "relu": 1, "sigmoid": 2, "tanh": 3, "relu6": 4, "hardswish": 5, "silu": 6,
    "leaky_relu": 7, "hardsigmoid": 8, "clip": 9,
    "gelu": 10, "gelu_tanh": 11,
})
# the activations cuDNN's fused graph applies itself -> its pygraph method (None: nothing to
# apply); the others go through ios_map
CUDNN_ACT_OPS = {"identity": None, "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh"}
CUDNN_FUSED_ACTS = tuple(CUDNN_ACT_OPS)
MAP_COPY, MAP_ADD, MAP_MUL = 0, 1, 2

CUDA_BODY = r"""
#define IOS_NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float ios_act(float v, int act, float alpha, float beta) {
  switch (act) {
    case 1: return v > 0.0f ? v : 0.0f;
    case 2: return 1.0f / (1.0f + expf(-v));
    case 3: return tanhf(v);
    case 4: return fminf(fmaxf(v, 0.0f), 6.0f);
    case 5: return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;
    case 6: return v / (1.0f + expf(-v));
    case 7: return v > 0.0f ? v : v * alpha;
    case 8: return fminf(fmaxf(v * alpha + beta, 0.0f), 1.0f);
    case 9: return fminf(fmaxf(v, alpha), beta);
    case 10: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case 11: return 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
    default: return v;
  }
}

// y = act((a OP b) * scale[c] + shift[c]) over (N, C, H, W); OP: 0 a alone, 1 a + b, 2 a * b.
// Strides in elements, 0 where a value broadcasts; y may be a or b (in place).
extern "C" __global__ void ios_map(const ios_t* a, const ios_t* b, const ios_t* scale, const ios_t* shift, ios_t* y,
    int N, int C, int H, int W,
    long long as0, long long as1, long long as2, long long as3,
    long long bs0, long long bs1, long long bs2, long long bs3,
    long long ys0, long long ys1, long long ys2, long long ys3,
    int op, int has_scale, int has_shift, int act, float alpha, float beta) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long total = (long long)N * C * H * W;
  if (i >= total) return;
  int w = i % W; long long t = i / W; int h = t % H; t /= H; int c = t % C; int n = t / C;
  float v = ios_ld(a[n * as0 + c * as1 + h * as2 + w * as3]);
  if (op == 1) v += ios_ld(b[n * bs0 + c * bs1 + h * bs2 + w * bs3]);
  else if (op == 2) v *= ios_ld(b[n * bs0 + c * bs1 + h * bs2 + w * bs3]);
  if (has_scale) v *= ios_ld(scale[c]);
  if (has_shift) v += ios_ld(shift[c]);
  y[n * ys0 + c * ys1 + h * ys2 + w * ys3] = ios_st(ios_act(v, act, alpha, beta));
}

// Max and average pooling. (pt, pl): padding before; the padding after only sets (OH, OW).
// count_pad: the average divides by the whole window (padding counted), else by the input
// positions the window covers.
extern "C" __global__ void ios_pool2d(const ios_t* x, ios_t* y, int N, int C, int H, int W, int OH, int OW,
    long long xs0, long long xs1, long long xs2, long long xs3,
    long long ys0, long long ys1, long long ys2, long long ys3,
    int kh, int kw, int sh, int sw, int pt, int pl, int is_max, int count_pad) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long total = (long long)N * C * OH * OW;
  if (i >= total) return;
  int ow = i % OW; long long t = i / OW; int oh = t % OH; t /= OH; int c = t % C; int n = t / C;
  const ios_t* xp = x + n * xs0 + c * xs1;
  int h0 = oh * sh - pt, w0 = ow * sw - pl;
  float acc = is_max ? IOS_NEG_INF : 0.0f;
  int seen = 0;
  for (int a = 0; a < kh; a++) {
    int h = h0 + a;
    if (h < 0 || h >= H) continue;
    for (int b = 0; b < kw; b++) {
      int w = w0 + b;
      if (w < 0 || w >= W) continue;
      float v = ios_ld(xp[h * xs2 + w * xs3]);
      acc = is_max ? fmaxf(acc, v) : acc + v;
      seen++;
    }
  }
  if (!is_max) acc /= (float)(count_pad ? kh * kw : (seen > 0 ? seen : 1));
  y[n * ys0 + c * ys1 + oh * ys2 + ow * ys3] = ios_st(acc);
}

extern "C" __global__ void ios_global_pool(const ios_t* x, ios_t* y, int N, int C, int H, int W,
    long long xs0, long long xs1, long long xs2, long long xs3, long long ys0, long long ys1, int is_max) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)N * C) return;
  int c = i % C; int n = i / C;
  const ios_t* xp = x + n * xs0 + c * xs1;
  float acc = is_max ? IOS_NEG_INF : 0.0f;
  for (int h = 0; h < H; h++)
    for (int w = 0; w < W; w++) {
      float v = ios_ld(xp[h * xs2 + w * xs3]);
      acc = is_max ? fmaxf(acc, v) : acc + v;
    }
  y[n * ys0 + c * ys1] = ios_st(is_max ? acc : acc / (float)(H * W));
}

// Channel shuffle: output channel j * groups + i is input channel i * (C / groups) + j.
extern "C" __global__ void ios_shuffle(const ios_t* x, ios_t* y, int N, int C, int H, int W,
    long long xs0, long long xs1, long long xs2, long long xs3,
    long long ys0, long long ys1, long long ys2, long long ys3, int groups) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long total = (long long)N * C * H * W;
  if (i >= total) return;
  int w = i % W; long long t = i / W; int h = t % H; t /= H; int c = t % C; int n = t / C;
  int per = C / groups;
  int src = (c % groups) * per + c / groups;
  y[n * ys0 + c * ys1 + h * ys2 + w * ys3] = x[n * xs0 + src * xs1 + h * xs2 + w * xs3];
}

__device__ __forceinline__ float ios_src(int o, int in, int out, int align) {
  if (align) return out > 1 ? o * ((float)(in - 1) / (float)(out - 1)) : 0.0f;
  float s = (o + 0.5f) * ((float)in / (float)out) - 0.5f;
  return s < 0.0f ? 0.0f : s;
}

// Resize to (OH, OW): mode 0 nearest (source floor(o * in / out), PyTorch's), 1 bilinear
// (half-pixel centres, or the corners aligned).
extern "C" __global__ void ios_resize(const ios_t* x, ios_t* y, int N, int C, int H, int W, int OH, int OW,
    long long xs0, long long xs1, long long xs2, long long xs3,
    long long ys0, long long ys1, long long ys2, long long ys3, int mode, int align) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long total = (long long)N * C * OH * OW;
  if (i >= total) return;
  int ow = i % OW; long long t = i / OW; int oh = t % OH; t /= OH; int c = t % C; int n = t / C;
  const ios_t* xp = x + n * xs0 + c * xs1;
  float v;
  if (mode == 0) {
    int h = min((int)floorf(oh * ((float)H / (float)OH)), H - 1);
    int w = min((int)floorf(ow * ((float)W / (float)OW)), W - 1);
    v = ios_ld(xp[h * xs2 + w * xs3]);
  } else {
    float sh = ios_src(oh, H, OH, align), sw = ios_src(ow, W, OW, align);
    int h0 = min((int)floorf(sh), H - 1), w0 = min((int)floorf(sw), W - 1);
    int h1 = min(h0 + 1, H - 1), w1 = min(w0 + 1, W - 1);
    float fh = sh - h0, fw = sw - w0;
    float top = ios_ld(xp[h0 * xs2 + w0 * xs3]) * (1.0f - fw) + ios_ld(xp[h0 * xs2 + w1 * xs3]) * fw;
    float bot = ios_ld(xp[h1 * xs2 + w0 * xs3]) * (1.0f - fw) + ios_ld(xp[h1 * xs2 + w1 * xs3]) * fw;
    v = top * (1.0f - fh) + bot * fh;
  }
  y[n * ys0 + c * ys1 + oh * ys2 + ow * ys3] = ios_st(v);
}

// Linear: y[n, j] = act(sum_k x[n, k] * w[k, j] + shift[j]). x is (N, K) and w (K, J) row-major
// (w is the layer's weight transposed); y[n, j] is at n * ys0 + j * ys1. One thread per output,
// IOS_TILE x IOS_TILE tiles of x and w staged in shared memory (as float), fp32 accumulation.
#define IOS_TILE 16
extern "C" __global__ void ios_linear(const ios_t* x, const ios_t* w, const ios_t* shift, ios_t* y,
    int N, int K, int J, long long ys0, long long ys1, int act, float alpha, float beta) {
  __shared__ float xs[IOS_TILE][IOS_TILE];
  __shared__ float ws[IOS_TILE][IOS_TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int j = blockIdx.x * IOS_TILE + tx;
  int n = blockIdx.y * IOS_TILE + ty;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += IOS_TILE) {
    xs[ty][tx] = (n < N && k0 + tx < K) ? ios_ld(x[(long long)n * K + k0 + tx]) : 0.0f;
    ws[ty][tx] = (k0 + ty < K && j < J) ? ios_ld(w[(long long)(k0 + ty) * J + j]) : 0.0f;
    __syncthreads();
    for (int t = 0; t < IOS_TILE; t++) acc += xs[ty][t] * ws[t][tx];
    __syncthreads();
  }
  if (n < N && j < J) y[n * ys0 + j * ys1] = ios_st(ios_act(acc + ios_ld(shift[j]), act, alpha, beta));
}
"""

# The element type of every buffer, per precision: what each kernel loads and stores (``ios_t``), and
# how a value becomes a float and back (``ios_ld``/``ios_st``). Every kernel computes in float (fp32
# arithmetic on values loaded at the buffer's precision, rounded once when stored), the same
# contract as cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configurations (half-precision data, float
# compute). fp16 and bf16 are stored as their 16 bits (``unsigned short``, the storage of CUDA's
# ``__half`` and ``__nv_bfloat16``): CuPy's RawModule compiles with NVRTC and no include path, and
# NVRTC alone cannot open ``cuda_fp16.h``/``cuda_bf16.h`` (checked with NVRTC 12.9), so the two
# conversions are written here: fp16 with the PTX ``cvt`` instructions (every architecture), bf16 as
# its top 16 bits, rounded to nearest even (CUDA's ``__float2bfloat16_rn``; NaN stays NaN).
KERNEL_PRELUDE = {
    "fp32": r"""typedef float ios_t;
__device__ __forceinline__ float ios_ld(ios_t v) { return v; }
__device__ __forceinline__ ios_t ios_st(float v) { return v; }
""",
    "fp16": r"""typedef unsigned short ios_t;  // IEEE binary16 bits (__half's storage)
__device__ __forceinline__ float ios_ld(ios_t v) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v)); return f; }
__device__ __forceinline__ ios_t ios_st(float f) {
  ios_t v; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(v) : "f"(f)); return v;  // round to nearest even
}
""",
    "bf16": r"""typedef unsigned short ios_t;  // bfloat16 bits (__nv_bfloat16's storage): a float's top half
__device__ __forceinline__ float ios_ld(ios_t v) { return __uint_as_float(((unsigned int)v) << 16); }
__device__ __forceinline__ ios_t ios_st(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ios_t)((u >> 16) | 0x40u);  // NaN: quiet, sign kept
  return (ios_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // round to nearest, ties to even
}
""",
}
PRECISIONS = tuple(KERNEL_PRELUDE)


def kernel_source(precision: str = "fp32") -> str:
    """The runtime's CUDA C at ``precision`` (fp32, fp16, bf16): :data:`CUDA_BODY` and the general
    tensors' kernels (``cuda_tensor_kernels.TENSOR_BODY``) over that element type. No #include: CuPy's
    RawModule compiles it with NVRTC alone."""
    if precision not in KERNEL_PRELUDE:
        raise ValueError(f"the CUDA runtime has no kernels at precision {precision!r} (one of {', '.join(PRECISIONS)})")
    return (f"// ios-bench CUDA kernels, {precision}. No #include: CuPy's RawModule compiles this with NVRTC alone.\n"
            + KERNEL_PRELUDE[precision] + CUDA_BODY + TENSOR_BODY)


CUDA_SOURCE = kernel_source("fp32")

# Per precision: the numpy dtype a device buffer holds (bf16: its bits, uint16; neither numpy nor
# CuPy has a bfloat16 dtype) and cuDNN's data type for its tensors.
STORAGE_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "uint16"}
CUDNN_DATA_TYPE = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BFLOAT16"}


def to_storage(a, precision: str):
    """A host array as a device buffer of ``precision`` holds it: float32, float16, or bf16 bits
    (uint16, rounded to nearest even, as the kernels' ``ios_st``)."""
    import numpy as np

    a = np.ascontiguousarray(a, dtype=np.float32)
    if precision == "fp32":
        return a
    if precision == "fp16":
        with np.errstate(over="ignore"):  # beyond fp16's range is inf, as the device's cvt.rn.f16.f32
            return a.astype(np.float16)
    if precision == "bf16":
        u = a.view(np.uint32)
        out = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
        nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        out[nan] = ((u[nan] >> 16) | np.uint32(0x40)).astype(np.uint16)
        return out
    raise ValueError(f"unknown precision {precision!r}")


def from_storage(a, precision: str):
    """A device buffer's values read back (:func:`to_storage`'s inverse) as float32."""
    import numpy as np

    if precision == "bf16":
        return (np.ascontiguousarray(a).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(a, dtype=np.float32)


def conv_data_types(precision: str) -> dict[str, str]:
    """cuDNN's data type for each tensor of a convolution at ``precision``: ``x``, ``w``, ``b``,
    ``y`` at the precision (cuDNN supports no mixed input types), the ``compute`` and
    ``intermediate`` types float: cuDNN's FLOAT_CONFIG, PSEUDO_HALF_CONFIG and
    PSEUDO_BFLOAT16_CONFIG (cuDNN API reference, ``cudnnConvolutionForward``, supported
    configurations; bf16 has no configuration with bf16 compute, and fp16 compute
    (TRUE_HALF_CONFIG) would accumulate in fp16)."""
    io = CUDNN_DATA_TYPE[precision]
    return {"x": io, "w": io, "b": io, "y": io, "compute": "FLOAT", "intermediate": "FLOAT"}


# The least compute capability (major * 10 + minor) each precision needs of the GPU: bfloat16
# arithmetic starts with compute capability 8.0. cuDNN's PSEUDO_BFLOAT16_CONFIG runs only there (cuDNN
# API reference, ``cudnnConvolutionForward``, supported configurations; PyTorch checks the capability
# before a bf16 convolution, pytorch/pytorch#81139), and so do TensorRT's bf16 kernels (Triton's
# TensorRT backend, triton-inference-server/server#7310: "BF16 ... CC 8.0 and above only").
# PSEUDO_HALF_CONFIG and our kernels (PTX ``cvt`` for fp16, bits for bf16) need nothing more than cuDNN
# itself does.
MIN_COMPUTE_CAPABILITY = {"bf16": 80}


def arch_problem(precision: str, compute_capability, who: str = "cuDNN's PSEUDO_BFLOAT16_CONFIG") -> str | None:
    """Why a GPU of ``compute_capability`` (CuPy's form ``'75'`` or the fingerprint's ``'7.5'``; None:
    unknown) cannot compute at ``precision`` with ``who``, in one line, or None."""
    least = MIN_COMPUTE_CAPABILITY.get(precision)
    if least is None or compute_capability is None:
        return None
    cc = int(str(compute_capability).replace(".", ""))
    if cc >= least:
        return None
    return (f"{precision} needs a GPU of compute capability {least // 10}.{least % 10} or later ({who}); "
            f"this one is {cc // 10}.{cc % 10}")


KERNEL_NAMES = ("ios_map", "ios_pool2d", "ios_global_pool", "ios_shuffle", "ios_resize", "ios_linear",
                *TENSOR_KERNEL_NAMES)
THREADS = 256
LINEAR_TILE = 16  # IOS_TILE in the source: ios_linear's blocks are LINEAR_TILE x LINEAR_TILE threads


def strides_for(view, shape) -> list[int]:
    """``view``'s strides in elements as seen from an iteration over ``shape`` (4-D): 0 along
    a dimension of size 1 that ``shape`` is larger in (a broadcast value)."""
    isz = view.itemsize
    out = []
    for d in range(4):
        if view.shape[d] == 1 and shape[d] != 1:
            out.append(0)
        else:
            out.append(view.strides[d] // isz)
    return out


class Kernels:
    """:func:`kernel_source` at ``precision`` as one CuPy ``RawModule``; :meth:`load` compiles and loads
    it (call it before any capture: compiling inside a CUDA-graph capture fails)."""

    def __init__(self, precision: str = "fp32"):
        import cupy

        self.cupy = cupy
        self.precision = precision
        self._module = cupy.RawModule(code=kernel_source(precision))
        self._fns: dict[str, object] = {}

    def load(self) -> None:
        """Compile the module and look every kernel up (needs a GPU)."""
        for name in KERNEL_NAMES:
            self._fns[name] = self._module.get_function(name)

    def _fn(self, name: str):
        fn = self._fns.get(name)
        if fn is None:
            raise RuntimeError(f"kernel {name} launched before Kernels.load() (it would compile now)")
        return fn

    def _prepared(self, name: str, grid: tuple, block: tuple, args: tuple):
        """The launch, every argument resolved now: a call of CuPy's kernel function and nothing
        else (``functools.partial``: no Python frame of ours at launch time)."""
        return partial(self._fn(name), grid, block, args)

    def _grid(self, name: str, total: int, args: tuple):
        return self._prepared(name, (max(1, (total + THREADS - 1) // THREADS),), (THREADS,), args)

    # Each kernel has a ``*_launch`` method returning its launch with the arguments packed once (the
    # views are preallocated: shapes, strides and pointers never change between runs), and the
    # immediate method of the same name, which packs and launches at once (tuning, tests).
    def map_launch(self, a, y, b=None, op: int = MAP_COPY, scale=None, shift=None, act: str = "identity",
                   alpha: float = 0.0, beta: float = 0.0):
        import numpy as np

        shape = tuple(y.shape) + (1,) * (4 - y.ndim)
        a4, y4 = _as4(a), _as4(y)
        b4 = _as4(b) if b is not None else a4
        i32, i64, f32 = np.int32, np.int64, np.float32
        args = (a4, b4, scale if scale is not None else a4, shift if shift is not None else a4, y4,
                *(i32(d) for d in shape), *(i64(s) for s in strides_for(a4, shape)),
                *(i64(s) for s in strides_for(b4, shape)), *(i64(s) for s in strides_for(y4, shape)),
                i32(op), i32(scale is not None), i32(shift is not None), i32(ACT_CODES[act]), f32(alpha), f32(beta))
        return self._grid("ios_map", int(np.prod(shape)), args)

    def map(self, *args, **kwargs) -> None:
        self.map_launch(*args, **kwargs)()

    def pool2d_launch(self, x, y, kernel, stride, pad_begin, is_max: bool, count_pad: bool):
        import numpy as np

        n, c, h, w = x.shape
        oh, ow = y.shape[2], y.shape[3]
        i32, i64 = np.int32, np.int64
        args = (x, y, i32(n), i32(c), i32(h), i32(w), i32(oh), i32(ow), *(i64(s) for s in strides_for(x, x.shape)),
                *(i64(s) for s in strides_for(y, y.shape)), i32(kernel[0]), i32(kernel[1]), i32(stride[0]),
                i32(stride[1]), i32(pad_begin[0]), i32(pad_begin[1]), i32(is_max), i32(count_pad))
        return self._grid("ios_pool2d", n * c * oh * ow, args)

    def pool2d(self, *args) -> None:
        self.pool2d_launch(*args)()

    def global_pool_launch(self, x, y, is_max: bool):
        import numpy as np

        n, c, h, w = x.shape
        i32, i64 = np.int32, np.int64
        ys = strides_for(y, y.shape)
        args = (x, y, i32(n), i32(c), i32(h), i32(w), *(i64(s) for s in strides_for(x, x.shape)), i64(ys[0]),
                i64(ys[1]), i32(is_max))
        return self._grid("ios_global_pool", n * c, args)

    def global_pool(self, *args) -> None:
        self.global_pool_launch(*args)()

    def shuffle_launch(self, x, y, groups: int):
        import numpy as np

        n, c, h, w = x.shape
        i32, i64 = np.int32, np.int64
        args = (x, y, i32(n), i32(c), i32(h), i32(w), *(i64(s) for s in strides_for(x, x.shape)),
                *(i64(s) for s in strides_for(y, y.shape)), i32(groups))
        return self._grid("ios_shuffle", n * c * h * w, args)

    def shuffle(self, *args) -> None:
        self.shuffle_launch(*args)()

    def resize_launch(self, x, y, mode: str, align_corners: bool):
        import numpy as np

        n, c, h, w = x.shape
        oh, ow = y.shape[2], y.shape[3]
        i32, i64 = np.int32, np.int64
        args = (x, y, i32(n), i32(c), i32(h), i32(w), i32(oh), i32(ow), *(i64(s) for s in strides_for(x, x.shape)),
                *(i64(s) for s in strides_for(y, y.shape)), i32(0 if mode == "nearest" else 1), i32(align_corners))
        return self._grid("ios_resize", n * c * oh * ow, args)

    def resize(self, *args) -> None:
        self.resize_launch(*args)()

    def linear_launch(self, x, w, shift, y, act: str = "identity", alpha: float = 0.0, beta: float = 0.0):
        """``y = act(x @ w + shift)``: ``x`` (N, K) and ``w`` (K, J) contiguous, ``shift`` (J,), ``y``
        any view of N x J values ((N, J) or (N, J, 1, 1), strided: a slice of a concatenation)."""
        import numpy as np

        n, kk = x.shape
        j = w.shape[1]
        if w.shape[0] != kk or tuple(y.shape[:2]) != (n, j) or shift.shape != (j,):
            raise ValueError(f"linear: x {tuple(x.shape)}, w {tuple(w.shape)}, shift {tuple(shift.shape)}, "
                             f"y {tuple(y.shape)} do not fit")
        isz = y.itemsize
        i32, i64, f32 = np.int32, np.int64, np.float32
        args = (x, w, shift, y, i32(n), i32(kk), i32(j), i64(y.strides[0] // isz), i64(y.strides[1] // isz),
                i32(ACT_CODES[act]), f32(alpha), f32(beta))
        t = LINEAR_TILE
        return self._prepared("ios_linear", ((j + t - 1) // t, (n + t - 1) // t), (t, t), args)

    def linear(self, *args, **kwargs) -> None:
        self.linear_launch(*args, **kwargs)()


def _as4(v):
    """A 1-D per-channel array stays as it is; others are viewed as 4-D (N, C, H, W)."""
    if v.ndim == 4:
        return v
    return v.reshape(tuple(v.shape) + (1,) * (4 - v.ndim))


def _row_major(dims) -> list[int]:
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= d
    return list(reversed(strides))


def conv_graph(n: int, cin: int, h: int, w: int, cout: int, kernel, stride, pads, dilation, groups: int, act: str,
               fused: bool, out_stride=None, in_stride=None, out_hw=None, handle=None, precision: str = "fp32"):
    """The cuDNN Frontend graph of one convolution (not yet built): tensors ``x``
    (``in_stride`` for a channel slice), ``w``, ``b`` and the output ``y`` (``out_stride`` to
    write into a concatenation's slice); ``pads`` is (top, left, bottom, right). ``fused``:
    ``y = act(conv(x, w) + b)`` in one graph (``act`` one of :data:`CUDNN_FUSED_ACTS`);
    otherwise ``y = conv(x, w)`` and the caller adds the bias and activation. Each tensor's data
    type and the compute type follow ``precision`` (:func:`conv_data_types`: fp16/bf16 data with
    float compute)."""
    import cudnn

    if fused and act not in CUDNN_FUSED_ACTS:
        raise ValueError(f"activation {act!r} is not fused into cuDNN's graph (one of {CUDNN_FUSED_ACTS})")
    types = {k: getattr(cudnn.data_type, v) for k, v in conv_data_types(precision).items()}
    f32 = types["compute"]
    g = cudnn.pygraph(io_data_type=types["x"], intermediate_data_type=types["intermediate"], compute_data_type=f32,
                      handle=handle)
    x_dims = [n, cin, h, w]
    w_dims = [cout, cin // groups, kernel[0], kernel[1]]
    x = g.tensor(dim=x_dims, stride=list(in_stride) if in_stride else _row_major(x_dims), data_type=types["x"],
                 name="x")
    wt = g.tensor(dim=w_dims, stride=_row_major(w_dims), data_type=types["w"], name="w")
    pt, pl, pb, pr = pads
    y = g.conv_fprop(image=x, weight=wt, pre_padding=[pt, pl], post_padding=[pb, pr], stride=list(stride),
                     dilation=list(dilation), compute_data_type=f32, name="conv")
    tensors = {"x": x, "w": wt}
    if fused:
        b = tensors["b"] = g.tensor(dim=[1, cout, 1, 1], stride=[cout, 1, 1, 1], data_type=types["b"], name="b")
        y = g.bias(input=y, bias=b, compute_data_type=f32, name="bias")
        op = CUDNN_ACT_OPS[act]
        if op is not None:
            y = getattr(g, op)(input=y, compute_data_type=f32, name=op)
    if out_hw is None:
        oh = (h + pt + pb - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
        ow = (w + pl + pr - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    else:
        oh, ow = out_hw
    y_dims = [n, cout, oh, ow]
    y.set_output(True).set_data_type(types["y"]).set_dim(y_dims).set_stride(list(out_stride) if out_stride
                                                                      else _row_major(y_dims))
    tensors["y"] = y
    return g, tensors


@dataclass
class CudnnConv:
    """A built cuDNN convolution (the IR's node is ``ios_core.ir.Conv``): its cuDNN graph and
    tensors, the execution plan kept (``plan``: its index, the fastest of those built,
    ``plan_name``), that plan's workspace, whether bias and activation are fused into it, and
    what the tuning measured (``plans``: index -> ms)."""

    graph: object
    tensors: dict
    workspace_bytes: int
    fused: bool
    plan: int = 0
    plan_name: str = ""
    plans: dict | None = None


# Engines deselected so fp32 stays fp32: no tensor cores (TF32), no down-converted inputs,
# no reduced-precision reductions. Every plan left is fp32 by construction (recorded as such).
EXCLUDED_NOTES = ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION")
# fp16 and bf16: tensor cores are the point (their inputs are exact at that precision), so only
# engines that would convert the inputs down further or reduce in less than float are deselected.
EXCLUDED_NOTES_BY_PRECISION = {"fp32": EXCLUDED_NOTES,
                               "fp16": ("DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION"),
                               "bf16": ("DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION")}


def _planned_graph(handle, fused: bool, geometry: dict):
    """The convolution's cuDNN graph with its execution plans listed (engines computing below the
    geometry's precision deselected: :data:`EXCLUDED_NOTES_BY_PRECISION`), none built."""
    import cudnn

    g, tensors = conv_graph(fused=fused, handle=handle, **geometry)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    notes = EXCLUDED_NOTES_BY_PRECISION[geometry.get("precision", "fp32")]
    g.deselect_numeric_notes([getattr(cudnn.numerical_note, n) for n in notes])
    g.check_support()
    return g, tensors


def _plan_name(g, index: int) -> str:
    try:
        return str(g.get_plan_name_at_index(index))
    except Exception:
        return ""


def build_conv(handle, fused_ok: bool = True, tune=None, known: dict | None = None, **geometry) -> CudnnConv:
    """Build every execution plan of the fused graph (when cuDNN can fuse the activation and
    has an fp32 engine for it), else of the convolution alone (the caller then adds bias and
    activation). ``tune(conv) -> {index: ms}``
    times the built plans on the device; the fastest is kept.

    ``known`` (a record :func:`plan_record` made, from the profile database's plan cache): only
    that plan is built, and none is timed; it raises when the plan at that index is not the one
    recorded (the caller then tunes)."""
    if known is not None:
        g, tensors = _planned_graph(handle, bool(known["fused"]), geometry)
        index = int(known["plan"])
        if index >= int(g.get_execution_plan_count()):
            raise RuntimeError(f"cuDNN offers {g.get_execution_plan_count()} plans, the stored one is {index}")
        name = _plan_name(g, index)
        if known.get("plan_name") and name != known["plan_name"]:
            raise RuntimeError(f"plan {index} is {name!r} here, {known['plan_name']!r} when stored")
        g.build_plan_at_index(index)
        return CudnnConv(g, tensors, int(g.get_workspace_size_plan_at_index(index)), bool(known["fused"]),
                         plan=index, plan_name=name, plans={index: known.get("ms")})
    errors = []
    for fused in ((True, False) if fused_ok and geometry["act"] in CUDNN_FUSED_ACTS else (False,)):
        try:
            g, tensors = _planned_graph(handle, fused, geometry)
            built = []  # every plan cuDNN offers that builds here (build_plan_at_index raises otherwise)
            for i in range(int(g.get_execution_plan_count())):
                try:
                    g.build_plan_at_index(i)
                    built.append(i)
                except Exception:
                    pass
            if not built:
                raise RuntimeError("no execution plan could be built")
            conv = CudnnConv(g, tensors, 0, fused, plans={i: None for i in built})
            times = tune(conv) if tune is not None else {}
            conv.plans.update(times)
            timed = {i: t for i, t in conv.plans.items() if t is not None}
            conv.plan = min(timed, key=timed.get) if timed else built[0]
            conv.workspace_bytes = int(g.get_workspace_size_plan_at_index(conv.plan))
            conv.plan_name = _plan_name(g, conv.plan)
            return conv
        except Exception as e:  # cudnnGraphNotSupportedError and friends: try the unfused graph
            errors.append(f"{'fused' if fused else 'unfused'}: {type(e).__name__}: {str(e)[:200]}")
    raise RuntimeError("cuDNN has no engine for this convolution: " + "; ".join(errors))


def plan_record(conv: CudnnConv) -> dict:
    """What the plan cache keeps of a tuned convolution: fused or not, the plan's index and name,
    and its time when tuned (ms, for the record)."""
    return {"fused": bool(conv.fused), "plan": int(conv.plan), "plan_name": conv.plan_name,
            "ms": (conv.plans or {}).get(conv.plan)}


def plan_executor(conv: CudnnConv, pack: dict, handle):
    """``run(workspace_ptr)`` executing ``conv``'s chosen plan on the buffers of ``pack`` (tensor ->
    device pointer) with ``handle``, resolved once here rather than at every call.

    The cuDNN Frontend's Python ``pygraph.execute_plan_at_index`` re-derives the barred plan list
    (``deselect_numeric_notes`` filters, every plan's engine looked up) and rebuilds the variant
    pack at each call: on the GPU this cost more host time than the stages it launched (a
    profile of the inception_v3 search: 19 s, 16.9 million engine lookups). The plan was checked
    when it was built and timed; here its backend index and the pack's pointers are resolved
    once, and each call goes straight to the backend graph's execute-at-index. A Frontend
    without that structure (older releases: a compiled ``pygraph``), or a plan a Python engine
    serves, runs through ``execute_plan_at_index`` as before."""
    g, index = conv.graph, conv.plan
    fast = _backend_execute(g, index, pack, handle)
    if fast is not None:
        return fast

    def run(ws):
        g.execute_plan_at_index(pack, ws, index, handle=handle)
    return run


def _backend_execute(g, index: int, pack: dict, handle):
    """The backend call ``execute_plan_at_index`` ends in (cuDNN Frontend 1.2x's Python pygraph),
    resolved once, or None where that structure is not there."""
    lowered = getattr(g, "_lowered_graph", None)
    execute = getattr(lowered, "_execute_plan_at_index", None)
    if execute is None or not getattr(g, "_planning_done", False) or not hasattr(g, "_materialize_backend_plan"):
        return None
    try:
        from cudnn._handle import to_backend_handle
        from cudnn.engines.engine_ids import is_python_engine

        if index in g._barred_indices():  # checked once, as execute_plan_at_index checks at each call
            raise ValueError(f"plan {index} is excluded by a note filter")
        if is_python_engine(g._plans[index].engine_id):
            return None
        cfg = g._materialize_backend_plan(index)
        if cfg.cpp_index is None:
            return None
        var_pack, _ = g._native_var_pack(g._uid_to_data(pack), None)
        cpp_index, backend_handle = int(cfg.cpp_index), to_backend_handle(handle)
    except (ImportError, AttributeError, TypeError):
        return None

    def run(ws):
        execute(var_pack, ws, cpp_index, backend_handle)
    return run


def conv_key(geometry: dict) -> tuple:
    """What makes two convolutions the same cuDNN graph (pointers are not part of it)."""
    return tuple((k, tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in sorted(geometry.items()))
