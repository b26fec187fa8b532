"""benchmarks.real_model's pieces on a tiny model (the measurements themselves need SmolLM2 and
minutes of CPU: ``python -m benchmarks.real_model``); no timings asserted."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from benchmarks.real_model import _cut, generate, level_table, problem_rows, recommend, score
from grpo_ablation.policy.tokenizer import build_char_tokenizer
from grpo_ablation.sampling import neutral_generation_config

torch.set_num_threads(1)


def _tiny():
    tok = build_char_tokenizer()
    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=1,
        n_embd=32,
        n_head=2,
        n_positions=64,
        vocab_size=len(tok),
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = GPT2LMHeadModel(cfg).eval()
    neutral_generation_config(model)
    return tok, model


def test_a_completion_ends_at_its_first_eos_or_the_cap():
    assert _cut([5, 2, 9, 2], [2]) == ([5, 2], False)
    assert _cut([5, 6, 7], [2]) == ([5, 6, 7], True)


def test_keyed_draws_do_not_depend_on_the_batch():
    tok, model = _tiny()
    prompts = [tok(p)["input_ids"] for p in ("1+2=", "3+4=", "12+5=")]
    kw = dict(temperature=0.7, max_new_tokens=6, repeats=3)
    whole = generate(model, tok, prompts, batch_size=9, **kw)
    split = generate(model, tok, prompts, batch_size=2, **kw)
    assert whole == split
    assert [len(g) for g in whole] == [3, 3, 3]
    for group in whole:
        for ids, cap in group:
            assert len(ids) <= 6 and cap == (tok.eos_token_id not in ids)
    greedy = generate(model, tok, prompts, temperature=None, max_new_tokens=6, batch_size=2)
    assert greedy == generate(model, tok, prompts, temperature=None, max_new_tokens=6)


class _Task:
    """A task whose reward is 1 for completions that say 'yes'."""

    def reward_function(self):
        return lambda prompts, completions, answer: [
            1.0 if c == "yes" else None if c == "?" else 0.0 for c in completions
        ]


class _Tok:
    def decode(self, ids, skip_special_tokens=True):
        return {1: "yes", 0: "no", 9: "?"}[ids[0]]


def test_groups_are_mixed_all_incorrect_or_all_correct():
    rows = [{"prompt": f"p{i}", "answer": "1"} for i in range(4)]
    groups = [[1, 1], [0, 0], [1, 0], [9, 0]]  # correct, incorrect, mixed, unscored + incorrect
    completions = [[([t], t == 0) for t in g] for g in groups]
    s = score(_Task(), _Tok(), rows, completions)
    assert (s["all_correct"], s["all_incorrect"], s["mixed"]) == (0.25, 0.5, 0.25)
    assert s["unscored"] == 1 and s["accuracy"] == 3 / 7
    assert s["at_cap"] == 4 / 8 and s["mean_length"] == 1


def test_the_level_with_most_mixed_groups_under_the_cap_is_recommended(tmp_path):
    def row(steps, mixed, at_cap):
        sampled = dict(accuracy=0.5, mean_length=10.0, at_cap=at_cap, mixed=mixed, unscored=0)
        sampled |= dict(all_incorrect=0.1, all_correct=0.1)
        return dict(steps=steps, max_operand=9, greedy=sampled, sampled=sampled, seconds=1.0)

    rows = [row(1, 0.3, 0.1), row(2, 0.6, 0.2), row(3, 0.9, 0.8)]
    assert recommend(rows) == (2, 9)
    config = dict(n_prompts=4, G=4, temperature=0.5, sampler="keyed", max_new_tokens=96, threads=1)
    table = level_table({"config": config, "rows": rows, "hot": None, "recommended": [2, 9]})
    assert table.count("\n| ") == 4  # the header and one line per level


def test_word_problems_are_read_through_the_math_task(tmp_path):
    task, rows = problem_rows(tmp_path, (2, 9), "{question}\nBox it.", n_train=6, n_test=3)
    assert [len(rows["train"]), len(rows["test"])] == [6, 3]
    r = rows["test"][0]
    assert r["prompt"].endswith("\nBox it.") and r["difficulty"] == 2 and r["answer"].isdigit()
    assert task.prompt(r) == [{"role": "user", "content": r["prompt"]}]
