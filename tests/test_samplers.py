"""A sampler is one entry of ``samplers.SAMPLERS``: the options' choices, the schema's allowed
values, the records' sentences and what lm-eval's sampled generation is given all follow it."""

from __future__ import annotations

import pytest

from grpo_ablation.design import schema
from grpo_ablation.design.options import EvaluationConfig, TrainingConfig
from grpo_ablation.evaluation.model import sampler_generation
from grpo_ablation.samplers import SAMPLERS, Sampler, check_sampler, sampler_description


class Rows(list):
    """lm-eval's left-padded context, as the tensor's ``tolist`` gives it."""

    def tolist(self) -> list:
        return list(self)


class FakeHF:
    """lm-eval's HF model as far as sampled generation goes: it records what generate is given."""

    class tokenizer:
        pad_token_id = 0

    def __init__(self) -> None:
        self.given: list[dict] = []

    def _model_generate(self, context, max_length, stop, **kwargs):
        self.given.append(kwargs)
        return context


def test_a_registered_sampler_is_followed_by_the_schema_the_checks_records_and_generation(
    monkeypatch,
):
    asked = []

    def antithetic(seed, rows, seen, temperature):
        asked.append((seed, rows, temperature))
        return {"logits_processor": ["antithetic noise"]}

    entry = Sampler(
        name="antithetic",
        help="pairs of draws from mirrored uniforms",
        rollouts="antithetic rollouts",
        evaluation="antithetic draws of the evaluation",
        vllm_rollouts="antithetic rollouts under vLLM",
        vllm_evaluation="antithetic draws under vLLM",
        hf_arguments=antithetic,
    )
    monkeypatch.setitem(SAMPLERS, entry.name, entry)

    # the evaluation schema's allowed values; training's draws are the trainer's own code, so
    # an entry alone does not make a training sampler (it would have drawn as stream)
    assert schema.properties(EvaluationConfig)["sampler"]["enum"] == [
        "keyed",
        "stream",
        "antithetic",
    ]
    assert schema.properties(TrainingConfig)["sampler"]["enum"] == ["keyed", "stream"]
    with pytest.raises(ValueError, match=r"antithetic"):
        TrainingConfig(sampler="antithetic")
    # the checks accept it, and a misspelling of it is given the name meant
    assert EvaluationConfig.of({"sampler": "antithetic"}).sampler == "antithetic"
    assert check_sampler("antithetic") == "antithetic"
    with pytest.raises(ValueError, match=r"unknown sampler 'antithetc'.*did you mean antithetic"):
        EvaluationConfig.of({"sampler": "antithetc"})
    # the records' sentences
    assert sampler_description("antithetic", vllm=False, evaluation=True) == entry.evaluation
    assert sampler_description("antithetic", vllm=True) == entry.vllm_rollouts
    # lm-eval's sampled generation is given the entry's arguments; a greedy one is left alone
    lm = FakeHF()
    sampler_generation(lm, "antithetic", seed=3, backend="hf")
    lm._model_generate(Rows([[0, 5, 6], [7, 8, 9]]), 9, [], do_sample=True, temperature=0.5)
    lm._model_generate(Rows([[0, 5, 6]]), 9, [], do_sample=False)
    assert lm.given == [
        {"logits_processor": ["antithetic noise"], "do_sample": True, "temperature": 0.5},
        {"do_sample": False},
    ]
    assert asked == [(3, [[5, 6], [7, 8, 9]], 0.5)]  # the prompts' tokens, padding dropped


def test_a_sampler_without_arguments_leaves_lm_evals_draw():
    lm = FakeHF()
    generate = lm._model_generate
    sampler_generation(lm, "stream", seed=3, backend="hf")
    assert lm._model_generate == generate
    sampler_generation(lm, "keyed", seed=3, backend="hf")
    lm._model_generate(Rows([[0, 5]]), 9, [], do_sample=True, temperature=1.0)
    (processor,) = lm.given[0]["logits_processor"]
    assert type(processor).__name__ == "KeyedGumbel"


def test_every_sampler_is_named_in_the_evaluation_options_help():
    help_text = EvaluationConfig.__dataclass_fields__["sampler"].metadata["help"]
    assert all(f"{name}: {s.help}" in help_text for name, s in SAMPLERS.items())
