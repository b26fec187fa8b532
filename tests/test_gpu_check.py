"""The GPU check runs here with --cpu on the cluster-shaped CPU config, so the first GPU machine
lent runs it without edits; and its comparisons see a difference where there is one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.gpu_check import GPU_CONFIGS, merged_config, weight_difference

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_override_is_merged_key_by_key_and_evaluation_limited_to_a_batch():
    config = merged_config([ROOT / p for p in GPU_CONFIGS], cpu=False)
    assert config["compute"]["device"] == "cuda"
    assert config["training"]["group_size"] == 8  # the override's
    assert config["training"]["temperature"] == 0.5  # the CPU preset's, kept
    assert config["evaluation"]["limit"] == config["evaluation"].get("batch_size", 32)
    assert merged_config([ROOT / p for p in GPU_CONFIGS], cpu=True)["compute"]["device"] == "cpu"


def test_the_vllm_switch_turns_vllm_on_for_generation_and_evaluation_with_a_limit_of_rows():
    config = merged_config([ROOT / p for p in GPU_CONFIGS], cpu=False, vllm=True)
    assert config["training"]["generation_backend"] == "vllm"
    assert config["training"]["group_size"] == 8  # the rest of the override kept
    ev = config["evaluation"]
    assert ev["backend"] == "vllm" and ev["batch_size"] == "auto" and ev["limit"] == 32


def test_weight_difference_sees_one_changed_number(tmp_path):
    import torch
    from safetensors.torch import save_file

    w = {"a": torch.zeros(3), "b": torch.ones(2)}
    for name, tensors in {"x": w, "y": {**w, "b": torch.tensor([1.0, 1.5])}}.items():
        (tmp_path / name).mkdir()
        save_file(tensors, tmp_path / name / "model.safetensors")
    assert weight_difference(tmp_path / "x", tmp_path / "x") == 0.0
    assert weight_difference(tmp_path / "x", tmp_path / "y") == 0.5


@pytest.mark.slow  # trains four short runs and evaluates twice
def test_the_gpu_check_passes_on_cpu(tmp_path):
    config = yaml.safe_load((ROOT / "config/cluster_smoke.yaml").read_text())
    config["task"]["dataset_path"] = str(tmp_path / "hub/gsm8k")
    config["base_policy"]["name"] = str(tmp_path / "hub/qwen2-tiny")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "check.json"
    cmd = [sys.executable, "-m", "benchmarks.gpu_check", "--cpu", "--configfile", str(path)]
    cmd += ["--steps", "2", "--work", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    checks = record["checks"]
    assert set(checks) == {"calibration", "same_step_zero", "kill_and_resume", "evaluation_twice"}
    assert all(c["passed"] for c in checks.values()) and record["passed"]
    assert checks["calibration"]["measured"]["peak_memory_kind"] == "host RSS"
    assert checks["same_step_zero"]["completions"] > 0
    assert checks["kill_and_resume"]["killed_after_checkpoint"] == 1
    assert checks["kill_and_resume"]["max_abs_weight_difference"] == 0.0
    env = record["environment"]
    assert env["device"] == "cpu" and env["torch"] and env["trl"] == "1.16.0"
