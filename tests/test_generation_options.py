"""How generate runs in training (compute.generation_cache, compute.generation_weights): a static
KV cache changes no number on the CPU; its compiled decoding step is asked of torch.compile; a
bfloat16 copy of the weights generates, refreshed at every step, while the update keeps float32
master weights; each is recorded, and a vLLM run refuses them."""

import json
from pathlib import Path

import pytest
import torch
from conformance import MIXED_PROMPTS, G, digit_reward
from safetensors.torch import load_file

from grpo_ablation.design.options import ComputeConfig, TrainingConfig, check_generation
from grpo_ablation.keyed_sampling import KeyedGumbel, picking_greedily
from grpo_ablation.training.generation import GenerationWeights
from grpo_ablation.training.rollout_log import read_rollouts
from grpo_ablation.training.train import checkpoint_dtypes, last_checkpoint, train

torch.set_num_threads(1)
TINY = dict(group_size=G, prompts_per_step=2, max_completion_length=6, save_steps=4)
STEPS = 4


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny random GPT-2 and the fixed prompts of ``conformance``: (model dir, data dir)."""
    from conformance import build_model_dir
    from run_driver import write_data

    root = tmp_path_factory.mktemp("tiny")
    return build_model_dir(root / "model"), write_data(root / "data")


def _train(setup, out: Path, callbacks: list | None = None, **compute) -> Path:
    model, data = setup
    cfg = TrainingConfig(max_steps=STEPS, **TINY)
    compute_config = ComputeConfig(**compute)
    train(
        model, data, out, cfg, reward_func=digit_reward, compute=compute_config, callbacks=callbacks
    )
    return out


def _numbers(run: Path) -> tuple:
    """A run's rollouts, metrics (times left out) and final weights."""
    metrics = [
        {k: v for k, v in json.loads(x).items() if "time" not in k}
        for x in (run / "metrics.jsonl").read_text().splitlines()
    ]
    return read_rollouts(run / "rollouts"), metrics, load_file(_final(run))


def _final(run: Path) -> Path:
    return run / "checkpoints" / f"checkpoint-{STEPS}" / "model.safetensors"


def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def dynamic(setup, tmp_path_factory) -> Path:
    """The run at the options' neutral values: a dynamic cache, the master weights."""
    return _train(setup, tmp_path_factory.mktemp("dynamic") / "run")


def test_a_static_kv_cache_changes_no_number_and_is_recorded(setup, dynamic, tmp_path):
    static = _train(setup, tmp_path / "static", generation_cache="static")
    (rollouts, metrics, weights), before = _numbers(static), _numbers(dynamic)
    assert rollouts.equals(before[0]) and metrics == before[1]
    assert _same_weights(weights, before[2])
    args = torch.load(_final(static).parent / "training_args.bin", weights_only=False)
    assert args.cache_implementation == "static", "generate was told"
    record = json.loads((static / "objective.json").read_text())
    assert record["generation_cache"] == "static"
    assert "with a static KV cache" in (static / "objective.md").read_text()
    assert json.loads((dynamic / "objective.json").read_text())["generation_cache"] == "dynamic"
    assert "KV cache" not in (dynamic / "objective.md").read_text()
    info = json.loads((static / "run_info.json").read_text())
    assert info["compute"]["generation_cache"] == "static"


@pytest.mark.parametrize("architecture", ["gpt2", "qwen2"])
def test_keyed_tokens_are_the_same_from_a_static_cache_grown_by_a_longer_call(architecture):
    """Left-padded prompts of different lengths, after a longer call left the static cache
    longer than this one needs (transformers keeps the longest): the keyed draws are the
    dynamic cache's, token for token, on absolute positions (GPT-2) and on RoPE with grouped
    key-value heads (Qwen2)."""
    from transformers import (
        GenerationConfig,
        GPT2Config,
        GPT2LMHeadModel,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    torch.manual_seed(0)
    if architecture == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_embd=32, n_layer=2, n_head=2))
    else:
        shape = dict(num_attention_heads=4, num_key_value_heads=2, intermediate_size=64)
        model = Qwen2ForCausalLM(
            Qwen2Config(vocab_size=300, hidden_size=32, num_hidden_layers=2, **shape)
        )
    model.eval()
    lengths = [len(p) for p in MIXED_PROMPTS]
    ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, -n:] = torch.randint(3, 300, (n,))
        mask[row, -n:] = 1

    def generate(cache: str | None, new_tokens: int) -> torch.Tensor:
        config = GenerationConfig(
            max_new_tokens=new_tokens,
            do_sample=True,
            top_k=0,
            pad_token_id=0,
            eos_token_id=1,
            cache_implementation=cache,
        )
        keys = list(range(len(lengths)))
        with torch.no_grad():
            return model.generate(
                input_ids=ids,
                attention_mask=mask,
                generation_config=picking_greedily(config),
                logits_processor=[KeyedGumbel(keys, 1.0, horizon=new_tokens)],
            )

    generate("static", 40)  # the cache grows to the longer call's length and stays there
    assert torch.equal(generate("static", 12), generate(None, 12))


