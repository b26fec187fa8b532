"""Fast tests of the lm-eval evaluation with a tiny random GPT-2 and a handful of rows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("lm_eval")
yaml = pytest.importorskip("yaml")

from grpo_ablation.evaluation.evaluate import (  # noqa: E402
    EvaluationOptions,
    evaluate_checkpoints,
)
from grpo_ablation.evaluation.task_folders import (  # noqa: E402
    FALLBACK,
    METRICS_MODULE,
    load_rule,
    write_task,
)
from grpo_ablation.policy.tokenizer import build_char_tokenizer  # noqa: E402

K, MAX_GEN = 3, 12
BATCH_4 = EvaluationOptions(batch_size=4)
PROMPTS = ["47+8=", "1+2=", "99+12=", "5+5=", "3+40=", "70+7=", "12+34=", "0+0=", "8+80=", "61+9="]
RESULT_FIELDS = {
    "step",
    "checkpoint",
    "greedy_accuracy",
    "greedy_accuracy_stderr",
    "sampled_mean_at_k",
    "sampled_mean_at_k_stderr",
    "sampled_pass_at_k",
    "k",
    "temperature",
    "n_examples",
    "seeds",
    "lm_eval_version",
    "max_gen_toks",
}
SAMPLE_FIELDS = {
    "task",
    "doc_id",
    "repeat",
    "prompt_id",
    "prompt",
    "answer",
    "difficulty",
    "generated",
    "extracted",
    "correct",
    "completion_chars",
    "completion_tokens",
    "truncated",
}


class _TagIgnoringLoader(yaml.SafeLoader):
    """Reads the task YAML without importing the ``!function`` metric."""


_TagIgnoringLoader.add_multi_constructor(
    "!", lambda loader, _tag, node: loader.construct_scalar(node)
)


def _write_rows(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w") as f:
        for i, (prompt, answer) in enumerate(rows):
            f.write(
                json.dumps(
                    {"prompt_id": f"p{i}", "prompt": prompt, "answer": answer, "difficulty": 1}
                )
                + "\n"
            )
    return path


def _tiny_model(path: Path, *, eos_in_config: bool = True) -> Path:
    """A random GPT-2 nudged towards digits so that some greedy answers parse and some stop early."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = build_char_tokenizer()
    torch.manual_seed(0)
    eos = tok.eos_token_id if eos_in_config else None
    cfg = GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=2,
        n_positions=48,
        vocab_size=len(tok),
        eos_token_id=eos,
        bos_token_id=eos,
        pad_token_id=tok.pad_token_id,
        initializer_range=0.3,
    )
    model = GPT2LMHeadModel(cfg)
    wte = model.transformer.wte.weight.data
    digits = tok.convert_tokens_to_ids(list("0123456789."))
    # The output head is tied to wte: a final-LN bias along these rows raises their logits.
    model.transformer.ln_f.bias.data = 6 * wte[digits].mean(0) + 1.0 * wte[tok.eos_token_id]
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _read_samples(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("eval")
    test = _write_rows(root / "test.jsonl", [(p, "55") for p in PROMPTS])
    task_dir = root / "tasks"
    names = write_task(test, task_dir, "toy", max_gen_toks=MAX_GEN, k=K, temperature=1.0)
    ckpt = _tiny_model(root / "ckpt")
    # Same weights, but eos only in the tokenizer: evaluation must still stop at eos.
    no_eos = _tiny_model(root / "ckpt_no_eos", eos_in_config=False)
    results = evaluate_checkpoints([(0, ckpt), (7, no_eos)], task_dir, root / "out", BATCH_4)
    return {
        "root": root,
        "test": test,
        "task_dir": task_dir,
        "names": names,
        "ckpt": ckpt,
        "results": results,
        "out": root / "out",
    }


def test_task_yaml_has_the_data_path_as_given_and_settings(setup: dict) -> None:
    """The data path as the caller named it: the jobs name it relative to their working directory
    (where lm-eval resolves it), so a results folder that moves keeps valid task folders."""
    assert setup["names"] == ["toy_greedy", "toy_sampled"]
    greedy = yaml.load((setup["task_dir"] / "toy_greedy.yaml").read_text(), _TagIgnoringLoader)
    sampled = yaml.load((setup["task_dir"] / "toy_sampled.yaml").read_text(), _TagIgnoringLoader)
    for cfg in (greedy, sampled):
        assert cfg["dataset_kwargs"]["data_files"]["test"] == str(setup["test"])
        assert cfg["generation_kwargs"]["max_gen_toks"] == MAX_GEN
        assert cfg["generation_kwargs"]["until"] == []  # lm-eval stops at the model's eos
        assert cfg["metric_list"][0]["metric"] == f"{METRICS_MODULE}.correct"
    assert greedy["generation_kwargs"]["do_sample"] is False and greedy["repeats"] == 1
    assert greedy["filter_list"][0]["filter"] == [{"function": "take_first"}]
    assert sampled["generation_kwargs"]["do_sample"] is True and sampled["repeats"] == K
    assert sampled["filter_list"][0]["filter"] == [], "every sampled repeat reaches the metric"
    assert (setup["task_dir"] / f"{METRICS_MODULE}.py").is_file()
    manifest = json.loads((setup["task_dir"] / "manifest.json").read_text())
    assert manifest["answer_rule"] == "full_match_digits" and manifest["chat_template"] is False


def test_paths_relative_to_the_working_directory_evaluate_and_are_recorded_so(
    setup: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jobs name the split, the task folder and the checkpoints relative to their working
    directory (the repository root): lm-eval reads the split from there, and the results record
    the checkpoint and the split as named, so results that move record no path of where they
    were. The numbers are those of the same evaluation named by absolute paths."""
    monkeypatch.chdir(setup["root"])
    tasks = Path("relative/tasks")
    write_task(Path("test.jsonl"), tasks, "toy", max_gen_toks=MAX_GEN, k=K, temperature=1.0)
    (got,) = evaluate_checkpoints([(0, Path("ckpt"))], tasks, Path("relative/out"), BATCH_4)
    assert got["checkpoint"] == "ckpt" and got["test"] == "test.jsonl"
    named = ("checkpoint", "test")
    assert {k: v for k, v in got.items() if k not in named} == {
        k: v for k, v in setup["results"][0].items() if k not in named
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("...55", "55"),
        ("55", "55"),
        (" ..55 \n", "55"),
        ("055", "055"),
        ("55.3", FALLBACK),  # a prefix is not an answer: the reward needs a full match too
        ("abc", FALLBACK),
        ("5a5", FALLBACK),
        ("", FALLBACK),
        (". 5", FALLBACK),
        ("5 5", FALLBACK),
    ],
)
def test_full_match_rule_agrees_with_the_training_reward(
    setup: dict, text: str, expected: str
) -> None:
    from grpo_ablation.tasks.addition import extract_answer, is_correct

    rule = load_rule(setup["task_dir"])
    assert rule.extract(text) == expected
    assert (extract_answer(text) or FALLBACK) == expected  # the reward's implementation
    for gold in ("55", "055", "5"):
        assert rule.is_correct(text, gold) == is_correct(text, gold)


def test_each_answer_rule_is_a_module_and_its_task_copy_scores_with_it(tmp_path) -> None:
    """The rules are real modules (linted, imported here); a task folder's copy is the rule then
    the shared metric, whose correct() calls that rule's is_correct."""
    import importlib

    from grpo_ablation.tasks import answer_rules

    cases = {"full_match_digits": ("..42", "42", "4 2"), "math_verify": ("\\boxed{42}", "42", "41")}
    assert set(cases) == set(answer_rules.RULES)
    for name, (good, gold, bad) in cases.items():
        rule = importlib.import_module(f"grpo_ablation.tasks.answer_rules.{name}")
        assert rule.is_correct(good, gold) and not rule.is_correct(bad, gold)
        folder = tmp_path / name
        folder.mkdir()
        (folder / "grpo_answer.py").write_text(answer_rules.module_text(name))
        copy = load_rule(folder)
        assert copy.correct([gold], [[good, bad, good, bad]]) == 0.5


def test_correct_metric_is_the_share_of_accepted_completions(setup: dict) -> None:
    rule = load_rule(setup["task_dir"])
    assert rule.correct(references=["55"], predictions=[["55", "x", "..55", "5"]]) == 0.5
    assert rule.correct(references=[55], predictions=["55"]) == 1.0


def test_outputs_at_fixed_paths_with_fields(setup: dict) -> None:
    out = setup["out"]
    summary = json.loads((out / "summary.json").read_text())
    assert [r["step"] for r in summary["checkpoints"]] == [0, 7]
    for step in (0, 7):
        res = json.loads((out / f"step={step}" / "results.json").read_text())
        assert set(res) >= RESULT_FIELDS
        assert res["k"] == K and res["n_examples"] == len(PROMPTS)
        rows = _read_samples(out / f"step={step}" / "samples.jsonl")
        assert all(set(r) >= SAMPLE_FIELDS for r in rows)
        greedy = [r for r in rows if r["task"] == "greedy"]
        sampled = [r for r in rows if r["task"] == "sampled"]
        assert len(greedy) == len(PROMPTS) and len(sampled) == K * len(PROMPTS)
        assert sorted({r["repeat"] for r in sampled}) == list(range(K))
        assert res["greedy_accuracy"] == pytest.approx(
            sum(r["correct"] for r in greedy) / len(greedy)
        )
        assert res["sampled_mean_at_k"] == pytest.approx(
            sum(r["correct"] for r in sampled) / len(sampled)
        )


def test_generation_stops_at_eos_without_bos(setup: dict) -> None:
    """lm-eval's greedy texts equal a plain one-prompt-at-a-time generate cut at the first eos."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(setup["ckpt"])
    model = AutoModelForCausalLM.from_pretrained(setup["ckpt"]).eval()
    expected = []
    for prompt in PROMPTS:
        ids = torch.tensor([tok.convert_tokens_to_ids(list(prompt))])  # no BOS, no template
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=MAX_GEN,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )[0, ids.shape[1] :].tolist()
        if tok.eos_token_id in out:
            out = out[: out.index(tok.eos_token_id)]
        expected.append(tok.decode(out, skip_special_tokens=True))
    for step in (0, 7):  # step 7 has no eos in its model/generation config
        rows = _read_samples(setup["out"] / f"step={step}" / "samples.jsonl")
        got = [r["generated"] for r in rows if r["task"] == "greedy"]
        assert got == expected
    assert any(len(t) < MAX_GEN for t in expected), "the fixture model should stop early sometimes"


def test_seeds_reset_per_checkpoint(setup: dict) -> None:
    # Same weights at steps 0 and 7: the sampled completions must match too.
    a = _read_samples(setup["out"] / "step=0" / "samples.jsonl")
    b = _read_samples(setup["out"] / "step=7" / "samples.jsonl")
    assert [r["generated"] for r in a] == [r["generated"] for r in b]


def _sampled(out: Path) -> dict[tuple[int, int], str]:
    rows = _read_samples(out / "step=0" / "samples.jsonl")
    return {(r["doc_id"], r["repeat"]): r["generated"] for r in rows if r["task"] == "sampled"}


@pytest.mark.parametrize("sampler", ["keyed", "stream"])
def test_keyed_evaluation_draws_depend_on_prompt_and_repeat_only(setup: dict, sampler) -> None:
    # Another batch size puts other prompts beside each one and consumes the global stream in
    # another order: keyed draws stay the same, stream draws do not (the test can fail).
    root = setup["root"]
    task_dir = root / f"tasks_{sampler}"
    write_task(setup["test"], task_dir, sampler, MAX_GEN, k=K, temperature=1.0, sampler=sampler)
    draws = []
    for batch in (4, 7):
        out = root / f"{sampler}_b{batch}"
        result = evaluate_checkpoints(
            [(0, setup["ckpt"])], task_dir, out, EvaluationOptions(batch_size=batch)
        )
        draws.append(_sampled(out))
    assert (draws[0] == draws[1]) == (sampler == "keyed")
    assert result[0]["sampler"].startswith("keyed" if sampler == "keyed" else "the global")
    # Repeats of one prompt are different draws.
    docs = {d for d, _ in draws[0]}
    assert sum(len({draws[0][(d, r)] for r in range(K)}) > 1 for d in docs) >= len(docs) // 2


def test_rerun_is_identical_and_correct_answers_score_one(setup: dict) -> None:
    root = setup["root"]
    first = _read_samples(setup["out"] / "step=0" / "samples.jsonl")
    parsed = [r for r in first if r["task"] == "greedy" and r["extracted"] != FALLBACK]
    assert len(parsed) >= 2, "the fixture model should give some parseable greedy answers"
    # Rows whose answer is what the model answers greedily: accuracy must be exactly 1.
    test = _write_rows(root / "solved.jsonl", [(r["prompt"], r["extracted"]) for r in parsed])
    task_dir = root / "tasks_solved"
    write_task(test, task_dir, "solved", max_gen_toks=MAX_GEN, k=K, temperature=1.0)
    runs = [
        evaluate_checkpoints([(0, setup["ckpt"])], task_dir, root / f"rerun{i}", BATCH_4)
        for i in range(2)
    ]
    assert runs[0][0]["greedy_accuracy"] == 1.0
    assert runs[0][0]["sampled_pass_at_k"] >= runs[0][0]["sampled_mean_at_k"]
    files = [
        (root / f"rerun{i}" / "step=0" / name).read_bytes()
        for i in range(2)
        for name in ("results.json", "samples.jsonl")
    ]
    assert files[0] == files[2] and files[1] == files[3]


# A hub-style generation_config.json (Qwen2.5-Instruct ships temperature 0.7, top_k 20, top_p 0.8,
# repetition_penalty 1.1), stronger here so that a tiny random model's completions must change.
HUB_STYLE = {
    "do_sample": True,
    "temperature": 0.3,
    "top_k": 3,
    "top_p": 0.8,
    "repetition_penalty": 1.8,
    "no_repeat_ngram_size": 1,
}


def test_a_checkpoints_generation_config_never_changes_the_evaluation(setup: dict) -> None:
    """The same weights with and without hub-style sampling defaults give the same greedy and
    sampled completions; those defaults would have changed them (the control)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    root = setup["root"]
    hub = _tiny_model(root / "ckpt_hub_style")
    gen = GenerationConfig.from_pretrained(hub)
    gen.update(**HUB_STYLE)
    gen.save_pretrained(hub)
    out = root / "hub_style"
    results = evaluate_checkpoints([(0, setup["ckpt"]), (1, hub)], setup["task_dir"], out, BATCH_4)
    plain, styled = (_read_samples(out / f"step={s}" / "samples.jsonl") for s in (0, 1))
    for role in ("greedy", "sampled"):
        texts = [[r["generated"] for r in rows if r["task"] == role] for rows in (plain, styled)]
        assert texts[0] == texts[1], role
    assert HUB_STYLE.items() <= results[1]["ignored_generation_config"].items()
    assert not HUB_STYLE.keys() & results[0]["ignored_generation_config"].keys()
    sampling = results[1]["sampling"]
    assert sampling["sampled"] == {
        "do_sample": True,
        "temperature": 1.0,
        "top_k": 0,
        "top_p": 1.0,
        "min_p": None,
        "repetition_penalty": 1.0,
        "max_new_tokens": MAX_GEN,
        "stop": "the model's eos token id",
    }
    assert sampling["greedy"]["do_sample"] is False

    # Control: generate() left to the checkpoint's own config answers otherwise.
    tok = AutoTokenizer.from_pretrained(hub)
    model = AutoModelForCausalLM.from_pretrained(hub).eval()
    own = []
    for prompt in PROMPTS:
        ids = torch.tensor([tok.convert_tokens_to_ids(list(prompt))])
        torch.manual_seed(0)
        new = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_GEN)
        own.append(tok.decode(new[0, ids.shape[1] :].tolist(), skip_special_tokens=True))
    greedy = [r["generated"] for r in plain if r["task"] == "greedy"]
    assert own != greedy


def test_a_killed_evaluation_resumes_at_the_next_checkpoint(setup: dict, monkeypatch) -> None:
    """A job that dies after its first checkpoint redoes nothing finished: the rerun evaluates
    only the rest, to the files an uninterrupted run writes; a changed checkpoint is redone."""
    import grpo_ablation.evaluation.evaluate as evaluate

    loads: list[str] = []
    real = evaluate.load_lm

    def load(path, *args, **kwargs):
        loads.append(str(path))
        if fail_at and len(loads) == fail_at:
            raise RuntimeError("killed")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(evaluate, "load_lm", load)
    checkpoints = [(0, setup["ckpt"]), (7, setup["root"] / "ckpt_no_eos")]
    out = setup["root"] / "resumed"
    fail_at = 2
    with pytest.raises(RuntimeError, match="killed"):
        evaluate_checkpoints(checkpoints, setup["task_dir"], out, BATCH_4)
    assert (out / "step=0" / "done.json").is_file() and not (out / "step=7").exists()
    fail_at, loads[:] = 0, []
    results = evaluate_checkpoints(checkpoints, setup["task_dir"], out, BATCH_4)
    assert loads == [str(setup["root"] / "ckpt_no_eos")], "only the unfinished checkpoint"
    for step in (0, 7):
        for name in ("results.json", "samples.jsonl"):
            got = (out / f"step={step}" / name).read_bytes()
            assert got == (setup["out"] / f"step={step}" / name).read_bytes(), (step, name)
    assert results == setup["results"]
    loads[:] = []
    evaluate_checkpoints(checkpoints, setup["task_dir"], out, BATCH_4)
    assert loads == []
    weights = next(setup["ckpt"].glob("*.safetensors"))
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1))
    evaluate_checkpoints(checkpoints, setup["task_dir"], out, BATCH_4)
    assert loads == [str(setup["ckpt"].resolve())], "rewritten weights are evaluated again"
    loads[:] = []
    evaluate_checkpoints(
        checkpoints, setup["task_dir"], out, EvaluationOptions(batch_size=4, seed=1)
    )
    assert len(loads) == 2, "so is everything under other settings"


