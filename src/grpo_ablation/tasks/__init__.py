"""The task interface: what every rule and the trainer need to know about a task, in one place.

A task is one object behind the small protocol :class:`Task`: it writes the fixed splits with their
manifest, turns a split row into the training prompt (a chat conversation when the task declares a
chat template), scores completions (the reward), declares the answer rule that the independent
evaluation implements again, fetches its hub data for the prefetch rule, and, for a locally warm-
started base, gives the supervised (prompt, completion) pairs. Nothing outside this registry asks
which task it is.

Adding a task: write a module with a dataclass implementing :class:`Task` (see ``addition.py`` or
``math.py``), add one line to ``TASKS``, and, if its answer rule is new, the rule's lm-eval
implementation as a module of ``tasks/answer_rules`` (registered in its ``RULES``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Protocol

from grpo_ablation.settings import did_you_mean, option, part_of, unknown_keys

# kind -> "module:class". Strings, so building the DAG imports no task code (nor torch).
TASKS: dict[str, str] = {
    "addition": "grpo_ablation.tasks.addition:AdditionTask",
    "math": "grpo_ablation.tasks.math:MathTask",
}

Prompt = str | list[dict[str, str]]


class Task(Protocol):
    kind: str
    # Name of the declared answer rule (an entry of tasks.answer_rules.RULES): the reward applies it
    # in training, lm-eval applies its own implementation of it in evaluation.
    answer_rule: str
    # Whether prompts go through the model's chat template (TRL conversational prompts; lm-eval's
    # apply_chat_template). Declared, not guessed, so training and evaluation cannot disagree.
    chat_template: bool
    # Whether a locally built character GPT-2 (base_policy.kind: local) can learn this task.
    local_base: bool
    # Whether its data come from the hub (or a local folder in the hub's layout): prefetch first.
    hub_data: bool

    # Writes the splits and their manifest; ``fetched`` is what ``prefetch`` recorded (the source
    # files' hashes), which the files read now must match.
    def write_splits(
        self, out_dir: Path, fetched: dict[str, Any] | None = None
    ) -> dict[str, Any]: ...

    def prefetch(self) -> dict[str, Any]: ...

    def prompt(self, row: dict[str, Any]) -> Prompt: ...

    def reward_function(self) -> Callable[..., list[float | None]]: ...

    def sft_pairs(self, rows: list[dict[str, Any]]) -> list[tuple[Prompt, str]]: ...

    def to_dict(self) -> dict[str, Any]: ...

    # The task of the config's ``task`` section (``kind`` removed): ``get_task`` calls it.
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task: ...


@dataclass(frozen=True)
class TaskSection:
    """The ``task`` section's own key; the others are the fields of its kind's class. Its schema
    part is written from this declaration."""

    kind: str = option(
        "addition",
        "the task, an entry of grpo_ablation.tasks.TASKS: {choices}; the section's other keys "
        "are the fields of its class",
        choices=TASKS,
    )


def get_task(config: dict[str, Any] | None) -> Task:
    """The task of a config's ``task`` section (``kind`` picks the class; the rest are its fields,
    a key neither the section's nor the class's named with the key meant)."""
    config = dict(config or {})
    kind = part_of(TaskSection, config, "task").kind
    if kind not in TASKS:
        raise ValueError(
            f"unknown task kind {kind!r}; expected one of {sorted(TASKS)}{did_you_mean(kind, TASKS)}"
        )
    module, name = TASKS[kind].split(":")
    cls = getattr(importlib.import_module(module), name)
    unknown = unknown_keys("task", config, ["kind", *(f.name for f in fields(cls))])
    if unknown:
        raise ValueError("; ".join(unknown))
    return cls.from_dict({k: v for k, v in config.items() if k != "kind"})


def chat_prompt(text: str) -> list[dict[str, str]]:
    """A one-turn user conversation: TRL applies the chat template to it, as lm-eval does."""
    return [{"role": "user", "content": text}]
