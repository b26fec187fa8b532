"""The GPU check runs here with --cpu on the cluster-shaped CPU config, so the first GPU machine
lent runs it without edits; and its comparisons see a difference where there is one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.gpu_check import (
    CHECK_MODEL,
    CHECK_SFT,
    GPU_CONFIGS,
    OPTION_PROBES,
    TIMING_MODEL,
    chosen_options,
    merged_config,
    table,
    weight_difference,
    with_model,
    with_options,
)

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


def test_the_built_in_models_are_built_in_the_work_folder_and_a_model_folder_replaces_them():
    config = merged_config([ROOT / p for p in GPU_CONFIGS], cpu=False)
    work = Path("/work")
    timing = with_model(config, None, TIMING_MODEL, work / "timing")
    assert timing["base_policy"] == {"kind": "hub", "name": "/work/timing/model"}
    assert timing["stand_in"]["hidden_size"] == 576 and timing["stand_in"]["num_layers"] == 30
    assert timing["task"]["dataset_path"] == "/work/timing/word_problems"
    checked = with_model(config, None, CHECK_MODEL | CHECK_SFT, work / "checks")
    assert checked["base_policy"]["sft_steps"] == CHECK_SFT["sft_steps"]
    assert "sft_steps" not in checked["stand_in"]
    given = with_model(config, Path("/models/smollm2"), TIMING_MODEL, work)
    assert given["base_policy"] == {"kind": "hub", "name": "/models/smollm2"}
    assert "stand_in" not in given and "gguf" not in given["base_policy"]
    assert config["base_policy"]["gguf"]  # the preset itself untouched


def test_weight_difference_sees_one_changed_number(tmp_path):
    import torch
    from safetensors.torch import save_file

    w = {"a": torch.zeros(3), "b": torch.ones(2)}
    for name, tensors in {"x": w, "y": {**w, "b": torch.tensor([1.0, 1.5])}}.items():
        (tmp_path / name).mkdir()
        save_file(tensors, tmp_path / name / "model.safetensors")
    assert weight_difference(tmp_path / "x", tmp_path / "x") == 0.0
    assert weight_difference(tmp_path / "x", tmp_path / "y") == 0.5


def test_the_options_are_timed_on_a_gpu_unless_told_and_never_on_the_cpu_unless_told():
    assert chosen_options(None, "cuda") == (list(OPTION_PROBES), True)
    assert chosen_options(None, "cpu") == ([], False)
    assert chosen_options("static_cache,packed", "cpu") == (["static_cache"], True)
    assert chosen_options("none", "cuda") == ([], False)
    # a vLLM run refuses generate's options, and packs no engines
    assert chosen_options(None, "cuda", vllm=True) == (["tf32", "scoring_16"], False)
    with pytest.raises(SystemExit, match="unknown --options"):
        chosen_options("statics", "cuda")


def test_each_option_probe_sets_its_keys_in_the_section_that_declares_them():
    """Issue 65's items 1-3 each timed: the compute section's options, and the scoring passes in
    micro-batches (training.scoring_batch_size), whose peak the check states beside the one-pass
    probe's."""
    config = {"compute": {"device": "cuda", "dtype": "bfloat16"}, "training": {"max_steps": 4}}
    scoring = with_options(config, **OPTION_PROBES["scoring_16"])
    assert scoring["training"] == {"max_steps": 4, "scoring_batch_size": 16}
    assert scoring["compute"] == {"device": "cuda", "dtype": "float32"}
    combined = with_options(config, **OPTION_PROBES["combined"])
    assert combined["training"] == config["training"] and combined["compute"]["tf32"] is True
    assert config["compute"]["dtype"] == "bfloat16", "the config itself is left as it was"
    probed = {key for probe in OPTION_PROBES.values() for key in probe}
    assert {"tf32", "generation_cache", "generation_weights", "scoring_batch_size"} <= probed


def test_the_cluster_docs_name_every_probe_the_check_can_time():
    """docs/cluster.md lists what the check prints, each option probe by its --options name."""
    names, packed = chosen_options("all", "cuda")
    text = (ROOT / "docs/cluster.md").read_text()
    missing = [n for n in [*names, "packed" if packed else ""] if f"`{n}`" not in text]
    assert not missing, f"docs/cluster.md does not name {missing}"


def _probe(step_s: float, gpu_hours: float = 1.0) -> dict:
    measured = {
        "train_step_s": step_s,
        "train_warmup_s": 9.0,
        "train_save_s": 1.0,
        "peak_memory_kind": "gpu",
        "generation_tokens_per_s": 20000.0,
        "update_tokens_per_s": 50000.0,
    }
    return {"measured": measured, "peak_memory_gib": 12.5, "projected": {"gpu_hours": gpu_hours}}


