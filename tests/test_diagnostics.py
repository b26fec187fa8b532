"""Diagnostics from the rollout log on synthetic runs with known answers."""

import json

import pandas as pd
import pytest

from grpo_ablation.analysis.diagnostics import (
    group_frame,
    run_summary,
    step_diagnostics,
)
from grpo_ablation.analysis.jobs.diagnostics import write_run_diagnostics
from grpo_ablation.objective.formulas import mixed_group_probability
from grpo_ablation.training.rollout_log import RolloutLog

G = 2
OBJECTIVE = {
    "group_size": G,
    "aggregation": "sequence_mean",
    "max_completion_length": 8,
    "beta": 0.0,
    "mask_truncated_completions": False,
}


def rows(step, groups):
    """groups: list of (prompt_id, [(reward, length, truncated), ...])."""
    out = []
    for gi, (pid, members) in enumerate(groups):
        for ci, (reward, length, truncated) in enumerate(members):
            out.append(
                {
                    "step": step,
                    "rank": 0,
                    "prompt_id": pid,
                    "group_index": gi,
                    "completion_index": ci,
                    "prompt": "p",
                    "completion": "c",
                    "reward": reward,
                    "scoring_failure": None if reward is not None else "boom",
                    "correct": None if reward is None else reward >= 1.0,
                    "length": length,
                    "truncated": truncated,
                    "advantage": 0.0,
                    "group_category": "unused",
                    "in_loss": True,
                    "generation_batch": 0,
                    "in_batch": True,
                }
            )
    return out


# Step 0: two all-correct groups, one mixed, one whose scoring failed.
STEP0 = rows(
    0,
    [
        (10, [(1.0, 2, False), (1.0, 2, False)]),
        (11, [(1.0, 3, False), (1.0, 3, False)]),
        (12, [(1.0, 2, False), (0.0, 8, True)]),
        (13, [(None, 4, False), (0.0, 4, False)]),
    ],
)
# Step 1: one all-incorrect group and one mixed group.
STEP1 = rows(1, [(10, [(0.0, 8, True), (0.0, 6, False)]), (12, [(1.0, 4, False), (0.0, 4, False)])])
METRICS = pd.DataFrame(
    [
        {"step": 1, "ratio_clip/low": 0.1, "ratio_clip/high": 0.0},
        {"step": 2, "ratio_clip/low": 0.0, "ratio_clip/high": 0.2},
    ]
)


@pytest.fixture
def steps():
    return step_diagnostics(pd.DataFrame(STEP0 + STEP1), METRICS, OBJECTIVE).set_index("step")


def test_each_group_category_is_counted_on_its_own(steps):
    s0 = steps.loc[0]
    assert (
        s0["count/all_correct"],
        s0["count/mixed"],
        s0["count/failed_scoring"],
        s0["count/all_incorrect"],
    ) == (2, 1, 1, 0)
    assert s0["fraction/all_correct"] == 0.5 and s0["fraction/failed_scoring"] == 0.25
    assert steps.loc[1, "count/all_incorrect"] == 1 and steps.loc[1, "count/mixed"] == 1


def test_category_is_recomputed_from_rewards_not_taken_from_the_log():
    groups = group_frame(pd.DataFrame(STEP0))
    assert list(groups["category"]) == ["all_correct", "all_correct", "mixed", "failed_scoring"]


def test_zero_std_groups_are_those_whose_scored_rewards_are_equal(steps):
    # the two all-correct groups, and the failed one with a single scored reward
    assert steps.loc[0, "zero_std_fraction"] == 0.75
    assert steps.loc[1, "zero_std_fraction"] == 0.5


def test_mixed_prediction_uses_per_prompt_p_from_the_same_step(steps):
    # Scored prompts at step 0: p̂ = 1, 1, 1/2 -> predictions 0, 0, 1 - 1/4 - 1/4.
    assert steps.loc[0, "mixed_observed"] == pytest.approx(1 / 3)
    assert steps.loc[0, "mixed_predicted"] == pytest.approx(mixed_group_probability(0.5, G) / 3)
    # Pooled: 5 of 6 scored completions correct.
    assert steps.loc[0, "mixed_predicted_pooled"] == pytest.approx(
        mixed_group_probability(5 / 6, G)
    )


