"""The stated figures of the duration and memory estimate (``ios_bench.planning.estimate``) and where
each comes from, the machine's speed they were measured at, and the names the estimate looks its
figures up by (a framework's series at its precision, its worker's kind)."""

from __future__ import annotations

# The stated model (docs/harness.md, "Before a sweep starts"): what is assumed where no earlier
# run on this machine measured it. Rates are multiply-accumulates per second on all the cores
# of a 2-core machine; memory in MiB.
STATED = {
    # tflite: its worker imports TensorFlow (the interpreter is TensorFlow's), so tensorflow's figures (assumed)
    "fixed_s": {"tensorflow": 8.0, "tflite": 8.0, "tvm": 6.0, "tvm-tuned": 6.0, "openvino": 3.0, "default": 3.0},
    # each framework's own speed, GMAC/s (multiply-accumulates per second at its batch, both cores): where
    # each figure comes from is RATE_SOURCES' entry of the same key (stated_rate reads both); "default"
    # is assumed for a framework this machine's committed results never measured
    "gmacs_per_s": {"default": 60.0,
                    "torch": 54.6, "onnxruntime": 94.9, "onnxruntime-parallel": 50.8, "openvino": 97.4,
                    "tensorflow": 72.7, "tensorflow-xla": 62.0, "torch-compile": 55.5, "tflite": 77.8,
                    "ios[torch]": 57.9, "ios[onnxruntime]": 97.8, "ios[openvino]": 101.3,
                    # at bf16 and int8: fp32's rate times that framework's own speedup over its fp32
                    "openvino@bf16": 184.1, "torch@bf16": 95.5, "tensorflow@bf16": 78.9, "ios[openvino]@bf16": 192.5,
                    "onnxruntime@int8": 244.9, "openvino@int8": 269.8, "torch@int8": 266.4, "tflite@int8": 58.9,
                    "ios[onnxruntime]@int8": 230.8, "ios[openvino]@int8": 313.0},
    # where a framework has no figure at bf16 or int8: its fp32 rate times the median speedup over its own
    # fp32 the frameworks had on this 2-core VM on 2026-11-27 (runs/prec-a, inception_v3 and randwire b1:
    # bf16 1.6-1.9x, int8 0.3-5.9x, median 2.6x; the 60 GMAC/s once stated for all became 105 and 156)
    "precision_speedup": {"bf16": 1.75, "int8": 2.6},
    # a search worker: its start, then per operator of the model by kernel provider and precision (each
    # stage timed, the candidates compiled by the provider's engine end to end; at int8 each piece quantized
    # and calibrated first), plus per state of the DP (:func:`search_states`), once for all the schedules it
    # searches (one cost model: the stages timed for the first are reused by the next; the quick sweep of
    # 10:04, /tmp/estrun2: sequential 0-1.3 s, greedy 0.9-1.6, both 1.0-2.8 after it), plus per schedule
    # optimize_schedule_s. Measured on this 2-core VM on 2026-11-27 (runs/prec-a: 12
    # searches, inception_v3 and randwire b1, 12.7-317 s, a fresh profile database): the states
    # explain randwire's searches (46,223 states against inception_v3's 1,207, both ~120 operators):
    # 2.4-3.0 ms each over the six provider/precision pairs; the rest per operator, below
    "optimize_schedule_s": 0.3,
    # ... and at a batch above 1, this many of what the batch adds to the model's latency on the provider's
    # engine at its precision (the stages are timed at the cell's batch; the figures above are batch 1's):
    # docs/results/batchsize (2026-11-22, this VM's CPU, 2 cores): inception_v3's IOS-Both search on torch
    # took 3.1, 9.6 and 37.9 s at batch 1, 4 and 16, 25, 25 and 24 of torch's latency at that batch. A
    # search worker's greedy and both searches at batch 16 (benchmarks/bench_search_cost.py, 2026-11-29
    # 00:22-00:29 UTC, quiet, with the end-to-end race bounded by time): resnet50 68.9 s, inception_v3
    # 93.5 s, about 45 times what batch 16 adds to torch's latency (24 was one strategy's search alone)
    "optimize_batch_latencies": 45,
    "optimize_s_per_state": 0.0026,
    "optimize_s_per_op": {"ios[torch]": 0.04, "ios[onnxruntime]": 0.085, "ios[openvino]": 0.14,
                          "ios[openvino]@bf16": 0.10, "ios[onnxruntime]@int8": 0.35, "ios[openvino]@int8": 1.63,
                          "default": 0.085},
    "reference_fixed_s": 1.2,
    "base_mib": {"tensorflow": 900.0, "tflite": 900.0, "tvm": 600.0, "tvm-tuned": 600.0, "default": 450.0},
    "weight_copies": 2.0,  # the loaded weights and the framework's own copy
    "activation_factor": 2.0,  # a framework's arena may hold about twice the oracle's live activations
    "canary_s": 0.05,
    # a round's own work besides its worker's start, build, canaries (canary_s) and timed runs: loading the
    # input and the oracle's output, the output checks, writing the result ...
    "round_s": 0.1,
    # ... and the part of a round's fixed cost a calibration does not time: the build (from the build cache
    # after the first round: ``adapters.build_cache``). With round_s: the quick sweep of 2026-11-27 10:04 UTC
    # (/tmp/estrun2/runs/r1, quiet; sample and squeezenet): its later rounds' wall less their timed loop and
    # the worker's start its sweep measured, the median per framework: 0.35-0.52 s (ONNX Runtime, OpenVINO,
    # torch, JAX, IOS on every provider), TensorFlow 1.26, TensorFlow-XLA 1.36, torch-compile 3.35; each
    # less the canaries and round_s. Checked on the quick sweeps of 09:58 (under load) and 15:32 (quiet).
    # tvm loads the library its first round exported (adapters.tvm_cache): squeezenet b1's 8 later rounds
    # on 2026-11-28 23:21 UTC (under load) built in 0.08-0.14 s (4.3-5.8 s each without the cache);
    # tvm-tuned still compiles every round from its MetaSchedule database
    "build_s": {"torch-compile": 3.1, "tensorflow-xla": 1.1, "tensorflow": 1.0, "tvm": 0.2, "tvm-tuned": 4.0,
                "tflite": 1.0, "default": 0.2},  # tflite: tensorflow's (it traces the same tf.function; assumed)
    # ... plus this many of the model's fp32 latencies (with the framework's own: a build grows with the
    # model's work, the pieces an IOS provider compiles one per stage; a warm int8 build loads its
    # quantized model). Measured on this 2-core VM on 2026-11-27 (runs/prec-a, inception_v3 and randwire
    # b1: later rounds' wall less their timed loop, worker start and the parts above; the mean of the two
    # networks, each within about 1.5x of it)
    "build_latencies": {"onnxruntime": 13, "openvino": 24, "torch": 2, "tensorflow": 16, "ios[torch]": 18,
                        "ios[onnxruntime]": 37, "ios[openvino]": 52, "ios[openvino]@bf16": 42,
                        "onnxruntime@int8": 17, "openvino@int8": 40, "torch@int8": 28, "tflite@int8": 18,
                        "ios[onnxruntime]@int8": 34, "ios[openvino]@int8": 73, "default": 0},
    # ... and what the first round's cold build adds (torch-compile: measured on the quick sweep's networks;
    # tvm: squeezenet b1's first round on 2026-11-28 23:20 UTC, under load: 5.3 s, its compile and export
    # into the build cache, less a later round's load)
    "first_build_s": {"torch-compile": 9.5, "tvm": 5.2, "default": 0.0},
    # ... in the model's fp32 latencies: int8's post-training quantization (calibration on seeded inputs,
    # per piece for IOS: docs/precision.md), kept by the build cache for the later rounds. Measured on
    # this 2-core VM on 2026-11-27 (runs/prec-a: first round's wall less the later rounds' median; 3.4-9.3 s
    # on inception_v3, 8.6-31 s on randwire; the mean of the two networks' multiples)
    "first_build_latencies": {"onnxruntime@int8": 90, "openvino@int8": 165, "torch@int8": 36,
                              "tflite@int8": 200, "ios[onnxruntime]@int8": 105, "ios[openvino]@int8": 165,
                              "default": 0},
    # the canary's time (speed_probe) on the 2-core VM the figures above were measured on, at its
    # usual speed (2026-11-27 09:40 UTC: 3.86-3.90 ms whenever a core was free; docs/harness.md) ...
    "canary_ms": 3.9,
    # ... a host with these instruction sets (its env.json, docs/results/frameworks/env.json). A canary
    # compares one host's moments, not two hosts: the AVX2-only VM of 2026-11-28/29 sorts its canary in
    # 0.93-1.0 ms and runs the frameworks 1.1-1.4x slower than this one (torch inception_v3 b1 130 ms
    # against 116, openvino 72 against 53: docs/results/estimate/2026-11-29-canary-across-hosts.md)
    "canary_isa": ("avx", "avx2", "avx512_bf16", "avx512_bitalg", "avx512_vbmi2", "avx512_vnni", "avx512_vpopcntdq",
                   "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512ifma", "avx512vbmi", "avx512vl", "f16c",
                   "fma", "sse4_1", "sse4_2", "sse4a"),
}
_FW = "docs/results/frameworks (2026-11-22, 2 cores, inception_v3 and squeezenet b1)"
_BS = "docs/results/batchsize (2026-11-22, inception_v3 b1, 4, 16)"
_PA = "docs/results/precision/2026-11-27-inception-randwire.md (inception_v3 and randwire b1)"
_PB = "squeezenet and resnet50 b1, sweep B of the same page"
_TFL = "docs/results/precision/tflite-own-framework-2026-11-29.md (inception_v3 and squeezenet b1, quiet)"
# where each stated rate (STATED["gmacs_per_s"]) was measured: the median over the cells named of
# macs x batch / median latency (fp32), and at bf16 and int8 the fp32 rate times the framework's median
# speedup over its own fp32 in the page named (its tables "Speedup over its own fp32")
RATE_SOURCES = {
    "torch": f"measured: {_FW} and {_BS}, median of 5 cells",
    "onnxruntime": f"measured: {_FW} and {_BS}, median of 5 cells",
    "openvino": f"measured: {_FW} and {_BS}, median of 5 cells",
    "onnxruntime-parallel": f"measured: {_FW}", "tensorflow": f"measured: {_FW}",
    "tensorflow-xla": f"measured: {_FW}", "torch-compile": f"measured: {_FW}",
    # tflite, fp32 and int8: the quiet run of that page (inception_v3 72.84 and 79.81 ms, squeezenet 10.06 and
    # 16.81 ms); this VM hides the integer instructions (VNNI), so TFLite's int8 is slower than its fp32 here
    "tflite": f"measured: {_TFL}, median of 2 cells",
    "ios[torch]": f"measured: IOS-Both in {_FW} and {_BS}, median of 5 cells",
    "ios[onnxruntime]": f"measured: IOS-Both[onnxruntime] in {_FW}",
    "ios[openvino]": f"measured: IOS-Both[openvino] in {_FW}",
    "openvino@bf16": f"measured: fp32 x 1.89 ({_PA})", "torch@bf16": f"measured: fp32 x 1.75 ({_PA})",
    "tensorflow@bf16": f"measured: fp32 x 1.085 ({_PA}: 1.49 and 0.68)",
    "ios[openvino]@bf16": f"measured: fp32 x 1.9 ({_PA})",
    "onnxruntime@int8": f"measured: fp32 x 2.58 ({_PA})", "openvino@int8": f"measured: fp32 x 2.77 ({_PA})",
    "torch@int8": f"measured: fp32 x 4.88 ({_PA} and {_PB}: 5.90, 0.31, 6.74, 3.86)",
    "tflite@int8": f"measured: {_TFL}, median of 2 cells (not fp32 x a speedup: its own cells)",
    "ios[onnxruntime]@int8": f"measured: fp32 x 2.36 ({_PA})",
    "ios[openvino]@int8": f"measured: fp32 x 3.09 ({_PA})",
}