def test_the_table_prints_every_target_figure_per_option():
    """Per precision and per option: the steady step, peak memory, tokens per second of
    generation and of the update apart, the preset's GPU-hours; the packing; the targets."""
    env = {"device": "cuda", "gpu_model": "H100", "driver_version": "580", "torch": "2.13"}
    env |= {"torch_cuda": "13.0", "transformers": "5.17.0", "trl": "1.16.0"}
    options = {"static_compiled": _probe(0.8) | {"identical_step0_completions": 1.0}}
    options["combined"] = _probe(0.6, 0.5) | {"identical_step0_completions": 0.98}
    options["scoring_16"] = _probe(3.3) | {"identical_step0_completions": 1.0}
    packed = {"runs": 4, "packed_step_s": 1.2, "alone_step_s": 3.0}
    packed["projected"] = {"gpu_hours": 0.7, "wall_hours_one_gpu": 0.7}
    figures = {"cost_probe": {"float32": _probe(3.0), "bfloat16": _probe(4.5)}}
    figures |= {"options": options, "packed": packed}
    record = {"environment": env, "vllm_note": "no vLLM", "figures": figures}
    text = table(record | {"checks": {}, "errors": {}})
    row = next(line for line in text.splitlines() if "static_compiled" in line)
    assert "0.800 s" in row and "peak 12.50 GiB (gpu)" in row
    assert "tokens/s generation 20000 vs update 50000" in row and "preset 1.0 GPU-h" in row
    assert "identical step-0 completions 100.0%" in row
    assert "| 4 runs at once on one cuda | 1.200 s a step each (alone 3.000)" in text
    assert "| target: a step <= 1.0 s | met: fastest combined at 0.600 s |" in text
    scoring = "| steady step (cuda, scoring_16: dtype float32, scoring_batch_size 16) | 3.300 s"
    assert scoring in text
    # bfloat16's verdict reads the probes of another precision alone: combined is also compiled
    bf16 = "| target: bfloat16 no slower than float32 | "
    assert (
        bf16 + "not met: autocast 1.50x float32's step (with other options too: combined 0.20x) |"
    ) in text
    options["bf16_weights"] = _probe(2.7) | {"identical_step0_completions": 0.9}
    text = table(record | {"checks": {}, "errors": {}})
    assert (bf16 + "met: autocast 1.50x, bf16_weights 0.90x float32's step (with other") in text
    record["environment"] = env | {"device": "cpu"}
    assert "target:" not in table(record | {"checks": {}, "errors": {}}), "a GPU's targets"


@pytest.mark.slow  # trains eleven short runs and evaluates four times
def test_the_gpu_check_passes_on_cpu_with_a_signal_and_the_device_equal_to_the_cpu(tmp_path):
    config = yaml.safe_load((ROOT / "config/cluster_smoke.yaml").read_text())
    config["task"]["dataset_path"] = str(tmp_path / "hub/gsm8k")
    config["base_policy"]["name"] = str(tmp_path / "hub/qwen2-tiny")
    config["training"]["prompts_per_step"] = 8  # groups enough for a mixed one at every step
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "check.json"
    cmd = [sys.executable, "-m", "benchmarks.gpu_check", "--cpu", "--configfile", str(path)]
    cmd += ["--steps", "2", "--default-sft-steps", "100", "--default-steps", "2"]
    cmd += ["--cpu-reference-steps", "1"]  # the reference's path, at its least
    cmd += ["--work", str(tmp_path / "work"), "--out", str(out)]
    wheels = os.environ.get("SITE_TORCH_WHEELS")  # the venv that stands for a site-torch node
    if wheels:  # the folder installed by the check itself, with no index, as on the node
        cmd += ["--wheels", wheels, "--site", str(tmp_path / "site")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| check kill_and_resume | PASS |" in done.stdout  # the short table
    record = json.loads(out.read_text())
    checks, figures = record["checks"], record["figures"]
    assert set(checks) == {
        "cost_probe",
        "signal",
        "same_step_zero",
        "kill_and_resume",
        "evaluation_twice",
    }
    assert all(c["passed"] for c in checks.values()) and record["passed"]
    # The comparisons compare weights that moved: mixed groups, a gradient, an update.
    assert checks["signal"]["steps_with_signal"] > 0
    for dtype in ("float32", "bfloat16"):
        resume = checks["kill_and_resume"][dtype]
        assert resume["killed_after_checkpoint"] == 1 and resume["max_abs_weight_update"] > 0
        assert checks["same_step_zero"][dtype]["completions"] > 0
        measured = figures["cost_probe"][dtype]["measured"]
        assert measured["peak_memory_kind"] == "host RSS"
        assert measured["train_warmup_s"] > 0 and measured["generation_tokens_per_s"] > 0
    # the CPU reference beside the device's figures, in the record and the table
    assert figures["cost_probe_cpu"]["measured"]["train_step_s"] > 0
    assert "| steady step (cpu reference, float32) | " in done.stdout
    assert checks["kill_and_resume"]["float32"]["max_abs_weight_difference"] == 0.0
    precision = figures["bf16_vs_fp32"]
    assert precision["grad_norm"]["float32"] > 0 and precision["grad_norm"]["bfloat16"] > 0
    # On the CPU the "device" is the CPU: the same numbers, every metric and every weight.
    device = figures["device_vs_cpu"]
    assert device["steps"] == 2 and device["identical_completions_per_step"] == [1.0, 1.0]
    assert set(device["max_abs_metric_diff"].values()) == {0.0}
    assert device["final_max_abs_weight_difference"] == 0.0
    if wheels:
        assert (tmp_path / "site" / "trl").is_dir()
    env = record["environment"]
    assert env["device"] == "cpu" and env["torch"] and env["trl"] == "1.16.0"
