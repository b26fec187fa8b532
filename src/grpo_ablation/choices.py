"""The names of the ablated choices, importable without torch (the DAG is built from these)."""

from __future__ import annotations

from typing import Literal, get_args

Scaling = Literal["none", "population", "sample", "batch"]
Aggregation = Literal["sequence_mean", "token_mean", "group_token_mean", "constant"]
GroupCategory = Literal["failed_scoring", "all_correct", "all_incorrect", "mixed"]

SCALINGS: tuple[str, ...] = get_args(Scaling)
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)
GROUP_CATEGORIES: tuple[str, ...] = get_args(GroupCategory)

# Empty completions (no unmasked token, e.g. a truncated completion under truncation masking):
# they stay in every count (B, the number of groups) and contribute zero, as TRL's ``grpo`` does,
# so masking a completion never changes the weight of the others. verl instead drops them from
# the sequence mean; the objective record names the rule used.
# How every results.json and table labels an lm-eval built-in benchmark (never the headline).
EXTERNAL_PROTOCOL = "external benchmark, its own protocol"

EMPTY_COMPLETION_RULE = "counted in B and in the number of groups, contributing zero"
