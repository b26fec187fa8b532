"""The worked numbers, computed by the library: ``grpo-ablation calculations OUT_DIR``.

Writes the sheet (Markdown, CSV and the HTML view the report shows) so users see the conventions
side by side, and the worked example's per-token weights under every aggregation, which the
token-weight figure draws.
"""

from __future__ import annotations

import csv
from pathlib import Path

import torch

from grpo_ablation.layout import (
    CALCULATIONS_SHEET,
    CALCULATIONS_TABLE,
    CALCULATIONS_VIEW,
    TOKEN_WEIGHTS_TABLE,
)
from grpo_ablation.objective.conventions import AGGREGATIONS, RATIOS, SCALINGS
from grpo_ablation.objective.formulas import (
    aggregate_loss,
    completion_coefficients,
    gradient_weight,
    group_advantages,
    mixed_group_probability,
    resample_expectation,
    std_ratio_population_to_sample,
    token_weights,
)

Row = dict[str, str | float]


def _fmt(values: list[float]) -> str:
    return "(" + ", ".join(f"{v:.4f}" for v in values) + ")"


def advantage_rows() -> list[Row]:
    rows: list[Row] = []
    groups = {"(1,0,0,0)": [1.0, 0.0, 0.0, 0.0], "(0.51,0.50,0.50,0.50)": [0.51, 0.5, 0.5, 0.5]}
    for name, values in groups.items():
        r = torch.tensor(values, dtype=torch.float64)
        for scaling in SCALINGS:
            for eps in (0.0, 1e-4):
                adv = group_advantages(r, 4, scaling, eps).tolist()
                rows.append(
                    {
                        "section": "advantages",
                        "case": f"rewards {name}",
                        "convention": f"{scaling}, eps={eps:g}",
                        "value": _fmt(adv),
                        "first": adv[0],
                    }
                )
    return rows


def aggregation_rows() -> list[Row]:
    mask = torch.zeros(2, 8, dtype=torch.float64)
    mask[0, :2], mask[1, :] = 1, 1
    x = torch.zeros(2, 8, dtype=torch.float64)
    x[0], x[1] = 1.0, -1.0
    rows: list[Row] = []
    for mode in AGGREGATIONS:
        w = token_weights(mask, mode, 2, 8)
        agg = aggregate_loss(x, mask, mode, 2, 8).item()
        rows.append(
            {
                "section": "aggregation",
                "case": "lengths 2 and 8, contributions +1 and -1 (one group, L_max=8)",
                "convention": mode,
                "value": f"weights {w[0, 0].item():.4f} / {w[1, 0].item():.4f}; aggregate {agg:.4f}",
                "first": agg,
            }
        )
    return rows


def mixed_rows() -> list[Row]:
    return [
        {
            "section": "mixed groups",
            "case": f"p=0.2, G={g}",
            "convention": "1 - p^G - (1-p)^G",
            "value": f"{mixed_group_probability(0.2, g):.6f}",
            "first": mixed_group_probability(0.2, g),
        }
        for g in (2, 4, 8, 16)
    ]


