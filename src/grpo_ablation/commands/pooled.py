"""``grpo-ablation pooled``: tables, verdicts and reading pooled over the base-policy draws."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import design_argument

HELP = "tables, verdicts and reading pooled over the base-policy draws"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    design_argument(p)
    p.add_argument("--out", type=Path, required=True, help="the pooled folder")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.jobs.pooled import write_pooled
    from grpo_ablation.design.ablation import Design

    for path in write_pooled(Design.load(a.design), a.out):
        print(path)
