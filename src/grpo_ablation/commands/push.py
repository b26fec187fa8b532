"""``grpo-ablation push``: the push of every objective on the same samples."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from grpo_ablation.commands import json_value, threads_argument
from grpo_ablation.layout import PUSH_PURPOSES, checkpoint, checkpoint_step

HELP = "the push of every objective on the same samples"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base", type=Path, required=True, help="base/base_policy.json")
    p.add_argument("--run", type=Path, help="the reference run's folder (for a checkpoint)")
    p.add_argument("--data", type=Path, required=True, help="the splits folder")
    p.add_argument(
        "--purpose",
        choices=PUSH_PURPOSES,
        default="test",
        help="test (first training prompts, judged) or pilot (last ones, base policy: sizes it)",
    )
    p.add_argument(
        "--training",
        type=json_value,
        required=True,
        help="the run's training config as JSON or a JSON file (the run's options file)",
    )
    p.add_argument("--task", type=json_value, required=True, help="task config as JSON or a file")
    p.add_argument(
        "--push", type=json_value, required=True, help="the push section as JSON or a file"
    )
    threads_argument(p)
    p.add_argument("--out", type=Path, required=True, help="the push's record (push.json)")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.process import bootstrap
    from grpo_ablation.training.push import run_push
    from grpo_ablation.training.train import last_checkpoint

    bootstrap(threads=a.threads)
    training, push = a.training, a.push
    # A pilot plans the tests at the base policy; the test measures where the config says.
    steps = [0] if a.purpose == "pilot" else push["steps"]
    if not steps or any(steps):
        if a.run is None:
            raise ValueError("push: --run (the reference run's folder) is needed for a checkpoint")
        steps = steps or [0, checkpoint_step(last_checkpoint(a.run))]
    base_model = Path(json.loads(a.base.read_text())["model"])
    policies = []
    for step in steps:
        path = base_model if step == 0 else checkpoint(a.run, step)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"push.steps names step {step}, but {path} holds no model")
        policies.append((step, path))
    run_push(
        policies,
        a.data,
        a.task,
        training,
        push,
        a.out,
        seed=training["seed"],
        purpose=a.purpose,
    )
    print(a.out)
