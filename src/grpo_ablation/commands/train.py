"""``grpo-ablation train``: one (cell, seed) run, the ``train`` rule's job; it resumes from its
newest checkpoint if interrupted."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from grpo_ablation.commands import json_value, threads_argument

HELP = "train one (cell, seed) run; resumes if interrupted"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--base",
        type=Path,
        required=True,
        help="base/base_policy.json (what the base_policy rule writes), a model folder or a hub id",
    )
    p.add_argument("--data", type=Path, required=True, help="the data/ folder of the splits")
    p.add_argument("--out", type=Path, required=True, help="the run's folder")
    p.add_argument(
        "--training",
        type=json_value,
        default="{}",
        help="TrainingConfig fields as JSON or a JSON file (the run's options file)",
    )
    p.add_argument(
        "--task",
        type=json_value,
        default="{}",
        help="task config as JSON or a JSON file (prompts and reward)",
    )
    p.add_argument(
        "--compute",
        type=json_value,
        default="{}",
        help="the config's compute section as JSON or a JSON file (its keys optional)",
    )
    threads_argument(p)
    p.add_argument(
        "--report-to", default="none", help="live trackers, e.g. tensorboard,wandb (or none)"
    )
    p.add_argument(
        "--checkpoints",
        default="none",
        help="a folder for the run's checkpoints ($VARS expanded; the run's checkpoints/ links "
        "to it), or none: inside the run folder",
    )


def processes(a: argparse.Namespace) -> int:
    from grpo_ablation.design.options import ComputeConfig

    return ComputeConfig.of(a.compute).processes_per_train_job


def servable(a: argparse.Namespace) -> bool:
    """One process: a job of several is launched by torchrun/accelerate, never by the worker."""
    return processes(a) == 1


def run(a: argparse.Namespace) -> None:
    """Train one (cell, seed) run; resumes from its newest checkpoint if interrupted."""
    from grpo_ablation.design.options import ComputeConfig, TrainingConfig
    from grpo_ablation.device import resolve_device
    from grpo_ablation.process import bootstrap
    from grpo_ablation.settings import from_dict
    from grpo_ablation.training.launch import relaunch
    from grpo_ablation.training.train import link_checkpoints, train

    compute = ComputeConfig.of(a.compute)
    if a.checkpoints != "none":  # before the launcher starts several processes
        where = link_checkpoints(a.out, Path(os.path.expandvars(a.checkpoints)))
        print(f"checkpoints of {a.out} go to {where}")
    # N > 1: this process becomes `accelerate launch` of the same command (N copies of it); the
    # job worker never serves such a job, so sys.argv is the job's own command line.
    relaunch(
        list(sys.argv),
        processes(a),
        compute.accelerate_config,
        resolve_device(compute.device),
        compute.dtype,
    )
    # The job's threads are shared by its processes.
    bootstrap(threads=max(1, a.threads // int(os.environ.get("WORLD_SIZE", 1))))
    info = json.loads(a.base.read_text()) if a.base.is_file() else {"model": str(a.base)}
    train(
        info["model"],
        a.data,
        a.out,
        from_dict(TrainingConfig, a.training, "training"),
        a.task,
        compute=compute,
        revision=info.get("revision"),
        report_to=a.report_to,
    )
