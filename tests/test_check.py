"""The output check (``ios_core.check``) at its edges: each bound, the tolerance that may only tighten,
the int8 arg-max rule over the batch, the error relative to the oracle's largest magnitude, and the
verdict over the checks before and after timing. Written against the mutants cosmic-ray left alive
with only the precision tests (issue 57, ``make mutate``)."""

from __future__ import annotations

import numpy as np
import pytest

from ios_core.check import (
    ARGMAX_AGREEMENT,
    DEFAULT_RTOL,
    PRECISION_TOLERANCE,
    PRECISIONS,
    SIMULATED_RMS_FACTOR,
    SIMULATED_RMS_FLOOR,
    CheckResult,
    argmax_agreement,
    check_batches,
    check_precision,
    combined_check,
    compare,
    rms_rel_err,
    tolerance_for,
)


def test_each_precision_has_its_bound_and_an_unknown_one_is_named():
    assert PRECISION_TOLERANCE == {"fp32": 1e-3, "bf16": 5e-2, "fp16": 5e-2, "int8": 1e-1}
    assert DEFAULT_RTOL == 1e-3 and PRECISIONS[0] == "fp32" and ARGMAX_AGREEMENT == {"int8": 0.75}
    assert [tolerance_for(p) for p in PRECISIONS] == [1e-3, 5e-2, 5e-2, 1e-1] and tolerance_for() == 1e-3
    with pytest.raises(KeyError, match=r"unknown precision 'fp8'; known: fp32, bf16, fp16, int8") as e:
        tolerance_for("fp8")
    assert e.value.__suppress_context__  # the table's own KeyError is not chained into the message


def test_compare_is_the_max_error_relative_to_the_oracles_largest_magnitude():
    ref = np.array([[4.0, -8.0], [2.0, 1.0]], np.float32)
    out = ref + np.array([[0.0, 0.004], [-0.006, 0.0]], np.float32)
    res = compare(out, ref)
    assert res.max_abs_err == pytest.approx(0.006, rel=1e-4) and res.max_rel_err == pytest.approx(0.006 / 8, rel=1e-4)
    assert res.passed and res.reason == "" and res.tolerance == DEFAULT_RTOL and res.argmax_agreement is None
    res = compare(out, ref, 5e-4)
    assert not res.passed and res.reason == "max rel error 7.50e-04 > 5e-04"
    at = compare(np.array([1.0, 2.0]), np.array([1.0, 2.5]), 0.2)  # exactly at the bound: passes
    assert at.max_rel_err == pytest.approx(0.2) and at.passed


def test_compare_in_float64_of_float16_inputs():
    # float16 operands subtracted in float16 would round 2049 - 2048 to 0 (or 2): float64 gives 1
    ref = np.array([2048.0], np.float16)
    out = np.array([2050.0], np.float16)
    assert compare(out, ref, 1.0).max_abs_err == 2.0


def test_compare_of_a_zero_oracle_and_of_empty_outputs():
    res = compare(np.array([0.0, 5e-4]), np.zeros(2))  # a zero oracle: the error is absolute
    assert res.max_rel_err == pytest.approx(5e-4) and res.passed
    res = compare(np.array([0.0, 2e-3]), np.zeros(2))
    assert res.max_rel_err == pytest.approx(2e-3) and not res.passed
    empty = compare(np.zeros((0, 3)), np.zeros((0, 3)))
    assert empty.passed and empty.max_abs_err == 0.0 and empty.max_rel_err == 0.0


def test_compare_refuses_another_shape_and_non_finite_values():
    res = compare(np.zeros((2, 3)), np.zeros((3, 2)))
    assert not res.passed and res.max_abs_err == res.max_rel_err == float("inf")
    assert res.reason == "shape (2, 3) != reference (3, 2)" and res.tolerance == DEFAULT_RTOL
    assert compare(np.zeros((3, 2)), np.zeros((2, 3))).reason == "shape (3, 2) != reference (2, 3)"
    assert not compare(np.zeros((1, 6)), np.zeros((1, 5))).passed
    for bad in (np.nan, np.inf, -np.inf):
        res = compare(np.array([1.0, bad]), np.array([1.0, 1.0]), 0.5)
        assert not res.passed and res.max_rel_err == float("inf") and res.reason == "non-finite values in output"
        assert res.tolerance == 0.5


