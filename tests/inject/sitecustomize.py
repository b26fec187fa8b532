"""Fault injection for the tests, outside the package: a test that sets ``GRPO_FAULT_*`` puts this
folder first on ``PYTHONPATH`` (``faults_env`` in conftest.py), so every job's interpreter loads
it at start-up and wraps two library functions as they are imported:

- ``GRPO_FAULT_STEP_SLEEP=<seconds>``: every training step sleeps, so a test can kill a job
  between its checkpoints;
- ``GRPO_FAULT_FAIL_EVAL_ONCE=<marker file>``: the first evaluation raises (and writes the
  marker), so a test can check the retry retrains nothing.

The variables are read when the wrapped functions are called, so a job worker started before
a test set them still honours them in its children.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any


def _sleepy_train(module: ModuleType) -> None:
    train = module.train

    def train_with_slow_steps(*args: Any, **kwargs: Any) -> Any:
        seconds = float(os.environ.get("GRPO_FAULT_STEP_SLEEP") or 0)
        if seconds:
            from transformers import TrainerCallback

            class Sleep(TrainerCallback):
                def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                    time.sleep(seconds)

            kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), Sleep()]
        return train(*args, **kwargs)

    module.train = train_with_slow_steps


def _failing_evaluation(module: ModuleType) -> None:
    evaluate = module.evaluate_checkpoints

    def evaluate_failing_once(*args: Any, **kwargs: Any) -> Any:
        marker = os.environ.get("GRPO_FAULT_FAIL_EVAL_ONCE")
        if marker and not Path(marker).exists():
            Path(marker).write_text("failed once\n")
            raise RuntimeError(f"injected evaluation failure (GRPO_FAULT_FAIL_EVAL_ONCE={marker})")
        return evaluate(*args, **kwargs)

    module.evaluate_checkpoints = evaluate_failing_once


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "grpo_ablation.training.train": _sleepy_train,
    "grpo_ablation.evaluation.evaluate": _failing_evaluation,
}


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module: ModuleType) -> None:
            exec_module(module)
            PATCHES[name](module)

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


if any(k.startswith("GRPO_FAULT_") for k in os.environ):
    sys.meta_path.insert(0, _PatchAfterImport())