def stated_rate(framework: str) -> tuple[float, str]:
    """(GMAC/s, where it comes from) of ``framework`` (a series: ``openvino@int8``,
    ``ios-both[openvino]@bf16``) in :data:`STATED` ``gmacs_per_s``: its worker's kind, else its name, at
    its precision; else at fp32 times ``precision_speedup`` (assumed); else the default (assumed)."""
    table = STATED["gmacs_per_s"]
    plain, _, precision = framework.partition(PRECISION_SEP)
    keys = list(dict.fromkeys((_base_kind(plain), _base_name(plain))))
    for key in (series(k, precision) for k in keys):
        if key in table:
            return table[key], RATE_SOURCES.get(key, "assumed")
    speedup = STATED["precision_speedup"].get(precision, 1.0)  # fp32 (no precision): none
    for key in keys:
        if key in table:
            if not precision or precision == "fp32":
                return table[key], RATE_SOURCES.get(key, "assumed")
            return table[key] * speedup, f"assumed: {key}'s fp32 rate x {speedup} (the median speedup at {precision})"
    return table["default"] * speedup, "assumed: no committed figure for it on this machine"


# a build's stated growth (build_latencies) is full from BUILD_FULL_OPS operators on (inception_v3 and
# randwire, ~120, where it was measured), none up to BUILD_BASE_OPS and a share between: the stated build_s
# was measured on the quick sweep's networks (sample: 5 operators, squeezenet: 38), whose builds it holds
# already (the quick sweep of 2026-11-27 10:04 UTC: ONNX Runtime's and OpenVINO's rounds 0.6-1.0 s in all)
BUILD_BASE_OPS, BUILD_FULL_OPS = 38, 100
PROBE_BATCHES, PROBE_PAUSE_S = 3, 0.05  # the canary at plan time: three of its medians, this far apart
SPEED_BOUNDS = (0.5, 2.0)  # the scale a probe may put on the model: past these a probe is not believed further
WORKER_START_S = 1.0  # the least a round's fixed part takes (a fresh process, imports): --time-budget's check
MEMORY_MARGIN = 0.9  # a cell is skipped when its estimate exceeds this share of the available memory
GPU_BASE_MIB = 600.0  # stated: a GPU worker's CUDA context and libraries' workspaces before its own tensors


