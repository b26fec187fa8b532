"""The ``stand_in`` section, declared once: the shape of the random Qwen2 the prefetch rule builds
at ``base_policy.name`` instead of downloading a hub model (``grpo_ablation.policy.standin``). Its
schema part is written from these declarations; the builder's defaults are theirs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_ablation.settings import check_options, from_dict, option


@dataclass(frozen=True)
class StandInConfig:
    """A stand-in model's seed and shape (the weights depend on these alone)."""

    seed: int = option(0, "seed of the random weights")
    hidden_size: int = option(64, "width of the hidden states", minimum=8)
    num_layers: int = option(2, "decoder layers", minimum=1)
    num_heads: int = option(4, "attention heads", minimum=1)
    num_kv_heads: int = option(2, "key/value heads (grouped-query attention)", minimum=1)
    intermediate_size: int | None = option(
        None, "width of the MLP (null: 4 x hidden_size)", minimum=1
    )
    embedding_rows: int | None = option(
        None,
        "rows of the embedding and output layer, padded beyond the tokenizer's vocabulary as hub "
        "models do (null: the tokenizer's)",
        minimum=1,
    )

    def __post_init__(self) -> None:
        check_options(self, "stand_in")

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> StandInConfig:
        """The config's ``stand_in`` section (any key left out takes its default)."""
        return from_dict(cls, section, "stand_in")
