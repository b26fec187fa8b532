"""``grpo-ablation design``: design.json, the checked design the analysis jobs read."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "write the design and its analysis plan, which the analysis jobs read"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", type=Path, required=True, help="a JSON file: the design's config sections"
    )
    p.add_argument("--out", type=Path, required=True, help="design.json")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.hypotheses import analysis_plan

    # The DAG checked the whole config; design.json lies in the experiment folder it names.
    design = Design(json.loads(a.config.read_text()), a.out.parent)
    print(design.write(a.out, analysis_plan(design)))
