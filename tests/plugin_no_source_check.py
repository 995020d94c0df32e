"""Test plugin (``IOS_BENCH_PLUGINS=tests.plugin_no_source_check``): onnxruntime "cannot run" an imported
model's original file, so the independent check of its cells cannot run (issue 24, item 9)."""


from ios_bench.running import task_setup


def _cannot_run(path, x):
    raise RuntimeError("onnxruntime cannot run this file (test plugin)")


# the reference task computes the original file's output (ios_bench.running.task_setup.run_onnx_source)
task_setup.run_onnx_source = _cannot_run
