"""The ablated conventions of the GRPO objective, one registry entry per choice.

Each std scaling, length aggregation and zero-variance rule is declared once, here: its name, the
sentence the objective record writes for it and its mathematics (docs/design.md). The names
everything else accepts (config schema, axes, cells) are the registries' keys; ``formulas`` and
the trainer apply the entries.

Importable without torch: the functions use tensor methods only, so the DAG can read the names.
Rows are ordered group by group: ``G`` consecutive entries per prompt.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal, get_args

Tensor = Any  # torch.Tensor, without importing torch


def grouped(values: Tensor, group_size: int) -> Tensor:
    """(B, ...) -> (B / G, G, ...): one row per group."""
    if group_size < 1 or values.shape[0] % group_size:
        raise ValueError(
            f"{values.shape[0]} rows cannot be split into groups of {group_size} "
            "(rows must be ordered group by group)"
        )
    return values.reshape(values.shape[0] // group_size, group_size, *values.shape[1:])


@dataclass(frozen=True)
class StdScaling:
    """How the centred group rewards are divided: ``std(centred, n, rewards)`` is the std the
    advantage divides by, before ``eps`` (None: not divided). ``centred`` is (groups, G) with
    unscored rewards zeroed, ``n`` the scored count per group, ``rewards`` the whole batch."""

    name: str
    sentence: str  # "{eps}" is the record's std_eps
    std: Callable[[Tensor, Tensor, Tensor], Tensor] | None


def _group_std(ddof: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    return lambda centred, n, rewards: (
        (centred**2).sum(dim=1, keepdim=True) / (n - ddof).clamp(min=1)
    ).sqrt()


def _batch_std(centred: Tensor, n: Tensor, rewards: Tensor) -> Tensor:
    pool = rewards[rewards.isfinite()].double()
    return pool.std() if pool.numel() > 1 else pool.new_zeros(())


@dataclass(frozen=True)
class LengthAggregation:
    """How the per-token loss of a generation batch is summed into one number.

    ``coefficients(L, G, L_max)``: the weight c_i of each token of completion i, from the lengths
    alone (the trainer's form: the whole batch's lengths fix the normaliser). ``loss(masked, m, G,
    L_max)``: the same aggregate computed directly from the masked per-token loss, as the papers
    write it (the conformance tests hold the two equal)."""

    name: str
    sentence: str
    normaliser: str  # the per-token weight is 1 / normaliser
    coefficients: Callable[[Tensor, int, int], Tensor]
    loss: Callable[[Tensor, Tensor, int, int], Tensor]


def _group_token_coefficients(L: Tensor, group_size: int, max_len: int) -> Tensor:
    per_group = grouped(L, group_size).sum(-1, keepdim=True).clamp(min=1.0)
    n_groups = L.shape[0] // group_size
    return (1.0 / (n_groups * per_group)).expand(-1, group_size).reshape(-1)


def _group_token_loss(masked: Tensor, m: Tensor, group_size: int, max_len: int) -> Tensor:
    per_group = grouped(masked.sum(-1), group_size).sum(-1)
    tokens = grouped(m.sum(-1), group_size).sum(-1)
    return (per_group / tokens.clamp(min=1.0)).mean()


_DIVIDED = "reward minus group mean, divided by the {} plus {{eps:g}}"

STD_SCALINGS: dict[str, StdScaling] = {
    s.name: s
    for s in (
        # Dr. GRPO (Liu et al. 2025, Understanding R1-Zero-Like Training)
        StdScaling("none", "reward minus group mean, not divided by any std", None),
        StdScaling(
            "population",
            _DIVIDED.format("population std (ddof=0) of the group"),
            _group_std(0),
        ),
        # DeepSeekMath (Shao et al. 2024), ddof left implicit there; TRL's scale_rewards="group"
        StdScaling("sample", _DIVIDED.format("sample std (ddof=1) of the group"), _group_std(1)),
        # TRL's scale_rewards="batch", Lite PPO (Liu et al. 2025, Tricks or Traps)
        StdScaling(
            "batch",
            _DIVIDED.format("sample std (ddof=1) of all rewards of the generation batch"),
            _batch_std,
        ),
    )
}

LENGTH_AGGREGATIONS: dict[str, LengthAggregation] = {
    a.name: a
    for a in (
        # DeepSeekMath's eq. 3
        LengthAggregation(
            "sequence_mean",
            "averaged within each completion over its unmasked tokens, then over the B "
            "completions of the generation batch",
            "B * L_i",
            lambda L, group_size, max_len: 1.0 / (L.shape[0] * L.clamp(min=1.0)),
            lambda masked, m, group_size, max_len: (
                (masked.sum(-1) / m.sum(-1).clamp(min=1.0)).sum() / masked.shape[0]
            ),
        ),
        # TRL's "dapo"
        LengthAggregation(
            "token_mean",
            "summed over all unmasked tokens of the generation batch and divided by their number",
            "sum_i L_i",
            lambda L, group_size, max_len: L.new_full(L.shape, 1.0) / L.sum().clamp(min=1.0),
            lambda masked, m, group_size, max_len: masked.sum() / m.sum().clamp(min=1.0),
        ),
        # the DAPO paper's equation (Yu et al. 2025)
        LengthAggregation(
            "group_token_mean",
            "summed within each group and divided by the group's unmasked tokens, then averaged "
            "over groups",
            "n_groups * sum_{i in g} L_i",
            _group_token_coefficients,
            _group_token_loss,
        ),
        # LUSPO (TRL's "luspo"): each completion's summed loss, averaged over completions, so a
        # sequence-level term counts once per token
        LengthAggregation(
            "sequence_sum",
            "summed within each completion over its unmasked tokens, then averaged over the B "
            "completions of the generation batch",
            "B",
            lambda L, group_size, max_len: L.new_full(L.shape, 1.0 / L.shape[0]),
            lambda masked, m, group_size, max_len: masked.sum() / masked.shape[0],
        ),
        # Dr. GRPO
        LengthAggregation(
            "constant",
            "summed over all unmasked tokens and divided by the constant B x L_max (B "
            "completions, L_max = max completion length)",
            "B * L_max",
            lambda L, group_size, max_len: L.new_full(L.shape, 1.0 / (L.shape[0] * max_len)),
            lambda masked, m, group_size, max_len: masked.sum() / (masked.shape[0] * max_len),
        ),
    )
}


@dataclass(frozen=True)
class Baseline:
    """What each reward is compared with. ``factor(n)`` turns a reward minus its group's mean into
    the reward minus this baseline (``n``: the scored members of the group); the std scaling
    divides by the std of the rewards about the group mean either way."""

    name: str
    sentence: str
    factor: Callable[[Tensor], Tensor]


BASELINES: dict[str, Baseline] = {
    b.name: b
    for b in (
        # GRPO (Shao et al. 2024)
        Baseline(
            "group_mean", "the mean of its group's scored rewards", lambda n: n.new_ones(n.shape)
        ),
        # RLOO (Ahmadian et al. 2024; verl's "rloo"): r_i - (S - r_i)/(n - 1) = n/(n - 1) (r_i - mean)
        Baseline(
            "leave_one_out",
            "the mean of the other scored rewards of its group (leave-one-out, RLOO), which is "
            "n/(n-1) times the reward minus the group mean",
            lambda n: n / (n - 1).clamp(min=1),
        ),
    )
}


@dataclass(frozen=True)
class PolicyRatio:
    """How the probability ratio r = π_θ / π_old enters the per-token policy loss.

    ``loss(logps, old, advantages, mask, o, is_ratio)``: the per-token loss ((B, T), or (B, 1)
    broadcast over tokens) before the length aggregation; ``o`` holds the run's options (clip
    ranges, the dual clip, CISPO's cap, the ratio's level); ``is_ratio``: TRL's vLLM
    importance-sampling ratio per token, or None. Where ``folds_is_ratio`` the entry takes the
    correction into its own weight (VESPO, as TRL does); the trainer multiplies the others' loss
    by it. At μ = 1 every r is exactly 1 and every entry's gradient is A ∇log π, CISPO's where its
    cap is at least 1. Each is TRL 1.16's term of the same name."""

    name: str
    sentence: str  # formatted with the options (and ``delta``, the dual clip's clause)
    loss: Callable[[Tensor, Tensor, Tensor, Tensor, Any, Tensor | None], Tensor]
    folds_is_ratio: bool = False