def speed_probe(batches: int = PROBE_BATCHES, canary=None, sleep=None) -> float:
    """This machine's speed now, ms: the rounds' canary (``ios_core.measurement.interference.canary``,
    the median of its 5 tries, the figure each round records), after one untimed try, the least of
    ``batches`` of them :data:`PROBE_PAUSE_S` apart: what a free core does now, not the burst of
    another process that happens to start in those milliseconds (a 2-core VM's canary doubles then)."""
    import time

    if canary is None:
        from ios_core.measurement.interference import canary
    sleep = sleep or time.sleep
    canary(1)
    got = []
    for i in range(max(1, batches)):
        if i:
            sleep(PROBE_PAUSE_S)
        got.append(float(canary(5)))
    return min(got)


def speed_factor(now_ms: float | None, then_ms: float | None) -> float:
    """How much longer than when ``then_ms`` was measured things take now (``now_ms / then_ms``, the
    canary's times), within :data:`SPEED_BOUNDS`; 1.0 when either is missing."""
    if not now_ms or not then_ms or now_ms <= 0 or then_ms <= 0:
        return 1.0
    low, high = SPEED_BOUNDS
    return min(high, max(low, now_ms / then_ms))


def canary_band(then_ms: list[float]) -> tuple[float, float]:
    """The range earlier runs' rounds' canaries spanned (ms): their 10th and 90th percentiles."""
    import numpy as np

    low, high = np.percentile(np.asarray(then_ms, dtype=np.float64), (10, 90))
    return float(low), float(high)


