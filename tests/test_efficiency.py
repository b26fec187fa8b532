"""The ScaleRL compute-efficiency fit on synthetic curves with known parameters: recovered
exactly without noise, within its standard errors with noise, and reported as not identified
when the run never saturates."""

import math

import numpy as np
import pytest

from grpo_ablation.analysis.efficiency import (
    FAILED,
    FIT,
    NOT_IDENTIFIED,
    area_under_curve,
    fit_scalerl,
    scalerl_curve,
)

R0, A, B, C_MID = 0.2, 0.8, 1.5, 2_000.0
C = np.geomspace(100, 100_000, 20)


def test_half_the_gain_is_reached_at_c_mid():
    assert scalerl_curve(C_MID, R0, A, B, C_MID) == pytest.approx((R0 + A) / 2)
    assert scalerl_curve(1e12, R0, A, B, C_MID) == pytest.approx(A, abs=1e-6)


def test_the_area_is_the_mean_over_the_compute_range():
    assert area_under_curve(np.array([0.0, 1.0, 3.0]), np.array([0.0, 1.0, 1.0])) == pytest.approx(
        (0.5 + 2.0) / 3
    )


def test_a_noiseless_curve_gives_back_its_parameters():
    fit = fit_scalerl(C, scalerl_curve(C, R0, A, B, C_MID), R0)
    assert fit.status == FIT
    assert (fit.A, fit.B, fit.C_mid) == pytest.approx((A, B, C_MID), rel=1e-4)


def test_with_noise_the_parameters_lie_within_their_standard_errors():
    rng = np.random.default_rng(0)
    covered = {"A": 0, "B": 0, "C_mid": 0}
    trials = 40
    for _ in range(trials):
        R = scalerl_curve(C, R0, A, B, C_MID) + rng.normal(0, 0.01, len(C))
        fit = fit_scalerl(C, R, R0)
        assert fit.status == FIT
        for name, truth in (("A", A), ("B", B), ("C_mid", C_MID)):
            covered[name] += abs(getattr(fit, name) - truth) <= 1.96 * getattr(fit, f"{name}_se")
    # 95% intervals: at least 32 of 40 cover (P < 0.01 below that for a true 95% coverage).
    assert all(n >= 32 for n in covered.values()), covered


def test_a_run_that_never_saturates_is_not_identified():
    still_rising = scalerl_curve(C, R0, A, B, 1e7)  # C_mid far beyond the last point
    fit = fit_scalerl(C, still_rising, R0)
    assert fit.status == NOT_IDENTIFIED and "saturation" in fit.reason
    assert not math.isnan(fit.auc)


def test_too_few_points_fail_with_a_reason():
    fit = fit_scalerl(C[:3], scalerl_curve(C[:3], R0, A, B, C_MID), R0)
    assert fit.status == FAILED and "4 points" in fit.reason
