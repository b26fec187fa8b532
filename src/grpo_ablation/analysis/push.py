"""Tables, figure and reading of the push of each objective (``training/push.py``'s push.json).

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
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_ablation.analysis.stats import sample_sd, t_interval
from grpo_ablation.design.hypotheses import PUSH_REFERENCE
from grpo_ablation.layout import PUSH_FIGURE, PUSH_TABLE

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


def push_figure(table: pd.DataFrame):
    """One panel per quantity: each choice's push per unit step minus the reference choice's, paired
    over replicates, with its 95% interval; one marker per policy step."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    quantities = list(LABELS)
    fig, axes = plt.subplots(1, len(quantities), figsize=(4.2 * len(quantities), 4.6), sharey=True)
    choices = list(dict.fromkeys(table["choice"]))
    steps = sorted(table["step"].unique())
    for ax, q in zip(axes, quantities, strict=True):
        for k, step in enumerate(steps):
            t = table[table["step"] == step].set_index("choice").loc[choices]
            y = [i + (k - (len(steps) - 1) / 2) * 0.25 for i in range(len(choices))]
            d = f"{q}_diff"
            ax.errorbar(
                t[d],
                y,
                xerr=[t[d] - t[f"{d}_low"], t[f"{d}_high"] - t[d]],
                fmt="o",
                markersize=3,
                capsize=2,
                label="base policy" if step == 0 else f"checkpoint {step}",
            )
        ax.axvline(0, color="grey", linewidth=0.8)
        # Few ticks: a real model's pushes run to thousands, whose labels would collide.
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.set_title(LABELS[q], fontsize=9)
        ax.set_xlabel(f"per unit step, minus {REFERENCE}", fontsize=8)
    axes[0].set_yticks(range(len(choices)), choices, fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(
        f"The push: each choice's first-order change per unit step minus {REFERENCE}'s, 95% "
        "intervals over replicates",
        fontsize=10,
    )
    # below the panels, where it covers no error bar
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(steps), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    return fig


def write_pilot(push_json: Path, table: Path) -> Path:
    """The pilot's table (``push_tables`` of push_pilot.json): its ``*_diff_sd`` columns are the
    per-replicate SDs of each choice's paired difference, what ``power.sd`` takes for a push
    metric."""
    table.parent.mkdir(parents=True, exist_ok=True)
    push_tables(json.loads(Path(push_json).read_text()))[0].to_csv(table, index=False)
    return table


def write_push(push_json: Path, tables: Path, figures: Path) -> list[Path]:
    """tables/push.csv, push_cosine.csv, push.md, push.html and figures/push.{png,pdf}."""
    from grpo_ablation.analysis.render import html_view, to_markdown
    from grpo_ablation.analysis.saving import save

    record = json.loads(Path(push_json).read_text())
    table, cosine = push_tables(record)
    tables.mkdir(parents=True, exist_ok=True)
    table.to_csv(tables / PUSH_TABLE["push"], index=False)
    cosine.to_csv(tables / PUSH_TABLE["push_cosine"], index=False)
    shown = ["step", "choice", *(q for q in LABELS), "long_incorrect_share"]
    text = push_reading(table, cosine)
    (tables / PUSH_TABLE["push_md"]).write_text(text + "\n\n" + to_markdown(table[shown]) + "\n")
    view = html_view(text, table[shown], tables / PUSH_TABLE["push"])
    (tables / PUSH_TABLE["push_html"]).write_text(view)
    return [
        tables / PUSH_TABLE["push"],
        tables / PUSH_TABLE["push_cosine"],
        tables / PUSH_TABLE["push_md"],
        tables / PUSH_TABLE["push_html"],
        *save(push_figure(table), figures / PUSH_FIGURE),
    ]
