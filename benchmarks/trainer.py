"""Training throughput: steps per second of short GRPO runs on a tiny model, on the CPU.

``trainer_overhead`` prices what the project trainer adds over stock TRL (its ablation options,
logging and checkpoint bookkeeping); ``gradient_checkpointing`` prices TRL's default that the
project turns off. Both train the same model, batch and objective, and report the ratio.

The two trainers take turns step by step (``_alternating``): each runs in a thread of its own and
waits at the start of each optimizer step until the other has done one. A step takes about 40 ms
here, and this machine's speed drifts by a third over spans of a second or so (neighbours on the
host; the step's own CPU time drifts with it), so runs timed one after the other differ by
±15% for the same work; adjacent steps see the same machine. A step's time runs from its start to
the start of the next one, so logging and fetching the next batch count.
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from grpo_ablation.analysis.stats import t_interval

BATCH, GROUP, MAX_LEN = 32, 8, 10  # per-device batch, completions per prompt, completion tokens


def _tiny_setup(root: Path) -> tuple[Path, list[dict[str, str]]]:
    """A two-layer GPT-2 on the character tokenizer, saved under ``root/model``, and the 100
    one-digit additions it trains on."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from grpo_ablation.policy.tokenizer import build_char_tokenizer

    tok = build_char_tokenizer()
    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=4,
        n_positions=32,
        vocab_size=len(tok),
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = GPT2LMHeadModel(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    rows = [
        {"prompt_id": f"p{a}_{b}", "prompt": f"{a}+{b}=", "answer": str(a + b)}
        for a in range(10)
        for b in range(10)
    ]
    return root / "model", rows


def _reward(
    prompts: list[str], completions: list[str], answer: list[str], **kwargs: Any
) -> list[float]:
    return [
        1.0 if c.strip(".").startswith(a) else 0.0 for c, a in zip(completions, answer, strict=True)
    ]


def _trainer(
    kind: str,
    model_dir: Path,
    rows: list[dict[str, str]],
    out: Path,
    steps: int,
    gradient_checkpointing: bool = False,
) -> Any:
    """A trainer of ``steps`` optimizer steps; ``kind`` is ``stock`` (TRL's GRPOTrainer) or
    ``ours`` (the project's)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ablation.design.options import TrainingConfig
    from grpo_ablation.training.trainer import AblationGRPOTrainer

    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=BATCH,
        num_generations=GROUP,
        max_completion_length=MAX_LEN,
        max_steps=steps,
        learning_rate=5e-4,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=True,
        logging_steps=1,
        disable_dropout=True,
        log_level="error",
        loss_type="grpo",
        # the project trainer scales advantages itself (std_scaling); TRL's stays neutral there
        scale_rewards="group" if kind == "stock" else "none",
        gradient_checkpointing=gradient_checkpointing,  # TRL's default is True, the project's False
    )
    common: dict[str, Any] = dict(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        reward_funcs=_reward,
    )
    if kind == "stock":
        return GRPOTrainer(**common)
    # the default objective (std_scaling sample, aggregation sequence_mean) is stock TRL's
    options = TrainingConfig(group_size=GROUP, max_completion_length=MAX_LEN)
    return AblationGRPOTrainer(**common, options=options, run_dir=out)


class _Turns:
    """Makes trainers in threads take turns, one optimizer step each, and times the steps."""

    def __init__(self, names: list[str]) -> None:
        self.names, self.turn, self.done = names, 0, set()
        self.cond = threading.Condition()
        self.seconds: dict[str, list[float]] = {n: [] for n in names}
        self._started: dict[str, float] = {}

    def callback(self, name: str) -> TrainerCallback:
        turns = self

        class _Mine(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                turns.step(name)

            def on_train_end(self, args, state, control, **kwargs):
                turns.finish(name)

        return _Mine()

    def _pass(self, name: str) -> None:
        # the next unfinished trainer after this one (itself if it is the last one left)
        i = self.names.index(name)
        for k in range(1, len(self.names) + 1):
            other = self.names[(i + k) % len(self.names)]
            if other not in self.done:
                self.turn = self.names.index(other)
                break
        self.cond.notify_all()

    def step(self, name: str) -> None:
        with self.cond:
            if name in self._started:  # the end of this trainer's previous step
                self.seconds[name].append(time.perf_counter() - self._started.pop(name))
                self._pass(name)
            self.cond.wait_for(lambda: self.names[self.turn] == name)
            self._started[name] = time.perf_counter()

    def finish(self, name: str) -> None:
        with self.cond:
            self._started.pop(name, None)  # its last step ends in teardown: not timed
            self.done.add(name)
            self._pass(name)


def _alternating(make: dict[str, Callable[..., Any]], steps: int) -> dict[str, list[float]]:
    """Step times of trainers built by ``make`` (model_dir, rows, out, steps -> trainer), trained
    in threads that take turns step by step, after a short warm-up run."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir, rows = _tiny_setup(root)
        with contextlib.redirect_stdout(io.StringIO()):
            # first-call costs (imports, kernels, allocator) out of the timed runs
            _trainer("stock", model_dir, rows, root / "warmup", 5).train()
            trainers = {n: f(model_dir, rows, root / n, steps) for n, f in make.items()}
            turns = _Turns(list(trainers))
            for name, trainer in trainers.items():
                trainer.add_callback(turns.callback(name))
            errors: list[BaseException] = []

            def train(name: str, trainer: Any) -> None:
                try:
                    trainer.train()
                except BaseException as exc:  # re-raised below, in the caller's thread
                    errors.append(exc)
                    turns.finish(name)

            threads = [threading.Thread(target=train, args=item) for item in trainers.items()]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if errors:
            raise errors[0]
    return turns.seconds


def _paired(over: list[float], under: list[float]) -> list[float]:
    """Speed ratio of each pair of adjacent steps: under's step time / over's."""
    return [u / o for o, u in zip(over, under, strict=True)]


# The trainers compared: name -> (kind, gradient checkpointing).
VARIANTS = {"stock": ("stock", False), "ours": ("ours", False), "ours+gc": ("ours", True)}


def _step_seconds(names: list[str], steps: int) -> dict[str, list[float]]:
    """Step times of the named variants trained in turns, in this process."""
    torch.set_num_threads(1)
    make = {
        n: lambda *a, n=n: _trainer(VARIANTS[n][0], *a, gradient_checkpointing=VARIANTS[n][1])
        for n in names
    }
    return _alternating(make, steps)


def reading(ratios: list[float], target: float) -> dict[str, Any]:
    """The mean of the processes' ratios with its 95% t interval, read against ``target`` (at
    least): "met" when the interval lies at or above it, "not met" when below, else "not
    resolved" (the processes differ by more than the distance to the target; one process has
    NaN bounds, which compare false both ways)."""
    iv = t_interval(ratios)
    verdict = "met" if iv.low >= target else "not met" if iv.high < target else "not resolved"
    return {"ratio_mean": iv.mean, "ratio_ci95": [iv.low, iv.high], "verdict": verdict}


def _compare(
    over: str, under: str, steps: int, processes: int, target: float | None = None
) -> dict[str, Any]:
    """``over``'s speed / ``under``'s: the median over steps of adjacent pairs, in each of
    ``processes`` fresh interpreters (a process's memory layout moves the ratio by several percent
    from one process to the next, more than the steps within one do), and their median; with a
    ``target``, also their mean with its interval read against it (``reading``: the processes
    are the units)."""
    per_process = []
    for _ in range(processes):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.trainer", over, under, str(steps)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{over} vs {under} failed:\n{done.stderr[-3000:]}")
        seconds = json.loads(done.stdout.strip().splitlines()[-1])
        per_process.append(
            {
                "ratio_median": statistics.median(_paired(seconds[over], seconds[under])),
                "step_ms_median": {k: 1000 * statistics.median(v) for k, v in seconds.items()},
            }
        )
    ratios = [r["ratio_median"] for r in per_process]
    return {
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "per_process": per_process,
        "config": {
            "steps": steps,
            "processes": processes,
            "batch": BATCH,
            "G": GROUP,
            "max_len": MAX_LEN,
        },
        **(reading(ratios, target) if target is not None else {}),
    }


