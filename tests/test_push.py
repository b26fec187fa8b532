"""The push of each objective: the weights on worked numbers, and the score-function gradient of
a measured quantity against its exact value on a model small enough to differentiate exactly."""

import itertools
import json
import math
from dataclasses import asdict

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from grpo_ablation.design.push import PushConfig
from grpo_ablation.objective.formulas import std_ratio_population_to_sample
from grpo_ablation.objective.push import (
    accuracy_weights,
    choice_weights,
    incorrect_length_weights,
    leave_one_out,
    long_incorrect_share,
    mixed_weights,
)
from grpo_ablation.training.push import sample_fold, score_gradients

torch.set_num_threads(1)
REWARDS = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
LENGTHS = torch.tensor([2.0, 8.0, 4.0, 6.0, 3.0, 3.0, 9.0, 5.0])


def test_leave_one_out_is_the_centred_value_times_g_over_g_minus_one():
    assert leave_one_out(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4).tolist() == pytest.approx(
        [1.0, -1 / 3, -1 / 3, -1 / 3]
    )


def test_population_and_sample_weights_differ_by_the_constant_factor():
    pop = choice_weights(REWARDS, LENGTHS, 4, "population", "sequence_mean", 0.0, 12)
    sample = choice_weights(REWARDS, LENGTHS, 4, "sample", "sequence_mean", 0.0, 12)
    assert (pop / sample).tolist() == pytest.approx([std_ratio_population_to_sample(4)] * 8)
    # token_mean and constant: one coefficient per batch, so proportional weights too.
    tm = choice_weights(REWARDS, LENGTHS, 4, "sample", "token_mean", 0.0, 12)
    co = choice_weights(REWARDS, LENGTHS, 4, "sample", "constant", 0.0, 12)
    assert (tm / co).tolist() == pytest.approx([8 * 12 / float(LENGTHS.sum())] * 8)


