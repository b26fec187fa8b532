"""``grpo-ablation figures``: every figure of one experiment, drawn from its tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import design_argument

HELP = "every figure (PNG and PDF)"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    design_argument(p)
    p.add_argument("--tables", type=Path, required=True, help="the tables job's folder")
    p.add_argument("--stage", help="only this stage's figures, written directly under --out")
    p.add_argument("--out", type=Path, required=True, help="the stage's figures folder")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.jobs.figures import write_figures
    from grpo_ablation.design.ablation import Design

    for path in write_figures(Design.load(a.design), a.tables, a.out, a.stage):
        print(path)
