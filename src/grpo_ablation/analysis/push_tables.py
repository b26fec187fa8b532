"""The tables of the push of each objective (``training/push.py``'s push.json).

What the formulas predict, before any number: population and sample std scaling give one direction
(their advantages differ by the constant √(G/(G−1)) up to ε), so do `none` and `batch` (one std
for the whole batch), and so do `token_mean` and `constant` (one coefficient for every completion
of a batch). Those cosines are 1 up to ε: a value below 0.999 refutes the implementation, not the
theory. Dr. GRPO's length mechanism predicts that `sequence_mean` (weights 1/L) lowers the length
of incorrect completions less per unit step than `constant`: on the paired difference
``sample/constant − sample/sequence_mean`` of the incorrect-length push, a negative value (in the
worked example of the calculations sheet, "what the push must show", the long wrong completion
holds 50% of the update's token weight under 1/L and 80% under the constant divisor).
"""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd

from grpo_ablation.analysis.stats import sample_sd, t_interval
from grpo_ablation.design.hypotheses import PUSH_REFERENCE

REFERENCE = PUSH_REFERENCE
# Pairs the formulas say point the same way (cosine 1 up to the std's ε).
IDENTITIES = [
    (f"population/{a}", f"sample/{a}") for a in ("sequence_mean", "token_mean", "constant")
] + [
    ("none/sequence_mean", "batch/sequence_mean"),
    ("sample/token_mean", "sample/constant"),
    # every token weighed alike within a batch: 1/(B L_max) against 1/B
    ("sample/sequence_sum", "sample/constant"),
]
LABELS = {
    "accuracy": "expected accuracy",
    "incorrect_length": "length of incorrect completions (tokens)",
    "mixed": "P(mixed group)",
}


def push_tables(record: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per step and choice: the push on each quantity and its paired difference to the
    reference choice, t intervals over replicates; per step and pair of choices: the cosine)."""
    rows, cos_rows = [], []
    for policy in record["policies"]:
        every = policy["replicates"]
        for c in record["choices"]:
            # replicates past push.full_replicates measure only the hypotheses' choices
            reps = [r for r in every if c in r["choices"] and REFERENCE in r["choices"]]
            row: dict[str, Any] = {"step": policy["step"], "choice": c, "replicates": len(reps)}
            for q in record["quantities"]:
                values = [r["choices"][c]["push"][q] for r in reps]
                ref = [r["choices"][REFERENCE]["push"][q] for r in reps]
                iv = t_interval(values)
                dv = t_interval([v - w for v, w in zip(values, ref, strict=True)])
                row.update({q: iv.mean, f"{q}_low": iv.low, f"{q}_high": iv.high})
                row.update(
                    {
                        f"{q}_diff": dv.mean,
                        f"{q}_diff_low": dv.low,
                        f"{q}_diff_high": dv.high,
                        # the per-replicate SD a push hypothesis is planned from (a pilot's)
                        f"{q}_diff_sd": sample_sd(
                            [v - w for v, w in zip(values, ref, strict=True)]
                        ),
                    }
                )
            share = t_interval([r["choices"][c]["long_incorrect_share"] for r in reps])
            row.update(
                long_incorrect_share=share.mean,
                norm=sum(r["choices"][c]["norm"] for r in reps) / len(reps),
            )
            rows.append(row)
        for a, b in itertools.combinations(record["choices"], 2):
            iv = t_interval([r["cosine"][f"{a}|{b}"] for r in every if f"{a}|{b}" in r["cosine"]])
            cos_rows.append(
                {
                    "step": policy["step"],
                    "a": a,
                    "b": b,
                    "cosine": iv.mean,
                    "low": iv.low,
                    "high": iv.high,
                }
            )
    return pd.DataFrame(rows), pd.DataFrame(cos_rows)
