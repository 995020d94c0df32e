"""IOS on cuda at fp16 and bf16 (issue 46), on the tests' fake device: the same executor, arena,
streams and CUDA-graph capture as at fp32, with every buffer at the precision, weights cast once at
build, cuDNN's data types declared by the real ``cuda_kernels.conv_data_types`` and checked against
cuDNN's supported configurations (``tests/stream_fakes_rules.CudaRules``), each kernel handed buffers of
its element type, and the output checked against the fp32 oracle within the precision's bound.
Written and tested here; not yet run on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from ios_core import models, reference
from ios_core.check import check_precision, compare
from ios_core.reference import random_input
from tests.runtime_helpers import mixed_graph
from tests.stream_fakes import TorchQueueDevice
from tests.stream_fakes_rules import CudaRules, CudnnError, DtypeError
from tests.test_runtime_cuda_fake import _asap

CONFIG = {"fp16": "PSEUDO_HALF_CONFIG", "bf16": "PSEUDO_BFLOAT16_CONFIG", "fp32": "FLOAT_CONFIG"}
GRAPHS = {
    "mixed": lambda: _asap(mixed_graph()),
    "squeezenet": lambda: _asap(models.get("squeezenet", image_size=64, num_classes=10)),
}


def _runtime(graph, batch, precision, seed=0, cuda_graph=False):
    from ios_core.runtime.cuda import CudaRuntime

    return CudaRuntime(graph, batch, "cuda", backend=TorchQueueDevice(seed, precision=precision), cuda_graph=cuda_graph,
                       precision=precision)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_half_precision_program_matches_the_fp32_oracle_within_its_bound(name, precision):
    import torch

    graph = GRAPHS[name]().init_weights(0)
    x = random_input(graph, 2, seed=5)
    ref = reference.run(graph, x)
    for seed in range(3):  # random CUDA-legal stream orders
        rt = _runtime(graph, 2, precision, seed)
        out = rt.run(x)
        assert out.dtype == np.float32
        chk = check_precision(out, ref, precision)
        assert chk.passed, (name, precision, seed, chk)
    # it computed at the precision: the error is that of 16-bit values, well above fp32's
    assert compare(out, ref, 1e-4).max_rel_err > 1e-4
    dev = rt.dev
    assert rt.program.arena.dtype == getattr(torch, {"fp16": "float16", "bf16": "bfloat16"}[precision])
    assert rt.program.itemsize == 2
    assert dev.conv_configs and set(dev.conv_configs) == {CONFIG[precision]}
    assert rt.stats["precision"] == precision


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precision_cuda_graph_replays(precision):
    graph = GRAPHS["mixed"]().init_weights(1)
    x = random_input(graph, 2, seed=2)
    ref = reference.run(graph, x)
    rt = _runtime(graph, 2, precision, seed=3, cuda_graph=True)
    assert rt.dev.captured == 1
    for _ in range(2):
        assert check_precision(rt.run(x), ref, precision).passed


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_the_memory_figures_are_the_devices_bytes_at_its_precision(precision):
    """The plan counts 4-byte elements; the runtime's stats report the bytes its device buffers hold:
    at fp16/bf16 half the fp32 figures (the arena as allocated, the activations), the plan's offsets
    unchanged."""
    graph = GRAPHS["mixed"]().init_weights(0)
    rt = _runtime(graph, 2, precision)
    arena = rt.program.arena
    st, plan = rt.stats, rt.plan.stats()
    assert st["arena_bytes"] == arena.numel() * arena.element_size() == rt.program.stats["arena_bytes"]
    assert st["peak_activation_bytes"] == st["arena_bytes"]
    share = {"fp32": 1, "fp16": 2, "bf16": 2}[precision]
    assert st["arena_bytes"] * share == plan["arena_bytes"] and st["naive_activation_bytes"] * share == \
        plan["naive_activation_bytes"]


def test_fp32_declares_cudnns_float_configuration():
    graph = GRAPHS["mixed"]().init_weights(0)
    rt = _runtime(graph, 1, "fp32")
    x = random_input(graph, 1, seed=1)
    assert compare(rt.run(x), reference.run(graph, x), 1e-4).passed
    assert set(rt.dev.conv_configs) == {"FLOAT_CONFIG"} and rt.program.itemsize == 4


def test_cudnn_configurations_the_fake_refuses():
    """As cuDNN: no mixed input types, bf16 only with float compute; a buffer bound to a tensor of
    another data type is refused (on a GPU it would compute garbage)."""
    half = {"x": "HALF", "w": "HALF", "b": "HALF", "y": "HALF", "compute": "FLOAT", "intermediate": "FLOAT"}
    assert CudaRules.cudnn_conv(half, {"x": "HALF", "w": "HALF", "b": "HALF", "y": "HALF"}) == "PSEUDO_HALF_CONFIG"
    with pytest.raises(CudnnError, match="NotSupported"):
        CudaRules.cudnn_conv({**half, "w": "FLOAT"}, {})
    with pytest.raises(CudnnError, match="NotSupported"):
        CudaRules.cudnn_conv({k: "BFLOAT16" for k in half}, {})  # bf16 compute: no such configuration
    with pytest.raises(DtypeError, match="tensor w is declared HALF but bound to a FLOAT"):
        CudaRules.cudnn_conv(half, {"x": "HALF", "w": "FLOAT"})


def test_a_mixed_descriptor_from_the_runtime_is_refused(monkeypatch):
    """If the runtime declared its weights FLOAT beside HALF data (as cuDNN has no such
    configuration), the fake fails the build where cuDNN's check_support would."""
    from ios_core.runtime import cuda_kernels

    real = cuda_kernels.conv_data_types
    monkeypatch.setattr(cuda_kernels, "conv_data_types", lambda p: {**real(p), "w": "FLOAT"})
    graph = GRAPHS["mixed"]().init_weights(0)
    with pytest.raises(CudnnError):
        _runtime(graph, 1, "fp16")


