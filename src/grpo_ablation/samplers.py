"""The samplers: how a token is drawn from softmax(logits / T), in rollouts and in evaluation.

One entry per sampler in ``SAMPLERS`` holds everything that varies between samplers, so adding
one is one entry: the options' choices and the schema's allowed values (``training.sampler``,
``evaluation.sampler``), the sentences the records state, and what lm-eval's sampled generation
is given (``grpo_ablation.evaluation.model.sampler_generation``). Training's keyed draws (keys
over the whole generation batch) are the trainer's own (``grpo_ablation.training.trainer``); the
entries say how they are recorded. Importable without torch: the keyed draws import
``grpo_ablation.keyed_sampling`` when they are made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HFArguments = Callable[[int, list[list[int]], dict[tuple, int], float], dict[str, Any]]
VLLMArguments = Callable[[int, list[list[int]], dict[tuple, int], list[Any]], list[Any]]


@dataclass(frozen=True)
class Sampler:
    """One sampler: its name, its help (the evaluation option's phrase), the sentences the
    records state, and what lm-eval's sampled generation is given. ``hf_arguments(seed, rows,
    seen, temperature)``: extra ``generate`` keyword arguments for a batch of sampled rows (their
    prompt tokens; ``seen`` counts each prompt's earlier draws in the evaluation); ``vllm_arguments
    (seed, rows, seen, params)``: each sampled request's SamplingParams. None: lm-eval's own."""

    name: str
    help: str
    rollouts: str  # transformers' draws in training
    evaluation: str  # lm-eval's HF model
    vllm_rollouts: str
    vllm_evaluation: str
    hf_arguments: HFArguments | None = None
    vllm_arguments: VLLMArguments | None = None


def _keyed_hf(seed: int, rows: list[list[int]], seen: dict, temperature: float) -> dict[str, Any]:
    """The keyed Gumbel-max processor of the rows: keys (seed, prompt tokens, repeat)."""
    from grpo_ablation.keyed_sampling import KeyedGumbel, evaluation_keys

    return {"logits_processor": [KeyedGumbel(evaluation_keys(seed, rows, seen), temperature)]}


def _keyed_vllm(seed: int, rows: list[list[int]], seen: dict, params: list[Any]) -> list[Any]:
    """Each request's SamplingParams seeded by its key (seed, prompt tokens, repeat)."""
    from grpo_ablation.keyed_sampling import evaluation_keys, seeded_requests

    return seeded_requests(params, evaluation_keys(seed, rows, seen))


# With vLLM the key seeds the request's own generator (grpo_ablation.keyed_sampling.seeded_requests).
VLLM_KEYED = "vLLM with a per-request seed: the key of "
SAMPLERS: dict[str, Sampler] = {
    s.name: s
    for s in (
        Sampler(
            name="keyed",
            help=(
                "Gumbel-max noise named by (seed, prompt, repeat, position), so every checkpoint "
                "is evaluated on the same random numbers (with backend vllm the key seeds each "
                "request)"
            ),
            rollouts=(
                "keyed Gumbel-max: the noise of token v at position t of a completion is a hash of "
                "(seed, generation step, prompt id, occurrence in the batch, slot in the group, t, v)"
            ),
            evaluation=(
                "keyed Gumbel-max: the noise of token v at position t is a hash of "
                "(seed, prompt tokens, repeat, t, v)"
            ),
            vllm_rollouts=VLLM_KEYED
            + "(seed, generation step, prompt id, occurrence in the batch, slot in the group)",
            vllm_evaluation=VLLM_KEYED + "(seed, prompt tokens, repeat)",
            hf_arguments=_keyed_hf,
            vllm_arguments=_keyed_vllm,
        ),
        Sampler(
            name="stream",
            help="the global random stream (torch's, seeded by lm-eval)",
            rollouts="the global random stream of torch (transformers' multinomial draw)",
            evaluation="the global random stream of torch seeded by lm-eval (transformers' multinomial)",
            # Stream draws under a colocated engine seed each request from torch's global stream
            # (keyed_sampling.stream_seeds): TRL seeds the engine itself with the process index.
            vllm_rollouts="vLLM with a per-request seed drawn from the global random stream of torch",
            vllm_evaluation=(
                "the global random stream of torch seeded by lm-eval (transformers' multinomial)"
            ),
        ),
    )
}


# Training's draws are the trainer's own code (keys over the whole generation batch), not an
# entry's arguments: an entry added for evaluation is no training sampler until the trainer draws
# it (grpo_ablation.training.trainer), so training's choices are named here, not read off SAMPLERS.
TRAINING_SAMPLERS = ("keyed", "stream")
assert set(TRAINING_SAMPLERS) <= set(SAMPLERS)


def evaluation_sampler_help() -> str:
    """The evaluation option's help: each registered sampler's phrase."""
    phrases = "; ".join(f"{s.name}: {s.help}" for s in SAMPLERS.values())
    return f"how each sampled evaluation token is drawn: {phrases}"


def sampler_description(sampler: str, vllm: bool, evaluation: bool = False) -> str:
    """The recorded sampler sentence of rollouts or of an evaluation, with vLLM or without."""
    s = SAMPLERS[sampler]
    if evaluation:
        return s.vllm_evaluation if vllm else s.evaluation
    return s.vllm_rollouts if vllm else s.rollouts


def check_sampler(sampler: str) -> str:
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; expected one of {tuple(SAMPLERS)}")
    return sampler
