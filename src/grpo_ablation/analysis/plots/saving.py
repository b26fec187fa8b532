"""Saving a matplotlib figure in every format of ``layout.FIGURE_FORMATS`` (PNG for the report,
PDF for print): one writer for the stage figures, the pooled figures, the worked example and the
push figure. Before it writes, every figure is checked for a title, for text that runs into
other text (``overlaps``: titles, axis labels, tick labels, legends, the suptitle and the figure's notes)
and for a legend that covers data (``legend_overlaps``: points, lines, error bars, bands, bars
and the labels in a panel), so a layout that collides under some config fails its job, named,
instead of reaching a reader."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")  # headless: jobs run without a display

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.collections import Collection
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.path import Path as Curve
from matplotlib.text import Text
from matplotlib.transforms import Bbox

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


def _near(points: np.ndarray, box: Bbox, radius: float) -> bool:
    """Whether a marker of ``radius`` pixels at any of ``points`` (display) reaches into ``box``."""
    points = points[np.isfinite(points).all(axis=1)]
    x0, y0, x1, y1 = box.padded(radius).extents
    return bool(
        (
            (points[:, 0] > x0) & (points[:, 0] < x1) & (points[:, 1] > y0) & (points[:, 1] < y1)
        ).any()
    )


def _crosses(curve: Curve, box: Bbox, filled: bool) -> bool:
    """Whether a drawn path (display) runs through ``box``, or, ``filled``, covers any of it; a
    path broken by NaNs (a gap in a line) is tested piece by piece."""
    if filled:
        return curve.intersects_bbox(box, filled=True)
    points = curve.vertices
    finite = np.isfinite(points).all(axis=1)
    pairs = finite[:-1] & finite[1:]
    return any(Curve(points[i : i + 2]).intersects_bbox(box) for i in np.flatnonzero(pairs))


def _covered(artist: Artist, ax: Axes, box: Bbox, renderer: RendererBase) -> bool:
    """Whether ``artist``, drawn in ``ax``'s data coordinates, shows within ``box``. Reference
    lines and spans across a panel (``axhline``, ``axvspan``: in axes coordinates) are not data,
    and any legend inside a panel would cross them."""
    dpi = ax.figure.dpi
    if isinstance(artist, Text):
        extent = artist.get_window_extent(renderer)
        return extent.width > 0 and extent.overlaps(box)
    if isinstance(artist, Line2D):
        if artist.get_transform() is not ax.transData:
            return False
        points = artist.get_transform().transform(artist.get_xydata())
        line = artist.get_linestyle() not in ("None", "none", "", " ")
        marker = artist.get_marker() not in (None, "None", "none", "", " ")
        radius = artist.get_markersize() * dpi / 72 / 2
        return (line and _crosses(Curve(points), box, False)) or (
            marker and _near(points, box, radius)
        )
    if isinstance(artist, Collection):
        filled = any(c[3] > 0 for c in artist.get_facecolor())
        if artist.get_transform() is ax.transData:
            to = artist.get_transform()
            return any(_crosses(to.transform_path(p), box, filled) for p in artist.get_paths())
        if artist.get_offset_transform() is ax.transData:  # markers placed at data points
            points = ax.transData.transform(artist.get_offsets())
            sizes = artist.get_sizes()
            radius = float(np.sqrt(sizes.max()) * dpi / 72 / 2) if len(sizes) else 0.0
            return _near(points, box, radius)
        return False
    if isinstance(artist, Patch):
        if artist.get_data_transform() is not ax.transData:
            return False
        curve = artist.get_transform().transform_path(artist.get_path())
        return _crosses(curve, box, artist.get_fill())
    return False


def legend_overlaps(fig: plt.Figure) -> list[tuple[str, str]]:
    """Every legend of ``fig`` (the figure's and the panels') with what it covers in any panel:
    a data point, line, error bar, band, bar or a label among them, each as drawn (clipped to its
    panel), less ``TOLERANCE_PX`` on each side of the legend's box."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
    found = []
    for legend in legends:
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer).padded(-TOLERANCE_PX)
        for ax in fig.axes:
            if not ax.get_visible():
                continue
            inside = Bbox.intersection(box, ax.bbox)
            for artist in (*ax.lines, *ax.collections, *ax.patches, *ax.texts):
                if not artist.get_visible():
                    continue
                clipped = artist.get_clip_on() and not isinstance(artist, Text)
                where = inside if clipped else box
                if where is not None and _covered(artist, ax, where, renderer):
                    what = artist.get_text() if isinstance(artist, Text) else artist.get_label()
                    panel = ax.get_title() or ax.get_title("left") or f"panel {fig.axes.index(ax)}"
                    found.append(
                        (_words("legend", legend), f"{type(artist).__name__} {what!r} in {panel!r}")
                    )
    return found


def check_legends(fig: plt.Figure, name: str) -> None:
    """Raise ``OverlapError`` naming the figure, the legend and what it covers, if any."""
    found = legend_overlaps(fig)
    if found:
        pairs = "; ".join(f"{a} over {b}" for a, b in found)
        raise OverlapError(f"figure {name}: {len(found)} legends over data: {pairs}")


def check_title(fig: plt.Figure, name: str) -> None:
    """Raise ``ValueError`` unless ``fig`` says what it shows: a suptitle, or the title of its
    one panel."""
    panels = [ax for ax in fig.axes if ax.get_visible()]
    titled = fig._suptitle is not None and fig._suptitle.get_text().strip()
    if not titled and not (len(panels) == 1 and panels[0].get_title().strip()):
        raise ValueError(f"figure {name} has no title (a suptitle, or its one panel's title)")


def save(fig: plt.Figure, stem: Path) -> list[Path]:
    """``stem``'s files (``<stem>.png``, ``<stem>.pdf``), once no text of the figure overlaps
    another (``check_text``), no legend covers data (``check_legends``) and it is titled
    (``check_title``; nothing is written otherwise); closes the figure. The PDF holds no creation
    date, so a figure drawn again is byte-identical."""
    try:
        check_text(fig, str(stem))
        check_legends(fig, str(stem))
        check_title(fig, str(stem))
        stem.parent.mkdir(parents=True, exist_ok=True)
        paths = [stem.parent / name for name in figure_files(stem.name)]
        for path in paths:
            if path.suffix == ".png":
                fig.savefig(path, dpi=150, bbox_inches="tight")
            else:  # no creation date: a figure drawn again from the same tables is the same file
                fig.savefig(path, bbox_inches="tight", metadata={"CreationDate": None})
    finally:
        plt.close(fig)
    return paths