@pytest.mark.slow  # starts processes of its own
def test_a_process_per_checkpoint_gives_the_same_evaluation(setup: dict) -> None:
    """With vLLM each checkpoint is evaluated in a fresh process of its own (an engine's GPU memory
    is freed when its process ends); shown here with the hf backend: every checkpoint ran in
    another process than this one and than each other, and wrote what one process writes."""
    checkpoints = [(0, setup["ckpt"]), (7, setup["root"] / "ckpt_no_eos")]
    out = setup["root"] / "per_process"
    results = evaluate_checkpoints(
        checkpoints,
        setup["task_dir"],
        out,
        BATCH_4,
        process_per_checkpoint=True,
    )
    pids = {json.loads((out / f"step={s}" / "timing.json").read_text())["pid"] for s in (0, 7)}
    assert len(pids) == 2 and os.getpid() not in pids
    for step in (0, 7):
        for name in ("results.json", "samples.jsonl"):
            got = (out / f"step={step}" / name).read_bytes()
            assert got == (setup["out"] / f"step={step}" / name).read_bytes(), (step, name)
    assert results == setup["results"]
    assert json.loads((out / "summary.json").read_text())["checkpoints"] == setup["results"]


def test_a_calls_new_request_pairs_are_encoded_at_once_as_lm_eval_encodes_them(
    setup: dict, monkeypatch
) -> None:
    # A log-likelihood call's new (context, continuation) pairs are encoded in one tokenizer call
    # (model.encode_pairs) into lm-eval's own ids: trailing spaces of the context moved to the
    # continuation, and a string that starts with the prefix token's text encoded as lm-eval does.
    from lm_eval.api.instance import Instance
    from lm_eval.api.model import TemplateLM
    from lm_eval.models.huggingface import HFLM

    from grpo_ablation.evaluation import model as lm_model

    monkeypatch.setattr(lm_model, "_PAIRS", {})
    lm, _ = lm_model.load_lm(setup["ckpt"], "cpu", 4, "float32")
    bos = lm.tokenizer.decode(lm.prefix_token_id)
    pairs = [("47+8=", "55"), ("1+2= ", "3"), ("1+2=  ", " 3"), (bos + "5+5=", "10" + bos)]
    want = [TemplateLM._encode_pair(lm, c, k) for c, k in pairs]
    assert lm_model.encode_pairs(lm, pairs) == want

    calls = []
    real = HFLM.tok_encode
    monkeypatch.setattr(
        HFLM, "tok_encode", lambda self, *a, **k: calls.append(a) or real(self, *a, **k)
    )
    requests = [
        Instance("loglikelihood", doc={}, arguments=pair, idx=0, metadata=("t", i, 1))
        for i, pair in enumerate(pairs)
    ]
    answers = lm.loglikelihood(requests, disable_tqdm=True)
    assert calls == [], "a pair was encoded one at a time"
    assert [lm._encode_pair(c, k) for c, k in pairs] == want
    for remembered in ("_PAIRS", "_TOKENIZED"):
        monkeypatch.setattr(lm_model, remembered, {})
    calls.clear()
    plain, _ = lm_model.load_lm(setup["ckpt"], "cpu", 4, "float32")
    plain.loglikelihood = lambda reqs, **kw: HFLM.loglikelihood(plain, reqs, **kw)
    assert plain.loglikelihood(requests, disable_tqdm=True) == answers
    assert calls, "lm-eval's own path encodes each pair"


