"""Output checks against the oracle: one comparison, used by the runtime, adapters and harness."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

# Documented default: float32 engines that reorder reductions (Winograd, FFT, fused kernels)
# stay well inside this on the zoo's He-initialized weights; max error is measured relative
# to the largest magnitude of the reference output.
DEFAULT_RTOL = 1e-3
# The one rule for the tolerance of a check: it follows the precision the sweep *asked* for,
# never what an engine reports it computed in (an engine that silently falls back to a lower
# precision must fail its check, not pass at a looser tolerance). bf16/fp16 have 8/11-bit
# mantissas; they are only ever explicit, separately labelled variants.
# int8: 1e-1. Correct int8 models show 1.9e-2 to 3.1e-2 (the zoo, the small test graph, squeezenet, on
# onnxruntime, openvino, torch and TFLite at batch 8-16) but up to 6.8e-2 on the small test graph at batch 2
# calibrated on other data of the same distribution: a bound of 6e-2 refuses correct models. Two corruptions
# pass it (a swapped per-channel scale on onnxruntime, 9.5e-2; a clipped activation on torch, 7.4e-2):
# tests/test_check_int8.py, docs/precision.md
PRECISION_TOLERANCE = {"fp32": DEFAULT_RTOL, "bf16": 5e-2, "fp16": 5e-2, "int8": 1e-1}
PRECISIONS = tuple(PRECISION_TOLERANCE)  # what a sweep can ask for (run --precision), fp32 the default
# int8 has a second condition: the arg-max of each sample's output (over everything but the batch
# axis) agrees with the oracle's for at least this share of the batch's samples (docs/precision.md)
ARGMAX_AGREEMENT = {"int8": 0.75}
# int8 has a third where the oracle's own int8 simulation of the network ran
# (``ios_core.reference.int8_simulation``: how far a correct, plain int8 quantization of this network, calibrated
# on the cell's calibration inputs, is off): the cell's RMS error over every sample checked is at most this
# factor times the simulation's over the same samples, or the floor where that is higher. A fixed bound cannot
# tell a corrupted model from a correct one of another network: correct int8 cells range from 0.012 (RMS; the
# small test CNN) to 0.084 (TFLite's ConvNeXt-tiny), a per-channel weight scale swapped on the small CNN gives
# 0.088. Against the simulation, correct cells of the zoo's CNNs measured 1.0 to 2.1 times it, of its
# transformers up to 4.1 (TFLite's ConvNeXt-tiny, every tensor in int8), the swapped scales 7.9 times: 6 leaves
# correct cells a margin of 1.46 and refuses the swaps by 1.3 (tests/test_check_int8.py,
# docs/results/precision/int8-simulated-bound-2026-11-29.md, benchmarks/bench_int8_error.py)
SIMULATED_RMS_FACTOR = {"int8": 6.0}
SIMULATED_RMS_FLOOR = {"int8": 0.03}
# ... counted over at least this many seeded samples: a cell of a smaller batch is also run on further seeded
# inputs (random_input(graph, bs, seed=input_seed + i), i = 1..), so that its arg-max share is no single sample's
# yes or no (ios_bench.running.references, task_cell._check_batches)
ARGMAX_SAMPLES = 16


def check_batches(batch_size: int, precision: str) -> int:
    """How many batches of ``batch_size`` a cell asked for ``precision`` is checked on (its own input's
    first): enough for :data:`ARGMAX_SAMPLES` samples where the precision has an arg-max rule, else 1."""
    if precision not in ARGMAX_AGREEMENT:
        return 1
    return max(1, -(-ARGMAX_SAMPLES // max(1, int(batch_size))))


def tolerance_for(precision: str = "fp32") -> float:
    """The output check's relative tolerance for a requested precision (KeyError if unknown)."""
    try:
        return PRECISION_TOLERANCE[precision]
    except KeyError:
        raise KeyError(f"unknown precision {precision!r}; known: {', '.join(PRECISION_TOLERANCE)}") from None


@dataclass
class CheckResult:
    passed: bool
    max_abs_err: float
    max_rel_err: float  # max |out - ref| / max |ref|
    tolerance: float
    reason: str = ""
    argmax_agreement: float | None = None  # int8 checks: share of samples whose arg-max is the oracle's
    samples: int | None = None  # ... over this many samples
    # root-mean-square error over the oracle's root-mean-square, over every value of the batch: the
    # quantization literature's noise-to-signal ratio (SQNR = -20 log10 of it), which sees an error spread
    # over many values that the max error, one value's, does not
    rms_rel_err: float | None = None
    simulated_rms_rel_err: float | None = None  # int8: the oracle's int8 simulation's, over the same samples
    rms_bound: float | None = None  # ... and the bound on rms_rel_err it gives

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("argmax_agreement", "samples", "rms_rel_err", "simulated_rms_rel_err", "rms_bound"):
            if d[k] is None:
                del d[k]
        return d


