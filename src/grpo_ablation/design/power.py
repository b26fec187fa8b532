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

Part of the design layer, so written with ``math`` alone (no scipy: the DAG warns about power
before any job, and building it imports no numerical library). Both distributions reduce to one
integral over the sample SD: s = σ·W/√df with W ~ χ_df, and d̄ ~ N(Δ, σ²/n) independent of it.
tests/test_power.py checks every function against scipy's.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

TARGET_POWER = 0.8
MAX_UNITS = 100_000
_TOL = 1e-11


def one_sided_power(effect: float, sd: float, n: int, alpha: float) -> float:
    """Power of the one-sided paired t test at level ``alpha`` when the true mean lies ``effect``
    beyond the tested boundary (n units, per-unit SD ``sd``); NaN below two units."""
    if n < 2 or not sd > 0:
        return math.nan
    df = n - 1
    critical = t_quantile(1 - alpha, df)
    shift = effect * math.sqrt(n) / sd  # the noncentrality
    # P(Z + shift > critical · W/√df): the mean's test statistic beyond the critical value.
    scale = critical / math.sqrt(df)
    low, high = _chi_range(df)
    kink = shift / scale if scale > 0 else math.nan
    value = _integrate(
        lambda w: _norm_cdf(shift - scale * w) * _chi_pdf(w, df), low, high, (kink,), 1 / scale
    )
    return min(1.0, max(0.0, value))


