"""``grpo-ablation design``: design.json, the checked design the analysis jobs read."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "check the config and write the design the analysis jobs read"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the design's config sections as JSON")
    p.add_argument("--out", type=Path, required=True, help="design.json")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.design.ablation import Design

    # The DAG checked the whole config; design.json lies in the experiment folder it names.
    print(Design(json.loads(a.config), a.out.parent).write(a.out))
