"""Uncertainty across seeds: Student-t intervals and paired differences. Small pure functions.

Seeds are the unit of replication: one number per (cell, seed) goes in, a mean and a 95% interval
come out. With one seed there is no spread to estimate, so the interval is *undefined* (NaN
bounds and ``defined=False``), never a made-up width.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scipy import stats as _scipy_stats

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """Mean over n values with a two-sided Student-t interval (NaN bounds when n < 2)."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float = CONFIDENCE

    @property
    def defined(self) -> bool:
        return self.n >= 2 and math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2 if self.defined else math.nan

    def excludes_zero(self) -> bool:
        """The interval lies on one side of zero. One of zero width (every value equal: no
        spread to estimate sampling variation from) never does: it says nothing about it."""
        return self.defined and self.high > self.low and (self.low > 0 or self.high < 0)


def t_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean ± t_{n-1} · s/√n over the finite values (NaN values are dropped, not imputed)."""
    xs = _finite(values)
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, confidence)
    mean = sum(xs) / n
    if n < 2:
        return Interval(mean, math.nan, math.nan, n, confidence)
    sd = sample_sd(xs)
    half = float(_scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, confidence)


def sd_of_interval(iv: Interval) -> float:
    """The SD of the n values behind a t interval: half-width · √n / t_{n−1} (NaN if undefined)."""
    if not iv.defined:
        return math.nan
    t = float(_scipy_stats.t.ppf(0.5 + iv.confidence / 2, iv.n - 1))
    return iv.half_width * math.sqrt(iv.n) / t


def paired_differences(
    values: Mapping[int, float], reference: Mapping[int, float]
) -> dict[int, float]:
    """value − reference for every seed both have (pairing by seed removes seed-level noise
    shared by the two cells: same splits order, same initial sampling stream)."""
    return {s: float(values[s]) - float(reference[s]) for s in sorted(set(values) & set(reference))}


def paired_interval(
    values: Mapping[int, float], reference: Mapping[int, float], confidence: float = CONFIDENCE
) -> Interval:
    """t interval of the per-seed paired differences (value − reference)."""
    return t_interval(paired_differences(values, reference).values(), confidence)


def sample_sd(values: Iterable[float]) -> float:
    """The SD (n − 1 in the denominator) of the finite values; NaN with fewer than two."""
    xs = _finite(values)
    n = len(xs)
    if n < 2:
        return math.nan
    mean = sum(xs) / n
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))


def _finite(values: Iterable[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def one_sided_p(values: Iterable[float], threshold: float, direction: int) -> float:
    """p-value of the one-sided t test of H1: mean > threshold (``direction`` +1) or mean <
    threshold (−1) over the finite values; NaN with fewer than two, and when they are all equal
    (no spread: the t statistic is undefined, and no verdict is made from it). scipy's
    ``ttest_1samp(..., alternative=...)`` gives the same within 1e-12 (``test_stats``); this one
    keeps the NaN rules and the bits the written tables hold."""
    xs = _finite(values)
    n = len(xs)
    if n < 2:
        return math.nan
    mean = sum(xs) / n
    sd = sample_sd(xs)
    if sd == 0:
        return math.nan
    t = (mean - threshold) / (sd / math.sqrt(n))
    dist = _scipy_stats.t(n - 1)
    return float(dist.sf(t) if direction > 0 else dist.cdf(t))


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment (family-wise error) of ``pvalues``, in their order; NaN stays
    NaN and does not count in the family. Written here: scipy has no Holm, and statsmodels
    (``multipletests``) is no dependency for eight lines."""
    order = sorted((p, i) for i, p in enumerate(pvalues) if math.isfinite(p))
    m, running = len(order), 0.0
    out = [math.nan] * len(pvalues)
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def tost_p(values: Iterable[float], margin: float) -> float:
    """Two one-sided tests of equivalence within ±margin: the larger of the p-values of
    H1: mean > −margin and H1: mean < +margin (below α exactly when the (1 − 2α) interval lies
    inside ±margin)."""
    xs = _finite(values)
    low, high = one_sided_p(xs, -margin, +1), one_sided_p(xs, margin, -1)
    return max(low, high) if math.isfinite(low) and math.isfinite(high) else math.nan


def mixed_fraction_at(counts: Mapping[int, int], G: int, G_new: int) -> float:
    """The fraction of groups of size ``G_new`` ≤ ``G`` expected to be mixed on the same
    distribution of per-prompt success probabilities p as observed groups of size ``G``
    (``counts``: number of correct completions k -> groups): E[1 − p^n − (1 − p)^n], n = G_new.

    Model-free: each group gives an unbiased estimate of p^n, the chance that n of its G
    completions drawn without replacement are all correct, C(k, n) / C(G, n) (likewise for
    1 − p). For n > G no unbiased estimate exists, so the caller predicts the other way round."""
    if G_new > G:
        raise ValueError(f"P(mixed) at G={G_new} has no unbiased estimate from groups of {G}")
    total = sum(counts.values())
    if total == 0 or G_new < 2:
        return math.nan
    both = sum(
        c * (math.comb(k, G_new) + math.comb(G - k, G_new)) for k, c in counts.items()
    ) / math.comb(G, G_new)
    return 1 - both / total


def format_interval(iv: Interval, digits: int = 3, signed: bool = False) -> str:
    """``0.250 [0.100, 0.400]``, or ``0.250 (n=1: interval undefined)``; never a bare mean."""
    if iv.n == 0 or not math.isfinite(iv.mean):
        return "n/a"
    sign = "+" if signed else ""
    mean = f"{iv.mean:{sign}.{digits}f}"
    if not iv.defined:
        return f"{mean} (n={iv.n}: interval undefined)"
    return f"{mean} [{iv.low:{sign}.{digits}f}, {iv.high:{sign}.{digits}f}]"


def wilson(successes: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion. Kept beside scipy's
    (``binomtest(k, n).proportion_ci(method="wilson")``, equal within 1e-15 in ``test_stats``):
    that one takes integer counts only, and its last bits differ, which would change every
    full-precision table that holds one."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half
