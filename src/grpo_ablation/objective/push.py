"""What each objective pushes: per-completion weights of update directions and of the gradients of
what is measured, on one fixed set of samples.

With one update epoch (ratio 1) and β = 0, the update direction of a choice c (std scaling and
aggregation) on a generation batch is the negative loss gradient

    d_c = Σ_i w_c,i ∇ log π(y_i),   w_c,i = coefficient_c,i(lengths) · advantage_c,i(rewards),

where log π(y_i) sums the completion's token log-probabilities (at temperature T). The gradient of
a quantity J measured under the policy, by the score function with a leave-one-out baseline per
prompt, has the same form ∇J ≈ Σ_i v_i ∇ log π(y_i). So every direction and every gradient is a
weighting of the same per-completion score vectors, and the push of c on J per unit step is
d_c · ∇J / |d_c|. Measured on samples independent of those that define d_c, it is an unbiased
first-order estimate for expected accuracy and P(mixed) (unbiased weights below) and a consistent
one for the mean length of incorrect completions (a ratio). The direction is the plain gradient
(an L2 step): Adam, which training uses, rescales it per parameter, so this is what each
objective pushes, not what one optimizer step does.
"""

from __future__ import annotations

import torch

from grpo_ablation.objective.formulas import (
    completion_coefficients,
    group_advantages,
    grouped,
)


def choice_weights(
    rewards: torch.Tensor,
    lengths: torch.Tensor,
    group_size: int,
    scaling: str,
    aggregation: str,
    eps: float,
    max_completion_length: int,
) -> torch.Tensor:
    """w_c,i = coefficient · advantage: the weight of ∇ log π(y_i) in the update direction."""
    adv = group_advantages(rewards.double(), group_size, scaling, eps)
    coef = completion_coefficients(lengths, aggregation, group_size, max_completion_length)
    return coef * adv


def leave_one_out(values: torch.Tensor, group_size: int) -> torch.Tensor:
    """f_i − mean of the other members of its group (G/(G−1) · (f_i − f̄)): a baseline that keeps
    the score-function estimator unbiased."""
    f = grouped(values.double(), group_size)
    centred = f - f.mean(dim=1, keepdim=True)
    return (centred * group_size / (group_size - 1)).reshape(-1)


def accuracy_weights(correct: torch.Tensor, group_size: int) -> torch.Tensor:
    """v_i of ∇ E[correct] (the mean over prompts of P(correct | prompt))."""
    return leave_one_out(correct.double(), group_size) / correct.numel()


def incorrect_length_weights(
    correct: torch.Tensor, lengths: torch.Tensor, group_size: int
) -> torch.Tensor:
    """v_i of ∇ (E[L · wrong] / E[wrong]), the mean length of incorrect completions:
    ∇J = ∇E[(L − J) · wrong] / E[wrong] with J and E[wrong] at their estimates from the same
    samples (a ratio estimator: consistent, not unbiased)."""
    wrong = 1.0 - correct.double()
    share = wrong.mean()
    if share == 0:
        return torch.zeros_like(wrong)
    J = (lengths.double() * wrong).sum() / wrong.sum()
    f = (lengths.double() - J) * wrong
    return leave_one_out(f, group_size) / (correct.numel() * share)


def mixed_weights(correct: torch.Tensor, group_size: int) -> torch.Tensor:
    """v_i of ∇ mean over prompts of q(p) = 1 − p^G − (1 − p)^G, unbiased: ∇q = q'(p) ∇p with
    q'(p) = G((1 − p)^(G−1) − p^(G−1)), and G(∏_{j≠i}(1 − f_j) − ∏_{j≠i} f_j) is an unbiased
    estimate of q'(p) independent of sample i, so it multiplies sample i's score term. (A plug-in
    q'(p̂) from the same samples would be biased towards zero, and zero at G = 2.)"""
    G = group_size
    f = grouped(correct.double(), G)
    others_right = torch.stack([f[:, [j for j in range(G) if j != i]].prod(1) for i in range(G)], 1)
    others_wrong = torch.stack(
        [(1 - f[:, [j for j in range(G) if j != i]]).prod(1) for i in range(G)], 1
    )
    slope = G * (others_wrong - others_right)
    return slope.reshape(-1) * accuracy_weights(correct, G)


def long_incorrect_share(
    weights: torch.Tensor, lengths: torch.Tensor, correct: torch.Tensor
) -> float:
    """Share of the update's token weight (|w_i| · L_i) on incorrect completions longer than the
    batch's median length."""
    L = lengths.double()
    mass = weights.abs().double() * L
    total = mass.sum()
    if total == 0:
        return float("nan")
    long_wrong = (~correct.bool()) & (L.median() < L)
    return float(mass[long_wrong].sum() / total)
