"""The exact expected accuracy: the enumeration is complete and disjoint (checked against every
token sequence of a toy vocabulary), its bounds hold for a toy autoregressive model, and through
lm-eval it equals the probabilities a direct teacher-forcing computation gives at temperature T."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from pathlib import Path

import pytest

from grpo_ablation.evaluation.exact import ACCEPTED, UNRESOLVED, continuations, probabilities

EOS, PAD, SPACE = "<e>", "<p>", " "
TOY_VOCAB = [".", "7", "8", SPACE, PAD, EOS]


def _accepts(text: str, gold: str) -> bool:
    """The full_match_digits rule, the module lm-eval's task folder gets."""
    from grpo_ablation.tasks.answer_rules.full_match_digits import is_correct

    return is_correct(text, gold)


def test_worked_example_gold_7_in_3_tokens() -> None:
    got = continuations("7", 3, EOS, [PAD], [SPACE])
    assert [t for k, t in got if k == ACCEPTED] == ["7<e>", ".7<e>", "..7"]
    assert sorted(t for k, t in got if k == UNRESOLVED) == sorted(
        # the pad anywhere the answer can still come; a space first, or after the whole answer
        ["<p>", " ", ".<p>", "..<p>", "7<p>", "7 ", ".7<p>", ".7 "]
    )


def test_an_answer_that_cannot_fit_is_refused() -> None:
    with pytest.raises(ValueError, match="fit in 2 tokens"):
        continuations("123", 2, EOS, [PAD], [SPACE])


def _sequences(max_len: int) -> list[tuple[str, ...]]:
    """Every completion the sampler can produce: tokens until eos or max_len."""
    out = []
    for n in range(1, max_len + 1):
        for seq in itertools.product(TOY_VOCAB, repeat=n):
            if EOS in seq[:-1] or (n < max_len and seq[-1] != EOS):
                continue
            out.append(seq)
    return out


def _text(seq: tuple[str, ...]) -> str:
    return "".join(t for t in seq if t not in (PAD, EOS))  # special tokens decode to nothing


@pytest.mark.parametrize("gold,max_len", [("7", 4), ("78", 5), ("87", 3)])
def test_every_accepted_completion_is_enumerated_or_unresolved(gold: str, max_len: int) -> None:
    listed = continuations(gold, max_len, EOS, [PAD], [SPACE])
    tokens = {text: _tokens(text) for _, text in listed}
    accepted = {tokens[t] for k, t in listed if k == ACCEPTED}
    prefixes = [tokens[t] for k, t in listed if k == UNRESOLVED]
    # disjoint events: no listed sequence is a prefix of another
    every = list(accepted) + prefixes
    for a, b in itertools.permutations(every, 2):
        assert b[: len(a)] != a, (a, b)
    for seq in _sequences(max_len):
        ok = _accepts(_text(seq), gold)
        if seq in accepted:
            assert ok, seq
        elif ok:
            assert any(seq[: len(p)] == p for p in prefixes), seq


def _tokens(text: str) -> tuple[str, ...]:
    out, i = [], 0
    while i < len(text):
        tok = next(t for t in (EOS, PAD) if text.startswith(t, i)) if text[i] == "<" else text[i]
        out.append(tok)
        i += len(tok)
    return tuple(out)


def _toy_next(prefix: tuple[str, ...]) -> dict[str, float]:
    """A deterministic autoregressive distribution over TOY_VOCAB for each prefix."""
    w = [
        1 + int(hashlib.sha256(repr((prefix, t)).encode()).hexdigest()[:4], 16) % 9
        for t in TOY_VOCAB
    ]
    return {t: x / sum(w) for t, x in zip(TOY_VOCAB, w, strict=True)}


def _logprob(seq: tuple[str, ...]) -> float:
    return sum(math.log(_toy_next(seq[:i])[t]) for i, t in enumerate(seq))


