"""The names of the ablated choices, importable without torch (the DAG is built from these)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from grpo_ablation.objective.conventions import (
    LENGTH_AGGREGATIONS,
    STD_SCALINGS,
    ZERO_VARIANCE_RULES,
)

GroupCategory = Literal["failed_scoring", "all_correct", "all_incorrect", "mixed"]

SCALINGS: tuple[str, ...] = tuple(STD_SCALINGS)
AGGREGATIONS: tuple[str, ...] = tuple(LENGTH_AGGREGATIONS)
GROUP_CATEGORIES: tuple[str, ...] = get_args(GroupCategory)
# What the loss does with groups whose rewards are all equal: keep them (advantage 0, counted in
# the normaliser), filter them out of the loss and its normaliser (ScaleRL), or resample (DAPO's
# dynamic sampling); one entry each in objective/conventions.py.
ZERO_VARIANCE: tuple[str, ...] = tuple(ZERO_VARIANCE_RULES)

# How every results.json and table labels an lm-eval built-in benchmark (never the headline).
EXTERNAL_PROTOCOL = "external benchmark, its own protocol"

# Empty completions (no unmasked token, e.g. a truncated completion under truncation masking):
# they stay in every count (B, the number of groups) and contribute zero, as TRL's ``grpo`` does,
# so masking a completion never changes the weight of the others. verl instead drops them from
# the sequence mean; the objective record names the rule used.
EMPTY_COMPLETION_RULE = "counted in B and in the number of groups, contributing zero"


@dataclass(frozen=True)
class Recipe:
    """A published combination of the ablated choices: cells with these values are labelled so."""

    name: str
    values: dict[str, str]  # axis -> value, every other axis free
    source: str


RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "GRPO",
        {"std_scaling": "sample", "aggregation": "sequence_mean"},
        "Shao et al. 2024, DeepSeekMath (arXiv 2402.03300)",
    ),
    Recipe(
        "Dr. GRPO",
        {"std_scaling": "none", "aggregation": "constant"},
        "Liu et al. 2025, Understanding R1-Zero-Like Training (arXiv 2503.20783)",
    ),
    Recipe(
        "Lite PPO",
        {"std_scaling": "batch", "aggregation": "token_mean"},
        "Liu et al. 2025, Tricks or Traps? A Deep Dive into RL for LLM Reasoning (arXiv 2508.08221)",
    ),
)
