"""The prefetch rule: everything a compute job reads from the hub, fetched once on the submit host.

Compute nodes often have no internet, and many jobs downloading the same model at once is slow and
fragile. So every compute job runs with ``HF_HUB_OFFLINE=1`` and ``HF_DATASETS_OFFLINE=1`` (set by
the CLI unless the user set them), and this step, run as a local rule, fills the Hugging Face cache
(``HF_HOME``, shared with the nodes) with the base model and the data set at the revisions pinned in
the config, and with the data of any external lm-eval benchmark. A local path needs no download and
is only checked.

Local content is made here too, once, so the cluster path runs on a CPU with nothing downloaded:
``word_problems`` writes GSM8K-format rows at ``task.dataset_path``
(``grpo_ablation.tasks.word_problem_generator``); ``base_policy.gguf`` converts a GGUF file into the model
folder at ``base_policy.name`` (``grpo_ablation.policy.gguf``); ``stand_in``
(``config/cluster_smoke.yaml``) builds a tiny Qwen2 with a chat template there instead.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from grpo_ablation.design.base_policy import base_kind
from grpo_ablation.design.options import EvaluationConfig
from grpo_ablation.hub import OFFLINE_VARS, hub_snapshot
from grpo_ablation.tasks import get_task

# What the record shows of the environment: the offline flags and the cache folder.
RECORDED_VARS = (*OFFLINE_VARS, "HF_HOME")


def prefetch(config: dict[str, Any]) -> dict[str, Any]:
    """Fetch (or check) model, data set and external benchmark data; return what was done."""
    record: dict[str, Any] = {"environment": {k: os.environ.get(k) for k in RECORDED_VARS}}
    if config.get("word_problems"):
        record["word_problems"] = write_task_data(config)
    base = config["base_policy"]
    if config.get("stand_in"):
        record["stand_in"] = build_stand_in(config)
    if base.get("gguf"):
        from grpo_ablation.policy.gguf import convert

        record["gguf"] = convert(base["gguf"], Path(base["name"]))
    if base_kind(base) == "hub":
        name = base["name"]
        if Path(name).exists():
            record["model"] = {"local": str(Path(name))}
        else:
            path = hub_snapshot(name, base.get("revision"), download=True)
            record["model"] = {"hub": name, "revision": base.get("revision"), "cache": str(path)}
    record["task"] = get_task(config["task"]).prefetch()
    external = EvaluationConfig.of(config.get("evaluation")).external_benchmarks
    if external:
        from lm_eval.tasks import TaskManager, get_task_dict

        get_task_dict(list(external), TaskManager())  # downloads each benchmark's data set
        record["external_benchmarks"] = list(external)
    return record


def write_task_data(config: dict[str, Any]) -> dict[str, Any]:
    """Write the ``word_problems`` rows at ``task.dataset_path`` (kept when already there)."""
    from grpo_ablation.tasks.math import MathTask
    from grpo_ablation.tasks.word_problem_generator import WordProblems, write_word_problems

    spec = WordProblems.from_dict(config["word_problems"])
    task = get_task(config["task"])
    if not isinstance(task, MathTask) or not task.dataset_path:
        raise ValueError("word_problems needs task.kind: math with a local task.dataset_path")
    data = Path(task.dataset_path)
    if not (data / "README.md").exists():
        write_word_problems(data, **asdict(spec))
    return {"dataset": str(data), "spec": asdict(spec)}


def build_stand_in(config: dict[str, Any]) -> dict[str, Any]:
    """Build the stand-in model at ``base_policy.name``, its tokenizer trained on the task's
    words (the task's data, ``word_problems``, first)."""
    from grpo_ablation.design.stand_in import StandInConfig
    from grpo_ablation.policy.standin import build_standin_model
    from grpo_ablation.tasks.math import MathTask, source_rows

    spec = asdict(StandInConfig.of(config["stand_in"]))
    task = get_task(config["task"])
    if not isinstance(task, MathTask) or not task.dataset_path:
        raise ValueError("stand_in needs task.kind: math with a local task.dataset_path")
    model = Path(config["base_policy"]["name"])
    if not (model / "config.json").exists():
        # The tokenizer learns the words of the prompts, the answers and the chat scaffolding.
        rows = source_rows(task, "train")[0] + source_rows(task, "test")[0]
        pairs = task.sft_pairs(rows)
        corpus = [
            f"{r['prompt']} {completion}" for r, (_, completion) in zip(rows, pairs, strict=True)
        ]
        corpus += [str(r["answer"]) for r in task.data_source().read("train")[0]]
        corpus.append("system user assistant You are a helpful assistant.")
        build_standin_model(model, corpus, **spec)
    return {"model": str(model)}
