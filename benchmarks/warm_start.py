"""The local warm start's thread count: what each core buys.

Its weights depend on ``base_policy.num_threads``, so the count is a design choice, fixed in the
config. A job of 2 threads has both cores of a 2-core machine to itself; jobs of 1 thread run two
at a time. This compares the SFT steps each finishes per second, side by side: rounds of one
2-thread process alone, then two 1-thread processes at once, each a fresh interpreter under the
project's CPU numerics pins (``grpo_ablation.numerics``).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _steps_per_second(threads: int, steps: int, splits: Path) -> float:
    """SFT steps per second of the default's warm start (draw 9) at ``threads`` threads."""
    import torch

    from grpo_ablation.policy.base_policy import BasePolicyConfig, train_sft
    from grpo_ablation.policy.tokenizer import build_char_tokenizer
    from grpo_ablation.tasks.splits import read_split

    torch.set_num_threads(threads)
    rows = read_split(splits / "train.jsonl")
    cfg = BasePolicyConfig(seed=9, sft_steps=steps, num_threads=threads)
    started = time.perf_counter()
    train_sft(cfg, build_char_tokenizer(), rows)
    return steps / (time.perf_counter() - started)


def _launch(threads: int, steps: int, splits: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.warm_start", str(threads), str(steps), str(splits)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _rate(proc: subprocess.Popen[str]) -> float:
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"warm-start process failed:\n{err[-3000:]}")
    return float(out.strip().splitlines()[-1])


def warm_start_threads(steps: int = 100, rounds: int = 3) -> dict[str, Any]:
    """SFT steps per second of the machine: two 1-thread warm starts at once / one of 2 threads."""
    from grpo_ablation.tasks.addition import AdditionTask, write_splits

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        splits = Path(tmp)
        write_splits(AdditionTask(), splits)
        for _ in range(rounds):
            alone = _rate(_launch(2, steps, splits))
            pair = [_launch(1, steps, splits) for _ in range(2)]
            together = sum(_rate(p) for p in pair)
            rows.append({"two_threads": alone, "two_one_thread": together})
    ratios = [r["two_one_thread"] / r["two_threads"] for r in rows]
    return {
        "benchmark": "warm_start_threads",
        "what": "SFT steps per second on 2 cores: two 1-thread warm starts at once / one "
        "2-thread warm start alone",
        "target": "> 1 (num_threads: 1 is the default's)",
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "rounds": rows,
        "config": {"steps": steps, "rounds": rounds},
    }


if __name__ == "__main__":  # one process of warm_start_threads: its steps per second
    from grpo_ablation.numerics import pin_cpu_numerics

    pin_cpu_numerics()
    with contextlib.redirect_stdout(sys.stderr):
        rate = _steps_per_second(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
    print(json.dumps(rate))
