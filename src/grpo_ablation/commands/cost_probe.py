"""``grpo-ablation cost-probe``: a few training steps and an evaluation timed here, and the
configured DAG's cost projected from them (``grpo_ablation.training.cost_probe``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import configfile_argument

HELP = "time a few training steps and an evaluation here; project the DAG's cost"
# A command a person runs (``grpo-ablation --help`` lists it first).
ROLE = "run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    configfile_argument(p)
    p.add_argument("--steps", type=int, default=20, help="training steps to time")
    p.add_argument("--out", type=Path, help="write the measurement and projection as JSON")
    p.add_argument("--work", type=Path, help="keep the probe's run here (default: a temp dir)")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.training.cost_probe import probe_cost

    probe_cost(a.configfile, a.steps, a.out, a.work)
