"""Figures pooled over base-policy draws (``analysis.draws``), drawn from the pooled job's tables
(``layout.POOLED_TABLES``): nothing is pooled, tested or fitted again.

- Per stage, the effect plot over draws (``per_stage.effects_figure`` given the draws): each
  contrast's pooled mean with its 95% t interval over draws (``effects.csv``) and each draw's mean
  over its seeds as a faint point (``draws.csv``), the draw being the unit.
- Where the config declares hypotheses, the verdicts: each hypothesis's 90% interval over draws
  (``hypotheses.csv``: ``low90``/``high90``) against its margin ±m (equivalence) or its minimum
  effect δ in the predicted direction (directional), coloured by its verdict, with the minimum
  effect the design detects (``mde``) marked where it is known. The margin and δ are the
  declarations (``design.json``), not numbers of the analysis.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")  # headless: jobs run without a display

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from grpo_ablation.analysis import marks
from grpo_ablation.analysis.marks import BOUND_COLOUR, MDE_COLOUR, VERDICT_COLOURS
from grpo_ablation.analysis.plots import per_stage
from grpo_ablation.design.hypotheses import METRICS, Hypothesis


def _finite(*xs: float) -> bool:
    return all(x is not None and math.isfinite(float(x)) for x in xs)


def _row_title(v: pd.Series, unit: str) -> str:
    n = int(v["n"]) if _finite(v["n"]) else 0
    unit = "replicate" if v.get("unit") == "replicate" else unit  # a push's units
    head = f"{v['id']}: {v['verdict']} (90% interval over {n} {unit}{'s' if n != 1 else ''})"
    policy = (
        f" at the {v['policy']} policy" if isinstance(v.get("policy"), str) and v["policy"] else ""
    )
    what = (
        f"Δ {METRICS.get(v['metric'], v['metric'])}{policy}, {v['cell']} − {v['reference']}; "
        f"predicted {v['prediction']}"
    )
    return head + "\n" + textwrap.fill(what, 100)


def _verdict_row(ax: plt.Axes, v: pd.Series, h: Hypothesis) -> None:
    """One hypothesis on its metric's own axis (see ``verdicts_figure``; the axis and the marks'
    rules are ``marks``', shared with the verdict table's inline marks)."""
    colour = VERDICT_COLOURS.get(v["verdict"], "black")
    mean, low, high = (float(v[k]) for k in ("mean", "low90", "high90"))
    mde = float(v["mde"]) if "mde" in v and _finite(v["mde"]) else math.nan
    bounds, side = marks.predicted(h.kind, h.direction, h.minimum_effect, h.margin)
    lo, hi = marks.axis(str(v["metric"]), [mean, low, high, *bounds])
    detects = marks.mde_marks(h.kind == "equivalence", side, mde)
    beyond, within = (
        [m for m in detects if not lo <= m <= hi],
        [m for m in detects if lo <= m <= hi],
    )
    for m in beyond:
        edge = hi if m > 0 else lo
        ax.plot(edge, 0, marker=">" if m > 0 else "<", markersize=8, color=MDE_COLOUR)
        ax.annotate(
            f"MDE {m:+.3g}, off this axis",
            (edge, 0),
            xytext=(-4 if m > 0 else 4, 8),
            textcoords="offset points",
            ha="right" if m > 0 else "left",
            fontsize=6.5,
            color=MDE_COLOUR,
        )
    ax.axvspan(*marks.region(bounds, side, lo, hi), color=BOUND_COLOUR, alpha=0.1, linewidth=0)
    for b in bounds:
        ax.axvline(b, color=BOUND_COLOUR, linestyle="--", linewidth=1)
    ax.axvline(0, color="black", linewidth=0.8)
    for m in within:
        ax.plot(m, 0, marker="|", markersize=16, markeredgewidth=1.6, color=MDE_COLOUR)
    if _finite(low, high):
        ax.plot([low, high], [0, 0], color=colour, linewidth=4, solid_capstyle="butt")
    if _finite(mean):
        ax.plot(mean, 0, marker="o", markersize=7, color=colour, markeredgecolor="white")
    ax.set_xlim(lo, hi)
    ax.set_ylim(-1, 1)
    ax.set_yticks([])
    ax.grid(axis="y", visible=False)


def verdicts_figure(
    verdicts: pd.DataFrame, hypotheses: Mapping[str, Hypothesis], unit: str = "draw"
) -> plt.Figure:
    """One row per declared hypothesis (the rows of ``hypotheses.verdicts_table``), each on its
    metric's own axis: the 90% interval of the mean difference (bar; point: the mean) coloured by
    the verdict, the margin ±m or the minimum effect δ (dashed) with the region the hypothesis
    predicts shaded, zero (solid), and the minimum detectable effect (``mde``, 80% power: for an
    equivalence the smallest margin it could show) as grey ticks where it is known, or as an
    arrow at the edge with its value where it lies off the axis, which it never sets (the
    verdict table draws each row small and inline by the same rules: ``marks``)."""
    per_stage._style()
    rows = len(verdicts)
    height = 1.25 * rows + 0.9
    fig, axes = plt.subplots(rows, 1, figsize=(7.5, height), squeeze=False)
    for ax, (_, v) in zip(axes[:, 0], verdicts.iterrows(), strict=True):
        _verdict_row(ax, v, hypotheses[v["id"]])
        ax.set_title(_row_title(v, unit), loc="left", fontsize=7.5, color="#222222")
    handles = [
        *(Line2D([], [], color=c, linewidth=4, label=k) for k, c in VERDICT_COLOURS.items()),
        Line2D([], [], color=BOUND_COLOUR, linestyle="--", label="margin ±m or minimum effect δ"),
        Patch(color=BOUND_COLOUR, alpha=0.1, label="what the hypothesis predicts"),
    ]
    if "mde" in verdicts and verdicts["mde"].notna().any():
        mark = dict(color=MDE_COLOUR, marker="|", markersize=10, markeredgewidth=1.6, linestyle="")
        handles.append(Line2D([], [], **mark, label="minimum detectable effect (80% power)"))
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False)
    legend = 0.2 * math.ceil(len(handles) / 3) + 0.15  # inches below the panels
    fig.tight_layout(rect=(0, legend / height, 1, 1), h_pad=1.2)
    return fig
