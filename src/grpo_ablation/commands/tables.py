"""``grpo-ablation tables``: the result and objective tables of one experiment."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import design_argument

HELP = "result and objective tables (CSV, Markdown, LaTeX)"
# The analysis and figure jobs too: pandas, SciPy, matplotlib and seaborn cost 3-4 s of a figure
# job's 8 here (2026-12-03).
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exp", type=Path, required=True, help="experiment directory")
    design_argument(p)
    p.add_argument(
        "--selection",
        type=Path,
        action="append",
        default=[],
        help="selection/<stage>.json of a stage whose winner another stage takes (repeatable)",
    )
    p.add_argument("--out", type=Path, required=True, help="the draw's tables/ folder")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.jobs.tables import write_all
    from grpo_ablation.design.ablation import Design, read_winners

    design = Design.load(a.design)
    winners = read_winners([p for p in a.selection if p.exists()])
    for path in write_all(a.exp, design, winners, a.out):
        print(path)
