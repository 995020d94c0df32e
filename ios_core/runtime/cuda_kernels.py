"""The CUDA runtime's kernels: convolutions through NVIDIA's cuDNN Frontend, everything else
as CuPy kernels. All of them write into preallocated memory (never a temporary), so a run can
be captured into a CUDA graph, and all of them accept strided views (a channel slice of a
concatenation buffer) for inputs and outputs.

* Convolution: a cuDNN Frontend graph per convolution, ``conv_fprop`` -> ``bias`` -> the
  activation, fp32 in and out with fp32 compute, built once (``validate``,
  ``build_operation_graph``, ``create_execution_plans([A, FALLBACK])``, ``check_support``,
  ``build_plans``), executed with ``execute(variant_pack, workspace, handle=...)`` on the
  handle bound to the group's stream. A GPU whose cuDNN has no engine for the fused fp32
  graph gets ``conv_fprop`` alone followed by a CuPy bias+activation kernel: which one was
  used is recorded per convolution (``Conv.fused``).
* CuPy 14 has no cuDNN bindings and the Frontend's Python API has no pooling: pooling, global
  pooling, element-wise sums/products, activations and copies are CuPy ``ElementwiseKernel``
  and ``RawKernel`` kernels; linear layers are ``cupy.matmul`` into a preallocated output
  (cuBLAS; CuPy does not use TF32 unless ``CUPY_TF32=1``, which the runtime refuses).

Written against the documented APIs (cupy 14, nvidia-cudnn-frontend 1.32); defining the
kernels and describing the cuDNN graphs needs no GPU and is tested here; running them has
never happened in this project's development (see README).
"""

from __future__ import annotations

from dataclasses import dataclass

_ACT = {"identity": "{x}", "relu": "({x} > 0 ? {x} : (T)0)", "sigmoid": "((T)1 / ((T)1 + exp(-({x}))))",
        "tanh": "tanh({x})"}

_POOL_SRC = r"""
extern "C" __global__ void ios_pool2d(const float* x, float* y, int N, int C, int H, int W, int OH, int OW,
    long long xsn, long long xsc, long long ysn, long long ysc, int kh, int kw, int sh, int sw, int ph, int pw,
    int is_max) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long total = (long long)N * C * OH * OW;
  if (i >= total) return;
  int ow = i % OW; long long t = i / OW; int oh = t % OH; t /= OH; int c = t % C; int n = t / C;
  const float* xp = x + n * xsn + c * xsc;
  int h0 = oh * sh - ph, w0 = ow * sw - pw;
  float acc = is_max ? -INFINITY : 0.0f;
  for (int a = 0; a < kh; a++) {
    int h = h0 + a;
    if (h < 0 || h >= H) continue;
    for (int b = 0; b < kw; b++) {
      int w = w0 + b;
      if (w < 0 || w >= W) continue;
      float v = xp[h * W + w];
      acc = is_max ? fmaxf(acc, v) : acc + v;
    }
  }
  if (!is_max) acc /= (float)(kh * kw);  /* padding counted, as the IR (cuDNN INCLUDE_PADDING) */
  y[n * ysn + c * ysc + oh * OW + ow] = acc;
}

extern "C" __global__ void ios_global_pool(const float* x, float* y, int N, int C, int HW, long long xsn,
    long long xsc, long long ysn, long long ysc, int is_max) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)N * C) return;
  int c = i % C; int n = i / C;
  const float* xp = x + n * xsn + c * xsc;
  float acc = is_max ? -INFINITY : 0.0f;
  for (int k = 0; k < HW; k++) acc = is_max ? fmaxf(acc, xp[k]) : acc + xp[k];
  y[n * ysn + c * ysc] = is_max ? acc : acc / (float)HW;
}
"""

THREADS = 256


