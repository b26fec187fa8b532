"""Feasibility probe of the default task with STOCK TRL GRPO (not project code).

Usage (from the repository root):
    PYTHONPATH=src python notes/task_probe.py --base DIR_WITH_BASE_POLICY --splits SPLITS_DIR \
        --seeds 0 1 2 --loss-types grpo dr_grpo --steps 300 --out probe.json

For each (loss_type, seed): GRPO from the base policy on the train split, then sampled
(temperature 1) and greedy accuracy on the test split and the mean length of incorrect completions.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from grpo_ablation.policy.base_policy import sample_accuracy
from grpo_ablation.tasks.addition import AdditionTask, make_reward_function
from grpo_ablation.tasks.splits import read_split

KEEP = (
    "accuracy",
    "accuracy_by_difficulty",
    "completion_length_mean",
    "incorrect_length_mean",
    "carryless_answer_rate",
    "unparseable_rate",
    "truncation_rate",
)


def evaluate(model, tok, rows, seed: int, max_len: int, n_samples: int) -> dict:
    sampled = sample_accuracy(
        model, tok, rows, n_samples=n_samples, max_new_tokens=max_len, seed=seed
    )
    greedy = sample_accuracy(
        model, tok, rows, n_samples=1, temperature=None, max_new_tokens=max_len
    )
    return {"sampled": {k: sampled[k] for k in KEEP}, "greedy_accuracy": greedy["accuracy"]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--splits", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--loss-types", nargs="+", default=["grpo", "dr_grpo"])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--prompts-per-step", type=int, default=4)
    p.add_argument("--num-generations", type=int, default=8)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--max-completion-length", type=int, default=10)
    p.add_argument("--eval-samples", type=int, default=4)
    p.add_argument("--out", default="probe.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("transformers").setLevel(logging.ERROR)

    splits = Path(args.splits)
    train, test = read_split(splits / "train.jsonl"), read_split(splits / "test.jsonl")
    tok = AutoTokenizer.from_pretrained(args.base)
    base = AutoModelForCausalLM.from_pretrained(args.base)
    results = {
        "args": vars(args),
        "before": evaluate(base, tok, test, 0, args.max_completion_length, args.eval_samples),
        "runs": [],
    }
    print("before", json.dumps(results["before"]), flush=True)
    reward = make_reward_function(AdditionTask())
    for loss_type in args.loss_types:
        for seed in args.seeds:
            model = AutoModelForCausalLM.from_pretrained(args.base)
            with tempfile.TemporaryDirectory() as tmp:
                cfg = GRPOConfig(
                    output_dir=tmp,
                    use_cpu=True,
                    bf16=False,
                    report_to="none",
                    seed=seed,
                    max_steps=args.steps,
                    learning_rate=args.lr,
                    lr_scheduler_type="constant",
                    per_device_train_batch_size=args.prompts_per_step * args.num_generations,
                    num_generations=args.num_generations,
                    max_completion_length=args.max_completion_length,
                    temperature=1.0,
                    beta=0.0,
                    loss_type=loss_type,
                    logging_steps=10_000,
                    save_strategy="no",
                    disable_tqdm=True,
                )
                trainer = GRPOTrainer(
                    model=model,
                    reward_funcs=reward,
                    args=cfg,
                    train_dataset=Dataset.from_list(train),
                    processing_class=tok,
                )
                t0 = time.perf_counter()
                trainer.train()
                seconds = time.perf_counter() - t0
            after = evaluate(
                trainer.model, tok, test, 0, args.max_completion_length, args.eval_samples
            )
            run = {
                "loss_type": loss_type,
                "seed": seed,
                "seconds": round(seconds, 1),
                "after": after,
            }
            results["runs"].append(run)
            print(json.dumps(run), flush=True)
            Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