def expectation_rows() -> list[Row]:
    """What the KL and update-epochs stages test, from the formulas: the constant advantage
    scale between population and sample std (Adam absorbs it with beta = 0 and no gradient
    clipping), and the ratio at
    mu = 1 (the sampling policy is the updated one: exactly 1, so clipping never fires)."""
    rows: list[Row] = [
        {
            "section": "expectations of the stages",
            "case": f"population / sample advantage at eps=0, G={g}",
            "convention": "sqrt(G/(G-1)), the same for every group",
            "value": f"{std_ratio_population_to_sample(g):.4f}",
            "first": std_ratio_population_to_sample(g),
        }
        for g in (4, 8, 16)
    ]
    logps = torch.randn(64, 12, generator=torch.Generator().manual_seed(0))
    ratio = torch.exp(logps - logps.detach())  # mu = 1: old log-probs are the detached current
    clipped = ((ratio < 0.8) | (ratio > 1.2)).float().mean().item()
    rows.append(
        {
            "section": "expectations of the stages",
            "case": "mu=1: max abs(ratio - 1) over 768 tokens; fraction clipped at eps=0.2",
            "convention": "exp(logp - stop_gradient(logp))",
            "value": f"{(ratio - 1).abs().max().item():g}; {clipped:g}",
            "first": (ratio - 1).abs().max().item(),
        }
    )
    # zero_variance filter: the kept completions' weights against keeping every group, on the
    # worked batch of lengths (2, 8 | 3, 3 | 5, 1), the middle group all correct or all incorrect.
    lengths = torch.tensor([2.0, 8.0, 3.0, 3.0, 5.0, 1.0])
    keep = torch.tensor([True, True, False, False, True, True])
    for mode in AGGREGATIONS:
        factor = (
            completion_coefficients(lengths, mode, 2, 8, keep)[keep]
            / (completion_coefficients(lengths, mode, 2, 8)[keep])
        )
        rows.append(
            {
                "section": "expectations of the stages",
                "case": f"zero_variance filter, {mode}: kept weights / kept weights under keep",
                "convention": "lengths (2, 8 | 3, 3 | 5, 1), middle group zero-variance",
                "value": ", ".join(f"{x:.4f}" for x in factor.tolist()),
                "first": factor[0].item(),
            }
        )
    # zero_variance resample: what it costs in generation and what it buys in mixed groups, for
    # mixed probabilities around the default baseline's (78% of its groups were mixed).
    for q in (0.5, 0.78, 0.9):
        batches, share = resample_expectation(q, 4, 4)
        rows.append(
            {
                "section": "expectations of the stages",
                "case": f"zero_variance resample, P(mixed)={q:g}, 4 groups a step, at most 4 batches",
                "convention": "expected generation batches a step; expected mixed share of the "
                "trained groups (keep and filter: 1 batch, share P(mixed))",
                "value": f"{batches:.4f}; {share:.4f}",
                "first": batches,
            }
        )
    return rows


def ratio_rows() -> list[Row]:
    """How each policy term weighs a token's ∇log π (the factor on A): at r = 1 (μ = 1: every
    term the policy gradient), and where the ratio has moved past the clip range, for a token of
    positive and of negative advantage. Leave-one-out's factor on the group-mean advantage."""
    rows: list[Row] = []
    for r, a in ((1.0, 1.0), (1.3, 1.0), (0.7, -1.0)):
        for name in RATIOS:
            w = gradient_weight(name, r, a)
            rows.append(
                {
                    "section": "policy ratio",
                    "case": f"one token, r = {r:g}, A = {a:+g}",
                    "convention": name,
                    "value": f"{w + 0.0:.4f}",  # no "-0.0000"
                    "first": w,
                }
            )
    w = gradient_weight("cispo", 1.0, 1.0, cispo_cap=0.2)
    rows.append(
        {
            "section": "policy ratio",
            "case": "one token, r = 1, A = +1; TRL's cispo with epsilon_high unset (cap 0.2)",
            "convention": "cispo, cap 0.2",
            "value": f"{w:.4f}",
            "first": w,
        }
    )
    for g in (4, 8, 16):
        r = torch.tensor([1.0] + [0.0] * (g - 1), dtype=torch.float64)
        f = (
            group_advantages(r, g, "none", 0.0, "leave_one_out")[0]
            / group_advantages(r, g, "none", 0.0)[0]
        ).item()
        rows.append(
            {
                "section": "policy ratio",
                "case": f"leave_one_out / group_mean advantage, G={g}",
                "convention": "G/(G-1), any std scaling",
                "value": f"{f:.4f}",
                "first": f,
            }
        )
    return rows