def test_a_buffer_of_another_element_type_is_refused(monkeypatch):
    """A kernel compiled for fp16 handed an fp32 buffer (here: the input buffer allocated at fp32)
    fails on the fake; on a GPU it would read the bits as halves."""
    import torch

    dev = TorchQueueDevice(0, precision="fp16")
    monkeypatch.setattr(dev, "empty_shaped", lambda shape: torch.full(tuple(shape), float("nan")))
    from ios_core.runtime.cuda import CudaRuntime

    graph = GRAPHS["mixed"]().init_weights(0)
    with pytest.raises(DtypeError, match="declared HALF but bound to a FLOAT"):
        rt = CudaRuntime(graph, 1, "cuda", backend=dev, precision="fp16")
        rt.run(random_input(graph, 1, seed=0))


def test_the_runtime_refuses_a_device_of_another_precision():
    from ios_core.runtime.cuda import CudaRuntime

    graph = GRAPHS["mixed"]().init_weights(0)
    with pytest.raises(ValueError, match="computes in fp32, the runtime was asked for fp16"):
        CudaRuntime(graph, 1, "cuda", backend=TorchQueueDevice(0), precision="fp16")


def test_the_search_measures_at_the_cells_precision(tmp_path):
    """The measured cost model times stages on a device of the cell's precision, and its database
    key names the precision: an fp32 figure is never reused for fp16 (and the fp32 key is unchanged)."""
    from ios_core import optimize
    from ios_core.cost.cache import ProfileCache
    from ios_core.cost.measured import MeasuredCostModel

    graph = mixed_graph().init_weights(0)
    db = tmp_path / "profiles.sqlite"
    opts = dict(device="cuda", warmup=1, repeat=2, min_sample_ms=None)
    fp32 = MeasuredCostModel(backend=TorchQueueDevice(1), cache=ProfileCache(db, device="cuda"), **opts)
    optimize(graph, "parallel", fp32, batch_size=1)
    assert fp32.measured > 0 and not fp32.method.endswith(":fp16")
    half = MeasuredCostModel(backend=TorchQueueDevice(1, precision="fp16"), cache=ProfileCache(db, device="cuda"),
                             precision="fp16", **opts)
    sched = optimize(graph, "parallel", half, batch_size=1)
    assert half.method == fp32.method + ":fp16" and half.stats()["precision"] == "fp16"
    assert half.measured == fp32.measured and half.hits == 0  # measured afresh, nothing read from fp32's rows
    assert set(half._gpu.conv_configs) == {"PSEUDO_HALF_CONFIG"}
    x = random_input(sched, 1, seed=0)
    assert check_precision(_runtime(sched, 1, "fp16").run(x), reference.run(graph, x), "fp16").passed
    with pytest.raises(ValueError, match="computes in fp32, the cost model was asked for fp16"):
        MeasuredCostModel(backend=TorchQueueDevice(1), cache=False, precision="fp16", **opts)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_the_ios_adapter_builds_a_cuda_cell_at_its_precision(monkeypatch, precision):
    """The ios adapter's cuda cell at fp16/bf16 (the CuPy device replaced by the fake): it offers the
    precision, builds the runtime at it, reports it back (the worker's precision rule reads it) and
    passes the precision's check against the fp32 oracle."""
    from adapters.ios import IOS
    from ios_bench.running.task_cell import precision_problem
    from ios_core.measurement import gpu
    from ios_core.runtime import cuda_device

    monkeypatch.setattr(gpu, "cuda_missing", lambda *a, **k: None)
    class FakeCupyDevice(cuda_device.CupyDevice):  # CupyDevice's methods stay reachable (the fake's capture)
        def __new__(cls, index=0, plan_cache=None, precision="fp32"):
            return TorchQueueDevice(0, precision=precision)

    monkeypatch.setattr(cuda_device, "CupyDevice", FakeCupyDevice)
    assert IOS.precision_reason(precision, "cuda") is None
    graph = GRAPHS["mixed"]().init_weights(0)
    compiled = IOS.build(graph, 1, "cuda", precision=precision)
    assert compiled.info["precision"] == precision and precision_problem(IOS, compiled.info, precision) is None
    # the device's own precision, never read back from cuDNN's engines on the fake: the record says so
    assert compiled.info["precision_source"].startswith("requested, not read back")
    x = random_input(graph, 1, seed=3)
    out = compiled.finish(compiled.execute(compiled.prepare(x)))
    assert check_precision(out, reference.run(graph, x), precision).passed
    assert IOS.precision_reason("int8", "cuda") is not None


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_the_cudnn_graph_declares_the_precisions_data_types(precision):
    """The cuDNN Frontend graph the runtime describes for a convolution (described, not built: no GPU
    is needed) has each tensor at the precision's cuDNN data type, and those types are a configuration
    cuDNN supports (the fake's rule, CUDNN_CONV_CONFIGS)."""
    pytest.importorskip("cudnn")
    from ios_core.runtime import cuda_kernels

    for fused, act in ((True, "relu"), (False, "silu")):
        g, tensors = cuda_kernels.conv_graph(n=2, cin=4, h=6, w=6, cout=8, kernel=(3, 3), stride=(1, 1),
                                             pads=(1, 1, 1, 1), dilation=(1, 1), groups=1, act=act, fused=fused,
                                             precision=precision)
        declared = {k: str(v.data_type).rsplit(".", 1)[-1] for k, v in tensors.items()}
        assert set(declared.values()) == {cuda_kernels.CUDNN_DATA_TYPE[precision]}, declared
        types = cuda_kernels.conv_data_types(precision)
        assert CudaRules.cudnn_conv(types, declared) == CONFIG[precision]