# TRL 1.16's defaults, fixed here: SAPO's gate temperatures (τ where A > 0, τ elsewhere) and
# VESPO's (k, λ) where A ≥ 0 and elsewhere.
SAPO_TEMPERATURES = (1.0, 1.05)
VESPO = ((2.0, 3.0), (3.0, 2.0))


def ratio_options(**options: Any) -> SimpleNamespace:
    """The options a policy term reads, at the training config's defaults (its neutral values)
    unless given."""
    defaults = {"clip_eps_low": 0.2, "clip_eps_high": 0.2, "clip_delta": 0.0, "cispo_cap": 5.0}
    return SimpleNamespace(**{**defaults, "ratio": "clipped", "ratio_level": "token", **options})


def log_ratio(logps: Tensor, old: Tensor, mask: Tensor, level: str) -> Tensor:
    """log r per token (level ``token``, (B, T)) or per completion (``sequence``, GSPO: the mean
    of the token log-ratios over its unmasked tokens, (B, 1))."""
    lr = logps - old
    if level == "token":
        return lr
    return ((lr * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)


def _clipped(logps: Tensor, old: Tensor, adv: Tensor, mask: Tensor, o: Any, _: Any) -> Tensor:
    r = log_ratio(logps, old, mask, o.ratio_level).exp()
    clipped = r.clamp(1 - o.clip_eps_low, 1 + o.clip_eps_high)
    # dual clip (TRL's delta): r itself capped; only where A < 0 when delta >= 1 + eps_high,
    # below that A > 0 loses its gradient past delta and A < 0 stops at 1 + eps_high
    if o.clip_delta:
        r = r.clamp(max=o.clip_delta)
    return -(r * adv).minimum(clipped * adv)


def _cispo(logps: Tensor, old: Tensor, adv: Tensor, mask: Tensor, o: Any, _: Any) -> Tensor:
    weight = log_ratio(logps, old, mask, o.ratio_level).exp().clamp(max=o.cispo_cap).detach()
    return -weight * adv * logps


def _sapo(logps: Tensor, old: Tensor, adv: Tensor, mask: Tensor, o: Any, _: Any) -> Tensor:
    r = log_ratio(logps, old, mask, o.ratio_level).exp()
    positive, negative = SAPO_TEMPERATURES
    tau = adv.new_full(adv.shape, positive).where(adv > 0, adv.new_full(adv.shape, negative))
    return -((tau * (r - 1)).sigmoid() * 4 / tau) * adv


def vespo_weight(
    log_ratio_tokens: Tensor, mask: Tensor, adv: Tensor, is_ratio: Tensor | None = None
) -> Tensor:
    """VESPO's sequence weight φ(w) = exp(λ + k log w − λ w), w the completion's whole ratio
    (the sum of its token log-ratios, and of the vLLM correction's where given, clamped as TRL
    clamps them), (k, λ) by the advantage's sign (``VESPO``); φ(1) = 1. Not differentiated."""
    low = math.log(1e-8)
    log_w = (log_ratio_tokens.clamp(-20.0, 20.0) * mask).sum(-1, keepdim=True)
    if is_ratio is not None:
        log_w = log_w + is_ratio.log().clamp(low, 20.0).sum(-1, keepdim=True)
    log_w = log_w.clamp(low, 20.0)
    (k_pos, lam_pos), (k_neg, lam_neg) = VESPO
    positive = adv >= 0
    k = adv.new_full(adv.shape, k_pos).where(positive, adv.new_full(adv.shape, k_neg))
    lam = adv.new_full(adv.shape, lam_pos).where(positive, adv.new_full(adv.shape, lam_neg))
    phi = (lam + k * log_w - lam * log_w.exp()).exp()
    return phi.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).detach()


