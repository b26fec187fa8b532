"""The verdict marks: a declared hypothesis's 90% interval against what it predicts, on its metric's
own axis. One palette and one axis rule for the verdicts figure's rows
(``plots.over_draws.verdicts_figure``) and for the small inline drawing in each row of the verdict
table (``prose.verdicts.verdicts_overview``), so that the landing page shows every verdict's marks
beside its numbers, whatever the number of hypotheses, with no figure of its own.

Pure: no plotting library; the inline drawing is an SVG string.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

from grpo_ablation.analysis.render import fit_limits, largest_difference

VERDICT_COLOURS = {"supported": "#1a9641", "refuted": "#d7191c", "inconclusive": "#7f7f7f"}
BOUND_COLOUR = "#2c7bb6"  # the margin or minimum effect, and the region the hypothesis predicts
MDE_COLOUR = "#555555"

# The columns of the verdicts table (``hypotheses.VERDICT_COLUMNS``) that hold a hypothesis's
# declaration (``design.hypotheses.Hypothesis``'s fields): what ``predicted`` draws from.
DECLARATION = ("direction", "minimum_effect", "margin")

# The inline mark's size in CSS pixels: one line of the table's text high.
MARK_WIDTH, MARK_HEIGHT = 112, 16


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def predicted(
    kind: str, direction: float, minimum_effect: float, margin: float
) -> tuple[list[float], int]:
    """The bounds a hypothesis draws (the margin ±m, or its minimum effect δ in the predicted
    direction) and the side of them it predicts: 0 between ±m, else the direction s (±1)."""
    if kind == "equivalence":
        return [-margin, margin], 0
    s = 1 if direction > 0 else -1
    return [s * minimum_effect], s


def axis(metric: str, values: list[float]) -> tuple[float, float]:
    """A verdict's axis: the interval's, the bounds' and zero's (``values``), padded, within the
    differences the metric can have (±1 on an accuracy). An MDE never sets it (a wide one had
    squashed the interval to a few pixels)."""
    span = fit_limits([0.0, *values], pad=0.15)
    lo, hi = span if span is not None else (-1.0, 1.0)
    r = largest_difference(metric)
    return max(lo, -r), min(hi, r)


def region(bounds: list[float], side: int, lo: float, hi: float) -> tuple[float, float]:
    """The stretch of the axis ``lo``..``hi`` the hypothesis predicts (``predicted``'s side of its
    bounds)."""
    if side == 0:
        return bounds[0], bounds[1]
    return (bounds[0], hi) if side > 0 else (lo, bounds[0])


def mde_marks(equivalence: bool, direction: int, mde: float) -> list[float]:
    """Where the minimum detectable effect is drawn: ±MDE for an equivalence (the smallest margin
    it could show), s·MDE in the predicted direction otherwise; none where it is unknown."""
    if not _finite(mde):
        return []
    return [-mde, mde] if equivalence else [direction * mde]


def mark_svg(v: Mapping[str, Any]) -> str:
    """One verdict as a small inline SVG (a row of the verdict table): the predicted region
    shaded beyond or between the dashed bounds, zero (black), the 90% interval (bar) and mean
    (dot) coloured by the verdict, the MDE (grey ticks; a grey arrow at the edge where it lies
    off the axis); its tooltip is the row's ``title``. "" where the row lacks the declaration
    (``DECLARATION``: a table written before it was in its columns)."""
    if not all(k in v for k in DECLARATION):
        return ""
    equivalence = v["kind"] == "equivalence"
    bounds, side = predicted(
        str(v["kind"]), float(v["direction"]), float(v["minimum_effect"]), float(v["margin"])
    )
    mean, low, high = (float(v[k]) for k in ("mean", "low90", "high90"))
    mde = float(v.get("mde", math.nan))
    lo, hi = axis(str(v["metric"]), [mean, low, high, *bounds])
    w, h, pad = MARK_WIDTH, MARK_HEIGHT, 3.0

    def x(value: float) -> float:
        return round(pad + (min(max(value, lo), hi) - lo) / (hi - lo) * (w - 2 * pad), 1)

    start, end = region(bounds, side, lo, hi)
    parts = [
        f'<rect x="{x(start)}" y="0" width="{x(end) - x(start):.1f}" '
        f'height="{h}" fill="{BOUND_COLOUR}" fill-opacity="0.15"/>',
        *(
            f'<line x1="{x(bound)}" x2="{x(bound)}" y1="0" y2="{h}" stroke="{BOUND_COLOUR}" '
            'stroke-dasharray="2 2"/>'
            for bound in bounds
            if lo <= bound <= hi
        ),
        f'<line x1="{x(0)}" x2="{x(0)}" y1="0" y2="{h}" stroke="black"/>',
    ]
    for m in mde_marks(equivalence, side, mde):
        if lo <= m <= hi:
            parts.append(
                f'<line x1="{x(m)}" x2="{x(m)}" y1="2" y2="{h - 2}" stroke="{MDE_COLOUR}" '
                'stroke-width="1.5"/>'
            )
        else:  # off the axis: an arrow at its edge, pointing out
            e, t = (w - 1, w - 5) if m > hi else (1, 5)
            parts.append(
                f'<path d="M{e} {h / 2}L{t} {h / 2 - 3}L{t} {h / 2 + 3}Z" fill="{MDE_COLOUR}"/>'
            )
    colour = VERDICT_COLOURS.get(str(v["verdict"]), "black")
    if _finite(low) and _finite(high):
        parts.append(
            f'<rect x="{x(low)}" y="{h / 2 - 2}" width="{max(x(high) - x(low), 1):.1f}" '
            f'height="4" fill="{colour}"/>'
        )
    if _finite(mean):
        parts.append(
            f'<circle cx="{x(mean)}" cy="{h / 2}" r="3.5" fill="{colour}" stroke="white"/>'
        )
    return (
        f'<svg class="verdict-mark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">'
        f"<title>{html.escape(str(v.get('title', '')))}</title>{''.join(parts)}</svg>"
    )