def argmax_agreement(out: np.ndarray, ref: np.ndarray) -> float:
    """The share of samples (first axis) whose output's arg-max (over every other axis) is the oracle's."""
    out, ref = np.asarray(out), np.asarray(ref)
    n = out.shape[0] if out.ndim else 1
    a = out.reshape(n, -1).argmax(axis=1)
    b = ref.reshape(n, -1).argmax(axis=1)
    return float((a == b).mean())


def check_precision(out: np.ndarray, ref: np.ndarray, precision: str = "fp32",
                    tolerance: float | None = None, more=None, simulated=None) -> CheckResult:
    """The check of a cell asked for ``precision``: :func:`compare` at its bound (``tolerance``
    may only tighten it) and, for int8, the arg-max agreement with the oracle over the batch and the
    further seeded batches ``more`` ((their outputs, the oracle's), :func:`check_batches`), which count
    in the arg-max share only: the error bound is the cell's own output's, as the bounds were measured.
    ``simulated``: the oracle's int8 simulation's outputs of the same batches (the cell's own first, then
    ``more``'s), which bound the RMS error over them all (:data:`SIMULATED_RMS_FACTOR`)."""
    bound = tolerance_for(precision) if tolerance is None else min(tolerance, tolerance_for(precision))
    res = compare(out, ref, bound)
    need = ARGMAX_AGREEMENT.get(precision)
    if need is None or not np.isfinite(res.max_rel_err):
        return res
    if more:
        out = np.concatenate([np.asarray(out), *map(np.asarray, more[0])])
        ref = np.concatenate([np.asarray(ref), *map(np.asarray, more[1])])
        res.rms_rel_err = rms_rel_err(out, ref)  # over every sample checked, as the arg-max share
    agree = argmax_agreement(out, ref)
    res.argmax_agreement = agree
    res.samples = int(np.asarray(out).shape[0]) if np.ndim(out) else 1
    reasons = [res.reason] if res.reason else []
    if agree < need:
        reasons.append(f"arg-max agrees with the oracle on {agree:.0%} of the batch < {need:.0%}")
    if simulated is not None and precision in SIMULATED_RMS_FACTOR:
        sim = np.concatenate([np.asarray(s) for s in simulated])
        if sim.shape != np.shape(ref):
            raise ValueError(f"the int8 simulation's outputs {sim.shape} are not the checked batches' {np.shape(ref)}")
        res.simulated_rms_rel_err = rms_rel_err(sim, ref)
        res.rms_bound = max(SIMULATED_RMS_FACTOR[precision] * res.simulated_rms_rel_err,
                            SIMULATED_RMS_FLOOR[precision])
        if res.rms_rel_err > res.rms_bound:
            reasons.append(f"RMS error {res.rms_rel_err:.3f} > {res.rms_bound:.3f} "
                           f"({SIMULATED_RMS_FACTOR[precision]:g} x the oracle's int8 simulation's "
                           f"{res.simulated_rms_rel_err:.3f})")
    res.passed = not reasons
    res.reason = "; ".join(reasons)
    return res


def compare(out: np.ndarray, ref: np.ndarray, tolerance: float = DEFAULT_RTOL) -> CheckResult:
    out = np.asarray(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        return CheckResult(False, float("inf"), float("inf"), tolerance,
                           f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}", rms_rel_err=float("inf"))
    if not np.isfinite(out).all():
        return CheckResult(False, float("inf"), float("inf"), tolerance, "non-finite values in output",
                           rms_rel_err=float("inf"))
    ref64 = ref.astype(np.float64)
    diff = np.abs(out.astype(np.float64) - ref64)
    scale = (float(np.abs(ref).max()) if ref.size else 0.0) or 1.0
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = max_abs / scale
    ok = rel <= tolerance
    return CheckResult(ok, max_abs, rel, tolerance, "" if ok else f"max rel error {rel:.2e} > {tolerance:.0e}",
                       rms_rel_err=_rms_ratio(diff, ref64))


def rms_rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    """The root-mean-square of ``out - ref`` over the root-mean-square of ``ref`` (0 for empty outputs; an
    all-zero oracle counts as 1, as :func:`compare`'s largest magnitude)."""
    ref = np.asarray(ref, np.float64)
    return _rms_ratio(np.asarray(out, np.float64) - ref, ref)


def _rms_ratio(diff: np.ndarray, ref: np.ndarray) -> float:
    """:func:`rms_rel_err` of a difference already taken (float64), so :func:`compare` takes it once."""
    if not diff.size:
        return 0.0
    rms_ref = float(np.sqrt(np.mean(ref ** 2))) or 1.0
    return float(np.sqrt(np.mean(diff ** 2))) / rms_ref


def combined_check(before, after) -> dict:
    """One verdict over the check before timing and the check of the last timed call's output
    (a racy schedule can be right once): passed only if both passed; errors are the worse."""
    worst = max((before, after), key=lambda c: c.max_rel_err)
    reasons = [f"{when}: {c.reason}" for when, c in (("before timing", before), ("after timing", after))
               if not c.passed]
    return {**worst.to_dict(), "passed": before.passed and after.passed, "reason": "; ".join(reasons),
            "before": before.to_dict(), "after": after.to_dict()}