def _vespo(
    logps: Tensor, old: Tensor, adv: Tensor, mask: Tensor, o: Any, is_ratio: Tensor | None
) -> Tensor:
    return -vespo_weight(logps - old, mask, adv, is_ratio) * adv * logps


POLICY_RATIOS: dict[str, PolicyRatio] = {
    p.name: p
    for p in (
        # PPO (Schulman et al. 2017) as GRPO uses it; TRL's grpo, dapo, dr_grpo, bnpo, luspo
        PolicyRatio(
            "clipped",
            "the PPO clipped-ratio term min(r A, clip(r, 1-{clip_eps_low:g}, 1+{clip_eps_high:g}) A)"
            "{delta}",
            _clipped,
        ),
        # CISPO (MiniMax-M1, Chen et al. 2025; TRL's cispo): the weight min(r, cap) is not
        # differentiated, so every token keeps its gradient; TRL caps at epsilon_high itself
        PolicyRatio(
            "cispo",
            "the stop-gradient importance weight min(r, {cispo_cap:g}) times A log π (CISPO)",
            _cispo,
        ),
        # SAPO (Gao et al. 2025; TRL's sapo): a sigmoid gate instead of the hard clip
        PolicyRatio(
            "sapo",
            f"the soft gate 4 σ(τ (r - 1)) / τ times A, τ = {SAPO_TEMPERATURES[0]:g} where "
            f"A > 0 and {SAPO_TEMPERATURES[1]:g} elsewhere (SAPO)",
            _sapo,
        ),
        # VESPO (TRL's vespo): a gamma-shaped weight of the whole completion's ratio
        PolicyRatio(
            "vespo",
            "the stop-gradient sequence weight φ(w) = exp(λ + k log w - λ w) times A log π, w "
            f"the completion's product of token ratios, (k, λ) = {VESPO[0]} where A ≥ 0 and "
            f"{VESPO[1]} elsewhere (VESPO)",
            _vespo,
            folds_is_ratio=True,
        ),
    )
}


