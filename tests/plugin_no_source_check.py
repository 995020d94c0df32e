"""Test plugin (``IOS_BENCH_PLUGINS=tests.plugin_no_source_check``): onnxruntime "cannot run" an imported
model's original file, so the independent check of its cells cannot run (issue 24, item 9)."""

import sys

from ios_bench import worker


def _cannot_run(path, x):
    raise RuntimeError("onnxruntime cannot run this file (test plugin)")


# the worker runs as ``python -m ios_bench.worker``: its functions live in __main__
for _module in (worker, sys.modules.get("__main__")):
    if _module is not None and hasattr(_module, "run_onnx_source"):
        _module.run_onnx_source = _cannot_run
