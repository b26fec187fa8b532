"""Supervised warm-start of any Hugging Face causal LM on (prompt, completion) pairs.

Why: GRPO learns only from groups whose rewards differ. A randomly initialised stand-in model
never produces a correct, parseable answer, so every group would be all-incorrect and the
advantages all zero. A short SFT on the training split teaches the answer format and part of the
task, so GRPO groups are mixed.

The warm-start sees prompts exactly as TRL 1.16's ``GRPOTrainer`` feeds them to the model at
generation (``render_prompt``, tokenized as the trainer tokenizes them) and scores completions at
the positions ``generate`` gives left-padded rows (counted over attended tokens), so what it
teaches is what GRPO's rollouts start from.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

Message = dict[str, Any]
Prompt = str | list[Message]


def is_conversation(prompt: Prompt) -> bool:
    """TRL's test (``trl.data_utils.is_conversational``): a list whose first item has a role."""
    return (
        isinstance(prompt, list)
        and bool(prompt)
        and isinstance(prompt[0], dict)
        and "role" in prompt[0]
    )


def render_prompt(
    tokenizer: Any,
    prompt: Prompt,
    *,
    tools: Sequence[dict | Callable] | None = None,
    chat_template: str | None = None,
    **chat_template_kwargs: Any,
) -> str:
    """The text GRPOTrainer generates from for ``prompt``; a plain string is returned unchanged.

    TRL 1.16's ``GRPOTrainer._tokenize_prompts`` renders a conversational batch with
    ``processing_class.apply_chat_template(conversation=prompts, tools=self.tools or None,
    chat_template=self.chat_template, add_generation_prompt=True, tokenize=True, return_dict=True,
    **self.chat_template_kwargs)``: always ``add_generation_prompt=True`` (unlike
    ``trl.data_utils.apply_chat_template``, which continues a final assistant message), no
    ``continue_final_message``. ``self.chat_template`` is None unless tools are used with a
    template that is not prefix-preserving. ``tools``, ``chat_template`` and the keyword arguments
    (``GRPOConfig.chat_template_kwargs``) are passed through the same way.
    """
    if not is_conversation(prompt):
        if not isinstance(prompt, str):
            raise TypeError(
                f"prompt must be a string or a list of messages, got {type(prompt).__name__}"
            )
        return prompt
    return tokenizer.apply_chat_template(
        prompt,
        tools=list(tools) if tools else None,  # `or None` as TRL: Llama renders tool text for []
        chat_template=chat_template,
        add_generation_prompt=True,
        tokenize=False,
        **chat_template_kwargs,
    )


def prompt_ids(tokenizer: Any, prompt: Prompt, **render_kwargs: Any) -> list[int]:
    """Token ids of ``prompt`` as GRPOTrainer tokenizes it.

    A conversation goes through ``apply_chat_template(tokenize=True)``, which tokenizes the
    rendered text with ``add_special_tokens=False`` (the template writes its own special tokens);
    a plain string goes through ``processing_class(text=prompts)``, i.e. with the tokenizer's
    default ``add_special_tokens=True`` (a BOS for tokenizers that add one; none for Qwen).
    """
    text = render_prompt(tokenizer, prompt, **render_kwargs)
    return list(tokenizer(text, add_special_tokens=not is_conversation(prompt))["input_ids"])


def warm_start_pretrained(
    model: Any,
    tokenizer: Any,
    pairs: list[tuple[Prompt, str]],
    *,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    warmup_steps: int = 10,
    weight_decay: float = 0.0,
    max_grad_norm: float | None = 1.0,
) -> list[float]:
    """Fine-tune ``model`` in place on (prompt, completion) pairs; return the loss of each step.

    Each row is the prompt's ids (``prompt_ids``) followed by the completion's ids (no special
    tokens added) and the tokenizer's eos id, left-padded to the batch width with the pad id.
    The loss is the mean cross-entropy over completion tokens and the eos (the prompt is not
    scored); position ids are ``attention_mask.cumsum(-1) - 1`` clamped at 0, as ``generate``
    computes them for left-padded rows. AdamW with a linear warm-up over ``warmup_steps``, then
    a constant ``lr``; batches are drawn without replacement from seeded shuffles of ``pairs``
    (``random.Random(f"sft:{seed}")``), and torch and python's RNGs are seeded, so the same
    arguments give the same weights. The model's train/eval mode is restored afterwards.
    """
    import torch

    if not pairs:
        raise ValueError("warm_start_pretrained needs at least one (prompt, completion) pair")
    if steps < 0 or batch_size < 1:
        raise ValueError(f"need steps >= 0 and batch_size >= 1, got {steps}, {batch_size}")
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos token: completions could not end")
    pad = eos if pad is None else pad  # as GRPOTrainer: pad falls back to eos

    random.seed(seed)
    torch.manual_seed(seed)
    rng = random.Random(f"sft:{seed}")
    rows = [
        (prompt_ids(tokenizer, p), [*tokenizer(c, add_special_tokens=False)["input_ids"], eos])
        for p, c in pairs
    ]
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, warmup_steps))
    )

    order: list[int] = []
    losses: list[float] = []
    was_training = model.training
    model.train()
    try:
        for _ in range(steps):
            batch = []
            while len(batch) < batch_size:
                if not order:
                    order = list(range(len(rows)))
                    rng.shuffle(order)
                batch.append(rows[order.pop()])
            width = max(len(p) + len(c) for p, c in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            scored = torch.zeros((len(batch), width), dtype=torch.bool)
            for i, (p, c) in enumerate(batch):
                start = width - len(p) - len(c)
                ids[i, start:] = torch.tensor(p + c)
                mask[i, start:] = 1
                scored[i, width - len(c) :] = True
            ids, mask, scored = ids.to(device), mask.to(device), scored.to(device)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
            # Token t is predicted from the logits at t - 1.
            logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
            token_logp = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            target = scored[:, 1:]
            loss = -(token_logp * target).sum() / target.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
    finally:
        model.train(was_training)
    return losses
