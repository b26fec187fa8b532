"""Each stage's figures and the worked example's (seaborn; PNG and PDF). One colour per cell across
every figure: the palette is keyed by cell path (sorted), so a cell keeps its colour whichever
stage or figure shows it.

Pure plotting functions take the frames the tables job wrote (``jobs.figures.FigureData``: the
effects table, ``loading.load_curves``, ``loading.load_steps`` ...) and return a matplotlib Figure;
``jobs.figures`` saves them (``plots.saving.save``). They draw what other code computed: the
tables job's numbers, the mean and t band over seeds of each curve and its rolling mean
(``analysis/curves.py``), a fitted run's ScaleRL curve (``efficiency.fitted_curve``), the
calibration plot's bins (the tables job's) and the worked example's bars (the calculations job's).
Axes fit the runs' smoothed values, so a band wider than the runs themselves (two seeds: t =
12.7) is cut at the axes, not the data.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable

import matplotlib

matplotlib.use("Agg")  # headless: jobs run without a display

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, NullFormatter

from grpo_ablation.analysis import calibration, efficiency
from grpo_ablation.analysis.curves import seed_bands, smooth, smoothing_label, smoothing_window
from grpo_ablation.analysis.render import fit_limits
from grpo_ablation.design.ablation import cell_label
from grpo_ablation.design.quantities import EFFECTS
from grpo_ablation.objective.conventions import AGGREGATIONS, GROUP_CATEGORIES

# Longest line of a panel title (characters): longer titles wrap, so neighbouring panels' titles
# never run into one another (``plots.saving.save`` checks).
TITLE_CHARACTERS = 36
CELL_TITLE_CHARACTERS = 30
# Where the effect plot over draws puts each draw's point: just below its cell's bar.
DRAW_OFFSET = 0.2
# The effect plot's panels a row: two keep it about 9 inches wide, legible at a page's width.
EFFECT_COLUMNS = 2
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


def _no_data(ax, what: str = "") -> None:
    """A note in the panel's corner (not over a line that another series draws there)."""
    text = f"no data: {what}" if what else "no data"
    ax.text(0.03, 0.96, text, transform=ax.transAxes, ha="left", va="top", color="grey")


def _lines(
    ax,
    frame: pd.DataFrame,
    x: str,
    y: str,
    palette,
    linestyle: str = "-",
    label_suffix: str = "",
    bounds: tuple[float | None, float | None] | None = None,
) -> list[float]:
    """Mean line and t band per cell; ``bounds`` clips the band to a quantity's feasible range
    (a fraction), since t intervals over two seeds easily pass 0 or 1. Returns the per-run
    values drawn, for the caller to fit the axis to."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    frame = frame.dropna(subset=[y])
    bands = seed_bands(frame, x, y, ["cell"])
    if bands.empty:  # e.g. no correct completion in any run: an empty panel, not an error
        _no_data(ax, y)
        return []
    if bounds is not None:
        bands[["low", "high"]] = bands[["low", "high"]].clip(*bounds)
    for cell, b in bands.groupby("cell", sort=True):
        colour = palette[cell]
        # two points (the base policy and one checkpoint) are not a curve: points, each with its
        # interval, and neither a line nor a band between them
        curve = len(b) > 2
        ax.plot(
            b[x],
            b["mean"],
            color=colour,
            linestyle=linestyle if curve else "none",
            marker="o" if len(b) <= 30 else None,
            markersize=2.5,
            label=cell_label(cell) + label_suffix,
        )
        if curve:
            ax.fill_between(b[x], b["low"], b["high"], color=colour, alpha=0.15, linewidth=0)
        else:
            below, above = (
                (b["mean"] - b["low"]).clip(lower=0),
                (b["high"] - b["mean"]).clip(lower=0),
            )
            ax.errorbar(b[x], b["mean"], yerr=[below, above], fmt="none", ecolor=colour, capsize=2)
    return frame[y].tolist()


def _fit_y(axes: Iterable, values: list[float], floor: float | None = 0.0) -> None:
    limits = fit_limits(values, floor=floor)
    if limits is not None:
        for ax in axes:
            ax.set_ylim(*limits)


def _legend(fig, ax, handles=None, labels=None) -> None:
    if handles is None:
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
    else:
        fig.tight_layout()


def _cell_grid(cells: list[str], rows: int = 1, height: float = 2.9):
    """One column per cell (shared axes): lines of different cells never overlap."""
    fig, axes = plt.subplots(
        rows,
        len(cells),
        figsize=(max(3.0 * len(cells), 5.0), height * rows + 0.6),
        sharex=True,
        sharey="row",
        squeeze=False,
    )
    return fig, axes


def _steps_of(frame: pd.DataFrame) -> int:
    return int(frame["step"].nunique()) if "step" in frame and not frame.empty else 0


# Characters of a figure title's line per inch of the figure's width, at its 9 points.
SUPTITLE_CHARACTERS_PER_INCH = 14


def suptitle(fig: plt.Figure, title: str) -> None:
    """The figure's title above its panels (bottom-aligned at the top edge: saving with a tight box
    makes room for it, so it never runs into a panel's title), wrapped to the figure's width."""
    width = int(fig.get_figwidth() * SUPTITLE_CHARACTERS_PER_INCH)
    fig.suptitle(wrap(title, width), fontsize=9, y=1.0, va="bottom")


def wrap(title: str, width: int = TITLE_CHARACTERS) -> str:
    """A panel title broken into lines of at most ``width`` characters."""
    return textwrap.fill(title, width, break_on_hyphens=False)


def cell_title(cell: str) -> str:
    """A panel's cell label, wrapped to the width of a panel."""
    return wrap(cell_label(cell), CELL_TITLE_CHARACTERS)