def std_scaling(name: str) -> StdScaling:
    return _entry(STD_SCALINGS, name, "std scaling")


def length_aggregation(name: str) -> LengthAggregation:
    return _entry(LENGTH_AGGREGATIONS, name, "length aggregation")


def baseline(name: str) -> Baseline:
    return _entry(BASELINES, name, "baseline")


def policy_ratio(name: str) -> PolicyRatio:
    return _entry(POLICY_RATIOS, name, "policy ratio")


def _entry(registry: dict[str, Any], name: str, what: str) -> Any:
    if name not in registry:
        raise ValueError(f"unknown {what} {name!r}; expected one of {', '.join(registry)}")
    return registry[name]


@dataclass(frozen=True)
class ZeroVarianceRule:
    """What the loss does with groups whose rewards are all equal (all correct or all incorrect):
    their sentence in the objective record (``{batches}``: training.max_generation_batches)."""

    name: str
    sentence: str


ZERO_VARIANCE_RULES: dict[str, ZeroVarianceRule] = {
    z.name: z
    for z in (
        # kept: advantage 0, but counted in the normaliser
        ZeroVarianceRule(
            "keep",
            "Zero-variance groups (all rewards equal) stay in the loss and in its normaliser,"
            " with advantage 0.",
        ),
        # ScaleRL's zero-variance filtering
        ZeroVarianceRule(
            "filter",
            "Zero-variance groups (all rewards equal) are filtered out of the loss and of its"
            " normaliser: B, the token counts and the number of groups count the other groups"
            " only (the rollout log keeps them, marked).",
        ),
        # DAPO's dynamic sampling (the trainer's _generate_batch)
        ZeroVarianceRule(
            "resample",
            "Zero-variance groups (all rewards equal) are replaced (dynamic sampling, DAPO): "
            "while the generation batch holds fewer than its number of groups that are mixed,"
            " a further batch of as many fresh prompts is generated, up to {batches} batches "
            "per step in all; the step trains on the first mixed groups in generation order, "
            "and a batch still short of them is filled with zero-variance groups filtered out"
            " of the loss and of its normaliser (the rollout log keeps every generated group,"
            " marked).",
        ),
    )
}


def zero_variance_rule(name: str) -> ZeroVarianceRule:
    return _entry(ZERO_VARIANCE_RULES, name, "zero_variance rule")


# The names everything else accepts (config schema, axes, cells): the registries' keys.
SCALINGS: tuple[str, ...] = tuple(STD_SCALINGS)
AGGREGATIONS: tuple[str, ...] = tuple(LENGTH_AGGREGATIONS)
ZERO_VARIANCE: tuple[str, ...] = tuple(ZERO_VARIANCE_RULES)
BASELINE_NAMES: tuple[str, ...] = tuple(BASELINES)
RATIOS: tuple[str, ...] = tuple(POLICY_RATIOS)
RATIO_LEVELS: tuple[str, ...] = ("token", "sequence")

# Every group of a step is exactly one of these; all-correct and all-incorrect groups are both
# centred to zero and are counted apart, and a group with a failed score is data, not a crash.
GroupCategory = Literal["failed_scoring", "all_correct", "all_incorrect", "mixed"]
GROUP_CATEGORIES: tuple[str, ...] = get_args(GroupCategory)

# Empty completions (no unmasked token, e.g. a truncated completion under truncation masking):
# they stay in every count (B, the number of groups) and contribute zero, as TRL's ``grpo`` does,
# so masking a completion never changes the weight of the others. verl instead drops them from
# the sequence mean; the objective record names the rule used.
# Bounds [C_min, C_max] of TRL's vLLM importance-sampling ratio (vllm_importance_sampling_clip_min
# and _max; TRL 1.16's defaults), passed explicitly so that another TRL cannot change them silently,
# and recorded in the objective record: a truncate mode clips the ratio into them, a mask mode
# zeroes the sequences or tokens outside.
VLLM_IS_CLIP: tuple[float | None, float | None] = (None, 3.0)

EMPTY_COMPLETION_RULE = "counted in B and in the number of groups, contributing zero"
