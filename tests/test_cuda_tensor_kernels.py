"""The real device's launches of the general tensors' kernels (ios_core/runtime/cuda_tensor_kernels.py),
checked without a GPU: ``CupyDevice``'s methods (dense, batched_matmul, layernorm, softmax, l2norm,
transpose, reshape, constant, prepend, and element-wise sums of tensors of more than 4 axes) pack
their launches as on a GPU, and each packed launch is executed here by an interpreter of the CUDA C
kernel it names, written from the kernel's source (its grid, its arguments, its index arithmetic),
on NumPy memory: the views are the program's (token slices, concatenation slices), so a stride or
shape the launch translates wrongly reads or writes the wrong elements, and the result is compared
with torch's. The CUDA C itself is compiled by NVRTC in tests/test_cuda_sources.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ios_core.runtime import cuda_tensor_kernels as tk


def _flat(a: np.ndarray) -> tuple[np.ndarray, int]:
    """The allocation ``a`` views (flat) and ``a``'s first element's index in it: what a pointer is."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    assert root.flags.c_contiguous
    return root.reshape(-1), (a.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // a.itemsize


def _act(code: int, v: np.ndarray, alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    from ios_core.runtime.cuda_kernels import ACT_CODES
    from tests.stream_fakes import _act as torch_act

    name = {c: n for n, c in ACT_CODES.items()}[int(code)]
    return torch_act(name, alpha, beta)(torch.from_numpy(v)).numpy()


def _offsets(dims, strides) -> np.ndarray:
    idx = np.indices([int(d) for d in dims]).reshape(len(dims), -1)
    return (idx * np.asarray([int(s) for s in strides], np.int64)[:, None]).sum(0)


class Interpreter:
    """What the GPU would do with a launch: ``(grid, block, args)`` of the kernel ``name``."""

    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    def __call__(self, grid, block, args):
        self.log.append(self.name)
        getattr(self, self.name)(grid, block, args)

    @staticmethod
    def ios_strided(grid, block, args):
        (a, ao), (b, bo), (y, yo) = (_flat(p) for p in args[:3])
        dims, sa, sb, sy, op = args[3:9], args[9:15], args[15:21], args[21:27], int(args[27])
        act, alpha, beta = int(args[28]), float(args[29]), float(args[30])
        assert grid[0] * block[0] >= int(np.prod(dims))
        v = a[ao + _offsets(dims, sa)].astype(np.float32)
        if op:
            u = b[bo + _offsets(dims, sb)]
            v = v + u if op == 1 else v * u
        y[yo + _offsets(dims, sy)] = _act(act, v.astype(np.float32), alpha, beta)

    @staticmethod
    def ios_matmul(grid, block, args):
        (a, ao), (b, bo), (sh, so), (y, yo) = (_flat(p) for p in args[:4])
        z1, m, k, j = (int(v) for v in args[4:8])
        sa, sb, sy = args[8:12], args[12:16], args[16:20]
        has_shift, act = int(args[20]), int(args[21])
        t = tk.MATMUL_TILE
        assert block == (t, t) and grid[0] * t >= j and grid[1] * t >= m
        for z in range(grid[2]):
            z0, zz = divmod(z, z1)
            A = a[ao + z0 * sa[0] + zz * sa[1] + _offsets((m, k), sa[2:])].reshape(m, k)
            B = b[bo + z0 * sb[0] + zz * sb[1] + _offsets((k, j), sb[2:])].reshape(k, j)
            v = A.astype(np.float64) @ B.astype(np.float64)
            if has_shift:
                v = v + sh[so:so + j]
            y[yo + z0 * sy[0] + zz * sy[1] + _offsets((m, j), sy[2:])] = _act(act, v.astype(np.float32)).reshape(-1)

    @staticmethod
    def ios_layernorm(grid, block, args):
        (x, xo), (w, wo), (bi, bo), (y, yo) = (_flat(p) for p in args[:4])
        r, d, xs0, ys0, eps = int(args[4]), int(args[5]), int(args[6]), int(args[7]), float(args[8])
        assert block == (tk.REDUCE_THREADS,)
        for row in range(grid[0]):
            n, rr = divmod(row, r)
            v = x[xo + n * xs0 + rr * d + np.arange(d)].astype(np.float64)
            out = (v - v.mean()) / np.sqrt(v.var() + eps) * w[wo:wo + d] + bi[bo:bo + d]
            y[yo + n * ys0 + rr * d + np.arange(d)] = out

    @staticmethod
    def ios_rownorm(grid, block, args):
        (x, xo), (y, yo) = (_flat(p) for p in args[:2])
        o, d, i, xs0, ys0, mode, eps = (*(int(v) for v in args[2:8]), float(args[8]))
        for row in range(grid[0]):
            ii, t = row % i, row // i
            oo, n = t % o, t // o
            at = oo * d * i + ii + np.arange(d) * i
            v = x[xo + n * xs0 + at].astype(np.float64)
            if mode == 0:  # the kernel's own test (not tk's constant: a constant it disagrees with must fail)
                e = np.exp(v - v.max())
                out = e / e.sum()
            else:
                out = v / max(np.sqrt((v * v).sum()), eps)
            y[yo + n * ys0 + at] = out


@pytest.fixture
def dev():
    """``CupyDevice``'s methods on NumPy memory, every kernel launch interpreted (no GPU)."""
    pytest.importorskip("cupy")
    from ios_core.runtime.cuda_device import CupyDevice
    from ios_core.runtime.cuda_kernels import KERNEL_NAMES, Kernels

    d = object.__new__(CupyDevice)
    d.k = Kernels()  # defines the module; compiling it needs a GPU, the launches are interpreted
    d.launched = []
    d.k._fns = {n: Interpreter(n, d.launched) for n in KERNEL_NAMES if n in tk.TENSOR_KERNEL_NAMES}
    d.upload = lambda a: np.ascontiguousarray(a, dtype=np.float32)
    return d


RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _slice(full, begin, end):
    """Elements [begin, end) of the first image axis of ``full``: a view strided across samples."""
    return full[:, begin:end]


def _close(got, want):
    np.testing.assert_allclose(got, np.asarray(want, np.float32), rtol=1e-5, atol=1e-5)


def test_dense_reads_a_token_slice_and_writes_into_a_concatenation_slice(dev):
    x = _slice(_rand(2, 7, 6), 1, 5)
    out_full = np.full((2, 6, 3), np.nan, np.float32)
    out = _slice(out_full, 2, 6)
    w, b = _rand(3, 6), _rand(3)
    dev.dense(x, out, 0, w, b, "gelu")()
    want = torch.nn.functional.gelu(torch.from_numpy(x) @ torch.from_numpy(w).t() + torch.from_numpy(b))
    _close(out, want)
    assert np.isnan(out_full[:, :2]).all()  # nothing written outside the slice
    assert dev.launched == ["ios_matmul"]


def test_batched_matmul_over_samples_and_heads(dev):
    a = _slice(_rand(2, 4, 5, 3), 1, 4)  # 3 heads of 5 x 3
    b = _rand(2, 3, 3, 4)
    out = np.zeros((2, 3, 5, 4), np.float32)
    dev.batched_matmul(a, b, out)()
    _close(out, torch.from_numpy(a) @ torch.from_numpy(b))


def test_a_large_matmul_spans_several_tiles(dev):
    a, b = _rand(1, 37, 20), _rand(1, 20, 19)
    out = np.zeros((1, 37, 19), np.float32)
    dev.batched_matmul(a, b, out)()
    _close(out, a @ b)


@pytest.mark.parametrize("axes", [1, 2, 3])
def test_layernorm_over_the_last_axes(dev, axes):
    x = _slice(_rand(2, 5, 3, 4), 1, 4)
    shape = x.shape[-axes:]
    w, b = _rand(*shape), _rand(*shape)
    out = np.zeros(x.shape, np.float32)
    dev.layernorm(x, out, w, b, axes, 1e-6)()
    want = torch.nn.functional.layer_norm(torch.from_numpy(x), shape, torch.from_numpy(w), torch.from_numpy(b), 1e-6)
    _close(out, want)


@pytest.mark.parametrize("axis", [1, 2, 3])
def test_softmax_and_l2norm_along_any_axis(dev, axis):
    x = _slice(_rand(2, 6, 3, 4), 2, 5)
    out = np.zeros(x.shape, np.float32)
    dev.softmax(x, out, axis)()
    _close(out, torch.softmax(torch.from_numpy(x), axis))
    dev.l2norm(x, out, axis, 1e-12)()
    _close(out, torch.nn.functional.normalize(torch.from_numpy(x), dim=axis, eps=1e-12))


@pytest.mark.parametrize("perm", [(1, 0), (2, 0, 1), (1, 2, 0), (3, 1, 4, 0, 2)])
def test_transpose_up_to_five_image_axes(dev, perm):
    dims = (2, 3, 4, 2, 3)[:len(perm)]
    x = _slice(_rand(2, dims[0] + 1, *dims[1:]), 1, dims[0] + 1)
    out = np.zeros((2, *(dims[p] for p in perm)), np.float32)
    dev.transpose(x, out, perm)()
    _close(out, np.transpose(x, (0, *(1 + p for p in perm))))


def test_reshape_copies_a_slice_in_row_major_order(dev):
    x = _slice(_rand(2, 5, 6), 1, 3)  # 2 x 6 of each sample
    out = np.zeros((2, 3, 2, 2), np.float32)
    dev.reshape(x, out)()
    _close(out, x.reshape(2, 3, 2, 2))


@pytest.mark.parametrize("shape,const", [((5, 6), (6,)), ((5, 6), (5, 6)), ((4, 3, 2), (4, 1, 1)), ((4, 3, 2), (1,))])
@pytest.mark.parametrize("how", ["add", "mul"])
def test_constant_broadcasts_from_the_last_axis(dev, shape, const, how):
    x = _rand(2, *shape)
    c = _rand(*const)
    out = np.zeros(x.shape, np.float32)
    dev.constant(x, out, c, how)()
    _close(out, x * c if how == "mul" else x + c)


def test_prepend_puts_the_rows_before_each_sample(dev):
    x = _slice(_rand(3, 6, 4), 2, 6)
    rows = _rand(1, 4)
    out = np.zeros((3, 5, 4), np.float32)
    dev.prepend(x, out, rows)()
    _close(out, np.concatenate([np.broadcast_to(rows, (3, 1, 4)), x], 1))


@pytest.mark.parametrize("how", ["add", "mul"])
def test_wide_element_sums_broadcast(dev, how):
    a = _rand(2, 3, 2, 2, 2, 2)
    s = _rand(2, 3, 1, 1, 1, 1)
    c = _rand(2, 3, 2, 2, 2, 2)
    out = np.zeros(a.shape, np.float32)
    dev.combine([s, a, c], how, out)()
    _close(out, s * a * c if how == "mul" else s + a + c)


@pytest.mark.parametrize("act, alpha, beta", [("sigmoid", 0.0, 0.0), ("gelu", 0.0, 0.0), ("clip", -0.5, 0.75)])
def test_an_activation_of_five_axes_takes_the_strided_kernel(dev, act, alpha, beta):
    """Past ios_map's 4 axes an activation is ios_strided's copy with the activation applied as it
    stores, read from a slice of a concatenation (strided across samples)."""
    from tests.stream_fakes import _act as torch_act

    x = _slice(_rand(2, 5, 3, 2, 2), 1, 4)
    out = np.full(x.shape, np.nan, np.float32)
    dev.activation(x, out, act, alpha, beta)()
    assert dev.launched == ["ios_strided"]
    _close(out, torch_act(act, alpha, beta)(torch.from_numpy(np.ascontiguousarray(x))).numpy())


def test_an_affine_of_five_axes_scales_and_shifts_its_first_image_axis(dev):
    x = _slice(_rand(2, 5, 3, 2, 2), 1, 4)
    scale, shift = _rand(3), _rand(3)
    out = np.full(x.shape, np.nan, np.float32)
    dev.affine(x, out, scale, shift, "relu")()
    assert dev.launched == ["ios_strided", "ios_strided"]
    _close(out, np.maximum(x * scale.reshape(1, 3, 1, 1, 1) + shift.reshape(1, 3, 1, 1, 1), 0))


def test_a_view_strided_within_a_sample_is_refused():
    x = np.zeros((2, 4, 6), np.float32)[:, :, 1:5]
    with pytest.raises(ValueError, match="not contiguous within a sample"):
        tk.sample_stride(x)
    assert tk.sample_stride(np.zeros((2, 7, 6), np.float32)[:, 1:5]) == 42


# ---- whole programs: the CUDA executor on CupyDevice's own launches, interpreted ---------------------
class FeatureMapKernels(Interpreter):
    """The feature-map kernels a transformer block also launches (cuda_kernels.CUDA_BODY): ``ios_map``
    (element-wise sums, copies into scratch), ``ios_linear`` (the classifier) and ``ios_global_pool``."""

    @staticmethod
    def ios_map(grid, block, args):
        (a, ao), (b, bo), (sc, sco), (sh, sho), (y, yo) = (_flat(p) for p in args[:5])
        dims, sa, sb, sy = args[5:9], args[9:13], args[13:17], args[17:21]
        op, has_scale, has_shift, act = (int(v) for v in args[21:25])
        v = a[ao + _offsets(dims, sa)].astype(np.float32)
        if op:
            u = b[bo + _offsets(dims, sb)]
            v = v + u if op == 1 else v * u
        c = np.indices([int(d) for d in dims])[1].reshape(-1)
        if has_scale:
            v = v * sc[sco + c]
        if has_shift:
            v = v + sh[sho + c]
        y[yo + _offsets(dims, sy)] = _act(act, v)

    @staticmethod
    def ios_linear(grid, block, args):
        (x, xo), (w, wo), (sh, so), (y, yo) = (_flat(p) for p in args[:4])
        n, k, j, ys0, ys1, act = (int(v) for v in args[4:10])
        v = x[xo:xo + n * k].reshape(n, k).astype(np.float64) @ w[wo:wo + k * j].reshape(k, j) + sh[so:so + j]
        y[yo + _offsets((n, j), (ys0, ys1))] = _act(act, v.astype(np.float32)).reshape(-1)

    @staticmethod
    def ios_global_pool(grid, block, args):
        (x, xo), (y, yo) = (_flat(p) for p in args[:2])
        n, c, h, w = (int(v) for v in args[2:6])
        v = x[xo + _offsets((n, c, h, w), args[6:10])].reshape(n, c, h * w)
        y[yo + _offsets((n, c), args[10:12])] = (v.max(-1) if int(args[12]) else v.mean(-1)).reshape(-1)


class _Stub:
    """A stream or an event: the program's calls run one after another on the host, an order CUDA allows."""

    def __getattr__(self, name):
        return lambda *a, **k: None


def interpreted_device():
    """``CupyDevice`` with NumPy memory (fresh memory is NaN), host-ordered streams, torch's convolution
    in place of cuDNN's, and every CUDA C kernel launch interpreted."""
    import types

    from ios_core.runtime.cuda_device import CupyDevice
    from ios_core.runtime.cuda_kernels import KERNEL_NAMES, Kernels

    class Interpreted(CupyDevice):
        def __init__(self):
            self.precision, self.dtype, self.itemsize = "fp32", np.dtype(np.float32), 4
            self.cp = types.SimpleNamespace(empty=lambda shape, dtype: np.full(shape, np.nan, dtype))
            self.k = Kernels()
            self.launched: list[str] = []
            self.k._fns = {n: FeatureMapKernels(n, self.launched) for n in KERNEL_NAMES}

        def upload(self, a):
            return np.ascontiguousarray(a, dtype=np.float32)

        def stream(self, index):
            return _Stub()

        def event(self):
            return _Stub()

        def bind_streams(self, streams):
            pass

        def finalize(self, nstreams):
            return []

        def sync_device(self):
            pass

        def sync(self, stream):
            pass

        def stats(self):
            return {}

        def write(self, view, x, stream):
            view[...] = x

        def read(self, view, stream):
            return np.array(view)

        def conv(self, x, out, stream, weight, bias, spec):
            from tests.stream_fakes import _act as torch_act

            pt, pl, pb, pr = spec.pads

            def run():
                xp = torch.nn.functional.pad(torch.from_numpy(np.array(x)), (pl, pr, pt, pb))
                y = torch.nn.functional.conv2d(xp, torch.from_numpy(weight), torch.from_numpy(bias), spec.stride, 0,
                                               spec.dilation, spec.groups)
                out[...] = torch_act(spec.act)(y).numpy()
            return run

    return Interpreted()


@pytest.mark.parametrize("name", ["vit", "convnext", "cosine"])
def test_the_executor_on_cupy_devices_own_launches_matches_the_oracle(name):
    """The CUDA executor (CudaRuntime, a parallel schedule) over ``CupyDevice``'s real launch packing,
    each kernel interpreted: what would run on a GPU, short of the GPU, against the oracle."""
    pytest.importorskip("cupy")
    from ios_core import reference
    from ios_core.check import compare
    from ios_core.runtime.cuda import CudaRuntime
    from tests.test_ops_transformer import GRAPHS
    from tests.test_runtime_cuda_fake import _asap
    from tests.test_runtime_cuda_tensors_fake import peaked

    graph = _asap((peaked(GRAPHS[name]) if name == "vit" else GRAPHS[name])())
    x = reference.random_input(graph, 2, seed=1)
    dev = interpreted_device()
    rt = CudaRuntime(graph, 2, "cuda", backend=dev)
    chk = compare(rt.run(x), reference.run(graph, x), 1e-4)
    assert chk.passed, chk
    assert set(dev.launched) >= {"ios_matmul", "ios_layernorm", "ios_strided"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vit_tiny", "convnext_tiny"])
def test_the_zoos_transformers_at_full_size_on_cupy_devices_own_launches(name):
    """The zoo's vit_tiny and convnext_tiny (224x224, batch 1) through CupyDevice's launch packing, each
    kernel interpreted (4 s and 7 s on a loaded 2-core machine)."""
    pytest.importorskip("cupy")
    from ios_core import models, reference
    from ios_core.check import compare
    from ios_core.runtime.cuda import CudaRuntime

    graph = models.get(name).init_weights(0)
    x = reference.random_input(graph, 1, seed=0)
    chk = compare(CudaRuntime(graph, 1, "cuda", backend=interpreted_device()).run(x), reference.run(graph, x), 1e-4)
    assert chk.passed, chk


# ---- the launches' packing on its own: grids, padding, what CUDA cannot launch -------------------------
class _Packer:
    """A ``Kernels`` that hands back each launch's packing instead of the launch."""

    @staticmethod
    def _prepared(name, grid, block, args):
        return name, grid, block, args

    @staticmethod
    def _grid(name, total, args):
        return name, total, args


def _z(*shape):
    return np.zeros(shape, np.float32)


def test_the_matmul_grid_is_one_block_a_tile_of_the_output_and_one_a_matrix():
    a = _z(1)
    for m, j, want in [(16, 16, (1, 1)), (17, 16, (1, 2)), (16, 17, (2, 1)), (1, 33, (3, 1)), (32, 1, (1, 2))]:
        name, grid, block, args = tk.matmul_launch(_Packer, a, [0] * 4, a, [0] * 4, a, [0] * 4, (2, 3, m, 5, j))
        assert (name, grid, block) == ("ios_matmul", (*want, 6), (16, 16)), (m, j)
        assert [int(v) for v in args[4:8]] == [3, m, 5, j] and int(args[20]) == 0  # Z1, M, K, J; no shift
        assert [float(v) for v in args[21:24]] == [0, 0, 0]  # no activation: its parameters 0 (ios_act's
        # clip and hard sigmoid read them)
    args = tk.matmul_launch(_Packer, a, [0] * 4, a, [0] * 4, a, [0] * 4, (1, 1, 1, 1, 1), act_code=9, alpha=-0.5,
                            beta=2.0)[3]
    assert [float(v) for v in args[21:24]] == [9, -0.5, 2.0]


def test_matmul_refuses_what_cuda_cannot_launch():
    a = _z(1)

    def launch(dims, strides=(0, 0, 0, 0), shift=None):
        return tk.matmul_launch(_Packer, a, list(strides), a, [0] * 4, a, [0] * 4, dims, shift=shift)

    assert launch((65535, 1, 1, 1, 1))[1] == (1, 1, 65535)  # gridDim.z at CUDA's limit
    assert launch((1, 1, 65535 * 16, 1, 1))[1] == (1, 65535, 1)  # gridDim.y at CUDA's limit
    for dims, count in [((65536, 1, 1, 1, 1), 65536), ((256, 257, 1, 1, 1), 65792), ((1, 1, 65535 * 16 + 1, 1, 1), 1)]:
        with pytest.raises(ValueError, match=f"{count} matrices of {dims[2]} rows exceed CUDA's grid"):
            launch(dims)
    for strides in [(0, 0, 0), (0, 0, 0, 0, 0)]:
        with pytest.raises(ValueError, match="4 axes"):
            launch((1, 1, 2, 2, 3), strides)
    assert int(launch((1, 1, 2, 2, 3), shift=_z(3))[3][20]) == 1
    for shape in [(4,), (1, 3)]:
        with pytest.raises(ValueError, match="a shift of shape"):
            launch((1, 1, 2, 2, 3), shift=_z(*shape))


def test_strided_pads_to_six_axes_and_refuses_strides_that_do_not_name_each_axis():
    y = _z(2, 3)
    name, total, args = tk.strided_launch(_Packer, y, [3, 1], y, op=tk.STRIDED_ADD)  # no b: a copy
    assert (name, total) == ("ios_strided", 6)
    assert [int(v) for v in args[3:9]] == [1, 1, 1, 1, 2, 3]  # dims, leading ones
    assert [int(v) for v in args[13:15]] == [3, 1] == [int(v) for v in args[19:21]]  # the strides given, last
    assert int(args[27]) == tk.STRIDED_COPY and [float(v) for v in args[28:31]] == [0, 0, 0]  # no activation
    act = tk.strided_launch(_Packer, y, [3, 1], y, act_code=9, alpha=-0.5, beta=2.0)[2]
    assert (int(act[28]), float(act[29]), float(act[30])) == (9, -0.5, 2.0)
    body = tk.TENSOR_BODY[tk.TENSOR_BODY.index("void ios_strided("):]  # the interpreter's reading of the kernel
    assert "int op,\n    int act, float alpha, float beta)" in body and "ios_st(ios_act(v, act, alpha, beta))" in body
    assert int(tk.strided_launch(_Packer, y, [3, 1], y, b=y, b_strides=[0, 1], op=tk.STRIDED_MUL)[2][27]) == 2
    for a_strides, b_strides in [([1], [0, 1]), ([3, 1, 0], [0, 1]), ([3, 1], [1]), ([3, 1], [0, 0, 1])]:
        with pytest.raises(ValueError, match="strides for a tensor of 2 axes"):
            tk.strided_launch(_Packer, y, a_strides, y, b=y, b_strides=b_strides)
    six = _z(1, 1, 1, 1, 1, 2)
    assert tk.strided_launch(_Packer, six, [0] * 6, six)[1] == 2
    seven = _z(1, 1, 1, 1, 1, 1, 2)
    with pytest.raises(ValueError, match="7 axes .* at most 6"):
        tk.strided_launch(_Packer, seven, [0] * 7, seven)


def test_layernorm_packs_rows_and_refuses_a_weight_or_bias_of_another_size():
    x = _z(2, 3, 4)
    name, grid, block, args = tk.layernorm_launch(_Packer, x, _z(4), _z(4), x, 1, 1e-5)
    assert (grid, block, [int(v) for v in args[4:8]]) == ((6,), (256,), [3, 4, 12, 12])
    assert tk.layernorm_launch(_Packer, x, _z(12), _z(12), x, 2, 1e-5)[1] == (2,)
    for w, b in [(_z(5), _z(4)), (_z(3), _z(4)), (_z(4), _z(3)), (_z(4), _z(4, 1))]:
        with pytest.raises(ValueError, match="layernorm: weight"):
            tk.layernorm_launch(_Packer, x, w, b, x, 1, 1e-5)


def test_rownorm_runs_along_an_image_axis_only():
    x = _z(2, 3, 4)
    _, grid, block, args = tk.rownorm_launch(_Packer, x, x, 1, tk.ROWNORM_L2, 1e-12)
    assert (grid, block, [int(v) for v in args[2:5]]) == ((8,), (256,), [1, 3, 4])  # O, D, I
    assert [int(v) for v in tk.rownorm_launch(_Packer, x, x, 2, tk.ROWNORM_SOFTMAX)[3][2:5]] == [3, 4, 1]
    for axis in (0, 3, 4, -1):
        with pytest.raises(ValueError, match=f"axis {axis} of a batched shape of 3 axes"):
            tk.rownorm_launch(_Packer, x, x, axis, tk.ROWNORM_SOFTMAX)


def test_an_axis_of_extent_one_may_have_any_stride():
    assert tk.sample_stride(_z(2, 6)[:, None, :]) == 6  # NumPy's new axis: stride 0
    assert tk.sample_stride(_z(2, 5, 6)[:, 1:3, None]) == 30
    assert tk.sample_stride(_z(1, 5, 6)[:, 1:3]) == 12  # one sample: its image's size
    assert tk.sample_stride(_z(2, 5, 1)[:, 1:3]) == 5  # a last axis of extent one
    with pytest.raises(ValueError, match="not contiguous within a sample"):
        tk.sample_stride(np.broadcast_to(_z(2, 1, 1), (2, 3, 6)))  # stride 0 along an axis of extent 3
    assert tk.broadcast_strides(_z(2, 1, 6), (2, 4, 6)) == [6, 0, 1]
    assert tk.broadcast_strides(_z(1, 4, 6), (2, 4, 6)) == [0, 6, 1]
    assert tk.broadcast_strides(_z(2, 4, 6), (2, 4, 6)) == [24, 6, 1]


def test_strides_of_transposes_and_reshapes():
    assert tk.row_major((2, 3, 4)) == [12, 4, 1] and tk.row_major(()) == []
    x = _z(2, 4, 3, 5)[:, 1:3]  # per sample 2 x 3 x 5, samples 60 apart
    assert tk.transpose_strides(x, (2, 0, 1)) == [60, 1, 15, 5]
    assert tk.as_shaped(x, (5, 6)) == [60, 6, 1]
