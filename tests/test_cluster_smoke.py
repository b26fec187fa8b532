"""The cluster path end to end on CPU: ``config/cluster_smoke.yaml`` (the preset at CPU size, a
locally built stand-in of the hub model and data set) runs through every rule to tables, figures
and the report, with jobs offline, one answer protocol for training and evaluation, and optimizer
state kept in the newest checkpoint only."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_config

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


# The offline variables are left unset on purpose: every compute job must set them itself.
OFFLINE = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """The preset's CPU twin, with its stand-in hub folders under a temporary directory."""
    root = tmp_path_factory.mktemp("cluster_smoke")
    config = yaml.safe_load((ROOT / "config/cluster_smoke.yaml").read_text())
    config["results_dir"] = str(root / "results")
    config["task"]["dataset_path"] = str(root / "hub/gsm8k")
    config["base_policy"]["name"] = str(root / "hub/qwen2-tiny")
    # as on a cluster: the checkpoints on a scratch file system
    config["checkpoints_dir"] = str(root / "scratch")
    return run_config(root, config, unset=OFFLINE)


def test_the_cluster_config_differs_from_the_preset_only_in_names_paths_and_sizes():
    preset = yaml.safe_load((ROOT / "config/cluster.yaml").read_text())
    smoke = yaml.safe_load((ROOT / "config/cluster_smoke.yaml").read_text())
    assert set(smoke) - set(preset) == {"stand_in", "word_problems"}
    for section, key in (
        ("task", "kind"),
        ("task", "dataset"),
        ("task", "chat_template"),
        ("base_policy", "kind"),
        ("compute", "keep_optimizer_state"),
    ):
        assert smoke[section][key] == preset[section][key], (section, key)
    assert set(smoke["training"]) == set(preset["training"])
    # Only the device differs: the preset demands CUDA, this machine has none.
    assert (preset["compute"]["device"], smoke["compute"]["device"]) == ("cuda", "cpu")
    assert smoke["compute"]["dtype"] == preset["compute"]["dtype"] == "bfloat16"


def test_every_rule_ran_to_tables_figures_and_report(run):
    exp = run["exp"]
    assert (run["root"] / "report.html").stat().st_size > 10_000
    assert (
        len(run["runs"]) == 3 * 2
    )  # sample, population, constant (sequence_mean shared) x 2 seeds
    table = pd.read_csv(exp / "tables/results.csv")
    assert set(table["stage"]) == {"std_scaling", "aggregation"}
    for fig in ("accuracy", "mixed", "length"):
        assert (exp / f"figures/aggregation/{fig}.png").stat().st_size > 1000
    assert json.loads((exp / "prefetch.json").read_text())["stand_in"]


def test_the_warm_started_stand_in_has_mixed_groups_and_solves_some_problems(run):
    base = json.loads((run["exp"] / "eval/base/test/summary.json").read_text())["checkpoints"][0]
    assert 0 < base["greedy_accuracy"] < 1 and 0 < base["sampled_mean_at_k"] < 1
    rows = []
    for info in run["runs"]:
        for f in (info.parent / "rollouts").glob("rank*.jsonl.gz"):
            with gzip.open(f, "rt") as fh:
                rows += [json.loads(x) for x in fh]
    categories = pd.Series([r["group_category"] for r in rows])
    assert (categories == "mixed").mean() > 0.2, categories.value_counts()
    assert 0 < pd.Series([r["correct"] for r in rows]).mean() < 1


def test_training_and_evaluation_share_one_answer_protocol(run):
    from transformers import AutoTokenizer

    training = run["config"]["training"]
    for info in run["runs"]:
        objective = json.loads((info.parent / "objective.json").read_text())
        assert objective["answer_rule"] == "math_verify"
    exp = run["exp"]
    results = [json.loads(p.read_text()) for p in exp.glob("eval/**/test/step=*/results.json")]
    assert results and all(
        r["answer_rule"] == "math_verify" and r["chat_template"] for r in results
    )
    assert {r["max_gen_toks"] for r in results} == {training["max_completion_length"]}
    # The prompt lm-eval gave the model is, token for token, the one TRL trains on.
    tok = AutoTokenizer.from_pretrained(exp / "base/model")
    samples = [
        json.loads(x)
        for x in (exp / "eval/base/test/step=0/samples.jsonl").read_text().splitlines()
    ]
    for s in samples[:5]:
        trl_ids = tok.apply_chat_template(
            [{"role": "user", "content": s["prompt"]}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
        )
        assert tok(s["context"], add_special_tokens=False)["input_ids"] == trl_ids["input_ids"]
    with gzip.open(next((run["runs"][0].parent / "rollouts").glob("*.gz")), "rt") as fh:
        first = json.loads(fh.readline())
    assert first["prompt"][0]["role"] == "user", "training prompts are chat conversations"


def test_compute_jobs_ran_offline_and_recorded_their_device(run):
    for info in run["runs"]:
        compute = json.loads(info.read_text())["compute"]
        assert compute["offline"] == {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        assert (compute["device"], compute["dtype"], compute["master_weights"]) == (
            "cpu",
            "bfloat16",
            "float32",
        )
        assert {"gpu_model", "driver_version", "torch_cuda"} <= set(compute)
    for path in run["exp"].glob("eval/**/results.json"):
        assert json.loads(path.read_text())["offline"]["HF_HUB_OFFLINE"] == "1", path


def test_only_the_newest_checkpoint_keeps_optimizer_state(run):
    for info in run["runs"]:
        steps = json.loads(info.read_text())["checkpoints"]
        folders = [info.parent / "checkpoints" / f"checkpoint-{s}" for s in steps]
        assert all((f / "model.safetensors").exists() for f in folders)
        assert [(f / "optimizer.pt").exists() for f in folders] == [False] * (len(folders) - 1) + [
            True
        ]
        assert [(f / "scheduler.pt").exists() for f in folders][-1]


def test_the_checkpoints_went_to_the_scratch_folder_the_run_stated(run):
    # stated before the first job: stage 1's runs (stage 2's come after its checkpoint), 2 each
    scratch = run["root"] / "scratch"
    assert f"Checkpoints of 4 planned training runs (8 in all) go to {scratch}" in run["out"]
    for info in run["runs"]:
        below = info.parent.relative_to(run["config"]["results_dir"])
        assert (info.parent / "checkpoints").is_symlink()
        assert (info.parent / "checkpoints").resolve() == (scratch / below / "checkpoints")
        assert any((scratch / below / "checkpoints").glob("checkpoint-*/model.safetensors"))


def test_a_job_told_to_use_cuda_on_a_machine_without_one_stops_with_the_reason(run, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    exp = run["exp"]
    cell = run["runs"][0].parent
    cmd = [
        sys.executable,
        str(ROOT / "workflow/scripts/grpo.py"),
        "train",
        "--base",
        str(exp / "base/base_policy.json"),
        "--data",
        str(exp / "data"),
        "--out",
        str(tmp_path / "run"),
        "--training",
        json.dumps(json.loads((cell / "run_info.json").read_text())["training_config"]),
        "--task",
        json.dumps(run["config"]["task"]),
        "--compute",
        json.dumps({"device": "cuda", "dtype": "bfloat16", "keep_optimizer_state": "newest"}),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "compute.device is 'cuda' but torch finds no CUDA device" in done.stderr
    assert not (tmp_path / "run" / "checkpoints").exists(), "it stopped before training"
