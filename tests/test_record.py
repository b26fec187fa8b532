"""The objective record and the worked-numbers sheet."""

import csv
import json

import pytest

from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.objective.calculations import write_sheet
from grpo_ablation.objective.record import ObjectiveRecord

DESIGN_FIELDS = {
    "std_scaling",
    "std_eps",
    "aggregation",
    "normaliser",
    "completion_mask",
    "mask_truncated_completions",
    "beta",
    "kl_estimator",
    "clip_eps_low",
    "clip_eps_high",
    "group_size",
    "prompts_per_step",
    "per_device_batch_size",
    "generation_batch_size",
    "gradient_accumulation_steps",
    "num_processes",
    "normaliser_reduction",
    "library_versions",
}


def test_record_holds_every_field_design_lists_and_round_trips(tmp_path):
    cfg = TrainingConfig(
        std_scaling="population",
        aggregation="constant",
        group_size=4,
        prompts_per_step=6,
        gradient_accumulation_steps=2,
        beta=0.04,
    )
    record = ObjectiveRecord.from_config(cfg, num_processes=3, answer_rule="full_match_digits")
    data = json.loads(record.to_json())
    assert data.keys() >= DESIGN_FIELDS
    assert data["per_device_batch_size"] == 4 and data["generation_batch_size"] == 24
    assert data["normaliser"] == "B * L_max"
    assert data["answer_rule"] == "full_match_digits" and "'full_match_digits'" in record.describe()
    assert set(data["library_versions"]) >= {"torch", "transformers", "trl"}
    assert ObjectiveRecord.from_dict(data) == record
    record.write(tmp_path)
    assert json.loads((tmp_path / "objective.json").read_text()) == data


def test_describe_is_one_plain_paragraph_naming_the_choices():
    text = ObjectiveRecord.from_config(
        TrainingConfig(std_scaling="population", std_eps=1e-4), 1
    ).describe()
    assert "\n" not in text
    assert "divided by the population std (ddof=0) of the group plus 0.0001" in text
    assert "averaged within each completion" in text
    assert "no KL term" in text
    text = ObjectiveRecord.from_config(
        TrainingConfig(std_scaling="none", aggregation="token_mean", beta=0.1), 2
    ).describe()
    assert (
        "not divided by any std" in text and "k3 estimate of KL" in text and "2 process(es)" in text
    )


def test_invalid_names_in_the_training_config_are_named():
    with pytest.raises(ValueError, match="std scaling 'zscore'"):
        TrainingConfig(std_scaling="zscore")
    with pytest.raises(ValueError, match="length aggregation 'seq'"):
        TrainingConfig(aggregation="seq")


def test_batch_that_cannot_be_split_is_refused():
    with pytest.raises(ValueError, match="cannot be split"):
        TrainingConfig(group_size=3, prompts_per_step=3).per_device_batch_size(2)


def test_calculations_sheet_carries_the_worked_numbers(tmp_path):
    md, csv_path, _, view = write_sheet(tmp_path)
    text = md.read_text()
    assert "(1.7321, -0.5774, -0.5774, -0.5774)" in text
    assert "(1.5000, -0.5000, -0.5000, -0.5000)" in text
    assert "weights 0.2500 / 0.0625; aggregate 0.0000" in text
    assert "weights 0.1000 / 0.1000; aggregate -0.6000" in text
    assert "0.588800" in text and "0.832225" in text
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) == text.count("\n| ") - text.count("| case |")
    # the report's view: each section's table rendered, the same numbers, nothing left as markup
    page = view.read_text()
    assert page.count("<table") == text.count("\n## ") and "system-message" not in page
    assert "(1.7321, -0.5774, -0.5774, -0.5774)" in page and "| case |" not in page


def test_the_stages_expectations_are_computed_in_the_sheet(tmp_path):
    md = write_sheet(tmp_path)[0]
    text = md.read_text()
    assert (
        "| population / sample advantage at eps=0, G=8 | sqrt(G/(G-1)), the same for every group | 1.0690 |"
        in text
    )
    # mu = 1: the ratio is exactly 1 and nothing is clipped
    assert "fraction clipped at eps=0.2 | exp(logp - stop_gradient(logp)) | 0; 0 |" in text
    # zero_variance filter on lengths (2, 8 | 3, 3 | 5, 1) with the middle group dropped: B 6 -> 4
    # (and 3 -> 2 groups) gives 1.5; token_mean's 22 -> 16 tokens gives 1.375
    for mode, factor in [
        ("sequence_mean", "1.5000"),
        ("token_mean", "1.3750"),
        ("group_token_mean", "1.5000"),
        ("constant", "1.5000"),
    ]:
        row = f"zero_variance filter, {mode}: kept weights / kept weights under keep |"
        assert (
            f"{row} lengths (2, 8 | 3, 3 | 5, 1), middle group zero-variance | "
            + ", ".join([factor] * 4)
            in text
        ), mode


def test_the_push_predictions_are_computed_in_the_sheet(tmp_path):
    md = write_sheet(tmp_path)[0]
    text = md.read_text()
    # sqrt(4/3) = 1.1547 on every completion: population and sample point the same way.
    assert "(1.1547, 1.1547, 1.1547, 1.1547) ..." in text
    # The long wrong completion holds half the update's weight under 1/L, 80% under constant.
    long_wrong = (
        "share of the update's token weight on the long wrong completion (2 right, 8 wrong)"
    )
    assert f"| {long_wrong} | sequence_mean | 0.5000 |" in text
    assert f"| {long_wrong} | constant | 0.8000 |" in text