def band_factor(now_ms: float | None, then_ms: list[float]) -> float:
    """How much longer things take now than when earlier runs measured them, their rounds' canaries
    ``then_ms``: 1.0 while the canary now lies within the range those canaries spanned (their 10th to
    90th percentile: the figures learnt then already hold that range's mix of a shared machine's
    moments), else against the nearer end of it (:func:`speed_factor`, bounded). A 1 ms canary on a
    shared 2-core VM reads 0.8-1.3 ms from one minute to the next: scaled by its ratio to their median,
    the same plan's estimate moved by 30 % between two dry runs."""
    if not now_ms or now_ms <= 0 or not then_ms:
        return 1.0
    low, high = canary_band(then_ms)
    if now_ms > high:
        return speed_factor(now_ms, high)
    if now_ms < low:
        return speed_factor(now_ms, low)
    return 1.0


def _stated(name: str, framework: str) -> float:
    """``STATED[name]``'s figure for ``framework`` (a series: ``openvino@int8``, ``ios-both[openvino]@int8``):
    its kind at its precision (``ios[openvino]@int8``), its kind, its name at its precision, its name
    (``ios`` for every IOS cell), the table's default at its precision, else its default."""
    table = STATED[name]
    plain, _, precision = framework.partition(PRECISION_SEP)
    kind, base = _base_kind(plain), _base_name(plain)
    for key in (series(kind, precision), kind, series(base, precision), base, series("default", precision)):
        if key in table:
            return table[key]
    return table["default"]


def _fixed_key(framework: str) -> str:
    """What a round's fixed part is learned and looked up by: the worker's kind at its precision
    (``ios[openvino]@int8``, ``torch``): a build differs by kernel provider and precision."""
    plain, _, precision = framework.partition(PRECISION_SEP)
    return series(_base_kind(plain), precision)




PRECISION_SEP = "@"


def series(framework: str, precision: str | None) -> str:
    """What the estimate learns and looks latencies up by: the framework, and its precision where
    not fp32 (``openvino@bf16``), so that a reduced-precision figure never stands for fp32's."""
    return framework if not precision or precision == "fp32" else f"{framework}{PRECISION_SEP}{precision}"


def _base_name(framework: str) -> str:
    """``ios-both[openvino]`` -> ``ios``; peers keep their name, less a precision (``openvino@bf16``)."""
    return "ios" if framework.startswith("ios-") else framework.split(PRECISION_SEP, 1)[0]



def _base_kind(framework: str) -> str:
    """What a framework's worker imports: ``ios-both[openvino]`` -> ``ios[openvino]``, ``ios-both``
    -> ``ios[torch]``; a peer is itself."""
    if framework.startswith("ios-"):
        provider = framework.partition("[")[2].rstrip("]") or "torch"
        return f"ios[{provider}]"
    return framework

