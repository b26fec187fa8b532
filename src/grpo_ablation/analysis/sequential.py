"""Group-sequential looks: how much error each look may spend, the boundaries that spend it, and
the power and expected units of a design that stops a hypothesis once it is decided.

A study looks at its data K times, at information fractions t_1 < … < t_K = 1 (units at the look
over units at the last). Under no effect the standardised statistics Z_1 … Z_K of one test are
those of a Brownian motion read at t_k: Z_k = B(t_k) / √t_k. An **error-spending** rule α(t)
says how much of the one-sided level α may be spent by information t; the boundary c_k of look k
is the value for which the probability of crossing first at look k is α(t_k) − α(t_{k−1})
(Lan & DeMets 1983). Lan–DeMets O'Brien–Fleming-type spending,

    α(t) = 2 − 2 Φ(z_{1−α/2} / √t),

spends almost nothing early. The classical O'Brien–Fleming boundaries c_k = C / √t_k, one constant
C for all looks, are the shape it imitates. Both are computed by numerical integration of the
statistic's density from look to look (Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000,
ch. 19), vectorised with numpy: pure functions.

The statistics a study has are t statistics on few degrees of freedom, not z: a boundary is
carried to the t scale at the same nominal tail probability (``t_boundary``: the t quantile of
Φ(c_k) on the look's df). That keeps each look's marginal level but not the whole test's: on few
df the carried boundaries cross 1.02-1.05 times as often as the level allows (4 and 8 draws at
α = 0.025: 0.0255). ``carried_level`` removes that: the t statistic of normal data is pivotal
under its null (free of the mean and the SD), so one simulation of null t paths at a study's
looks is every test's null, and the boundaries are spent at γ·α, the largest γ ≤ 1 whose
simulated error is at most α less two Monte Carlo standard errors.

Futility is **non-binding**: no look stops a hypothesis for futility, so α is spent as if every
look were taken, and a user who stops early for any other reason keeps α.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

import numpy as np
from scipy.special import ndtr

from grpo_ablation.analysis.stats import sample_sd
from grpo_ablation.design import hypotheses as _hyp
from grpo_ablation.design.power import t_quantile

_N = NormalDist()
# Grid of the recursion: points per unit SD of the statistic's increment, and how far below the
# boundary the density is kept (its mass beyond 10 SDs is < 1e-23).
_PER_SD = 60
_SPAN_SD = 10.0

Spending = Callable[[float, float], float]


def obrien_fleming_spending(t: float, alpha: float) -> float:
    """Lan–DeMets O'Brien–Fleming-type spending: α(t) = 2 − 2Φ(z_{1−α/2}/√t), α(1) = α."""
    if t <= 0:
        return 0.0
    return 2.0 - 2.0 * _N.cdf(_N.inv_cdf(1 - alpha / 2) / math.sqrt(t))


def pocock_spending(t: float, alpha: float) -> float:
    """Lan–DeMets Pocock-type spending: α(t) = α · ln(1 + (e − 1)·t)."""
    return alpha * math.log(1 + (math.e - 1) * t) if t > 0 else 0.0


SPENDING: dict[str, Spending] = {
    "obrien_fleming": obrien_fleming_spending,
    "pocock": pocock_spending,
}


