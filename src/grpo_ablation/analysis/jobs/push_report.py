"""The push report job (``grpo-ablation push-report``): the push record's tables, reading and
figure, or a pilot's table."""

from __future__ import annotations

import json
from pathlib import Path

from grpo_ablation.analysis.plots.push import push_figure
from grpo_ablation.analysis.prose.push import push_reading
from grpo_ablation.analysis.push_tables import LABELS, push_tables
from grpo_ablation.layout import PUSH_FIGURE, PUSH_TABLE


def write_pilot(push_json: Path, table: Path) -> Path:
    """The pilot's table (``push_tables`` of push_pilot.json): its ``*_diff_sd`` columns are the
    per-replicate SDs of each choice's paired difference, what ``power.sd`` takes for a push
    metric."""
    table.parent.mkdir(parents=True, exist_ok=True)
    push_tables(json.loads(Path(push_json).read_text()))[0].to_csv(table, index=False)
    return table


def write_push(push_json: Path, tables: Path, figures: Path) -> list[Path]:
    """tables/push.csv, push_cosine.csv, push.md, push.html and figures/push.{png,pdf}."""
    from grpo_ablation.analysis.plots.saving import save
    from grpo_ablation.analysis.render import html_view, to_markdown

    record = json.loads(Path(push_json).read_text())
    table, cosine = push_tables(record)
    tables.mkdir(parents=True, exist_ok=True)
    table.to_csv(tables / PUSH_TABLE["push"], index=False)
    cosine.to_csv(tables / PUSH_TABLE["push_cosine"], index=False)
    shown = ["step", "choice", *(q for q in LABELS), "long_incorrect_share"]
    text = push_reading(table, cosine)
    (tables / PUSH_TABLE["push_md"]).write_text(text + "\n\n" + to_markdown(table[shown]) + "\n")
    view = html_view(text, table[shown], tables / PUSH_TABLE["push"])
    (tables / PUSH_TABLE["push_html"]).write_text(view)
    return [
        tables / PUSH_TABLE["push"],
        tables / PUSH_TABLE["push_cosine"],
        tables / PUSH_TABLE["push_md"],
        tables / PUSH_TABLE["push_html"],
        *save(push_figure(table), figures / PUSH_FIGURE),
    ]
