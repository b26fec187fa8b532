"""The base policy: a tiny GPT-2 built from a config and warm-started by supervised fine-tuning.

Nothing is downloaded. The SFT data come from the train split only (random filler, random order of
operands is already in the prompts), so validation and test problems are never seen. On problems
that need a carry, the SFT target forgets every carry with a probability that grows with the
length of the filler before the answer (``carry_forget_prob`` with no filler,
``carry_forget_prob_at_filler_max`` with ``filler_max``): the base policy then puts real
probability mass on one systematic wrong answer, which group-relative RL can learn to remove, and
its hesitant (longer) completions are more often wrong. Training is deliberately short, so the base
policy sits in an accuracy band where most groups are mixed.

Why the correlation: the task scores only the answer, so the policy may change its length freely.
But if length and correctness were independent within a prompt, every aggregation would leave
length where it is: the expected update of a length decision is E[A_i w(L_i) d log p(L_i)] =
E[A_i] E[w(L_i) d log p(L_i)] = 0, since advantages are centred within the group, whatever the
per-token weight w. Length moves only when it predicts the reward within a prompt, and then the
aggregations move it at different speeds (notes/task_probe.md measures both cases).

Positions (``sft_positions``): SFT rows are left-padded to the batch width. ``attention_mask``
positions (the default; counted over attended tokens, as ``generate`` and the project trainer use)
keep the filler distribution of the SFT data at generation. With ``arange`` positions (as TRL's own
loss pass scores left-padded rows) the warm-started policy learns where a completion *ends* in
absolute positions: at generation it pads nearly every completion to one width (6 tokens), so
completion length barely varies. ``max_pad_shift`` adds random extra left padding (off).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from grpo_ablation.design.base_policy import BasePolicyConfig
from grpo_ablation.layout import BASE_INFO, split_path
from grpo_ablation.policy.tokenizer import build_char_tokenizer
from grpo_ablation.sampling import generate_kwargs, protocol
from grpo_ablation.tasks.addition import (
    AdditionTask,
    carryless_sum,
    extract_answer,
    write_splits,
)
from grpo_ablation.tasks.splits import read_split


def build_model(cfg: BasePolicyConfig, tokenizer: PreTrainedTokenizerFast) -> GPT2LMHeadModel:
    torch.manual_seed(cfg.seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=cfg.n_positions,
        n_embd=cfg.n_embd,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        # No dropout: the model is tiny and under-trained; dropout only slows SFT down and would
        # make GRPO's loss-time log-probs differ from the rollout's.
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
        max_new_tokens=cfg.max_completion_length,
    )
    return model


def sft_completion(row: dict[str, Any], rng: random.Random, cfg: BasePolicyConfig) -> str:
    answer = row["answer"]
    if cfg.carry_forget_prob_at_filler_max is None:
        if row["difficulty"] > 0 and rng.random() < cfg.carry_forget_prob:
            answer = str(carryless_sum(int(row["a"]), int(row["b"])))
        return "." * rng.randint(0, cfg.filler_max) + answer
    filler = rng.randint(0, cfg.filler_max)
    forget = cfg.carry_forget_prob + (
        cfg.carry_forget_prob_at_filler_max - cfg.carry_forget_prob
    ) * filler / max(1, cfg.filler_max)
    if row["difficulty"] > 0 and rng.random() < forget:
        answer = str(carryless_sum(int(row["a"]), int(row["b"])))
    return "." * filler + answer


def _sft_batch(
    rows: list[dict[str, Any]],
    rng: random.Random,
    cfg: BasePolicyConfig,
    tok: PreTrainedTokenizerFast,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    seqs, n_prompt = [], []
    for row in rng.choices(rows, k=cfg.batch_size):
        p = tok.convert_tokens_to_ids(list(row["prompt"]))
        c = [*tok.convert_tokens_to_ids(list(sft_completion(row, rng, cfg))), tok.eos_token_id]
        seqs.append(p + c)
        n_prompt.append(len(p))
    shifts = [rng.randint(0, cfg.max_pad_shift) for _ in seqs]
    width = max(len(s) + k for s, k in zip(seqs, shifts, strict=True))
    ids = torch.full((len(seqs), width), tok.pad_token_id)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for i, (s, n) in enumerate(zip(seqs, n_prompt, strict=True)):
        start = width - len(s)  # left padding, as in GRPO
        ids[i, start:] = torch.tensor(s)
        mask[i, start:] = 1
        labels[i, start + n :] = torch.tensor(s[n:])  # loss on completion tokens only
    return ids, mask, labels


def train_sft(
    cfg: BasePolicyConfig, tok: PreTrainedTokenizerFast, rows: list[dict[str, Any]]
) -> tuple[GPT2LMHeadModel, list[float]]:
    torch.set_num_threads(cfg.num_threads)
    model = build_model(cfg, tok)
    model.train()
    rng = random.Random(f"sft:{cfg.seed}")
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup_steps))
    )
    losses = []
    for _ in range(cfg.sft_steps):
        ids, mask, labels = _sft_batch(rows, rng, cfg, tok)
        positions = None
        if cfg.sft_positions == "attention_mask":
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
        loss = model(input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return model, losses


@torch.no_grad()
def generate_completions(
    model: GPT2LMHeadModel,
    tok: PreTrainedTokenizerFast,
    prompts: list[str],
    *,
    n_samples: int = 1,
    temperature: float | None = 1.0,
    max_new_tokens: int = 10,
    batch_size: int = 256,
    seed: int = 0,
) -> list[list[tuple[str, int, bool]]]:
    """For each prompt, ``n_samples`` completions as (text, tokens incl. eos, truncated).

    ``temperature=None`` is greedy decoding; sampling follows the rollouts' protocol
    (``grpo_ablation.sampling``).
    """
    torch.manual_seed(seed)
    was_training = model.training
    model.eval()
    flat = [p for p in prompts for _ in range(n_samples)]
    out: list[tuple[str, int, bool]] = []
    for i in range(0, len(flat), batch_size):
        enc = tok(flat[i : i + batch_size], return_tensors="pt", padding=True)
        gen = model.generate(
            **enc,
            **generate_kwargs(protocol(temperature, max_new_tokens)),
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )[:, enc["input_ids"].shape[1] :]
        for row in gen.tolist():
            ended = tok.eos_token_id in row
            n = row.index(tok.eos_token_id) + 1 if ended else len(row)
            out.append((tok.decode(row[:n], skip_special_tokens=True), n, not ended))
    model.train(was_training)
    return [out[j * n_samples : (j + 1) * n_samples] for j in range(len(prompts))]


def sample_accuracy(
    model: GPT2LMHeadModel,
    tok: PreTrainedTokenizerFast,
    rows: list[dict[str, Any]],
    *,
    n_samples: int = 8,
    temperature: float | None = 1.0,
    max_new_tokens: int = 10,
    seed: int = 0,
) -> dict[str, Any]:
    """Accuracy (overall and per difficulty), completion lengths, truncation and error modes."""
    gens = generate_completions(
        model,
        tok,
        [r["prompt"] for r in rows],
        n_samples=n_samples,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
    )
    by_diff: dict[int, list[int]] = defaultdict(list)
    lengths, wrong_lengths, per_prompt = [], [], []
    n_carryless = n_unparsed = n_trunc = 0
    for row, samples in zip(rows, gens, strict=True):
        hits = 0
        for text, n, truncated in samples:
            got = extract_answer(text)
            ok = got == row["answer"]
            hits += ok
            by_diff[row["difficulty"]].append(int(ok))
            lengths.append(n)
            n_trunc += truncated
            if not ok:
                wrong_lengths.append(n)
                n_unparsed += got is None
                n_carryless += got == str(carryless_sum(int(row["a"]), int(row["b"])))
        per_prompt.append(hits / len(samples))
    total = len(lengths)
    hist = Counter(lengths)
    return {
        "accuracy": sum(sum(v) for v in by_diff.values()) / max(1, total),
        "accuracy_by_difficulty": {str(k): sum(v) / len(v) for k, v in sorted(by_diff.items())},
        "count_by_difficulty": {str(k): len(v) for k, v in sorted(by_diff.items())},
        "completion_length_mean": sum(lengths) / max(1, total),
        "completion_length_histogram": {str(k): hist[k] for k in sorted(hist)},
        "incorrect_length_mean": sum(wrong_lengths) / len(wrong_lengths) if wrong_lengths else None,
        "unparseable_rate": n_unparsed / max(1, total),
        "carryless_answer_rate": n_carryless / max(1, total),
        "truncation_rate": n_trunc / max(1, total),  # stopped at max_new_tokens without eos
        "prompt_accuracy_band": _band(per_prompt),
        "n_prompts": len(rows),
        "n_samples": n_samples,
    }


def _band(per_prompt: list[float]) -> dict[str, float]:
    """Share of prompts whose own accuracy is 0, in (0, 0.2), [0.2, 0.8], (0.8, 1), or 1."""
    n = max(1, len(per_prompt))
    return {
        "0": sum(p == 0 for p in per_prompt) / n,
        "(0,0.2)": sum(0 < p < 0.2 for p in per_prompt) / n,
        "[0.2,0.8]": sum(0.2 <= p <= 0.8 for p in per_prompt) / n,
        "(0.8,1)": sum(0.8 < p < 1 for p in per_prompt) / n,
        "1": sum(p == 1 for p in per_prompt) / n,
    }


def warm_start(
    cfg: BasePolicyConfig, task: AdditionTask | Path | str, out_dir: Path
) -> dict[str, Any]:
    """Train the base policy, save it (HF directory) and ``base_policy.json``; return the stats.

    ``task`` is a splits directory (with train/validation.jsonl) or a ``AdditionTask`` (splits are
    generated into ``out_dir/splits``).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(task, AdditionTask):
        splits_dir = out_dir / "splits"
        write_splits(task, splits_dir)
    else:
        splits_dir = Path(task)
    train = read_split(split_path(splits_dir, "train"))
    validation = read_split(split_path(splits_dir, "validation"))
    tok = build_char_tokenizer()
    t0 = time.perf_counter()
    model, losses = train_sft(cfg, tok, train)
    sft_seconds = time.perf_counter() - t0
    sampled = sample_accuracy(
        model,
        tok,
        validation,
        n_samples=cfg.eval_samples,
        max_new_tokens=cfg.max_completion_length,
        seed=cfg.seed,
    )
    greedy = sample_accuracy(
        model,
        tok,
        validation,
        n_samples=1,
        temperature=None,
        max_new_tokens=cfg.max_completion_length,
    )
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    stats = {
        "config": asdict(cfg),
        "sft_seconds": round(sft_seconds, 2),
        "sft_loss_first": losses[0] if losses else None,
        "sft_loss_last_100_mean": sum(losses[-100:]) / max(1, len(losses[-100:])),
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "validation_sampled": sampled,
        "validation_greedy": greedy,
        "sampled_accuracy_by_difficulty": sampled["accuracy_by_difficulty"],
        "greedy_accuracy": greedy["accuracy"],
        "completion_length_mean": sampled["completion_length_mean"],
        "completion_length_histogram": sampled["completion_length_histogram"],
        "splits_dir": str(splits_dir),
    }
    (out_dir / BASE_INFO).write_text(json.dumps(stats, indent=2, sort_keys=True) + "\n")
    return stats
