"""Test plugin (``IOS_BENCH_PLUGINS=tests.gpu_doctor_plugin``): a worker that believes it has a
GPU, whose CUDA executor device is the fake one (tests/stream_fakes.py: CUDA's stream
semantics, torch kernels, failing what a capture forbids) and whose NVML is the fake one of
tests/test_gpu_nogpu.py. It drives ``ios-bench doctor``'s GPU paths end to end without a GPU:
the same worker task, the same paths, the same lines as on a GPU."""

from __future__ import annotations

import os
import sys

from ios_bench.machine import gpu_paths
from ios_core.measurement import gpu
from tests.stream_fakes import TorchQueueDevice
from tests.test_gpu_nogpu import FakeNVML

gpu.cuda_missing = lambda cudnn=True: None
gpu.gpu_missing = lambda: None


# the fake GPU's compute capability (CuPy's form, '75' for 7.5): TEST_GPU_DOCTOR_CC, else the fake's own (9.0)
CC = {"compute_capability": os.environ["TEST_GPU_DOCTOR_CC"]} if os.environ.get("TEST_GPU_DOCTOR_CC") else {}


def _factory(cls):
    """As ``gpu_paths.default_device_factory``: one device, and ``at(precision)`` for fp16/bf16."""
    dev = cls(0, **CC)
    factory = lambda: dev  # noqa: E731
    factory.at = lambda precision: cls(0, precision=precision, **CC)
    return lambda: factory


gpu_paths.default_device_factory = _factory(TorchQueueDevice)
sys.modules["pynvml"] = FakeNVML()


if os.environ.get("TEST_GPU_DOCTOR_BREAK") == "raise":  # a device whose pooling raises: the paths that pool FAIL
    class _Raising(TorchQueueDevice):
        def pool(self, x, out, spec):
            raise RuntimeError("the fake device's pooling broke")

    gpu_paths.default_device_factory = _factory(_Raising)
elif os.environ.get("TEST_GPU_DOCTOR_BREAK") == "crash":  # the worker itself fails
    def _crash(*a, **k):
        raise RuntimeError("the doctor's worker broke")

    gpu_paths.run_paths = _crash
elif os.environ.get("TEST_GPU_DOCTOR_BREAK"):  # a device computing a wrong average pool
    class _Broken(TorchQueueDevice):
        def pool(self, x, out, spec):
            return super().pool(x, out, type(spec)(spec.kind, spec.kernel, spec.stride, spec.pads, True))

    gpu_paths.default_device_factory = _factory(_Broken)
