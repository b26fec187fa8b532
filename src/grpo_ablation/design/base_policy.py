"""The ``base_policy`` section, declared once: its kind (``KINDS``) and the draws, then each kind's
own fields, ``BasePolicyConfig`` (``local``: the character GPT-2 that
``grpo_ablation.policy.base_policy`` builds and warm-starts) and ``PretrainedBaseConfig``
(``hub``: a pretrained model, ``grpo_ablation.policy.pretrained``). The section's schema part
for ``kind`` and ``draws`` is written from ``BasePolicySection``; the kinds' fields stay out of
it (the schema fills in one default a key, and ``sft_steps`` has two, 1200 local and 0 hub):
``base_policy_of`` reads them, each at its kind's default where left out."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from grpo_ablation.design.problems import DesignError
from grpo_ablation.settings import from_dict, option, part_of, unknown_keys


@dataclass(frozen=True)
class BasePolicyConfig:
    # Seed of weights init, SFT data order, filler and noise draws; same seed -> same weights.
    seed: int = 0
    # GPT-2 shape (n_positions must cover prompt + max_completion_length + padding).
    n_layer: int = 2
    n_embd: int = 128
    n_head: int = 4
    n_positions: int = 32
    # SFT schedule: steps of batch_size examples, AdamW with linear warm-up then constant lr.
    sft_steps: int = 1200
    batch_size: int = 128
    lr: float = 2e-3
    warmup_steps: int = 50
    weight_decay: float = 0.0
    # SFT completions: uniform number of '.' filler characters in [0, filler_max], then the answer.
    filler_max: int = 3
    # On carry problems, probability that the SFT target is the carry-free (wrong) digit-wise sum,
    # at zero filler; it moves linearly to carry_forget_prob_at_filler_max at filler_max filler
    # characters (None: the same at every filler length, so length says nothing about correctness).
    # The default makes hesitation predict the error, as long answers of LLMs are more often wrong
    # within a prompt: without such a correlation no aggregation moves length
    # (grpo_ablation.policy.base_policy says why).
    carry_forget_prob: float = 0.05
    carry_forget_prob_at_filler_max: float | None = 0.6
    # Extra random left padding of SFT rows (grpo_ablation.policy.base_policy).
    max_pad_shift: int = 0
    # Position ids of the SFT pass: "arange" (absolute, shifted by left padding) or
    # "attention_mask" (counted over attended tokens, as at generation); see
    # grpo_ablation.policy.base_policy.
    sft_positions: str = "attention_mask"
    # Statistics on validation: samples per prompt at temperature 1, and generation length.
    eval_samples: int = 8
    max_completion_length: int = 10
    # torch intra-op threads of the warm start. The weights depend on it (the order of sums in
    # matmuls), so it is a config value, not whatever cores the scheduler grants; the rule
    # reserves this many.
    num_threads: int = 1

    def __post_init__(self) -> None:
        if self.sft_positions not in ("arange", "attention_mask"):
            raise ValueError(
                f"sft_positions must be 'arange' or 'attention_mask', got {self.sft_positions!r}"
            )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BasePolicyConfig:
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown BasePolicyConfig key(s): {', '.join(unknown)}")
        return cls(**d)


@dataclass(frozen=True)
class PretrainedBaseConfig:
    # Hub id (org/name) or local directory, loaded with from_pretrained either way.
    name: str
    # Hub revision (commit) the model is pinned at; ignored for a local directory.
    revision: str | None = None
    # Supervised warm-start on the task's pairs before GRPO; 0 uses the model as it is.
    sft_steps: int = 0
    sft_batch_size: int = 32
    sft_lr: float = 1e-3
    seed: int = 0
    # A GGUF file the prefetch rule converts into the folder ``name`` (grpo_ablation.policy.gguf).
    gguf: dict[str, str] | None = None


# The kinds of base policy, each with the dataclass of its fields.
KINDS: dict[str, type] = {"local": BasePolicyConfig, "hub": PretrainedBaseConfig}


@dataclass(frozen=True)
class BasePolicySection:
    """The keys of the ``base_policy`` section that are not one kind's field."""

    kind: str = option(
        "local",
        "local builds and warm-starts a small character GPT-2 (the fields of "
        "grpo_ablation.design.base_policy.BasePolicyConfig); hub loads a pretrained model by hub "
        "id or local folder (PretrainedBaseConfig's: name, revision, sft_steps > 0 to warm-start "
        "it on the task first, gguf to convert a GGUF file first)",
        choices=KINDS,
    )
    draws: list[int] | None = option(
        None,
        "base-policy draws (kind local): each is the seed of its own warm start, under which "
        "every cell runs every seed (results/<experiment>/draw=<d>/); the analysis pairs cells "
        "within a draw and pools over draws with the draw as the unit "
        "(results/<experiment>/pooled/). Give this or seed, not both",
        minimum=0,
        min_items=1,
        absent=True,
    )

    @classmethod
    def of(cls, base: dict[str, Any] | None) -> BasePolicySection:
        """The section's own keys (the kind's fields not read)."""
        return part_of(cls, base, "base_policy")


def base_kind(base: dict[str, Any] | None) -> str:
    """``local`` or ``hub``: the kind of a ``base_policy`` section, its default where left out."""
    return BasePolicySection.of(base).kind


def base_policy_of(base: dict[str, Any]) -> BasePolicyConfig | PretrainedBaseConfig:
    """The fields of the base policy a ``base_policy`` section declares, as its kind's dataclass
    (any left out at that kind's default; a draw's warm start has its seed, not the draws). A
    key neither the section's nor the kind's is named, with the key meant."""
    kind = base_kind(base)
    own = [f.name for f in fields(BasePolicySection)]
    known = [*own, *(f.name for f in fields(KINDS[kind]))]
    unknown = unknown_keys("base_policy", base, known)
    if unknown:
        raise DesignError(*unknown)
    return from_dict(KINDS[kind], {k: v for k, v in base.items() if k not in own}, "base_policy")
