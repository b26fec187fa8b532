"""The cluster preset builds its DAG through the SLURM profile offline (nothing downloaded), and
the math task's split writer and math-verify reward behave as documented."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_ablation.tasks import math as math_task
from grpo_ablation.tasks.math import MathTask, gold_answer, last_boxed

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")


@pytest.mark.slow  # starts processes of its own
def test_the_cluster_preset_dry_runs_through_the_slurm_profile_offline(tmp_path):
    hf_home = tmp_path / "hf"
    env = {
        **os.environ,
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    # The literal command users type (the profile by its path: test_slurm_routing.py).
    cmd = [
        str(SNAKEMAKE),
        "-n",
        "--profile",
        "profiles/slurm",
        "--configfile",
        "config/cluster.yaml",
        "--config",
        f"results_dir={tmp_path / 'results'}",
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "Using profile profiles/slurm " in out
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    cells = 4 + 4 - 1  # stage 1 and stage 2 share the reference cell
    assert int(stats["train"]) == int(stats["evaluate"]) == cells * 3
    # GPU jobs carry the profile's per-rule resources; bookkeeping rules stay local, and the
    # hub content is fetched once, on the submit host, before any compute job.
    train_resources = re.search(r"rule train:.*?resources: ([^\n]*)", out, re.S).group(1)
    assert "gpu=1" in train_resources and "cpus_per_task=8" in train_resources
    assert int(stats["prefetch"]) == 1 and "reason: Input files updated by another job: " in out
    assert re.search(r"localrule splits:", out) or "rule splits:" in out
    # Compute jobs never unset the offline flags (the CLI only ever sets them by default).
    cli = "".join(
        (ROOT / "src/grpo_ablation" / f).read_text()
        for f in ("cli.py", "process.py", "training/train.py", "commands/train.py")
    )
    assert "environ.pop" not in cli
    assert not (tmp_path / "results").exists(), "a dry run must write nothing"
    assert not hf_home.exists() or not any(hf_home.rglob("*.safetensors")), "nothing downloaded"


def test_the_slurm_profile_names_its_knobs():
    text = (ROOT / "profiles/slurm/config.yaml").read_text()
    for knob in ("gpu_partition", "slurm-no-account", "slurm-status-command", "set-resources"):
        assert knob in text, knob


def test_gold_answers_and_boxed_extraction():
    assert gold_answer("gsm8k", "3 + 4 = <<3+4=7>>7 apples\n#### 1,234") == "1234"
    assert gold_answer("gsm8k", "no marker") is None
    assert last_boxed(r"so \boxed{\frac{1}{2}} and then \boxed{x^{2}}") == "x^{2}"
    assert last_boxed(r"\boxed{unbalanced") is None


def test_math_splits_have_the_addition_columns_and_manifest(tmp_path):
    cfg = MathTask(dataset="gsm8k", n_validation=2, seed=7)
    rows = [
        {
            "prompt_id": f"gsm8k-train-{i}",
            "prompt": cfg.prompt_template.replace("{question}", f"q{i}"),
            "answer": str(i),
            "difficulty": i % 3,
        }
        for i in range(6)
    ]
    splits = math_task.make_splits(cfg, rows, rows[:2])
    manifest = math_task.write_splits(cfg, tmp_path, splits)
    assert {s: v["count"] for s, v in manifest["splits"].items()} == {
        "train": 4,
        "validation": 2,
        "test": 2,
    }
    first = json.loads((tmp_path / "train.jsonl").read_text().splitlines()[0])
    assert set(first) == {"prompt_id", "prompt", "answer", "difficulty"}
    ids = {
        s: {json.loads(x)["prompt_id"] for x in (tmp_path / f"{s}.jsonl").read_text().splitlines()}
        for s in ("train", "validation")
    }
    assert not ids["train"] & ids["validation"]
    again = math_task.write_splits(
        cfg, tmp_path / "again", math_task.make_splits(cfg, rows, rows[:2])
    )
    assert again["splits"] == manifest["splits"], "splits are a pure function of the config"


def test_unknown_math_task_keys_and_datasets_are_named():
    with pytest.raises(ValueError, match=r"unknown key\(s\) 'n_trian' in config section 'task'"):
        MathTask.from_dict({"kind": "math", "n_trian": 5})
    with pytest.raises(ValueError, match="unknown math dataset 'gsm9k'"):
        MathTask(dataset="gsm9k")


def test_the_math_verify_reward_scores_and_returns_none_on_verifier_failure(monkeypatch):
    pytest.importorskip("math_verify")
    reward = math_task.make_reward_function(MathTask())
    completions = [r"... so the total is \boxed{72}.", "I think it is 71", "no number at all"]
    assert reward(prompts=["p"] * 3, completions=completions, answer=["72"] * 3) == [1.0, 0.0, 0.0]
    conversational = [[{"role": "assistant", "content": r"\boxed{\frac{1}{2}}"}]]
    assert reward(prompts=["p"], completions=conversational, answer=["0.5"]) == [1.0]

    import math_verify

    def broken(*args, **kwargs):
        raise TimeoutError("verifier timed out")

    monkeypatch.setattr(math_verify, "verify", broken)
    assert reward(prompts=["p"], completions=[r"\boxed{72}"], answer=["72"]) == [None]


MATH_COMPLETIONS = [
    r"so \boxed{72}.",
    r"\boxed{72.0}",
    r"\boxed{\frac{144}{2}}",
    "it is 72",
    r"\boxed{71}",
    "no answer",
    r"\boxed{}",
    r"$72$",
    r"\boxed{7 2}",
    "",
]


def test_the_evaluation_applies_the_rewards_declared_math_rule(tmp_path):
    """Training's reward and lm-eval's metric are two implementations of one declared rule."""
    pytest.importorskip("math_verify")
    from grpo_ablation.evaluation.task_folders import load_rule, write_task

    rows = tmp_path / "test.jsonl"
    rows.write_text(
        json.dumps({"prompt_id": "q", "prompt": "q", "answer": "72", "difficulty": 0}) + "\n"
    )
    write_task(
        rows,
        tmp_path / "tasks",
        "m",
        16,
        2,
        1.0,
        answer_rule=MathTask.answer_rule,
        chat_template=True,
    )
    rule = load_rule(tmp_path / "tasks")
    reward = MathTask().reward_function()
    rewards = reward(
        prompts=["q"] * len(MATH_COMPLETIONS),
        completions=MATH_COMPLETIONS,
        answer=["72"] * len(MATH_COMPLETIONS),
    )
    assert [rule.is_correct(c, "72") for c in MATH_COMPLETIONS] == [r == 1.0 for r in rewards]
    assert rewards[:3] == [1.0, 1.0, 1.0] and rewards[4] == 0.0


def test_tasks_come_from_one_registry_that_the_design_check_names():
    import yaml

    from grpo_ablation.design.checks import check_design
    from grpo_ablation.evaluation.task_folders import ANSWER_RULES
    from grpo_ablation.tasks import TASKS, get_task

    for kind in TASKS:
        task = get_task({"kind": kind})
        assert task.kind == kind and task.answer_rule in ANSWER_RULES
    # The schema's kinds are the registry's, written from it (a new task is its module and one
    # line of TASKS, then `grpo-ablation schema`); the design's own check names an unknown one
    # with the registry's too.
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    assert schema["properties"]["task"]["properties"]["kind"]["enum"] == list(TASKS)
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["task"] = {"kind": "chess"}
    with pytest.raises(
        ValueError, match=r"unknown task kind 'chess'; expected one of \['addition'"
    ):
        check_design(config)


def test_evaluation_generates_as_training_does():
    from dataclasses import asdict

    from grpo_ablation.design.checks import DesignError, evaluation_config
    from grpo_ablation.design.options import EvaluationConfig

    config = {
        "training": {"max_completion_length": 512},
        "compute": {"device": "cuda", "dtype": "bfloat16"},
        "evaluation": {"max_gen_toks": None, "k": 4},
        "task": {"kind": "math"},
        "base_policy": {"kind": "hub"},
    }
    # every option resolved: the declared default where the section leaves it out
    assert evaluation_config(config) == asdict(EvaluationConfig()) | {
        "max_gen_toks": 512,
        "k": 4,
        "sampled_metric": "mean_at_k",
        "sampler": "keyed",
        "device": "cuda",
        "dtype": "bfloat16",
    }
    # With vLLM the keyed sampler seeds each request (keyed_sampling.seeded_requests).
    config["evaluation"]["backend"] = "vllm"
    assert evaluation_config(config)["sampler"] == "keyed"
    config["evaluation"]["sampler"] = "stream"
    assert evaluation_config(config)["sampler"] == "stream"
    config["evaluation"]["max_gen_toks"] = 256
    with pytest.raises(
        DesignError, match=r"max_gen_toks=256 differs from training\.max_completion_length=512"
    ):
        evaluation_config(config)


@pytest.mark.parametrize(
    "task,base,asked,expected",
    [
        ("addition", "local", "auto", "exact"),
        ("addition", "local", "mean_at_k", "mean_at_k"),
        ("addition", "hub", "auto", "mean_at_k"),  # a subword tokenizer: not enumerable
        ("math", "hub", "auto", "mean_at_k"),
        ("math", "hub", "exact", "task 'math' with base_policy.kind 'hub' cannot enumerate"),
        ("addition", "hub", "exact", "task 'addition' with base_policy.kind 'hub' cannot"),
    ],
)
def test_the_exact_metric_only_where_accepted_completions_are_enumerable(
    task, base, asked, expected
):
    from grpo_ablation.design.checks import DesignError, sampled_metric

    config = {
        "task": {"kind": task},
        "base_policy": {"kind": base},
        "evaluation": {"sampled_metric": asked},
    }
    if expected in ("exact", "mean_at_k"):
        assert sampled_metric(config) == expected
    else:
        with pytest.raises(DesignError, match=expected):
            sampled_metric(config)


def test_a_cuda_device_is_refused_where_there_is_none(monkeypatch):
    import torch

    from grpo_ablation.device import DeviceError, resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(
        DeviceError, match=r"compute\.device is .cuda. but torch finds no CUDA device"
    ):
        resolve_device("cuda")


def test_the_cuda_error_names_the_driver_the_torch_build_needs_and_the_one_found(monkeypatch):
    import torch

    from grpo_ablation import device

    assert device.driver_advice("13.0", "550.54.15") == (
        "it needs NVIDIA driver >= 580; the driver found is 550.54.15 (too old)"
    )
    assert "found is 580.65.06 (new enough" in device.driver_advice("13.0", "580.65.06")
    assert device.driver_advice("12.8", "550.54.15").endswith(
        "(new enough: look for a GPU hidden from the job)"
    )
    assert "nvidia-smi found no driver" in device.driver_advice("13.0", None)
    assert "CPU build" in device.driver_advice(None, None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(device, "driver_version", lambda: "535.104.05")
    with pytest.raises(
        device.DeviceError, match=r"driver >= 580; the driver found is 535\.104\.05 \(too old\)"
    ):
        device.resolve_device("cuda")


def test_retries_come_from_the_profile_alone():
    """A rule's own `retries` would override the profile's for its jobs (Snakemake gives the rule
    precedence), so no rule sets one."""
    import re

    import yaml

    rules = [ROOT / "Snakefile", *sorted((ROOT / "workflow/rules").glob("*.smk"))]
    assert not [p.name for p in rules if re.search(r"^\s+retries:", p.read_text(), re.M)]
    profile = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    assert profile["retries"] == 2


def test_a_warm_start_on_cuda_gets_a_gpu_and_nothing_else_does():
    from grpo_ablation.design.checks import base_policy_gpus

    preset = yaml.safe_load((ROOT / "config/cluster.yaml").read_text())
    assert base_policy_gpus(preset) == 0  # sft_steps 0: the model is only looked up
    preset["base_policy"]["sft_steps"] = 100
    assert base_policy_gpus(preset) == 1
    preset["compute"]["device"] = "cpu"
    assert base_policy_gpus(preset) == 0
    assert base_policy_gpus(yaml.safe_load((ROOT / "config/config.yaml").read_text())) == 0


def test_jobs_work_offline_and_tell_vllm_not_to_phone_home(monkeypatch):
    from grpo_ablation import hub

    for var in (*hub.OFFLINE_VARS, *hub.QUIET_VARS):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DO_NOT_TRACK", "0")  # a user's own setting wins
    hub.work_offline()
    import os

    assert [os.environ[v] for v in (*hub.OFFLINE_VARS, "VLLM_NO_USAGE_STATS")] == ["1"] * 3
    assert os.environ["DO_NOT_TRACK"] == "0"


def test_kernel_caches_stay_on_the_node_unless_the_user_names_a_folder(monkeypatch, tmp_path):
    from grpo_ablation import hub

    for var in hub.CACHE_VARS:
        monkeypatch.setenv(var, "")  # recorded, so that the test's own settings are undone
        monkeypatch.delenv(var)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # SLURM's per-job folder, where a site sets one
    monkeypatch.setenv("TRITON_CACHE_DIR", "/scratch/me/triton")
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    hub.work_offline()
    assert os.environ["TRITON_CACHE_DIR"] == "/scratch/me/triton"
    for var in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR"):
        assert Path(os.environ[var]).parent == tmp_path / f"grpo-ablation-{os.getuid()}"
