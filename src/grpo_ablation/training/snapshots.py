"""Curve snapshots: the policy's weights at the steps of the efficiency curve.

The checkpoints kept for resuming are few (``save_steps``); the efficiency curve
(``grpo_ablation.analysis.efficiency``) needs the policy at more steps, early ones above all.
``CurveSnapshots`` is a ``transformers.TrainerCallback`` whose ``on_step_end`` (after the optimizer
step, ``state.global_step`` counting it) saves the weights, config and tokenizer at each step of
``TrainingConfig.curve_steps`` into ``<run>/curve/step-<N>/``: no optimizer state, nothing that
resumes. It draws no random numbers and leaves the model as it found it, so a run trains the same
with or without it (tested). A snapshot is written into a temporary folder and renamed, so a job
killed while writing leaves none half-written; a resumed run writes the snapshots after its resume
point again, with the same weights.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from grpo_ablation.layout import CURVE_POLICIES

_SNAPSHOT = re.compile(r"^step-(\d+)$")


def snapshot_dir(run: Path, step: int) -> Path:
    return Path(run) / CURVE_POLICIES / f"step-{step}"


def snapshots(run: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every complete snapshot of ``run``, by step."""
    root = Path(run) / CURVE_POLICIES
    found = [(int(m.group(1)), p) for p in root.glob("step-*") if (m := _SNAPSHOT.match(p.name))]
    return sorted(found)


class CurveSnapshots(TrainerCallback):
    def __init__(self, run: Path, steps: list[int], tokenizer: Any) -> None:
        self.run, self.steps, self.tokenizer = Path(run), set(steps), tokenizer

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any):
        if state.global_step not in self.steps or not state.is_world_process_zero:
            return
        final = snapshot_dir(self.run, state.global_step)
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        self.tokenizer.save_pretrained(tmp)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