def test_the_record_says_what_the_trainer_does_with_processes_and_accumulation():
    """The trainer's loss is multiplied by rank_loss_scale (the number of processes) and by
    nothing for accumulation; the conformance tests check that the gradient is the same for 1 or 2
    processes and 1 or 2 accumulation steps. The record must say the same."""
    import ast
    from pathlib import Path

    from grpo_ablation.objective.formulas import rank_loss_scale
    from grpo_ablation.training import trainer

    assert rank_loss_scale(1) == 1 and rank_loss_scale(4) == 4
    source = Path(trainer.__file__).read_text()
    calls = {
        n.func.id
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert (
        "rank_loss_scale" in calls
        and "gradient_accumulation_steps"
        not in source.split("def _compute_loss")[1].split("def ")[0]
    )
    text = ObjectiveRecord.from_config(TrainingConfig(), 2).describe()
    assert "multiplied by the number of processes" in text
    assert "accumulation steps add up unscaled" in text
    assert "by the accumulation steps" not in text


def test_the_vllm_importance_sampling_bounds_are_passed_and_recorded(monkeypatch):
    import dataclasses
    import importlib.util

    from trl import GRPOConfig

    from grpo_ablation.objective.conventions import VLLM_IS_CLIP
    from grpo_ablation.training import train

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    # TRL's own defaults today: passing them explicitly changes no run, and pins them.
    assert (
        defaults["vllm_importance_sampling_clip_min"],
        defaults["vllm_importance_sampling_clip_max"],
    ) == VLLM_IS_CLIP
    cfg = TrainingConfig(generation_backend="vllm")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: object() if n == "vllm" else real(n, *a)
    )
    args = train._vllm_args(cfg)
    assert (
        args["vllm_importance_sampling_clip_min"],
        args["vllm_importance_sampling_clip_max"],
    ) == VLLM_IS_CLIP
    record = ObjectiveRecord.from_config(cfg, 1)
    assert record.generation.endswith("ratio bounds [C_min, C_max] = [None, 3.0]")


def test_the_record_names_its_gradient_clipping_and_an_old_record_the_trainers_default():
    record = ObjectiveRecord.from_config(TrainingConfig(), 1)
    assert record.to_dict()["max_grad_norm"] == 1.0
    assert "clipped to a global norm of 1 " in record.describe()
    off = ObjectiveRecord.from_config(TrainingConfig(max_grad_norm=0.0), 1)
    assert "The gradient is not clipped." in off.describe()
    old = record.to_dict()
    del old["max_grad_norm"]  # written before the option: the Trainer's 1.0 ran
    assert "clipped to a global norm of 1 " in ObjectiveRecord.from_dict(old).describe()


def test_the_record_names_the_policy_term_the_baseline_and_the_length_controls():
    """The ratio entry with its caps and level, the leave-one-out baseline, where the LM head's
    logits are computed and which tokens enter the loss; a record written before the options
    existed reads as the clipped token-level term with the group-mean baseline."""
    record = ObjectiveRecord.from_config(
        TrainingConfig(ratio="cispo", cispo_cap=0.2, baseline="leave_one_out"), 1, dtype="bfloat16"
    )
    text = record.describe()
    assert "min(r, 0.2) times A log π (CISPO), r = pi_theta / pi_old per token" in text
    assert "leave-one-out, RLOO" in text and "n/(n-1)" in text
    assert record.to_dict()["lm_head_precision"].startswith("bfloat16 under autocast")
    assert "no entropy mask" in record.to_dict()["token_selection"]
    gspo = ObjectiveRecord.from_config(TrainingConfig(ratio_level="sequence", clip_delta=3.0), 1)
    assert "r itself capped at 3 (dual clip), r per completion" in gspo.describe()
    old = ObjectiveRecord.from_config(TrainingConfig(), 1).to_dict()
    for key in ("ratio", "ratio_level", "clip_delta", "cispo_cap", "baseline"):
        del old[key]
    text = ObjectiveRecord.from_dict(old).describe()
    assert "the PPO clipped-ratio term min(r A, clip(r, 1-0.2, 1+0.2) A), r = pi_theta" in text
    assert "leave-one-out" not in text


def test_tf32_is_recorded_stated_and_kept_out_of_the_compute_sections_identity_when_off():
    from grpo_ablation.design.options import ComputeConfig

    on = ObjectiveRecord.from_config(TrainingConfig(), 1, tf32=True)
    off = ObjectiveRecord.from_config(TrainingConfig(), 1)
    assert on.tf32 and "float32 matrix products in TF32" in on.describe()
    assert not off.tf32 and "TF32" not in off.describe()
    assert ObjectiveRecord.from_dict(json.loads(on.to_json())).tf32
    before = json.loads(off.to_json())
    del before["tf32"]  # a record written before the option: IEEE float32
    assert not ObjectiveRecord.from_dict(before).tf32
    # the compute section's file (the jobs' rerun trigger) leaves it out at its neutral value
    assert "tf32" not in ComputeConfig().section_identity()
    assert ComputeConfig(tf32=True).section_identity()["tf32"] is True
