"""Saving a matplotlib figure in every format of ``layout.FIGURE_FORMATS`` (PNG for the report,
PDF for print): one writer for the stage figures, the worked example and the push figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: jobs run without a display

import matplotlib.pyplot as plt

from grpo_ablation.layout import figure_files


def save(fig: plt.Figure, stem: Path) -> list[Path]:
    """``stem``'s files (``<stem>.png``, ``<stem>.pdf``); closes the figure."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.parent / name for name in figure_files(stem.name)]
    for path in paths:
        if path.suffix == ".png":
            fig.savefig(path, dpi=150, bbox_inches="tight")
        else:
            fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return paths