class _Recursion:
    """The density of the score S_k = √t_k · Z_k on the continuation region, look by look, with
    a drift θ (S_k ~ N(θ t_k, t_k) with no stopping): θ = 0 under no effect. Trapezoid weights on
    a grid; each look's density is the previous one's convolved with the increment's normal."""

    def __init__(self, fractions: Sequence[float], drift: float = 0.0):
        if not fractions or any(b <= a for a, b in zip([0.0, *fractions], fractions, strict=False)):
            raise ValueError(f"information fractions must increase from above 0: {list(fractions)}")
        self.t = list(fractions)
        self.drift = drift
        self.xs = np.zeros(0)
        self.mass = np.zeros(0)  # density × trapezoid weight at each grid point
        self.k = 0

    def _increment(self) -> tuple[float, float]:
        dt = self.t[self.k] - (self.t[self.k - 1] if self.k else 0.0)
        return math.sqrt(dt), self.drift * dt

    def crossing(self, boundary_z: float) -> float:
        """P(not stopped before look k, and Z_k ≥ boundary) at the current look k."""
        sd, mean = self._increment()
        b = boundary_z * math.sqrt(self.t[self.k])
        if self.k == 0:
            return float(ndtr((mean - b) / sd))
        return float(self.mass @ ndtr((self.xs + mean - b) / sd))

    def crossing_below(self, lower_z: float) -> float:
        """P(not stopped before look k, and Z_k ≤ lower) at the current look k."""
        sd, mean = self._increment()
        a = lower_z * math.sqrt(self.t[self.k])
        if self.k == 0:
            return float(ndtr((a - mean) / sd))
        return float(self.mass @ ndtr((a - self.xs - mean) / sd))

    def advance(self, boundary_z: float, lower_z: float = -math.inf) -> None:
        """Move to the next look, keeping the density between this look's boundaries."""
        sd, mean = self._increment()
        root = math.sqrt(self.t[self.k])
        b, a = boundary_z * root, lower_z * root
        centre = self.drift * self.t[self.k]
        low = max(a, min(b, centre) - _SPAN_SD * root)
        high = min(b, max(a, centre) + _SPAN_SD * root)
        n = max(2, math.ceil((high - low) / (sd / _PER_SD)))
        xs = np.linspace(low, high, n + 1)
        if self.k == 0:
            density = np.exp(-0.5 * ((xs - mean) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
        else:
            z = (xs[:, None] - self.xs[None, :] - mean) / sd
            density = (np.exp(-0.5 * z**2) / (sd * math.sqrt(2 * math.pi))) @ self.mass
        weights = np.full(n + 1, (high - low) / n)
        weights[[0, -1]] /= 2
        self.xs, self.mass, self.k = xs, density * weights, self.k + 1


def _solve(f: Callable[[float], float], low: float = -2.0, high: float = 12.0) -> float:
    """The root of a decreasing ``f`` by bisection."""
    for _ in range(50):
        mid = (low + high) / 2
        if f(mid) > 0:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def spending_boundaries(
    fractions: Sequence[float], alpha: float, spending: str = "obrien_fleming"
) -> list[float]:
    """The one-sided z boundaries c_1 … c_K that spend ``spending``'s α(t_k) − α(t_{k−1}) at each
    look (four equal looks, α = 0.025, O'Brien–Fleming-type: 4.333, 2.963, 2.359, 2.014)."""
    spend = SPENDING[spending]
    rec = _Recursion(fractions)
    out, spent = [], 0.0
    for t in fractions:
        target = spend(t, alpha) - spent
        c = (
            _solve(lambda z, target=target: rec.crossing(z) - target)
            if target > 1e-15
            else math.inf
        )
        out.append(c)
        spent += target
        rec.advance(c)
    return out


def classical_obrien_fleming(fractions: Sequence[float], alpha: float) -> list[float]:
    """O'Brien & Fleming's boundaries c_k = C / √t_k, C such that the chance of crossing at any
    look under no effect is α (four equal looks, α = 0.025: 4.049, 2.863, 2.337, 2.024)."""

    def total(C: float) -> float:
        rec, p = _Recursion(fractions), 0.0
        for t in fractions:
            c = C / math.sqrt(t)
            p += rec.crossing(c)
            rec.advance(c)
        return p

    C = _solve(lambda C: total(C) - alpha, 0.5, 8.0)
    return [C / math.sqrt(t) for t in fractions]


def crossing_probabilities(
    fractions: Sequence[float], boundaries: Sequence[float], drift: float
) -> list[float]:
    """P(the test first crosses at look k) when the score drifts by ``drift`` per unit of
    information (drift = effect / SD · √N_K for N_K units at the last look)."""
    rec, out = _Recursion(fractions, drift), []
    for c in boundaries:
        out.append(rec.crossing(c))
        rec.advance(c)
    return out


def t_boundary(z: float, df: int) -> float:
    """A z boundary carried to a t statistic on ``df`` degrees of freedom at the same one-sided
    tail probability."""
    if not math.isfinite(z):
        return z
    return t_quantile(_N.cdf(z), df)


# What a look says of one hypothesis (declared with the hypotheses).
SUPPORTED, REFUTED, CONTINUE, INCONCLUSIVE = (
    _hyp.SUPPORTED,
    _hyp.REFUTED,
    _hyp.CONTINUE,
    _hyp.INCONCLUSIVE,
)


def look_statistics(
    kind: str,
    xs: Sequence[float],
    *,
    direction: int = 0,
    minimum_effect: float = 0.0,
    margin: float = math.nan,
) -> tuple[float, float, int]:
    """(support t, refute t, df) of one hypothesis from its per-unit differences: directional,
    (s·x̄ − δ)/se and (δ − s·x̄)/se; equivalence, the smaller of the two TOST statistics
    (x̄ + m)/se, (m − x̄)/se and the larger of the two beyond the margin (|x̄| − m)/se. Units
    without a finite difference are left out, as the fixed analysis leaves them out."""
    xs = [x for x in xs if math.isfinite(x)]
    n = len(xs)
    if n < 2:
        return math.nan, math.nan, 0
    mean = sum(xs) / n
    se = sample_sd(xs) / math.sqrt(n)
    if not se > 0:
        return math.nan, math.nan, n - 1
    if kind == "equivalence":
        return min((mean + margin) / se, (margin - mean) / se), (abs(mean) - margin) / se, n - 1
    signed = direction * mean
    return (signed - minimum_effect) / se, (minimum_effect - signed) / se, n - 1


def decide(
    support_t: float, refute_t: float, df: int, support_c: float, refute_c: float, last: bool
) -> str:
    """A hypothesis's verdict at a look, from its two tests' t boundaries at this look (each
    test at its share of the level, ``carried_boundaries``): supported or refuted where its t
    statistic reaches its boundary, else continue (inconclusive at the last look)."""
    if df >= 1:
        if support_t >= support_c:
            return SUPPORTED
        if refute_t >= refute_c:
            return REFUTED
    return INCONCLUSIVE if last else CONTINUE


def expected_units(
    units: Sequence[int], boundary: Sequence[float], drift: float, two_sided: bool = True
) -> tuple[float, float]:
    """(expected units at which the test stops, probability it crosses the upper boundary) when
    the score drifts by ``drift`` per unit of information (effect / SD · √units[-1]); with
    ``two_sided`` the mirror boundary −c_k (a directional hypothesis's refute test) stops too."""
    probs = stop_probabilities(units, boundary, drift, two_sided)
    stopped = sum(up + down for up, down in probs)
    expected = sum(u * (up + down) for u, (up, down) in zip(units, probs, strict=True))
    return expected + units[-1] * (1 - stopped), sum(up for up, _ in probs)


def stop_probabilities(
    units: Sequence[int], boundary: Sequence[float], drift: float, two_sided: bool = True
) -> list[tuple[float, float]]:
    """Per look, the probabilities that the test first stops there by crossing its upper
    boundary c_k and (``two_sided``) its mirror −c_k, the score drifting as in
    ``expected_units``."""
    rec = _Recursion([u / units[-1] for u in units], drift)
    out = []
    for c in boundary:
        out.append((rec.crossing(c), rec.crossing_below(-c) if two_sided else 0.0))
        rec.advance(c, -c if two_sided else -math.inf)
    return out


def units_for_power(
    effect: float,
    sd: float,
    fractions: Sequence[float],
    alpha: float,
    spending: str = "obrien_fleming",
    target: float = 0.8,
) -> int:
    """Units at the last look for ``target`` power at the one-sided ``alpha`` (the support test
    of an effect ``effect`` beyond its boundary, per-unit SD ``sd``) with looks at ``fractions``:
    the z design's units by bisection on the drift, plus Guenther's z²/2 for a t statistic's
    estimated SD (the simulation in the tests checks the result on t statistics)."""
    boundary = spending_boundaries(fractions, alpha, spending)
    need = _solve(
        lambda drift: target - sum(crossing_probabilities(fractions, boundary, drift)), 0.0, 20.0
    )
    z = _N.inv_cdf(1 - alpha)
    return math.ceil((need * sd / effect) ** 2 + z * z / 2)


# The simulation behind ``carried_level``: enough null paths that its Monte Carlo standard error is
# under 0.5% of a level of 0.025 (1.1e-4), from a seed of its own (the same boundaries everywhere).
NULL_PATHS = 2_000_000
NULL_SEED = 20261206


def t_paths(
    units: Sequence[int], n: int, seed: int, effect: float = 0.0, sd_scale: np.ndarray | None = None
) -> np.ndarray:
    """[n, looks] one-sample t statistics of ``n`` simulated studies at looks of ``units`` units:
    per-unit values N(effect / scale, 1) (``sd_scale`` per study: the true SD over the planned
    one, 1 unless given), the t of the first units[k] at look k. Drawn block by block, exactly:
    the m values between two looks enter only by their sum, N(m·mean, m), and the sum of their
    squared deviations, χ²_{m−1}, independent of it."""
    rng = np.random.default_rng(seed)
    mean = effect if sd_scale is None else effect / sd_scale
    sizes = np.diff([0, *units])
    total = np.zeros(n)
    squares = np.zeros(n)
    out = np.empty((n, len(units)))
    for k, (m, u) in enumerate(zip(sizes, units, strict=True)):
        block = rng.standard_normal(n) * math.sqrt(m) + m * mean
        within = rng.chisquare(m - 1, n) if m > 1 else 0.0
        total += block
        squares += within + block * block / m
        sd = np.sqrt(np.maximum(squares - total * total / u, 0.0) / (u - 1))
        out[:, k] = total / u / (sd / math.sqrt(u))
    return out


@functools.lru_cache(maxsize=4)
def null_t_paths(units: tuple[int, ...]) -> np.ndarray:
    """Every test's null paths at looks of ``units`` (``NULL_PATHS`` of them, ``NULL_SEED``)."""
    return t_paths(units, NULL_PATHS, NULL_SEED)


def carried_boundaries(
    units: Sequence[int], level: float, spending: str = "obrien_fleming", gamma: float = 1.0
) -> list[float]:
    """The t boundary of each look at ``units`` units: the spending boundaries of γ·``level``
    carried to each look's df (units − 1)."""
    fractions = [u / units[-1] for u in units]
    z = spending_boundaries(fractions, gamma * level, spending)
    return [t_boundary(c, u - 1) for c, u in zip(z, units, strict=True)]


def simulated_error(
    units: Sequence[int], level: float, spending: str = "obrien_fleming", gamma: float = 1.0
) -> float:
    """The share of ``null_t_paths`` that cross the carried boundaries at some look."""
    paths = null_t_paths(tuple(units))
    bounds = np.array(carried_boundaries(units, level, spending, gamma))
    return float((paths >= bounds).any(axis=1).mean())


@functools.lru_cache(maxsize=256)
def carried_level(units: tuple[int, ...], level: float, spending: str = "obrien_fleming") -> float:
    """γ: the largest factor ≤ 1 (to 1e-4) whose carried boundaries at γ·``level`` cross on at
    most ``level`` less two Monte Carlo standard errors of the null paths at looks of ``units``
    (the study's planned looks). One look: 1 (the t quantile is exact)."""
    if len(units) < 2 or not level > 0:
        return 1.0
    target = level - 2 * math.sqrt(level * (1 - level) / NULL_PATHS)
    if simulated_error(units, level, spending) <= target:
        return 1.0
    low, high = 0.5, 1.0
    while high - low > 1e-4:
        mid = (low + high) / 2
        if simulated_error(units, level, spending, mid) <= target:
            low = mid
        else:
            high = mid
    return low


def simulated_stops(
    units: Sequence[int],
    support_c: Sequence[float],
    refute_c: Sequence[float],
    drift: float,
    sd_df: float = math.nan,
    n: int = 20_000,
    seed: int = NULL_SEED,
) -> list[tuple[float, float]]:
    """Per look, the probabilities that a directional test first stops there by its support
    boundary (T ≥ c_k) and by its refute boundary (−T ≥ c'_k), for t statistics of per-unit
    differences whose mean is ``drift`` planned SDs beyond the minimum effect; with ``sd_df`` the
    true SD varies over studies as the planned SD's uncertainty on that many df
    (σ/s = √(df / χ²_df)). ``n`` simulated studies (Monte Carlo SE ≤ 0.0036)."""
    scale = None
    if sd_df >= 1:
        scale = np.sqrt(sd_df / np.random.default_rng(seed + 1).chisquare(sd_df, n))
    paths = t_paths(units, n, seed, drift, scale)
    alive = np.ones(n, dtype=bool)
    out = []
    for k in range(len(units)):
        up = alive & (paths[:, k] >= support_c[k])
        down = alive & ~up & (-paths[:, k] >= refute_c[k])
        out.append((float(up.mean()), float(down.mean())))
        alive &= ~(up | down)
    return out
