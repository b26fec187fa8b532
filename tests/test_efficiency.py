"""The ScaleRL compute-efficiency fit on synthetic curves with known parameters: recovered
exactly without noise, within its standard errors with noise, and reported as not identified
when the run never saturates."""

import math

import numpy as np
import pandas as pd
import pytest

from grpo_ablation.analysis.efficiency import (
    FAILED,
    FIT,
    FIT_PARAMETERS,
    NOT_IDENTIFIED,
    OUTCOME_DEPENDENT,
    area_under_curve,
    compute_at_steps,
    fit_scalerl,
    late_accuracy,
    run_efficiency,
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


def test_a_curve_that_is_up_before_its_first_point_is_not_identified():
    early = scalerl_curve(C, R0, A, B, 10.0)  # C_mid below the first point (100)
    fit = fit_scalerl(C, early, R0)
    assert fit.status == NOT_IDENTIFIED  # no steepness before the first point


def test_a_runs_compute_is_summed_up_to_each_curve_step():
    steps = pd.DataFrame(
        {"step": [0, 1, 2, 3], "groups": [2, 2, 2, 2], "generated_tokens": [10, 20, 30, 40]}
    )
    at = compute_at_steps(steps, group_size=4, at=[1, 3, 4])
    assert at["generated_tokens"].tolist() == [10, 60, 100]
    assert at["completions"].tolist() == [8, 24, 32]


def test_a_runs_summary_fits_its_curve_and_keeps_the_area_fit_free():
    steps = pd.DataFrame({"step": range(200), "groups": 4, "generated_tokens": [100] * 200})
    at = [5, 8, 14, 24, 41, 70, 118, 200]
    tokens = np.array(at) * 100.0
    truth = dict(R0=0.5, A=0.8, B=1.2, C_mid=3_000.0)
    curve = [
        {"step": s, "accuracy": float(scalerl_curve(c, **truth))}
        for s, c in zip(at, tokens, strict=True)
    ]
    out = run_efficiency(curve, steps, group_size=8, R0=0.5)
    assert out["efficiency_status"] == FIT and out["efficiency_identified"] == 1.0
    assert out["efficiency_A"] == pytest.approx(0.8, rel=1e-3)
    assert out["efficiency_log10_C_mid"] == pytest.approx(math.log10(3_000), rel=1e-3)
    # 32 completions a step: C_mid in completions is C_mid in tokens / 100 * 32
    assert out["efficiency_C_mid_completions"] == pytest.approx(3_000 / 100 * 32, rel=1e-3)
    flat = [{"step": s, "accuracy": 0.5} for s in at]
    none = run_efficiency(flat, steps, group_size=8, R0=0.5)
    assert none["efficiency_status"] != FIT and math.isnan(none["efficiency_A"])
    assert none["efficiency_auc"] == pytest.approx(0.5)


def _results_and_runs():
    """A results table of one stage (reference and one cell) over three seeds, and its runs:
    the cell's fits identified on seeds 0-2, the reference's on 0-1 (seed 2: no saturation)."""
    from grpo_ablation.analysis import result_tables
    from grpo_ablation.design import quantities

    runs = []
    for cell, shift in (("ref", 0.0), ("other", 0.05)):
        for seed in range(3):
            ok = cell == "other" or seed < 2
            runs.append(
                {
                    "stage": "s",
                    "cell": cell,
                    "reference": "ref",
                    "seed": seed,
                    "efficiency_status": FIT if ok else NOT_IDENTIFIED,
                    "efficiency_reason": "" if ok else "no saturation within the run",
                    "efficiency_identified": float(ok),
                    "efficiency_A": 0.7 + shift + 0.01 * seed if ok else math.nan,
                    "efficiency_B": 1.0 if ok else math.nan,
                    "efficiency_C_mid": 1000.0 if ok else math.nan,
                    "efficiency_log10_C_mid": 3.0 + 0.01 * seed if ok else math.nan,
                    "efficiency_auc": 0.6 + shift + 0.001 * seed,
                    "efficiency_late": 0.65 + shift + (0.01 * seed if cell == "other" else 0.0),
                }
            )
    runs = pd.DataFrame(runs)
    for q in quantities.PAIRED:
        if q not in runs:
            runs[q] = 0.5
    return result_tables.results_table(runs, {"greedy": 0.5, "sampled": 0.5}), runs


def test_the_efficiency_table_counts_fits_and_pairs_identified_ones_only():
    from grpo_ablation.analysis.efficiency import efficiency_table
    from grpo_ablation.analysis.prose.efficiency import efficiency_reading

    table = efficiency_table(*_results_and_runs())
    other = table.set_index("cell").loc["other"]
    ref = table.set_index("cell").loc["ref"]
    assert (ref["identified"], ref["runs"]) == (2, 3)
    assert ref["not_identified"] == "no saturation within the run (1)"
    assert other["efficiency_A_diff_n"] == 2  # seed 2 has no reference fit
    assert other["efficiency_A_diff_mean"] == pytest.approx(0.05)
    assert other["efficiency_auc_diff_n"] == 3  # fit-free: every seed
    assert other["efficiency_late_diff_n"] == 3  # defined for every run
    assert other["efficiency_late_diff_mean"] == pytest.approx(0.06)
    text = efficiency_reading(table)
    assert "5 of 6 runs have an identified fit" in text
    assert "no saturation within the run: 1" in text
    # late accuracy: differences 0.05, 0.06, 0.07 -> 0.06 ± t(2) 4.303 * 0.01 / sqrt(3) = 0.0248
    assert "late accuracy +0.060 [+0.035, +0.085] (3 pairs, excludes zero)" in text
    # Only the late accuracy is counted against chance; A and log10 C_mid describe (A: +0.05 on
    # both pairs, a zero-width interval, which would not count as excluding zero anyway).
    assert (
        "Of these 1 distinct exploratory late-accuracy intervals 1 exclude zero, 0.05 expected by chance"
        in text
    )
    assert "A +0.050 [+0.050, +0.050] (2 pairs)," in text
    assert "depends on the outcome" in text


def test_the_late_accuracy_is_the_mean_over_the_late_window_the_last_quarter_of_steps():
    # steps 2, 5, 11, 23, 48, 83, 92, 100 (the default's curve and late points): the window
    # (75, 100] holds 83, 92, 100, so (0.7 + 0.8 + 0.9) / 3 = 0.8; step 48 is left out.
    steps = [2, 5, 11, 23, 48, 83, 92, 100]
    R = [0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.8, 0.9]
    assert late_accuracy(steps, R) == pytest.approx(0.8)
    # the final step alone where no point lies in the window but the last (75 is not in it)
    assert late_accuracy([25, 50, 75, 100], [0.5, 0.6, 0.7, 0.8]) == pytest.approx(0.8)
    assert late_accuracy([4], [0.4]) == pytest.approx(0.4)
    assert math.isnan(late_accuracy([], []))
    # in a run's summary, whatever the order of the points, fit or no fit: window (37.5, 50]
    diag = pd.DataFrame({"step": range(50), "groups": 4, "generated_tokens": [100] * 50})
    curve = [
        {"step": s, "accuracy": a}
        for s, a in zip([50, 10, 40, 20, 30], [0.9, 0.5, 0.8, 0.6, 0.7], strict=True)
    ]
    out = run_efficiency(curve, diag, group_size=8, R0=0.5)
    assert out["efficiency_late"] == pytest.approx(0.85)
    flat = run_efficiency([{**p, "accuracy": 0.5} for p in curve], diag, group_size=8, R0=0.5)
    assert flat["efficiency_status"] != FIT and flat["efficiency_late"] == pytest.approx(0.5)


def test_the_late_window_holds_evenly_spaced_points_fixed_by_the_config():
    from grpo_ablation.design.options import TrainingConfig, late_steps

    assert late_steps(100, 3) == [83, 92, 100]  # 100 − 25·k/3, rounded
    assert late_steps(200, 4) == [163, 175, 188, 200]
    assert late_steps(4, 3) == [4]  # 3 is not in (3, 4]; the duplicates of 4 merge
    assert late_steps(100, 0) == []
    cfg = TrainingConfig(max_steps=100, curve_points=6, late_points=3)
    assert cfg.curve_steps == [2, 5, 11, 23, 48, 83, 92, 100]


def test_the_fit_parameters_are_the_outcome_dependent_quantities():
    from grpo_ablation.design import quantities

    assert OUTCOME_DEPENDENT == FIT_PARAMETERS == ("efficiency_A", "efficiency_log10_C_mid")
    assert "efficiency_late" in quantities.PAIRED and "efficiency_late" in quantities.RUN_QUANTITIES
    assert (
        "efficiency_late" not in OUTCOME_DEPENDENT and "efficiency_late" not in quantities.EFFECTS
    )


def test_an_asymptote_beyond_the_metrics_range_ends_on_its_bound():
    from grpo_ablation.analysis.efficiency import A_MAX

    # A true asymptote of 1.4 with accuracies up to exactly 1.0 (at C = 6000, twice C_mid): the
    # fit of the old box [-1, 2] gave back 1.4; A is bounded to the metric's range [0, 1] now.
    C_ = np.geomspace(100, 6_000, 20)
    R = scalerl_curve(C_, 0.2, 1.4, 1.0, 3_000.0)
    assert R.max() == pytest.approx(1.0)
    fit = fit_scalerl(C_, R, 0.2)
    assert A_MAX == 1.0
    assert fit.A <= A_MAX
    assert abs(fit.A - A_MAX) < 1e-4
    assert fit.status == NOT_IDENTIFIED and "A at the bound" in fit.reason


def test_a_fit_that_ends_on_the_bound_of_its_steepness_is_not_identified():
    from grpo_ablation.analysis.efficiency import B_MAX

    step = scalerl_curve(C, R0, A, 200.0, C_MID)  # a jump: B far beyond the fit's box
    fit = fit_scalerl(C, step, R0)
    assert abs(fit.B - B_MAX) < 0.02
    assert fit.status == NOT_IDENTIFIED and "B at the bound" in fit.reason
