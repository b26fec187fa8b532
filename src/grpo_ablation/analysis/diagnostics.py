"""Per-step and per-run diagnostics of one training run, computed from its rollout log.

Everything comes from ``rollouts/rank*.jsonl.gz`` (one row per completion) except the ratio-clip
fractions, which only the loss sees and which are read from ``metrics.jsonl``. TRL's own summaries
(``frac_reward_zero_std``, ``completions/clipped_ratio``) are not used.

Two estimators are worth naming:

* **predicted mixed-group fraction** (``mixed_predicted``): for each prompt of a step, p̂ = its
  correct completions / its scored completions *at that step*; the prediction is the mean over
  the step's scored prompts of ``1 − p̂^G − (1 − p̂)^G`` (plug-in, ``objective.mixed_group_probability``).
  The plug-in is biased low for a finite G (p̂ = 0 or 1 predicts 0), so observed above predicted
  is expected even under independent draws; ``mixed_predicted_pooled`` uses one p̂ per step (the
  step's accuracy) and shows how much prompt heterogeneity alone removes mixed groups. Both read
  the groups they predict, so neither can fail as a calibration: the calibration figure and table
  predict from probabilities measured without the groups (``analysis/calibration.py``).
* **token-weight share** (``weight_share/<category>``): the share of the step's total per-token
  loss weight (``objective.completion_coefficients`` with the run's aggregation, L_i the logged
  length, 0 for a truncated completion when truncated completions are masked) held by groups of
  each category. Homogeneous groups have zero advantage, so their share multiplies only the KL
  term (β > 0) and entropy-like side effects: no comparative information, still a gradient.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.layout import METRICS_LOG, OBJECTIVE, ROLLOUTS
from grpo_ablation.objective.conventions import GROUP_CATEGORIES
from grpo_ablation.objective.formulas import (
    clip_factor,
    completion_coefficients,
    mixed_group_probability,
)
from grpo_ablation.settings import neutral_of

HOMOGENEOUS = ("all_correct", "all_incorrect")


def group_frame(rollouts: pd.DataFrame) -> pd.DataFrame:
    """One row per (step, group): its category, size, successes and whether its rewards are equal.

    The category is recomputed from the rows (a missing reward makes ``failed_scoring``), so a
    mislabelled ``group_category`` in the log cannot hide here; ``logged_category`` keeps the label.
    """
    r = rollouts.copy()
    r["scored"] = r["reward"].notna()
    r["ok"] = r["correct"].fillna(False).astype(bool) & r["scored"]
    g = r.groupby(["step", "group_index"], sort=True)
    out = g.agg(
        prompt_id=("prompt_id", "first"),
        size=("reward", "size"),
        n_scored=("scored", "sum"),
        n_correct=("ok", "sum"),
        reward_min=("reward", "min"),
        reward_max=("reward", "max"),
        tokens=("length", "sum"),
        logged_category=("group_category", "first"),
    ).reset_index()
    failed = out["n_scored"] < out["size"]
    out["category"] = np.select(
        [failed, out["n_correct"] == out["size"], out["n_correct"] == 0],
        ["failed_scoring", "all_correct", "all_incorrect"],
        default="mixed",
    )
    # Zero-variance as the objective defines it (objective.formulas.zero_variance_groups, the
    # trainer's groups/zero_std_fraction): the scored rewards all equal, or fewer than two scored.
    out["zero_std"] = (out["n_scored"] < 2) | (out["reward_min"] == out["reward_max"])
    return out


def _token_weight_shares(
    step_rows: pd.DataFrame, categories: dict[int, str], objective: dict[str, Any]
) -> dict[str, float]:
    rows = step_rows.sort_values(["group_index", "completion_index"])
    if "in_batch" in rows:  # resample: only the groups the step trained on carry weight
        rows = rows[rows["in_batch"].fillna(True).astype(bool)]
    lengths = rows["length"].to_numpy(dtype=float)
    if objective.get("mask_truncated_completions"):
        lengths = np.where(rows["truncated"].to_numpy(dtype=bool), 0.0, lengths)
    G = int(objective["group_size"])
    if len(lengths) % G:  # a partial batch (should not happen): weights are not defined
        return {cat: math.nan for cat in GROUP_CATEGORIES}
    # filter / resample: groups out of the loss leave its normaliser (as in the trainer)
    keep = (
        torch.tensor(rows["in_loss"].fillna(True).astype(bool).to_numpy())
        if "in_loss" in rows
        else None
    )
    c = completion_coefficients(
        torch.tensor(lengths),
        objective["aggregation"],
        G,
        int(objective["max_completion_length"]),
        keep,
    ).numpy()
    per_completion = c * lengths  # every token of completion i weighs c_i
    total = per_completion.sum()
    cats = rows["group_index"].map(categories).to_numpy()
    return {
        cat: float(per_completion[cats == cat].sum() / total) if total > 0 else math.nan
        for cat in GROUP_CATEGORIES
    }


def _align_metrics(steps: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """Attach optimizer-step metrics to generation steps.

    Rollout ``step`` is the 0-based optimizer step at which the batch was generated; a metrics row
    with (1-based) ``step`` m was computed on the latest batch generated at or before m − 1. With
    ``num_iterations > 1`` several optimizer steps share one batch: their ratio-clip fractions are
    averaged onto it.
    """
    cols = [
        c
        for c in (
            "ratio_clip/low",
            "ratio_clip/high",
            "loss",
            "grad_norm",
            "grad_clipped",
            "grad_clip_factor",
            "kl",
            "entropy",
        )
        if c in metrics.columns
    ]
    if metrics.empty or not cols:
        return steps.assign(**{c: math.nan for c in ("ratio_clip/low", "ratio_clip/high")})
    m = metrics[["step", *cols]].copy()
    m["generated_at"] = m["step"] - 1
    gen = pd.DataFrame({"step": sorted(steps["step"].unique())})
    m = pd.merge_asof(
        m.sort_values("generated_at"),
        gen.rename(columns={"step": "gen_step"}),
        left_on="generated_at",
        right_on="gen_step",
        direction="backward",
    )
    per_gen = m.groupby("gen_step")[cols].mean(numeric_only=True).reset_index()
    out = steps.merge(per_gen.rename(columns={"gen_step": "step"}), on="step", how="left")
    for c in ("ratio_clip/low", "ratio_clip/high"):
        if c not in out:
            out[c] = math.nan
    return out


def step_diagnostics(
    rollouts: pd.DataFrame, metrics: pd.DataFrame, objective: dict[str, Any]
) -> pd.DataFrame:
    """One row per generation step (see the module docstring for the estimators)."""
    groups = group_frame(rollouts)
    G = int(objective["group_size"])
    rows = []
    for step, gs in groups.groupby("step", sort=True):
        n = len(gs)
        row: dict[str, Any] = {"step": int(step), "groups": n}
        for cat in GROUP_CATEGORIES:
            k = int((gs["category"] == cat).sum())
            row[f"count/{cat}"] = k
            row[f"fraction/{cat}"] = k / n
        row["zero_std_fraction"] = float(gs["zero_std"].mean())
        scored = gs[gs["category"] != "failed_scoring"]
        # Per prompt (a prompt drawn twice in one step pools its completions).
        per_prompt = scored.groupby("prompt_id")[["n_correct", "n_scored"]].sum()
        p_hat = per_prompt["n_correct"] / per_prompt["n_scored"]
        row["mixed_observed"] = (
            float((scored["category"] == "mixed").mean()) if len(scored) else math.nan
        )
        row["mixed_predicted"] = (
            float(np.mean([mixed_group_probability(p, G) for p in p_hat]))
            if len(p_hat)
            else math.nan
        )
        pooled = scored["n_correct"].sum() / max(1, scored["n_scored"].sum())
        row["mixed_predicted_pooled"] = (
            mixed_group_probability(pooled, G) if len(scored) else math.nan
        )
        row["p_hat_step"] = float(pooled) if len(scored) else math.nan
        # Groups by number correct (scored groups): what predicts P(mixed) at another G.
        by_k = np.bincount(scored["n_correct"].astype(int), minlength=G + 1)
        for k in range(G + 1):
            row[f"groups_correct/{k}"] = int(by_k[k])

        step_rows = rollouts[rollouts["step"] == step]
        ok = step_rows["correct"].fillna(False).astype(bool) & step_rows["reward"].notna()
        bad = ~step_rows["correct"].fillna(True).astype(bool) & step_rows["reward"].notna()
        row["truncation_rate"] = float(step_rows["truncated"].astype(bool).mean())
        row["length/correct"] = float(step_rows.loc[ok, "length"].mean()) if ok.any() else math.nan
        row["length/incorrect"] = (
            float(step_rows.loc[bad, "length"].mean()) if bad.any() else math.nan
        )
        row["length/all"] = float(step_rows["length"].mean())
        row["generated_tokens"] = int(step_rows["length"].sum())
        shares = _token_weight_shares(
            step_rows, dict(zip(gs["group_index"], gs["category"], strict=True)), objective
        )
        for cat, share in shares.items():
            row[f"weight_share/{cat}"] = share
        row["weight_share/homogeneous"] = sum(shares[c] for c in HOMOGENEOUS)
        # What multiplies the KL term on tokens that carry no comparative information.
        row["kl_weight/homogeneous"] = float(objective["beta"]) * row["weight_share/homogeneous"]
        rows.append(row)
    steps = pd.DataFrame(rows)
    if steps.empty:
        return steps
    # A record from before the option ran at its neutral value (the Trainer's default).
    clip = objective.get("max_grad_norm", neutral_of(TrainingConfig, "max_grad_norm"))
    return _align_metrics(steps, gradient_clipping(metrics, clip))


def gradient_clipping(metrics: pd.DataFrame, max_grad_norm: float) -> pd.DataFrame:
    """Each optimizer step's clip factor (``objective.clip_factor`` of its logged, pre-clipping
    ``grad_norm``) and whether clipping bound (factor below 1); NaN where no norm was logged."""
    if metrics.empty or "grad_norm" not in metrics:
        return metrics
    norms = metrics["grad_norm"].astype(float)
    factor = norms.map(lambda n: clip_factor(n, max_grad_norm))
    return metrics.assign(grad_clip_factor=factor, grad_clipped=(factor < 1).where(factor.notna()))


def run_summary(steps: pd.DataFrame) -> dict[str, Any]:
    """Whole-run totals: counts summed over steps, fractions of all groups, rates averaged per step."""
    if steps.empty:
        return {"steps": 0}
    total = int(steps["groups"].sum())
    out: dict[str, Any] = {"steps": len(steps), "groups": total}
    for cat in GROUP_CATEGORIES:
        k = int(steps[f"count/{cat}"].sum())
        out[f"count/{cat}"] = k
        out[f"fraction/{cat}"] = k / total
    zero_std_groups = float((steps["zero_std_fraction"] * steps["groups"]).sum())
    out["zero_std_fraction"] = zero_std_groups / total
    for col in (
        "mixed_observed",
        "mixed_predicted",
        "mixed_predicted_pooled",
        "truncation_rate",
        "ratio_clip/low",
        "ratio_clip/high",
        "grad_clipped",
        "grad_clip_factor",
        "length/correct",
        "length/incorrect",
        "length/all",
        "weight_share/homogeneous",
        "kl_weight/homogeneous",
    ):
        vals = steps[col].dropna() if col in steps else pd.Series(dtype=float)
        out[col] = float(vals.mean()) if len(vals) else None
    # Where training ends up, not its average: lengths over the last quarter of the steps.
    late = steps[steps["step"] > 0.75 * steps["step"].max()]
    for col in ("length/correct", "length/incorrect"):
        vals = late[col].dropna() if col in late else pd.Series(dtype=float)
        out[f"{col}_late"] = float(vals.mean()) if len(vals) else None
    out["generated_tokens"] = int(steps["generated_tokens"].sum())
    prefix = "groups_correct/"
    out["groups_by_correct"] = {
        c[len(prefix) :]: int(steps[c].sum()) for c in steps.columns if c.startswith(prefix)
    }
    return out


def read_metrics(path: Path) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame(columns=["step"])
    return pd.DataFrame([json.loads(x) for x in path.read_text().splitlines() if x.strip()])


def run_diagnostics(run: Path) -> pd.DataFrame:
    """``step_diagnostics`` of the run directory ``run``."""
    from grpo_ablation.training.rollout_log import read_rollouts

    objective = json.loads((run / OBJECTIVE).read_text())
    return step_diagnostics(
        read_rollouts(run / ROLLOUTS), read_metrics(run / METRICS_LOG), objective
    )