@pytest.mark.parametrize("name", ["sample", "squeezenet", "inception_v3", "coverage"])
def test_every_cudnn_pointer_is_16_byte_aligned_at_fp16(name):
    """At 2 bytes an element a channel slice starts at channels x H x W x 2 bytes: more slices are
    misaligned than at fp32, and every one must go through the aligned path (the fake asserts each
    cuDNN pointer 16-byte aligned when the convolution is built). Built at the zoo's real sizes, no
    kernel run."""
    import torch

    from ios_core.models.coverage import coverage_graph
    from ios_core.runtime.cuda import CudaProgram
    from ios_core.runtime.passes import make_plan
    from ios_core.runtime.program import graph_stages

    class NoWeights(TorchQueueDevice):
        def upload(self, a):
            self._no_capture("upload")
            return torch.zeros((), dtype=self.dtype)

        def linear(self, x, out, stream, weight, bias, act):
            return lambda: None

        def _conv_plan(self, spec, x, w, b):
            return "nchw"

    class Program(CudaProgram):
        def _weight(self, op, attr, shape):
            return np.broadcast_to(np.float32(0), shape)

    graph = coverage_graph() if name == "coverage" else models.get(name)
    plan = make_plan(graph_stages(graph), [graph.input], [graph.exit_node], 1, arena_kinds=("concat", "value"))
    dev = NoWeights(0, precision="fp16")
    prog = Program(plan, dev)
    assert prog.itemsize == 2 and len(dev.convs) == len([n for n in graph.operators() if n.TYPE == "conv"]) > 0
    assert all(i % 16 == 0 and o % 16 == 0 for i, o in dev.convs)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_cupy_devices_host_side_at_each_precision(monkeypatch, precision):
    """``CupyDevice``'s own precision code, without a GPU (its CuPy calls stood in by numpy): weights
    uploaded at the storage dtype (fp16, bf16 bits; a shared read-only array cast once), the input
    written at it (CuPy's ``set`` refuses another dtype) and read back as float32, and the cuDNN plan
    cache keyed by the precision (an fp32 key as it always was)."""
    import types

    from ios_core.runtime import cuda_device, cuda_kernels
    from ios_core.runtime.cuda import ConvSpec
    from ios_core.runtime.cuda_device import CupyDevice

    storage = np.dtype(cuda_kernels.STORAGE_DTYPE[precision])

    class View(np.ndarray):  # a CuPy array's few members the device uses
        @property
        def data(self):
            return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])

        def set(self, arr, stream=None):
            if arr.dtype != self.dtype:  # CuPy: "cupy.ndarray.set: dtype mismatch"
                raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
            self[...] = arr

    cp = types.SimpleNamespace(asarray=lambda a: np.array(a).view(View),
                               asnumpy=lambda v, stream=None, blocking=True: np.array(v),
                               empty=lambda shape, dtype: np.empty(shape, dtype).view(View))
    dev = CupyDevice.__new__(CupyDevice)
    dev.cp, dev.precision, dev.dtype, dev.itemsize = cp, precision, storage, storage.itemsize
    dev._shared = {}
    dev._begin()
    w = np.array([1.0, 1.00390625, -3.0], np.float32)
    assert dev.upload(w).dtype == storage
    shared = np.array([0.5, 2.0], np.float32)
    shared.setflags(write=False)
    assert dev.upload(shared) is dev.upload(shared) and dev.upload(shared).dtype == storage
    view = dev.empty_shaped((3,))
    stream = types.SimpleNamespace(synchronize=lambda: None)
    dev.write(view, w, stream)
    back = dev.read(view, stream)
    assert back.dtype == np.float32 and np.allclose(back, w, rtol=1e-2)
    # the plan cache's key
    keys = []
    dev.device = types.SimpleNamespace(synchronize=lambda: None)
    dev.handles, dev.ws_need, dev._convs = [None], [0], {}
    dev.plans = types.SimpleNamespace(choose=lambda key, tune, known: keys.append(key) or types.SimpleNamespace(
        plan_name="p", plan=0, workspace_bytes=0, tensors={"x": 0, "w": 1, "y": 2, "b": 3}, fused=True))
    monkeypatch.setattr(cuda_device, "plan_executor", lambda conv, pack, handle: (lambda ws: None))
    x, out = dev.empty_shaped((1, 2, 4, 4)), dev.empty_shaped((1, 3, 4, 4))
    dev.conv(x, out, 0, np.zeros((3, 2, 1, 1), np.float32), np.zeros(3, np.float32),
             ConvSpec(3, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, "relu"))
    assert (f"('precision', '{precision}')" in keys[0]) == (precision != "fp32")


