"""``grpo-ablation token-weights``: the figure of the worked example's per-token weights."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "figure of the worked example's per-token weights"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--table", type=Path, required=True, help="the calculations job's token_weights.csv"
    )
    p.add_argument("--out", type=Path, required=True, help="the figure's folder")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.jobs.figures import write_weight_figure

    for path in write_weight_figure(a.table, a.out):
        print(path)
