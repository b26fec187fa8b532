"""The worked numbers of docs/design.md, and the invariants of the library."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_ablation.objective.conventions import AGGREGATIONS, SCALINGS
from grpo_ablation.objective.formulas import (
    aggregate_loss,
    completion_coefficients,
    group_advantages,
    group_categories,
    mixed_group_probability,
    token_weights,
    zero_variance_groups,
)

ONE_OF_FOUR = torch.tensor([1.0, 0.0, 0.0, 0.0])


def test_population_std_advantages_for_1000():
    adv = group_advantages(ONE_OF_FOUR, 4, "population", eps=0.0)
    assert adv.tolist() == pytest.approx([1.732, -0.577, -0.577, -0.577], abs=5e-4)


def test_sample_std_advantages_for_1000():
    adv = group_advantages(ONE_OF_FOUR, 4, "sample", eps=0.0)
    assert adv.tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5], abs=1e-12)


def test_no_scaling_is_reward_minus_group_mean():
    adv = group_advantages(ONE_OF_FOUR, 4, "none", eps=1e-4)
    assert adv.tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25])


def test_batch_scaling_divides_by_the_std_of_all_rewards():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    adv = group_advantages(rewards, 4, "batch", eps=0.0)
    std = rewards.std().item()  # ddof=1 over the whole batch, as TRL
    assert adv[:4].tolist() == pytest.approx([0.75 / std, -0.25 / std, -0.25 / std, -0.25 / std])
    assert adv[4:].tolist() == pytest.approx([0.25 / std, 0.25 / std, 0.25 / std, -0.75 / std])


def test_tiny_and_large_gaps_get_identical_standardised_advantages():
    small = torch.tensor([0.51, 0.50, 0.50, 0.50], dtype=torch.float64)
    for scaling in ("population", "sample"):
        a = group_advantages(ONE_OF_FOUR.double(), 4, scaling, eps=0.0)
        b = group_advantages(small, 4, scaling, eps=0.0)
        assert b.tolist() == pytest.approx(a.tolist(), rel=1e-9)


def test_eps_1e4_shrinks_the_tiny_gap_group_by_about_two_percent():
    small = torch.tensor([0.51, 0.50, 0.50, 0.50], dtype=torch.float64)
    big = group_advantages(ONE_OF_FOUR.double(), 4, "population", eps=1e-4)[0].item()
    tiny = group_advantages(small, 4, "population", eps=1e-4)[0].item()
    # std of the tiny-gap group is 0.00433, so eps=1e-4 is 2.3% of it; the big group barely moves
    assert big == pytest.approx(math.sqrt(3), rel=1e-3)
    assert 1 - tiny / big == pytest.approx(0.0226, abs=1e-3)


def test_homogeneous_groups_centre_to_zero_and_are_labelled_apart():
    rewards = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    for scaling in ("none", "population", "sample", "batch"):
        for eps in (0.0, 1e-4):
            adv = group_advantages(rewards, 4, scaling, eps)
            assert torch.equal(adv, torch.zeros(8)), (scaling, eps)
    assert group_categories(rewards, 4) == ["all_correct", "all_incorrect"]


def test_group_categories_all_four():
    rewards = torch.tensor([1.0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, float("nan"), 0, 0])
    assert group_categories(rewards, 4) == [
        "all_correct",
        "all_incorrect",
        "mixed",
        "failed_scoring",
    ]


def test_failed_scoring_is_left_out_of_the_group_and_gets_zero():
    rewards = torch.tensor([1.0, float("nan"), 0.0, 0.0])
    adv = group_advantages(rewards, 4, "sample", eps=0.0)
    # the finite members (1, 0, 0) are centred and scaled among themselves
    expected = torch.tensor([1.0, 0.0, 0.0]) - 1 / 3
    expected = expected / expected.std()
    assert adv[1].item() == 0.0
    assert [adv[0].item(), adv[2].item(), adv[3].item()] == pytest.approx(expected.tolist())


def test_group_with_fewer_than_two_scores_gets_zero():
    rewards = torch.tensor([1.0, float("nan"), float("nan"), float("nan")])
    for scaling in ("none", "population", "sample", "batch"):
        assert group_advantages(rewards, 4, scaling, 1e-4).tolist() == [0.0] * 4


def test_rows_must_form_whole_groups():
    with pytest.raises(ValueError, match="groups of 4"):
        group_advantages(torch.zeros(6), 4, "sample", 1e-4)


def test_unknown_names_are_named_in_the_error():
    with pytest.raises(ValueError, match="std scaling 'zscore'"):
        group_advantages(ONE_OF_FOUR, 4, "zscore", 1e-4)
    with pytest.raises(ValueError, match="length aggregation 'mean'"):
        aggregate_loss(torch.zeros(2, 3), torch.ones(2, 3), "mean", 2, 3)


def two_completions(short: int = 2, long: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.zeros(2, long)
    mask[0, :short] = 1
    mask[1, :] = 1
    contributions = torch.zeros(2, long)
    contributions[0], contributions[1] = 1.0, -1.0
    return contributions, mask


def test_per_token_weights_for_lengths_2_and_8():
    _, mask = two_completions()
    seq = token_weights(mask, "sequence_mean", group_size=2, max_completion_length=8)
    tok = token_weights(mask, "token_mean", group_size=2, max_completion_length=8)
    assert seq[0, 0].item() == pytest.approx(1 / 4) and seq[1, 0].item() == pytest.approx(1 / 16)
    assert tok[0, 0].item() == pytest.approx(1 / 10) and tok[1, 0].item() == pytest.approx(1 / 10)


def test_luspos_sequence_sum_weighs_every_token_one_over_b():
    """+1 on the 2 tokens of one completion, −1 on the 8 of the other: summed per completion
    (2 and −8) and averaged over the B = 2 completions, −3; each token weighs 1/2."""
    x, mask = two_completions()
    assert aggregate_loss(x, mask, "sequence_sum", 2, 8).item() == pytest.approx(-3.0)
    w = token_weights(mask, "sequence_sum", group_size=2, max_completion_length=8)
    assert w[0, 0].item() == w[1, 0].item() == pytest.approx(1 / 2)


def test_the_constant_divides_by_the_max_completion_length_not_the_longest_completion():
    """Dr. GRPO's L_max is the configured max completion length: with completions of 2 and 8
    tokens and L_max = 12, B·L_max = 24, not 2 · 8 (a divisor taken from the batch's longest
    completion would pass every test where the longest one reaches L_max)."""
    x, mask = two_completions()
    assert aggregate_loss(x, mask, "constant", 2, 12).item() == pytest.approx((2 - 8) / 24)
    got = completion_coefficients(torch.tensor([2.0, 8.0]), "constant", 2, 12)
    assert got.tolist() == pytest.approx([1 / 24, 1 / 24])


def test_aggregates_0_and_minus_0_6_for_plus_and_minus_one():
    x, mask = two_completions()
    assert aggregate_loss(x, mask, "sequence_mean", 2, 8).item() == pytest.approx(0.0)
    assert aggregate_loss(x, mask, "token_mean", 2, 8).item() == pytest.approx(-0.6)
    # one group of two: the group token mean is the token mean; constant divides by B*L_max = 16
    assert aggregate_loss(x, mask, "group_token_mean", 2, 8).item() == pytest.approx(-0.6)
    assert aggregate_loss(x, mask, "constant", 2, 8).item() == pytest.approx((2 - 8) / 16)


def test_group_token_mean_differs_from_token_mean_across_groups():
    mask = torch.zeros(4, 8)
    mask[0, :2], mask[1, :2], mask[2, :8], mask[3, :8] = 1, 1, 1, 1
    x = torch.ones(4, 8)
    x[2:] = 0.0
    # groups (2+2 tokens of 1) and (8+8 tokens of 0): per-group means 1 and 0 -> 0.5; tokens 4/20
    assert aggregate_loss(x, mask, "group_token_mean", 2, 8).item() == pytest.approx(0.5)
    assert aggregate_loss(x, mask, "token_mean", 2, 8).item() == pytest.approx(0.2)


def test_empty_completion_counts_in_b_and_contributes_zero():
    mask = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    x = torch.tensor([[3.0, 3.0], [100.0, 100.0]])
    assert aggregate_loss(x, mask, "sequence_mean", 2, 2).item() == pytest.approx(1.5)
    assert token_weights(mask, "sequence_mean", 2, 2)[1].tolist() == [0.0, 0.0]


def test_zero_variance_groups_are_the_all_equal_ones():
    nan = float("nan")
    # groups of 3: all correct; all incorrect among the scored; mixed; none scored (advantage 0)
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, nan, 1.0, 0.0, 1.0, nan, nan, nan])
    assert zero_variance_groups(rewards, 3).tolist() == [True] * 6 + [False] * 3 + [True] * 3


NAN = float("nan")
# Groups of 4 with failed scores (NaN), by hand: is the group zero-variance, its category, and
# its advantages with no std scaling (the scored rewards' mean subtracted; 0 where unscored).
FAILED_GROUPS = [
    # scored (1, 1, 1) all equal: no signal, whatever the failed member would have scored
    ((1.0, NAN, 1.0, 1.0), True, "failed_scoring", (0.0, 0.0, 0.0, 0.0)),
    # scored (1, 0, 0) differ: mean 1/3, signal among the scored members
    ((1.0, 0.0, NAN, 0.0), False, "failed_scoring", (2 / 3, -1 / 3, 0.0, -1 / 3)),
    # one scored reward: fewer than two, no baseline, advantage 0
    ((NAN, 1.0, NAN, NAN), True, "failed_scoring", (0.0, 0.0, 0.0, 0.0)),
    ((NAN, NAN, NAN, NAN), True, "failed_scoring", (0.0, 0.0, 0.0, 0.0)),
    ((0.0, 1.0, 1.0, 0.0), False, "mixed", (-0.5, 0.5, 0.5, -0.5)),
    ((0.0, 0.0, 0.0, 0.0), True, "all_incorrect", (0.0, 0.0, 0.0, 0.0)),
]


def test_zero_variance_is_decided_on_the_scored_rewards_and_failed_groups_counted_apart():
    """A failed score leaves its member out of the zero-variance decision as it leaves it out of
    the advantages: a zero-variance group is one whose advantages are all 0 under every std
    scaling, a failed one included; its category stays failed_scoring."""
    rewards = torch.tensor([r for group, *_ in FAILED_GROUPS for r in group])
    zero = zero_variance_groups(rewards, 4)[::4].tolist()
    assert zero == [z for _, z, _, _ in FAILED_GROUPS] == [True, False, True, True, False, True]
    assert group_categories(rewards, 4) == [c for _, _, c, _ in FAILED_GROUPS]
    hand = torch.tensor([a for *_, adv in FAILED_GROUPS for a in adv])
    assert group_advantages(rewards, 4, "none", eps=0.0).tolist() == pytest.approx(hand.tolist())
    # sample std of the scored (1, 0, 0) is sqrt(1/3): 2/3 / sqrt(1/3) = 1.1547
    sample = group_advantages(rewards, 4, "sample", eps=0.0)[4:8]
    assert sample.tolist() == pytest.approx([1.1547, -0.5774, 0.0, -0.5774], abs=5e-5)
    for scaling in SCALINGS:
        for eps in (0.0, 1e-4):
            adv = group_advantages(rewards, 4, scaling, eps).view(-1, 4)
            assert (adv == 0).all(dim=1).tolist() == zero, (scaling, eps)


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_filtered_groups_leave_the_loss_and_its_normaliser(mode):
    """With zero-variance groups filtered, the kept completions weigh exactly what they weigh in a
    batch made of them alone, and the others nothing: lengths (2, 8 | 3, 3 | 5, 1), keep group 1
    and 3."""
    lengths = torch.tensor([2.0, 8.0, 3.0, 3.0, 5.0, 1.0])
    keep = torch.tensor([True, True, False, False, True, True])
    got = completion_coefficients(lengths, mode, 2, 8, keep)
    alone = completion_coefficients(lengths[keep], mode, 2, 8)
    assert got[~keep].tolist() == [0.0, 0.0] and torch.allclose(got[keep], alone)
    assert not torch.allclose(got[keep], completion_coefficients(lengths, mode, 2, 8)[keep])
    # by hand: sequence_mean 1/(4 L_i); token_mean 1/16; group_token_mean 1/(2 * 10) and
    # 1/(2 * 6); sequence_sum 1/4; constant 1/(4 * 8)
    hand = {
        "sequence_mean": [1 / 8, 1 / 32, 1 / 20, 1 / 4],
        "token_mean": [1 / 16] * 4,
        "group_token_mean": [1 / 20, 1 / 20, 1 / 12, 1 / 12],
        "sequence_sum": [1 / 4] * 4,
        "constant": [1 / 32] * 4,
    }
    assert got[keep].tolist() == pytest.approx(hand[mode])


def test_mixed_group_probability_worked_numbers():
    assert mixed_group_probability(0.2, 4) == pytest.approx(0.5888, abs=1e-12)
    assert mixed_group_probability(0.2, 8) == pytest.approx(0.832225, abs=5e-7)


# --- property tests ------------------------------------------------------------------------


@st.composite
def batches(draw, allow_empty: bool = False):
    group_size = draw(st.integers(2, 4))
    n_groups = draw(st.integers(1, 4))
    width = draw(st.integers(1, 6))
    low = 0 if allow_empty else 1
    lengths = draw(
        st.lists(
            st.integers(low, width), min_size=group_size * n_groups, max_size=group_size * n_groups
        )
    )
    seed = draw(st.integers(0, 2**16))
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).double()
    x = torch.randn(
        len(lengths), width, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )
    return x, mask, group_size, width


@settings(max_examples=60, deadline=None)
@given(batches(allow_empty=True), st.sampled_from(AGGREGATIONS), st.randoms())
def test_permuting_groups_leaves_every_aggregate_unchanged(batch, mode, rnd):
    x, mask, G, width = batch
    n_groups = x.shape[0] // G
    order = list(range(n_groups))
    rnd.shuffle(order)
    rows = torch.tensor([g * G + i for g in order for i in range(G)])
    a = aggregate_loss(x, mask, mode, G, width)
    b = aggregate_loss(x[rows], mask[rows], mode, G, width)
    assert b.item() == pytest.approx(a.item(), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(batches(allow_empty=True), st.sampled_from(AGGREGATIONS))
def test_aggregate_equals_weighted_sum(batch, mode):
    x, mask, G, width = batch
    W = token_weights(mask, mode, G, width)
    assert aggregate_loss(x, mask, mode, G, width).item() == pytest.approx(
        (W * x).sum().item(), abs=1e-12
    )


@settings(max_examples=60, deadline=None)
@given(batches(), st.sampled_from(AGGREGATIONS))
def test_weights_sum_to_one_or_to_the_constant_fraction(batch, mode):
    _, mask, G, width = batch
    total = token_weights(mask, mode, G, width).sum().item()
    if mode == "constant":
        assert total == pytest.approx(mask.sum().item() / (mask.shape[0] * width))
    elif mode == "sequence_sum":  # 1/B a token: the mean completion length
        assert total == pytest.approx(mask.sum().item() / mask.shape[0])
    else:
        assert total == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 8).flatmap(
        lambda g: st.tuples(
            st.just(g),
            st.lists(st.floats(-10, 10, allow_nan=False), min_size=g, max_size=g),
        )
    )
)
def test_population_and_sample_differ_by_sqrt_g_minus_1_over_g(case):
    G, values = case
    rewards = torch.tensor(values, dtype=torch.float64)
    pop = group_advantages(rewards, G, "population", eps=0.0)
    sample = group_advantages(rewards, G, "sample", eps=0.0)
    assert torch.allclose(sample, pop * math.sqrt((G - 1) / G), atol=1e-9)


def test_resampling_expectation_by_hand():
    """One group a step, mixed with probability 1/2, at most two batches: a second batch half the
    time (1.5 batches), and a mixed group unless both fail (3/4). Capped at one batch it is keep."""
    from grpo_ablation.objective.formulas import resample_expectation

    assert resample_expectation(0.5, 1, 2) == pytest.approx((1.5, 0.75))
    assert resample_expectation(0.78, 4, 1) == pytest.approx((1.0, 0.78))
    batches, share = resample_expectation(0.78, 4, 4)
    assert 1.0 < batches < 2.0 and share > 0.99


def test_gradient_clipping_scales_by_the_bound_over_the_norm_plus_torchs_epsilon():
    from grpo_ablation.objective.formulas import clip_factor

    assert clip_factor(4.0, 1.0) == 1 / 4.000001  # the default bound, a norm four times it
    assert clip_factor(2.02, 1.0) == 1 / 2.020001  # sample std's median norm in draw 9
    assert clip_factor(0.5, 1.0) == 1.0
    assert clip_factor(1.0, 1.0) == 1 / 1.000001  # at the bound it already scales, by 1e-6
    assert clip_factor(4.0, 0.0) == 1.0  # 0: no clipping
    assert math.isnan(clip_factor(math.nan, 1.0))
    # the factor torch's clip_grad_norm_ applies to a gradient of norm 4
    p = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    p.grad = torch.tensor([0.0, 4.0], dtype=torch.float64)
    assert float(torch.nn.utils.clip_grad_norm_([p], 1.0)) == 4.0  # returns the norm before
    assert float(p.grad[1]) == pytest.approx(4.0 * clip_factor(4.0, 1.0), rel=1e-15)


def test_leave_one_out_compares_each_reward_with_the_others_mean():
    """Rewards 1, 0, 0, 0: against the mean of the other three, 1 − 0 = 1 and 0 − 1/3; that is
    4/3 times the group-mean advantage (0.75, −0.25), with or without a std (the std is of the
    rewards about the group mean either way). A reward that could not be scored leaves the
    group: n = 3, factor 3/2."""
    loo = group_advantages(ONE_OF_FOUR, 4, "none", eps=0.0, baseline_name="leave_one_out")
    assert loo.tolist() == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])
    for scaling in SCALINGS:
        mean = group_advantages(ONE_OF_FOUR, 4, scaling, eps=1e-4)
        out = group_advantages(ONE_OF_FOUR, 4, scaling, eps=1e-4, baseline_name="leave_one_out")
        assert out.tolist() == pytest.approx((mean * 4 / 3).tolist())
    failed = torch.tensor([1.0, 0.0, float("nan"), 1.0])
    out = group_advantages(failed, 4, "none", eps=0.0, baseline_name="leave_one_out")
    assert out.tolist() == pytest.approx([0.5, -1.0, 0.0, 0.5])


def _term_gradient(name: str, logps, old, adv, mask, **options) -> torch.Tensor:
    from grpo_ablation.objective.conventions import policy_ratio, ratio_options

    o = ratio_options(**options)
    x = logps.clone().requires_grad_(True)
    loss = policy_ratio(name).loss(x, old, adv, mask, o, None).expand_as(x)
    (loss * mask).sum().backward()
    return x.grad


@pytest.mark.parametrize(
    ("ratio", "adv", "low", "high", "kept"),
    [
        # A > 0 and r = 1.25: inside the upper band at ε_high = 0.28 (DAPO's clip-higher), clipped
        # at ε_high = 0.2; the lower ε does not bind there
        (1.25, 1.0, 0.2, 0.28, True),
        (1.25, 1.0, 0.2, 0.2, False),
        (1.25, 1.0, 0.3, 0.2, False),
        # A < 0 and r = 0.75: inside the lower band at ε_low = 0.3, clipped at ε_low = 0.2; the
        # upper ε does not bind there
        (0.75, -1.0, 0.3, 0.2, True),
        (0.75, -1.0, 0.2, 0.2, False),
        (0.75, -1.0, 0.2, 0.28, False),
    ],
)
def test_each_clip_edge_binds_on_its_own_side(ratio, adv, low, high, kept):
    """The clipped term at ratios placed inside one clip band: a token keeps its gradient
    −A·r·∇log π exactly where min(r·A, clip(r)·A) takes r·A; each ε acts on its own side only
    (ε_high where A > 0 and r > 1, ε_low where A < 0 and r < 1)."""
    old = torch.zeros(1, 1, dtype=torch.float64)
    logps = old + math.log(ratio)
    grad = _term_gradient(
        "clipped",
        logps,
        old,
        torch.tensor([[adv]], dtype=torch.float64),
        torch.ones(1, 1, dtype=torch.float64),
        clip_eps_low=low,
        clip_eps_high=high,
    )
    assert grad.item() == pytest.approx(-adv * ratio if kept else 0.0)


def _a_batch(moved: float) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    logps = -torch.rand(4, 5, generator=g, dtype=torch.float64) - 0.1
    old = logps + moved * torch.randn(4, 5, generator=g, dtype=torch.float64)
    adv = torch.tensor([[1.5], [-0.5], [0.5], [-1.5]], dtype=torch.float64)
    mask = torch.ones(4, 5, dtype=torch.float64)
    mask[1, 3:] = 0
    return logps, old, adv, mask


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("name", ["clipped", "cispo", "sapo", "vespo"])
def test_at_ratio_one_every_term_has_the_policy_gradient(name, level):
    """μ = 1: π_old is the policy itself, every ratio is 1, and each term's gradient with respect
    to log π is −A on every unmasked token (SAPO's gate 4σ(0)/τ has slope 1; VESPO's φ(1) = 1)."""
    logps, _, adv, mask = _a_batch(0.0)
    grad = _term_gradient(name, logps, logps.detach(), adv, mask, ratio_level=level)
    assert torch.allclose(grad, (-adv * mask).expand_as(grad), atol=1e-12)


def test_trls_default_cispo_cap_scales_the_gradient_by_it():
    """TRL's cispo caps its weight at epsilon_high, 0.2 when unset: at ratio 1 the weight is
    min(1, 0.2) = 0.2 everywhere, so the gradient is the policy gradient times 0.2."""
    logps, _, adv, mask = _a_batch(0.0)
    grad = _term_gradient("cispo", logps, logps.detach(), adv, mask, cispo_cap=0.2)
    assert torch.allclose(grad, (-0.2 * adv * mask).expand_as(grad), atol=1e-12)


@pytest.mark.parametrize("name", ["cispo", "sapo", "vespo"])
def test_the_terms_part_where_the_ratios_move(name):
    """μ > 1: the policy has moved from the one that sampled, and each term weighs the tokens
    its own way, so its gradient is no longer the clipped term's."""
    logps, old, adv, mask = _a_batch(0.3)
    clipped = _term_gradient("clipped", logps, old, adv, mask)
    other = _term_gradient(name, logps, old, adv, mask)
    assert (other - clipped).abs().max().item() > 1e-3
    token = _term_gradient("clipped", logps, old, adv, mask)
    sequence = _term_gradient("clipped", logps, old, adv, mask, ratio_level="sequence")
    assert (token - sequence).abs().max().item() > 1e-3


