"""Figures (seaborn; PNG and PDF). One colour per cell across every figure: the palette is keyed
by cell path (sorted), so a cell keeps its colour whichever stage or figure shows it.

Pure plotting functions take the frames of ``tables.load_curves``/``tables.load_steps`` and return
a matplotlib Figure; ``write_stage_figures`` and ``write_weight_figure`` save them. Bands are 95%
Student-t intervals over seeds (``stats.t_interval``); with one seed no band is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: jobs run without a display

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
import torch
from matplotlib.ticker import MaxNLocator

from grpo_ablation import pipeline
from grpo_ablation.analysis import tables
from grpo_ablation.analysis.stats import t_interval
from grpo_ablation.objective.formulas import AGGREGATIONS, GROUP_CATEGORIES, token_weights

# Group categories keep fixed, non-cell colours (they are stacked inside one cell's panel).
CATEGORY_COLOURS = {
    "all_correct": "#4daf4a",
    "mixed": "#377eb8",
    "all_incorrect": "#e41a1c",
    "failed_scoring": "#999999",
}


def cell_palette(cells: Iterable[str]) -> dict[str, tuple[float, float, float]]:
    """A deterministic colour per cell path: sorted paths take colours in order."""
    paths = sorted(set(cells))
    name = "tab10" if len(paths) <= 10 else "tab20" if len(paths) <= 20 else "husl"
    return dict(zip(paths, sns.color_palette(name, len(paths)), strict=True))


def _style() -> None:
    sns.set_theme(style="whitegrid", context="paper", font_scale=0.9)


def seed_bands(frame: pd.DataFrame, x: str, y: str, by: list[str]) -> pd.DataFrame:
    """Mean and 95% t interval over seeds of ``y`` at every ``x`` within each ``by`` group."""
    rows = []
    for key, g in frame.groupby([*by, x], sort=True):
        iv = t_interval(g[y])
        rows.append(
            {
                **dict(zip([*by, x], key, strict=True)),
                "mean": iv.mean,
                "low": iv.low,
                "high": iv.high,
                "n": iv.n,
            }
        )
    return pd.DataFrame(rows)


def _lines(
    ax,
    frame: pd.DataFrame,
    x: str,
    y: str,
    palette,
    linestyle: str = "-",
    label_suffix: str = "",
    bounds: tuple[float, float] | None = None,
) -> None:
    """Mean line and t band per cell; ``bounds`` clips the band to a quantity's feasible range
    (a fraction), since t intervals over two seeds easily pass 0 or 1."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    bands = seed_bands(frame, x, y, ["cell"])
    if bounds is not None and not bands.empty:
        bands[["low", "high"]] = bands[["low", "high"]].clip(*bounds)
    if bands.empty:  # e.g. no correct completion in any run: an empty panel, not an error
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="grey")
        return
    for cell, b in bands.groupby("cell", sort=True):
        colour = palette[cell]
        ax.plot(
            b[x],
            b["mean"],
            color=colour,
            linestyle=linestyle,
            marker="o",
            markersize=2.5,
            label=pipeline.cell_label(cell) + label_suffix,
        )
        ax.fill_between(b[x], b["low"], b["high"], color=colour, alpha=0.18, linewidth=0)


def _legend(fig, ax) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(
            handles,
            labels,
            loc="lower center",
            ncol=min(3, len(labels)),
            frameon=False,
            bbox_to_anchor=(0.5, -0.02),
        )
        fig.tight_layout(rect=(0, 0.06 + 0.03 * math.ceil(len(labels) / 3), 1, 1))


def accuracy_figure(curves: pd.DataFrame, palette) -> plt.Figure:
    """Test accuracy vs step per cell, base policy at step 0, t bands over seeds."""
    _style()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), sharex=True)
    for ax, (col, title) in zip(
        axes, [("greedy", "greedy accuracy"), ("sampled", "sampled mean@k")], strict=True
    ):
        _lines(ax, curves, "step", col, palette, bounds=(0, 1))
        ax.set(xlabel="optimizer step (0 = base policy)", ylabel=f"test {title}", title=title)
    _legend(fig, axes[0])
    return fig


def groups_figure(steps: pd.DataFrame, palette) -> plt.Figure:
    """Group categories over steps, stacked, one panel per cell (mean over seeds)."""
    _style()
    cells = sorted(steps["cell"].unique())
    fig, axes = plt.subplots(
        1, len(cells), figsize=(3.2 * len(cells), 3.2), sharey=True, squeeze=False
    )
    for ax, cell in zip(axes[0], cells, strict=True):
        mean = (
            steps[steps["cell"] == cell]
            .groupby("step")[[f"fraction/{c}" for c in GROUP_CATEGORIES]]
            .mean()
        )
        order = ["all_correct", "mixed", "all_incorrect", "failed_scoring"]
        ax.stackplot(
            mean.index,
            *[mean[f"fraction/{c}"] for c in order],
            labels=order,
            colors=[CATEGORY_COLOURS[c] for c in order],
            alpha=0.85,
        )
        ax.set_title(pipeline.cell_label(cell), color=palette[cell], fontsize=8)
        ax.set(xlabel="generation step", ylim=(0, 1))
    axes[0][0].set_ylabel("fraction of groups")
    _legend(fig, axes[0][0])
    return fig


