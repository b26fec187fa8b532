"""The figures job (``grpo-ablation figures``, one per stage) and the worked example's figure: the
tables job's files read (``FigureData``) and drawn (``analysis/plots/per_stage.py``); nothing is
computed again."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: jobs run without a display

import pandas as pd

from grpo_ablation.analysis import STAGE_FIGURES, loading
from grpo_ablation.analysis.plots.per_stage import (
    accuracy_figure,
    cell_palette,
    clip_truncation_figure,
    coupling_figure,
    effects_figure,
    efficiency_figure,
    groups_figure,
    length_figure,
    mixed_figure,
    suptitle,
    weight_figure,
)
from grpo_ablation.analysis.plots.saving import save
from grpo_ablation.analysis.result_tables import BASE_LABEL
from grpo_ablation.design.ablation import Design
from grpo_ablation.layout import TABLE, TOKEN_WEIGHTS, figure_files


@dataclass(frozen=True)
class FigureData:
    """What the figures draw, read from the tables job's files (``layout.TABLES``): the effects
    table, the test-accuracy curves, the per-step diagnostics, the calibration's bins, the
    coupling per step, the efficiency-curve points and each run's fit, and the base policy's
    sampled accuracy R0 (the results table's base row). Nothing here is computed again."""

    effects: pd.DataFrame
    curves: pd.DataFrame
    steps: pd.DataFrame
    bins: pd.DataFrame
    coupling: pd.DataFrame
    points: pd.DataFrame
    fits: pd.DataFrame
    R0: float

    @classmethod
    def read(cls, folder: Path) -> FigureData:
        """From the tables job's folder."""
        results = loading.read_results(folder / TABLE["results"])
        base = results.loc[results["cell"] == BASE_LABEL, "sampled_final_mean"]
        return cls(
            effects=loading.read_table(folder / TABLE["effects"]),
            curves=loading.read_table(folder / TABLE["accuracy_curves"]),
            steps=loading.read_table(folder / TABLE["training_steps"]),
            bins=loading.read_table(folder / TABLE["calibration_bins"]),
            coupling=loading.read_table(folder / TABLE["coupling_steps"]),
            points=loading.read_table(folder / TABLE["efficiency_points"]),
            fits=loading.read_table(folder / TABLE["efficiency_fits"]),
            R0=float(base.iloc[0]),
        )

    def of_stage(self, stage: str) -> FigureData:
        """The rows of one stage."""
        frames = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if isinstance(getattr(self, f.name), pd.DataFrame)
        }
        return replace(
            self,
            **{
                name: frame[frame["stage"] == stage] if "stage" in frame else frame
                for name, frame in frames.items()
            },
        )


def write_stage_figures(data: FigureData, palette, out: Path, title: str) -> list[Path]:
    """``out/<kind>.{png,pdf}`` for every kind of STAGE_FIGURES, from one stage's ``data``
    (``FigureData.of_stage``); refuses to have written other files than layout declares."""
    s = data.steps
    out.mkdir(parents=True, exist_ok=True)
    made = {
        "effects": effects_figure(data.effects, palette),
        "accuracy": accuracy_figure(data.curves, palette),
        "groups": groups_figure(s, palette),
        "length": length_figure(s, palette),
        "clip_truncation": clip_truncation_figure(s, palette),
        "mixed": mixed_figure(data.bins, sorted(s["cell"].unique()), palette),
        "coupling": coupling_figure(data.coupling, palette),
        "efficiency": efficiency_figure(data.points, data.fits, data.R0, palette),
    }
    if tuple(made) != STAGE_FIGURES:  # the DAG names these files from STAGE_FIGURES
        raise RuntimeError(f"figures drawn {tuple(made)} differ from STAGE_FIGURES {STAGE_FIGURES}")
    paths: list[Path] = []
    for kind, fig in made.items():
        suptitle(fig, title)
        paths += save(fig, out / kind)
    # the files layout declares for a stage (Tree.stage_figures), which the DAG expects
    declared = [out / name for kind in STAGE_FIGURES for name in figure_files(kind)]
    if paths != declared:
        raise RuntimeError(f"the figures job wrote {paths}, not the declared {declared}")
    return paths


def write_weight_figure(table: Path, out: Path) -> list[Path]:
    """The worked example's figure, drawn from the calculations job's token_weights.csv."""
    out.mkdir(parents=True, exist_ok=True)
    return save(weight_figure(pd.read_csv(table)), out / TOKEN_WEIGHTS)


def write_figures(design: Design, folder: Path, out: Path, stage: str | None = None) -> list[Path]:
    """``out/<kind>.{png,pdf}`` for ``stage``, or the same under ``out/<stage>/`` for every stage
    of the tables, drawn from the tables job's files in ``folder`` (``FigureData``); the palette
    comes from the design, so separate calls agree on colours."""
    data = FigureData.read(folder)
    palette = cell_palette(design.all_cells())
    stages = [stage] if stage is not None else list(dict.fromkeys(data.effects["stage"]))
    paths = []
    for name in stages:
        where = out if stage is not None else out / name
        paths += write_stage_figures(data.of_stage(name), palette, where, design.stage_title(name))
    return paths
