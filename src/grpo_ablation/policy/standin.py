"""A CPU-sized stand-in for the cluster preset (Qwen2.5-0.5B-Instruct on openai/gsm8k).

The cluster code path reads its data from a data set's files in the hub's layout
(``grpo_ablation.tasks.source``: a hub snapshot or a local folder) and its model with
``AutoModelForCausalLM`` / ``AutoTokenizer`` from a hub name. Both also accept a local folder, so
the stand-ins here are *folders laid out like the hub repositories*: the cluster code runs
unchanged (only the path differs) and nothing is downloaded.

- the data: word problems in GSM8K's format written as the hub repo's parquet files
  (``grpo_ablation.tasks.word_problem_generator``, the config's ``word_problems`` section).
- ``build_standin_model``: a tiny randomly initialised ``Qwen2ForCausalLM`` with a locally trained
  byte-level BPE tokenizer (Qwen2's pre-tokenizer: one token per digit) and a Qwen2.5-style chat
  template, saved with ``save_pretrained`` so the Auto classes load it with no custom code.

Both are deterministic in ``seed``: the same arguments write byte-identical data files and the
same weights. ``grpo_ablation.policy.sft.warm_start_pretrained`` then teaches the model the answer format.
"""

from __future__ import annotations

from pathlib import Path

from grpo_ablation.design.stand_in import StandInConfig

# Special tokens and ids as in Qwen2.5: <|endoftext|> is pad (and the config's bos), <|im_end|> eos.
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]
DEFAULT_SYSTEM = "You are a helpful assistant."
# Qwen2.5's chat template without the tool-calling branches: a default system turn when the
# conversation has none, every turn as <|im_start|>role\n...<|im_end|>\n, and the assistant header
# when add_generation_prompt is set. TRL's continue_final_message works with it (the rendered text
# ends with the last message's content followed by <|im_end|>\n, which TRL strips).
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\n" + DEFAULT_SYSTEM + "<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message['role'] == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)
# Qwen2's pre-tokenizer split: contractions, words, *single digits*, punctuation runs, whitespace.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _train_tokenizer(corpus: list[str], vocab_size: int):
    """Byte-level BPE trained on ``corpus`` with Qwen2's digit-splitting pre-tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    core = Tokenizer(models.BPE())
    core.normalizer = normalizers.NFC()  # as Qwen2Tokenizer, which AutoTokenizer rebuilds it with
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer=trainer)
    return core


def build_standin_model(
    out_dir: Path,
    corpus: list[str],
    seed: int,
    hidden_size: int = StandInConfig.hidden_size,
    num_layers: int = StandInConfig.num_layers,
    num_heads: int = StandInConfig.num_heads,
    num_kv_heads: int = StandInConfig.num_kv_heads,
    intermediate_size: int | None = StandInConfig.intermediate_size,
    vocab_size: int = 512,
    max_position_embeddings: int = 1024,
    embedding_rows: int | None = StandInConfig.embedding_rows,
) -> Path:
    """Save a tiny random Qwen2 causal LM and its tokenizer to ``out_dir``; return ``out_dir``.

    The tokenizer is trained on ``corpus`` (plus the chat scaffolding) so prompts stay short;
    ``vocab_size`` is an upper bound (3 special tokens + 256 bytes + merges). eos is
    ``<|im_end|>`` and pad ``<|endoftext|>`` as in Qwen2.5-Instruct, padding is on the left
    (GRPO generates from left-padded prompts). ``embedding_rows`` pads the embedding and output
    layer beyond the tokenizer's vocabulary, as hub models do (Qwen2.5: 151,936 rows for 151,665
    tokens), so a stand-in can have a real model's logits. The weights depend only on the
    arguments.

    ``AutoTokenizer`` loads the folder as ``Qwen2Tokenizer`` (``config.json`` says ``qwen2``),
    which rebuilds the pipeline from ``tokenizer.json``'s vocab and merges with its own NFC
    normalizer and digit-splitting pre-tokenizer, as for the hub model; the tokenizer trained
    here uses the same pipeline, so both encode alike.
    """
    import torch
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    scaffold = [
        f"{IM_START}{role}\n{DEFAULT_SYSTEM}{IM_END}\n" for role in ("system", "user", "assistant")
    ]
    core = _train_tokenizer([*scaffold, *corpus], vocab_size)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        additional_special_tokens=[IM_START],
        padding_side="left",
        model_max_length=max_position_embeddings,
        chat_template=CHAT_TEMPLATE,
    )
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = Qwen2Config(
        vocab_size=max(len(tokenizer), embedding_rows or 0),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=ids[IM_END],
        pad_token_id=ids[ENDOFTEXT],
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=ids[ENDOFTEXT], eos_token_id=ids[IM_END], pad_token_id=ids[ENDOFTEXT]
    )
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
