"""The reading of the push (``analysis/push_tables.py``'s tables): what the formulas predict
against what the push shows."""

from __future__ import annotations

import math

import pandas as pd

from grpo_ablation.analysis.push_tables import IDENTITIES


def push_reading(table: pd.DataFrame, cosine: pd.DataFrame) -> str:
    """One paragraph: the identities, then the Dr. GRPO length prediction, per policy step."""
    pairs = cosine.set_index(["a", "b"])
    lowest = min(
        float(pairs.loc[pair, "cosine"].min()) for pair in IDENTITIES if pair in pairs.index
    )
    parts = []
    for step, t in table.groupby("step"):
        r = t.set_index("choice").loc["sample/constant"]
        m, lo, hi = (
            r["incorrect_length_diff"],
            r["incorrect_length_diff_low"],
            r["incorrect_length_diff_high"],
        )
        verdict = (
            "as predicted" if hi < 0 else ("against the prediction" if lo > 0 else "unresolved")
        )
        interval = (
            f"[{lo:+.3f}, {hi:+.3f}]"
            if math.isfinite(lo) and math.isfinite(hi)
            else "(no interval: fewer than two replicates, or all gave this difference)"
        )
        parts.append(
            f"step {step}: constant − sequence_mean {m:+.3f} {interval} tokens per unit step "
            f"({verdict})"
        )
    return (
        "**The push of each objective on the same samples** (``tables/push.csv``; no training "
        "noise: every choice's update direction is computed on one set of samples and its "
        "first-order effect on quantities estimated on other prompts). The directions the formulas "
        f"call identical (population = sample, none = batch, token_mean = constant) have cosine "
        f"≥ 1 − {1 - lowest:.1e}. Dr. GRPO's length mechanism (incorrect completions shortened more under "
        "the constant divisor than under 1/L), paired over replicates, 95% t interval: "
        + "; ".join(parts)
        + "."
    )
