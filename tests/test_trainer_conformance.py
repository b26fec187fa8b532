"""The trainer optimises exactly the declared objective (issue: train the declared objective).

1. Its gradient equals the gradient of the library's formulas computed directly.
2. Where TRL has the same objective, stock GRPOTrainer gives the same gradient.
3. Splitting the generation batch over accumulation steps or processes changes nothing.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from conformance import (
    MAX_LEN,
    MIXED_PROMPTS,
    PROMPTS,
    G,
    build_model_dir,
    capture,
    digit_reward,
    fixed_completion,
)
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_ablation.objective.conventions import AGGREGATIONS, SCALINGS
from grpo_ablation.objective.formulas import (
    aggregate_loss,
    group_advantages,
    zero_variance_groups,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_model_dir(tmp_path_factory.mktemp("model"))


def reference_grads(
    model_dir: Path,
    scaling: str,
    eps: float,
    mode: str,
    all_prompts=PROMPTS,
    keep_zero=True,
    baseline: str = "group_mean",
) -> dict:
    """The objective written out with the library alone: no TRL, no trainer, on the first
    generation batch (the first half of the prompts, in sampler order). ``keep_zero=False``: the
    loss is the aggregate over the mixed groups alone, as if the batch held nothing else."""
    return group_grads(
        model_dir, all_prompts[: len(all_prompts) // 2], scaling, eps, mode, keep_zero, baseline
    )


def group_grads(
    model_dir: Path,
    groups: list[str],
    scaling: str,
    eps: float,
    mode: str,
    keep_zero=True,
    baseline: str = "group_mean",
) -> dict:
    """The library's objective on a batch given as its groups' prompts, each with its G fixed
    completions (a prompt's completions are numbered within the batch it was generated in)."""
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    eos = tok.eos_token_id
    seqs, rewards = [], []
    for p in groups:
        ids = tok(p)["input_ids"]
        for k in range(G):
            comp = fixed_completion(ids, k, eos)
            seqs.append((ids, comp))
            rewards.append(digit_reward([p], [tok.decode(comp, skip_special_tokens=True)])[0])
    adv = group_advantages(torch.tensor(rewards), G, scaling, eps, baseline)
    mask = torch.zeros(len(seqs), MAX_LEN)
    rows = []
    for i, (prompt, comp) in enumerate(seqs):
        logits = model(torch.tensor([prompt + comp])).logits[0, len(prompt) - 1 : -1]
        logp = torch.log_softmax(logits, -1).gather(1, torch.tensor(comp)[:, None])[:, 0]
        # on-policy PPO term: ratio = 1 in value, gradient A * grad log p
        rows.append(-(adv[i] * torch.exp(logp - logp.detach())))
        mask[i, : len(comp)] = 1
    per_token = torch.stack([torch.nn.functional.pad(r, (0, MAX_LEN - len(r))) for r in rows])
    if not keep_zero:
        kept = ~zero_variance_groups(torch.tensor(rewards), G)
        assert 0 < kept.sum() < len(kept), "the batch must hold both kinds of group"
        per_token, mask = per_token[kept], mask[kept]
    aggregate_loss(per_token, mask, mode, G, MAX_LEN).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def assert_same(a: dict, b: dict, tol: float = 1e-6) -> None:
    assert a.keys() == b.keys()
    scale = max(v.abs().max().item() for v in b.values())
    assert scale > 0, "the reference gradient is zero: the test would prove nothing"
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst <= tol * max(1.0, scale), f"max abs difference {worst:.3g} (scale {scale:.3g})"


@pytest.mark.parametrize("mode", AGGREGATIONS)
@pytest.mark.parametrize("scaling", SCALINGS)
def test_trainer_gradient_equals_the_library_formula(model_dir, tmp_path, scaling, mode):
    got = capture(model_dir, tmp_path, std_scaling=scaling, std_eps=1e-4, aggregation=mode)
    assert_same(got["grads"], reference_grads(model_dir, scaling, 1e-4, mode))


@pytest.mark.parametrize("scaling", ["none", "sample"])
def test_the_trainer_passes_the_leave_one_out_baseline_on(model_dir, tmp_path, scaling):
    """The baseline reaches the trainer's advantages: leave-one-out's gradient is the library
    formula's with that baseline, G/(G−1) times the group mean's without std scaling, and the
    group mean's gradient is not it (so dropping the option would fail here)."""
    got = capture(
        model_dir,
        tmp_path,
        std_scaling=scaling,
        std_eps=1e-4,
        aggregation="token_mean",
        baseline="leave_one_out",
    )
    loo = reference_grads(model_dir, scaling, 1e-4, "token_mean", baseline="leave_one_out")
    assert_same(got["grads"], loo)
    mean = reference_grads(model_dir, scaling, 1e-4, "token_mean")
    with pytest.raises(AssertionError):
        assert_same(got["grads"], mean)


# The first generation batch holds one all-incorrect group ("9+1=": no completion has a 3 or a 7).
ZERO_PROMPTS = ["1+2=", "9+1=", "5+6=", "7+8=", "2+3=", "4+5=", "6+7=", "3+4="]


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_filtered_zero_variance_groups_leave_the_gradient_of_the_mixed_ones(
    model_dir, tmp_path, mode
):
    """zero_variance filter: the gradient is the formula's on the mixed groups alone (the batch
    holds all-correct or all-incorrect groups too, so it differs from keeping them)."""
    got = capture(
        model_dir,
        tmp_path,
        std_scaling="sample",
        std_eps=1e-4,
        aggregation=mode,
        zero_variance="filter",
        prompts=ZERO_PROMPTS,
    )
    want = reference_grads(model_dir, "sample", 1e-4, mode, ZERO_PROMPTS, keep_zero=False)
    assert_same(got["grads"], want)
    kept = reference_grads(model_dir, "sample", 1e-4, mode, ZERO_PROMPTS)
    assert max((got["grads"][k] - kept[k]).abs().max().item() for k in kept) > 1e-6


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_resampled_batches_hold_mixed_groups_only_and_log_the_others(model_dir, tmp_path, mode):
    """zero_variance resample (DAPO's dynamic sampling): the first batch holds an all-incorrect
    group, so a further batch of fresh prompts is generated; the step trains on the first four
    mixed groups in generation order, and its gradient is the formula's on exactly those groups.
    The rollout log keeps every generated group: the discarded ones marked out of the batch."""
    from grpo_ablation.training.rollout_log import read_rollouts

    got = capture(
        model_dir,
        tmp_path,
        std_scaling="sample",
        std_eps=1e-4,
        aggregation=mode,
        zero_variance="resample",
        prompts=ZERO_PROMPTS,
    )
    rows = read_rollouts(tmp_path / "rollouts")
    groups = rows.groupby("group_index").first()
    assert groups["generation_batch"].max() >= 1, "a further batch was generated"
    first_batch = groups.loc[groups["generation_batch"] == 0, "prompt_id"].tolist()
    assert first_batch == ["p0", "p1", "p2", "p3"]
    trained = groups[groups["in_batch"]]
    assert len(trained) == 4 and (trained["group_category"] == "mixed").all()
    assert trained["in_loss"].all()
    left = groups[~groups["in_batch"]]
    assert len(left) >= 1 and "all_incorrect" in set(left["group_category"])
    assert rows.loc[~rows["in_batch"], "advantage"].isna().all()
    prompts = dict(zip([f"p{i}" for i in range(8)], ZERO_PROMPTS, strict=True))
    want = group_grads(model_dir, [prompts[p] for p in trained["prompt_id"]], "sample", 1e-4, mode)
    assert_same(got["grads"], want)


def test_resampling_capped_at_one_batch_is_the_filter(model_dir, tmp_path):
    """With max_generation_batches 1 no further batch is drawn: the all-incorrect group fills its
    slot out of the loss, which is zero_variance filter's gradient."""
    common = dict(
        std_scaling="sample", std_eps=1e-4, aggregation="token_mean", prompts=ZERO_PROMPTS
    )
    got = capture(
        model_dir, tmp_path / "r", zero_variance="resample", max_generation_batches=1, **common
    )
    want = capture(model_dir, tmp_path / "f", zero_variance="filter", **common)
    assert_same(got["grads"], want["grads"])  # the filler group moves last: summation order


def test_prompts_of_different_lengths_are_scored_at_their_sampling_positions(model_dir, tmp_path):
    # Each reference sequence is scored alone (no padding); the trainer left-pads them together.
    got = capture(
        model_dir,
        tmp_path,
        prompts=MIXED_PROMPTS,
        std_scaling="sample",
        std_eps=1e-4,
        aggregation="token_mean",
    )
    assert_same(
        got["grads"], reference_grads(model_dir, "sample", 1e-4, "token_mean", MIXED_PROMPTS)
    )


TRL_EQUIVALENTS = [
    (
        {"std_scaling": "sample", "aggregation": "sequence_mean"},
        {"loss_type": "grpo", "scale_rewards": "group"},
    ),
    (
        {"std_scaling": "none", "aggregation": "constant"},
        {"loss_type": "dr_grpo", "scale_rewards": "none"},
    ),
    (
        {"std_scaling": "sample", "aggregation": "token_mean"},
        {"loss_type": "dapo", "scale_rewards": "group"},
    ),
    (
        {"std_scaling": "batch", "aggregation": "sequence_mean"},
        {"loss_type": "grpo", "scale_rewards": "batch"},
    ),
]


@pytest.mark.parametrize(
    ("ours", "trl"), TRL_EQUIVALENTS, ids=lambda d: "-".join(map(str, d.values()))
)
@pytest.mark.parametrize("accumulation", [1, 2])
def test_same_gradient_as_stock_trl_where_the_objective_is_the_same(
    model_dir, tmp_path, ours, trl, accumulation
):
    # TRL's std is always the sample std plus 1e-4
    mine = capture(
        model_dir, tmp_path / "ours", std_eps=1e-4, gradient_accumulation_steps=accumulation, **ours
    )
    stock = capture(
        model_dir, tmp_path / "trl", stock=trl, gradient_accumulation_steps=accumulation
    )
    assert_same(mine["grads"], stock["grads"])


@pytest.mark.parametrize(
    ("ours", "trl"), TRL_EQUIVALENTS[:3], ids=lambda d: "-".join(map(str, d.values()))
)
def test_update_epochs_match_stock_trl_step_by_step_with_the_ratio_clipped(
    model_dir, tmp_path, ours, trl
):
    """mu = 3 optimizer steps on one generation batch: from the second on, the policy has moved
    away from the one that sampled, the ratio leaves 1 and the PPO clip acts; every step's
    gradient is stock TRL's (a large learning rate makes the clip fire on this tiny batch)."""
    mine = capture(
        model_dir, tmp_path / "ours", std_eps=1e-4, num_iterations=3, learning_rate=0.05, **ours
    )
    stock = capture(model_dir, tmp_path / "trl", stock=trl, num_iterations=3, learning_rate=0.05)
    assert len(mine["steps"]) == len(stock["steps"]) == 3
    for a, b in zip(mine["steps"], stock["steps"], strict=True):
        assert_same(a, b, tol=1e-5)
    clipped = [
        r.get("ratio_clip/low", 0) + r.get("ratio_clip/high", 0) for r in mine["log"] if "loss" in r
    ]
    assert clipped[0] == 0 and max(clipped[1:]) > 0, clipped


def test_dr_grpo_divides_by_the_max_completion_length_not_the_longest_completion(
    model_dir, tmp_path
):
    """Dr. GRPO's constant B·L_max takes L_max from the config: with L_max three tokens above
    every completion of the batch (at most MAX_LEN tokens), the trainer's gradient is stock TRL's
    dr_grpo at that L_max, and MAX_LEN / L_max times the one at L_max = MAX_LEN. A divisor taken
    from the batch's longest completion passes wherever some completion reaches L_max, as in
    every other test here."""
    longer = MAX_LEN + 3
    ours = {"std_scaling": "none", "std_eps": 1e-4, "aggregation": "constant"}
    mine = capture(model_dir, tmp_path / "ours", max_completion_length=longer, **ours)
    stock = capture(
        model_dir,
        tmp_path / "trl",
        stock={"loss_type": "dr_grpo", "scale_rewards": "none"},
        max_completion_length=longer,
    )
    assert_same(mine["grads"], stock["grads"])
    at_max = reference_grads(model_dir, "none", 1e-4, "constant")
    assert_same(mine["grads"], {k: v * MAX_LEN / longer for k, v in at_max.items()})


# TRL's loss menu beyond the std and aggregation axes: each loss_type (and importance-sampling
# level, cap, dual clip) as the project's cell, at TRL's normaliser (docs/design.md maps them).
TRL_MENU = [
    (
        {"ratio": "cispo", "cispo_cap": 5.0, "aggregation": "token_mean"},
        {"loss_type": "cispo", "epsilon_high": 5.0},
    ),
    # TRL's cispo with epsilon_high unset: the cap is epsilon's 0.2
    ({"ratio": "cispo", "cispo_cap": 0.2, "aggregation": "token_mean"}, {"loss_type": "cispo"}),
    ({"ratio": "sapo", "aggregation": "sequence_mean"}, {"loss_type": "sapo"}),
    ({"ratio": "vespo", "aggregation": "token_mean"}, {"loss_type": "vespo"}),
    (
        {"ratio_level": "sequence", "aggregation": "sequence_mean"},
        {"loss_type": "grpo", "importance_sampling_level": "sequence"},
    ),
    (
        {"ratio_level": "sequence", "aggregation": "sequence_sum"},
        {"loss_type": "luspo", "importance_sampling_level": "sequence"},
    ),
    ({"aggregation": "sequence_sum"}, {"loss_type": "luspo"}),
    (
        {"clip_delta": 1.5, "clip_eps_high": 0.28, "aggregation": "token_mean"},
        {"loss_type": "dapo", "delta": 1.5, "epsilon_high": 0.28},
    ),
    # the sequence level (GSPO's ratio) under CISPO's and SAPO's terms, where ratios move
    (
        {
            "ratio": "cispo",
            "cispo_cap": 5.0,
            "ratio_level": "sequence",
            "aggregation": "token_mean",
        },
        {"loss_type": "cispo", "epsilon_high": 5.0, "importance_sampling_level": "sequence"},
    ),
    (
        {"ratio": "sapo", "ratio_level": "sequence", "aggregation": "sequence_mean"},
        {"loss_type": "sapo", "importance_sampling_level": "sequence"},
    ),
]
MENU_IDS = [t["loss_type"] + "-" + "-".join(f"{k}={v}" for k, v in o.items()) for o, t in TRL_MENU]


@pytest.mark.parametrize(("ours", "trl"), TRL_MENU, ids=MENU_IDS)
@pytest.mark.parametrize("accumulation", [1, 2])
def test_trls_loss_menu_gives_stock_trls_gradient(model_dir, tmp_path, ours, trl, accumulation):
    """Each TRL loss type the project expresses: the same gradient as stock TRL's, with the
    generation batch in one micro-batch or two."""
    mine = capture(
        model_dir,
        tmp_path / "ours",
        std_scaling="sample",
        std_eps=1e-4,
        gradient_accumulation_steps=accumulation,
        **ours,
    )
    stock = capture(
        model_dir,
        tmp_path / "trl",
        stock={"scale_rewards": "group", **trl},
        gradient_accumulation_steps=accumulation,
    )
    assert_same(mine["grads"], stock["grads"])


def test_trls_bnpo_is_token_mean_within_one_micro_batch(model_dir, tmp_path):
    """TRL's bnpo divides each micro-batch by its own tokens: token_mean's gradient with the
    generation batch in one micro-batch, not with two (the mapping table says so)."""
    ours = dict(std_scaling="sample", std_eps=1e-4, aggregation="token_mean")
    trl = {"loss_type": "bnpo", "scale_rewards": "group"}
    assert_same(
        capture(model_dir, tmp_path / "o", **ours)["grads"],
        capture(model_dir, tmp_path / "t", stock=trl)["grads"],
    )
    mine = capture(model_dir, tmp_path / "o2", gradient_accumulation_steps=2, **ours)["grads"]
    stock = capture(model_dir, tmp_path / "t2", stock=trl, gradient_accumulation_steps=2)["grads"]
    assert max((mine[k] - stock[k]).abs().max().item() for k in mine) > 1e-6


@pytest.mark.parametrize(("ours", "trl"), TRL_MENU, ids=MENU_IDS)
def test_trls_loss_menu_matches_stock_trl_step_by_step_where_ratios_move(
    model_dir, tmp_path, ours, trl
):
    """mu = 3 optimizer steps on one generation batch: from the second on the ratios leave 1,
    where the terms part; every step's gradient is stock TRL's."""
    mine = capture(
        model_dir,
        tmp_path / "ours",
        std_scaling="sample",
        std_eps=1e-4,
        num_iterations=3,
        learning_rate=0.05,
        **ours,
    )
    stock = capture(
        model_dir,
        tmp_path / "trl",
        stock={"scale_rewards": "group", **trl},
        num_iterations=3,
        learning_rate=0.05,
    )
    for a, b in zip(mine["steps"], stock["steps"], strict=True):
        assert_same(a, b, tol=1e-5)


IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


@pytest.mark.parametrize("is_mode", IS_MODES)
@pytest.mark.parametrize(
    ("ours", "trl"), TRL_EQUIVALENTS[:3], ids=lambda d: "-".join(map(str, d.values()))
)
def test_the_vllm_importance_sampling_correction_is_kept(model_dir, tmp_path, ours, trl, is_mode):
    """With sampling log-probabilities as vLLM returns them, TRL computes an importance-sampling
    ratio in every mode; the project loss applies it exactly as stock TRL's does."""
    mine = capture(model_dir, tmp_path / "ours", std_eps=1e-4, is_mode=is_mode, **ours)
    stock = capture(model_dir, tmp_path / "trl", stock=trl, is_mode=is_mode)
    assert_same(mine["grads"], stock["grads"])
    # ...and the correction is not a no-op on this batch (else the test would prove nothing).
    plain = capture(model_dir, tmp_path / "plain", std_eps=1e-4, **ours)
    worst = max((mine["grads"][k] - plain["grads"][k]).abs().max().item() for k in plain["grads"])
    assert worst > 1e-4 * max(v.abs().max().item() for v in plain["grads"].values())


# CISPO, SAPO and VESPO under a token and a sequence correction, but VESPO with a sequence-level
# one, which stock TRL refuses at construction, and the project too (tested below).
MENU_CORRECTIONS = [
    pytest.param(ours, trl, mode, id=f"{name}-{mode}")
    for (ours, trl), name in zip(TRL_MENU[:4], MENU_IDS[:4], strict=True)
    for mode in ("token_truncate", "sequence_mask")
    if not (trl["loss_type"] == "vespo" and mode.startswith("sequence"))
]


@pytest.mark.parametrize(("ours", "trl", "is_mode"), MENU_CORRECTIONS)
def test_the_menus_terms_take_the_vllm_correction_as_stock_trl_does(
    model_dir, tmp_path, ours, trl, is_mode
):
    """CISPO and SAPO multiply their loss by TRL's importance-sampling ratio; VESPO folds it into
    its sequence weight instead (TRL's vespo): each as stock TRL does."""
    mine = capture(
        model_dir, tmp_path / "ours", std_scaling="sample", std_eps=1e-4, is_mode=is_mode, **ours
    )
    stock = capture(
        model_dir, tmp_path / "trl", stock={"scale_rewards": "group", **trl}, is_mode=is_mode
    )
    assert_same(mine["grads"], stock["grads"])


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_accumulation_steps_do_not_change_the_gradient(model_dir, tmp_path, mode):
    one = capture(
        model_dir, tmp_path / "1", std_scaling="population", std_eps=1e-4, aggregation=mode
    )
    two = capture(
        model_dir,
        tmp_path / "2",
        std_scaling="population",
        std_eps=1e-4,
        aggregation=mode,
        gradient_accumulation_steps=2,
    )
    four = capture(
        model_dir,
        tmp_path / "4",
        std_scaling="population",
        std_eps=1e-4,
        aggregation=mode,
        gradient_accumulation_steps=4,
    )
    assert_same(two["grads"], one["grads"])
    assert_same(four["grads"], one["grads"])


@pytest.mark.parametrize("rows", [1, 3])
def test_scoring_in_smaller_passes_keeps_every_log_probability_on_the_cpu(
    model_dir, tmp_path, monkeypatch, rows
):
    """training.scoring_batch_size cuts every scoring pass into passes of ``rows`` completions:
    the loss's, and TRL's old-policy (three update epochs) and reference-policy (a KL term) ones.
    On the CPU each row's log-probabilities do not depend on the rows beside it, so the passes
    without a gradient and the first step's loss are the one-pass run's bit for bit. The
    gradient is not: each pass's graph adds its share to the weights' gradient, in another order
    than one pass's matmul (a relative 6e-7 here), so it is held to 1e-5 of the largest."""
    from trl import GRPOTrainer

    asked, scored = [], []
    score = GRPOTrainer._get_per_token_logps_and_entropies

    def spy(self, model, input_ids, *a, **kw):
        asked.append(kw.get("batch_size"))
        out = score(self, model, input_ids, *a, **kw)
        if not torch.is_grad_enabled():
            scored.append(out[0])
        return out

    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", spy)
    common = dict(std_eps=1e-4, num_iterations=3, learning_rate=0.05, beta=0.04)
    one = capture(model_dir, tmp_path / "one", **common)
    assert set(asked) == {None, 16}  # the loss's pass: every row; TRL's: the micro-batch
    one_scored = list(scored)
    asked.clear(), scored.clear()
    split = capture(model_dir, tmp_path / "split", scoring_batch_size=rows, **common)
    assert asked and set(asked) == {rows}
    assert len(one_scored) == len(scored) == 2  # old and reference policy, at generation
    assert all(torch.equal(a, b) for a, b in zip(one_scored, scored, strict=True))
    losses = [[r["loss"] for r in run["log"] if "loss" in r] for run in (one, split)]
    assert losses[0][0] == losses[1][0]
    assert len(one["steps"]) == len(split["steps"]) == 3
    for a, b in zip(one["steps"], split["steps"], strict=True):
        assert_same(b, a, tol=1e-5)


@pytest.mark.slow  # starts processes of its own
def test_two_processes_give_the_gradient_of_one(model_dir, tmp_path):
    objectives = [
        {"std_scaling": s, "std_eps": 1e-4, "aggregation": m, "gradient_accumulation_steps": ga}
        for s, m, ga in [
            ("sample", "sequence_mean", 1),
            ("population", "token_mean", 2),
            ("batch", "group_token_mean", 1),
            ("none", "constant", 2),
        ]
    ] + [
        # TRL's menu: a sequence weight and a sequence-level soft gate over the per-token sum
        {"std_scaling": "sample", "std_eps": 1e-4, "ratio": "vespo", "aggregation": "token_mean"},
        {
            "std_scaling": "sample",
            "std_eps": 1e-4,
            "ratio": "sapo",
            "ratio_level": "sequence",
            "aggregation": "sequence_sum",
            "gradient_accumulation_steps": 2,
        },
    ]
    from grpo_ablation.training.launch import accelerate_command, free_port

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "OMP_NUM_THREADS": "1"}
    script = [
        str(Path(__file__).parent / "conformance.py"),
        "--model",
        str(model_dir),
        "--out",
        str(tmp_path),
        "--objectives",
        json.dumps(objectives),
    ]
    # The launcher the train rule uses for two CPU processes.
    cmd = accelerate_command(script, 2, "ddp", "cpu", "float32", free_port())
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = torch.load(tmp_path / "grads.pt")
    assert saved["world"] == 2, "two processes really ran (one gloo group)"
    distributed = saved["grads"]
    for objective, grads in zip(objectives, distributed, strict=True):
        single = capture(model_dir, tmp_path / "single", **dict(objective))
        assert_same(grads, single["grads"])


@pytest.mark.parametrize("is_mode", ["sequence_truncate", "sequence_mask"])
def test_vespo_refuses_a_sequence_level_vllm_correction_as_stock_trl_does(is_mode):
    """Stock TRL's GRPOTrainer refuses loss_type vespo with vLLM's correction in a sequence mode
    at construction; the project passes TRL another loss type, so its own config refuses it."""
    from grpo_ablation.design.options import TrainingConfig

    with pytest.raises(ValueError, match="token_truncate or token_mask"):
        TrainingConfig(
            ratio="vespo", generation_backend="vllm", vllm_importance_sampling_mode=is_mode
        )
    TrainingConfig(
        ratio="vespo", generation_backend="vllm", vllm_importance_sampling_mode="token_mask"
    )
