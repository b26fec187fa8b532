"""The CPU stand-in for the cluster preset: a GSM8K-shaped local data set, a tiny Qwen2 model with a
Qwen2.5-style chat template, and the supervised warm-start that makes its GRPO groups mixed.

Nothing is downloaded: the data set and the model are local folders read through the same code as
hub content (``grpo_ablation.tasks.source``, the Auto classes).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import torch

from grpo_ablation.policy.sft import prompt_ids, render_prompt, warm_start_pretrained
from grpo_ablation.policy.standin import build_standin_model
from grpo_ablation.tasks.source import Source
from grpo_ablation.tasks.word_problem_generator import write_word_problems

torch.set_num_threads(1)

N_TRAIN, N_TEST, SEED = 1000, 200, 0
INSTRUCTION = " Put the final answer in \\boxed{}."


def gold(answer: str) -> str:
    return answer.rpartition("####")[2].strip()


def conversation(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question + INSTRUCTION}]


def completion(answer: str) -> str:
    return f"The answer is \\boxed{{{gold(answer)}}}."


def digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """(data dir, model dir, train rows, test rows) for seed 0."""
    root = tmp_path_factory.mktemp("standin")
    data = write_word_problems(root / "gsm8k", N_TRAIN, N_TEST, SEED)
    train, test = (Source(str(data), "main").read(split)[0] for split in ("train", "test"))
    corpus = [r["question"] + INSTRUCTION for r in train] + [completion(r["answer"]) for r in train]
    model = build_standin_model(root / "model", corpus, SEED)
    return data, model, train, test


def test_dataset_loads_like_the_hub(standin, tmp_path):
    from datasets import load_dataset

    data, _, train, test = standin
    assert (data / "main" / "train-00000-of-00001.parquet").is_file()
    assert (data / "main" / "test-00000-of-00001.parquet").is_file()
    # `datasets` itself reads the folder as a hub data set with a `main` config (from a fresh cache:
    # it keys a local folder's cache by neither its path nor its files), to the same rows.
    ds = load_dataset(str(data), "main", split="train", cache_dir=str(tmp_path / "cache"))
    assert ds.column_names == ["question", "answer"]
    assert {k: v.dtype for k, v in ds.features.items()} == {
        "question": "string",
        "answer": "string",
    }
    assert list(ds) == train
    assert (len(train), len(test)) == (N_TRAIN, N_TEST)
    for row in train + test:
        m = re.fullmatch(
            r"[^\n]*(\d) \+ (\d) = <<(\d)\+(\d)=(\d+)>>(\d+)[^\n]*\n#### (\d+)", row["answer"]
        )
        assert m, row["answer"]
        a, b, a2, b2, c, c2, final = (int(g) for g in m.groups())
        assert (a, b, c, c2) == (a2, b2, a + b, final) and final == a + b
        assert f" {a} " in row["question"] and f" {b} " in row["question"]
    assert not {r["question"] for r in train} & {r["question"] for r in test}
    assert len({r["question"] for r in train}) == N_TRAIN


def test_dataset_feeds_the_cluster_task(standin, tmp_path):
    """The cluster preset's split writer reads the stand-in through its dataset_path override."""
    import json

    from grpo_ablation.tasks.math import MathTask, write_splits

    cfg = MathTask(dataset="gsm8k", dataset_path=str(standin[0]), n_validation=50, n_test=20)
    manifest = write_splits(cfg, tmp_path)
    assert {s: manifest["splits"][s]["count"] for s in ("train", "validation", "test")} == {
        "train": N_TRAIN - 50,
        "validation": 50,
        "test": 20,
    }
    row = json.loads((tmp_path / "test.jsonl").read_text().splitlines()[0])
    assert row["answer"] == gold(standin[3][0]["answer"]) and row["difficulty"] == 1


def test_dataset_is_deterministic(standin, tmp_path):
    again = write_word_problems(tmp_path / "again", N_TRAIN, N_TEST, SEED)
    assert digest(again) == digest(standin[0])
    other = write_word_problems(tmp_path / "other", N_TRAIN, N_TEST, SEED + 1)
    assert digest(other) != digest(standin[0])