def test_measure_weights_on_worked_numbers():
    correct = REWARDS
    acc = accuracy_weights(correct, 4)
    assert acc.view(2, 4).sum(1).tolist() == pytest.approx([0.0, 0.0])
    assert acc[0].item() == pytest.approx(1.0 / 8)  # (1 − 0) · 4/3 · 3/4 / 8 (G/(G−1) · centred)
    # Mean incorrect length J = (8 + 4 + 6 + 9) / 4 = 6.75; f = (L − J)·wrong; share of wrong 0.5.
    f = torch.tensor([0.0, 1.25, -2.75, -0.75, 0.0, 0.0, 2.25, 0.0])
    expected = leave_one_out(f, 4) / (8 * 0.5)
    assert incorrect_length_weights(correct, LENGTHS, 4).tolist() == pytest.approx(
        expected.tolist()
    )
    assert incorrect_length_weights(torch.ones(8), LENGTHS, 4).abs().sum() == 0
    # A group of (1, 0, 0, 0): only the right completion gets a P(mixed) weight, since the others
    # see one right and two wrong among the rest: both products are zero there.
    quarter = torch.tensor([1.0, 0.0, 0.0, 0.0])
    assert mixed_weights(quarter, 4).tolist() == pytest.approx([1.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("G", [2, 4, 8])
@pytest.mark.parametrize("p", [0.05, 0.3, 0.5])
def test_accuracy_and_mixed_weights_are_unbiased_by_exact_enumeration(G, p):
    """One prompt, outcomes f ~ Bernoulli(p) with p = sigmoid(θ): the score of a sample is
    f − p, so E[Σ v_i (f_i − p)] over all 2^G outcomes must equal dJ/dθ exactly:
    p(1 − p) for accuracy, q'(p) p(1 − p) for P(mixed)."""
    expected = {"accuracy": 0.0, "mixed": 0.0}
    for outcome in itertools.product([0.0, 1.0], repeat=G):
        f = torch.tensor(outcome)
        prob = math.prod(p if x else 1 - p for x in outcome)
        score = (f - p).double()
        expected["accuracy"] += prob * float(accuracy_weights(f, G) @ score)
        expected["mixed"] += prob * float(mixed_weights(f, G) @ score)
    slope = G * ((1 - p) ** (G - 1) - p ** (G - 1))
    assert expected["accuracy"] == pytest.approx(p * (1 - p))
    assert expected["mixed"] == pytest.approx(slope * p * (1 - p))


def test_long_incorrect_share_counts_weight_on_long_wrong_completions():
    w = torch.tensor([1.0, -1.0, -1.0, 1.0])
    lengths = torch.tensor([2.0, 8.0, 4.0, 6.0])
    correct = torch.tensor([1.0, 0.0, 0.0, 1.0])
    # Median length 5: long are 8 (wrong) and 6 (right); mass |w|·L = 2, 8, 4, 6.
    assert long_incorrect_share(w, lengths, correct) == pytest.approx(8 / 20)


class _Tokenizer:
    """Just what the fold sampler needs: ids in, ids out."""

    eos_token_id, pad_token_id = 0, 0

    def batch_decode(self, seqs, skip_special_tokens=True):
        return [" ".join(map(str, s)) for s in seqs]


def test_the_score_function_gradient_matches_the_exact_gradient():
    """One prompt, one generated token (max length 1): P(correct) = softmax(logits / T)[target]
    has an exact gradient; the estimator from 4,096 keyed samples must agree with it within its
    own sampling error (a wrong sign, baseline or temperature would not)."""
    torch.manual_seed(3)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=6, n_positions=8, n_embd=8, n_layer=1, n_head=2))
    model.eval()
    T, G, target, prompt = 0.8, 8, 3, [1, 2]

    def reward(prompts, completions, **kwargs):
        return [float(c == str(target)) for c in completions]

    cfg = dict(group_size=G, temperature=T, max_completion_length=1, success_threshold=1.0)
    cfg["reward"] = reward
    n = 512
    rows = [{"prompt_id": f"p{i}", "prompt": "x"} for i in range(n)]
    fold = sample_fold(model, _Tokenizer(), rows, [prompt] * n, cfg, ("exact",))
    (estimate,) = score_gradients(model, fold, [accuracy_weights(fold["correct"], G)], T, 0)

    logits = model(input_ids=torch.tensor([prompt])).logits[0, -1].double()
    p = torch.softmax(logits / T, -1)[target]
    params = [q for q in model.parameters() if q.requires_grad]
    exact = torch.cat([g.reshape(-1).double() for g in torch.autograd.grad(p, params)])
    # Projected on the exact direction: the estimate's component, against its standard error
    # from the per-group contributions (independent across prompts).
    unit = exact / exact.norm()
    per_group = []
    for g in range(n):
        part = {k: v[g * G : (g + 1) * G] for k, v in fold.items() if k != "completions"}
        part["prompts"] = fold["prompts"][g * G : (g + 1) * G]
        part["completions"] = fold["completions"][g * G : (g + 1) * G]
        (v,) = score_gradients(model, part, [accuracy_weights(part["correct"], G) / n], T, 0)
        per_group.append(float(v @ unit))
    se = math.sqrt(sum((x - sum(per_group) / n) ** 2 for x in per_group) / (n - 1)) * math.sqrt(n)
    assert 0.05 < p.detach().item() < 0.95 and se > 0
    assert abs(float(estimate @ unit) - float(exact.norm())) < 4 * se
    # and the estimate is not just noise: the exact gradient's norm is many standard errors
    assert float(exact.norm()) > 4 * se


# The stated tolerance of a push restricted to a parameter subset (push.parameters), against every
# parameter, on a warm-started character GPT-2: the cosines between the choices' directions move
# by at most COSINE_TOLERANCE. The signs of the pushes themselves are not preserved: they agreed in
# 148 of 192 (replicate, choice, quantity) here and 176 of 192 at the default's draw 9 (2026-12-02),
# so a restricted push measures the first-order effect within the subspace, not the full one.
COSINE_TOLERANCE = 0.05
TOP_BLOCK = r"transformer\.h\.1\.|ln_f"  # the last of the two blocks and the final norm