def test_encoded_strings_are_remembered_per_tokenizer(setup: dict, monkeypatch) -> None:
    # lm-eval encodes every request again for every checkpoint of a job: a model loaded later
    # with the same tokenizer gets the ids remembered, the tokenizer's own ids, in a list of its own.
    from types import SimpleNamespace

    from lm_eval.models.huggingface import HFLM

    from grpo_ablation.evaluation import model as lm_model

    monkeypatch.setattr(lm_model, "_TOKENIZED", {})
    model = setup["ckpt"]
    first, _ = lm_model.load_lm(model, "cpu", 4, "float32")
    strings = [*PROMPTS, "47+8=55", "1+2=3"]
    for s in strings:
        assert first.tok_encode(s) == HFLM.tok_encode(first, s)
    first.tok_encode(strings[0]).append(-1)  # the caller's list: the remembered one stays
    assert first.tok_encode(strings[0]) == HFLM.tok_encode(first, strings[0])

    calls = []
    real = HFLM.tok_encode
    monkeypatch.setattr(
        HFLM, "tok_encode", lambda self, *a, **k: calls.append(a) or real(self, *a, **k)
    )
    second, _ = lm_model.load_lm(model, "cpu", 4, "float32")
    assert [second.tok_encode(s) for s in strings] == [real(second, s) for s in strings]
    assert calls == [], "the second checkpoint's requests were encoded again"
    assert second.tok_encode("9+9=") == real(second, "9+9=") and calls == [("9+9=",)]
    second.tok_encode("9+9=", add_special_tokens=True)
    assert len(calls) == 2, "other arguments are another key"

    # Another tokenizer, or the same one with another BOS setting, never reads those ids.
    other = build_char_tokenizer()
    other.add_tokens(["<extra>"])
    for tokenizer, bos in ((other, False), (first.tokenizer, True)):
        stand_in = SimpleNamespace(
            tokenizer=tokenizer,
            add_bos_token=bos,
            prefix_token_id=first.prefix_token_id,
            tok_encode=lambda s, *a, **k: [len(s)],
        )
        lm_model.remember_tokens(stand_in)
        assert stand_in.tok_encode(strings[0]) == [len(strings[0])]
