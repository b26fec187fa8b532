"""Gradient capture for the trainer conformance tests (importable, and a CLI for
``accelerate launch``). Generation is replaced by a fixed table so that every process layout sees
the same generation batch; everything after generation is the real trainer code.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections import Counter
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback

from grpo_ablation.policy.tokenizer import build_char_tokenizer

PROMPTS = [f"{a}+{b}=" for a, b in [(1, 2), (3, 4), (5, 6), (7, 8), (9, 1), (2, 3), (4, 5), (6, 7)]]
# Prompts of different lengths are left-padded together: positions must still match sampling.
MIXED_PROMPTS = ["1+2=", "13+4=", "5+26=", "7+8=", "19+1=", "2+3=", "4+55=", "6+7="]
MAX_LEN = 6
G = 4


def fixed_completion(prompt_ids: list[int], k: int, eos: int) -> list[int]:
    """Deterministic completion number k for a prompt: varied lengths, some truncated."""
    h = int(hashlib.sha256(f"{prompt_ids}-{k}".encode()).hexdigest(), 16)
    length = 1 + h % MAX_LEN
    body = [3 + (h >> (8 * i)) % 10 for i in range(length)]  # digit tokens
    return body if (h >> 60) % 3 == 0 else [*body[: length - 1], eos]


def digit_reward(prompts, completions, **kwargs):
    """1 if the completion contains a 7 or a 3, else 0 (a fixed function of the text)."""
    return [1.0 if ("7" in c or "3" in c) else 0.0 for c in completions]


def build_model_dir(path: Path) -> Path:
    tok = build_char_tokenizer()
    torch.manual_seed(1234)
    cfg = GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=2,
        n_positions=32,
        vocab_size=len(tok),
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = GPT2LMHeadModel(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def fixed_sampling_logps(completion: list[int], vocab: int) -> list[float]:
    """Stand-in for a generator's (vLLM's) per-token log-probabilities of a fixed completion: the
    uniform model's log(1/vocab) plus a deterministic offset in [-0.4, 0.4], so that the ratio of
    the (nearly uniform) tiny model to the "sampler" is spread around 1."""
    out = []
    for i, tok in enumerate(completion):
        h = int(hashlib.sha256(f"{completion}-{i}-{tok}".encode()).hexdigest(), 16)
        out.append(-math.log(vocab) + 0.8 * ((h % 1000) / 999 - 0.5))
    return out


class _FixedGeneration:
    # Set by capture(): return sampling log-probabilities, as vLLM does.
    sampling_logps = False

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
        seen: Counter = Counter()
        out = []
        for ids in prompt_ids:
            key = tuple(ids)
            out.append(fixed_completion(list(ids), seen[key], self.eos_token_ids[0]))
            seen[key] += 1
        if not self.sampling_logps:
            return out, None
        vocab = len(self.processing_class)
        return out, [fixed_sampling_logps(c, vocab) for c in out]


class _CaptureGrads(TrainerCallback):
    """The gradient of every optimizer step (``grads``: the first)."""

    def __init__(self, model):
        self.model = model
        self.steps: list[dict[str, torch.Tensor]] = []

    @property
    def grads(self) -> dict[str, torch.Tensor] | None:
        return self.steps[0] if self.steps else None

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.steps.append(
            {
                n: p.grad.detach().clone()
                for n, p in self.model.named_parameters()
                if p.grad is not None
            }
        )


def capture(
    model_dir: Path,
    out_dir: Path,
    *,
    stock: dict | None = None,
    prompts: list[str] = PROMPTS,
    is_mode: str | None = None,
    max_completion_length: int = MAX_LEN,
    **objective,
) -> dict:
    """One generation batch and ``num_iterations`` optimizer steps on it (one, by default);
    returns the first step's {param: grad} (``grads``), every step's (``steps``) and the log.

    ``stock`` switches to TRL's GRPOTrainer with those GRPOConfig fields (loss_type,
    scale_rewards); otherwise the project trainer runs with ``objective`` (std_scaling,
    std_eps, aggregation). ``is_mode`` makes the generator return sampling log-probabilities
    (``fixed_sampling_logps``) and turns on TRL's vLLM importance-sampling correction in that
    mode, so TRL computes the ratio exactly as it does when vLLM generates.
    ``max_completion_length``: L_max of both configs; the fixed completions stay at most MAX_LEN
    tokens long whatever it is.
    """
    from accelerate import PartialState
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ablation.design.options import TrainingConfig
    from grpo_ablation.training.trainer import AblationGRPOTrainer

    state = PartialState(cpu=True)  # joins torchrun's processes (gloo)
    ga = objective.pop("gradient_accumulation_steps", 1)
    mu = objective.pop("num_iterations", 1)
    lr = objective.pop("learning_rate", 1e-3)
    beta = objective.pop("beta", 0.0)
    batch = len(prompts) // 2 * G  # 4 prompts per step
    args = GRPOConfig(
        output_dir=str(out_dir),
        per_device_train_batch_size=batch // (ga * state.num_processes),
        gradient_accumulation_steps=ga,
        num_generations=G,
        max_completion_length=max_completion_length,
        max_steps=mu,
        num_iterations=mu,
        learning_rate=lr,
        max_grad_norm=0.0,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=True,
        logging_steps=1,
        beta=beta,
        # the project's clip ranges are TRL's attributes too (the trainer refuses a mismatch)
        **(
            {}
            if stock is not None
            else {
                "epsilon": objective.get("clip_eps_low", 0.2),
                "epsilon_high": objective.get("clip_eps_high", 0.2),
            }
        ),
        shuffle_dataset=False,
        disable_dropout=True,
        **(stock or {"loss_type": "grpo", "scale_rewards": "none"}),
        **(
            {
                "vllm_importance_sampling_correction": True,
                "vllm_importance_sampling_mode": is_mode,
                "vllm_importance_sampling_clip_max": 1.3,
            }
            if is_mode
            else {}
        ),
    )
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    data = Dataset.from_list([{"prompt": p, "prompt_id": f"p{i}"} for i, p in enumerate(prompts)])
    common = dict(
        model=model, args=args, train_dataset=data, processing_class=tok, reward_funcs=digit_reward
    )
    if stock is not None:
        cls = type("StockFixed", (_FixedGeneration, GRPOTrainer), {})
        trainer = cls(**common)
    else:
        cls = type("ProjectFixed", (_FixedGeneration, AblationGRPOTrainer), {})
        options = TrainingConfig(
            group_size=G,
            max_completion_length=max_completion_length,
            num_iterations=mu,
            beta=beta,
            **objective,
        )
        trainer = cls(**common, run_dir=out_dir, options=options)
    if is_mode:
        # vLLM itself is not needed: generation is the fixed table; only its log-probabilities and
        # TRL's correction are switched on (use_vllm is read at generation and in the loss).
        trainer.use_vllm, trainer.sampling_logps = True, True
    grab = _CaptureGrads(model)
    trainer.add_callback(grab)
    trainer.train()
    return {
        "grads": grab.grads,
        "steps": grab.steps,
        "log": trainer.state.log_history,
        "rank": state.process_index,
        "world": state.num_processes,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--objectives", required=True, help="JSON list of objective dicts")
    a = parser.parse_args()
    torch.set_num_threads(1)
    grads = []
    for i, objective in enumerate(json.loads(a.objectives)):
        result = capture(a.model, a.out / str(i), **objective)
        grads.append(result["grads"])
    if result["rank"] == 0:
        torch.save({"world": result["world"], "grads": grads}, a.out / "grads.pt")


if __name__ == "__main__":
    sys.exit(main())
