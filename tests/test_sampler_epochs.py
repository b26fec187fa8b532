"""The prompt order of each epoch is a function of the pair (seed, epoch): no two (seed, epoch)
pairs share an order, so runs of neighbouring seeds do not repeat each other's prompts."""

from __future__ import annotations

from grpo_ablation.training.trainer import EpochSeededRepeatSampler

N = 64  # prompts in the train split


def order(seed: int, epoch: int) -> list[int]:
    sampler = EpochSeededRepeatSampler(
        data_source=list(range(N)), mini_repeat_count=2, batch_size=4, shuffle=True, seed=seed
    )
    sampler.set_epoch(epoch)
    return list(sampler)


def test_a_seeds_second_epoch_is_not_the_next_seeds_first():
    # With the order seeded by seed + epoch these were equal.
    for seed in range(5):
        assert order(seed, 1) != order(seed + 1, 0)
        assert order(seed + 1, 1) != order(seed, 2)


def test_every_seed_and_epoch_has_its_own_order():
    orders = {tuple(order(seed, epoch)) for seed in range(4) for epoch in range(3)}
    assert len(orders) == 12


def test_the_order_is_a_function_of_seed_and_epoch():
    # A fresh sampler (a resumed run) sees the order of an uninterrupted one, whatever came before.
    sampler = EpochSeededRepeatSampler(
        data_source=list(range(N)), mini_repeat_count=2, batch_size=4, shuffle=True, seed=3
    )
    for epoch in range(3):
        sampler.set_epoch(epoch)
        assert list(sampler) == order(3, epoch)
    assert order(3, 1) == order(3, 1)
    # Each epoch is a permutation of the prompts, each repeated mini_repeat_count times.
    assert sorted(order(3, 1)) == sorted(list(range(N)) * 2)