@pytest.mark.parametrize("gold,max_len", [("7", 4), ("78", 5)])
def test_the_true_probability_lies_in_the_bounds(gold: str, max_len: int) -> None:
    truth = sum(math.exp(_logprob(s)) for s in _sequences(max_len) if _accepts(_text(s), gold))
    listed = continuations(gold, max_len, EOS, [PAD], [SPACE])
    got = probabilities([k for k, _ in listed], [_logprob(_tokens(t)) for _, t in listed])
    assert got["p_correct"] <= truth + 1e-12
    assert truth <= got["p_correct"] + got["p_unresolved"] + 1e-12
    assert got["p_unresolved"] > 0  # the toy model gives every token mass: the bound is not vacuous


# -- through lm-eval, on a tiny GPT-2 -------------------------------------------------------------
torch = pytest.importorskip("torch")
pytest.importorskip("lm_eval")


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from grpo_ablation.evaluation.evaluate import EvaluationOptions, evaluate_checkpoints
    from grpo_ablation.evaluation.task_folders import exact_tokens, write_task
    from grpo_ablation.policy.tokenizer import build_char_tokenizer
    from tests.test_evaluate import PROMPTS, _tiny_model, _write_rows

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("exact")
    model = _tiny_model(root / "model")
    golds = ["9", "5", "90", "0", "99", "9", "1", "55", "9", "05"]
    test = _write_rows(root / "test.jsonl", list(zip(PROMPTS, golds, strict=True)))
    spec = exact_tokens(build_char_tokenizer())
    temperature = 0.7  # not 1: the log-likelihoods must be those of softmax(logits / T)
    write_task(test, root / "tasks", "t", 6, 2, temperature, exact=spec)
    # The same weights as steps 0 and 1: the bound is asked for at the last checkpoint only.
    results = evaluate_checkpoints(
        [(0, model), (1, model)], root / "tasks", root / "out", EvaluationOptions(batch_size=8)
    )
    rows = [json.loads(x) for x in (root / "out/step=1/samples.jsonl").read_text().splitlines()]
    return {
        "model": model,
        "results": results,
        "result": results[-1],
        "rows": rows,
        "spec": spec,
        "T": temperature,
    }


