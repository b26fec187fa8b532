"""The GRPO objective's pure tensor functions: advantages, loss weights, group categories.

Std scaling of the group advantage and length aggregation of the per-token loss are selected by
name; each choice's mathematics is its entry in ``grpo_ablation.objective.conventions`` (with its
source), and the formulas are the ones of ``docs/design.md``. Rows are always ordered group by
group: ``G`` consecutive entries per prompt.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from grpo_ablation.objective.conventions import (
    baseline,
    grouped,
    length_aggregation,
    policy_ratio,
    ratio_options,
    std_scaling,
)

__all__ = [
    "aggregate_loss",
    "clip_factor",
    "completion_coefficients",
    "gradient_weight",
    "group_advantages",
    "group_categories",
    "mixed_group_probability",
    "resample_expectation",
    "token_weights",
    "zero_variance_groups",
]


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    scaling: str,
    eps: float,
    baseline_name: str = "group_mean",
) -> torch.Tensor:
    """Group-relative advantage of every completion.

    A NaN reward means scoring failed: it is left out of its group's mean and std and gets
    advantage 0. A group with fewer than two finite rewards gets 0 throughout. A zero std with
    ``eps == 0`` gives 0, not NaN: the centred rewards are already 0 there, and no choice of
    denominator creates comparative information. What each scaling divides by is its entry in
    ``conventions.STD_SCALINGS`` (``batch``: the std of all finite rewards passed in); what the
    reward is compared with, ``conventions.BASELINES`` (leave-one-out: n/(n-1) times the centred
    reward, the std unchanged).
    """
    divide_by = std_scaling(scaling).std
    r = grouped(rewards.to(torch.float64), group_size)
    finite = torch.isfinite(r)
    n = finite.sum(dim=1, keepdim=True)
    mean = torch.where(finite, r, 0.0).sum(dim=1, keepdim=True) / n.clamp(min=1)
    centred = torch.where(finite, r - mean, 0.0)
    compared = centred * baseline(baseline_name).factor(n)
    if divide_by is None:
        adv = compared
    else:
        denom = divide_by(centred, n, rewards) + eps
        adv = torch.where(denom > 0, compared / torch.where(denom > 0, denom, 1.0), 0.0)
    adv = torch.where(finite & (n >= 2), adv, 0.0)
    return adv.reshape(rewards.shape).to(rewards.dtype)


def group_categories(
    rewards: torch.Tensor, group_size: int, success_threshold: float = 1.0
) -> list[str]:
    """One label per group: ``failed_scoring`` if any member could not be scored, else
    ``all_correct`` / ``all_incorrect`` / ``mixed`` by ``reward >= success_threshold``."""
    r = grouped(rewards, group_size)
    # whole-batch tensor ops and one copy to Python each (the trainer labels every step's groups)
    scored = torch.isfinite(r).all(dim=1).tolist()
    n_correct = (r >= success_threshold).sum(dim=1).tolist()
    return [
        "failed_scoring"
        if not ok
        else "all_correct"
        if k == group_size
        else "all_incorrect"
        if k == 0
        else "mixed"
        for ok, k in zip(scored, n_correct, strict=True)
    ]


def mixed_group_probability(p: float, group_size: int) -> float:
    """P(a group of G independent draws with success probability p is mixed) = 1 - p^G - (1-p)^G."""
    return 1.0 - p**group_size - (1.0 - p) ** group_size


def resample_expectation(q: float, n_groups: int, max_batches: int) -> tuple[float, float]:
    """zero_variance resample when each group is mixed with probability q, independently:
    (expected generation batches per step, expected share of the trained groups that are mixed).
    A step draws batches of ``n_groups`` groups until it holds ``n_groups`` mixed ones or has
    drawn ``max_batches``; keep and filter draw one batch (mixed share q)."""
    from math import comb

    # dist[m]: P(m mixed groups found so far, m < n) among steps still drawing
    dist = {0: 1.0}
    batches = full = 0.0
    for _ in range(max_batches):
        batches += sum(dist.values())
        nxt: dict[int, float] = {}
        for m, pm in dist.items():
            for x in range(n_groups + 1):
                px = pm * comb(n_groups, x) * q**x * (1 - q) ** (n_groups - x)
                if m + x >= n_groups:
                    full += px
                else:
                    nxt[m + x] = nxt.get(m + x, 0.0) + px
        dist = nxt
    short = sum(m * p for m, p in dist.items())  # steps that stopped at the cap, short of n
    return batches, (full * n_groups + short) / n_groups


# Empty completions follow EMPTY_COMPLETION_RULE (objective/conventions.py): counted, contributing zero.


def aggregate_loss(
    per_token_loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    group_size: int,
    max_completion_length: int,
) -> torch.Tensor:
    """Aggregate a (B, T) per-token loss over the batch passed in, as docs/design.md states it."""
    loss = length_aggregation(mode).loss
    m = mask.to(per_token_loss.dtype)
    return loss(per_token_loss * m, m, group_size, max_completion_length)


def zero_variance_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Per completion: does its group carry no signal, its scored rewards all equal (all correct
    or all incorrect)? Unscored rewards (NaN) are left out, as ``group_advantages`` leaves them
    out; a group with fewer than two scored rewards counts as one. These are exactly the groups
    whose advantages are 0 under every std scaling. The one definition: ``filter`` and
    ``resample`` act on it and the trainer's ``groups/zero_std_fraction`` counts it. A group with
    a failed score is still ``failed_scoring`` among the categories (``group_categories``), which
    count it apart whatever its scored rewards."""
    g = grouped(rewards.to(torch.float64), group_size)
    finite = torch.isfinite(g)
    low = torch.where(finite, g, torch.inf).min(-1).values
    high = torch.where(finite, g, -torch.inf).max(-1).values
    zero = (finite.sum(-1) < 2) | (low == high)
    return zero.repeat_interleave(group_size)


