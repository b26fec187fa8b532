"""The pooled job (``grpo-ablation pooled``): the analysis over base-policy draws, the draw as the
unit (``analysis/draws.py``), written as ``layout.POOLED_TABLES`` and the pooled reading."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from grpo_ablation.analysis import efficiency, hypotheses, render, result_tables
from grpo_ablation.analysis.draws import (
    UNIT,
    DrawInputs,
    base_means,
    consistency,
    draw_means,
    mean_predictions,
    per_draw_contrasts,
)
from grpo_ablation.analysis.prose.draws import consistency_reading, pooled_opening
from grpo_ablation.analysis.prose.effects import effects_reading
from grpo_ablation.analysis.prose.efficiency import efficiency_reading
from grpo_ablation.design.ablation import Design
from grpo_ablation.design.hypotheses import declared, planned_roles
from grpo_ablation.design.records import draw_source
from grpo_ablation.layout import (
    POOLED_READING,
    POOLED_READING_VIEW,
    POOLED_TABLE,
    POOLED_TABLES,
)

READING = POOLED_READING


def write_pooled(design: Design, out: Path) -> list[Path]:
    """``out/tables/`` (``POOLED_TABLES``) and ``out/pooled_reading.{rst,html}``: the draws'
    means, the results table and the declared hypotheses' verdicts with the draw as the unit,
    each contrast per draw, and the reading (verdicts first), each text for people with its HTML
    view; from each draw's ``DrawInputs``."""
    inputs = {d: DrawInputs.read(design, d) for d in design.draws}
    first, rows = next((d, i.rows) for d, i in inputs.items())
    for d, other in ((d, i.rows) for d, i in inputs.items()):
        if other != rows:
            stages = sorted({r["stage"] for r in rows if r not in other})
            raise ValueError(
                f"draw {d} runs other cells than draw {first} in stages {stages} (a winner chosen "
                "within each draw differs), so the draws cannot be pooled cell by cell; fix that "
                "axis in the stage's `fixed` instead of taking the winner"
            )
    runs = pd.concat([i.runs for i in inputs.values()], ignore_index=True)
    pooled = draw_means(runs)
    table = result_tables.results_table(pooled, base_means(inputs.values()))
    titles = {r["stage"]: design.stage_title(r["stage"]) for r in rows}
    effects = result_tables.effects_table(
        table, titles, planned_roles(design, rows), mean_predictions(inputs.values())
    )
    push = hypotheses.push_records(design, [draw_source(design, d) for d in design.draws])
    verdicts = hypotheses.verdicts_table(declared(design), pooled, rows, design, push, UNIT)
    within = per_draw_contrasts(runs)
    agreement = consistency(effects, within)

    folder = out / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / POOLED_TABLE["results"], index=False)
    pooled.drop(columns="singles").to_csv(folder / POOLED_TABLE["draw_means"], index=False)
    caption = (
        f"Pooled over {len(design.draws)} base-policy draws: each draw contributes the "
        "mean over its seeds; intervals are 95% t intervals over the draws (Δ pairs cells within "
        "a draw)."
    )
    shown = result_tables.display_table(table)
    (folder / POOLED_TABLE["results_md"]).write_text(caption + "\n\n" + render.to_markdown(shown))
    view = render.html_view(caption, shown, folder / POOLED_TABLE["results"])
    (folder / POOLED_TABLE["results_html"]).write_text(view)
    verdicts.to_csv(folder / POOLED_TABLE["hypotheses"], index=False)
    opening = pooled_opening(design, verdicts)
    (folder / POOLED_TABLE["hypotheses_rst"]).write_text(opening + "\n" + render.to_rst(verdicts))
    view = render.html_view(opening, verdicts, folder / POOLED_TABLE["hypotheses"])
    (folder / POOLED_TABLE["hypotheses_html"]).write_text(view)
    within.to_csv(folder / POOLED_TABLE["draws"], index=False)
    agreement.to_csv(folder / POOLED_TABLE["agreement"], index=False)
    across = consistency_reading(agreement)
    (folder / POOLED_TABLE["agreement_md"]).write_text(
        across + "\n" + render.to_markdown(agreement)
    )
    view = render.html_view(across, agreement, folder / POOLED_TABLE["agreement"])
    (folder / POOLED_TABLE["agreement_html"]).write_text(view)
    effects.to_csv(folder / POOLED_TABLE["effects"], index=False)
    curves = efficiency.efficiency_table(table, runs)
    result_tables.write_efficiency(curves, folder, f"{caption} {result_tables.EFFICIENCY_CAPTION}")
    text = effects_reading(effects, opening, UNIT)
    late = efficiency_reading(curves, UNIT, declared=hypotheses.uncounted_pairs(verdicts, effects))
    text = text.rstrip("\n") + "\n\n" + late
    text = text.rstrip("\n") + "\n\n" + across
    (out / READING).write_text(text)
    (out / POOLED_READING_VIEW).write_text(render.html_view(text))
    return [*(folder / n for n in POOLED_TABLES), out / READING, out / POOLED_READING_VIEW]