def length_figure(steps: pd.DataFrame, palette) -> plt.Figure:
    """Mean completion length over steps, correct (solid) and incorrect (dashed)."""
    _style()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), sharey=True)
    for ax, (col, title) in zip(
        axes, [("length/correct", "correct"), ("length/incorrect", "incorrect")], strict=True
    ):
        _lines(
            ax,
            steps.dropna(subset=[col]),
            "step",
            col,
            palette,
            "-" if title == "correct" else "--",
            bounds=(0, math.inf),
        )
        ax.set(
            xlabel="generation step",
            ylabel="mean completion length (tokens)",
            title=f"{title} completions",
        )
    _legend(fig, axes[1] if not axes[0].get_legend_handles_labels()[0] else axes[0])
    return fig


def clip_truncation_figure(steps: pd.DataFrame, palette) -> plt.Figure:
    """Ratio clipping (PPO probability-ratio clip) and truncation (length limit): two measures."""
    _style()
    frame = steps.assign(
        ratio_clip=steps["ratio_clip/low"].fillna(0) + steps["ratio_clip/high"].fillna(0)
    )
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), sharex=True)
    _lines(axes[0], frame, "step", "ratio_clip", palette, bounds=(0, 1))
    axes[0].set(
        xlabel="generation step", ylabel="fraction of tokens", title="ratio clipping (low + high)"
    )
    _lines(axes[1], frame, "step", "truncation_rate", palette, bounds=(0, 1))
    axes[1].set(
        xlabel="generation step", ylabel="fraction of completions", title="truncation (no eos)"
    )
    _legend(fig, axes[0])
    return fig


def mixed_figure(steps: pd.DataFrame, palette) -> plt.Figure:
    """Observed fraction of mixed groups (solid) against 1 − p̂^G − (1 − p̂)^G (dashed)."""
    _style()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    _lines(
        ax,
        steps.dropna(subset=["mixed_observed"]),
        "step",
        "mixed_observed",
        palette,
        "-",
        " observed",
        (0, 1),
    )
    _lines(
        ax,
        steps.dropna(subset=["mixed_predicted"]),
        "step",
        "mixed_predicted",
        palette,
        ":",
        " predicted",
        (0, 1),
    )
    ax.set(
        xlabel="generation step",
        ylabel="fraction of scored groups",
        ylim=(-0.02, 1.02),
        title="mixed groups: observed vs predicted (per-prompt p̂)",
    )
    _legend(fig, ax)
    return fig


def worked_weights(lengths: tuple[int, ...] = (2, 8)) -> pd.DataFrame:
    """Per-token weight of each completion of the worked example under every aggregation, from
    ``objective.token_weights`` (one group of len(lengths), L_max = the longest)."""
    T = max(lengths)
    mask = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in lengths])
    rows = []
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
    return pd.DataFrame(rows)


def weight_figure(weights: pd.DataFrame) -> plt.Figure:
    """Bars of the per-token weight; not cells, so neutral colours (cell colours stay unique)."""
    _style()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    sns.barplot(
        weights,
        x="aggregation",
        y="token_weight",
        hue="completion",
        ax=ax,
        palette=["#555555", "#bbbbbb"],
        order=list(AGGREGATIONS),
    )
    for container in ax.containers:
        ax.bar_label(container, fmt="%.4g", fontsize=7)
    ax.set(
        ylabel="weight of each token",
        xlabel="length aggregation",
        title="worked example: two completions of lengths 2 and 8",
    )
    fig.tight_layout()
    return fig


def save(fig: plt.Figure, stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".pdf")]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    plt.close(fig)
    return paths


def write_stage_figures(
    curves: pd.DataFrame, steps: pd.DataFrame, stage: str, palette, out: Path, title: str = ""
) -> list[Path]:
    """``out/<kind>.{png,pdf}`` for every kind of STAGE_FIGURES, for one stage's cells."""
    c, s = curves[curves["stage"] == stage], steps[steps["stage"] == stage]
    made = {
        "accuracy": accuracy_figure(c, palette),
        "groups": groups_figure(s, palette),
        "length": length_figure(s, palette),
        "clip_truncation": clip_truncation_figure(s, palette),
        "mixed": mixed_figure(s, palette),
    }
    paths: list[Path] = []
    for kind, fig in made.items():
        fig.suptitle(title or stage, fontsize=9, y=1.0)
        paths += save(fig, out / kind)
    return paths


def write_weight_figure(out: Path) -> list[Path]:
    weights = worked_weights()
    out.mkdir(parents=True, exist_ok=True)
    weights.to_csv(out / "token_weights.csv", index=False)
    return save(weight_figure(weights), out / "token_weights")


def write_figures(
    exp: Path, config: dict[str, Any], winners: dict[str, Any], out: Path, stage: str | None = None
) -> list[Path]:
    """``out/<kind>.{png,pdf}`` for ``stage``, or ``out/<stage>/<kind>.{png,pdf}`` for every
    stage; the palette comes from the config, so separate calls agree on colours."""
    rows = pipeline.design_rows(config, winners, [stage] if stage else None)
    seeds = [int(s) for s in config["seeds"]]
    curves, steps = tables.load_curves(exp, rows, seeds), tables.load_steps(exp, rows, seeds)
    palette = cell_palette(pipeline.all_cells(config))
    if stage is not None:
        title = pipeline.stage_title(config, stage)
        return write_stage_figures(curves, steps, stage, palette, out, title)
    paths = []
    for name in dict.fromkeys(r["stage"] for r in rows):
        title = pipeline.stage_title(config, name)
        paths += write_stage_figures(curves, steps, name, palette, out / name, title)
    return paths
