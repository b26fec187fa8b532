"""``grpo-ablation base-policy``: build and warm-start the base policy, or name a hub model."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from grpo_ablation.commands import json_value, threads_argument
from grpo_ablation.layout import BASE_INFO

HELP = "build and warm-start the base policy (or name a hub model)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--base", type=json_value, required=True, help="base_policy config as JSON or a file"
    )
    p.add_argument(
        "--draw", type=int, help="the base-policy draw: the warm start's seed (base's own if not)"
    )
    p.add_argument("--task", type=json_value, required=True, help="task config as JSON or a file")
    p.add_argument(
        "--compute",
        type=json_value,
        default="{}",
        help="the config's compute section as JSON or a file (its keys optional)",
    )
    p.add_argument("--splits", type=Path, required=True, help="the data/ folder of the splits")
    p.add_argument(
        "--out", type=Path, required=True, help="the base policy's folder (base_policy.json)"
    )
    threads_argument(p)


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.design.checks import draw_base_policy
    from grpo_ablation.design.options import ComputeConfig
    from grpo_ablation.policy.pretrained import build_base_policy
    from grpo_ablation.process import bootstrap
    from grpo_ablation.tasks import get_task

    a.out.mkdir(parents=True, exist_ok=True)
    base = draw_base_policy({"base_policy": a.base}, a.draw)  # the draw is the warm start's seed
    threads = base.get("num_threads")
    if threads and threads != a.threads:
        # The local warm start's weights depend on its thread count: the config's count wins.
        print(
            f"base_policy.num_threads={threads} (not the {a.threads} granted): the weights depend on it"
        )
    bootstrap(threads=threads or a.threads)
    info = build_base_policy(
        base,
        get_task(a.task),
        a.splits,
        a.out / "model",
        ComputeConfig.of(a.compute),
    )
    (a.out / BASE_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
