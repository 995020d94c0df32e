"""What a run writes outside its run folder, and the switches that stop it (issue 24, item 11).

Found by running a sweep of every CPU framework with ``HOME`` pointed at an empty folder
(ONNX Runtime 1.32, OpenVINO 2026.4, TensorFlow 2.21, torch 2.13, TVM 0.27). Where a library
gives a switch, :func:`quiet_environment` sets it (in the CLI process and again in each worker,
before any framework import, unless the user set the variable); the rest is listed in
:data:`OUTSIDE_WRITES`, which every report shows.
"""

from __future__ import annotations

import os

# Library switches that stop writes into the user's home folder.
QUIET_ENV = {
    # ONNX Runtime's telemetry: otherwise ~/.cache/Microsoft/DeveloperTools/.onnxruntime/{deviceid,onnxruntime.db}
    "ORT_DISABLE_TELEMETRY": "1",
}

# (library, what it writes outside the run folder, the switch; whether ios-bench sets it)
OUTSIDE_WRITES = [
    ("ONNX Runtime", "~/.cache/Microsoft/DeveloperTools/.onnxruntime/ (telemetry device id)",
     "ORT_DISABLE_TELEMETRY=1: set by ios-bench, nothing is written"),
    ("OpenVINO", "~/intel/openvino_ga_cid and ~/intel/stats (telemetry client id and usage count, at import)",
     "none a program can set; opt out once with OpenVINO's `opt_in_out --opt_out` (it records the choice in "
     "~/intel)"),
    ("TensorFlow (Keras)", "~/.keras/keras.json (default Keras settings, at import)",
     "KERAS_HOME=<folder> moves it; not set by ios-bench"),
    ("torch.compile (inductor)", "/tmp/torchinductor_<user>/ (compiled kernels, reused across runs)",
     "TORCHINDUCTOR_CACHE_DIR=<folder> moves it; not set by ios-bench (build times are recorded apart)"),
    ("matplotlib (report plots)", "~/.cache/matplotlib/ (font list cache)",
     "MPLCONFIGDIR=<folder> moves it; not set by ios-bench"),
    ("ios-bench (measured cost model)", "~/.cache/ios-bench/profiles.sqlite (stage timings, reused across runs)",
     "IOS_BENCH_CACHE=<file> moves it; docs/runtime.md"),
    ("tvm-tuned", "runs/tvm_db/ under the current folder (the MetaSchedule tuning database)",
     "docs/tvm.md"),
]


def quiet_environment(environ=None) -> dict:
    """Set the switches of :data:`QUIET_ENV` in ``environ`` (``os.environ``) where the user has
    not set them; returns what was set."""
    environ = os.environ if environ is None else environ
    done = {}
    for key, value in QUIET_ENV.items():
        if key not in environ:
            environ[key] = value
            done[key] = value
    return done
