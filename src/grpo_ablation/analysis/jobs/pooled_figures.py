"""The pooled figures job (``grpo-ablation pooled-figures``): the pooled job's tables drawn
(``analysis/plots/over_draws.py``, each stage's effect plot over draws): nothing is pooled again."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: jobs run without a display

from grpo_ablation.analysis import loading
from grpo_ablation.analysis.plots import per_stage
from grpo_ablation.analysis.plots.over_draws import verdicts_figure
from grpo_ablation.analysis.plots.saving import save
from grpo_ablation.design.ablation import Design
from grpo_ablation.design.hypotheses import declared
from grpo_ablation.layout import POOLED_STAGE_FIGURES, POOLED_TABLE, POOLED_VERDICTS, Tree


def write_pooled_figures(design: Design, tables: Path, out: Path) -> list[Path]:
    """``out/figures/<stage>/effects.{png,pdf}`` per stage and, with declared hypotheses,
    ``out/figures/verdicts.{png,pdf}``, from the pooled job's tables in ``tables``; refuses to
    have written other files than layout declares (``Tree.pooled_figures``)."""
    effects = loading.read_table(tables / POOLED_TABLE["effects"])
    per_draw = loading.read_table(tables / POOLED_TABLE["draws"])
    verdicts = loading.read_table(tables / POOLED_TABLE["hypotheses"])
    hypotheses = {h.id: h for h in declared(design)}
    palette = per_stage.cell_palette(design.all_cells())
    tree, draws = Tree(out), len(design.draws)
    paths: list[Path] = []
    if hypotheses:
        fig = verdicts_figure(verdicts, hypotheses)
        per_stage.suptitle(
            fig,
            f"Declared hypotheses pooled over {draws} base-policy draws: each 90% interval over "
            "the draws against its margin or minimum effect",
        )
        paths += save(fig, Path(tree.figure(POOLED_VERDICTS)))
    for stage in design.stage_names:
        of_stage = effects[effects["stage"] == stage]
        made = {
            "effects": per_stage.effects_figure(
                of_stage, palette, per_draw[per_draw["stage"] == stage]
            )
        }
        if tuple(made) != POOLED_STAGE_FIGURES:  # the DAG names these files from layout
            raise RuntimeError(
                f"drew {tuple(made)}, not POOLED_STAGE_FIGURES {POOLED_STAGE_FIGURES}"
            )
        for kind, fig in made.items():
            per_stage.suptitle(
                fig, f"{design.stage_title(stage)}, pooled over {draws} base-policy draws"
            )
            paths += save(fig, Path(tree.figure(kind, stage)))
    wanted = tree.pooled_figures(design.stage_names, bool(hypotheses))
    if sorted(map(str, paths)) != sorted(wanted):
        raise RuntimeError(f"the pooled figures job wrote {paths}, not the declared {wanted}")
    return paths