def completion_coefficients(
    lengths: torch.Tensor,
    mode: str,
    group_size: int,
    max_completion_length: int,
    keep: torch.Tensor | None = None,
) -> torch.Tensor:
    """The weight each token of completion i receives, from the completion lengths L_i alone.

    Every mode weights all tokens of one completion equally, so W = c_i * m_it. Computing c from
    the lengths of the *whole* generation batch (gathered across processes) is what makes the
    normaliser independent of how the batch is later split into micro-batches or ranks.
    ``keep`` (whole groups) filters the others out of the loss and its normaliser: the kept
    completions get the coefficients of a batch made of them alone, the rest 0.
    """
    coefficients = length_aggregation(mode).coefficients
    if keep is not None:
        c = torch.zeros(lengths.shape, dtype=torch.float64, device=lengths.device)
        if keep.any():
            c[keep] = completion_coefficients(
                lengths[keep], mode, group_size, max_completion_length
            )
        return c
    L = lengths.to(torch.float64)
    c = coefficients(L, group_size, max_completion_length)
    return torch.where(L > 0, c, 0.0)


def token_weights(
    mask: torch.Tensor, mode: str, group_size: int, max_completion_length: int
) -> torch.Tensor:
    """W such that ``aggregate_loss(x, mask, ...) == (W * x).sum()`` for every x."""
    m = mask.to(torch.float64)
    c = completion_coefficients(m.sum(-1), mode, group_size, max_completion_length)
    return c[:, None] * m


def std_ratio_population_to_sample(group_size: int) -> float:
    """population / sample advantage for the same group with eps = 0: sqrt(G / (G-1))."""
    return math.sqrt(group_size / (group_size - 1))


def rank_loss_scale(num_processes: int) -> int:
    """The factor on each rank's summed, weighted loss: DDP averages gradients over ranks, so the
    number of processes turns that mean back into the global weighted sum. Accumulation steps
    get no factor: TRL marks its loss as already scaled for accumulation, so the Trainer does not
    divide it, and the steps' shares add up (the trainer's conformance tests check both)."""
    return num_processes


# torch.nn.utils.clip_grad_norm_ divides by the norm plus this, so a norm at the bound is scaled.
CLIP_NORM_EPS = 1e-6


def clip_factor(grad_norm: float, max_grad_norm: float) -> float:
    """What gradient clipping multiplies a step's gradient by: min(1, c / (‖g‖ + 1e-6)), as
    ``torch.nn.utils.clip_grad_norm_`` computes it from the norm the Trainer logs (``grad_norm``,
    taken before clipping); c = 0 (or None) is no clipping, factor 1."""
    if not max_grad_norm or math.isnan(grad_norm):
        return 1.0 if not max_grad_norm else math.nan
    return min(1.0, max_grad_norm / (grad_norm + CLIP_NORM_EPS))


def gradient_weight(ratio: str, r: float, advantage: float, **options: Any) -> float:
    """The factor on A ∇log π of one token's policy term at ratio r (its derivative with respect
    to log π, over −A), the term a ``conventions.POLICY_RATIOS`` entry with ``options`` (clip
    ranges 0.2, no dual clip, CISPO's cap 5 unless given): 1 at r = 1 for every term but a CISPO
    capped below 1; 0 where the clip binds."""
    o = ratio_options(**options)
    logp = torch.tensor([[math.log(r)]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[advantage]], dtype=torch.float64)
    one = torch.ones(1, 1, dtype=torch.float64)
    policy_ratio(ratio).loss(logp, torch.zeros_like(one), adv, one, o, None).sum().backward()
    return -logp.grad.item() / advantage