def test_the_fake_refuses_bf16_convolutions_before_ampere():
    """cuDNN's bf16 configuration (PSEUDO_BFLOAT16_CONFIG) runs from compute capability 8.0 on, its
    true-half one from 5.3 (CUDNN_CONFIG_MIN_CC); PSEUDO_HALF_CONFIG wherever cuDNN runs. The fake
    fails a bf16 program on a 7.5 device where cuDNN would find no engine, and runs fp16 there."""
    from ios_core.runtime import cuda_kernels

    bf16, half = cuda_kernels.conv_data_types("bf16"), cuda_kernels.conv_data_types("fp16")
    with pytest.raises(CudnnError, match="PSEUDO_BFLOAT16_CONFIG needs compute capability 8.0 or later, not 7.5"):
        CudaRules.cudnn_conv(bf16, {}, 75)
    assert CudaRules.cudnn_conv(bf16, {}, 80) == "PSEUDO_BFLOAT16_CONFIG"
    assert CudaRules.cudnn_conv(half, {}, 61) == "PSEUDO_HALF_CONFIG"
    with pytest.raises(CudnnError, match="TRUE_HALF_CONFIG needs compute capability 5.3"):
        CudaRules.cudnn_conv({**half, "compute": "HALF"}, {}, 52)
    from ios_core.runtime.cuda import CudaRuntime

    graph = GRAPHS["mixed"]().init_weights(0)
    with pytest.raises(CudnnError, match="PSEUDO_BFLOAT16_CONFIG"):
        CudaRuntime(graph, 1, "cuda", backend=TorchQueueDevice(0, precision="bf16", compute_capability="75"),
                    precision="bf16")
    rt = CudaRuntime(graph, 1, "cuda", backend=TorchQueueDevice(0, precision="fp16", compute_capability="75"),
                     precision="fp16")
    x = random_input(graph, 1, seed=0)
    assert check_precision(rt.run(x), reference.run(graph, x), "fp16").passed


