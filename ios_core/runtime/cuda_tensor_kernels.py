"""The CUDA runtime's kernels for general tensors (issue 56: vision transformers, ConvNeXt), and
how each launch is packed: the CUDA C is :data:`TENSOR_BODY`, which
:func:`ios_core.runtime.cuda_kernels.kernel_source` appends to the feature-map kernels (one
module, compiled by NVRTC through CuPy's raw module; no header, no library call).

Every view the CUDA program hands a kernel is *per-sample contiguous*: a whole buffer, a slice of
its first image axis (a channel or token slice) or the program's scratch, so sample ``n`` starts at
``n * s0`` and its image is row-major from there (:func:`sample_stride` checks it). The kernels
take that stride and the image's extents:

* ``ios_matmul``: a tiled matrix product ``y[z, m, j] = act(sum_k a[z, m, k] * b[z, k, j] + shift[j])``
  over two batch axes (``z0``, ``z1``) with every operand's strides explicit: the matrix product
  between activations (``matmul``, batched over samples and heads) and the ``dense`` layer
  (``b`` its weight transposed, shared by every sample: stride 0). IOS_TILE x IOS_TILE tiles in
  shared memory, float accumulation; no cuBLAS (CuPy refuses cuBLAS inside a stream capture, see
  ``cuda_kernels``'s ``ios_linear``, which needs a contiguous (N, K) input and so does not fit
  a token slice of a batch).
* ``ios_layernorm``: one block per row of ``D`` elements (the last ``axes`` axes), mean and biased
  variance reduced in shared memory in float, then the weight and bias.
* ``ios_rownorm``: softmax (max, sum of exponentials) or the L2 normalization along one axis of
  extent ``D`` between ``O`` outer and ``I`` inner positions, one block per row.
* ``ios_strided``: ``y = a``, ``a + b`` or ``a * b`` over up to :data:`MAX_RANK` axes with every
  stride explicit (0 where a value broadcasts): transposes (``a``'s strides permuted), reshapes
  (a copy of per-sample contiguous memory), learned constants (``b`` the constant, broadcast from
  the last axis and over the batch), the class token (two copies into the output's two slices)
  element-wise sums and products of tensors of more than 4 axes, and activations (and the per-channel
  scale and shift of ``affine``) on them: ``y = act(a op b)``, the activation applied as it stores.

Every kernel loads ``ios_t`` values, computes in float and stores once (``ios_ld``/``ios_st``), so
the module compiles at fp32, fp16 and bf16 like the rest; the tests check fp32 and the 16-bit
precisions against the oracle on the fake device. Written against CuPy's documented
raw module; compiled here by NVRTC (tests/test_cuda_sources.py); not yet run on a GPU.
"""

from __future__ import annotations

import numpy as np

MAX_RANK = 6  # axes of ios_strided (the batch and an image of up to 5 axes)
TENSOR_KERNEL_NAMES = ("ios_matmul", "ios_layernorm", "ios_rownorm", "ios_strided")
REDUCE_THREADS = 256  # IOS_RED in the source: the block of ios_layernorm and ios_rownorm (a power of two)
MATMUL_TILE = 16  # IOS_TILE in the source (cuda_kernels' ios_linear uses the same tile)
MAX_GRID_YZ = 65535  # CUDA's limit on gridDim.y and gridDim.z
ROWNORM_SOFTMAX, ROWNORM_L2 = 0, 1
STRIDED_COPY, STRIDED_ADD, STRIDED_MUL = 0, 1, 2