@pytest.mark.slow
def test_the_push_in_the_top_blocks_keeps_the_cosines(tmp_path):
    from grpo_ablation.policy.base_policy import BasePolicyConfig, warm_start
    from grpo_ablation.tasks.addition import AdditionTask
    from grpo_ablation.tasks.splits import read_split
    from grpo_ablation.training.push import CHOICES, measure

    task = AdditionTask(n_train=256, n_validation=16, n_test=16)
    warm_start(BasePolicyConfig(sft_steps=300, eval_samples=1), task, tmp_path / "base")
    rows = read_split(tmp_path / "base" / "splits" / "train.jsonl")[:128]
    cfg = dict(
        group_size=8,
        temperature=1.0,
        max_completion_length=10,
        std_eps=1e-4,
        success_threshold=1.0,
        reward=task.reward_function(),
        **asdict(PushConfig(replicates=4, prompts_per_fold=16)),
    )
    full, top = (
        measure(tmp_path / "base", rows, task, {**cfg, "parameters": p}, step=0, seed=0)
        for p in (None, TOP_BLOCK)
    )
    assert full["parameters"]["differentiated"] == full["parameters"]["of"]
    assert 0 < top["parameters"]["differentiated"] < top["parameters"]["of"] / 2
    moved = [
        abs(a["cosine"][k] - b["cosine"][k])
        for a, b in zip(full["replicates"], top["replicates"], strict=True)
        for k in a["cosine"]
    ]
    pairs = math.comb(len(CHOICES), 2)  # every pair of the 20 choices, in 4 replicates
    assert len(moved) == 4 * pairs and not any(math.isnan(m) for m in moved)
    assert max(moved) <= COSINE_TOLERANCE, max(moved)
    # population and sample are one direction (Adam aside, a constant factor per group) in both
    pair = "population/sequence_mean|sample/sequence_mean"
    assert all(abs(r["cosine"][pair] - 1) < 1e-9 for r in top["replicates"])


def test_the_push_figure_keeps_its_labels_apart_at_a_real_models_scale():
    """SmolLM2's measured intervals (rounded; per aggregation, every std scaling alike) run to
    thousands of tokens per unit step: its first push report stopped on colliding tick labels
    ('−1250' and '−1000')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from grpo_ablation.analysis.plots.push import push_figure
    from grpo_ablation.analysis.plots.saving import check_text
    from grpo_ablation.objective.conventions import SCALINGS

    measured = {  # the SmolLM2 push's four aggregations, sequence_mean, token_mean, group_token_mean, constant: (mean, low, high)
        "accuracy": [
            (0.16, -0.21, 0.53),
            (0.25, -1.86, 2.37),
            (0.18, -0.31, 0.66),
            (0.25, -1.86, 2.37),
        ],
        "incorrect_length": [
            (-37, -135, 61),
            (-371, -1262, 520),
            (-185, -487, 116),
            (-371, -1262, 520),
        ],
        "mixed": [(-0.01, -0.53, 0.5), (-0.24, -3.2, 2.7), (-0.18, -4.5, 4.1), (-0.24, -3.2, 2.7)],
    }
    rows = []
    for s in SCALINGS:
        for k, a in enumerate(("sequence_mean", "token_mean", "group_token_mean", "constant")):
            row = {"step": 0, "choice": f"{s}/{a}"}
            for q, values in measured.items():
                row.update(
                    dict(
                        zip(
                            (f"{q}_diff", f"{q}_diff_low", f"{q}_diff_high"), values[k], strict=True
                        )
                    )
                )
            rows.append(row)
    fig = push_figure(pd.DataFrame(rows + [{**r, "step": 8} for r in rows]))
    check_text(fig, "push")  # raises OverlapError on colliding text
    assert "The push" in fig.get_suptitle()
    # the legend (base policy, checkpoint 8) lies below every panel: it covers no error bar
    fig.canvas.draw()
    (legend,) = fig.legends
    top = legend.get_window_extent().y1
    assert all(top <= ax.get_window_extent().y0 for ax in fig.axes)
    plt.close(fig)


@pytest.mark.slow
def test_a_replicate_of_the_hypotheses_choices_alone_gives_their_numbers_bit_for_bit(tmp_path):
    """Past push.full_replicates a replicate measures only the choices the push hypotheses
    compare: each direction is its own backward pass, so their pushes, norms and shares are the
    full replicate's to the bit, and the table still pairs them with the reference."""
    from grpo_ablation.analysis.push_tables import push_tables
    from grpo_ablation.policy.base_policy import BasePolicyConfig, warm_start
    from grpo_ablation.tasks.addition import AdditionTask
    from grpo_ablation.tasks.splits import read_split
    from grpo_ablation.training.push import CHOICES, QUANTITIES, measure

    task = AdditionTask(n_train=128, n_validation=16, n_test=16)
    warm_start(BasePolicyConfig(sft_steps=100, eval_samples=1), task, tmp_path / "base")
    rows = read_split(tmp_path / "base" / "splits" / "train.jsonl")
    wanted = ["sample/constant", "sample/sequence_mean"]
    cfg = dict(
        group_size=4,
        temperature=1.0,
        max_completion_length=8,
        std_eps=1e-4,
        success_threshold=1.0,
        reward=task.reward_function(),
        **asdict(PushConfig(replicates=3, prompts_per_fold=4)),
        hypothesis_choices=wanted,
    )
    full = measure(tmp_path / "base", rows, task, cfg, step=0, seed=0)
    part = measure(tmp_path / "base", rows, task, {**cfg, "full_replicates": 1}, step=0, seed=0)
    assert set(part["replicates"][0]["choices"]) == set(CHOICES)
    for a, b in zip(full["replicates"][1:], part["replicates"][1:], strict=True):
        assert set(b["choices"]) == set(wanted)
        assert all(a["choices"][c] == b["choices"][c] for c in wanted)
    record = {"choices": CHOICES, "quantities": list(QUANTITIES), "policies": [{"step": 0, **part}]}
    table, cosine = push_tables(record)
    by = table.set_index("choice")["replicates"]
    assert by["sample/constant"] == 3 and by["none/token_mean"] == 1
    assert len(cosine) == len(CHOICES) * (len(CHOICES) - 1) // 2


