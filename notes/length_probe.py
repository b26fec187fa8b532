"""Analysis half of notes/length_probe.sh: test accuracy and incorrect-completion lengths.

Samples the base policy and each run's final checkpoint on the test split (4 samples per prompt at
T=1, and greedy) with the base-policy module's sampler, reads the training rollouts' incorrect
lengths over steps 151-200 from metrics.jsonl, and prints per-seed rows, paired differences
sequence_mean - constant and a 95% t-interval over seeds.
"""

from __future__ import annotations

import json
import os
import statistics as st
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from grpo_ablation.analysis.stats import t_interval
from grpo_ablation.policy.base_policy import sample_accuracy
from grpo_ablation.tasks.splits import read_split

torch.set_num_threads(1)
OUT = Path(sys.argv[1])
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0 1 2").split()]
TEST = read_split(OUT / "splits" / "test.jsonl")


def sample(path: Path) -> dict[str, float]:
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = PreTrainedTokenizerFast.from_pretrained(path)
    s = sample_accuracy(model, tok, TEST, n_samples=4, max_new_tokens=12, seed=0)
    g = sample_accuracy(model, tok, TEST, n_samples=1, temperature=None, max_new_tokens=12)
    return {
        "sampled": s["accuracy"],
        "greedy": g["accuracy"],
        "incorrect_len": s["incorrect_length_mean"],
        "len": s["completion_length_mean"],
    }


base = sample(OUT / "base")
print("base", json.dumps({k: round(v, 3) for k, v in base.items()}))
rows: dict[str, dict[int, dict[str, float]]] = {}
for agg in ("sequence_mean", "constant"):
    for seed in SEEDS:
        run = OUT / "runs" / f"{agg}-{seed}"
        metrics = [json.loads(line) for line in (run / "metrics.jsonl").open()]
        tail = [
            m["length/incorrect"]
            for m in metrics
            if m["step"] > 150 and m.get("length/incorrect") is not None
        ]
        last = max(
            (run / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])
        )
        r = sample(last)
        r = {
            "d_sampled": r["sampled"] - base["sampled"],
            "d_greedy": r["greedy"] - base["greedy"],
            "test_incorrect_len": r["incorrect_len"],
            "train_incorrect_len": st.mean(tail),
            "len": r["len"],
        }
        rows.setdefault(agg, {})[seed] = r
        print(agg, seed, json.dumps({k: round(v, 3) for k, v in r.items()}))
for key in ("d_sampled", "d_greedy", "test_incorrect_len", "train_incorrect_len", "len"):
    for agg in rows:
        ci = t_interval([rows[agg][s][key] for s in SEEDS])
        print(f"{agg:14s} {key:20s} mean {ci.mean:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]")
    diffs = [rows["sequence_mean"][s][key] - rows["constant"][s][key] for s in SEEDS]
    ci = t_interval(diffs)
    print(
        f"{'seq - const':14s} {key:20s} mean {ci.mean:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}] (paired)"
    )