def _teacher_forced(model_dir: Path, prompt: str, texts: list[str], temperature: float) -> float:
    """Sum of the probabilities of ``texts`` after ``prompt``, token by token, from the model's
    logits: an implementation independent of lm-eval's request machinery."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    ctx = tok.encode(prompt, add_special_tokens=False)
    total = 0.0
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        with torch.no_grad():
            logits = model(torch.tensor([ctx + ids])).logits[0] / temperature
        logp = torch.log_softmax(logits.double(), -1)
        total += math.exp(sum(logp[len(ctx) + i - 1, t].item() for i, t in enumerate(ids)))
    return total


def test_exact_probabilities_equal_teacher_forcing_at_temperature(evaluated: dict) -> None:
    spec, rows = evaluated["spec"], [r for r in evaluated["rows"] if r["task"] == "exact"]
    assert len(rows) == 10
    for row in rows[:3]:
        listed = continuations(row["answer"], 6, spec["eos"], spec["empty"], spec["space"])
        for kind, key in ((ACCEPTED, "p_correct"), (UNRESOLVED, "p_unresolved")):
            texts = [t for k, t in listed if k == kind]
            want = _teacher_forced(evaluated["model"], row["prompt"], texts, evaluated["T"])
            assert row[key] == pytest.approx(want, rel=1e-4, abs=1e-9)
    assert max(r["p_correct"] for r in rows) > 1e-3  # not sums of vanishing terms only


def test_results_name_the_exact_headline(evaluated: dict) -> None:
    res, rows = evaluated["result"], [r for r in evaluated["rows"] if r["task"] == "exact"]
    assert res["sampled_metric"] == "exact"
    assert res["sampled_accuracy"] == res["sampled_exact"]
    assert res["sampled_exact"] == pytest.approx(sum(r["p_correct"] for r in rows) / len(rows))
    assert res["sampled_exact_unresolved_max"] == max(r["p_unresolved"] for r in rows)
    assert res["sampled_mean_at_k"] is not None  # the cross-check is kept


def test_the_unresolved_mass_is_computed_at_the_last_checkpoint_only(evaluated: dict) -> None:
    first, last = evaluated["results"]
    # the same weights: the same number, to the bit (the two tasks' prefix trees have the same
    # input nodes; the unresolved continuations are leaves)
    assert first["sampled_exact"] == last["sampled_exact"]
    assert first["sampled_exact_unresolved"] is None
    assert last["sampled_exact_unresolved"] > 0


def test_the_curve_point_of_a_checkpoint_is_its_test_value_to_the_bit(
    evaluated: dict, tmp_path: Path
) -> None:
    """What lets ``write_curve`` read a checkpoint's curve point from its test summary: the curve's
    own evaluation of the same weights (the exact task, in a call of its own) gives that number."""
    from grpo_ablation.evaluation.evaluate import evaluate_curve

    tasks = Path(evaluated["result"]["test"]).parent / "tasks"
    curve = evaluate_curve([(1, evaluated["model"])], tasks, tmp_path / "curve", batch_size=8)
    assert curve["points"][0]["accuracy"] == evaluated["result"]["sampled_exact"]


def _loadable(first: Path, then: Path) -> bool:
    from grpo_ablation.evaluation.model import load_lm, loadable_into

    return loadable_into(load_lm(first, "cpu", 8, "float32")[0], then)


def test_weights_loaded_into_a_model_are_those_a_model_of_their_own_holds(
    evaluated: dict, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM, GPT2Config

    from grpo_ablation.evaluation.model import load_lm, load_weights_into

    other, wider = tmp_path / "other", tmp_path / "wider"
    model = AutoModelForCausalLM.from_pretrained(evaluated["model"])
    model.transformer.h[0].mlp.c_fc.weight.data *= 1.5
    model.save_pretrained(other)
    for folder in (other, wider):
        for f in ("tokenizer.json", "tokenizer_config.json"):
            (folder / f).parent.mkdir(exist_ok=True)
            (folder / f).write_bytes((evaluated["model"] / f).read_bytes())
    config = GPT2Config.from_pretrained(evaluated["model"])
    config.n_embd *= 2
    AutoModelForCausalLM.from_config(config).save_pretrained(wider)
    lm, _ = load_lm(evaluated["model"], "cpu", 8, "float32")
    before = lm.model.state_dict()["transformer.h.0.mlp.c_fc.weight"].clone()
    got = load_weights_into(lm, other)[0].model.state_dict()
    want = load_lm(other, "cpu", 8, "float32")[0].model.state_dict()
    assert got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) for k in want)  # the tied head included
    assert not torch.equal(got["transformer.h.0.mlp.c_fc.weight"], before)
    with pytest.raises(ValueError, match="config or tokenizer differs"):
        load_weights_into(lm, wider)


def test_a_curve_policy_scores_as_in_a_call_of_its_own(evaluated: dict, tmp_path: Path) -> None:
    """The policies of one curve call share what the call builds once (the task, the model
    object where it is reused): the later policy's point is the one a call of its own gives."""
    from transformers import AutoModelForCausalLM

    from grpo_ablation.evaluation.evaluate import evaluate_curve

    other = tmp_path / "other"
    model = AutoModelForCausalLM.from_pretrained(evaluated["model"])
    model.transformer.ln_f.bias.data *= 0.5
    model.save_pretrained(other)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (other / f).write_bytes((evaluated["model"] / f).read_bytes())
    assert _loadable(evaluated["model"], other)  # the second one goes into the first's model
    tasks = Path(evaluated["result"]["test"]).parent / "tasks"
    curve = [(1, evaluated["model"]), (2, other)]
    both = evaluate_curve(curve, tasks, tmp_path / "both", batch_size=8)
    alone = evaluate_curve([(2, other)], tasks, tmp_path / "alone", batch_size=8)
    first, second = (p["accuracy"] for p in both["points"])
    assert first == evaluated["result"]["sampled_exact"]
    assert second == alone["points"][0]["accuracy"] != first