TENSOR_BODY = r"""
#define IOS_RED 256

// The sum (or the maximum) of v over the block (blockDim.x == IOS_RED), seen by every thread.
__device__ __forceinline__ float ios_block_reduce(float v, float* red, int is_max) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = IOS_RED / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = is_max ? fmaxf(red[threadIdx.x], red[threadIdx.x + s])
                                                   : red[threadIdx.x] + red[threadIdx.x + s];
    __syncthreads();
  }
  float out = red[0];
  __syncthreads();
  return out;
}

// y[z, m, j] = act(sum_k a[z, m, k] * b[z, k, j] + shift[j]), z = (z0, z1), blockIdx.z = z0 * Z1 + z1.
// Every operand's strides in elements (0: shared over that axis). IOS_TILE x IOS_TILE tiles of a and b
// in shared memory (as float), float accumulation.
extern "C" __global__ void ios_matmul(const ios_t* a, const ios_t* b, const ios_t* shift, ios_t* y,
    int Z1, int M, int K, int J,
    long long as0, long long as1, long long as2, long long as3,
    long long bs0, long long bs1, long long bs2, long long bs3,
    long long ys0, long long ys1, long long ys2, long long ys3,
    int has_shift, int act, float alpha, float beta) {
  __shared__ float at[IOS_TILE][IOS_TILE];
  __shared__ float bt[IOS_TILE][IOS_TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int j = blockIdx.x * IOS_TILE + tx;
  int m = blockIdx.y * IOS_TILE + ty;
  int z0 = blockIdx.z / Z1, z1 = blockIdx.z % Z1;
  const ios_t* ap = a + z0 * as0 + z1 * as1;
  const ios_t* bp = b + z0 * bs0 + z1 * bs1;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += IOS_TILE) {
    at[ty][tx] = (m < M && k0 + tx < K) ? ios_ld(ap[m * as2 + (k0 + tx) * as3]) : 0.0f;
    bt[ty][tx] = (k0 + ty < K && j < J) ? ios_ld(bp[(k0 + ty) * bs2 + j * bs3]) : 0.0f;
    __syncthreads();
    for (int t = 0; t < IOS_TILE; t++) acc += at[ty][t] * bt[t][tx];
    __syncthreads();
  }
  if (m < M && j < J) {
    if (has_shift) acc += ios_ld(shift[j]);
    y[z0 * ys0 + z1 * ys1 + m * ys2 + j * ys3] = ios_st(ios_act(acc, act, alpha, beta));
  }
}

// Layer normalization of rows of D contiguous elements: row r of sample n starts at n * xs0 + r * D
// (R rows a sample). (x - mean) / sqrt(var + eps) * w + bias, the variance biased. One block a row.
extern "C" __global__ void ios_layernorm(const ios_t* x, const ios_t* w, const ios_t* bias, ios_t* y,
    int R, int D, long long xs0, long long ys0, float eps) {
  __shared__ float red[IOS_RED];
  long long row = blockIdx.x;
  long long n = row / R, r = row % R;
  const ios_t* xp = x + n * xs0 + r * D;
  ios_t* yp = y + n * ys0 + r * D;
  float s = 0.0f;
  for (int d = threadIdx.x; d < D; d += IOS_RED) s += ios_ld(xp[d]);
  float mean = ios_block_reduce(s, red, 0) / (float)D;
  float q = 0.0f;
  for (int d = threadIdx.x; d < D; d += IOS_RED) { float v = ios_ld(xp[d]) - mean; q += v * v; }
  float inv = 1.0f / sqrtf(ios_block_reduce(q, red, 0) / (float)D + eps);
  for (int d = threadIdx.x; d < D; d += IOS_RED)
    yp[d] = ios_st((ios_ld(xp[d]) - mean) * inv * ios_ld(w[d]) + ios_ld(bias[d]));
}

// Along an axis of D elements between O outer and I inner positions (a sample is (O, D, I) row-major
// from n * xs0): mode 0 softmax, exp(v - max) / sum; mode 1 v / max(sqrt(sum v * v), eps). One block a row.
extern "C" __global__ void ios_rownorm(const ios_t* x, ios_t* y, int O, int D, int I, long long xs0, long long ys0,
    int mode, float eps) {
  __shared__ float red[IOS_RED];
  long long row = blockIdx.x;
  long long i = row % I, t = row / I;
  long long o = t % O, n = t / O;
  const ios_t* xp = x + n * xs0 + o * D * I + i;
  ios_t* yp = y + n * ys0 + o * D * I + i;
  if (mode == 0) {
    float m = IOS_NEG_INF;
    for (int d = threadIdx.x; d < D; d += IOS_RED) m = fmaxf(m, ios_ld(xp[(long long)d * I]));
    m = ios_block_reduce(m, red, 1);
    float s = 0.0f;
    for (int d = threadIdx.x; d < D; d += IOS_RED) s += expf(ios_ld(xp[(long long)d * I]) - m);
    s = ios_block_reduce(s, red, 0);
    for (int d = threadIdx.x; d < D; d += IOS_RED)
      yp[(long long)d * I] = ios_st(expf(ios_ld(xp[(long long)d * I]) - m) / s);
  } else {
    float s = 0.0f;
    for (int d = threadIdx.x; d < D; d += IOS_RED) { float v = ios_ld(xp[(long long)d * I]); s += v * v; }
    float norm = fmaxf(sqrtf(ios_block_reduce(s, red, 0)), eps);
    for (int d = threadIdx.x; d < D; d += IOS_RED)
      yp[(long long)d * I] = ios_st(ios_ld(xp[(long long)d * I]) / norm);
  }
}

// y = act(a) (op 0), act(a + b) (op 1), act(a * b) (op 2) over 6 axes (leading ones of extent 1), strides in
// elements (0 where a value broadcasts): transposes, reshapes, constants, the class token, wide element-wise
// ops and activations (an activation does not care about rank).
extern "C" __global__ void ios_strided(const ios_t* a, const ios_t* b, ios_t* y,
    int d0, int d1, int d2, int d3, int d4, int d5,
    long long as0, long long as1, long long as2, long long as3, long long as4, long long as5,
    long long bs0, long long bs1, long long bs2, long long bs3, long long bs4, long long bs5,
    long long ys0, long long ys1, long long ys2, long long ys3, long long ys4, long long ys5, int op,
    int act, float alpha, float beta) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long total = (long long)d0 * d1 * d2 * d3 * d4 * d5;
  if (i >= total) return;
  long long t = i;
  long long c5 = t % d5; t /= d5;
  long long c4 = t % d4; t /= d4;
  long long c3 = t % d3; t /= d3;
  long long c2 = t % d2; t /= d2;
  long long c1 = t % d1; long long c0 = t / d1;
  float v = ios_ld(a[c0 * as0 + c1 * as1 + c2 * as2 + c3 * as3 + c4 * as4 + c5 * as5]);
  if (op) {
    float u = ios_ld(b[c0 * bs0 + c1 * bs1 + c2 * bs2 + c3 * bs3 + c4 * bs4 + c5 * bs5]);
    v = op == 1 ? v + u : v * u;
  }
  y[c0 * ys0 + c1 * ys1 + c2 * ys2 + c3 * ys3 + c4 * ys4 + c5 * ys5] = ios_st(ios_act(v, act, alpha, beta));
}
"""