TRAINER_TARGET = 0.95  # the project trainer's steps per second, at least this share of stock's


def trainer_overhead(steps: int = 200, processes: int = 15) -> dict[str, Any]:
    """Project trainer vs stock TRL GRPOTrainer, same model, batch and objective. Fifteen
    processes: their ratios spread with an SD of about 0.027 here (2026-12-03), so the mean's
    interval is about ±0.015, the distance to the target the trainer has been at; five gave ±0.034."""
    return {
        "benchmark": "trainer_overhead",
        "what": "steps/s of the project trainer / steps/s of stock TRL GRPOTrainer, "
        "step by step in turns",
        "target": f">= {TRAINER_TARGET}",
        **_compare("ours", "stock", steps, processes, TRAINER_TARGET),
    }


def gradient_checkpointing(steps: int = 200, processes: int = 3) -> dict[str, Any]:
    """What TRL's default gradient checkpointing costs the project trainer (off by default in
    the project's compute section; it changes no number, tests/test_training_run.py)."""
    return {
        "benchmark": "gradient_checkpointing",
        "what": "steps/s with gradient checkpointing off / on (project trainer), step by step in "
        "turns",
        "target": "> 1 (off is the default)",
        **_compare("ours", "ours+gc", steps, processes),
    }


if __name__ == "__main__":  # one process of _compare: the step times of two variants, as JSON
    with contextlib.redirect_stdout(sys.stderr):
        result = _step_seconds(sys.argv[1:3], int(sys.argv[3]))
    print(json.dumps(result))
