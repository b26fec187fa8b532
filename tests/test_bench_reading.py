"""A speed target is read from the processes' ratios with their interval: met, not met, or not
resolved by the benchmark (hand-worked: t_{2, 0.975} = 4.303)."""

import math

import pytest

from benchmarks.trainer import reading


def test_a_target_inside_the_interval_is_not_resolved():
    # mean 0.97, SD 0.01 over three processes: ±4.303 · 0.01 / √3 = ±0.0248
    r = reading([0.96, 0.97, 0.98], 0.95)
    assert r["ratio_mean"] == pytest.approx(0.97)
    assert r["ratio_ci95"] == pytest.approx([0.9452, 0.9948], abs=1e-4)
    assert r["verdict"] == "not resolved"


def test_an_interval_above_the_target_meets_it_and_one_below_does_not():
    assert reading([0.990, 0.995, 1.000], 0.95)["verdict"] == "met"  # [0.9826, 1.0074]
    assert reading([0.90, 0.91, 0.92], 0.95)["verdict"] == "not met"  # [0.8852, 0.9348]


def test_one_process_has_no_interval_and_resolves_nothing():
    r = reading([0.99], 0.95)
    assert r["verdict"] == "not resolved" and all(math.isnan(x) for x in r["ratio_ci95"])
