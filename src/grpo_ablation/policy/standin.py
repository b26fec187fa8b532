"""A CPU-sized stand-in for the cluster preset (Qwen2.5-0.5B-Instruct on openai/gsm8k).

The cluster code path reads its data from a data set's files in the hub's layout
(``grpo_ablation.tasks.source``: a hub snapshot or a local folder) and its model with
``AutoModelForCausalLM`` / ``AutoTokenizer`` from a hub name. Both also accept a local folder, so
the stand-ins here are *folders laid out like the hub repositories*: the cluster code runs
unchanged (only the path differs) and nothing is downloaded.

- ``write_gsm8k_standin``: one-step addition word problems in GSM8K's format (a reasoning line
  with a ``<<a+b=c>>`` calculator annotation, then ``#### c``), written as the hub repo's parquet
  files plus a ``README.md`` whose ``configs:`` front matter declares the ``main`` config.
- ``build_standin_model``: a tiny randomly initialised ``Qwen2ForCausalLM`` with a locally trained
  byte-level BPE tokenizer (Qwen2's pre-tokenizer: one token per digit) and a Qwen2.5-style chat
  template, saved with ``save_pretrained`` so the Auto classes load it with no custom code.

Both are deterministic in ``seed``: the same arguments write byte-identical data files and the
same weights. ``grpo_ablation.policy.sft.warm_start_pretrained`` then teaches the model the answer format.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

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

NAMES = ["Tom", "Ana", "Ben", "Mia", "Sam", "Lily", "Omar", "Zoe", "Raj", "Ella", "Leo", "Nina"]
ITEMS = [
    "apples",
    "pencils",
    "marbles",
    "stickers",
    "books",
    "cookies",
    "shells",
    "coins",
    "stamps",
    "cards",
    "eggs",
    "toys",
]
# Each template: question text and the reasoning sentence; {n} name, {x} item, {a} {b} operands.
TEMPLATES = [
    (
        "{n} has {a} {x} and buys {b} more. How many {x} does {n} have now?",
        "{n} has {a} + {b} = <<{a}+{b}={c}>>{c} {x} now.",
    ),
    (
        "{n} picked {a} {x} in the morning and {b} {x} in the afternoon. How many {x} did {n} pick in all?",
        "{n} picked {a} + {b} = <<{a}+{b}={c}>>{c} {x} in all.",
    ),
    (
        "There are {a} {x} in a box. {n} puts {b} more {x} in the box. How many {x} are in the box?",
        "The box has {a} + {b} = <<{a}+{b}={c}>>{c} {x}.",
    ),
    (
        "{n} found {a} {x} on Monday and {b} {x} on Tuesday. How many {x} did {n} find?",
        "{n} found {a} + {b} = <<{a}+{b}={c}>>{c} {x}.",
    ),
    (
        "{n} had {a} {x}. A friend gave {n} {b} {x}. How many {x} does {n} have?",
        "{n} has {a} + {b} = <<{a}+{b}={c}>>{c} {x}.",
    ),
    (
        "A shelf holds {a} {x} and a table holds {b} {x}. How many {x} are there altogether?",
        "There are {a} + {b} = <<{a}+{b}={c}>>{c} {x} altogether.",
    ),
]
OPERANDS = range(1, 10)  # single digits; sums 2..18


def _gsm8k_rows(seed: int) -> list[dict[str, str]]:
    """Every distinct (question, answer) the templates can make, in a seed-determined order."""
    rows: dict[str, str] = {}
    for q_tpl, a_tpl in TEMPLATES:
        for n in NAMES:
            for x in ITEMS:
                for a in OPERANDS:
                    for b in OPERANDS:
                        v = {"n": n, "x": x, "a": a, "b": b, "c": a + b}
                        rows.setdefault(q_tpl.format(**v), f"{a_tpl.format(**v)}\n#### {a + b}")
    out = [{"question": q, "answer": a} for q, a in sorted(rows.items())]
    random.Random(f"gsm8k-standin:{seed}").shuffle(out)
    return out


def _readme(splits: list[str]) -> str:
    """Front matter as on the hub: a ``main`` config whose ``data_files`` name each split's file."""
    files = "".join(f"  - split: {s}\n    path: main/{s}-00000-of-00001.parquet\n" for s in splits)
    return (
        "---\nconfigs:\n- config_name: main\n  data_files:\n"
        + files
        + "dataset_info:\n  config_name: main\n  features:\n"
        "  - name: question\n    dtype: string\n  - name: answer\n    dtype: string\n---\n\n"
        "# GSM8K stand-in\n\nSynthetic one-step addition word problems in the format of "
        "openai/gsm8k (config `main`), written by `grpo_ablation.policy.standin.write_gsm8k_standin` "
        "for CPU tests of the cluster code path.\n"
    )


def write_gsm8k_standin(out_dir: Path, n_train: int, n_test: int, seed: int) -> Path:
    """Write a local copy of openai/gsm8k's layout with synthetic problems; return ``out_dir``.

    ``out_dir/main/{train,test}-00000-of-00001.parquet`` (string columns ``question`` and
    ``answer``) and ``out_dir/README.md`` declaring the ``main`` config, so that
    ``Source(str(out_dir), "main").read("train")`` (and ``datasets.load_dataset``) read it as the
    hub data set would be read. Train and test questions are disjoint; the files depend only on the arguments.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _gsm8k_rows(seed)
    if n_train < 0 or n_test < 0 or n_train + n_test > len(rows):
        raise ValueError(f"need 0 <= n_train + n_test <= {len(rows)}, got {n_train} + {n_test}")
    splits = {"train": rows[:n_train], "test": rows[n_train : n_train + n_test]}
    out_dir = Path(out_dir)
    (out_dir / "main").mkdir(parents=True, exist_ok=True)
    features = {
        "question": {"dtype": "string", "_type": "Value"},
        "answer": {"dtype": "string", "_type": "Value"},
    }
    schema = pa.schema(
        [("question", pa.string()), ("answer", pa.string())],
        metadata={"huggingface": json.dumps({"info": {"features": features}})},
    )
    for split, split_rows in splits.items():
        table = pa.Table.from_pylist(split_rows, schema=schema)
        pq.write_table(table, out_dir / "main" / f"{split}-00000-of-00001.parquet")
    (out_dir / "README.md").write_text(_readme(list(splits)))
    return out_dir


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
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int | None = None,
    vocab_size: int = 512,
    max_position_embeddings: int = 1024,
) -> Path:
    """Save a tiny random Qwen2 causal LM and its tokenizer to ``out_dir``; return ``out_dir``.

    The tokenizer is trained on ``corpus`` (plus the chat scaffolding) so prompts stay short;
    ``vocab_size`` is an upper bound (3 special tokens + 256 bytes + merges). eos is
    ``<|im_end|>`` and pad ``<|endoftext|>`` as in Qwen2.5-Instruct, padding is on the left
    (GRPO generates from left-padded prompts). The weights depend only on the arguments.

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
        vocab_size=len(tokenizer),
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