# ---- views ------------------------------------------------------------------------------------
def elem_strides(v) -> list[int]:
    """A device view's strides in elements (CuPy's and NumPy's are in bytes)."""
    return [int(s) // v.itemsize for s in v.strides]


def sample_stride(v) -> int:
    """The stride in elements between samples of ``v`` (batch first), checking that each sample's
    image is row-major contiguous (what every view of the CUDA program is; see the module)."""
    s = elem_strides(v)
    want = 1
    for d in range(v.ndim - 1, 0, -1):
        if v.shape[d] != 1 and s[d] != want:
            raise ValueError(f"a view of shape {tuple(v.shape)} and strides {s} is not contiguous within a sample")
        want *= int(v.shape[d])
    return s[0] if v.shape[0] != 1 else want


def _pad(values, fill, rank: int = MAX_RANK) -> list:
    values = list(values)
    if len(values) > rank:
        raise ValueError(f"a tensor of {len(values)} axes (the strided kernel takes at most {rank})")
    return [fill] * (rank - len(values)) + values


def broadcast_strides(v, shape) -> list[int]:
    """``v``'s strides in elements against ``shape`` (same rank): 0 along an axis of extent 1 that
    ``shape`` is larger in."""
    s = elem_strides(v)
    return [0 if v.shape[d] == 1 and shape[d] != 1 else s[d] for d in range(len(shape))]


# ---- launches (``k``: cuda_kernels.Kernels, whose _prepared/_grid make the launch) ------------
def strided_launch(k, a, a_strides, y, b=None, b_strides=None, op: int = STRIDED_COPY, act_code: int = 0,
                   alpha: float = 0.0, beta: float = 0.0):
    """``y = act(a)`` (or ``act(a op b)``) over ``y``'s shape, reading ``a`` (and ``b``) with the given
    strides in elements (one per axis of ``y``: permuted for a transpose, 0 to broadcast); ``act_code``
    one of ``cuda_kernels.ACT_CODES`` (0: none)."""
    i32, i64, f32 = np.int32, np.int64, np.float32
    shape = tuple(int(d) for d in y.shape)
    if len(a_strides) != len(shape) or (b is not None and len(b_strides) != len(shape)):
        raise ValueError(f"strided: {len(a_strides)} strides for a tensor of {len(shape)} axes")
    dims = _pad(shape, 1)
    args = (a, b if b is not None else a, y, *(i32(d) for d in dims), *(i64(s) for s in _pad(a_strides, 0)),
            *(i64(s) for s in _pad(b_strides if b is not None else a_strides, 0)),
            *(i64(s) for s in _pad(elem_strides(y), 0)), i32(op if b is not None else STRIDED_COPY), i32(act_code),
            f32(alpha), f32(beta))
    return k._grid("ios_strided", int(np.prod(shape)), args)


def matmul_launch(k, a, a_strides, b, b_strides, y, y_strides, dims, shift=None, act_code: int = 0,
                  alpha: float = 0.0, beta: float = 0.0):
    """``y[z0, z1] = act(a[z0, z1] @ b[z0, z1] + shift)`` for ``dims`` = (Z0, Z1, M, K, J): ``a`` read as
    (Z0, Z1, M, K), ``b`` as (Z0, Z1, K, J) and ``y`` written as (Z0, Z1, M, J) with the given strides in
    elements (0 where an operand is shared: a dense layer's weight)."""
    i32, i64, f32 = np.int32, np.int64, np.float32
    z0, z1, m, kk, j = (int(d) for d in dims)
    if any(len(s) != 4 for s in (a_strides, b_strides, y_strides)):
        raise ValueError("matmul: each operand's strides name 4 axes (z0, z1, rows, columns)")
    if shift is not None and tuple(shift.shape) != (j,):
        raise ValueError(f"matmul: a shift of shape {tuple(shift.shape)} for {j} output features")
    if z0 * z1 > MAX_GRID_YZ or (m + MATMUL_TILE - 1) // MATMUL_TILE > MAX_GRID_YZ:
        raise ValueError(f"matmul: {z0 * z1} matrices of {m} rows exceed CUDA's grid ({MAX_GRID_YZ} a side)")
    args = (a, b, shift if shift is not None else a, y, i32(z1), i32(m), i32(kk), i32(j),
            *(i64(s) for s in a_strides), *(i64(s) for s in b_strides), *(i64(s) for s in y_strides),
            i32(shift is not None), i32(act_code), f32(alpha), f32(beta))
    t = MATMUL_TILE
    return k._prepared("ios_matmul", ((j + t - 1) // t, (m + t - 1) // t, z0 * z1), (t, t), args)


def layernorm_launch(k, x, w, bias, y, axes: int, eps: float):
    """Layer normalization of ``x`` over its last ``axes`` axes into ``y`` (both per-sample contiguous)."""
    i32, i64, f32 = np.int32, np.int64, np.float32
    n, d = int(x.shape[0]), int(np.prod(x.shape[x.ndim - axes:]))
    rows = int(np.prod(x.shape[1:x.ndim - axes]))
    if tuple(w.shape) != (d,) or tuple(bias.shape) != (d,):
        raise ValueError(f"layernorm: weight {tuple(w.shape)} and bias {tuple(bias.shape)} for rows of {d}")
    args = (x, w, bias, y, i32(rows), i32(d), i64(sample_stride(x)), i64(sample_stride(y)), f32(eps))
    return k._prepared("ios_layernorm", (n * rows,), (REDUCE_THREADS,), args)


def rownorm_launch(k, x, y, axis: int, mode: int, eps: float = 0.0):
    """Softmax (``mode`` 0) or the L2 normalization (1) of ``x`` along its ``axis`` (of the batched
    shape, >= 1) into ``y`` (both per-sample contiguous)."""
    i32, i64, f32 = np.int32, np.int64, np.float32
    shape = tuple(int(s) for s in x.shape)
    if not 1 <= axis < len(shape):
        raise ValueError(f"rownorm: axis {axis} of a batched shape of {len(shape)} axes")
    o, d, i = int(np.prod(shape[1:axis])), shape[axis], int(np.prod(shape[axis + 1:]))
    args = (x, y, i32(o), i32(d), i32(i), i64(sample_stride(x)), i64(sample_stride(y)), i32(mode), f32(eps))
    return k._prepared("ios_rownorm", (shape[0] * o * i,), (REDUCE_THREADS,), args)


def transpose_strides(x, perm) -> list[int]:
    """The strides reading ``x`` (batched) in the order of a transpose's output: output axis ``i`` of
    the image is input axis ``perm[i]``; the batch stays first."""
    s = elem_strides(x)
    return [s[0], *(s[1 + p] for p in perm)]


def row_major(dims) -> list[int]:
    """The strides in elements of a row-major array of ``dims``."""
    out, acc = [], 1
    for d in reversed(list(dims)):
        out.append(acc)
        acc *= int(d)
    return out[::-1]


def as_shaped(v, dims) -> list[int]:
    """Strides reading ``v`` (per-sample contiguous) as samples of the image ``dims`` (same size):
    a reshape without a copy."""
    return [sample_stride(v), *row_major(dims)]


__all__ = ["MAX_RANK", "TENSOR_BODY", "TENSOR_KERNEL_NAMES", "as_shaped", "broadcast_strides",
           "layernorm_launch", "matmul_launch", "rownorm_launch", "sample_stride", "strided_launch",
           "row_major", "transpose_strides"]
