"""Training throughput: steps per second of short GRPO runs on a tiny model, on the CPU.

``trainer_overhead`` prices what the project trainer adds over stock TRL (its ablation options,
logging and checkpoint bookkeeping); ``gradient_checkpointing`` prices TRL's default that the
project turns off. Both run the same model, batch and objective, interleaved in one process so
that the machine's drift cancels, and report the ratio.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

BATCH, GROUP, MAX_LEN = 32, 8, 10  # per-device batch, completions per prompt, completion tokens

# model_dir, prompt rows, output dir, optimizer steps -> steps per second
Run = Callable[[Path, list[dict[str, str]], Path, int], float]


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


def _one_run(
    kind: str,
    model_dir: Path,
    rows: list[dict[str, str]],
    out: Path,
    steps: int,
    gradient_checkpointing: bool = False,
) -> float:
    """Steps per second of one training run of ``steps`` optimizer steps (setup excluded);
    ``kind`` is ``stock`` (TRL's GRPOTrainer) or ``ours`` (the project's)."""
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
        trainer = GRPOTrainer(**common)
    else:
        # the default objective (std_scaling sample, aggregation sequence_mean) is stock TRL's
        options = TrainingConfig(group_size=GROUP, max_completion_length=MAX_LEN)
        trainer = AblationGRPOTrainer(**common, options=options, run_dir=out)
    started = time.perf_counter()
    trainer.train()
    return steps / (time.perf_counter() - started)


def _interleaved(runs: dict[str, Run], steps: int, repeats: int) -> dict[str, list[float]]:
    """Steps per second of each named run, ``repeats`` times, interleaved with the order
    alternating, after one warm-up run."""
    sps: dict[str, list[float]] = {name: [] for name in runs}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir, rows = _tiny_setup(root)
        with contextlib.redirect_stdout(io.StringIO()):
            # first-call costs (imports, kernels, allocator) out of the timed runs
            _one_run("stock", model_dir, rows, root / "warmup", 5)
        for r in range(repeats):
            # alternate the order, so drift within a pair does not favour either
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            with contextlib.redirect_stdout(io.StringIO()):
                for name in order:
                    sps[name].append(runs[name](model_dir, rows, root / f"{name}{r}", steps))
    return sps


def _ratios(over: list[float], under: list[float]) -> list[float]:
    """Ratio of each interleaved pair."""
    return [o / u for o, u in zip(over, under, strict=True)]


def _config(steps: int, repeats: int) -> dict[str, int]:
    return {"steps": steps, "repeats": repeats, "batch": BATCH, "G": GROUP, "max_len": MAX_LEN}


def trainer_overhead(steps: int = 60, repeats: int = 6) -> dict[str, Any]:
    """Project trainer vs stock TRL GRPOTrainer, same model, batch and objective."""
    sps = _interleaved(
        {kind: lambda *a, kind=kind: _one_run(kind, *a) for kind in ("stock", "ours")},
        steps,
        repeats,
    )
    ratios = _ratios(sps["ours"], sps["stock"])
    return {
        "benchmark": "trainer_overhead",
        "what": "steps/s of the project trainer / steps/s of stock TRL GRPOTrainer",
        "target": ">= 0.95",
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "stock_steps_per_s": sps["stock"],
        "project_steps_per_s": sps["ours"],
        "config": _config(steps, repeats),
    }


def gradient_checkpointing(steps: int = 60, repeats: int = 6) -> dict[str, Any]:
    """What TRL's default gradient checkpointing costs the project trainer (off by default in
    the project's compute section; it changes no number, tests/test_training_run.py)."""
    sps = _interleaved(
        {
            f"checkpointing={on}": lambda *a, on=on: _one_run("ours", *a, gradient_checkpointing=on)
            for on in (False, True)
        },
        steps,
        repeats,
    )
    ratios = _ratios(sps["checkpointing=False"], sps["checkpointing=True"])
    return {
        "benchmark": "gradient_checkpointing",
        "what": "steps/s with gradient checkpointing off / on (project trainer)",
        "target": "> 1 (off is the default)",
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "steps_per_s": sps,
        "config": _config(steps, repeats),
    }
