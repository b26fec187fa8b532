"""Stock TRL's own loss at the clip-band edges, without training (issue #64).

TRL 1.16's ``GRPOTrainer._compute_loss`` and the project trainer's are driven directly: the
policy's per-token log-probabilities are a leaf tensor handed to both in place of the model's, and
the sampling policy's are placed so that every ratio lies just inside or just outside each edge of
the run, 1 − ε_low, 1 + ε_high, the dual clip δ and CISPO's cap, on tokens with A > 0 and A < 0, at
the token and at the sequence level (GSPO: each completion's mean log-ratio sits on the edge). The
gradients with respect to those log-probabilities must be the same, loss type by loss type.

Training with μ > 1 moves ratios far past the band in one step (from 1 to [0.32, 4.78] on the
tiny model), so no token lands between two candidate edges there; here each edge is tested where
it binds, with ε_low and ε_high apart from each other and from TRL's default 0.2, so an edge that
reads the other ε, or the default, or ignores the ratio's level, gives another gradient.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from conformance import build_model_dir, digit_reward

from grpo_ablation.objective.formulas import completion_coefficients

torch.set_num_threads(1)

EPS_LOW, EPS_HIGH = 0.15, 0.3  # apart from each other and from TRL's default 0.2
DELTA = 1.5  # the dual clip, above 1 + ε_high as TRL requires
CISPO_CAP = 1.4  # TRL's cispo caps its weight at epsilon_high
EDGE = 0.01  # how far inside or outside an edge a ratio sits
# Every edge from both sides, and the ratio 1.
RATIOS = sorted(
    {1.0}
    | {edge + s * EDGE for edge in (1 - EPS_LOW, 1 + EPS_HIGH, DELTA, CISPO_CAP) for s in (-1, 1)}
)
N = len(RATIOS)
G = 2
WIDTH = N + 1
# Above every completion's length: Dr. GRPO's divisor is this, not the longest completion.
L_MAX = WIDTH + 3

# TRL's loss types, each with the project's cell that states the same objective (docs/design.md).
LOSS_TYPES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "grpo": ({"aggregation": "sequence_mean"}, {}),
    "bnpo": ({"aggregation": "token_mean"}, {}),  # the generation batch is one micro-batch here
    "dr_grpo": ({"aggregation": "constant"}, {}),
    "dapo": ({"aggregation": "token_mean"}, {}),
    "luspo": ({"aggregation": "sequence_sum"}, {}),
    "cispo": (
        {"ratio": "cispo", "cispo_cap": CISPO_CAP, "aggregation": "token_mean"},
        {"epsilon_high": CISPO_CAP},
    ),
    "sapo": ({"ratio": "sapo", "aggregation": "sequence_mean"}, {}),
    "vespo": ({"ratio": "vespo", "aggregation": "token_mean"}, {}),
}
CLIPPED = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")
CASES = [
    pytest.param(loss_type, level, delta, id=f"{loss_type}-{level}" + ("-delta" if delta else ""))
    for loss_type in LOSS_TYPES
    for level in ("token", "sequence")
    for delta in ((None, DELTA) if loss_type in CLIPPED else (None,))
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_model_dir(tmp_path_factory.mktemp("model"))


def edge_batch(level: str) -> dict[str, torch.Tensor]:
    """2N completions of different lengths (N - i % 4 tokens), the first N with A > 0 and the
    rest with A < 0, each magnitude its own. ``token``: token t of completion i has ratio
    RATIOS[(i + t) % N], so the first tokens alone place every ratio under both signs.
    ``sequence``: completion i's mean log-ratio is log RATIOS[i % N], its tokens spread around it.
    Padding slots carry log-ratios of ±3, which count nowhere if the mask is honoured."""
    g = torch.Generator().manual_seed(0)
    rows = 2 * N
    lengths = torch.tensor([N - i % 4 for i in range(rows)])
    mask = (torch.arange(WIDTH)[None, :] < lengths[:, None]).int()
    logps = -0.1 - 2 * torch.rand(rows, WIDTH, generator=g, dtype=torch.float64)
    log_r = torch.log(torch.tensor(RATIOS, dtype=torch.float64))
    index = torch.arange(rows)[:, None] + torch.arange(WIDTH)[None, :]
    if level == "token":
        lr = log_r[index % N]
    else:
        spread = 0.05 * torch.randn(rows, WIDTH, generator=g, dtype=torch.float64) * mask
        spread = spread - (spread.sum(-1, keepdim=True) / lengths[:, None]) * mask
        lr = log_r[torch.arange(rows) % N][:, None] + spread
    lr = torch.where(mask.bool(), lr, 3.0 * (-1.0) ** index)
    magnitude = 0.4 + 0.1 * (torch.arange(rows) % N).double()
    adv = torch.where(torch.arange(rows) < N, magnitude, -magnitude)
    return {"logps": logps, "old": logps - lr, "adv": adv, "mask": mask}


def trainer(model_dir: Path, tmp_path: Path, stock: bool, loss_type: str, level: str, delta):
    """Stock GRPOTrainer with ``loss_type`` or the project's with the same objective's cell; both
    at ε_low = 0.15 and ε_high = 0.3 (TRL's epsilon and epsilon_high) and L_max above every
    completion."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ablation.design.options import TrainingConfig
    from grpo_ablation.training.trainer import AblationGRPOTrainer

    ours, theirs = LOSS_TYPES[loss_type]
    fields = {"loss_type": "grpo", "epsilon": EPS_LOW, "epsilon_high": EPS_HIGH}
    if stock:
        fields.update(loss_type=loss_type, importance_sampling_level=level, delta=delta, **theirs)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=G,
        num_generations=G,
        max_completion_length=L_MAX,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        bf16=False,
        disable_dropout=True,
        **fields,
    )
    common = dict(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "1+2="}] * G),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        reward_funcs=digit_reward,
    )
    if stock:
        return GRPOTrainer(**common)
    options = TrainingConfig(
        group_size=G,
        max_completion_length=L_MAX,
        clip_eps_low=EPS_LOW,
        clip_eps_high=EPS_HIGH,
        clip_delta=delta or 0.0,
        ratio_level=level,
        **ours,
    )
    return AblationGRPOTrainer(**common, run_dir=tmp_path, options=options)


