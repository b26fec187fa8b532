"""``grpo-ablation pooled-figures``: the figures pooled over the base-policy draws."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import design_argument

HELP = "figures pooled over the base-policy draws: verdicts, each stage's effects"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    design_argument(p)
    p.add_argument("--tables", type=Path, required=True, help="the pooled job's tables folder")
    p.add_argument("--out", type=Path, required=True, help="the pooled folder (figures/ in it)")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.jobs.pooled_figures import write_pooled_figures
    from grpo_ablation.design.ablation import Design

    for path in write_pooled_figures(Design.load(a.design), a.tables, a.out):
        print(path)
