"""The objective's edge cases, by hand: groups of one and of exactly two scored rewards,
one-token completions, gradient weights at |A| != 1 and in float64, the resample expectation
exactly (q = 0 and 1 included), the dtypes and devices kept, and the registries' error messages:
the cases that test_objective.py's worked numbers leave open and `make mutation` found
(docs/measurements.md)."""

import math
import re

import pytest
import torch

from grpo_ablation.objective.conventions import (
    AGGREGATIONS,
    SCALINGS,
    baseline,
    grouped,
    length_aggregation,
    log_ratio,
    policy_ratio,
    std_scaling,
    zero_variance_rule,
)
from grpo_ablation.objective.formulas import (
    aggregate_loss,
    completion_coefficients,
    gradient_weight,
    group_advantages,
    resample_expectation,
    zero_variance_groups,
)

NAN = float("nan")
HALF_SQRT2 = math.sqrt(0.5)


def test_grouped_takes_groups_of_one_and_keeps_trailing_dimensions():
    assert grouped(torch.arange(3.0), 1).shape == (3, 1)
    rows = grouped(torch.arange(12).reshape(4, 3), 2)
    assert rows.shape == (2, 2, 3) and rows[1, 0].tolist() == [6, 7, 8]


@pytest.mark.parametrize(("rows", "size"), [(6, 4), (4, 0)])
def test_grouped_names_rows_and_group_size_in_its_error(rows, size):
    message = (
        f"{rows} rows cannot be split into groups of {size} (rows must be ordered group by group)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        grouped(torch.zeros(rows), size)


@pytest.mark.parametrize(
    ("lookup", "message"),
    [
        (std_scaling, "std scaling 'x'; expected one of none, population, sample, batch"),
        (
            length_aggregation,
            "length aggregation 'x'; expected one of sequence_mean, token_mean, "
            "group_token_mean, sequence_sum, constant",
        ),
        (baseline, "baseline 'x'; expected one of group_mean, leave_one_out"),
        (policy_ratio, "policy ratio 'x'; expected one of clipped, cispo, sapo, vespo"),
        (zero_variance_rule, "zero_variance rule 'x'; expected one of keep, filter, resample"),
    ],
)
def test_unknown_names_get_the_registrys_message(lookup, message):
    with pytest.raises(ValueError, match=f"^{re.escape('unknown ' + message)}$"):
        lookup("x")


def test_groups_of_one_get_advantage_zero():
    """G = 1: every group has one scored reward, no baseline, advantage 0 under every scaling."""
    rewards = torch.tensor([1.0, 0.0, 1.0])
    for scaling in SCALINGS:
        assert group_advantages(rewards, 1, scaling, eps=0.0).tolist() == [0.0] * 3, scaling


@pytest.mark.parametrize(
    ("scaling", "baseline_name", "signal"),
    [
        ("none", "group_mean", 0.5),  # 1 − 1/2
        ("none", "leave_one_out", 1.0),  # 1 − 0: n/(n − 1) = 2 times 1/2
        ("population", "group_mean", 1.0),  # population std 1/2
        ("sample", "group_mean", HALF_SQRT2),  # sample std sqrt(1/2)
        ("batch", "group_mean", HALF_SQRT2),  # two finite rewards in the batch: std sqrt(1/2)
    ],
)
def test_two_scored_rewards_are_a_group(scaling, baseline_name, signal):
    """Exactly two scored rewards (1, 0) carry a signal, whether the group has two members or
    two of four failed to score: ±signal on the scored ones, 0 on the failed ones."""
    for rewards, expected in (
        ([1.0, 0.0], [signal, -signal]),
        ([1.0, NAN, 0.0, NAN], [signal, 0.0, -signal, 0.0]),
    ):
        size = len(rewards)
        adv = group_advantages(torch.tensor(rewards), size, scaling, 0.0, baseline_name)
        assert adv.tolist() == pytest.approx(expected, abs=1e-7), rewards
        assert zero_variance_groups(torch.tensor(rewards), size).tolist() == [False] * size


# A group of two completions of one and zero tokens: x = 3 on the one token, L_max = 2. The
# token counts of 1 are the smallest the normalisers divide by (their floor of 1 is for empty
# completions), and the weights are what each mode's normaliser gives there.
ONE_TOKEN = {
    "sequence_mean": 1 / 2,  # 1 / (B L_i), B = 2, L_i = 1
    "token_mean": 1.0,  # 1 / sum L_i
    "group_token_mean": 1.0,  # 1 / (n_groups sum_g L_i)
    "sequence_sum": 1 / 2,  # 1 / B
    "constant": 1 / 4,  # 1 / (B L_max)
}


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_one_token_completions_are_divided_by_one(mode):
    mask = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    x = torch.tensor([[3.0, 5.0], [7.0, 7.0]])
    assert aggregate_loss(x, mask, mode, 2, 2).item() == pytest.approx(3 * ONE_TOKEN[mode])
    got = completion_coefficients(torch.tensor([1.0, 0.0]), mode, 2, 2)
    assert got.tolist() == pytest.approx([ONE_TOKEN[mode], 0.0])


def test_float32_rewards_are_centred_in_float64_and_rounded_once():
    """0.2 − mean(0.1, 0.2, 0.3, 0.7) = −0.125: exact when float32 rewards are centred in float64
    and the advantage rounded back to float32; centred in float32, it comes out −0.12499999."""
    adv = group_advantages(torch.tensor([0.1, 0.2, 0.3, 0.7]), 4, "none", eps=0.0)
    assert adv.dtype == torch.float32 and adv[1].item() == -0.125


def test_the_aggregate_keeps_the_per_token_losss_dtype():
    x, mask = torch.ones(2, 3), torch.ones(2, 3, dtype=torch.float64)
    for mode in AGGREGATIONS:
        assert aggregate_loss(x, mask, mode, 2, 3).dtype == torch.float32, mode


def test_filtered_coefficients_stay_on_the_lengths_device():
    """The trainer's lengths and keep mask live on the accelerator, where coefficients built on
    the CPU would not take the kept ones; the meta device stands in for it here (keep stays on
    the CPU: ``keep.any()`` reads a value)."""
    lengths = torch.tensor([2.0, 8.0, 3.0, 3.0], device="meta")
    keep = torch.tensor([True, True, False, False])
    for mode in AGGREGATIONS:
        assert completion_coefficients(lengths, mode, 2, 8, keep).device == lengths.device, mode


def test_sequence_log_ratio_is_the_mean_over_the_unmasked_tokens():
    """GSPO's log r of a completion: one token, its own log-ratio (0.5); two, their mean."""
    logps = torch.tensor([[-1.0, -5.0], [-1.0, -2.0]], dtype=torch.float64)
    old = torch.tensor([[-1.5, -0.2], [-1.5, -1.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    assert log_ratio(logps, old, mask, "sequence").flatten().tolist() == pytest.approx([0.5, -0.25])


@pytest.mark.parametrize(
    ("name", "r", "a", "weight"),
    [
        ("clipped", 1.1, 2.0, 1.1),  # inside the band: the factor is r itself
        ("clipped", 0.7, -0.5, 0.0),  # below 1 − 0.2 with A < 0: clipped
        ("cispo", 1.3, 2.0, 1.3),
        ("sapo", 1.3, 0.5, 1.2712),  # as at A = 1: the factor does not scale with A
        ("vespo", 0.7, -2.0, 0.6250),
    ],
)
def test_gradient_weight_is_per_unit_advantage(name, r, a, weight):
    assert gradient_weight(name, r, a) == pytest.approx(weight, abs=5e-5)


def test_gradient_weight_is_computed_in_float64():
    """min(r, 5) at r = 1.3 and A = 0.3, neither exact in float32: 1.3 to float64's precision."""
    assert gradient_weight("cispo", 1.3, 0.3) == pytest.approx(1.3, rel=1e-14)


def _resample_by_paths(q: float, n: int, max_batches: int) -> tuple[float, float]:
    """resample_expectation by enumerating every sequence of batch outcomes (x mixed groups of
    n in each batch) to the step's stop: n mixed groups found, or max_batches drawn."""

    def walk(found: int, p: float, drawn: int) -> tuple[float, float]:
        if found >= n or drawn == max_batches:
            return p * drawn, p * min(found, n) / n
        parts = [
            walk(found + x, p * math.comb(n, x) * q**x * (1 - q) ** (n - x), drawn + 1)
            for x in range(n + 1)
        ]
        return sum(b for b, _ in parts), sum(s for _, s in parts)

    return walk(0, 1.0, 0)


def test_resample_expectation_exactly():
    """Two groups a batch, each mixed with probability 1/2, at most two batches: the first batch
    fills the step a quarter of the time (1.75 batches); after two, 11/16 of steps hold both
    mixed groups, 4/16 one and 1/16 none, a mixed share of (22 + 4) / 32 = 13/16."""
    assert resample_expectation(0.5, 2, 2) == pytest.approx((1.75, 13 / 16), abs=1e-15)
    # every group mixed: one batch fills the step; none: every step draws the cap, in vain
    assert resample_expectation(1.0, 4, 3) == (1.0, 1.0)
    assert resample_expectation(0.0, 4, 3) == (3.0, 0.0)
    for case in ((0.78, 4, 4), (0.3, 3, 3), (0.6, 2, 5)):
        assert resample_expectation(*case) == pytest.approx(_resample_by_paths(*case), abs=1e-12)
