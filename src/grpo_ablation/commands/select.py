"""``grpo-ablation select``: a stage's winner, chosen on the validation split."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from grpo_ablation.commands import design_argument

HELP = "choose a stage's winner on the validation split"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stage", required=True, help="the stage whose winner to choose")
    design_argument(p)
    p.add_argument("--out", type=Path, required=True, help="the stage's selection (JSON)")
    p.add_argument("inputs", nargs="+", help="the validation summaries of the stage's runs")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.design.ablation import Design, select_winner
    from grpo_ablation.design.axes import BY_NAME
    from grpo_ablation.layout import cell_and_seed

    design = Design.load(a.design)
    stage = design.stage(a.stage)
    by_value: dict[str, list[dict[str, Any]]] = {}
    for path in a.inputs:
        cell = design.parse_cell(cell_and_seed(path)[0])
        final = json.loads(Path(path).read_text())["checkpoints"][-1]
        by_value.setdefault(BY_NAME[stage.primary].spell(cell[stage.primary]), []).append(final)
    choice = select_winner(by_value, stage.selection_metric, stage.name)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(choice, indent=2) + "\n")
    print(json.dumps(choice))