def _run_with_curve(root: Path, model: Path, same: bool) -> tuple[Path, dict]:
    """A run folder whose checkpoint-1 is ``model`` and whose curve policy of step 1 has its
    weights (``same``) or one byte changed."""
    import shutil

    run = root / "run"
    for folder in (run / "checkpoints" / "checkpoint-1", run / "curve" / "step-1"):
        shutil.copytree(model, folder)
    if not same:
        weights = run / "curve" / "step-1" / "model.safetensors"
        data = bytearray(weights.read_bytes())
        data[-1] ^= 1
        weights.write_bytes(bytes(data))
    return run, {"curve_policies": {"1": "curve/step-1"}}


@pytest.mark.parametrize("same", [True, False])
def test_write_curve_reads_a_checkpoint_point_only_for_the_same_weights(
    evaluated: dict, tmp_path: Path, same: bool
) -> None:
    from grpo_ablation.evaluation.evaluate import write_curve

    tasks = Path(evaluated["result"]["test"]).parent / "tasks"
    run, info = _run_with_curve(tmp_path, evaluated["model"], same)
    out = tmp_path / "evaluation"
    summary = {"checkpoints": [{**evaluated["result"], "checkpoint": "checkpoints/checkpoint-1"}]}
    (out / "test").mkdir(parents=True)
    (out / "test" / "summary.json").write_text(json.dumps(summary))
    options = {"batch_size": 8, "limit": None, "revision": None}
    write_curve(run, info, tasks, out, options)
    point = json.loads((out / "curve" / "step=1.json").read_text())
    assert ("from" in point) is same  # other weights: evaluated, not read
    assert point["seconds"] == 0.0 if same else point["seconds"] > 0
    if same:
        assert point["accuracy"] == evaluated["result"]["sampled_exact"]


def test_a_checkpoint_with_another_tokenizer_is_refused(evaluated: dict, tmp_path: Path) -> None:
    from grpo_ablation.evaluation.evaluate import evaluate_checkpoints

    tasks = Path(evaluated["result"]["test"]).parent / "tasks"
    manifest = json.loads((tasks / "manifest.json").read_text())
    manifest["exact"] = {**manifest["exact"], "empty": ["<pad>"]}  # as if written for another one
    other = tmp_path / "tasks"
    other.mkdir()
    for f in tasks.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="tokenizer has"):
        evaluate_checkpoints([(0, evaluated["model"])], other, tmp_path / "out")


def test_the_fast_request_path_scores_as_lm_eval(evaluated: dict, monkeypatch) -> None:
    """The evaluation replaces lm-eval's per-request log-likelihood loop by prefix trees
    (``model.prefix_tree_loglikelihoods``) and remembers each request's token ids
    (``model.remember_pairs``) only to save time: evaluated again with lm-eval's own code, every
    number of every results.json and samples.jsonl is the same to TREE_TOLERANCE relative (a
    probability's relative error is its log-likelihood's absolute one; the exact task
    at T = 0.7, the bound at the last checkpoint included). Not to the bit: a tree row is
    another batch shape and attention mask than lm-eval's rows, which moves the last float bits
    of a forward pass (docs/measurements.md, 2026-12-07); the texts and booleans are identical."""
    from grpo_ablation.evaluation import model as lm_model
    from grpo_ablation.evaluation.evaluate import EvaluationOptions, evaluate_checkpoints

    out = Path(evaluated["result"]["test"]).parent
    for patch in ("batched_loglikelihoods", "prefix_tree_loglikelihoods", "remember_pairs"):
        monkeypatch.setattr(lm_model, patch, lambda lm: None)
    monkeypatch.setattr(lm_model, "_PAIRS", {})
    model = evaluated["model"]
    evaluate_checkpoints(
        [(0, model), (1, model)], out / "tasks", out / "lm_eval", EvaluationOptions(batch_size=8)
    )
    for step in (0, 1):
        got = json.loads((out / "lm_eval" / f"step={step}" / "results.json").read_text())
        want = json.loads((out / "out" / f"step={step}" / "results.json").read_text())
        assert _close(got, want, TREE_TOLERANCE), step
        for name in ("samples.jsonl",):
            got_rows = (out / "lm_eval" / f"step={step}" / name).read_text().splitlines()
            want_rows = (out / "out" / f"step={step}" / name).read_text().splitlines()
            assert len(got_rows) == len(want_rows)
            for g, w in zip(got_rows, want_rows, strict=True):
                assert _close(json.loads(g), json.loads(w), TREE_TOLERANCE), (step, g, w)


