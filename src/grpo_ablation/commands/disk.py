"""``grpo-ablation disk``: the disk a run's checkpoints need under each retention."""

from __future__ import annotations

import argparse

HELP = "the disk a run's checkpoints need under each retention"
# A command a person runs (``grpo-ablation --help`` lists it first).
ROLE = "run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n-params", type=int, required=True, help="parameters of the policy")
    p.add_argument("--dtype", default="float32", help="of the saved weights and the parameters")
    p.add_argument(
        "--optimizer-dtype",
        default=None,
        help="dtype of AdamW's moments (default: --dtype, as torch's AdamW)",
    )
    p.add_argument("--checkpoints-per-run", type=int, required=True, help="checkpoints a run keeps")
    p.add_argument("--runs", type=int, required=True, help="training runs of the design")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.design.disk import disk_report

    print(disk_report(a.n_params, a.dtype, a.optimizer_dtype, a.checkpoints_per_run, a.runs))
