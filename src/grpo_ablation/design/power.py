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
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import integrate
from scipy import stats as _stats

TARGET_POWER = 0.8
MAX_UNITS = 100_000


def one_sided_power(effect: float, sd: float, n: int, alpha: float) -> float:
    """Power of the one-sided paired t test at level ``alpha`` when the true mean lies ``effect``
    beyond the tested boundary (n units, per-unit SD ``sd``); NaN below two units."""
    if n < 2 or not sd > 0:
        return math.nan
    df = n - 1
    critical = float(_stats.t.ppf(1 - alpha, df))
    return float(_stats.nct.sf(critical, df, effect * math.sqrt(n) / sd))


def tost_power(true_diff: float, margin: float, sd: float, n: int, alpha: float) -> float:
    """Exact power of TOST at level ``alpha`` (each one-sided test) within ±``margin`` when the
    true difference is ``true_diff``: the probability that the (1 − 2α) interval lies inside."""
    if n < 2 or not sd > 0:
        return math.nan
    if not margin > 0:
        return 0.0  # no interval lies inside an empty margin
    df = n - 1
    critical = float(_stats.t.ppf(1 - alpha, df))
    se = sd / math.sqrt(n)
    # The sample SD is σ·√(χ²_df / df); d̄ ~ N(Δ, se²) independently.
    chi = _stats.chi(df)

    def inside(w: float) -> float:
        half = critical * se * w / math.sqrt(df)  # t · s/√n at s = σ·w/√df
        if half >= margin:
            return 0.0
        hi = _stats.norm.cdf((margin - half - true_diff) / se)
        lo = _stats.norm.cdf((-margin + half - true_diff) / se)
        return max(0.0, hi - lo) * chi.pdf(w)

    # s/√n reaches the margin at w = margin·√df / (t·se): nothing beyond can be inside; the
    # chi density is negligible outside its 1e-12 quantiles (it narrows as df grows).
    low = float(chi.ppf(1e-12))
    top = min(margin * math.sqrt(df) / (critical * se), float(chi.isf(1e-12)))
    if top <= low:
        return 0.0
    value, _ = integrate.quad(inside, low, top, limit=200, points=[min(top, math.sqrt(df))])
    return float(min(1.0, max(0.0, value)))


def sd_upper_factor(df: int, confidence: float = 0.95) -> float:
    """σ ≤ s · factor at the upper end of the two-sided ``confidence`` interval of an SD estimated
    on ``df`` degrees of freedom: √(df / χ²_{(1 − confidence)/2, df}) (6.28 at 2 df)."""
    if df < 1:
        return math.nan
    return math.sqrt(df / float(_stats.chi2.ppf((1 - confidence) / 2, df)))


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


def _solve(f: Callable[[float], float], scale: float) -> float:
    """The root of an increasing ``f`` on (0, ∞), bracketed by doubling from ``scale``."""
    from scipy.optimize import brentq

    high = scale
    while f(high) < 0:
        high *= 2
        if high > 1e6 * scale:
            return math.inf
    return float(brentq(f, 0.0, high, xtol=1e-10 * scale))