class Kernels:
    """The CuPy kernels, defined once (CuPy compiles each at its first launch)."""

    def __init__(self):
        import cupy

        self.cupy = cupy
        self.bias_act = {a: cupy.ElementwiseKernel("T x, T b", "T y", "y = " + e.format(x="(x + b)"),
                                                   f"ios_bias_{a}") for a, e in _ACT.items()}
        self.act = {a: cupy.ElementwiseKernel("T x", "T y", "y = " + e.format(x="x"), f"ios_act_{a}")
                    for a, e in _ACT.items()}
        self.add2 = cupy.ElementwiseKernel("T a, T b", "T y", "y = a + b", "ios_add2")
        self.mul2 = cupy.ElementwiseKernel("T a, T b", "T y", "y = a * b", "ios_mul2")
        self.add_into = cupy.ElementwiseKernel("T a", "T y", "y = y + a", "ios_add_into")
        self.mul_into = cupy.ElementwiseKernel("T a", "T y", "y = y * a", "ios_mul_into")
        self.copy = cupy.ElementwiseKernel("T x", "T y", "y = x", "ios_copy")
        module = cupy.RawModule(code=_POOL_SRC)
        self._module = module
        self._pool = None
        self._gpool = None

    def defined(self) -> bool:
        return all(k is not None for k in (self.add2, self.mul2, self.copy, self._module)) and len(self.act) == 4

    # RawModule functions are looked up (compiled) at the first use: on a GPU only
    def _fn(self, name):
        return self._module.get_function(name)

    def pool2d(self, x, y, kernel, stride, padding, is_max: bool) -> None:
        import numpy as np

        n, c, h, w = x.shape
        oh, ow = y.shape[2], y.shape[3]
        total = n * c * oh * ow
        if self._pool is None:
            self._pool = self._fn("ios_pool2d")
        isz = x.itemsize
        args = (x, y, np.int32(n), np.int32(c), np.int32(h), np.int32(w), np.int32(oh), np.int32(ow),
                np.int64(x.strides[0] // isz), np.int64(x.strides[1] // isz), np.int64(y.strides[0] // isz),
                np.int64(y.strides[1] // isz), np.int32(kernel[0]), np.int32(kernel[1]), np.int32(stride[0]),
                np.int32(stride[1]), np.int32(padding[0]), np.int32(padding[1]), np.int32(1 if is_max else 0))
        self._pool(((total + THREADS - 1) // THREADS,), (THREADS,), args)

    def global_pool(self, x, y, is_max: bool) -> None:
        import numpy as np

        n, c, h, w = x.shape
        if self._gpool is None:
            self._gpool = self._fn("ios_global_pool")
        isz = x.itemsize
        args = (x, y, np.int32(n), np.int32(c), np.int32(h * w), np.int64(x.strides[0] // isz),
                np.int64(x.strides[1] // isz), np.int64(y.strides[0] // isz), np.int64(y.strides[1] // isz),
                np.int32(1 if is_max else 0))
        self._gpool((((n * c) + THREADS - 1) // THREADS,), (THREADS,), args)


def _row_major(dims) -> list[int]:
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= d
    return list(reversed(strides))


def conv_graph(n: int, cin: int, h: int, w: int, cout: int, kernel, stride, padding, dilation, groups: int, act: str,
               fused: bool, out_stride=None, in_stride=None, out_hw=None, handle=None):
    """The cuDNN Frontend graph of one convolution (not yet built): fp32 tensors ``x``
    (``in_stride`` for a channel slice), ``w``, ``b`` and the output ``y`` (``out_stride`` to
    write into a concatenation's slice). ``fused``: ``y = act(conv(x, w) + b)`` in one graph;
    otherwise ``y = conv(x, w)`` and the caller adds the bias and activation."""
    import cudnn

    f32 = cudnn.data_type.FLOAT
    g = cudnn.pygraph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
    x_dims = [n, cin, h, w]
    w_dims = [cout, cin // groups, kernel[0], kernel[1]]
    x = g.tensor(dim=x_dims, stride=list(in_stride) if in_stride else _row_major(x_dims), data_type=f32, name="x")
    wt = g.tensor(dim=w_dims, stride=_row_major(w_dims), data_type=f32, name="w")
    y = g.conv_fprop(image=x, weight=wt, pre_padding=list(padding), post_padding=list(padding), stride=list(stride),
                     dilation=list(dilation), compute_data_type=f32, name="conv")
    tensors = {"x": x, "w": wt}
    if fused:
        b = tensors["b"] = g.tensor(dim=[1, cout, 1, 1], stride=[cout, 1, 1, 1], data_type=f32, name="b")
        y = g.bias(input=y, bias=b, compute_data_type=f32, name="bias")
        if act == "relu":
            y = g.relu(input=y, compute_data_type=f32, name="relu")
        elif act == "sigmoid":
            y = g.sigmoid(input=y, compute_data_type=f32, name="sigmoid")
        elif act == "tanh":
            y = g.tanh(input=y, compute_data_type=f32, name="tanh")
    if out_hw is None:
        oh = (h + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
        ow = (w + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    else:
        oh, ow = out_hw
    y_dims = [n, cout, oh, ow]
    y.set_output(True).set_data_type(f32).set_dim(y_dims).set_stride(list(out_stride) if out_stride
                                                                      else _row_major(y_dims))
    tensors["y"] = y
    return g, tensors


@dataclass
class Conv:
    """A built convolution: its cuDNN graph, tensors, workspace size and whether bias and
    activation are fused into it."""

    graph: object
    tensors: dict
    workspace_bytes: int
    fused: bool


def build_conv(handle, **geometry) -> Conv:
    """Build the fused graph; when cuDNN has no engine for it (fp32 conv+bias+act is not
    supported on every GPU), build the convolution alone."""
    import cudnn

    errors = []
    for fused in (True, False):
        try:
            g, tensors = conv_graph(fused=fused, handle=handle, **geometry)
            g.validate()
            g.build_operation_graph()
            g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            # fp32 strict: no engine that runs fp32 on tensor cores (TF32) or converts inputs down
            g.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE, cudnn.numerical_note.DOWN_CONVERT_INPUTS,
                                      cudnn.numerical_note.REDUCED_PRECISION_REDUCTION])
            g.check_support()
            g.build_plans()
            return Conv(g, tensors, int(g.get_workspace_size()), fused)
        except Exception as e:  # cudnnGraphNotSupportedError and friends: try the unfused graph
            errors.append(f"{'fused' if fused else 'unfused'}: {type(e).__name__}: {str(e)[:200]}")
    raise RuntimeError("cuDNN has no engine for this convolution: " + "; ".join(errors))
