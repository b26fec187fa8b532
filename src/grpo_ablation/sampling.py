"""The sampling protocol that every rollout and every evaluation completion is drawn under.

A completion is sampled from softmax(logits / T) over the whole vocabulary (greedy: its argmax),
token by token until the model's eos or the token limit, and nothing else acts on the logits: no
top-k, top-p, min-p or typical-p truncation, no repetition penalty, no n-gram ban, no suppressed
tokens. Training (TRL) and evaluation (lm-eval) both state these fields themselves
(:func:`protocol`), and both records say so.

Stating them is not enough with transformers: ``generate`` fills every field its caller leaves
unset (``None``) from the model's own ``generation_config``, and a hub checkpoint's
``generation_config.json`` sets them (Qwen2.5-Instruct: temperature 0.7, top_k 20, top_p 0.8,
repetition_penalty 1.1); TRL then saves that file into every checkpoint. So every model is loaded
with a generation config that holds its special token ids and nothing else
(:func:`neutral_generation_config`), and what was dropped is recorded.
"""

from __future__ import annotations

from typing import Any

# The fields every caller states (TRL's arguments, lm-eval's generation kwargs for both its HF and
# vLLM backends), at the values that leave softmax(logits / T) untouched. min_p None: no min-p step
# (0.0 would add a no-op one). What only transformers knows (typical-p, n-gram bans, suppressed
# tokens ...) stays at its neutral default because the generation config is stripped; vLLM's
# SamplingParams would reject those names.
SAMPLING: dict[str, Any] = {"top_k": 0, "top_p": 1.0, "min_p": None, "repetition_penalty": 1.0}
# Fields that act only when sampling: transformers warns when a greedy call sets them.
SAMPLING_ONLY = ("temperature", "top_k", "top_p", "min_p")
STOP = "the model's eos token id"
# What a loaded model keeps of its generation config: which ids end, pad and start a sequence.
TOKEN_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
_BOOKKEEPING = {"transformers_version", "_from_model_config"}


def protocol(temperature: float | None, max_new_tokens: int) -> dict[str, Any]:
    """The complete sampling settings: greedy when ``temperature`` is None."""
    draw = (
        {"do_sample": False}
        if temperature is None
        else {"do_sample": True, "temperature": float(temperature)}
    )
    return {**draw, **SAMPLING, "max_new_tokens": int(max_new_tokens), "stop": STOP}


def generate_kwargs(settings: dict[str, Any]) -> dict[str, Any]:
    """A protocol as ``generate`` keyword arguments: steps that are absent (None) left out, and so
    are the sampling-only fields of a greedy protocol."""
    greedy = not settings["do_sample"]
    return {
        k: v
        for k, v in settings.items()
        if k != "stop" and v is not None and not (greedy and k in SAMPLING_ONLY)
    }


def stop_token_ids(tokenizer_eos: int | None, generation_eos: int | list[int] | None) -> list[int]:
    """The ids a completion ends at, by TRL's rule (GRPOTrainer.eos_token_ids): the tokenizer's eos
    first, then the generation config's (Qwen2.5-Instruct: ``<|im_end|>`` and ``<|endoftext|>``).
    Training masks everything after the first of them; every evaluation backend stops at exactly
    these (``grpo_ablation.evaluation.model``)."""
    listed = (
        []
        if generation_eos is None
        else [generation_eos]
        if isinstance(generation_eos, int)
        else list(generation_eos)
    )
    first = [] if tokenizer_eos is None or tokenizer_eos in listed else [tokenizer_eos]
    return [*first, *listed]


def neutral_generation_config(model: Any) -> dict[str, Any]:
    """Replace ``model.generation_config`` by one that keeps only its special token ids; return the
    fields dropped (what the checkpoint would otherwise have set for every caller)."""
    from transformers import GenerationConfig

    old = model.generation_config
    ids = {k: getattr(old, k) for k in TOKEN_IDS if getattr(old, k, None) is not None}
    dropped = {
        k: v for k, v in old.to_diff_dict().items() if k not in ids and k not in _BOOKKEEPING
    }
    model.generation_config = GenerationConfig(**ids)
    return dropped
