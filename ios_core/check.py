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

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("argmax_agreement", "samples"):
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
                    tolerance: float | None = None, more=None) -> CheckResult:
    """The check of a cell asked for ``precision``: :func:`compare` at its bound (``tolerance``
    may only tighten it) and, for int8, the arg-max agreement with the oracle over the batch and the
    further seeded batches ``more`` ((their outputs, the oracle's), :func:`check_batches`), which count
    in the arg-max share only: the error bound is the cell's own output's, as the bounds were measured."""
    bound = tolerance_for(precision) if tolerance is None else min(tolerance, tolerance_for(precision))
    res = compare(out, ref, bound)
    need = ARGMAX_AGREEMENT.get(precision)
    if need is None or not np.isfinite(res.max_rel_err):
        return res
    if more:
        out = np.concatenate([np.asarray(out), *map(np.asarray, more[0])])
        ref = np.concatenate([np.asarray(ref), *map(np.asarray, more[1])])
    agree = argmax_agreement(out, ref)
    res.argmax_agreement = agree
    res.samples = int(np.asarray(out).shape[0]) if np.ndim(out) else 1
    if agree < need:
        why = f"arg-max agrees with the oracle on {agree:.0%} of the batch < {need:.0%}"
        res.passed = False
        res.reason = f"{res.reason}; {why}" if res.reason else why
    return res


def compare(out: np.ndarray, ref: np.ndarray, tolerance: float = DEFAULT_RTOL) -> CheckResult:
    out = np.asarray(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        return CheckResult(False, float("inf"), float("inf"), tolerance,
                           f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    if not np.isfinite(out).all():
        return CheckResult(False, float("inf"), float("inf"), tolerance, "non-finite values in output")
    diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    scale = (float(np.abs(ref).max()) if ref.size else 0.0) or 1.0
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = max_abs / scale
    ok = rel <= tolerance
    return CheckResult(ok, max_abs, rel, tolerance, "" if ok else f"max rel error {rel:.2e} > {tolerance:.0e}")


def combined_check(before, after) -> dict:
    """One verdict over the check before timing and the check of the last timed call's output
    (a racy schedule can be right once): passed only if both passed; errors are the worse."""
    worst = max((before, after), key=lambda c: c.max_rel_err)
    reasons = [f"{when}: {c.reason}" for when, c in (("before timing", before), ("after timing", after))
               if not c.passed]
    return {**worst.to_dict(), "passed": before.passed and after.passed, "reason": "; ".join(reasons),
            "before": before.to_dict(), "after": after.to_dict()}
