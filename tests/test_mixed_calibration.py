"""The mixed-group calibration: groups read from the rollout log, predicted from probabilities
measured without them, judged against the spread of a sum of Bernoulli variables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from grpo_ablation.analysis.calibration import calibration_table
from grpo_ablation.analysis.prose.calibration import calibration_reading
from grpo_ablation.evaluation.calibration import policy_groups


def _rollout(step: int, group: int, correct: list[bool | None], prompt: str) -> list[dict]:
    return [
        {
            "step": step,
            "group_index": group,
            "prompt_id": prompt,
            "correct": c,
            "group_category": "x",
            "in_loss": True,
        }
        for c in correct
    ]


def test_groups_of_the_saved_policies_steps_only_with_their_counts() -> None:
    rows = [
        *_rollout(0, 0, [True, False, True, True], "a"),
        *_rollout(0, 1, [None, False, False, False], "b"),
        *_rollout(1, 0, [True, True, True, True], "c"),  # no saved policy sampled step 1
        *_rollout(50, 3, [False] * 4, "d"),
    ]
    groups = policy_groups(rows, {0, 50})
    assert [(g["step"], g["group_index"], g["prompt_id"]) for g in groups] == [
        (0, 0, "a"),
        (0, 1, "b"),
        (50, 3, "d"),
    ]
    assert [(g["size"], g["correct"], g["failed"]) for g in groups] == [
        (4, 3, 0),
        (4, 0, 1),
        (4, 0, 0),
    ]


def _groups(cell: str, G: int, p: float, observed: list[int], reference: str) -> list[dict]:
    q = 1 - p**G - (1 - p) ** G
    return [
        {
            "stage": "s",
            "cell": cell,
            "reference": reference,
            "G": G,
            "failed": False,
            "observed": o,
            "p": p,
            "p_unresolved": 1e-6,
            "predicted": q,
        }
        for o in observed
    ]


def test_worked_calibration_numbers() -> None:
    # Reference: p = 0.5, G = 2, so q = 0.5; 2 of 4 mixed: predicted 0.5, SD of the observed
    # fraction sqrt(4 · 0.25) / 4 = 0.25, interval 0.5 ± 0.49, z = 0: within.
    # Other cell: p = 0.5, G = 8, q = 1 − 2/256 = 0.9921875; 0 of 4 mixed: far outside. From the
    # reference's p at G = 8 the prediction is the same 0.9921875.
    groups = pd.DataFrame(
        _groups("ref", 2, 0.5, [1, 0, 1, 0], "ref") + _groups("big", 8, 0.5, [0] * 4, "ref")
    )
    table = calibration_table(groups).set_index("cell")
    assert table.loc["ref", "predicted"] == pytest.approx(0.5)
    assert table.loc["ref", "predicted_low"] == pytest.approx(0.5 - 1.959964 * 0.25, abs=1e-6)
    assert table.loc["ref", "z"] == pytest.approx(0.0) and table.loc["ref", "within"]
    assert math.isnan(table.loc["ref", "predicted_from_reference"])
    assert table.loc["big", "predicted"] == pytest.approx(0.9921875)
    assert not table.loc["big", "within"] and table.loc["big", "z"] < -10
    assert table.loc["big", "predicted_from_reference"] == pytest.approx(0.9921875)
    reading = calibration_reading(table.reset_index())
    assert (
        "1 of 2 cells outside their 95% prediction interval (0.1 expected by chance if" in reading
    )
    assert "big predicted 0.992, observed 0.000" in reading


def test_unmeasured_calibration_says_so() -> None:
    assert "not measured" in calibration_reading(calibration_table(pd.DataFrame()))
