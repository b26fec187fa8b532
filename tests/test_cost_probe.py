"""The cost estimate: its arithmetic on worked numbers, and a real cost probe of the
cluster-shaped CPU config (the preset's twin) that measures and projects."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from grpo_ablation.design.schema import load_config
from grpo_ablation.training.cost_probe import (
    Measurement,
    dag_shape,
    over_limit,
    project,
)
from grpo_ablation.training.step_timing import step_times

ROOT = Path(__file__).resolve().parents[1]


def test_the_preset_dag_has_21_runs_of_5_checkpoints_on_one_gpu_each():
    shape = dag_shape(load_config(ROOT / "config/cluster.yaml"))
    assert shape == {
        "cells": 7,
        "base_policies": 1,
        "runs": 21,
        "max_steps": 500,
        "checkpoints_per_run": 5,
        "sft_steps": 0,
        "train_gpus": 1,
        "eval_gpus": 1,
        "runs_per_gpu": 1,
    }
    # under base-policy draws every cell and seed runs once per draw, after a warm start each
    drawn = load_config(ROOT / "config/config.yaml")
    draws = len(drawn["base_policy"]["draws"])  # 2 in the default: 13 cells x 1 seed x 2 draws
    assert draws >= 2
    assert dag_shape(drawn)["base_policies"] == draws and dag_shape(drawn)["runs"] == 13 * draws


def test_the_projection_prices_the_steady_step_and_the_warm_up_and_saves_once_each():
    m = Measurement(
        train_setup_s=40,
        train_step_s=10,
        sft_step_s=0,
        eval_checkpoint_s=100,
        eval_validation_s=20,
        weights_bytes=2_000_000_000,
        optimizer_bytes=4_000_000_000,
        peak_memory_bytes=0,
        peak_memory_kind="gpu",
        train_warmup_s=25,
        train_save_s=1,
    )
    shape = {
        "cells": 7,
        "runs": 21,
        "max_steps": 500,
        "checkpoints_per_run": 5,
        "sft_steps": 0,
        "train_gpus": 2,
        "eval_gpus": 1,
    }
    p = project(m, shape)
    # set-up, the first step, 499 steady steps, 5 saves: 40 + 25 + 4990 + 5 = 5060 s
    train, evaluation, base_eval = 40 + 25 + 499 * 10 + 5 * 1, 5 * 100 + 20, 100 + 20
    assert p["train_run_s"] == train == 5060 and p["eval_run_s"] == evaluation
    assert p["job_hours"] == pytest.approx((base_eval + 21 * (train + evaluation)) / 3600)
    assert p["gpu_hours"] == pytest.approx((base_eval + 21 * (2 * train + evaluation)) / 3600)
    assert p["wall_hours_critical_path"] == pytest.approx((train + evaluation) / 3600)
    assert p["checkpoint_disk_bytes"] == 21 * (5 * 2_000_000_000 + 4_000_000_000)
    # Each job against the runtime its rule requests: train 5060 s = 84.3 min, evaluate 8.7 min.
    limits = {"base_policy_runtime": 60, "train_runtime": 85, "eval_runtime": 9}
    assert over_limit(p, limits) == []
    assert over_limit(p, limits | {"train_runtime": 84, "eval_runtime": 8}) == [
        "train jobs are projected to take 84.3 min but request resources.train_runtime"
        " = 84 min: set it to 106 (or shorten the job)",  # 84.33 x 1.25 = 105.4
        "evaluate jobs are projected to take 8.7 min but request resources.eval_runtime"
        " = 8 min: set it to 11 (or shorten the job)",  # 8.67 x 1.25 = 10.8
    ]


def test_a_record_written_before_the_split_reads_and_projects_as_it_did():
    """Its ``measured`` has no warm-up or save: train_step_s was the whole trainer.train() over
    the steps, priced as before (set-up + steps x step)."""
    old = {
        "train_setup_s": 60.0,
        "train_step_s": 10.0,
        "sft_step_s": 0.0,
        "eval_checkpoint_s": 100.0,
        "eval_validation_s": 20.0,
        "weights_bytes": 1,
        "optimizer_bytes": 1,
        "peak_memory_bytes": 0,
        "peak_memory_kind": "gpu",
        "train_peak_gpu_bytes": None,
        "gpu_total_bytes": None,
    }
    shape = {"runs": 1, "max_steps": 500, "checkpoints_per_run": 5, "sft_steps": 0}
    p = project(Measurement(**old), shape | {"train_gpus": 1, "eval_gpus": 1})
    assert p["train_run_s"] == 60 + 500 * 10


def test_step_times_split_the_first_step_and_the_saves_from_the_steady_step():
    times = step_times(
        [9.0, 2.0, 3.0, 1.0],
        [0.5, 1.5],
        generation_s=[5.0, 1.0, 2.0, 0.5],
        generated=[100, 100, 200, 50],
        updated=[400, 400, 600, 100],
    )
    assert (times.warmup_s, times.step_s, times.save_s) == (9.0, 2.0, 1.0)
    # over the steady steps: 350 positions in 3.5 s of generate, 1,100 in the other 2.5 s
    assert times.generation_tokens_per_s == 100.0 and times.update_tokens_per_s == 440.0
    alone = step_times([4.0], [])
    assert (alone.warmup_s, alone.step_s, alone.save_s) == (4.0, 4.0, 0.0)
    assert alone.generation_tokens_per_s is None and alone.update_tokens_per_s is None


def test_the_step_timer_marks_steps_saves_and_the_generate_inside_them():
    """The trainer's events in order (on_step_end, then on_save after the step's logging), and a
    model whose generate returns 2 rows of a 3-token prompt and 5 new tokens."""
    import torch

    from grpo_ablation.training.step_timing import StepTimer

    class Model:
        def generate(self, input_ids, **kw):
            return torch.zeros(2, input_ids.shape[1] + 5)

    model, timer = Model(), StepTimer()
    timer.on_train_begin(None, None, None, model=model)
    for step in range(3):
        timer.on_step_begin(None, None, None)
        model.generate(input_ids=torch.zeros(2, 3))
        timer.on_step_end(None, None, None)
        if step == 1:
            timer.on_save(None, None, None)
    assert len(timer.steps_s) == 3 and len(timer.saves_s) == 1
    assert timer.generated == [10, 10, 10] and timer.updated == [16, 16, 16]
    assert all(0 < g <= s for g, s in zip(timer.generation_s, timer.steps_s, strict=True))
    assert timer.times().generation_tokens_per_s > 0


@pytest.mark.slow
def test_probing_the_cost_of_the_cluster_shaped_config_on_cpu(tmp_path):
    from grpo_ablation.training.cost_probe import probe_cost

    config = yaml.safe_load((ROOT / "config/cluster_smoke.yaml").read_text())
    config["task"]["dataset_path"] = str(tmp_path / "hub/gsm8k")
    config["base_policy"]["name"] = str(tmp_path / "hub/qwen2-tiny")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    probe_cost(path, 3, tmp_path / "cost_probe.json", None)
    record = json.loads((tmp_path / "cost_probe.json").read_text())
    m, p = record["measured"], record["projection"]
    assert m["train_step_s"] > 0 and m["eval_checkpoint_s"] > 0 and m["sft_step_s"] > 0
    assert m["train_warmup_s"] > 0 and m["train_save_s"] > 0 and m["train_setup_s"] > 0
    assert m["generation_tokens_per_s"] > 0 and m["update_tokens_per_s"] > 0
    assert m["weights_bytes"] > 100_000 and m["optimizer_bytes"] > m["weights_bytes"]
    assert m["peak_memory_kind"] == "host RSS" and m["peak_memory_bytes"] > 100 * 2**20
    assert record["dag"]["runs"] == 6 and p["gpu_hours"] == 0  # CPU config: no GPU requested
    assert p["job_hours"] > p["wall_hours_critical_path"] > 0
    # A request the projection exceeds: the record is written, and the probe refuses.
    config["resources"]["train_runtime"] = 1
    config["training"]["max_steps"] = 10_000
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(SystemExit, match="do not submit this config as it is"):
        probe_cost(path, 1, tmp_path / "refused.json", None)
    refused = json.loads((tmp_path / "refused.json").read_text())["over_limit"]
    assert refused[0].startswith(
        "train jobs are projected"
    )  # (and its 5,000 checkpoints' evaluation)


def test_the_memory_plan_moves_vllms_share_with_the_card_and_names_the_knobs():
    """The issue's preset estimate: ~45 GiB of training, a colocated engine at 0.3. Calibrated on an
    80 GiB GPU, the peak holds the engine's 24 GiB too: 69 GiB, under 90% of 80 (72). On a 40 GiB
    card the engine takes 12 GiB: 45 + 12 = 57 GiB against 36 usable."""
    from grpo_ablation.design.options import ComputeConfig, TrainingConfig
    from grpo_ablation.training.cost_probe import memory_plan

    gib = 1024**3
    m = Measurement(
        train_setup_s=0,
        train_step_s=1,
        sft_step_s=0,
        eval_checkpoint_s=1,
        eval_validation_s=1,
        weights_bytes=0,
        optimizer_bytes=0,
        peak_memory_bytes=69 * gib,
        peak_memory_kind="gpu",
        train_peak_gpu_bytes=69 * gib,
        gpu_total_bytes=80 * gib,
    )
    colocated = TrainingConfig(
        group_size=8, prompts_per_step=4, generation_backend="vllm", vllm_gpu_memory_utilization=0.3
    )
    compute = ComputeConfig()
    assert memory_plan(m, colocated, compute, None) == []  # the probing card: 69 <= 72
    assert memory_plan(m, colocated, compute, 80) == []
    (line,) = memory_plan(m, colocated, compute, 40)
    assert line.startswith(
        "train jobs are projected to need 57.0 GiB of a 40 GiB GPU (90% of it usable; "
        "vLLM's share 0.3 included): set compute.gradient_checkpointing: true"
    )
    assert (
        "training.gradient_accumulation_steps: 2 (micro-batches of 16 completions, not 32" in line
    )
    assert "training.vllm_gpu_memory_utilization below 0.3" in line
    assert "training.scoring_batch_size: 16 (logits of 16 completions per forward pass" in line
    scored = replace(colocated, scoring_batch_size=4)
    assert "training.scoring_batch_size: 2 (" in memory_plan(m, scored, compute, 40)[0]
    # Without vLLM the 45 GiB peak is the training's alone: it fits 80 (72) but not 48 (43.2).
    alone = replace(m, train_peak_gpu_bytes=45 * gib)
    plain = replace(colocated, generation_backend="transformers")
    assert memory_plan(alone, plain, compute, 80) == []
    (line,) = memory_plan(alone, plain, replace(compute, gradient_checkpointing=True), 48)
    assert "45.0 GiB of a 48 GiB GPU (90% of it usable)" in line
    assert "gradient_checkpointing" not in line and "vllm" not in line
    # On CPU there is no GPU plan.
    assert memory_plan(replace(m, train_peak_gpu_bytes=None), colocated, compute, 40) == []
