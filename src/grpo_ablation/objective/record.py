"""The objective record: the effective objective of one run, as data and as a sentence.

A trainer name does not say which objective ran. Every run writes this record next to its
outputs (``objective.json`` and ``objective.md``), so tables and the report can name the objective
behind each number.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.layout import OBJECTIVE, OBJECTIVE_TEXT
from grpo_ablation.objective.conventions import (
    EMPTY_COMPLETION_RULE,
    VLLM_IS_CLIP,
    baseline,
    length_aggregation,
    policy_ratio,
    ratio_options,
    std_scaling,
    zero_variance_rule,
)
from grpo_ablation.samplers import sampler_description
from grpo_ablation.sampling import protocol
from grpo_ablation.settings import neutral_of

LIBRARIES = ("torch", "transformers", "trl", "accelerate", "datasets", "lm_eval")


def library_versions() -> dict[str, str]:
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@dataclass
class ObjectiveRecord:
    """Every choice that defines what a GRPO run optimised (docs/design.md, "objective record").

    ``options`` holds the training options as configured (``TrainingConfig.recorded_options``:
    every option whose declaration does not say why the record leaves it out), readable as
    attributes (``record.std_scaling``); the other fields are what the configuration does not say
    by itself: the layout over processes, the reward's rule, the generation and sampling as run.
    """

    options: dict[str, Any]
    per_device_batch_size: int
    num_processes: int
    # The declared answer rule of the reward; the evaluation's results.json names the same rule.
    answer_rule: str = "not recorded"
    # Who samples the rollouts: transformers' generate, or vLLM with TRL's correction.
    generation: str = "transformers"
    # The complete sampling protocol of the rollouts (grpo_ablation.sampling.protocol).
    sampling: dict[str, Any] = field(default_factory=dict)
    # How each token is drawn from that distribution (grpo_ablation.samplers.sampler_description).
    sampler: str = "not recorded"
    kl_estimator: str = "k3"
    # Controls that confound length results (the calculations behind them differ by precision
    # and by which tokens enter the loss): where the LM head's logits are computed, and the
    # tokens selected (TRL's top_entropy_quantile; the project's loss applies no entropy mask).
    lm_head_precision: str = "float32"
    # float32 matrix products in TF32 (compute.tf32, on a GPU); a record from before: IEEE.
    tf32: bool = False
    # transformers' generate in training (compute.generation_cache, compute.generation_weights);
    # a record from before: a dynamic cache, the master weights.
    generation_cache: str = "dynamic"
    generation_weights: str = "master"
    token_selection: str = "every unmasked token (TRL's top_entropy_quantile 1.0: no entropy mask)"
    completion_mask: str = "tokens after the first eos are masked; padding is masked"
    empty_completion_rule: str = EMPTY_COMPLETION_RULE
    normaliser_reduction: str = (
        "completion lengths are all-gathered over processes at generation time, so every rank "
        "weights its tokens with the normaliser of the whole generation batch; each rank's loss "
        "is a sum multiplied by the number of processes (rank_loss_scale), which undoes DDP's "
        "mean over ranks; accumulation steps add up unscaled (TRL marks the loss as already "
        "scaled for accumulation, so the Trainer does not divide it)"
    )
    library_versions: dict[str, str] = field(default_factory=library_versions)
    # The base model the run started from: folder or hub id, revision, and for a folder converted
    # from a GGUF file, that file's provenance (grpo_ablation.policy.gguf).
    base_model: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every named choice is one the conventions define (a record read back included).
        for entry, name in (
            (std_scaling, "std_scaling"),
            (length_aggregation, "aggregation"),
            (zero_variance_rule, "zero_variance"),
            (baseline, "baseline"),
            (policy_ratio, "ratio"),
        ):
            if name in self.options:
                entry(self.options[name])

    def option(self, name: str) -> Any:
        """An option added after runs were trained, as this run had it: a record written before
        the option existed ran at its declared neutral value."""
        return self.options[name] if name in self.options else neutral_of(TrainingConfig, name)

    def __getattr__(self, name: str) -> Any:
        options = self.__dict__.get("options", {})
        if name in options:
            return options[name]
        raise AttributeError(f"{type(self).__name__} has no field or option {name!r}")

    @classmethod
    def from_config(
        cls,
        cfg: Any,
        num_processes: int,
        answer_rule: str = "not recorded",
        base_model: dict[str, Any] | None = None,
        dtype: str = "float32",
        tf32: bool = False,
        generation_cache: str = "dynamic",
        generation_weights: str = "master",
    ) -> ObjectiveRecord:
        """The record of a run of ``cfg`` (a ``TrainingConfig``) on ``num_processes`` processes
        at the compute precision ``dtype``, its float32 matrix products in TF32 or not, with
        transformers' generate on ``generation_cache`` and ``generation_weights``."""
        vllm = cfg.generation_backend == "vllm"
        return cls(
            options=cfg.recorded_options(),
            per_device_batch_size=cfg.per_device_batch_size(num_processes),
            num_processes=num_processes,
            answer_rule=answer_rule,
            generation=f"vllm colocate, importance-sampling correction "
            f"{cfg.vllm_importance_sampling_mode}, ratio bounds [C_min, C_max] = "
            f"[{VLLM_IS_CLIP[0]}, {VLLM_IS_CLIP[1]}]"
            if vllm
            else cfg.generation_backend,
            sampling=protocol(cfg.temperature, cfg.max_completion_length),
            sampler=sampler_description(cfg.sampler, vllm),
            base_model=base_model or {},
            lm_head_precision="float32"
            if dtype == "float32"
            else f"{dtype} under autocast (weights held in float32; no float32 LM head)",
            tf32=tf32,
            generation_cache=generation_cache,
            generation_weights=generation_weights,
        )

    @property
    def generation_batch_size(self) -> int:
        return self.prompts_per_step * self.group_size

    @property
    def normaliser(self) -> str:
        return length_aggregation(self.aggregation).normaliser

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data |= data.pop("options")
        data["generation_batch_size"] = self.generation_batch_size
        data["normaliser"] = self.normaliser
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ObjectiveRecord:
        own = {f.name for f in fields(cls)}
        derived = {"generation_batch_size", "normaliser"}
        options = {k: v for k, v in data.items() if k not in own | derived}
        return cls(options=options, **{k: v for k, v in data.items() if k in own})

    def describe(self) -> str:
        """One plain-English paragraph naming every choice."""
        adv = std_scaling(self.std_scaling).sentence.format(eps=self.std_eps)
        compared = self.option("baseline")
        if compared != "group_mean":
            adv += f", with each reward compared with {baseline(compared).sentence}"
        kl = (
            f"plus beta={self.beta:g} times the {self.kl_estimator} estimate of KL to the frozen "
            "reference policy"
            if self.beta > 0
            else "with no KL term (beta=0)"
        )
        trunc = (
            "Truncated completions (no eos within the length limit) are masked out of the loss."
            if self.mask_truncated_completions
            else "Truncated completions stay in the loss."
        )
        versions = ", ".join(f"{k} {v}" for k, v in self.library_versions.items())
        c = self.option("max_grad_norm")
        clipping = (
            f"Before each AdamW step the gradient is clipped to a global norm of {c:g} (scaled "
            f"by min(1, {c:g}/norm) where its norm exceeds {c:g})."
            if c
            else "The gradient is not clipped."
        )
        return (
            f"Reward: the task's declared answer rule '{self.answer_rule}' (the evaluation applies "
            "the same rule). "
            f"Advantages: {adv}; a reward that could not be scored is left out of its group and "
            f"gets advantage 0. "
            f"Loss: {self.policy_term}, {kl}, {length_aggregation(self.aggregation).sentence} "
            f"(per-token weight 1/({self.normaliser}); empty completions {self.empty_completion_rule}). "
            f"{zero_variance_rule(self.zero_variance).sentence.format(batches=self.max_generation_batches)} "
            f"{trunc} {clipping} The LM head's logits are computed in {self.lm_head_precision}"
            f"{', float32 matrix products in TF32' if self.tf32 else ''}; "
            f"the loss takes {self.token_selection}. Each generation step samples G={self.group_size} completions for each of "
            f"{self.prompts_per_step} prompts (B={self.generation_batch_size}) of at most "
            f"{self.max_completion_length} tokens, and takes {self.num_iterations} optimizer step(s) "
            f"on them, split into {self.gradient_accumulation_steps} accumulation step(s) of "
            f"{self.per_device_batch_size} completions on each of {self.num_processes} process(es)"
            f"{self._scoring_text()}; "
            f"{self.normaliser_reduction}. Rollouts are generated by {self.generation}{self._generate_text()}{self._sampling_text()}; each token is drawn by {self.sampler}. "
            f"Libraries: {versions}."
        )

    @property
    def policy_term(self) -> str:
        """The per-token policy term as run: its ratio entry, the ratio's level, the caps."""
        o = vars(ratio_options(**self.options))
        delta = o["clip_delta"]
        text = policy_ratio(o["ratio"]).sentence.format(
            **o, delta=f", r itself capped at {delta:g} (dual clip)" if delta else ""
        )
        if o["ratio"] == "vespo":
            return text
        level = (
            "r per completion, the exp of its mean token log-ratio (GSPO)"
            if o["ratio_level"] == "sequence"
            else "r = pi_theta / pi_old per token"
        )
        return f"{text}, {level}"

    def _scoring_text(self) -> str:
        rows = self.option("scoring_batch_size")
        return f", scored {rows} completions per forward pass" if rows else ""

    def _generate_text(self) -> str:
        """How generate ran, where not as before the options (a dynamic cache, the master
        weights)."""
        parts = {
            "dynamic": [],
            "static": ["a static KV cache"],
            "static_compiled": ["a static KV cache", "its decoding step under torch.compile"],
        }[self.generation_cache]
        if self.generation_weights == "bfloat16":
            parts.append(
                "a bfloat16 copy of the weights, refreshed before each generation batch (the loss "
                "scores the rollouts with the float32 master weights, uncorrected for the gap)"
            )
        return f" with {', '.join(parts)}" if parts else ""

    def _sampling_text(self) -> str:
        if not self.sampling:
            return ""
        shown = ", ".join(f"{k} {v}" for k, v in self.sampling.items() if k not in ("stop",))
        return f" ({shown}; stopped at {self.sampling.get('stop', 'eos')}; the model's own generation config is not used)"

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / OBJECTIVE).write_text(self.to_json() + "\n")
        (directory / OBJECTIVE_TEXT).write_text(self.describe() + "\n")
