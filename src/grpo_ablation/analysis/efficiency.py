"""Compute-efficiency curves: the ScaleRL fit of a run's accuracy against training compute.

ScaleRL (arXiv 2510.13786) models a run's reward R at compute C as a saturating curve,

    R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B),

with R0 the base policy's value, A the asymptote, B the steepness and C_mid the compute at which
half of the gain A − R0 is reached. A fit is reported as such only when the data determine it:
it must converge, its covariance must be finite, its gain A − R0 (or loss: a run may get worse)
must exceed two standard errors (without one B and C_mid mean nothing), no parameter may end on
the bound of the fit, and C_mid must lie within the evaluated compute (a curve
still rising at the last point extrapolates its asymptote; one that is up before the first point
says nothing of its steepness): otherwise "not identified". A is bounded to the metric's range
[0, 1], so an asymptote the data would put outside it ends on the bound: not identified.

Identification depends on the outcome (a run with no gain has none), so the fitted parameters
exist for a selection of runs chosen by their results: they describe, and a confirmatory test
must not use them (``OUTCOME_DEPENDENT``). The summaries defined for every run are the area under
the curve, normalised to the compute range, and the late accuracy, the mean accuracy over the
curve points in the late window, the last quarter of the steps (``late_accuracy``;
``training.late_points`` puts evenly spaced points there): the primary late-training endpoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from grpo_ablation.design.options import in_late_window
from grpo_ablation.design.quantities import OUTCOME_DEPENDENT

FIT, NOT_IDENTIFIED, FAILED = "fit", "not identified", "failed"
# The fit's box for the steepness B: a fit that ends on it is not identified (its standard error
# means nothing there).
B_MIN, B_MAX = 1e-3, 20.0
# The fit's box for the asymptote A: the metric's range (an accuracy). A fit that ends on it is
# not identified: its data put the asymptote outside what the metric can reach.
A_MIN, A_MAX = 0.0, 1.0


def scalerl_curve(
    C: np.ndarray | float, R0: float, A: float, B: float, C_mid: float
) -> np.ndarray | float:
    """R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)."""
    return R0 + (A - R0) / (1.0 + (C_mid / np.asarray(C, dtype=float)) ** B)


def fitted_curve(
    C_low: float, C_high: float, R0: float, A: float, B: float, C_mid: float, points: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """A fitted run's ScaleRL curve over its compute [``C_low``, ``C_high``]: ``points`` compute
    values spaced evenly in log (the efficiency figure's x axis) and R at each."""
    grid = np.geomspace(C_low, C_high, points)
    return grid, scalerl_curve(grid, R0, A, B, C_mid)


def area_under_curve(C: np.ndarray, R: np.ndarray) -> float:
    """Mean of R over [min C, max C] by the trapezoid rule (the area divided by the range)."""
    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    order = np.argsort(C)
    C, R = C[order], R[order]
    if len(C) < 2 or C[-1] == C[0]:
        return float("nan")
    return float(np.sum((R[1:] + R[:-1]) / 2 * np.diff(C)) / (C[-1] - C[0]))


def late_accuracy(steps: list[int], R: np.ndarray | list[float]) -> float:
    """Mean of the values ``R`` at the curve's ``steps`` in the late window (the last quarter of
    training, the last step being the final: ``options.in_late_window``), each point equally
    weighted; NaN for none. Fixed by the config before the run (``training.late_points`` puts
    evenly spaced points there), whatever the curve looks like."""
    R = np.asarray(R, dtype=float)
    if len(R) == 0:
        return float("nan")
    last = max(steps)
    late = [r for s, r in zip(steps, R, strict=True) if in_late_window(s, last)]
    return float(np.mean(late))


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

    start = (float(np.clip(R.max(), A_MIN, A_MAX)), 1.0, float(np.log(np.median(C))))
    bounds = ([A_MIN, B_MIN, np.log(C.min()) - 10], [A_MAX, B_MAX, np.log(C.max()) + 10])
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
    if abs(A - R0) <= 2 * out["A_se"]:
        return CurveFit(NOT_IDENTIFIED, "no gain: A - R0 within two standard errors of zero", **out)
    at_bound = [
        name
        for name, value, (low, high) in (("A", A, (A_MIN, A_MAX)), ("B", B, (B_MIN, B_MAX)))
        if not low + 1e-6 * (high - low) < value < high - 1e-6 * (high - low)
    ]
    if at_bound:
        return CurveFit(NOT_IDENTIFIED, f"{' and '.join(at_bound)} at the bound of the fit", **out)
    if C_mid >= C.max():
        return CurveFit(
            NOT_IDENTIFIED, "no saturation within the run: C_mid beyond the largest compute", **out
        )
    if C_mid <= C.min():
        return CurveFit(
            NOT_IDENTIFIED,
            "half of the gain before the first point: C_mid below its compute",
            **out,
        )
    return CurveFit(FIT, "", **out)


# -- one run ------------------------------------------------------------------------------------
AXES = ("generated_tokens", "completions")  # the compute a curve is fitted against


def compute_at_steps(steps: pd.DataFrame, group_size: int, at: list[int]) -> pd.DataFrame:
    """Cumulative training compute at each optimizer step of ``at`` (the policy after that many
    updates): the tokens generated (every completion token, eos included, from the run's
    diagnostics) and the completions generated, summed over the generations the run had trained
    on by then, those at optimizer steps 0 .. at − 1 (a diagnostics row's ``step`` is the 0-based
    optimizer step at which its batch was generated)."""
    steps = steps.sort_values("step")
    tokens = steps["generated_tokens"].cumsum().to_numpy()
    completions = (steps["groups"] * group_size).cumsum().to_numpy()
    idx = np.searchsorted(steps["step"].to_numpy(), np.asarray(at), side="left") - 1
    if np.any(idx < 0):
        raise ValueError(f"curve steps {at} start before the run's first generation step")
    return pd.DataFrame(
        {"step": at, "generated_tokens": tokens[idx], "completions": completions[idx]}
    )


def run_efficiency(
    curve: list[dict[str, Any]], steps: pd.DataFrame, group_size: int, R0: float
) -> dict[str, Any]:
    """One run's efficiency summary: the ScaleRL fit against generated tokens (A, B, C_mid, and
    log10 C_mid, the scale on which cells are compared), C_mid against completions, and two
    fit-free summaries defined for every run: the area under the curve over completions from the
    base policy (0, R0) on, and the late accuracy (``late_accuracy`` of the curve's points).
    Parameters of a fit that is not identified or failed are NaN; its status and reason say why."""
    points = sorted(curve, key=lambda p: p["step"])
    at = compute_at_steps(steps, group_size, [int(p["step"]) for p in points])
    R = np.array([float(p["accuracy"]) for p in points])
    fits = {axis: fit_scalerl(at[axis].to_numpy(), R, R0) for axis in AXES}
    tokens = fits["generated_tokens"]
    ok = tokens.status == FIT
    completions = np.concatenate([[0.0], at["completions"].to_numpy(dtype=float)])
    return {
        "efficiency_status": tokens.status,
        "efficiency_reason": tokens.reason,
        "efficiency_identified": float(ok),
        "efficiency_A": tokens.A if ok else math.nan,
        "efficiency_B": tokens.B if ok else math.nan,
        "efficiency_C_mid": tokens.C_mid if ok else math.nan,
        "efficiency_log10_C_mid": math.log10(tokens.C_mid) if ok else math.nan,
        "efficiency_C_mid_completions": (
            fits["completions"].C_mid if fits["completions"].status == FIT else math.nan
        ),
        "efficiency_auc": area_under_curve(completions, np.concatenate([[R0], R])),
        "efficiency_late": late_accuracy([int(p["step"]) for p in points], R),
        "efficiency_points": len(points),
    }


# -- per cell: the table and its reading ----------------------------------------------------------
# The efficiency contrasts of a cell with its reference (results-table quantities, paired), and
# what the reading calls them.
CONTRASTS = {
    "efficiency_late": "late accuracy",
    "efficiency_auc": "AUC",
    "efficiency_A": "A",
    "efficiency_log10_C_mid": "log10 C_mid",
}
# The contrasts that need a fit (defined for identified fits only); the AUC and the late accuracy
# need none.
# (outcome-dependent: ``design.quantities.OUTCOME_DEPENDENT``, which no declared hypothesis may use).
FIT_PARAMETERS = OUTCOME_DEPENDENT


def efficiency_table(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (stage, cell) from the results table (``result_tables.results_table``) and its runs
    (``loading.load_runs``): how many fits are identified and why the others are not, the fitted
    parameters (mean [95% t interval] over the identified runs), the area under the curve, the
    late accuracy, and the paired differences to the cell's reference."""
    rows = []
    for _, r in table.iterrows():
        if not r.get("reference"):  # the base policy's row
            continue
        mine = runs[(runs["stage"] == r["stage"]) & (runs["cell"] == r["cell"])]
        why = mine.loc[mine["efficiency_status"] != FIT, "efficiency_reason"].value_counts()
        row: dict[str, Any] = {
            "stage": r["stage"],
            "cell": r["cell"],
            "reference": r["reference"],
            "is_reference": bool(r["is_reference"]),
            "runs": len(mine),
            "identified": int((mine["efficiency_status"] == FIT).sum()),
            "not_identified": "; ".join(f"{reason} ({n})" for reason, n in why.items()),
        }
        for q in (
            "efficiency_A",
            "efficiency_B",
            "efficiency_C_mid",
            "efficiency_auc",
            "efficiency_late",
        ):
            for part in ("mean", "low", "high", "n"):
                row[f"{q}_{part}"] = r.get(f"{q}_{part}", math.nan)
        for q in CONTRASTS:
            for part in ("mean", "low", "high", "n"):
                row[f"{q}_diff_{part}"] = r.get(f"{q}_diff_{part}", math.nan)
        rows.append(row)
    return pd.DataFrame(rows)