@pytest.mark.slow
def test_a_killed_push_resumes_from_its_finished_replicates(tmp_path, monkeypatch):
    """A push killed after its first replicate keeps that replicate beside its output; the rerun
    measures only the others and writes the numbers of an uninterrupted push, bit for bit. A
    replicate kept under another key (here, another temperature) is measured again."""
    from grpo_ablation.policy.base_policy import BasePolicyConfig, warm_start
    from grpo_ablation.tasks.addition import AdditionTask
    from grpo_ablation.training import push

    task_config = {"kind": "addition", "n_train": 64, "n_validation": 16, "n_test": 16}
    task = AdditionTask(**{k: v for k, v in task_config.items() if k != "kind"})
    warm_start(BasePolicyConfig(sft_steps=20, eval_samples=1), task, tmp_path / "base")
    training = dict(
        group_size=4,
        temperature=1.0,
        max_completion_length=6,
        std_eps=1e-4,
        success_threshold=1.0,
    )
    settings = asdict(PushConfig(replicates=3, prompts_per_fold=2))
    policies = [(0, tmp_path / "base")]
    data = tmp_path / "base" / "splits"

    def run(out, **changed):
        return push.run_push(policies, data, task_config, {**training, **changed}, settings, out)

    whole = json.loads(run(tmp_path / "whole.json").read_text())
    measured = []
    real = push.replicate

    def dies_after_one(*args, **kwargs):
        if measured:
            raise KeyboardInterrupt("killed")
        measured.append(1)
        return real(*args, **kwargs)

    out = tmp_path / "push.json"
    monkeypatch.setattr(push, "replicate", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        run(out)
    kept = push.replicates_folder(out)
    assert not out.exists() and len(list(kept.glob("*.json"))) == 1

    def counted(*args, **kwargs):
        measured.append(1)
        return real(*args, **kwargs)

    measured.clear()
    monkeypatch.setattr(push, "replicate", counted)
    assert json.loads(run(out).read_text()) == whole
    assert len(measured) == 2 and not kept.exists()

    measured.clear()
    monkeypatch.setattr(push, "replicate", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        run(out)
    measured.clear()
    monkeypatch.setattr(push, "replicate", counted)
    run(out, temperature=0.7)
    assert len(measured) == 3  # the kept replicate was another temperature's