def _close(got: object, want: object, rel: float) -> bool:
    """The same structure, texts and booleans; floats within ``rel`` (or 1e-12 absolute)."""
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and got.keys() == want.keys()
            and all(_close(got[k], want[k], rel) for k in want)
        )
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(_close(g, w, rel) for g, w in zip(got, want, strict=True))
        )
    if isinstance(want, float) and not isinstance(want, bool):
        return isinstance(got, float) and math.isclose(got, want, rel_tol=rel, abs_tol=1e-12)
    return got == want


def _requests(lm: object, spec: dict) -> list:
    """Log-likelihood requests as lm-eval builds them: every continuation of the exact task's
    bound for a few prompts (one repeated), and the model's own greedy next two tokens, whose
    greedy flag is true."""
    requests = []
    for prompt, gold in [("47+8=", "9"), ("1+2=", "90"), ("5+5=", "05"), ("47+8=", "9")]:
        for _, text in continuations(gold, 6, spec["eos"], spec["empty"], spec["space"]):
            requests.append(((prompt, text), *lm._encode_pair(prompt, text)))
        ids = lm.tok_encode(prompt)
        for _ in range(2):
            ids = [*ids, int(lm._model_call(torch.tensor([ids]))[0, -1].argmax())]
        requests.append(((prompt, "greedy"), ids[:-2], ids[-2:]))
    return requests


def _tempered_lm(evaluated: dict, batch_size: int) -> object:
    from grpo_ablation.evaluation.model import load_lm, ready_for_exact

    tasks = Path(evaluated["result"]["test"]).parent / "tasks"
    manifest = json.loads((tasks / "manifest.json").read_text())
    lm, _ = load_lm(evaluated["model"], "cpu", batch_size, "float32")
    ready_for_exact(lm, manifest, "hf", str(evaluated["model"]))
    return lm


@pytest.mark.parametrize("batch_size", [1, 3, 8, 64])
def test_batched_loglikelihoods_are_lm_evals_at_every_batch_size(
    evaluated: dict, batch_size: int, monkeypatch
) -> None:
    """Request by request, the batched replacement (what a request too long for a tree gets)
    returns lm-eval's (log-probability, greedy) pairs: the same floats, the same booleans, in
    the same order, whether a batch holds one request or all of them, with requests lm-eval
    scores from another's row (one-token continuations of the same context: the pad and the
    space after "9"), repeated ones and greedy ones among them."""
    from lm_eval.models.huggingface import HFLM

    from grpo_ablation.evaluation import model as lm_model

    monkeypatch.setattr(lm_model, "prefix_tree_loglikelihoods", lambda lm: None)
    lm = _tempered_lm(evaluated, batch_size)
    requests = _requests(lm, evaluated["spec"])
    got = lm._loglikelihood_tokens(requests)
    want = HFLM._loglikelihood_tokens(lm, requests, disable_tqdm=True)
    assert len(got) == len(want) == len(requests)
    for (lp, greedy), (lp_want, greedy_want) in zip(got, want, strict=True):
        assert type(lp) is float and type(greedy) is bool
        assert (lp, greedy) == (lp_want, greedy_want)
    assert any(greedy for _, greedy in want)  # the comparison covers both booleans