@pytest.mark.parametrize(
    ("name", "r", "a", "weight"),
    [
        ("clipped", 1.3, +1.0, 0.0),  # past 1 + 0.2 with A > 0: the clip binds, no gradient
        ("cispo", 1.3, +1.0, 1.3),  # min(1.3, 5), not differentiated
        ("sapo", 1.3, +1.0, 1.2712),  # 4 σ(0.3) (1 − σ(0.3)) · 1.3
        ("vespo", 1.3, +1.0, 0.6871),  # exp(3 + 2 ln 1.3 − 3 · 1.3)
        ("clipped", 0.7, -1.0, 0.0),  # below 1 − 0.2 with A < 0: the clip binds
        ("cispo", 0.7, -1.0, 0.7),
        ("sapo", 0.7, -1.0, 0.6829),  # 4 σ(−0.315) (1 − σ(−0.315)) · 0.7, τ = 1.05
        ("vespo", 0.7, -1.0, 0.6250),  # exp(2 + 3 ln 0.7 − 2 · 0.7)
    ],
)
def test_how_each_term_weighs_a_token_whose_ratio_moved(name, r, a, weight):
    """The calculations sheet's policy-ratio rows: the factor on A ∇log π of one token."""
    from grpo_ablation.objective.formulas import gradient_weight

    assert gradient_weight(name, r, a) == pytest.approx(weight, abs=5e-5)


