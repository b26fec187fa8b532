"""Saving a matplotlib figure in every format of ``layout.FIGURE_FORMATS`` (PNG for the report,
PDF for print): one writer for the stage figures, the pooled figures, the worked example and the
push figure. Before it writes, every figure is checked for a title and for text that runs into
other text (``overlaps``: titles, axis labels, tick labels, legends, the suptitle and the figure's notes), so
a layout that collides under some config fails its job, named, instead of reaching a reader."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: jobs run without a display

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.legend import Legend
from matplotlib.text import Text

from grpo_ablation.layout import figure_files

# Boxes that share at most this many pixels (at the figure's dpi) in either direction touch
# rather than overlap: a glyph's antialiased edge, not two texts in one place.
TOLERANCE_PX = 1.0


class OverlapError(ValueError):
    """Texts of a figure overlap once it is laid out."""


def _shown(artist: Artist) -> bool:
    if not artist.get_visible():
        return False
    return not isinstance(artist, Text) or bool(artist.get_text().strip())


def texts(fig: plt.Figure) -> list[tuple[str, Artist]]:
    """(kind, artist) of every text a reader reads in ``fig``: its suptitle, notes and legends, and
    per axes its titles, axis labels, the tick labels drawn (those inside the view) and its
    legend (a legend counts as one box)."""
    found: list[tuple[str, Artist]] = []
    if fig._suptitle is not None:
        found.append(("suptitle", fig._suptitle))
    found += [("note", t) for t in fig.texts if t is not fig._suptitle]
    found += [("legend", legend) for legend in fig.legends]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        found += [("title", t) for t in (ax.title, ax._left_title, ax._right_title)]
        found += [("axis label", ax.xaxis.label), ("axis label", ax.yaxis.label)]
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():  # the ticks drawn: those inside the view interval
                found += [("tick label", tick.label1), ("tick label", tick.label2)]
            found.append(("axis offset", axis.get_offset_text()))  # "1e-6" beside the ticks
        if ax.get_legend() is not None:
            found.append(("legend", ax.get_legend()))
    return [(kind, a) for kind, a in found if _shown(a)]


def _words(kind: str, artist: Artist) -> str:
    if isinstance(artist, Legend):
        return f"{kind} [{', '.join(t.get_text() for t in artist.get_texts())}]"
    return f"{kind} {artist.get_text()!r}"


def overlaps(fig: plt.Figure) -> list[tuple[str, str]]:
    """Every pair of ``texts`` whose boxes overlap, as the renderer lays the figure out
    (``fig.canvas.get_renderer()``, ``get_window_extent``), after a draw that writes nothing."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    boxes = [(_words(kind, a), a.get_window_extent(renderer)) for kind, a in texts(fig)]
    found = []
    for (a, one), (b, other) in combinations(boxes, 2):
        width = min(one.x1, other.x1) - max(one.x0, other.x0)
        height = min(one.y1, other.y1) - max(one.y0, other.y0)
        if width > TOLERANCE_PX and height > TOLERANCE_PX:
            found.append((a, b))
    return found


def check_text(fig: plt.Figure, name: str) -> None:
    """Raise ``OverlapError`` naming the figure and the overlapping strings, if any."""
    found = overlaps(fig)
    if found:
        pairs = "; ".join(f"{a} and {b}" for a, b in found)
        raise OverlapError(f"figure {name}: {len(found)} overlapping text boxes: {pairs}")


def check_title(fig: plt.Figure, name: str) -> None:
    """Raise ``ValueError`` unless ``fig`` says what it shows: a suptitle, or the title of its
    one panel."""
    panels = [ax for ax in fig.axes if ax.get_visible()]
    titled = fig._suptitle is not None and fig._suptitle.get_text().strip()
    if not titled and not (len(panels) == 1 and panels[0].get_title().strip()):
        raise ValueError(f"figure {name} has no title (a suptitle, or its one panel's title)")


def save(fig: plt.Figure, stem: Path) -> list[Path]:
    """``stem``'s files (``<stem>.png``, ``<stem>.pdf``), once no text of the figure overlaps
    another (``check_text``) and it is titled (``check_title``; nothing is written otherwise);
    closes the figure."""
    try:
        check_text(fig, str(stem))
        check_title(fig, str(stem))
        stem.parent.mkdir(parents=True, exist_ok=True)
        paths = [stem.parent / name for name in figure_files(stem.name)]
        for path in paths:
            if path.suffix == ".png":
                fig.savefig(path, dpi=150, bbox_inches="tight")
            else:
                fig.savefig(path, bbox_inches="tight")
    finally:
        plt.close(fig)
    return paths
