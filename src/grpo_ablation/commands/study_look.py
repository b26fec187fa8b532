"""``grpo-ablation study-look``: judge a sequential study's look and write the next one."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import design_argument

HELP = "judge a sequential study's look, append it to its ledger, write the next look"


def add_arguments(p: argparse.ArgumentParser) -> None:
    design_argument(p)
    p.add_argument("--out", type=Path, help="also write the look's record here (JSON)")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.study import write_look
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.layout import Tree

    design = Design.load(a.design)
    record = write_look(design, a.out)
    for hid, verdict in record["decisions"].items():
        print(f"look {record['look']}: {hid} {verdict}")
    following = Path(Tree(design.folder()).study_next())
    print(f"next look: {following}" if following.exists() else "the study is over")
