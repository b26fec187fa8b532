"""``grpo-ablation eval-tasks``: the lm-eval task folders of the test and validation splits."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import json_value

HELP = "write the lm-eval task YAMLs for test and validation"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, required=True, help="the data/ folder of the splits")
    # --tasks: the spelling the eval_tasks rule has always run, kept so that no finished
    # evaluation reruns for a new command line (a rule's shell command is a rerun trigger)
    p.add_argument(
        "--out",
        "--tasks",
        type=Path,
        required=True,
        help="the folder of the lm-eval tasks (--tasks: its former name, which the rule keeps)",
    )
    p.add_argument(
        "--evaluation", type=json_value, required=True, help="evaluation config as JSON or a file"
    )
    p.add_argument(
        "--task",
        type=json_value,
        required=True,
        help="task config as JSON or a file (answer rule, chat template)",
    )


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.evaluation.task_folders import write_split_tasks
    from grpo_ablation.tasks import get_task

    task, evaluation = get_task(a.task), a.evaluation
    exact = None
    if evaluation["sampled_metric"] == "exact":  # the local base's tokenizer, built as it builds it
        from grpo_ablation.evaluation.task_folders import exact_tokens
        from grpo_ablation.policy.tokenizer import build_char_tokenizer

        exact = exact_tokens(build_char_tokenizer())
    write_split_tasks(
        a.data, a.out, task.kind, evaluation, task.answer_rule, task.chat_template, exact
    )
