"""``grpo-ablation push-report``: the push's table and figure, or a pilot's table."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "table and figure of the push"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--push", type=Path, required=True, help="push.json (or a pilot's)")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the draw's folder: the tables go to its tables/, the figure to its figures/",
    )
    p.add_argument(
        "--pilot", action="store_true", help="a pilot's record: its table alone (push_pilot.csv)"
    )


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.jobs.push_report import write_pilot, write_push
    from grpo_ablation.layout import PUSH_FIGURE, PUSH_PILOT_TABLE, PUSH_TABLES, Tree

    out = Tree(a.out)
    if a.pilot:
        print(write_pilot(a.push, Path(out.table(PUSH_PILOT_TABLE))))
        return
    tables, figures = (Path(p).parent for p in (out.table(PUSH_TABLES[0]), out.figure(PUSH_FIGURE)))
    for path in write_push(a.push, tables, figures):
        print(path)