def _numbers(values: Iterable[float]) -> str:
    ns = sorted({int(n) for n in values if math.isfinite(float(n))})
    return " or ".join(map(str, ns)) or "0"


def effects_note(effects: pd.DataFrame, draws: pd.DataFrame | None = None) -> str:
    """What the effect plot's points and bars are, and over how many units, said once."""
    n = effects.loc[~effects["is_reference"].astype(bool), "n"]
    if draws is not None:
        seeds = _numbers(draws["n"]) if "n" in draws else ""
        each = (
            "each draw's difference (cell − reference, its one seed)"
            if seeds == "1"
            else f"each draw's mean difference over its {seeds} seeds (cell − reference, same seed)"
        )
        return (
            f"point: mean over {_numbers(n)} base-policy draws of {each}; bar: 95% Student-t "
            "interval over the draws; faint dots, just below: the draws; ◇: the reference"
        )
    if n.empty or (n <= 1).all():
        return (
            "point: the difference of the one seed pair (cell − reference, same seed): with one "
            "seed no interval; ◇: the reference"
        )
    none = " (none where one seed pair)" if (n <= 1).any() else ""
    return (
        f"point: mean over {_numbers(n)} seed pairs of (cell − reference, same seed); bar: 95% "
        f"Student-t interval{none}; ◇: the reference"
    )


