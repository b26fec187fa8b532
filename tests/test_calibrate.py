"""The cost estimate: its arithmetic on worked numbers, and a real calibration of the
cluster-shaped CPU config (the preset's twin) that measures and projects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from grpo_ablation.training.calibrate import (
    Measurement,
    dag_shape,
    load_config,
    over_limit,
    project,
)

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
    }
    # under base-policy draws every cell and seed runs once per draw, after a warm start each
    drawn = load_config(ROOT / "config/config.yaml")
    assert dag_shape(drawn)["base_policies"] == 3 and dag_shape(drawn)["runs"] == 13 * 1 * 3


def test_the_projection_adds_up_the_jobs_of_the_dag():
    m = Measurement(
        train_setup_s=60,
        train_step_s=10,
        sft_step_s=0,
        eval_checkpoint_s=100,
        eval_validation_s=20,
        weights_bytes=2_000_000_000,
        optimizer_bytes=4_000_000_000,
        peak_memory_bytes=0,
        peak_memory_kind="gpu",
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
    train, evaluation, base_eval = 60 + 500 * 10, 5 * 100 + 20, 100 + 20  # 5060 s, 520 s, 120 s
    assert p["train_run_s"] == train and p["eval_run_s"] == evaluation
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


@pytest.mark.slow
def test_calibrating_the_cluster_shaped_config_on_cpu(tmp_path):
    from grpo_ablation.training.calibrate import calibrate

    config = yaml.safe_load((ROOT / "config/cluster_smoke.yaml").read_text())
    config["task"]["dataset_path"] = str(tmp_path / "hub/gsm8k")
    config["base_policy"]["name"] = str(tmp_path / "hub/qwen2-tiny")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    calibrate(path, 3, tmp_path / "calibration.json", None)
    record = json.loads((tmp_path / "calibration.json").read_text())
    m, p = record["measured"], record["projection"]
    assert m["train_step_s"] > 0 and m["eval_checkpoint_s"] > 0 and m["sft_step_s"] > 0
    assert m["weights_bytes"] > 100_000 and m["optimizer_bytes"] > m["weights_bytes"]
    assert m["peak_memory_kind"] == "host RSS" and m["peak_memory_bytes"] > 100 * 2**20
    assert record["dag"]["runs"] == 6 and p["gpu_hours"] == 0  # CPU config: no GPU requested
    assert p["job_hours"] > p["wall_hours_critical_path"] > 0
    # A request the projection exceeds: the record is written, and calibrate refuses.
    config["resources"]["train_runtime"] = 1
    config["training"]["max_steps"] = 10_000
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(SystemExit, match="do not submit this config as it is"):
        calibrate(path, 1, tmp_path / "refused.json", None)
    refused = json.loads((tmp_path / "refused.json").read_text())["over_limit"]
    assert refused[0].startswith(
        "train jobs are projected"
    )  # (and its 5,000 checkpoints' evaluation)