def test_model_loads_with_auto_classes(standin, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, model_dir, train, _ = standin
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert len(tok) <= 512 and model.config.vocab_size == len(tok)
    assert (tok.eos_token, tok.pad_token, tok.padding_side) == (
        "<|im_end|>",
        "<|endoftext|>",
        "left",
    )
    im_end, eot = (
        tok.convert_tokens_to_ids("<|im_end|>"),
        tok.convert_tokens_to_ids("<|endoftext|>"),
    )
    assert model.generation_config.eos_token_id == im_end == model.config.eos_token_id
    assert model.generation_config.pad_token_id == eot == model.config.pad_token_id
    assert model.config.tie_word_embeddings and model.config.max_position_embeddings >= 512
    # Same seed, same corpus: byte-identical tokenizer and weights.
    corpus = [r["question"] + INSTRUCTION for r in train] + [completion(r["answer"]) for r in train]
    again = build_standin_model(tmp_path / "again", corpus, SEED)
    assert digest(again) == digest(model_dir)


def test_chat_template_and_digits(standin):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(standin[1])
    user = [{"role": "user", "content": "What is 2 + 5?"}]
    assert tok.apply_chat_template(user, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2 + 5?<|im_end|>\n<|im_start|>assistant\n"
    )
    with_system = [{"role": "system", "content": "Be brief."}, *user]
    assert tok.apply_chat_template(with_system, tokenize=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2 + 5?<|im_end|>\n"
    )
    ids = tok("12345 + 6789 = 19134", add_special_tokens=False)["input_ids"]
    digits = [t for t in tok.convert_ids_to_tokens(ids) if any(ch.isdigit() for ch in t)]
    assert digits == list("12345678919134")
    assert tok.convert_ids_to_tokens(
        tok("<|im_start|>user", add_special_tokens=False)["input_ids"]
    )[0] == ("<|im_start|>")


def test_render_prompt_matches_trl(standin, tmp_path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.data_utils import maybe_apply_chat_template

    tok = AutoTokenizer.from_pretrained(standin[1])
    convs = [
        conversation(standin[2][0]["question"]),
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 5?"}],
    ]
    for conv in convs:
        assert (
            render_prompt(tok, conv) == maybe_apply_chat_template({"prompt": conv}, tok)["prompt"]
        )
    assert render_prompt(tok, "Problem: 3 + 4") == "Problem: 3 + 4"
    # The ids GRPOTrainer itself generates from, for conversational and plain prompts.
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        num_generations=2,
        per_device_train_batch_size=2,
        max_completion_length=8,
        report_to=[],
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(standin[1]),
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": convs}),
        processing_class=tok,
    )
    assert trainer._tokenize_prompts(convs)[0] == [prompt_ids(tok, c) for c in convs]
    assert trainer._tokenize_prompts(["Problem: 3 + 4"])[0] == [prompt_ids(tok, "Problem: 3 + 4")]


def test_warm_start_is_deterministic(standin):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(standin[1])
    pairs = [(conversation(r["question"]), completion(r["answer"])) for r in standin[2][:64]]
    runs = []
    for _ in range(2):
        model = AutoModelForCausalLM.from_pretrained(standin[1])
        losses = warm_start_pretrained(model, tok, pairs, steps=3, batch_size=8, lr=1e-3, seed=5)
        runs.append((losses, model.model.embed_tokens.weight.detach().clone()))
    assert runs[0][0] == runs[1][0] and torch.equal(runs[0][1], runs[1][1])


def accuracy(model, tok, rows, *, sample: bool) -> tuple[float, float]:
    """(share correct, share with a \\boxed{...}) of one completion per held-out question."""
    texts = [render_prompt(tok, conversation(r["question"])) for r in rows]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(123)
    kw = (
        {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0}
        if sample
        else {"do_sample": False}
    )
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=16, **kw)
    texts = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    boxed = [re.search(r"\\boxed\{([^{}]*)\}", t) for t in texts]
    correct = [
        m is not None and m.group(1).strip() == gold(r["answer"])
        for m, r in zip(boxed, rows, strict=True)
    ]
    return sum(correct) / len(rows), sum(m is not None for m in boxed) / len(rows)


@pytest.mark.slow
def test_warm_start_makes_groups_mixed(standin):
    """200 SFT steps (~8 s on one CPU thread): the loss falls from ~6 to ~0.1, greedy decoding
    answers in \\boxed{} with about half the held-out sums right (0.60 of 200 at seed 0), and
    samples at temperature 1 are right often but not always (0.46), so GRPO groups are mixed."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, model_dir, train, test = standin
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    pairs = [(conversation(r["question"]), completion(r["answer"])) for r in train]
    losses = warm_start_pretrained(model, tok, pairs, steps=200, batch_size=32, lr=3e-3, seed=SEED)
    assert len(losses) == 200 and losses[0] > 4.0
    assert sum(losses[-10:]) / 10 < 0.3
    model.eval()
    greedy, greedy_boxed = accuracy(model, tok, test, sample=False)
    sampled, sampled_boxed = accuracy(model, tok, test, sample=True)
    print(
        f"loss {losses[0]:.2f} -> {sum(losses[-10:]) / 10:.3f}; greedy {greedy:.2f}, sampled {sampled:.2f}"
    )
    assert greedy_boxed >= 0.95 and sampled_boxed >= 0.8
    # Always answering the commonest sum (10) would score 9/81 = 0.11.
    assert greedy >= 0.25
    assert 0.05 < sampled < 0.95


def test_a_padded_stand_in_has_the_embedding_rows_asked_for(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    build_standin_model(tmp_path, ["1 + 2 = 3"], seed=0, embedding_rows=1000)
    assert AutoConfig.from_pretrained(tmp_path).vocab_size == 1000
    assert len(AutoTokenizer.from_pretrained(tmp_path)) < 1000
