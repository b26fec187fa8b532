"""Uncertainty across seeds: a Student-t interval over seeds, an undefined one for a single seed,
and paired differences matched by seed."""

import math

import pytest

from grpo_ablation.analysis import stats
from grpo_ablation.analysis.stats import (
    Interval,
    format_interval,
    paired_differences,
    paired_interval,
    t_interval,
)


def test_t_interval_of_three_seeds_uses_t_with_two_degrees_of_freedom():
    iv = t_interval([1.0, 2.0, 3.0])  # mean 2, sd 1, t_{0.975, 2} = 4.302653
    assert iv.mean == 2.0 and iv.n == 3 and iv.defined
    assert iv.half_width == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert (iv.low, iv.high) == pytest.approx((2 - 2.484138, 2 + 2.484138), rel=1e-6)


def test_one_seed_gives_an_undefined_interval_not_a_zero_width_one():
    iv = t_interval([0.4])
    assert iv.mean == 0.4 and iv.n == 1 and not iv.defined
    assert math.isnan(iv.low) and math.isnan(iv.high)
    assert format_interval(iv) == "0.400 (n=1: interval undefined)"


def test_missing_values_are_dropped_not_imputed():
    assert t_interval([1.0, float("nan"), None, 3.0]).n == 2
    assert t_interval([]).n == 0 and format_interval(t_interval([])) == "n/a"


def test_paired_differences_match_seeds_and_ignore_unpaired_ones():
    cell = {0: 0.5, 1: 0.7, 2: 0.9}
    ref = {0: 0.4, 1: 0.4, 3: 0.0}
    assert paired_differences(cell, ref) == pytest.approx({0: 0.1, 1: 0.3})
    iv = paired_interval(cell, ref)
    assert iv.n == 2 and iv.mean == pytest.approx(0.2)


def test_pairing_removes_the_shared_seed_effect():
    # Each seed shifts both cells by the same amount: each cell's own interval is wide and the two
    # overlap, while the paired difference excludes zero.
    ref = {0: 0.1, 1: 0.5, 2: 0.9}
    cell = {s: v + 0.05 for s, v in ref.items()}
    cell[1] += 0.01
    a, b = t_interval(cell.values()), t_interval(ref.values())
    assert a.low < b.high and b.low < a.high
    iv = paired_interval(cell, ref)
    assert iv.excludes_zero() and iv.low > 0


def test_formatting_always_shows_the_interval_and_signs_differences():
    assert format_interval(Interval(0.25, 0.1, 0.4, 3)) == "0.250 [0.100, 0.400]"
    assert format_interval(Interval(-0.05, -0.1, 0.0, 3), signed=True) == "-0.050 [-0.100, +0.000]"


def binomial_counts(G: int, p: float) -> dict[int, float]:
    """Expected groups by number correct, per group, when every prompt succeeds with p."""
    return {k: math.comb(G, k) * p**k * (1 - p) ** (G - k) for k in range(G + 1)}


def test_the_mixed_fraction_at_another_group_size_reproduces_the_worked_numbers():
    # P(mixed) = 1 − p^G − (1 − p)^G: 0.5888 at p = 0.2, G = 4; 0.832225 at G = 8
    counts = binomial_counts(8, 0.2)
    assert stats.mixed_fraction_at(counts, 8, 4) == pytest.approx(0.5888, abs=1e-12)
    assert stats.mixed_fraction_at(counts, 8, 8) == pytest.approx(0.832225, abs=5e-7)  # 0.83222528
    with pytest.raises(ValueError, match="no unbiased estimate from groups of 8"):
        stats.mixed_fraction_at(counts, 8, 16)


def test_the_mixed_fraction_at_the_same_group_size_is_the_observed_one():
    counts = {0: 7, 1: 3, 4: 5, 8: 2}
    assert stats.mixed_fraction_at(counts, 8, 8) == pytest.approx(8 / 17)


def test_a_smaller_group_size_is_predicted_without_a_model_whatever_the_spread_of_p():
    # groups whose p is Beta(0.7, 0.5) (k beta-binomial): E[1 − p^4 − (1 − p)^4], exactly
    a, b, G = 0.7, 0.5, 8
    lg = math.lgamma
    pmf = {
        k: math.comb(G, k)
        * math.exp(lg(k + a) + lg(G - k + b) - lg(G + a + b) - lg(a) - lg(b) + lg(a + b))
        for k in range(G + 1)
    }

    def moment(x: float, y: float, n: int) -> float:  # E[p^n], p ~ Beta(x, y)
        return math.exp(lg(x + n) + lg(x + y) - lg(x) - lg(x + y + n))

    assert stats.mixed_fraction_at(pmf, G, 4) == pytest.approx(
        1 - moment(a, b, 4) - moment(b, a, 4), rel=1e-9
    )
    # heterogeneity lowers the mixed fraction below the one-p prediction at the same mean
    mean = a / (a + b)
    assert stats.mixed_fraction_at(pmf, G, 4) < 1 - mean**4 - (1 - mean) ** 4


def test_holm_steps_down_and_leaves_nan_out_of_the_family():
    # sorted 0.01, 0.03, 0.04 of m = 3: 3 x 0.01, then max(0.03, 2 x 0.03), then max(0.06, 0.04)
    assert stats.holm([0.01, 0.04, 0.03, math.nan])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(stats.holm([0.01, 0.04, 0.03, math.nan])[3])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1


def test_the_hand_written_tests_are_scipys():
    """Wilson, the one-sided t test and TOST agree with scipy's to the last digits a table
    shows (they are kept for their NaN rules and the bits the written tables hold)."""
    from scipy import stats as sp

    for n in range(1, 40):
        for k in range(n + 1):
            ci = sp.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
            assert stats.wilson(k, n) == pytest.approx((ci.low, ci.high), abs=1e-15)
    xs = [0.12, -0.03, 0.08, 0.21, 0.05, -0.01]
    for threshold, direction in [(0.0, +1), (0.1, -1), (-0.05, +1)]:
        alternative = "greater" if direction > 0 else "less"
        expected = sp.ttest_1samp(xs, threshold, alternative=alternative).pvalue
        assert stats.one_sided_p(xs, threshold, direction) == pytest.approx(expected, abs=1e-12)
    tost = max(
        sp.ttest_1samp(xs, -0.2, alternative="greater").pvalue,
        sp.ttest_1samp(xs, 0.2, alternative="less").pvalue,
    )
    assert stats.tost_p(xs, 0.2) == pytest.approx(tost, abs=1e-12)
