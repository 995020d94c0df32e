"""ONNX Runtime adapters on the exported ONNX model (``ios_core.lowering.onnx``), CPU provider:

- ``onnxruntime``: ``ORT_SEQUENTIAL``, operators one after another, each using the
  intra-op thread pool;
- ``onnxruntime-parallel``: ``ORT_PARALLEL``, ONNX Runtime's own inter-operator
  parallelism (independent branches run concurrently on the inter-op pool), the closest
  peer to IOS on CPU.

Both use all graph optimizations (``ORT_ENABLE_ALL``); intra-op threads = the thread budget,
inter-op threads at ONNX Runtime's default (0) unless ``inter_op_threads`` is given.
"""

from __future__ import annotations

import time

import numpy as np

from ios_core.lowering.onnx import DEFAULT_OPSET, export
from ios_core.threads import resolve_threads

from .base import Adapter, Compiled


class ORTCompiled(Compiled):
    def __init__(self, session, info):
        super().__init__(info)
        self.session = session
        self.input_name = session.get_inputs()[0].name
        self.output_names = [session.get_outputs()[0].name]

    def prepare(self, x: np.ndarray):
        return {self.input_name: np.ascontiguousarray(x, dtype=np.float32)}

    def execute(self, prepared):
        return self.session.run(self.output_names, prepared)[0]


class OnnxRuntime(Adapter):
    def _build(self, graph, batch_size, device, threads, inter_op_threads=None, execution_mode="sequential",
               opset=DEFAULT_OPSET, optimization="all"):
        import onnxruntime as ort

        n = resolve_threads(threads)
        t0 = time.perf_counter()
        model = export(graph, batch_size, opset=opset)
        export_seconds = time.perf_counter() - t0
        so = ort.SessionOptions()
        so.intra_op_num_threads = n
        if inter_op_threads is not None:
            so.inter_op_num_threads = int(inter_op_threads)
        so.execution_mode = {"sequential": ort.ExecutionMode.ORT_SEQUENTIAL,
                             "parallel": ort.ExecutionMode.ORT_PARALLEL}[execution_mode]
        so.graph_optimization_level = {
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }[optimization]
        t1 = time.perf_counter()
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        info = {
            "threads": n, "intra_op_threads": n,
            "inter_op_threads": int(inter_op_threads) if inter_op_threads is not None else "default",
            "execution_mode": f"ORT_{execution_mode.upper()}", "graph_optimization": optimization,
            "providers": session.get_providers(), "opset": opset, "framework_version": ort.__version__,
            "export_seconds": export_seconds, "session_seconds": time.perf_counter() - t1,
        }
        return ORTCompiled(session, info)


SEQUENTIAL = OnnxRuntime(
    name="onnxruntime",
    description="ONNX Runtime (CPU provider) on the exported ONNX model, ORT_SEQUENTIAL",
    requires=("onnxruntime", "onnx"),
    tolerance=1e-3,
    options={"execution_mode": "sequential"},
)

PARALLEL = OnnxRuntime(
    name="onnxruntime-parallel",
    description="ONNX Runtime with ORT_PARALLEL: its own inter-operator parallelism",
    requires=("onnxruntime", "onnx"),
    tolerance=1e-3,
    options={"execution_mode": "parallel"},
)
