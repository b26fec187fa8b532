"""Where a training run's time goes, step by step: the cost probe's clock.

A run's wall time is its set-up, its first step (which pays the kernels' compilation, the
allocator's growth and the caches' filling: the warm-up), its steady steps and its checkpoint
saves. Dividing the whole by the steps, as the probe did, charges the warm-up and the saves to
every step of a projected run. ``StepTimer`` is a ``transformers.TrainerCallback`` that times each
optimizer step (``on_step_begin`` to ``on_step_end``) and each save (``on_step_end`` to
``on_save``: the step's logging and the save) apart, and, where ``generate`` runs in the process
(not vLLM), the generation inside each step. On a GPU it waits for the device at each mark, so a
step's queued kernels count in that step (a probe's cost, not a run's).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from transformers import TrainerCallback


@dataclass(frozen=True)
class StepTimes:
    """What one run's steps took, split as the projection prices it."""

    warmup_s: float  # the first step
    step_s: float  # the mean of the later steps (the first, when there is no other)
    save_s: float  # the mean checkpoint save (0.0 when none was saved)
    generation_tokens_per_s: float | None  # completion positions decoded per generate second
    update_tokens_per_s: float | None  # sequence positions scored and trained per other second


def step_times(
    steps_s: list[float],
    saves_s: list[float],
    generation_s: list[float] | None = None,
    generated: list[int] | None = None,
    updated: list[int] | None = None,
) -> StepTimes:
    """The split of ``steps_s`` (each step's seconds, in order) and ``saves_s``; the throughputs
    over the steady steps from each step's generate seconds, positions decoded (rows x new
    tokens) and positions then scored and trained (rows x whole sequence)."""
    if not steps_s:
        raise ValueError("no training step was timed")
    steady = steps_s[1:] or steps_s
    span = slice(1, None) if len(steps_s) > 1 else slice(None)
    gen_tps = update_tps = None
    if generation_s and generated and updated and sum(generation_s[span]) > 0:
        gen_s = sum(generation_s[span])
        gen_tps = sum(generated[span]) / gen_s
        rest = sum(steady) - gen_s
        update_tps = sum(updated[span]) / rest if rest > 0 else None
    return StepTimes(
        warmup_s=steps_s[0],
        step_s=statistics.fmean(steady),
        save_s=statistics.fmean(saves_s) if saves_s else 0.0,
        generation_tokens_per_s=gen_tps,
        update_tokens_per_s=update_tps,
    )


def _wait_for_device() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class StepTimer(TrainerCallback):
    """Each step's and each save's seconds (``steps_s``, ``saves_s``) and each step's generate
    seconds and positions (``generation_s``, ``generated``, ``updated``); ``times()`` splits
    them."""

    def __init__(self) -> None:
        self.steps_s: list[float] = []
        self.saves_s: list[float] = []
        self.generation_s: list[float] = []
        self.generated: list[int] = []
        self.updated: list[int] = []
        self._mark: float | None = None

    def _now(self) -> float:
        _wait_for_device()
        return time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any):
        if model is not None and hasattr(model, "generate"):
            self.time_generate(model)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any):
        self.generation_s.append(0.0)
        self.generated.append(0)
        self.updated.append(0)
        self._mark = self._now()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any):
        if self._mark is not None:
            now = self._now()
            self.steps_s.append(now - self._mark)
            self._mark = now

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any):
        if self._mark is not None:
            now = self._now()
            self.saves_s.append(now - self._mark)
            self._mark = now

    def times(self) -> StepTimes:
        return step_times(
            self.steps_s, self.saves_s, self.generation_s, self.generated, self.updated
        )

    def time_generate(self, model: Any) -> None:
        """Wrap the model's ``generate`` (an attribute of the instance, which the keyed sampler's
        own wrapper then calls) to add its seconds and positions to the current step; the trainer
        hands it the bfloat16 copy that generates in the policy's place (generation_weights)."""
        generate = model.generate

        def timed(*a: Any, **kw: Any) -> Any:
            started = self._now()
            out = generate(*a, **kw)
            if self.generation_s:
                self.generation_s[-1] += self._now() - started
                ids = kw.get("input_ids", a[0] if a else None)
                sequences = getattr(out, "sequences", out)
                if ids is not None and hasattr(sequences, "shape"):
                    rows, width = sequences.shape[0], sequences.shape[1]
                    self.generated[-1] += rows * (width - ids.shape[1])
                    self.updated[-1] += rows * width
            return out

        model.generate = timed
