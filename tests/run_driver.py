"""Runs ``grpo_ablation.training.train.train`` on the fixed tiny setup of ``conformance`` (a CLI so that a
test can SIGKILL it mid-run)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from conformance import PROMPTS, digit_reward
from transformers import TrainerCallback

from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.training.train import train


def write_data(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    rows = [{"prompt_id": f"p{i}", "prompt": p, "answer": "0"} for i, p in enumerate(PROMPTS)]
    (directory / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def start_driver(model, data, out, training, sleep=0.0) -> subprocess.Popen:
    """This driver on ``training`` (a TrainingConfig's fields) in a process of its own, one
    thread, that a test can SIGKILL; its stderr is piped."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "run_driver",
        "--model",
        str(model),
        "--data",
        str(data),
        "--out",
        str(out),
        "--training",
        json.dumps(training),
        "--sleep",
        str(sleep),
    ]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


class Slow(TrainerCallback):
    """Makes each step last long enough for a test to kill the process between checkpoints."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.seconds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--training", default="{}")
    parser.add_argument("--sleep", type=float, default=0.0)
    a = parser.parse_args()
    torch.set_num_threads(1)
    cfg = TrainingConfig(**json.loads(a.training))
    callbacks = [Slow(a.sleep)] if a.sleep else []
    train(a.model, a.data, a.out, cfg, reward_func=digit_reward, callbacks=callbacks)


if __name__ == "__main__":
    main()