@pytest.mark.parametrize("cc,refused", [("75", True), ("70", True), ("80", False), ("90", False)])
def test_cupy_device_refuses_bf16_before_ampere_in_one_line(monkeypatch, cc, refused):
    """``CupyDevice`` at bf16 on a GPU older than compute capability 8.0 (a T4, a V100) is refused at
    construction with one line naming the capability, before any kernel is compiled (without it every
    convolution would fail later in cuDNN's engine search); fp16 and fp32 are built there. CuPy's device
    and our kernels are stood in (no GPU here)."""
    import types

    import cupy

    from ios_core.runtime import cuda_device

    built = []
    monkeypatch.setattr(cupy.cuda, "Device", lambda i=0: types.SimpleNamespace(
        compute_capability=cc, use=lambda: None, id=i, synchronize=lambda: None))
    monkeypatch.setattr(cuda_device, "Kernels", lambda p: types.SimpleNamespace(load=lambda: built.append(p)))
    if refused:
        with pytest.raises(RuntimeError) as e:
            cuda_device.CupyDevice(0, plan_cache=None, precision="bf16")
        assert str(e.value) == (f"the IOS CUDA runtime cannot run here: bf16 needs a GPU of compute capability 8.0 or "
                                f"later (cuDNN's PSEUDO_BFLOAT16_CONFIG); this one is {cc[0]}.{cc[1]}")
        assert built == []
    else:
        assert cuda_device.CupyDevice(0, plan_cache=None, precision="bf16").compute_capability == cc
    for precision in ("fp16", "fp32"):
        assert cuda_device.CupyDevice(0, plan_cache=None, precision=precision).precision == precision
