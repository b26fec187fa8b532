"""``grpo-ablation calculations``: the worked-numbers sheet."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write the worked-numbers sheet (Markdown and CSV)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the folder of the worked-numbers sheet and its table",
    )


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.objective.calculations import write_sheet

    for path in write_sheet(a.out):
        print(path)