def test_the_argmax_agreement_is_the_share_of_samples_whose_arg_max_is_the_oracles():
    ref = np.zeros((4, 2, 3))
    ref[:, 1, 2] = 1.0  # every sample's arg-max: its last element
    out = ref.copy()
    out[0, 0, 0] = 2.0  # one sample's arg-max moved (over all its axes, not per row)
    assert argmax_agreement(out, ref) == 0.75
    out[1, 1, 1] = 2.0
    assert argmax_agreement(out, ref) == 0.5
    assert argmax_agreement(np.float32(3.0), np.float32(1.0)) == 1.0  # a scalar: one sample
    assert check_precision(np.float32(3.0), np.float32(3.0), "int8").samples == 1
    assert argmax_agreement([[0.0, 1.0]], [[1.0, 0.0]]) == 0.0  # lists are arrays


def _int8_case(moved: int, n: int = 8):
    ref = np.zeros((n, 4), np.float32)
    ref[:, 0], ref[:, 1] = 1.0, 0.99
    out = ref.copy()
    out[:moved, 1] = 1.01  # within int8's error bound, the arg-max of `moved` samples moved
    return out, ref


def test_int8_needs_the_arg_max_of_three_quarters_of_the_batch():
    out, ref = _int8_case(2)  # 6 of 8 agree: exactly 75 %, passes
    res = check_precision(out, ref, "int8")
    assert res.passed and res.argmax_agreement == 0.75 and res.reason == "" and res.tolerance == 0.1
    out, ref = _int8_case(3)  # 5 of 8
    res = check_precision(out, ref, "int8")
    assert not res.passed and res.argmax_agreement == 5 / 8
    assert res.reason == "arg-max agrees with the oracle on 62% of the batch < 75%"
    assert res.to_dict()["argmax_agreement"] == 5 / 8 and res.samples == res.to_dict()["samples"] == 8
    # over the bound and the arg-max: both reasons, in that order
    out[:, 3] = 0.5
    res = check_precision(out, ref, "int8")
    assert not res.passed and res.reason == ("max rel error 5.00e-01 > 1e-01; arg-max agrees with the oracle on "
                                             "62% of the batch < 75%")


def test_other_precisions_have_no_arg_max_rule_and_a_non_finite_output_none_either():
    out, ref = _int8_case(8)  # every arg-max moved, the values within 2 %
    for p in ("bf16", "fp16"):
        res = check_precision(out, ref, p)
        assert res.passed and res.argmax_agreement is None and res.samples is None
        assert "argmax_agreement" not in res.to_dict() and "samples" not in res.to_dict()
    out[0, 0] = np.nan
    res = check_precision(out, ref, "int8")
    assert not res.passed and res.argmax_agreement is None and res.reason == "non-finite values in output"


def test_a_tolerance_given_may_only_tighten_the_precisions_bound():
    ref = np.array([1.0, 2.0])
    out = np.array([1.0, 2.01])  # 5e-3 relative
    assert not check_precision(out, ref, "fp32", tolerance=1.0).passed  # looser than fp32's: fp32's bound
    assert check_precision(out, ref, "fp32", tolerance=1.0).tolerance == 1e-3
    assert check_precision(out, ref, "bf16").passed
    res = check_precision(out, ref, "bf16", tolerance=1e-3)  # tighter: taken
    assert not res.passed and res.tolerance == 1e-3
    assert check_precision(out, ref).tolerance == 1e-3  # fp32 by default


