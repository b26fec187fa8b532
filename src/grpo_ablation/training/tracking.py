"""Live curves where users look: TensorBoard, Weights & Biases or Trackio, through TRL's
``report_to``, each run named by its cell and seed and carrying its objective record as its
config. Tracking never changes what a run computes (the rule passes it as a resource, not a
parameter, so switching it on retrains nothing).

TensorBoard event files go to ``<run>/tensorboard/``, so ``tensorboard --logdir results/<exp>/runs``
lists every run under its cell path. W&B writes under ``<run>/wandb/`` in offline mode unless
``WANDB_MODE`` says otherwise (compute nodes rarely reach the internet; ``wandb sync`` uploads
later).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grpo_ablation.design.tracking import TRACKERS


def parse(report_to: str) -> list[str]:
    """``tensorboard,wandb`` -> the trackers; ``none`` or empty -> none; anything else is named."""
    names = [n.strip() for n in report_to.split(",") if n.strip() and n.strip() != "none"]
    unknown = sorted(set(names) - set(TRACKERS))
    if unknown:
        raise ValueError(
            f"tracking.report_to: unknown {unknown}; expected some of {list(TRACKERS)}"
        )
    return names


def run_name(out: Path) -> str:
    """``std=sample/agg=sequence_mean/G=8/seed=0``: the run folder below ``runs/``."""
    from grpo_ablation.layout import cell_and_seed, run_key

    try:
        cell, seed = cell_and_seed(out.resolve())
    except ValueError:  # a run folder outside a results tree
        return out.name
    return run_key(cell, seed)


def setup(
    trackers: list[str], out: Path, record: dict[str, Any], main: bool = True
) -> tuple[list[str], list[Any]]:
    """What to hand TRL: the ``report_to`` list and the extra callbacks. TensorBoard is built here
    (its folder fixed in the run, the record written first; by the main process only); the others
    go through ``report_to`` and receive the record as config when training begins."""
    from transformers import TrainerCallback

    callbacks: list[Any] = []
    report_to = [t for t in trackers if t != "tensorboard"]
    if "tensorboard" in trackers and main:
        from tensorboardX import SummaryWriter
        from transformers.integrations import TensorBoardCallback

        writer = SummaryWriter(logdir=str(out / "tensorboard"))
        writer.add_text("objective", f"```\n{json.dumps(record, indent=1, sort_keys=True)}\n```")
        callbacks.append(TensorBoardCallback(tb_writer=writer))
    if "wandb" in trackers:
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ["WANDB_DIR"] = str(out)

    class ObjectiveAsConfig(TrainerCallback):
        """After the integrations have started their runs: the objective record as run config."""

        def on_train_begin(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            if "wandb" in report_to:
                import wandb

                if wandb.run is not None:
                    wandb.run.config.update({"objective": record}, allow_val_change=True)

    if report_to:
        callbacks.append(ObjectiveAsConfig())
    return report_to, callbacks
