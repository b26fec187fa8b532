"""Checkpoint retention: every checkpoint keeps its weights, only the newest keeps optimizer state.

Every checkpoint of a run is evaluated later, so its weights stay. Optimizer and scheduler state
are needed only to resume, and a run resumes from its newest complete checkpoint
(``train.last_checkpoint``), so older checkpoints can drop them:

* ``KeepOptimizerStateOfNewest(policy="newest")`` is a ``transformers.TrainerCallback``. Its
  ``on_save`` runs after ``Trainer._save_checkpoint`` has returned (transformers 5.24,
  ``Trainer._maybe_log_save_evaluate``: ``self._save_checkpoint(model, trial)`` and then
  ``self.callback_handler.on_save(...)``), i.e. after the model, optimizer, scheduler, scaler,
  RNG state and ``trainer_state.json`` of ``checkpoint-<global_step>`` are written (TRL's
  ``GRPOTrainer._save_checkpoint`` wraps the same call). It then deletes optimizer and scheduler
  state from every *older complete* checkpoint (one holding ``trainer_state.json``) of
  ``args.output_dir``; the checkpoint just saved, newer ones, and any without
  ``trainer_state.json`` (being written, or left half-written by a killed run) are never touched.
  ``policy="all"`` keeps everything (the callback does nothing).
* ``grpo_ablation.design.disk`` (``grpo-ablation disk``) states the disk needs.

What is deleted (names from the transformers 5.24 / accelerate Trainer source):
``optimizer.pt`` and ``scheduler.pt`` (``Trainer._save_optimizer_and_scheduler``),
``rank<i>-of-<n>-optimizer.pt`` (XLA FSDP), ``optimizer.bin``, ``optimizer_<i>.bin``,
``optimizer_<i>_rank<r>.bin`` and the DCP folder ``optimizer_<i>/`` (accelerate's
``save_fsdp_optimizer``), and DeepSpeed's ``global_step<N>/`` folder (``engine.save_checkpoint``;
transformers finds it with ``glob("global_step*")`` on resume). Kept: weights (``model*.safetensors``,
``pytorch_model*``, ``pytorch_model_fsdp*``, adapters), config and tokenizer, ``trainer_state.json``,
``rng_state*.pth``, ``scaler.pt``, ``training_args.bin`` and TRL's ``entropy_ctrl_state.json``
(all small). A checkpoint without standalone weights (DeepSpeed ZeRO-3 without
``stage3_gather_16bit_weights_on_model_save``: its weights exist only inside ``global_step<N>/``,
recovered by ``zero_to_fp32.py`` from the optimizer shards) is left whole, with a warning.
Resuming from an older, pruned checkpoint is no longer possible; the newest one resumes as before.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

from transformers import TrainerCallback

from grpo_ablation.device import OPTIMIZER_STATE_POLICIES
from grpo_ablation.layout import TRAINER_STATE, checkpoint_step

logger = logging.getLogger(__name__)

POLICIES = OPTIMIZER_STATE_POLICIES
# Optimizer / scheduler state written by Trainer._save_optimizer_and_scheduler and accelerate.
_STATE_FILES = re.compile(
    r"^(optimizer\.pt|scheduler\.pt|optimizer\.bin|optimizer_\d+\.bin|optimizer_\d+_rank\d+\.bin"
    r"|rank\d+-of-\d+-optimizer\.pt)$"
)
_STATE_DIRS = re.compile(r"^(optimizer_\d+|global_step\d+)$")  # FSDP DCP shards, DeepSpeed
_WEIGHTS = re.compile(
    r"^(model(-\d+-of-\d+)?\.safetensors|model\.safetensors\.index\.json"
    r"|pytorch_model(-\d+-of-\d+)?\.bin|pytorch_model\.bin\.index\.json"
    r"|adapter_model\.(safetensors|bin)|pytorch_model_fsdp.*)$"
)


def _step(path: Path) -> int | None:
    step = checkpoint_step(path)
    return step if step is not None and path.is_dir() else None


def optimizer_state_paths(checkpoint: Path) -> list[Path]:
    """The optimizer/scheduler state inside one checkpoint folder (files and shard folders)."""
    found = []
    for p in sorted(checkpoint.iterdir()):
        if (p.is_file() and _STATE_FILES.match(p.name)) or (
            p.is_dir() and _STATE_DIRS.match(p.name)
        ):
            found.append(p)
    return found


def has_standalone_weights(checkpoint: Path) -> bool:
    return any(_WEIGHTS.match(p.name) for p in checkpoint.iterdir())


def prune_optimizer_state(checkpoints: Path, keep_step: int) -> list[Path]:
    """Delete optimizer/scheduler state from every complete checkpoint older than ``keep_step``.

    Never touches ``checkpoint-<keep_step>``, newer checkpoints, or a checkpoint without
    ``trainer_state.json``. Returns the deleted paths."""
    deleted: list[Path] = []
    if not checkpoints.is_dir():
        return deleted
    for ckpt in sorted(checkpoints.iterdir()):
        step = _step(ckpt)
        if step is None or step >= keep_step or not (ckpt / TRAINER_STATE).exists():
            continue
        state = optimizer_state_paths(ckpt)
        if not state:
            continue
        if not has_standalone_weights(ckpt):
            logger.warning(
                "%s has no standalone weights (its weights live in the optimizer shards, e.g. "
                "DeepSpeed ZeRO-3 without gathered 16-bit weights): its optimizer state is kept",
                ckpt,
            )
            continue
        for p in state:
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)  # another saver on a shared disk may have been first
            deleted.append(p)
    return deleted


class KeepOptimizerStateOfNewest(TrainerCallback):
    """Keep optimizer/scheduler state only in the newest checkpoint (``policy="newest"``), or in
    all of them (``policy="all"``: does nothing). Weights are always kept."""

    def __init__(self, policy: str = "newest") -> None:
        if policy not in POLICIES:
            raise ValueError(
                f"unknown optimizer-state policy {policy!r}; expected one of {POLICIES}"
            )
        self.policy = policy
        self.deleted: list[Path] = []

    def on_save(self, args, state, control, **kwargs):
        # should_save: the process that writes checkpoints (world process 0, or each node's local
        # process 0 with save_on_each_node), so only one process per disk prunes.
        if self.policy == "all" or not args.should_save:
            return
        self.deleted += prune_optimizer_state(Path(args.output_dir), state.global_step)