def tost_power(true_diff: float, margin: float, sd: float, n: int, alpha: float) -> float:
    """Exact power of TOST at level ``alpha`` (each one-sided test) within ±``margin`` when the
    true difference is ``true_diff``: the probability that the (1 − 2α) interval lies inside."""
    if n < 2 or not sd > 0:
        return math.nan
    if not margin > 0:
        return 0.0  # no interval lies inside an empty margin
    df = n - 1
    critical = t_quantile(1 - alpha, df)
    se = sd / math.sqrt(n)

    def inside(w: float) -> float:
        half = critical * se * w / math.sqrt(df)  # t · s/√n at s = σ·w/√df
        hi = _norm_cdf((margin - half - true_diff) / se)
        lo = _norm_cdf((-margin + half - true_diff) / se)
        return max(0.0, hi - lo) * _chi_pdf(w, df)

    # s/√n reaches the margin at w = margin·√df / (t·se): nothing beyond can be inside.
    low, high = _chi_range(df)
    top = min(margin * math.sqrt(df) / (critical * se), high)
    if top <= low:
        return 0.0
    value = _integrate(inside, low, top, (), math.sqrt(df) / critical)
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
    q = (1 - confidence) / 2
    chi2 = _bisect(lambda x: _chi2_cdf(x, df) - q, 0.0, _grow(lambda x: _chi2_cdf(x, df) >= q))
    return math.sqrt(df / chi2)


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
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (p > 1/2)."""
    return _bisect(lambda t: _t_cdf(t, df) - p, 0.0, _grow(lambda t: _t_cdf(t, df) >= p))


def _t_cdf(t: float, df: int) -> float:
    """P(T ≤ t), t ≥ 0: 1 − I_{df/(df+t²)}(df/2, 1/2) / 2."""
    return 1 - 0.5 * _beta_inc(df / 2, 0.5, df / (df + t * t))


def _norm_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def _chi_pdf(w: float, df: int) -> float:
    """The density of χ with ``df`` degrees of freedom (the scaled sample SD)."""
    if w <= 0:
        return math.sqrt(2 / math.pi) if df == 1 and w == 0 else 0.0
    log = (df - 1) * math.log(w) - w * w / 2 - (df / 2 - 1) * math.log(2) - math.lgamma(df / 2)
    return math.exp(log)


def _chi_range(df: int) -> tuple[float, float]:
    """Where χ_df has all but a negligible mass (its SD is below 0.71 for every df)."""
    mode = math.sqrt(df)
    return max(0.0, mode - 12.0), mode + 12.0


def _chi2_cdf(x: float, df: int) -> float:
    """P(χ²_df ≤ x): the regularised lower incomplete gamma P(df/2, x/2)."""
    return _gamma_inc(df / 2, x / 2)


def _gamma_inc(a: float, x: float) -> float:
    """Regularised lower incomplete gamma P(a, x): its series below a + 1, else its continued
    fraction (Numerical Recipes, gser and gcf)."""
    if x <= 0:
        return 0.0
    front = math.exp(a * math.log(x) - x - math.lgamma(a))
    if x < a + 1:
        term = total = 1 / a
        k = a
        while abs(term) > abs(total) * 1e-16:
            k += 1
            term *= x / k
            total += term
        return total * front
    # Q(a, x) = front / (x + 1 − a − 1·(1 − a)/(x + 3 − a − 2·(2 − a)/(x + 5 − a − ...)))
    fraction = _continued_fraction(x + 1 - a, lambda m: -m * (m - a), lambda m: x + 2 * m + 1 - a)
    return 1 - front / fraction


def _beta_inc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b), by its continued fraction on the side where it
    converges (Numerical Recipes, betacf)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - _beta_inc(b, a, 1 - x)
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )

    def numerator(m: int) -> float:  # d_m of the fraction 1/(1 + d_1/(1 + d_2/(1 + ...)))
        k = m // 2
        if m % 2:
            return -(a + k) * (a + b + k) * x / ((a + 2 * k) * (a + 2 * k + 1))
        return k * (b - k) * x / ((a + 2 * k - 1) * (a + 2 * k))

    return front / a / _continued_fraction(1.0, numerator, lambda m: 1.0)


def _continued_fraction(
    first: float, numerator: Callable[[int], float], denominator: Callable[[int], float]
) -> float:
    """b_0 + a_1/(b_1 + a_2/(b_2 + ...)) by the modified Lentz method (``first`` = b_0, then
    a_m = ``numerator(m)`` and b_m = ``denominator(m)``)."""
    tiny = 1e-300
    f = first if first != 0 else tiny
    c, d = f, 0.0
    for m in range(1, 10_000):
        a, b = numerator(m), denominator(m)
        d = b + a * d
        d = tiny if abs(d) < tiny else d
        c = b + a / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        f *= c * d
        if abs(c * d - 1) < 1e-16:
            break
    return f


# -- numerics ----------------------------------------------------------------------------------
def _integrate(
    f: Callable[[float], float], a: float, b: float, breaks: tuple[float, ...], width: float
) -> float:
    """∫_a^b f by adaptive Simpson, started on panels no wider than ``width`` (the scale of the
    integrand's steepest feature, put at ``breaks``) so that no feature falls between samples."""
    width = min(max(width, 1e-6), 1.0)
    cuts = sorted({a, b, *(x for x in breaks if a < x < b)})
    total = 0.0
    for lo, hi in itertools.pairwise(cuts):
        panels = max(1, min(4096, math.ceil((hi - lo) / width)))
        step = (hi - lo) / panels
        for i in range(panels):
            x0, x1 = lo + i * step, lo + (i + 1) * step
            f0, f1, fm = f(x0), f(x1), f((x0 + x1) / 2)
            total += _simpson(f, x0, x1, f0, fm, f1, _simpson_rule(x0, x1, f0, fm, f1), 40)
    return total


def _simpson_rule(a: float, b: float, fa: float, fm: float, fb: float) -> float:
    return (b - a) / 6 * (fa + 4 * fm + fb)


def _simpson(
    f: Callable[[float], float],
    a: float,
    b: float,
    fa: float,
    fm: float,
    fb: float,
    whole: float,
    depth: int,
) -> float:
    m = (a + b) / 2
    lm, rm = f((a + m) / 2), f((m + b) / 2)
    left, right = _simpson_rule(a, m, fa, lm, fm), _simpson_rule(m, b, fm, rm, fb)
    if depth <= 0 or abs(left + right - whole) <= 15 * _TOL:
        return left + right + (left + right - whole) / 15
    return _simpson(f, a, m, fa, lm, fm, left, depth - 1) + _simpson(
        f, m, b, fm, rm, fb, right, depth - 1
    )


def _grow(reached: Callable[[float], bool], start: float = 1.0) -> float:
    """An upper bracket: ``start`` doubled until ``reached``."""
    x = start
    while not reached(x):
        x *= 2
    return x


def _bisect(f: Callable[[float], float], low: float, high: float) -> float:
    """The root of an increasing ``f`` on [low, high] (f(low) ≤ 0 ≤ f(high))."""
    for _ in range(200):
        mid = (low + high) / 2
        if f(mid) < 0:
            low = mid
        else:
            high = mid
        if high - low <= 1e-13 * max(1.0, high):
            break
    return (low + high) / 2


def _solve(f: Callable[[float], float], scale: float) -> float:
    """The root of an increasing ``f`` on (0, ∞), bracketed by doubling from ``scale``."""
    high = scale
    while f(high) < 0:
        high *= 2
        if high > 1e6 * scale:
            return math.inf
    return _bisect(f, 0.0, high)


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