def loss_gradient(t: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """d loss / d log π of the trainer's ``_compute_loss`` on the batch, its model's
    log-probabilities replaced by the batch's (entropies 0), one micro-batch per generation batch
    as the train loop sets it. The project trainer's coefficients are the ones its generation step
    computes from the lengths."""
    logps = batch["logps"].clone().requires_grad_(True)
    t._get_per_token_logps_and_entropies = lambda *a, **k: (logps, torch.zeros_like(logps), None)
    t.current_gradient_accumulation_steps = 1
    mask = batch["mask"]
    rows = mask.shape[0]
    inputs = {
        "prompt_ids": torch.zeros(rows, 1, dtype=torch.long),
        "prompt_mask": torch.ones(rows, 1, dtype=torch.long),
        "completion_ids": torch.zeros(rows, WIDTH, dtype=torch.long),
        "completion_mask": mask,
        "advantages": batch["adv"],
        "old_per_token_logps": batch["old"],
        "num_items_in_batch": mask.sum(),
    }
    if hasattr(t, "options"):
        coef = completion_coefficients(
            mask.sum(-1), t.options.aggregation, G, t.max_completion_length
        )
        inputs["loss_coef"] = coef.to(torch.float32)
    t.model.train()
    t._compute_loss(t.model, inputs).backward()
    return logps.grad


@pytest.mark.parametrize(("loss_type", "level", "delta"), CASES)
def test_trls_loss_at_the_clip_edges_is_the_projects(model_dir, tmp_path, loss_type, level, delta):
    """Each TRL loss type, at each importance-sampling level, with and without the dual clip:
    the gradient of every token, ratios just either side of every edge, is stock TRL's."""
    batch = edge_batch(level)
    args = (loss_type, level, delta)
    stock = loss_gradient(trainer(model_dir, tmp_path / "trl", True, *args), batch)
    ours = loss_gradient(trainer(model_dir, tmp_path / "ours", False, *args), batch)
    mask = batch["mask"].bool()
    assert (stock[~mask] == 0).all() and stock[mask].abs().max() > 0
    torch.testing.assert_close(ours, stock, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("delta", [None, DELTA], ids=["no-delta", "delta"])
def test_each_edge_binds_exactly_past_it(model_dir, tmp_path, delta):
    """The batch tests the edges where they bind (TRL's dapo, token level): a token's gradient is
    0 exactly where its ratio is past 1 + ε_high with A > 0, past 1 − ε_low with A < 0, or (dual
    clip) past δ with A < 0; elsewhere it is −A·r over the token count. So the comparison above
    fails for a term that reads one ε for the other, or a default, or drops δ."""
    batch = edge_batch("token")
    grad = loss_gradient(trainer(model_dir, tmp_path, True, "dapo", "token", delta), batch)
    mask = batch["mask"].bool()
    r = (batch["logps"] - batch["old"]).exp()
    adv = batch["adv"][:, None].expand_as(r)
    clipped = ((adv > 0) & (r > 1 + EPS_HIGH)) | ((adv < 0) & (r < 1 - EPS_LOW))
    if delta:
        clipped |= (adv < 0) & (r > delta)
    want = torch.where(clipped, 0.0, -adv * r / mask.sum()) * mask
    torch.testing.assert_close(grad, want, rtol=1e-9, atol=1e-12)
    # each edge binds on some token and is inside on another
    for edge in (1 + EPS_HIGH, 1 - EPS_LOW, *((delta,) if delta else ())):
        near = mask & ((r - edge).abs() < 2 * EDGE)
        assert near.any() and clipped[near].any() and (~clipped[near]).any(), edge


# VESPO's weight where each of TRL's clamps decides it: (token log-ratios, mask, vLLM IS ratio, A).
VESPO_ROWS = [
    ((25.0, -24.5, 0.3), (1, 1, 0), (1.0, 1.0, 1.0), 1.0),  # ±20 cancel: φ(1) = 1
    ((-20.0, -5.0, 0.0), (1, 1, 1), (math.exp(25.0), 1.0, 1.0), -1.0),  # IS log 25 -> 20
    ((18.52, 0.0, 0.0), (1, 0, 0), (1e-12, 1.0, 1.0), 0.5),  # IS log -27.6 -> log 1e-8
    ((0.2, math.nan, 0.1), (1, 1, 1), (1.0, 1.0, 1.0), 1.0),  # NaN: weight 0
    ((0.3, 0.2, 0.0), (1, 1, 1), (1.1, 1.0, 1.0), 0.0),  # A = 0 takes A >= 0's (k, λ)
    ((-0.4, 0.1, 5.0), (1, 1, 0), (0.9, 1.2, 1.0), -0.7),  # the masked 5 counts nowhere
]


def test_vespos_weight_is_trls_at_the_clamps():
    """TRL's ``get_gamma_weights`` against ``vespo_weight`` and the vespo term, with and without
    the vLLM importance-sampling ratio, on VESPO_ROWS; without the IS ratio the second and third
    rows' sums (-25, 18.52) meet the clamp of the whole log-ratio instead."""
    from trl import GRPOTrainer

    from grpo_ablation.objective.conventions import policy_ratio, ratio_options, vespo_weight

    lr, mask, is_ratio, adv = (
        torch.tensor(column, dtype=torch.float64) for column in zip(*VESPO_ROWS, strict=True)
    )
    adv = adv[:, None]
    logps = -0.5 - torch.arange(lr.numel(), dtype=torch.float64).reshape(lr.shape) / 10
    term = policy_ratio("vespo").loss
    for ratio in (None, is_ratio):
        theirs = GRPOTrainer.get_gamma_weights(adv, lr, mask, ratio)
        assert theirs[0].item() == pytest.approx(1.0) and theirs[3].item() == 0.0
        torch.testing.assert_close(vespo_weight(lr, mask, adv, ratio), theirs, rtol=1e-12, atol=0)
        loss = term(logps, logps - lr, adv, mask, ratio_options(ratio="vespo"), ratio)
        torch.testing.assert_close(loss, -theirs * adv * logps, rtol=1e-12, atol=0)