def test_the_verdict_over_both_checks_needs_both_and_keeps_the_worse_error():
    good = CheckResult(True, 0.01, 0.001, 0.1)
    bad = CheckResult(False, 0.5, 0.2, 0.1, "max rel error 2.00e-01 > 1e-01", argmax_agreement=0.5)
    v = combined_check(good, bad)
    assert v["passed"] is False and v["max_rel_err"] == 0.2 and v["argmax_agreement"] == 0.5
    assert v["reason"] == "after timing: max rel error 2.00e-01 > 1e-01"
    assert v["before"] == good.to_dict() and v["after"] == bad.to_dict()
    v = combined_check(bad, good)
    assert v["passed"] is False and v["max_rel_err"] == 0.2
    assert v["reason"] == "before timing: max rel error 2.00e-01 > 1e-01"
    v = combined_check(bad, bad)
    assert v["reason"] == ("before timing: max rel error 2.00e-01 > 1e-01; "
                           "after timing: max rel error 2.00e-01 > 1e-01")
    v = combined_check(good, CheckResult(True, 0.02, 0.002, 0.1))
    assert v["passed"] is True and v["reason"] == "" and v["max_rel_err"] == 0.002 and v["max_abs_err"] == 0.02
    assert "argmax_agreement" not in v


def test_a_cell_of_a_small_batch_is_checked_on_enough_batches_for_16_samples():
    assert [check_batches(b, "int8") for b in (1, 2, 3, 5, 16, 17, 32)] == [16, 8, 6, 4, 1, 1, 1]
    assert all(isinstance(check_batches(b, "int8"), int) for b in (1, 3))
    assert check_batches(0, "int8") == 16  # no batch: as batch 1, never a division by zero
    assert [check_batches(1, p) for p in ("fp32", "bf16", "fp16")] == [1, 1, 1]  # no arg-max rule: its own batch


def test_further_seeded_batches_count_in_the_arg_max_share_not_in_the_bound():
    out, ref = _int8_case(0)  # every arg-max the oracle's
    bad_out, bad_ref = _int8_case(8)  # further batches: every arg-max moved ...
    bad_out[:, 3] = 5.0  # ... and far over the bound
    res = check_precision(out, ref, "int8", more=([bad_out, bad_out], [bad_ref, bad_ref]))
    assert res.samples == 24 and res.argmax_agreement == 8 / 24 and not res.passed
    assert res.max_rel_err == 0 and res.reason == "arg-max agrees with the oracle on 33% of the batch < 75%"
    assert check_precision(out, ref, "int8", more=([out], [ref])).samples == 16
    assert check_precision(out, ref, "bf16", more=([bad_out], [bad_ref])).passed  # no arg-max rule: unused


# ---- the RMS error and the int8 bound the oracle's int8 simulation gives -------------------------------------

def test_the_rms_error_is_relative_to_the_oracles_rms_over_every_value():
    ref = np.array([[3.0, -4.0], [0.0, 0.0]])  # RMS 2.5
    out = ref + np.array([[1.0, 0.0], [-1.0, 0.0]])  # error RMS sqrt(2 / 4)
    assert rms_rel_err(out, ref) == pytest.approx(np.sqrt(0.5) / 2.5)
    assert compare(out, ref, 1.0).rms_rel_err == pytest.approx(np.sqrt(0.5) / 2.5)
    assert rms_rel_err(np.array([0.5, 0.0]), np.zeros(2)) == pytest.approx(np.sqrt(0.125))  # a zero oracle: absolute
    assert rms_rel_err(np.zeros((0, 2)), np.zeros((0, 2))) == 0.0
    assert compare(np.ones(2), np.ones(3)).rms_rel_err == np.inf  # another shape: no finite error
    assert compare(np.array([np.nan, 1.0]), np.ones(2)).rms_rel_err == np.inf


def _simulated_case(batches=2, n=200, sim_rms=0.01, err_rms=0.03, seed=0):
    """Oracle outputs (``batches`` of (1, n)), a simulation off by ``sim_rms`` and an output off by ``err_rms``
    (RMS, relative), both in errors too small for the max-error bound."""
    rng = np.random.default_rng(seed)
    refs = [rng.standard_normal((1, n)) for _ in range(batches)]
    for r in refs:
        r[0, 0] = 8.0  # an arg-max no error here moves: only the RMS rule decides
    rms = np.sqrt(np.mean(np.concatenate(refs) ** 2))

    def off(r, by):
        e = rng.choice([-1.0, 1.0], r.shape)  # every value off by the same magnitude: its RMS is exact
        return r + e * by * rms

    return refs, [off(r, sim_rms) for r in refs], [off(r, err_rms) for r in refs]


