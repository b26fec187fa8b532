"""``grpo-ablation push-report``: the push's table and figure, or a pilot's table."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "table and figure of the push"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--push", type=Path, required=True, help="push.json")
    p.add_argument("--tables", type=Path, help="tables/push.csv (its folder)")
    p.add_argument("--figure", type=Path, help="figures/push.png (its folder)")
    p.add_argument("--pilot", type=Path, help="a pilot's push_pilot.csv (its table alone)")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.push import write_pilot, write_push

    if a.pilot:
        print(write_pilot(a.push, a.pilot))
        return
    if a.tables is None or a.figure is None:
        raise ValueError("push-report: --tables and --figure, or --pilot")
    for path in write_push(a.push, a.tables.parent, a.figure.parent):
        print(path)