# A tree's log-likelihood against lm-eval's, absolute: float32 rounding of other shapes. On this
# untrained model (log-likelihoods to -52) each is ~2e-5 from float64's, and they differ by up to
# 1.5e-5 (2026-12-07).
TREE_TOLERANCE = 1e-4


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_prefix_trees_score_as_lm_eval_within_rounding(evaluated: dict, batch_size: int) -> None:
    """Request by request, the prefix-tree scorer returns lm-eval's own log-probabilities to
    TREE_TOLERANCE (absolute, on log-likelihoods of -0.01 to -40) and its greedy flags exactly,
    in the request order; and the comparison can fail: the same requests with one continuation
    token dropped are far outside it."""
    from lm_eval.models.huggingface import HFLM

    lm = _tempered_lm(evaluated, batch_size)
    requests = _requests(lm, evaluated["spec"])
    got = lm._loglikelihood_tokens(requests)
    want = HFLM._loglikelihood_tokens(lm, requests, disable_tqdm=True)
    assert len(got) == len(want) == len(requests)
    assert [g for _, g in got] == [g for _, g in want]
    assert any(g for _, g in want)
    assert max(abs(a - b) for (a, _), (b, _) in zip(got, want, strict=True)) < TREE_TOLERANCE
    assert min(lp for lp, _ in want) < -5  # long, unlikely continuations among them
    longest = max(range(len(requests)), key=lambda i: len(requests[i][2]))
    s, ctx, cont = requests[longest]
    dropped = [*requests[:longest], (s, ctx, cont[:2] + cont[3:]), *requests[longest + 1 :]]
    worse = lm._loglikelihood_tokens(dropped)
    assert abs(worse[longest][0] - want[longest][0]) > 1000 * TREE_TOLERANCE


@pytest.mark.parametrize("attention,trees", [("sdpa", True), ("flash_attention_2", False)])
def test_trees_only_where_the_attention_reads_their_mask(attention: str, trees: bool) -> None:
    """An implementation that reads no 4D mask (flash attention) keeps lm-eval's per-request
    path: a tree row would let every node attend to every other."""
    import types

    from grpo_ablation.evaluation.model import prefix_tree_loglikelihoods

    config = types.SimpleNamespace(_attn_implementation=attention)
    batched = object()
    lm = types.SimpleNamespace(
        backend="causal",
        batch_size=8,
        model=types.SimpleNamespace(config=config),
        _loglikelihood_tokens=batched,
    )
    prefix_tree_loglikelihoods(lm)
    assert (lm._loglikelihood_tokens is not batched) is trees


def test_a_bfloat16_model_gets_a_bfloat16_tree_mask(evaluated: dict, monkeypatch) -> None:
    """The trees' additive mask is in the model's dtype (SDPA on a GPU refuses a float32 mask
    with bfloat16 queries), its blocked entries that dtype's minimum; the scores stay lm-eval's
    within bfloat16's rounding."""
    from grpo_ablation.evaluation import prefix_tree
    from grpo_ablation.evaluation.model import load_lm

    masks = []
    score = prefix_tree.score_batch
    monkeypatch.setattr(
        prefix_tree, "score_batch", lambda b, *a: masks.append(b.mask) or score(b, *a)
    )
    lm, _ = load_lm(evaluated["model"], "cpu", 8, "bfloat16")
    requests = _requests(lm, evaluated["spec"])[:40]
    got = lm._loglikelihood_tokens(requests)
    assert masks and all(m.dtype == torch.bfloat16 for m in masks)
    assert masks[0].min() == torch.finfo(torch.bfloat16).min
    want = type(lm)._loglikelihood_tokens(lm, requests, disable_tqdm=True)
    # bfloat16's rounding of the logits and of the sums (seen 2026-12-07: 0.027 at -0.56, 0.125
    # at -34.5)
    close = [abs(a - b) <= 0.05 + 2**-7 * abs(b) for (a, _), (b, _) in zip(got, want, strict=True)]
    assert all(close)