def test_the_compiled_decoding_step_is_asked_of_torch_compile(setup, dynamic, tmp_path):
    """static_compiled hands generate's decoding step to torch.compile (here a stand-in that
    records the call and compiles nothing: inductor takes minutes on this CPU), with a static
    cache, on the CPU too."""
    calls = []
    real = torch.compile

    def recording(fn=None, **kwargs):
        calls.append(kwargs)
        return fn

    torch.compile = recording
    try:
        run = _train(setup, tmp_path / "compiled", generation_cache="static_compiled")
    finally:
        torch.compile = real
    assert calls and calls[0]["fullgraph"] is False
    args = torch.load(_final(run).parent / "training_args.bin", weights_only=False)
    assert args.cache_implementation == "static"
    assert read_rollouts(run / "rollouts").equals(read_rollouts(dynamic / "rollouts"))
    record = json.loads((run / "objective.json").read_text())
    assert record["generation_cache"] == "static_compiled"
    assert "its decoding step under torch.compile" in (run / "objective.md").read_text()


def test_bfloat16_generation_weights_generate_from_a_refreshed_copy(
    setup, dynamic, tmp_path, monkeypatch
):
    """The rollouts come from a bfloat16 copy of the weights, equal to the master weights rounded
    to bfloat16 at every generation batch; the update and the checkpoints keep float32; the run's
    numbers differ from the master's, and the record says why. The cost probe's step timer times
    the copy's generate."""
    from grpo_ablation.training.step_timing import StepTimer

    refreshed = []
    refresh = GenerationWeights.refresh

    def recording(self, master):
        refresh(self, master)
        copy = dict(self.model.named_parameters())
        refreshed.append(
            all(
                copy[name].dtype == torch.bfloat16
                and torch.equal(copy[name], p.detach().bfloat16())
                for name, p in master.named_parameters()
            )
        )

    monkeypatch.setattr(GenerationWeights, "refresh", recording)
    timer = StepTimer()
    run = _train(setup, tmp_path / "bf16", [timer], generation_weights="bfloat16")
    assert refreshed == [True] * STEPS, "one refresh per generation batch, each exact"
    assert all(timer.generated) and timer.times().generation_tokens_per_s > 0
    assert checkpoint_dtypes(last_checkpoint(run)) == ["F32"]
    rollouts, _, weights = _numbers(run)
    before = _numbers(dynamic)
    assert not (rollouts.equals(before[0]) and _same_weights(weights, before[2]))
    record = json.loads((run / "objective.json").read_text())
    assert record["generation_weights"] == "bfloat16"
    assert "a bfloat16 copy of the weights" in (run / "objective.md").read_text()
    assert json.loads((dynamic / "objective.json").read_text())["generation_weights"] == "master"


def test_the_generation_options_are_neutral_by_default_and_refused_where_they_cannot_apply():
    compute = ComputeConfig()
    assert (compute.generation_cache, compute.generation_weights) == ("dynamic", "master")
    assert "generation_cache" not in compute.section_identity()
    assert "generation_weights" not in compute.section_identity()
    on = ComputeConfig(generation_cache="static", generation_weights="bfloat16")
    assert on.section_identity()["generation_cache"] == "static"
    vllm = TrainingConfig(generation_backend="vllm")
    check_generation(compute, vllm)
    with pytest.raises(ValueError, match=r"compute.generation_cache 'static' .*'vllm'"):
        check_generation(ComputeConfig(generation_cache="static"), vllm)
    with pytest.raises(ValueError, match=r"generation_weights 'bfloat16' .* shards"):
        ComputeConfig(generation_weights="bfloat16", accelerate_config="zero3")
    with pytest.raises(ValueError, match=r"unknown generation cache 'statc'.*did you mean static"):
        ComputeConfig(generation_cache="statc")
