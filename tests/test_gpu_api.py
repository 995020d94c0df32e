"""The GPU code's contact with its libraries, checked without a GPU.

* Where a GPU package imports here (CuPy and the cuDNN Frontend import without a GPU;
  nvidia-ml-py too), every call the code makes is checked to exist with the arguments it
  passes. A package that is not installed skips its test with the reason.
* TensorRT's bindings cannot be imported without its libraries (which PyPI does not serve):
  when the bindings are installed, their compiled module is searched for every method and
  attribute name the adapter uses.
* The TensorRT adapter's lowering is checked against the oracle on a CPU stand-in for the
  network-definition API held to TensorRT 10's and 11's bindings (``tests/fake_tensorrt.py``;
  every op type and attribute: ``tests/test_gpu_coverage.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from pathlib import Path

import pytest

from ios_core import reference
from ios_core.check import compare
from ios_core.reference import random_input
from tests import fake_tensorrt
from tests.runtime_helpers import mixed_graph


def _module_or_skip(name: str):
    try:
        return importlib.import_module(name)
    except Exception as e:
        pytest.skip(f"{name} is not importable here ({type(e).__name__}: {str(e)[:100]})")


def _params(fn) -> set[str]:
    return set(inspect.signature(fn).parameters)



# ---- CuPy ------------------------------------------------------------------------------------

def test_cupy_stream_event_graph_calls_exist():
    cupy = _module_or_skip("cupy")
    assert {"non_blocking"} <= _params(cupy.cuda.Stream.__init__)
    for method in ("record", "wait_event", "synchronize", "begin_capture", "end_capture", "is_capturing", "use"):
        assert hasattr(cupy.cuda.Stream, method), method
    assert cupy.cuda.Stream.null.ptr == 0  # the attribute the cuDNN handle and TensorRT get
    for method in ("record", "synchronize"):
        assert hasattr(cupy.cuda.Event, method), method
    assert {"block", "disable_timing"} <= _params(cupy.cuda.Event.__init__)
    assert callable(cupy.cuda.get_elapsed_time)
    from cupy.cuda import graph

    assert hasattr(graph.Graph, "launch") and hasattr(graph.Graph, "upload")
    for name in ("ElementwiseKernel", "RawKernel", "empty", "asarray", "asnumpy", "matmul", "add", "multiply"):
        assert hasattr(cupy, name), name
    assert {"stream", "blocking"} <= _params(cupy.asnumpy)
    assert "set(self, arr, stream=None)" in (cupy.ndarray.set.__doc__ or "")  # compiled: no signature
    assert "out=None" in (cupy.matmul.__doc__ or "").splitlines()[0]
    rt = cupy.cuda.runtime
    for name in ("getDeviceCount", "getDeviceProperties", "driverGetVersion", "runtimeGetVersion",
                 "streamCaptureModeRelaxed"):
        assert hasattr(rt, name), name


def test_cupy_module_is_defined_without_gpu():
    """Defining the runtime's CUDA module needs no GPU (``Kernels.load`` compiles and loads it on
    one; tests/test_cuda_sources.py compiles the same source with NVRTC here)."""
    cupy = _module_or_skip("cupy")
    from ios_core.runtime import cuda_kernels

    kernels = cuda_kernels.Kernels()
    assert isinstance(kernels._module, cupy.RawModule) and kernels._fns == {}
    assert hasattr(cupy.RawModule, "get_function") and hasattr(cupy.RawModule, "compile")


# ---- cuDNN Frontend ----------------------------------------------------------------------------

def test_cudnn_frontend_calls_exist():
    cudnn = _module_or_skip("cudnn")
    g = cudnn.pygraph
    assert {"io_data_type", "intermediate_data_type", "compute_data_type", "handle"} <= _params(g.__init__)
    assert {"dim", "stride", "data_type", "name"} <= _params(g.tensor)
    for method in ("conv_fprop", "bias", "relu", "sigmoid", "tanh", "validate", "build_operation_graph",
                   "create_execution_plans", "check_support", "build_plans", "get_workspace_size", "execute",
                   "get_execution_plan_count", "build_plan_at_index", "execute_plan_at_index",
                   "get_workspace_size_plan_at_index", "get_plan_name_at_index"):
        assert hasattr(g, method), method
    assert {"tensor_dict", "workspace", "handle"} <= _params(g.execute)
    assert {"tensor_dict", "workspace", "index", "handle"} <= _params(g.execute_plan_at_index)
    assert {"index"} <= _params(g.build_plan_at_index) and {"index"} <= _params(g.get_plan_name_at_index)
    assert {"input", "bias"} <= _params(g.bias) or "bias" in (g.bias.__doc__ or "")
    assert {"input"} <= _params(g.relu)
    assert {"heuristics"} <= _params(g.create_execution_plans)
    for name in ("create_handle", "set_stream", "backend_version", "backend_version_string"):
        assert hasattr(cudnn, name), name
    assert {"handle", "stream"} <= _params(cudnn.set_stream)
    assert hasattr(cudnn.data_type, "FLOAT")
    assert hasattr(cudnn.heur_mode, "A") and hasattr(cudnn.heur_mode, "FALLBACK")
    assert {"notes"} <= _params(g.deselect_numeric_notes)
    for note in ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION"):
        assert hasattr(cudnn.numerical_note, note), note
    from cudnn import graph_types

    for method in ("set_output", "set_stride", "set_dim", "set_data_type", "get_uid"):
        assert hasattr(graph_types.Tensor, method), method


def test_cudnn_plan_executor_finds_the_frontend_structure_it_resolves_once():
    """``cuda_kernels.plan_executor`` resolves once what the Frontend's Python
    ``execute_plan_at_index`` re-derives at every call; the names it reads must be the installed
    Frontend's, and that call must still end in the backend's execute-at-index (else the
    executor falls back to the public call, correct but slow: this test says so)."""
    cudnn = _module_or_skip("cudnn")
    g = cudnn.pygraph
    if not hasattr(g, "_barred_indices"):
        pytest.skip("this cuDNN Frontend's pygraph is compiled: plan_executor uses execute_plan_at_index")
    for name in ("_barred_indices", "_materialize_backend_plan", "_native_var_pack", "_uid_to_data"):
        assert callable(getattr(g, name, None)), name
    from cudnn._handle import to_backend_handle  # noqa: F401
    from cudnn.engines.engine_ids import is_python_engine  # noqa: F401

    source = inspect.getsource(g.execute_plan_at_index)
    assert "self._reject_if_barred(" in source and "_lowered_graph._execute_plan_at_index(var_pack, ws_ptr, " \
        "cfg.cpp_index, to_backend_handle(handle)" in source
    init = inspect.getsource(g.__init__)
    assert "self._lowered_graph" in init and "self._planning_done" in init and "self._plans" in init


def test_cudnn_conv_fprop_accepts_our_arguments():
    """Build (not execute) the graph the runtime builds for a convolution: no GPU is needed
    to describe it."""
    _module_or_skip("cudnn")
    from ios_core.runtime import cuda_kernels

    g, tensors = cuda_kernels.conv_graph(n=2, cin=4, h=6, w=6, cout=8, kernel=(3, 3), stride=(1, 1), pads=(1, 1, 1, 1),
                                         dilation=(1, 1), groups=1, act="relu", fused=True, out_stride=None)
    assert set(tensors) == {"x", "w", "b", "y"}
    assert list(tensors["y"].stride) == [8 * 36, 36, 6, 1]
    _, unfused = cuda_kernels.conv_graph(n=2, cin=4, h=6, w=6, cout=8, kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1),
                                         dilation=(1, 1), groups=2, act="relu", fused=False, out_stride=[300, 9, 3, 1],
                                         in_stride=[500, 36, 6, 1])
    assert set(unfused) == {"x", "w", "y"}
    assert list(unfused["y"].dim) == [2, 8, 3, 3] and list(unfused["y"].stride) == [300, 9, 3, 1]
    assert list(unfused["x"].stride) == [500, 36, 6, 1] and list(unfused["w"].dim) == [8, 2, 3, 3]
    assert list(tensors["y"].dim) == [2, 8, 6, 6]


# ---- NVML --------------------------------------------------------------------------------------

def test_nvml_calls_exist():
    pynvml = _module_or_skip("pynvml")
    for name in ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName",
                 "nvmlSystemGetDriverVersion", "nvmlDeviceGetClockInfo", "nvmlDeviceGetMaxClockInfo",
                 "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks", "nvmlDeviceGetUtilizationRates",
                 "NVML_CLOCK_SM"):
        assert hasattr(pynvml, name), name
    assert len(inspect.signature(pynvml.nvmlDeviceSetGpuLockedClocks).parameters) == 3


# ---- TensorRT ----------------------------------------------------------------------------------

TRT_NAMES = ("Builder", "Logger", "Runtime", "Weights", "create_network", "create_builder_config", "clear_flag",
             "get_flag", "set_memory_pool_limit", "max_aux_streams", "TF32", "WORKSPACE", "add_input", "mark_output",
             "add_convolution_nd", "add_pooling_nd", "add_concatenation", "add_elementwise", "add_activation",
             "add_slice", "add_reduce", "add_shuffle", "add_constant", "add_matrix_multiply", "stride_nd",
             "padding_nd", "dilation_nd", "num_groups", "average_count_excludes_padding", "reshape_dims",
             "build_serialized_network", "deserialize_cuda_engine", "create_execution_context", "num_io_tensors",
             "get_tensor_name", "get_tensor_shape", "get_tensor_mode", "set_tensor_address", "execute_async_v3",
             "num_aux_streams", "TensorIOMode", "add_softmax", "add_normalization", "add_unary", "axes", "epsilon",
             "first_transpose", "MatrixOperation", "UnaryOperation")


def test_tensorrt_names_exist_in_the_bindings():
    try:
        trt = importlib.import_module("tensorrt")
    except Exception:
        trt = None
    if trt is not None:
        text = " ".join(dir(trt) + [a for c in ("INetworkDefinition", "IBuilderConfig", "ICudaEngine",
                                                "IExecutionContext", "IConvolutionLayer", "IPoolingLayer",
                                                "IShuffleLayer", "IConcatenationLayer", "Builder",
                                                "ISoftMaxLayer", "INormalizationLayer")
                                    for a in dir(getattr(trt, c))])
        missing = [n for n in TRT_NAMES if n not in text and not hasattr(trt, n)]
        assert not missing, missing
        return
    spec = importlib.util.find_spec("tensorrt_bindings")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("TensorRT is not installed here (neither tensorrt nor tensorrt_bindings)")
    so = next(Path(list(spec.submodule_search_locations)[0]).glob("tensorrt*.so"), None)
    if so is None:
        pytest.skip("tensorrt_bindings has no compiled module to inspect")
    blob = so.read_bytes()
    missing = [n for n in TRT_NAMES if n.encode() not in blob]
    assert not missing, f"names the adapter uses but {so.name} does not contain: {missing}"


@pytest.mark.parametrize("which", ["mixed", "sample"])
def test_tensorrt_lowering_matches_the_oracle(fake_trt, which):
    from adapters.tensorrt import build_engine
    from ios_core import models

    graph = mixed_graph() if which == "mixed" else models.get("sample")
    graph.init_weights(3)
    batch = 2
    x = random_input(graph, batch, seed=1)
    fake_tensorrt.FEED["input"] = x
    engine, info = build_engine(graph, batch, max_aux_streams=0)
    assert engine.startswith(b"fake-engine")
    network, config = fake_tensorrt.Builder.built[-1]
    assert info["tf32"] is False and not config.get_flag(fake_trt.BuilderFlag.TF32)
    assert config.max_aux_streams == 0 and info["max_aux_streams"] == 0
    out = network._outputs[0].value.numpy()
    chk = compare(out, reference.run(graph, x), 1e-4)
    assert chk.passed, chk


def test_tensorrt_default_variant_leaves_aux_streams_to_tensorrt(fake_trt):
    from adapters.tensorrt import build_engine

    graph = mixed_graph().init_weights(0)
    fake_tensorrt.FEED["input"] = random_input(graph, 1, seed=0)
    _, info = build_engine(graph, 1, max_aux_streams=None)
    assert info["max_aux_streams"] == -1 and info["tf32"] is False


def test_tensorrt_engine_cache_key_names_the_lowering_code(monkeypatch):
    import adapters.tensorrt as trt_adapter

    g = mixed_graph().init_weights(0)
    fp = {"name": "GPU", "compute_capability": "9.0"}
    key = trt_adapter.engine_key(g, 1, "10.16", fp, "default")
    assert key == trt_adapter.engine_key(g, 1, "10.16", fp, "default")
    assert key != trt_adapter.engine_key(g, 1, "11.1", fp, "default")
    monkeypatch.setattr(trt_adapter, "lowering_version", lambda: "changed")
    assert key != trt_adapter.engine_key(g, 1, "10.16", fp, "default")


def test_tensorrt_engine_cache_key_changes_with_weights():
    from adapters.tensorrt import graph_hash

    g1 = mixed_graph().init_weights(0)
    g2 = mixed_graph().init_weights(0)
    g3 = mixed_graph().init_weights(1)
    assert graph_hash(g1) == graph_hash(g2) != graph_hash(g3)


def test_tensorrt_adapters_say_why_not_here():
    import adapters

    for name in ("tensorrt", "tensorrt-noaux"):
        a = adapters.get(name)
        assert "cuda" in a.available("cpu")
        reason = a.available("cuda")
        from ios_core.measurement.gpu import tensorrt_missing

        assert reason == tensorrt_missing()
        if reason is not None:
            assert "\n" not in reason


def test_gpu_extra_declares_the_packages_the_code_imports():
    import tomllib

    root = Path(__file__).resolve().parent.parent
    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    gpu = " ".join(meta["gpu"])
    for dist in ("cupy-cuda12x", "nvidia-cudnn-frontend", "tensorrt", "nvidia-ml-py"):
        assert dist in gpu, dist