def effects_figure(effects: pd.DataFrame, palette, draws: pd.DataFrame | None = None) -> plt.Figure:
    """One panel per quantity of ``EFFECTS``: each cell's mean paired difference to the
    stage's reference (point) with its 95% t interval (bar), against a zero line. The reference
    is drawn as a hollow marker at 0 (its difference to itself), so every cell has its row. Pooled
    over base-policy draws, ``draws`` (the pooled job's ``draws.csv``: each contrast's mean within
    each draw) adds each draw's mean as a faint point; the note under the panels says once over
    how many seeds or draws the points and bars are."""
    _style()
    metrics = [q for q in EFFECTS if q in set(effects["quantity"])] or list(EFFECTS)
    cells = list(dict.fromkeys(effects["cell"]))
    # Panels in rows of EFFECT_COLUMNS, not one row of five: the report shows a figure at the
    # page's width, where a 16-inch row printed its labels at about 6 px.
    ncols = min(len(metrics), EFFECT_COLUMNS)
    nrows = math.ceil(len(metrics) / ncols)
    panel = 0.4 * max(len(cells), 2) + 1.3
    height = panel * nrows + 0.4
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(3.3 * ncols + 2.2, height),
        sharey=True,
        squeeze=False,
    )
    for spare in axes.flat[len(metrics) :]:
        fig.delaxes(spare)
    ylabels = [
        cell_label(c)
        + ("  (reference)" if c in set(effects.loc[effects["is_reference"], "cell"]) else "")
        for c in cells
    ]
    for ax, q in zip(axes.flat, metrics, strict=False):
        of_q = effects[effects["quantity"] == q].set_index("cell")
        of_draws = (
            draws[draws["quantity"] == q] if draws is not None else pd.DataFrame(columns=["cell"])
        )
        ax.axvline(0, color="black", linewidth=0.8, zorder=1)
        for y, cell in enumerate(cells):
            if cell not in of_q.index:
                continue
            r = of_q.loc[cell]
            colour = palette.get(cell, "black")
            if bool(r["is_reference"]):
                ax.plot(0, y, marker="D", markersize=5, mfc="white", mec=colour, zorder=3)
                continue
            if math.isfinite(r["low"]) and math.isfinite(r["high"]):
                ax.plot([r["low"], r["high"]], [y, y], color=colour, linewidth=2, zorder=2)
            mine = of_draws.loc[of_draws["cell"] == cell, "mean"] if len(of_draws) else []
            if len(mine):
                ax.plot(
                    mine,
                    [y + DRAW_OFFSET] * len(mine),
                    "o",
                    markersize=4,
                    color=colour,
                    alpha=0.5,
                    markeredgewidth=0,
                    zorder=2.5,
                )
            ax.plot(r["mean"], y, marker="o", markersize=6, color=colour, zorder=3)
        shown = [0.0, *of_q["low"], *of_q["high"], *of_q["mean"]]
        if len(of_draws):
            shown += list(of_draws["mean"])
        span = fit_limits(shown, pad=0.12)
        if span is not None:
            ax.set_xlim(*span)
        ax.set_title(wrap(EFFECTS.get(q, q)), fontsize=9)
        ax.set_xlabel("difference to reference")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    axes[0][0].set_yticks(range(len(cells)), ylabels)
    axes[0][0].set_ylim(len(cells) - 0.5, -0.5)  # first cell on top
    fig.text(
        0.5,
        0.01,
        wrap(effects_note(effects, draws), 110),
        ha="center",
        va="bottom",
        fontsize=8,
        color="#444444",
    )
    fig.tight_layout(rect=(0, 0.5 / height, 1, 1))
    return fig


def accuracy_figure(curves: pd.DataFrame, palette) -> plt.Figure:
    """Test accuracy vs step per cell, base policy at step 0, t bands over seeds. Evaluations of
    saved checkpoints on the whole test split, so not smoothed; the axis fits the runs."""
    _style()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), sharex=True)
    for ax, (col, title) in zip(
        axes, [("greedy", "greedy accuracy"), ("sampled", "sampled accuracy")], strict=True
    ):
        x = "generation_step" if "generation_step" in curves else "step"
        _fit_y([ax], _lines(ax, curves, x, col, palette, bounds=(0, 1)))
        ax.set(
            xlabel="generation step (optimizer steps / μ; 0 = base policy)",
            ylabel=f"test {title}",
            title=title,
        )
    _legend(fig, axes[0])
    return fig


def groups_figure(steps: pd.DataFrame, palette) -> plt.Figure:
    """Group categories over steps, stacked, one panel per cell (each run smoothed, then the mean
    over seeds)."""
    _style()
    columns = [f"fraction/{c}" for c in GROUP_CATEGORIES]
    window = smoothing_window(_steps_of(steps))
    smoothed = smooth(steps, columns, window)
    cells = sorted(steps["cell"].unique())
    fig, axes = plt.subplots(
        1, len(cells), figsize=(3.2 * len(cells), 3.2), sharey=True, squeeze=False
    )
    order = ["all_correct", "mixed", "all_incorrect", "failed_scoring"]
    for ax, cell in zip(axes[0], cells, strict=True):
        mean = smoothed[smoothed["cell"] == cell].groupby("step")[columns].mean()
        ax.stackplot(
            mean.index,
            *[mean[f"fraction/{c}"] for c in order],
            labels=order,
            colors=[CATEGORY_COLOURS[c] for c in order],
            alpha=0.85,
        )
        ax.set_title(cell_title(cell), color=palette[cell], fontsize=8)
        ax.set(xlabel=f"generation step ({smoothing_label(window)})", ylim=(0, 1))
        ax.margins(x=0)
    axes[0][0].set_ylabel("fraction of groups")
    _legend(fig, axes[0][0])
    return fig


