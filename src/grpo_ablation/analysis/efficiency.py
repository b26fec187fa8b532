"""Compute-efficiency curves: the ScaleRL fit of a run's accuracy against training compute.

ScaleRL (arXiv 2510.13786) models a run's reward R at compute C as a saturating curve,

    R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B),

with R0 the base policy's value, A the asymptote, B the steepness and C_mid the compute at which
half of the gain A − R0 is reached. A fit is reported as such only when the data determine it:
it must converge, its covariance must be finite, and the run must reach past C_mid (a curve that
is still rising at the last point extrapolates its asymptote: "not identified"). The area under
the curve, normalised to the compute range, is a fit-free summary beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FIT, NOT_IDENTIFIED, FAILED = "fit", "not identified", "failed"


def scalerl_curve(
    C: np.ndarray | float, R0: float, A: float, B: float, C_mid: float
) -> np.ndarray | float:
    """R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)."""
    return R0 + (A - R0) / (1.0 + (C_mid / np.asarray(C, dtype=float)) ** B)


def area_under_curve(C: np.ndarray, R: np.ndarray) -> float:
    """Mean of R over [min C, max C] by the trapezoid rule (the area divided by the range)."""
    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    order = np.argsort(C)
    C, R = C[order], R[order]
    if len(C) < 2 or C[-1] == C[0]:
        return float("nan")
    return float(np.sum((R[1:] + R[:-1]) / 2 * np.diff(C)) / (C[-1] - C[0]))


@dataclass(frozen=True)
class CurveFit:
    status: str  # FIT, NOT_IDENTIFIED or FAILED
    reason: str
    A: float = math.nan
    B: float = math.nan
    C_mid: float = math.nan
    A_se: float = math.nan
    B_se: float = math.nan
    C_mid_se: float = math.nan
    auc: float = math.nan


def fit_scalerl(C: np.ndarray, R: np.ndarray, R0: float) -> CurveFit:
    """Least-squares fit of A, B and C_mid (log C_mid, for scale) with R0 fixed; see the module
    docstring for when a fit counts as identified."""
    from scipy.optimize import curve_fit

    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    auc = area_under_curve(C, R)
    if len(C) < 4 or np.any(C <= 0):
        return CurveFit(FAILED, "needs at least 4 points at positive compute", auc=auc)

    def model(c, A, B, log_c_mid):
        return scalerl_curve(c, R0, A, B, math.exp(log_c_mid))

    start = (float(R.max()), 1.0, float(np.log(np.median(C))))
    bounds = ([-1.0, 1e-3, np.log(C.min()) - 10], [2.0, 20.0, np.log(C.max()) + 10])
    try:
        params, cov = curve_fit(model, C, R, p0=start, bounds=bounds, maxfev=20000)
    except (RuntimeError, ValueError) as err:
        return CurveFit(FAILED, f"did not converge: {err}", auc=auc)
    A, B, log_c_mid = (float(x) for x in params)
    se = np.sqrt(np.diag(cov)) if np.all(np.isfinite(cov)) else np.full(3, np.inf)
    C_mid = math.exp(log_c_mid)
    out = {
        "A": A,
        "B": B,
        "C_mid": C_mid,
        "A_se": float(se[0]),
        "B_se": float(se[1]),
        "C_mid_se": float(C_mid * se[2]),  # delta method from log C_mid
        "auc": auc,
    }
    if not np.all(np.isfinite(se)):
        return CurveFit(NOT_IDENTIFIED, "the parameters' covariance is not finite", **out)
    if C_mid >= C.max():
        return CurveFit(
            NOT_IDENTIFIED, "no saturation within the run: C_mid beyond the largest compute", **out
        )
    return CurveFit(FIT, "", **out)