def test_int8_refuses_an_rms_error_above_its_factor_times_the_simulations():
    factor, floor = SIMULATED_RMS_FACTOR["int8"], SIMULATED_RMS_FLOOR["int8"]
    assert factor == 6.0 and floor == 0.03
    refs, sims, outs = _simulated_case(sim_rms=0.01, err_rms=0.065)  # bound max(6 x 0.01, 0.03) = 0.06
    more = (outs[1:], refs[1:])
    res = check_precision(outs[0], refs[0], "int8", more=more, simulated=sims)
    assert res.simulated_rms_rel_err == pytest.approx(0.01) and res.rms_bound == pytest.approx(0.06)
    assert res.rms_rel_err == pytest.approx(0.065) and res.max_rel_err < 0.1  # the max-error bound lets it by
    assert not res.passed and res.reason == "RMS error 0.065 > 0.060 (6 x the oracle's int8 simulation's 0.010)"
    assert check_precision(outs[0], refs[0], "int8", more=more).passed  # without the simulation: passes
    refs, sims, outs = _simulated_case(sim_rms=0.01, err_rms=0.055)
    ok = check_precision(outs[0], refs[0], "int8", more=(outs[1:], refs[1:]), simulated=sims)
    assert ok.passed and ok.reason == "" and ok.to_dict()["rms_bound"] == pytest.approx(0.06)


def test_the_simulations_bound_has_a_floor_and_counts_every_checked_batch():
    refs, sims, outs = _simulated_case(sim_rms=0.002, err_rms=0.025)  # 6 x 0.002 = 0.012 < the floor 0.03
    res = check_precision(outs[0], refs[0], "int8", more=(outs[1:], refs[1:]), simulated=sims)
    assert res.rms_bound == pytest.approx(0.03) and res.passed
    # the RMS over both batches: the second batch's error alone carries it over the bound
    refs, sims, _ = _simulated_case(sim_rms=0.01)
    outs = [refs[0], refs[1] + 0.09 * np.sqrt(np.mean(np.concatenate(refs) ** 2)) * np.sign(refs[1])]
    res = check_precision(outs[0], refs[0], "int8", more=(outs[1:], refs[1:]), simulated=sims)
    assert res.rms_rel_err == pytest.approx(0.09 / np.sqrt(2), rel=1e-6) and res.rms_bound == pytest.approx(0.06)
    assert not res.passed  # over both batches: 0.064; the first alone is exact
    with pytest.raises(ValueError, match="the int8 simulation's outputs"):
        check_precision(outs[0], refs[0], "int8", more=(outs[1:], refs[1:]), simulated=sims[:1])


def test_other_precisions_have_no_simulated_bound():
    refs, sims, outs = _simulated_case(sim_rms=0.0001, err_rms=0.04)
    res = check_precision(outs[0], refs[0], "bf16", simulated=sims[:1])
    assert res.passed and res.simulated_rms_rel_err is None and "rms_bound" not in res.to_dict()


def test_an_rms_error_exactly_at_the_simulations_bound_passes_and_a_wrong_shaped_simulation_is_refused():
    # exact in binary floating point: the oracle's RMS is 1, the simulation is off by 1/16 everywhere (bound 6/16),
    # the output by 6/16: at the bound, which passes (as the max-error bound passes an error equal to it)
    ref = np.zeros((1, 64))
    ref[0, 0] = 8.0
    res = check_precision(ref + 0.375, ref, "int8", simulated=[ref + 0.0625])
    assert res.rms_bound == 0.375 and res.rms_rel_err == 0.375 and res.max_rel_err < 0.1
    assert res.passed, res.reason
    for wrong in ([ref + 0.0625] * 2, [np.zeros((1, 63))]):  # a simulation of other batches: a fault, not a verdict
        with pytest.raises(ValueError, match="the int8 simulation's outputs"):
            check_precision(ref + 0.375, ref, "int8", simulated=wrong)