@pytest.mark.parametrize("name", ["clipped", "cispo", "sapo"])
def test_at_the_token_level_each_token_has_its_own_ratios_weight(name):
    """One completion of two tokens at ratios 1.3 and 0.7, A = 1: each token's gradient is the
    one-token weight of its own ratio (GSPO's sequence ratio, sqrt(0.91), would weigh both
    alike)."""
    from grpo_ablation.objective.formulas import gradient_weight

    ratios = torch.tensor([[1.3, 0.7]], dtype=torch.float64)
    one = torch.ones(1, 1, dtype=torch.float64)
    grad = _term_gradient(
        name, ratios.log(), torch.zeros_like(ratios), one, torch.ones_like(ratios)
    )
    want = [gradient_weight(name, r, 1.0) for r in (1.3, 0.7)]
    assert (-grad).flatten().tolist() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("r", "weight"), [(1.4, 1.4), (1.6, 0.0)])
def test_the_dual_clip_caps_the_ratio_where_a_is_negative(r, weight):
    """δ = 1.5, A = −1, past 1 + 0.2: min(r A, 1.2 A) is r A, whose gradient the token keeps
    below δ; past δ, r is capped at δ and the token has none."""
    from grpo_ablation.objective.formulas import gradient_weight

    assert gradient_weight("clipped", r, -1.0, clip_delta=1.5) == pytest.approx(weight, rel=1e-12)


def test_the_terms_defaults_are_the_training_configs():
    from grpo_ablation.design.options import TrainingConfig
    from grpo_ablation.objective.conventions import ratio_options

    options, config = vars(ratio_options()), TrainingConfig()
    assert options == {k: getattr(config, k) for k in options}
