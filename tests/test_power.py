"""The design's power (design/power.py): hand-worked numbers, the normal limit, simulation, and
the arithmetic of the review that asked for it (six draws of the 2026-12-01 default)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from grpo_ablation.design import power


def test_at_the_boundary_the_one_sided_test_rejects_with_probability_alpha():
    assert power.one_sided_power(0.0, 0.036, 6, 0.05) == pytest.approx(0.05)
    assert power.one_sided_power(0.0, 1.0, 40, 0.003125) == pytest.approx(0.003125)


def test_with_many_units_the_mde_is_the_normal_formula():
    # n = 10,000, σ = 1, a = 0.025: (z_0.975 + z_0.8)·σ/√n = (1.95996 + 0.84162)/100 = 0.0280158
    assert power.minimum_detectable_effect(1.0, 10_000, 0.025) == pytest.approx(0.0280158, abs=2e-5)
    # and the units an effect of 0.1σ needs: ((1.95996 + 0.84162)/0.1)² = 784.9, plus t's few
    n = power.units_needed(lambda k: power.one_sided_power(0.1, 1.0, k, 0.025))
    assert 785 <= n <= 790
    assert (
        power.one_sided_power(0.1, 1.0, n - 1, 0.025)
        < 0.8
        <= power.one_sided_power(0.1, 1.0, n, 0.025)
    )


def test_tost_power_is_exact_against_simulation():
    rng = np.random.default_rng(0)
    for n, sd, true, margin in ((6, 0.036, 0.01, 0.05), (40, 0.036, 0.005, 0.02)):
        x = rng.normal(true, sd, (200_000, n))
        mean, half = x.mean(1), sps.t.ppf(0.95, n - 1) * x.std(1, ddof=1) / math.sqrt(n)
        simulated = float(((mean - half > -margin) & (mean + half < margin)).mean())
        assert power.tost_power(true, margin, sd, n, 0.05) == pytest.approx(simulated, abs=0.004)
    # An empty margin is never shown; a margin beyond any interval always is.
    assert power.tost_power(0.0, 0.0, 0.036, 6, 0.05) == 0.0
    assert power.tost_power(0.0, 10.0, 0.036, 6, 0.05) == pytest.approx(1.0)


def test_the_smallest_margin_is_the_one_shown_with_the_target_power():
    m = power.smallest_margin(0.036, 6, 0.05)
    assert power.tost_power(0.0, m, 0.036, 6, 0.05) == pytest.approx(0.8, abs=1e-6)
    assert m > 0.02  # six draws cannot show the default's ±0.02 (the review's point)


def test_the_review_arithmetic_of_six_draws():
    """The numbers the review of the 2026-12-01 default computed, per-draw SDs backed out of its
    published intervals (greedy 0.036, sampled 0.022-0.035, incorrect length 0.24 tokens)."""
    # the 90% half-width at six draws: t_0.95,5 · 0.036/√6 ≈ 0.030, even at a mean of exactly 0
    assert sps.t.ppf(0.95, 5) * 0.036 / math.sqrt(6) == pytest.approx(0.0296, abs=1e-4)
    # TOST at ±0.02, α = 0.05, a true Δ of 0: power ≈ 4%; about 30 draws give 80%
    assert power.tost_power(0.0, 0.02, 0.036, 6, 0.05) == pytest.approx(0.041, abs=0.002)
    assert power.units_needed(lambda k: power.tost_power(0.0, 0.02, 0.036, k, 0.05)) == 30
    # directional, δ = 0.01, Holm over four (first step 0.0125): detects 0.048-0.072
    assert 0.01 + power.minimum_detectable_effect(0.022, 6, 0.0125) == pytest.approx(
        0.0475, abs=5e-4
    )
    assert 0.01 + power.minimum_detectable_effect(0.036, 6, 0.0125) == pytest.approx(
        0.0714, abs=5e-4
    )
    # constant_shortens_incorrect: 0.1 tokens, a true 0.2: 7.5% power, about 56 draws for 80%
    assert power.one_sided_power(0.1, 0.24, 6, 0.0125) == pytest.approx(0.074, abs=0.002)
    assert power.units_needed(lambda k: power.one_sided_power(0.1, 0.24, k, 0.0125)) == 58


def test_no_number_of_units_detects_an_effect_on_its_boundary():
    assert power.units_needed(lambda k: power.one_sided_power(0.0, 1.0, k, 0.05)) is None


def test_the_upper_bound_of_an_sd_on_few_degrees_of_freedom():
    # √(df / χ²_{0.025, df}): at 2 df χ² = 0.0506, so σ may be 6.28 times s
    assert power.sd_upper_factor(2) == pytest.approx(math.sqrt(2 / sps.chi2.ppf(0.025, 2)))
    assert power.sd_upper_factor(2) == pytest.approx(6.285, abs=1e-3)
    assert power.sd_upper_factor(1000) == pytest.approx(1.046, abs=1e-3)


def test_a_planning_sd_pools_earlier_runs_by_their_degrees_of_freedom():
    """√((1·3² + 3·1²) / 4) = √3 on 4 df; a run left unnamed is refused."""
    from grpo_ablation.design.axes import DesignError
    from grpo_ablation.design.hypotheses import planning_sd

    assert power.pooled_sd([(3.0, 1), (1.0, 3)]) == (pytest.approx(math.sqrt(3)), 4)
    runs = [{"sd": 3.0, "df": 1, "run": "a"}, {"sd": 1.0, "df": 3, "run": "b"}]
    assert planning_sd(runs, "greedy_final") == (pytest.approx(math.sqrt(3)), 4.0)
    sd, df = planning_sd(0.03, "greedy_final")
    assert sd == 0.03 and math.isnan(df)
    with pytest.raises(DesignError, match=r"power\.sd\.greedy_final: each earlier run needs"):
        planning_sd([{"sd": 1.0, "df": 2}], "greedy_final")