def push_rows() -> list[Row]:
    """What the push (the update direction of each choice on one set of samples) must show, from
    the formulas: directions that differ by a constant factor per batch, and where each
    aggregation puts the update's weight in the worked example (lengths 2 right, 8 wrong)."""
    from grpo_ablation.objective.push import choice_weights, long_incorrect_share

    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    lengths = torch.tensor([2.0, 8.0, 4.0, 6.0, 3.0, 3.0, 9.0, 5.0])

    def weights(scaling: str, aggregation: str, r=rewards, L=lengths, G=4) -> torch.Tensor:
        return choice_weights(r, L, G, scaling, aggregation, 0.0, 12)

    pairs = [
        (("population", "sequence_mean"), ("sample", "sequence_mean"), "sqrt(G/(G-1))"),
        (("none", "sequence_mean"), ("batch", "sequence_mean"), "the batch's std"),
        (("sample", "token_mean"), ("sample", "constant"), "B * L_max / sum(L)"),
    ]
    rows: list[Row] = []
    for a, b, why in pairs:
        ratio = weights(*a) / weights(*b)
        rows.append(
            {
                "section": "what the push must show",
                "case": f"{'/'.join(a)} over {'/'.join(b)} weights, G=4, two groups",
                "convention": f"one factor per batch ({why}): cosine 1",
                "value": _fmt(ratio.tolist()[:4]) + " ...",
                "first": ratio[0].item(),
            }
        )
    two, correct = torch.tensor([2.0, 8.0]), torch.tensor([1.0, 0.0])
    for agg in ("sequence_mean", "token_mean", "constant"):
        w = choice_weights(correct, two, 2, "none", agg, 0.0, 8)
        share = long_incorrect_share(w, two, correct)
        rows.append(
            {
                "section": "what the push must show",
                "case": "share of the update's token weight on the long wrong completion (2 right, 8 wrong)",
                "convention": agg,
                "value": f"{share:.4f}",
                "first": share,
            }
        )
    return rows


def worked_numbers() -> list[Row]:
    return [
        *advantage_rows(),
        *aggregation_rows(),
        *mixed_rows(),
        *expectation_rows(),
        *ratio_rows(),
        *push_rows(),
    ]


def worked_weights(lengths: tuple[int, ...] = (2, 8)) -> list[Row]:
    """Per-token weight of each completion of the worked example under every aggregation, from
    ``formulas.token_weights`` (one group of len(lengths), L_max = the longest)."""
    T = max(lengths)
    mask = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in lengths])
    rows: list[Row] = []
    for mode in AGGREGATIONS:
        w = token_weights(mask, mode, len(lengths), T)
        for i, n in enumerate(lengths):
            rows.append(
                {
                    "aggregation": mode,
                    "completion": f"length {n}",
                    "length": n,
                    "token_weight": float(w[i, 0]),
                    "completion_weight": float(w[i].sum()),
                }
            )
    return rows


def _write_csv(path: Path, rows: list[Row]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_sheet(out_dir: Path) -> tuple[Path, Path, Path, Path]:
    """The sheet (Markdown), its numbers (CSV), the worked example's token weights (CSV) and the
    sheet's HTML view (one rendered table per section, the CSV to download)."""
    import pandas as pd

    from grpo_ablation.analysis.render import html_view, to_rst

    rows = worked_numbers()
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / CALCULATIONS_TABLE, out_dir / CALCULATIONS_SHEET
    _write_csv(csv_path, rows)
    weights_path = out_dir / TOKEN_WEIGHTS_TABLE
    _write_csv(weights_path, worked_weights())
    lines = ["# Worked numbers (computed by grpo_ablation.objective.formulas)"]
    section = None
    for row in rows:
        if row["section"] != section:
            section = row["section"]
            lines += ["", f"## {section}", "", "| case | convention | value |", "|---|---|---|"]
        lines.append(f"| {row['case']} | {row['convention']} | {row['value']} |")
    md_path.write_text("\n".join(lines) + "\n")
    frame = pd.DataFrame(rows, dtype=str)
    sections = [
        f"{section}\n{'-' * len(section)}\n\n"
        + to_rst(part[["case", "convention", "value"]].reset_index(drop=True))
        for section, part in frame.groupby("section", sort=False)
    ]
    title = "Worked numbers (computed by grpo_ablation.objective.formulas)"
    text = "\n".join([f"{title}\n{'=' * len(title)}\n", *sections])
    view_path = out_dir / CALCULATIONS_VIEW
    view_path.write_text(html_view(text, csv=csv_path))
    return md_path, csv_path, weights_path, view_path