def test_truncation_comes_from_rollouts_and_ratio_clipping_from_metrics(steps):
    assert steps.loc[0, "truncation_rate"] == pytest.approx(1 / 8)
    assert steps.loc[1, "truncation_rate"] == pytest.approx(1 / 4)
    # metrics step m (1-based) trained on the batch generated at step m - 1
    assert steps.loc[0, "ratio_clip/low"] == 0.1 and steps.loc[1, "ratio_clip/high"] == 0.2
    assert not any("clipped" in c for c in steps.columns)


def test_lengths_are_split_into_correct_and_incorrect(steps):
    # correct at step 0: 2, 2, 3, 3, 2; incorrect (scored): 8, 4
    assert steps.loc[0, "length/correct"] == pytest.approx(12 / 5)
    assert steps.loc[0, "length/incorrect"] == pytest.approx(6.0)


def test_homogeneous_groups_hold_token_weight_under_every_aggregation():
    frame = pd.DataFrame(STEP0)
    # Tokens at step 0: homogeneous 10, mixed 10, failed 8; completions: 4 homogeneous of 8.
    for agg, expected in {
        "sequence_mean": 0.5,
        "token_mean": 10 / 28,
        "constant": 10 / 28,
        "group_token_mean": 0.5,
    }.items():
        s = step_diagnostics(frame, METRICS, {**OBJECTIVE, "aggregation": agg}).iloc[0]
        assert s["weight_share/homogeneous"] == pytest.approx(expected), agg
        shares = [
            s[f"weight_share/{c}"]
            for c in ("all_correct", "all_incorrect", "mixed", "failed_scoring")
        ]
        assert sum(shares) == pytest.approx(1.0)
        assert s["kl_weight/homogeneous"] == 0.0  # beta = 0: nothing multiplies it
    s = step_diagnostics(frame, METRICS, {**OBJECTIVE, "beta": 0.04}).iloc[0]
    assert s["kl_weight/homogeneous"] == pytest.approx(0.04 * 0.5)


def test_masked_truncated_completions_hold_no_weight():
    s = step_diagnostics(
        pd.DataFrame(STEP1),
        METRICS,
        {**OBJECTIVE, "aggregation": "token_mean", "mask_truncated_completions": True},
    ).iloc[0]
    assert s["weight_share/all_incorrect"] == pytest.approx(6 / 14)


def test_run_summary_adds_counts_over_steps(steps):
    summary = run_summary(steps.reset_index())
    assert (
        summary["groups"] == 6
        and summary["count/mixed"] == 2
        and summary["count/failed_scoring"] == 1
    )
    assert summary["fraction/mixed"] == pytest.approx(2 / 6)
    assert summary["zero_std_fraction"] == pytest.approx(4 / 6)


def test_write_run_diagnostics_reads_a_run_directory(tmp_path):
    run = tmp_path / "run"
    RolloutLog(run / "rollouts", 0).append(STEP0 + STEP1)
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps(m) + "\n" for m in METRICS.to_dict("records"))
    )
    (run / "objective.json").write_text(json.dumps(OBJECTIVE))
    (run / "budget.json").write_text(json.dumps({"wall_time_s": 1.0}))
    steps_csv, summary_json = write_run_diagnostics(run, tmp_path / "out")
    assert len(pd.read_csv(steps_csv)) == 2
    summary = json.loads(summary_json.read_text())
    assert summary["count/all_correct"] == 2 and summary["budget"]["wall_time_s"] == 1.0


def test_each_optimizer_steps_clip_factor_and_whether_clipping_bound_come_from_its_norm():
    from grpo_ablation.analysis.diagnostics import gradient_clipping

    metrics = pd.DataFrame({"step": [1, 2, 3], "grad_norm": [0.5, 2.0, float("nan")]})
    out = gradient_clipping(metrics, 1.0)
    assert out["grad_clip_factor"].tolist()[:2] == [1.0, 1 / 2.000001]
    assert out["grad_clipped"].tolist()[:2] == [False, True]
    assert out[["grad_clip_factor", "grad_clipped"]].iloc[2].isna().all()  # no norm logged
    off = gradient_clipping(metrics.iloc[:2], 0.0)
    assert off["grad_clip_factor"].tolist() == [1.0, 1.0] and not off["grad_clipped"].any()