def length_figure(steps: pd.DataFrame, palette) -> plt.Figure:
    """Mean completion length over steps, one panel per cell: correct (solid) and incorrect
    (dashed) completions, each run smoothed; one y axis fitted to every run."""
    _style()
    columns = ["length/correct", "length/incorrect"]
    window = smoothing_window(_steps_of(steps))
    smoothed = smooth(steps, columns, window)
    cells = sorted(steps["cell"].unique())
    fig, axes = _cell_grid(cells)
    drawn: list[float] = []
    for ax, cell in zip(axes[0], cells, strict=True):
        of_cell = smoothed[smoothed["cell"] == cell]
        for col, style in zip(columns, ("-", "--"), strict=True):
            drawn += _lines(ax, of_cell, "step", col, palette, style, bounds=(0, math.inf))
        ax.set_title(cell_title(cell), color=palette[cell], fontsize=8)
        ax.set_xlabel(f"generation step\n({smoothing_label(window)})")
    axes[0][0].set_ylabel("mean completion length (tokens)")
    _fit_y(axes[0], drawn)
    handles = [
        Line2D([], [], color="#444444", linestyle="-", label="correct"),
        Line2D([], [], color="#444444", linestyle="--", label="incorrect"),
    ]
    _legend(fig, axes[0][0], handles, ["correct completions", "incorrect completions"])
    return fig


def clip_truncation_figure(steps: pd.DataFrame, palette) -> plt.Figure:
    """Ratio clipping (PPO probability-ratio clip) and truncation (length limit): two measures, one
    row each, one panel per cell; with a KL term in any cell (beta > 0), a third row of KL to the
    reference. Each run smoothed, each row's axis fitted to its runs."""
    _style()
    frame = steps.assign(
        ratio_clip=steps["ratio_clip/low"].fillna(0) + steps["ratio_clip/high"].fillna(0)
    )
    rows = [
        ("ratio_clip", "ratio clipping (low + high)\nfraction of tokens", (0, 1)),
        ("truncation_rate", "truncation (no eos)\nfraction of completions", (0, 1)),
    ]
    if "kl" in frame and frame["kl"].notna().any():
        rows.append(("kl", "KL to the reference\n(k3, mean per token)", (0, None)))
    window = smoothing_window(_steps_of(frame))
    frame = smooth(frame, [col for col, _, _ in rows], window)
    cells = sorted(frame["cell"].unique())
    fig, axes = _cell_grid(cells, rows=len(rows), height=2.5)
    for row, (col, ylabel, bounds) in enumerate(rows):
        drawn: list[float] = []
        for ax, cell in zip(axes[row], cells, strict=True):
            of_cell = frame[(frame["cell"] == cell) & frame[col].notna()]
            if not of_cell.empty:
                drawn += _lines(ax, of_cell, "step", col, palette, bounds=bounds)
            elif col == "kl":
                ax.text(0.5, 0.5, "no KL term (β = 0)", ha="center", transform=ax.transAxes)
            if row == 0:
                ax.set_title(cell_title(cell), color=palette[cell], fontsize=8)
            if row == len(rows) - 1:
                ax.set_xlabel(f"generation step\n({smoothing_label(window)})")
        axes[row][0].set_ylabel(ylabel)
        _fit_y(axes[row], drawn)
    fig.tight_layout()
    return fig


