"""One stop set for every generator: training (TRL's GRPOTrainer.eos_token_ids), the HF
evaluation backend and lm-eval's vLLM backend end a completion at exactly the same token ids, and
both evaluation backends decode the text without special tokens, as training's reward reads it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from conformance import build_model_dir

from grpo_ablation.sampling import stop_token_ids

# Qwen2.5-Instruct's ids: the tokenizer's eos <|im_end|>, the generation config's two.
IM_END, ENDOFTEXT = 151645, 151643


def test_the_stop_set_is_the_tokenizers_eos_then_the_generation_configs():
    assert stop_token_ids(IM_END, [IM_END, ENDOFTEXT]) == [IM_END, ENDOFTEXT]
    assert stop_token_ids(IM_END, ENDOFTEXT) == [IM_END, ENDOFTEXT]
    assert stop_token_ids(IM_END, None) == [IM_END]
    assert stop_token_ids(None, [ENDOFTEXT]) == [ENDOFTEXT]


@pytest.fixture(scope="module")
def two_eos(tmp_path_factory):
    """The tiny GPT-2 of the conformance tests with a generation config that ends at two more ids
    than the tokenizer's eos (as a hub instruct model's does)."""
    from transformers import GenerationConfig

    path = build_model_dir(tmp_path_factory.mktemp("two_eos") / "model")
    GenerationConfig(eos_token_id=[7, 9], pad_token_id=1).save_pretrained(path)
    return path


def test_training_stops_where_the_stop_set_says(two_eos, tmp_path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tok = AutoTokenizer.from_pretrained(two_eos)
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(two_eos),
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=GRPOConfig(
            output_dir=str(tmp_path),
            per_device_train_batch_size=2,
            num_generations=2,
            use_cpu=True,
            report_to=[],
        ),
        train_dataset=Dataset.from_list([{"prompt": "1+1="}] * 4),
        processing_class=tok,
    )
    assert (
        trainer.eos_token_ids
        == stop_token_ids(tok.eos_token_id, [7, 9])
        == [
            tok.eos_token_id,
            7,
            9,
        ]
    )


def test_the_hf_backend_stops_at_the_same_ids(two_eos):
    from grpo_ablation.evaluation.model import load_lm

    lm, _ = load_lm(two_eos, "cpu", 4, "float32")
    assert lm.model.generation_config.eos_token_id == stop_token_ids(
        lm.tokenizer.eos_token_id, [7, 9]
    )


@dataclass
class SamplingParams:
    """The fields of vllm.SamplingParams the comparison reads (vLLM is not installed here)."""

    max_tokens: int
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] | None = None
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    temperature: float = 1.0


class LmEvalVLLM:
    """lm-eval 0.4.13's VLLM where the stop set is decided: modify_gen_kwargs returns what its
    source does (the eos *string* as the only stop, special tokens kept in the text)."""

    @staticmethod
    def modify_gen_kwargs(gen_kwargs, eos=None, default_max_gen_toks=256):
        kwargs = {
            k: v for k, v in gen_kwargs.items() if k not in ("until", "max_gen_toks", "do_sample")
        }
        kwargs = {"skip_special_tokens": False, "spaces_between_special_tokens": False} | kwargs
        return kwargs, [eos], int(gen_kwargs.get("max_gen_toks", default_max_gen_toks))


def test_lm_evals_vllm_requests_stop_and_decode_as_training():
    from grpo_ablation.evaluation.model import vllm_stops

    ids = stop_token_ids(IM_END, [IM_END, ENDOFTEXT])
    lm = LmEvalVLLM()
    plain, _, _ = lm.modify_gen_kwargs({"max_gen_toks": 64}, "<|im_end|>")
    assert "stop_token_ids" not in plain  # as lm-eval builds it, vLLM stops at <|im_end|> only
    vllm_stops(lm, ids)
    kwargs, until, max_gen_toks = lm.modify_gen_kwargs(
        {"until": [], "max_gen_toks": 64, "temperature": 0.5, "do_sample": True}, "<|im_end|>"
    )
    params = SamplingParams(max_tokens=max_gen_toks, stop=until, **kwargs)
    assert params.stop_token_ids == ids and params.skip_special_tokens
    assert (params.max_tokens, params.temperature) == (64, 0.5)
