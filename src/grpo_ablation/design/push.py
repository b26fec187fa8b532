"""The ``push`` section, declared once: where and how often the push of each objective is
measured on the same samples (``grpo_ablation.training.push``). Its schema part is written from
these declarations; the DAG's checks and plan read the resolved section (``of``), and the push
job receives the validated section whole (the rule's params)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_ablation.settings import check_options, from_dict, option


@dataclass(frozen=True)
class PushConfig:
    """The push: off unless enabled; its replicates, folds, policies and parameters."""

    enabled: bool = option(False, "measure the push (the rule and its tables and figure)")
    replicates: int = option(
        8,
        "independent replicates at each policy (the units a push hypothesis is judged on), on the "
        "first training prompts",
        minimum=2,
    )
    full_replicates: int | None = option(
        None,
        "how many of the replicates measure every choice (the push's tables, figure and cosines); "
        "the others measure only the choices the declared push hypotheses compare, a backward "
        "pass each, which is what makes hundreds of replicates affordable; null: all",
        minimum=2,
    )
    pilot_replicates: int = option(
        8,
        "replicates of the pilot (`push_pilot.json`, asked for by path; at the base policy, on "
        "the last training prompts and keys of its own), from which a push hypothesis's SD is "
        "planned (power.sd) without touching the test's samples",
        minimum=2,
    )
    prompts_per_fold: int = option(
        16,
        "prompts per fold; a replicate uses two folds of different training prompts",
        minimum=2,
    )
    steps: list[int] | None = option(
        None,
        "policy steps to measure at (0 = the base policy; others must be saved checkpoints); "
        "null takes the base policy and the final checkpoint",
        minimum=0,
    )
    parameters: str | None = option(
        None,
        "a regular expression over parameter names: only the parameters it matches are "
        "differentiated (the others held fixed), so every direction and gradient lives in their "
        "subspace; null takes all. For a real LLM on a CPU (config/smollm2.yaml takes the top "
        "blocks); the record names the pattern and the parameters kept",
    )

    def __post_init__(self) -> None:
        check_options(self, "push")

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> PushConfig:
        """The config's ``push`` section (any key left out takes its default)."""
        return from_dict(cls, section, "push")