def mixed_figure(binned: pd.DataFrame, cells: list[str], palette) -> plt.Figure:
    """Calibration of the mixed-group prediction, one panel per cell: groups generated by saved
    policies, binned by P(mixed) predicted from their prompts' exact P(correct) (measured without
    them), against the observed fraction of mixed groups with 95% intervals (the tables job's
    ``calibration.calibration_bins``); identity line."""
    _style()
    fig, axes = plt.subplots(
        1,
        len(cells),
        figsize=(max(2.9 * len(cells), 4.0), 3.4),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    limits = (0.0, 1.02)
    for ax, cell in zip(axes[0], cells, strict=True):
        ax.plot(limits, limits, color="grey", linestyle="--", linewidth=0.9, label="identity")
        b = binned[binned["cell"] == cell]
        if b.empty:
            _no_data(ax)
        else:
            ax.errorbar(
                b["predicted"],
                b["observed"],
                # clipped: at 0 or 1 the Wilson bound equals the fraction up to rounding
                yerr=[
                    (b["observed"] - b["low"]).clip(lower=0),
                    (b["high"] - b["observed"]).clip(lower=0),
                ],
                fmt="o",
                markersize=4,
                color=palette[cell],
                capsize=2,
                linewidth=1,
            )
        ax.set_title(cell_title(cell), color=palette[cell], fontsize=8)
        ax.set(xlim=limits, ylim=limits, xlabel="predicted P(mixed), binned")
        ax.set_aspect("equal", adjustable="box")
    axes[0][0].set_ylabel("observed fraction of mixed groups")
    fig.text(
        0.5,
        0.0,
        f"{calibration.CALIBRATION_BINS} equal-width bins of the prediction; bars: 95% Wilson intervals of the "
        "observed fraction; dashed: identity",
        ha="center",
        fontsize=7,
        color="#444444",
    )
    fig.tight_layout()
    return fig


def efficiency_figure(points: pd.DataFrame, runs: pd.DataFrame, R0: float, palette) -> plt.Figure:
    """One panel per cell: each run's test accuracy (headline sampled metric) against the tokens it
    had generated, with its ScaleRL curve where the fit is identified (efficiency.py); the base
    policy's R0 as a line. The title counts the identified fits."""
    _style()
    if points.empty:
        fig, ax = plt.subplots(figsize=(5, 3))
        _no_data(ax, "efficiency curves")
        return fig
    cells = list(dict.fromkeys(points["cell"]))
    fig, axes = _cell_grid(cells)
    values = [R0]
    for ax, cell in zip(axes[0], cells, strict=True):
        mine, fits = points[points["cell"] == cell], runs[runs["cell"] == cell]
        for seed, run in mine.groupby("seed"):
            x = run["generated_tokens"].to_numpy(dtype=float)
            ax.plot(x, run["accuracy"], "o", ms=2.5, alpha=0.6, color=palette[cell])
            values += run["accuracy"].tolist()
            fit = fits[fits["seed"] == seed]
            if len(fit) and fit["efficiency_identified"].iloc[0] == 1.0:
                f = fit.iloc[0]
                grid, curve = efficiency.fitted_curve(
                    x.min(),
                    x.max(),
                    R0,
                    f["efficiency_A"],
                    f["efficiency_B"],
                    f["efficiency_C_mid"],
                )
                ax.plot(grid, curve, lw=0.9, color=palette[cell])
        ax.axhline(R0, color="0.4", lw=0.8, ls=":")
        n_fit = int(fits["efficiency_identified"].sum())
        ax.set(
            xscale="log",
            xlabel="generated tokens (training compute)",
            title=f"{cell_title(cell)}\n{n_fit} of {len(fits)} fits identified",
        )
        ax.xaxis.set_minor_formatter(NullFormatter())  # log minor labels collide
        ax.title.set_fontsize(7)
    axes[0][0].set_ylabel("test sampled accuracy (dotted: base policy)")
    _fit_y(axes[0], values, floor=None)
    return fig


def coupling_figure(coupling: pd.DataFrame, palette) -> plt.Figure:
    """Share of each cell's completions identical to its reference's (same seed, step, prompt and
    slot) over generation steps: mean and t band over seeds, one line per cell."""
    _style()
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    if coupling.empty:
        _no_data(ax, "no cell shares its reference's batch shape")
    else:
        _lines(ax, coupling, "step", "identical", palette, bounds=(0.0, 1.0))
        ref = cell_label(coupling["reference"].iloc[0])
        ax.set_title(f"reference: {ref}", fontsize=8)
    ax.set(xlabel="generation step", ylabel="identical to the reference", ylim=(-0.02, 1.02))
    _legend(fig, ax)
    return fig


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
