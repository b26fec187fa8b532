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
        return self.defined and (self.low > 0 or self.high < 0)


def t_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean ± t_{n-1} · s/√n over the finite values (NaN values are dropped, not imputed)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, confidence)
    mean = sum(xs) / n
    if n < 2:
        return Interval(mean, math.nan, math.nan, n, confidence)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(_scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, confidence)


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


def format_interval(iv: Interval, digits: int = 3, signed: bool = False) -> str:
    """``0.250 [0.100, 0.400]``, or ``0.250 (n=1: interval undefined)``; never a bare mean."""
    if iv.n == 0 or not math.isfinite(iv.mean):
        return "n/a"
    sign = "+" if signed else ""
    mean = f"{iv.mean:{sign}.{digits}f}"
    if not iv.defined:
        return f"{mean} (n={iv.n}: interval undefined)"
    return f"{mean} [{iv.low:{sign}.{digits}f}, {iv.high:{sign}.{digits}f}]"
