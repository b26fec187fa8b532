"""``grpo-ablation diagnostics``: per-step and per-run diagnostics of one run's rollout log."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "per-step and per-run diagnostics of one run's rollout log"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=Path, required=True, help="run directory")
    p.add_argument(
        "--out", type=Path, required=True, help="the run's diagnostics folder (steps.csv, summary)"
    )


def run(a: argparse.Namespace) -> None:
    """Per-step and per-run diagnostics of one run's rollout log."""
    from grpo_ablation.analysis.jobs.diagnostics import write_run_diagnostics

    for path in write_run_diagnostics(a.run, a.out):
        print(path)
