"""TensorFlow Lite: a ``tf.function`` of ``adapters.tensorflow`` converted to a TFLite flatbuffer and
run by the TFLite interpreter bundled with TensorFlow (:class:`TFLiteCompiled`); the int8 flatbuffer
is TensorFlow Lite's full-integer post-training quantization (:func:`tflite_quantized`)."""

from __future__ import annotations

import numpy as np

from ios_core.ir import Graph

from .base import Compiled
from .build_cache import open_cache
from .tensorflow import _tf


class TFLiteCompiled(Compiled):
    """An int8 flatbuffer in its own ``tf.lite.Interpreter`` (``num_threads`` = the cell's threads; its
    default XNNPACK delegate). ``prepare`` transposes the NCHW input to NHWC outside the timed call;
    ``execute`` is a TFLite user's inference call: ``set_tensor``, ``invoke``, ``get_tensor`` (the
    float input quantized and the output dequantized inside the model). Not thread-safe: one per
    program, one program per request in flight."""

    def __init__(self, flatbuffer: bytes, threads: int, info: dict | None = None, nhwc_out: bool = True):
        import warnings

        super().__init__(info)
        self.nhwc_out = nhwc_out  # as TFCompiled's
        tf = _tf()
        self.flatbuffer = flatbuffer  # the model it runs (what a test corrupts)
        with warnings.catch_warnings():  # its notice that LiteRT (ai_edge_litert) succeeds it
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
            self.interpreter = tf.lite.Interpreter(model_content=flatbuffer, num_threads=int(threads))
        self.interpreter.allocate_tensors()
        inputs, outputs = self.interpreter.get_input_details(), self.interpreter.get_output_details()
        if len(inputs) != 1 or len(outputs) != 1:
            raise ValueError(f"the TFLite model has {len(inputs)} inputs and {len(outputs)} outputs, expected 1 and 1")
        if inputs[0]["dtype"] != np.float32 or outputs[0]["dtype"] != np.float32:
            raise ValueError(f"the TFLite model takes {np.dtype(inputs[0]['dtype'])} and gives "
                             f"{np.dtype(outputs[0]['dtype'])}, expected float32 in and out")
        self.input_index, self.output_index = inputs[0]["index"], outputs[0]["index"]

    def prepare(self, x: np.ndarray):
        return np.ascontiguousarray(np.asarray(x, np.float32).transpose(0, 2, 3, 1))

    def execute(self, prepared):
        self.interpreter.set_tensor(self.input_index, prepared)
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self.output_index)

    def finish(self, out) -> np.ndarray:
        out = np.asarray(out, np.float32)
        return np.ascontiguousarray(out.transpose(0, 3, 1, 2) if self.nhwc_out else out)


def tflite_quantized(fn, graph: Graph, batch_size: int, samples: int, cache_dir=None,
                     data=None) -> tuple[bytes, dict]:
    """``fn`` (the fp32 ``tf.function``, NHWC) quantized by TensorFlow Lite's full-integer
    post-training quantization (``ios_core.quantize.tflite_quantize``) on the harness's seeded
    calibration inputs (``ios_core.quantize.calibration_inputs``, NHWC), kept in the build cache
    (``tensorflow-int8``) under a key of the traced function (its graph and every captured weight),
    the calibration and the converter's version: a later round loads the same flatbuffer. Returns
    (flatbuffer bytes, the calibration as the record keeps it)."""
    import json

    from ios_core.quantize import TFLITE_FORMAT, TFLITE_METHOD, build_key, calibration_feeds, tflite_quantize

    tf = _tf()
    batches, note, source = calibration_feeds(graph, batch_size, samples, data)  # seeded inputs or the folder's
    feeds = [[np.ascontiguousarray(x.transpose(0, 2, 3, 1))] for x in batches]
    concrete = fn.get_concrete_function()
    key = build_key(concrete.graph.as_graph_def().SerializeToString(deterministic=True),
                    *(np.asarray(t.numpy()) for t in concrete.captured_inputs), batch_size, source,
                    TFLITE_FORMAT, TFLITE_METHOD)
    cache = open_cache(cache_dir, "tensorflow-int8", tf.__version__)
    path = cache.dir / f"{key}.tflite" if cache is not None else None
    if path is not None and path.is_file():
        meta = json.loads(path.with_suffix(".json").read_text())
        return path.read_bytes(), {**meta, "cache": "warm"}
    blob, calib = tflite_quantize(concrete, fn, feeds)
    calib = {**calib, **note}
    if path is not None:
        path.write_bytes(blob)
        path.with_suffix(".json").write_text(json.dumps(calib))
        cache.seal()
        calib["cache"] = "cold"
    return blob, calib
