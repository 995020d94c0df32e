"""The published figures of the IOS paper, as data: what the reports show beside our numbers.

Every figure here is copied from the reference implementation's README (the seed document
``000_*.txt`` in the shared seeds: mit-han-lab/inter-operator-scheduler, section 4.2
"Experiments and ablation study"); each table names its section. They were measured on an
NVIDIA Tesla V100 SXM2 (clock locked at 1530 MHz; CUDA 10.2, cuDNN 7.6.5, TensorRT 7.0.0.11,
TVM v0.6, TASO v1.0, TensorFlow 2.3, PyTorch 1.6.0; the paper README, seed ``001_*.txt``, section
1), except the K80 rows of the device specialization. They were **not measured here**: reports
label them "published (V100, not measured here)". Where the seeds give no number (the
utilization profile is a figure only), there is none here.

Model keys are our zoo's names (``inception_v3``, ``randwire``, ``nasnet``, ``squeezenet``);
schedule and framework keys are the README's labels.
"""

from __future__ import annotations

SOURCE = "reference IOS README (seed 000), section 4.2"
DEVICE = "NVIDIA Tesla V100 SXM2"

# 4.2.1 Comparison of Different Schedules: "The following table gives the latency (ms) for each
# model and schedule." (batch size 1; the paper's figure: the average of five runs)
SCHEDULES_SOURCE = f"{SOURCE}.1, latency table (ms, batch 1)"
SCHEDULES_MS = {
    "inception_v3": {"Sequential": 6.51, "Greedy": 4.62, "IOS-Merge": 5.39, "IOS-Parallel": 4.11, "IOS-Both": 4.03},
    "randwire": {"Sequential": 8.49, "Greedy": 6.27, "IOS-Merge": 8.54, "IOS-Parallel": 6.02, "IOS-Both": 6.02},
    "nasnet": {"Sequential": 22.95, "Greedy": 16.78, "IOS-Merge": 22.94, "IOS-Parallel": 16.04, "IOS-Both": 16.04},
    "squeezenet": {"Sequential": 0.86, "Greedy": 0.98, "IOS-Merge": 0.74, "IOS-Parallel": 0.82, "IOS-Both": 0.73},
}
# the same section's "Key output" (one run): optimization cost (s) of each schedule
SCHEDULES_OPT_SECONDS = {
    "inception_v3": {"Sequential": 0, "Greedy": 0, "IOS-Merge": 1, "IOS-Parallel": 48, "IOS-Both": 48},
    "randwire": {"Sequential": 0, "Greedy": 0, "IOS-Merge": 3, "IOS-Parallel": 4386, "IOS-Both": 4407},
    "nasnet": {"Sequential": 0, "Greedy": 0, "IOS-Merge": 63, "IOS-Parallel": 3591, "IOS-Both": 3653},
    "squeezenet": {"Sequential": 0, "Greedy": 0, "IOS-Merge": 0, "IOS-Parallel": 1, "IOS-Both": 1},
}

# 4.2.2 Comparison of cuDNN-based Frameworks: latency table (ms, batch 1)
FRAMEWORKS_SOURCE = f"{SOURCE}.2, latency table (ms, batch 1)"
FRAMEWORKS_MS = {
    "inception_v3": {"Tensorflow": 7.95, "Tensorflow-XLA": 9.95, "TASO": 5.70, "TVM-cuDNN": 4.88, "TensorRT": 5.21,
                     "IOS": 4.03},
    "randwire": {"Tensorflow": 12.06, "Tensorflow-XLA": 16.61, "TASO": 8.42, "TVM-cuDNN": 6.86, "TensorRT": 8.33,
                 "IOS": 6.02},
    "nasnet": {"Tensorflow": 24.73, "Tensorflow-XLA": 34.66, "TASO": 21.29, "TVM-cuDNN": 26.87, "TensorRT": 24.66,
               "IOS": 16.04},
    "squeezenet": {"Tensorflow": 2.63, "Tensorflow-XLA": 4.08, "TASO": 0.82, "TVM-cuDNN": 0.90, "TensorRT": 0.80,
                   "IOS": 0.73},
}
# which of our adapters plays each published framework's part (TASO has no adapter here)
FRAMEWORK_ADAPTERS = {"Tensorflow": "tensorflow", "Tensorflow-XLA": "tensorflow-xla", "TVM-cuDNN": "tvm-cudnn",
                      "TensorRT": "tensorrt", "IOS": "ios-both"}

# 4.2.4 Specialized Scheduling, batch sizes: "Key output" (Inception V3, latency ms);
# {optimized for batch: {executed at batch: ms}}. The README gives batch sizes 1, 32 and 128 only.
SPEC_BATCH_SOURCE = f"{SOURCE}.4, batch-size specialization key output (Inception V3, ms)"
SPEC_BATCH_MS = {
    1: {1: 4.04, 32: 29.21, 128: 105.87},
    32: {1: 4.45, 32: 27.62, 128: 103.58},
    128: {1: 4.58, 32: 27.85, 128: 102.96},
}

# 4.2.4 Specialized Scheduling, devices: {optimized for: {executed on: ms}} (Inception V3)
SPEC_DEVICE_SOURCE = f"{SOURCE}.4, device specialization key output (Inception V3, ms; K80 and V100)"
SPEC_DEVICE_MS = {
    "k80": {"v100": 4.42, "k80": 13.93},
    "v100": {"v100": 4.02, "k80": 14.64},
}

# 4.2.5 Schedule Pruning: "Key output": {model: {(r, s): (optimization cost s, latency ms)}}
PRUNE_SOURCE = f"{SOURCE}.5, pruning key output (IOS-Both, batch 1)"
PRUNE = {
    "inception_v3": {(1, 3): (5, 4.22), (1, 8): (7, 4.06), (2, 3): (17, 4.02), (2, 8): (25, 3.99),
                     (3, 3): (29, 3.99), (3, 8): (43, 3.96)},
    "nasnet": {(1, 3): (137, 17.54), (1, 8): (492, 16.54), (2, 3): (360, 16.85), (2, 8): (2648, 16.09),
               (3, 3): (641, 16.73), (3, 8): (3412, 15.91)},
}

# 4.2.6 Consistent Improvement for Different Batch Sizes: "Key output" (Inception V3, latency ms)
BATCHSIZE_SOURCE = f"{SOURCE}.6, batch-size key output (Inception V3, ms)"
BATCHSIZE_MS = {
    "Sequential": {1: 6.20, 16: 17.95, 32: 30.54, 64: 55.67, 128: 108.55},
    "TensorRT": {1: 4.82, 16: 17.82, 32: 29.97, 64: 56.25, 128: 106.84},
    "IOS-Both": {1: 3.94, 16: 15.17, 32: 27.00, 64: 51.11, 128: 102.74},
}

# 4.2.7 Intra- and Inter-Operator Parallelism: "Key output" (TVM-AutoTune, batch 1, latency ms;
# schedules tuned by the authors: 26 hours on an 8-V100 server). IOS's own latency is in
# FRAMEWORKS_MS["..."]["IOS"].
AUTOTVM_SOURCE = f"{SOURCE}.7, AutoTVM key output (batch 1, ms)"
AUTOTVM_MS = {"inception_v3": 4.95, "randwire": 5.26, "nasnet": 14.67, "squeezenet": 0.75}

# 4.2.3 Utilization Profiling: a figure (active warps over time) only; no number to compare.
UTILIZATION_NOTE = ("the README shows the active-warps profile of the sample network as a figure only "
                    "(about 2.1 ms between two timestamps); it gives no number to set beside ours")
