"""The base policy: built from a config, SFT-warm-started deterministically, saved as HF files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_ablation.policy.base_policy import (
    BasePolicyConfig,
    build_model,
    sft_completion,
    warm_start,
)
from grpo_ablation.policy.tokenizer import build_char_tokenizer
from grpo_ablation.tasks.addition import AdditionTask, extract_answer, write_splits

TINY = BasePolicyConfig(
    n_layer=1,
    n_embd=16,
    n_head=2,
    sft_steps=5,
    batch_size=8,
    eval_samples=2,
    max_completion_length=6,
)
TASK = AdditionTask(n_train=40, n_validation=10, n_test=10)


def test_from_dict_rejects_unknown_keys() -> None:
    assert BasePolicyConfig.from_dict({"seed": 3}).seed == 3
    with pytest.raises(ValueError, match="n_layers"):
        BasePolicyConfig.from_dict({"n_layers": 2})


def test_build_model_matches_tokenizer() -> None:
    tok = build_char_tokenizer()
    model = build_model(TINY, tok)
    assert model.config.vocab_size == len(tok)
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert model.generation_config.pad_token_id == tok.pad_token_id


def test_sft_completions_are_filler_then_answer_or_the_carry_free_error() -> None:
    rng = random.Random(0)
    cfg = BasePolicyConfig(carry_forget_prob=0.5, filler_max=3)
    carry = {"a": 47, "b": 8, "answer": "55", "difficulty": 1}
    got = {extract_answer(sft_completion(carry, rng, cfg)) for _ in range(200)}
    assert got == {"55", "45"}
    plain = {"a": 12, "b": 3, "answer": "15", "difficulty": 0}
    assert {extract_answer(sft_completion(plain, rng, cfg)) for _ in range(50)} == {"15"}


def test_warm_start_saves_a_loadable_hf_directory(tmp_path: Path) -> None:
    splits = tmp_path / "splits"
    write_splits(TASK, splits)
    stats = warm_start(TINY, splits, tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "base_policy.json").read_text())
    assert saved["greedy_accuracy"] == stats["greedy_accuracy"]
    assert set(saved["sampled_accuracy_by_difficulty"]) <= {"0", "1", "2"}
    assert saved["completion_length_mean"] > 0 and saved["completion_length_histogram"]
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(tmp_path / "m")
    assert tok.padding_side == "left" and tok.eos_token_id == model.generation_config.eos_token_id
    enc = tok(["3+4=", "47+8="], return_tensors="pt", padding=True)
    out = model.generate(**enc, max_new_tokens=4, do_sample=False)
    assert out.shape[0] == 2


def test_same_seed_same_weights_other_seed_other_weights(tmp_path: Path) -> None:
    splits = tmp_path / "splits"
    write_splits(TASK, splits)
    warm_start(TINY, splits, tmp_path / "a")
    warm_start(TINY, splits, tmp_path / "b")
    warm_start(BasePolicyConfig.from_dict({**TINY.__dict__, "seed": 1}), splits, tmp_path / "c")
    a, b, c = (AutoModelForCausalLM.from_pretrained(tmp_path / x).state_dict() for x in "abc")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_warm_start_accepts_a_task_config(tmp_path: Path) -> None:
    stats = warm_start(TINY, TASK, tmp_path)
    assert (tmp_path / "splits" / "manifest.json").exists()
    assert 0.0 <= stats["validation_sampled"]["accuracy"] <= 1.0


def test_hesitation_predicts_the_error_in_the_sft_data() -> None:
    # Forget probability goes linearly from carry_forget_prob (no filler) to
    # carry_forget_prob_at_filler_max (filler_max characters): length and correctness correlate
    # within a prompt, which is what length aggregation needs to act on.
    rng = random.Random(0)
    cfg = BasePolicyConfig(carry_forget_prob=0.0, carry_forget_prob_at_filler_max=1.0, filler_max=2)
    carry = {"a": 47, "b": 8, "answer": "55", "difficulty": 1}
    by_filler: dict[int, set[str | None]] = {}
    for _ in range(400):
        text = sft_completion(carry, rng, cfg)
        by_filler.setdefault(len(text) - len(text.lstrip(".")), set()).add(extract_answer(text))
    assert by_filler == {0: {"55"}, 1: {"55", "45"}, 2: {"45"}}
    plain = {"a": 12, "b": 3, "answer": "15", "difficulty": 0}
    assert {extract_answer(sft_completion(plain, rng, cfg)) for _ in range(50)} == {"15"}


def test_sft_positions_is_a_named_choice():
    assert BasePolicyConfig().sft_positions == "attention_mask"
    BasePolicyConfig(sft_positions="attention_mask")
    with pytest.raises(ValueError, match="sft_positions must be"):
        BasePolicyConfig(sft_positions="rotary")
