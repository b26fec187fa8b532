"""What a design can detect: the power of the paired tests the verdicts use. Pure functions.

A declared hypothesis is judged on n units (base-policy draws, or seeds under one base policy)
by a paired t test of the per-unit differences d_i ~ N(Δ, σ²) at a one-sided level a:

- directional, boundary δ: the test of H0: s·Δ ≤ δ rejects with probability
  P(T' > t_{1−a, n−1}), T' noncentral t with n − 1 degrees of freedom and noncentrality
  (s·Δ − δ)·√n / σ. The *minimum detectable effect* is the true s·Δ it detects with the target
  power (80%).
- equivalence, margin m: TOST rejects when both one-sided tests do, i.e. when
  −m + t·s/√n < d̄ < m − t·s/√n. Its power is computed exactly, integrating over the sample SD
  (both tests share it, which the usual sum-of-two-noncentral-t approximation ignores). The
  *smallest margin it shows* is the m that TOST shows with the target power when Δ is as expected.

The family's level: every verdict is one of two one-sided tests per hypothesis (support and
refute), all of them in one Holm family at α, so each test is first compared with α / (2·m) for m
hypotheses. Power at that level is a bound: Holm rejects whatever Bonferroni rejects.

The distributions are scipy's (``scipy.stats``: t, noncentral t, χ²; ``scipy.integrate.quad``
for TOST, which reduces to one integral over the sample SD: s = σ·W/√df with W ~ χ_df, and
d̄ ~ N(Δ, σ²/n) independent of it; ``scipy.optimize.brentq`` for the roots), imported where used.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

TARGET_POWER = 0.8
MAX_UNITS = 100_000


def one_sided_power(effect: float, sd: float, n: int, alpha: float) -> float:
    """Power of the one-sided paired t test at level ``alpha`` when the true mean lies ``effect``
    beyond the tested boundary (n units, per-unit SD ``sd``): P(T' > t_{1−α, n−1}), T' noncentral
    t with noncentrality effect·√n/σ; NaN below two units."""
    if n < 2 or not sd > 0:
        return math.nan
    from scipy import stats

    df = n - 1
    return float(stats.nct.sf(t_quantile(1 - alpha, df), df, effect * math.sqrt(n) / sd))


def tost_power(true_diff: float, margin: float, sd: float, n: int, alpha: float) -> float:
    """Exact power of TOST at level ``alpha`` (each one-sided test) within ±``margin`` when the
    true difference is ``true_diff``: the probability that the (1 − 2α) interval lies inside."""
    if n < 2 or not sd > 0:
        return math.nan
    if not margin > 0:
        return 0.0  # no interval lies inside an empty margin
    from scipy import integrate, stats

    df = n - 1
    critical = t_quantile(1 - alpha, df)
    se = sd / math.sqrt(n)
    chi = stats.chi(df)

    def inside(w: float) -> float:
        half = critical * se * w / math.sqrt(df)  # t · s/√n at s = σ·w/√df
        hi = stats.norm.cdf((margin - half - true_diff) / se)
        lo = stats.norm.cdf((-margin + half - true_diff) / se)
        return max(0.0, hi - lo) * chi.pdf(w)

    # s/√n reaches the margin at w = margin·√df / (t·se): nothing beyond can be inside.
    top = min(margin * math.sqrt(df) / (critical * se), chi.isf(1e-15))
    if top <= 0:
        return 0.0
    value, _ = integrate.quad(inside, 0.0, top, epsabs=1e-12, epsrel=1e-10, limit=200)
    return min(1.0, max(0.0, value))


def pooled_sd(entries: list[tuple[float, int]]) -> tuple[float, int]:
    """(SD, df) pooled over independent estimates (sd_i, df_i) of one SD:
    √(Σ df_i · sd_i² / Σ df_i) on Σ df_i degrees of freedom (NaN, 0 for none)."""
    df = sum(d for _, d in entries)
    if df <= 0:
        return math.nan, 0
    return math.sqrt(sum(d * s * s for s, d in entries) / df), df


def sd_upper_factor(df: int, confidence: float = 0.95) -> float:
    """σ ≤ s · factor at the upper end of the two-sided ``confidence`` interval of an SD estimated
    on ``df`` degrees of freedom: √(df / χ²_{(1 − confidence)/2, df}) (6.28 at 2 df)."""
    if df < 1:
        return math.nan
    from scipy import stats

    return math.sqrt(df / stats.chi2.ppf((1 - confidence) / 2, df))


def minimum_detectable_effect(
    sd: float, n: int, alpha: float, power: float = TARGET_POWER
) -> float:
    """The true distance beyond the boundary that the one-sided test detects with ``power``."""
    if n < 2 or not sd > 0:
        return math.nan
    return _solve(lambda e: one_sided_power(e, sd, n, alpha) - power, sd)


def smallest_margin(
    sd: float, n: int, alpha: float, true_diff: float = 0.0, power: float = TARGET_POWER
) -> float:
    """The smallest margin TOST shows with ``power`` when the true difference is ``true_diff``."""
    if n < 2 or not sd > 0:
        return math.nan
    return abs(true_diff) + _solve(
        lambda e: tost_power(true_diff, abs(true_diff) + e, sd, n, alpha) - power, sd
    )


def units_needed(power_at: Callable[[int], float], target: float = TARGET_POWER) -> int | None:
    """The fewest units (≥ 2) whose power reaches ``target`` (power grows with n), or None when
    even MAX_UNITS do not (an effect at the boundary itself, or none at all)."""
    if not power_at(MAX_UNITS) >= target:
        return None
    low, high = 2, 2
    while not power_at(high) >= target:
        low, high = high, high * 2
    while low < high:  # the first n in [low, high] that reaches the target
        mid = (low + high) // 2
        if power_at(mid) >= target:
            high = mid
        else:
            low = mid + 1
    return high


# -- distributions -----------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom."""
    from scipy import stats

    return float(stats.t.ppf(p, df))


def _solve(f: Callable[[float], float], scale: float) -> float:
    """The root of an increasing ``f`` on (0, ∞), bracketed by doubling from ``scale``."""
    from scipy import optimize

    high = scale
    while f(high) < 0:
        high *= 2
        if high > 1e6 * scale:
            return math.inf
    if f(0.0) >= 0:
        return 0.0
    return float(optimize.brentq(f, 0.0, high, xtol=1e-14 * max(1.0, high), rtol=1e-13))


def _sd_quantiles(sd: float, df: float, points: int) -> list[float]:
    """``points`` equally likely values of the true SD given ``sd`` estimated on ``df`` degrees
    of freedom: σ = s·√(df / X), X ~ χ²_df at the midpoints of equal probability bins."""
    from scipy import stats

    xs = stats.chi2.ppf([(i + 0.5) / points for i in range(points)], df)
    return [sd * math.sqrt(df / x) for x in xs]


def expected_power(
    power_at_sd: Callable[[float], float], sd: float, df: float, points: int = 64
) -> float:
    """The power averaged over what the true SD may be, given ``sd`` estimated on ``df`` degrees
    of freedom (the SD's own sampling distribution turned round: ``_sd_quantiles``). NaN where
    the df is unknown."""
    if not (df >= 1 and sd > 0):
        return math.nan
    return sum(power_at_sd(s) for s in _sd_quantiles(sd, df, points)) / points


def expected_one_sided_power(
    effect: float, sd: float, n: int, alpha: float, df: float, points: int = 256
) -> float:
    """``expected_power`` of ``one_sided_power``, by the noncentral t (scipy's, vectorised)."""
    if not (df >= 1 and sd > 0) or n < 2:
        return math.nan
    import numpy as np
    from scipy import stats

    sds = np.array(_sd_quantiles(sd, df, points))
    c = stats.t.isf(alpha, n - 1)
    return float(stats.nct.sf(c, n - 1, effect * math.sqrt(n) / sds).mean())
