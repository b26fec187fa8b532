"""The options of one run, declared once: ``TrainingConfig`` (what a run trains),
``ComputeConfig`` (how a job runs: device, precision, processes, retention; nothing in it changes
what a run optimises) and ``EvaluationConfig`` (how every policy is evaluated).

Each field carries its help text and its constraints as metadata (TRL's ``GRPOConfig`` style).
Everything else is derived from these declarations: the ``training`` section of the config schema
(written into ``workflow/schemas/config.schema.yaml`` by ``grpo-ablation schema``, which
``design/schema.py`` backs, and tested equal to it), the objective record (every field is
recorded unless its declaration says why not: ``recorded``), the trainer's arguments (it receives
the config) and the nominal budget. The ``compute`` and ``evaluation`` sections are generated
the same way, and every reader of them reads the resolved value (``of``), never a default of its own.

Importable without torch: the DAG builds every run's config from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from grpo_ablation.design.axes import check_choices
from grpo_ablation.device import (
    ACCELERATE_PRESETS,
    DEVICES,
    DTYPES,
    OPTIMIZER_STATE_POLICIES,
    SHARDED_PRESETS,
)
from grpo_ablation.objective.conventions import (
    AGGREGATIONS,
    BASELINE_NAMES,
    RATIO_LEVELS,
    RATIOS,
    SCALINGS,
    ZERO_VARIANCE,
)
from grpo_ablation.samplers import SAMPLERS, TRAINING_SAMPLERS, evaluation_sampler_help
from grpo_ablation.settings import check_options, from_dict, identity, option

GENERATION_BACKENDS = ("transformers", "vllm")
# transformers' generate in training: its KV cache (static_compiled: static under torch.compile)
# and the weights it reads (compute.generation_cache, compute.generation_weights).
GENERATION_CACHES = ("dynamic", "static", "static_compiled")
GENERATION_WEIGHTS = ("master", "bfloat16")
# The compute options of transformers' generate, which a vLLM run refuses (check_generation).
GENERATE_OPTIONS = ("generation_cache", "generation_weights")
# Options TRL's GRPOTrainer holds too, as its attributes (from GRPOConfig): the trainer computes
# the loss with TRL's, the objective record states the options', so the trainer refuses to start
# when they differ.
TRL_ATTRIBUTES = {
    "group_size": "num_generations",
    "max_completion_length": "max_completion_length",
    "num_iterations": "num_iterations",
    "temperature": "temperature",
    "beta": "beta",
    "clip_eps_low": "epsilon_low",
    "clip_eps_high": "epsilon_high",
    "mask_truncated_completions": "mask_truncated_completions",
}
IMPORTANCE_SAMPLING_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


_NOT_OBJECTIVE = "not part of the objective"
_IN_SAMPLING = "stated in the record's sampling protocol"
_IN_SAMPLER = "stated in the record's sampler sentence"
_IN_GENERATION = "stated in the record's generation sentence"


@dataclass
class TrainingConfig:
    """One run's objective and budget. Every field is part of the cell's identity."""

    # --- the objective (docs/design.md) ---
    std_scaling: str = option(
        "sample",
        "std scaling of the group advantage: {choices}",
        choices=SCALINGS,
    )
    std_eps: float = option(1e-4, "added to the std; part of the convention, recorded", minimum=0)
    aggregation: str = option(
        "sequence_mean",
        "length aggregation of the per-token loss: {choices}",
        choices=AGGREGATIONS,
    )
    group_size: int = option(
        8, "G completions per prompt (a group of one has no baseline)", minimum=2
    )
    beta: float = option(
        0.0, "KL coefficient to the frozen reference policy (k3 estimator)", minimum=0
    )
    clip_eps_low: float = option(0.2, "the ratio is clipped below at 1 - clip_eps_low", minimum=0)
    clip_eps_high: float = option(0.2, "the ratio is clipped above at 1 + clip_eps_high", minimum=0)
    clip_delta: float = option(
        0.0,
        "ratio clipped: the dual clip (TRL's delta), the unclipped ratio also capped at "
        "clip_delta; at clip_delta >= 1 + clip_eps_high it caps the term only where A < 0 "
        "(verl's clip_ratio_c), below that A > 0 tokens with r > clip_delta get no gradient "
        "and A < 0 is capped at 1 + clip_eps_high instead; 0 turns it off",
        neutral=0.0,
        minimum=0,
    )
    ratio: str = option(
        "clipped",
        "how the probability ratio r enters the per-token loss: clipped (PPO/GRPO), cispo "
        "(stop-gradient weight min(r, cispo_cap)), sapo (a soft gate) or vespo (a gamma-shaped "
        "weight of the completion's ratio)",
        choices=RATIOS,
        neutral="clipped",
    )
    ratio_level: str = option(
        "token",
        "the ratio of each token, or of each completion (sequence: the exp of its mean token "
        "log-ratio, GSPO); vespo always weighs the completion's whole ratio",
        choices=RATIO_LEVELS,
        neutral="token",
    )
    cispo_cap: float = option(
        5.0,
        "ratio cispo: the cap of its weight min(r, cispo_cap) (TRL caps at epsilon_high itself, "
        "at epsilon when unset, and recommends 5.0; verl's cispo clamps r to "
        "[1 - clip_ratio_low, 1 + clip_ratio_high]); below 1 the weight is the constant cap "
        "wherever r exceeds it, and the ratio drops out",
        neutral=5.0,
        exclusive_minimum=0,
    )
    baseline: str = option(
        "group_mean",
        "what each reward is compared with: group_mean, or leave_one_out (the mean of the other "
        "rewards of its group, RLOO: n/(n-1) times the centred reward)",
        choices=BASELINE_NAMES,
        neutral="group_mean",
    )
    mask_truncated_completions: bool = option(False, "drop completions without eos from the loss")
    max_grad_norm: float = option(
        1.0,
        "gradient clipping: before each optimizer step the gradient is scaled by "
        "min(1, max_grad_norm / (its global norm + 1e-6)) (the Trainer's max_grad_norm, 1.0 "
        "unless set); 0 turns it off. Part of the objective: a factor that binds on some steps "
        "and not others is one Adam does not absorb",
        neutral=1.0,
        minimum=0,
    )
    success_threshold: float = option(
        1.0,
        "reward at or above which a completion counts as correct (the group categories)",
        recorded="a label of the diagnostics, not part of the loss",
    )
    zero_variance: str = option(
        "keep",
        "groups whose rewards are all equal (all correct or all incorrect): keep them in the "
        "loss's normaliser (advantage 0), filter them out of the loss and its normaliser "
        "(ScaleRL), or resample: draw further batches of prompts until the step holds "
        "prompts_per_step mixed groups, up to max_generation_batches (DAPO's dynamic sampling; "
        "one process per run); the rollout log keeps every generated group, marked in_loss and "
        "in_batch",
        choices=ZERO_VARIANCE,
    )
    max_generation_batches: int = option(
        4,
        "zero_variance resample: the most generation batches drawn per step, the first included "
        "(verl's max_num_gen_batches); a step short of prompts_per_step mixed groups by then "
        "fills its batch with zero-variance groups, filtered out of the loss",
        minimum=1,
    )
    # --- the budget (matched within a stage) ---
    prompts_per_step: int = option(
        4, "prompts per generation batch (B = prompts_per_step * G)", minimum=1
    )
    max_steps: int = option(200, "optimizer steps", recorded="the budget's", minimum=1)
    max_completion_length: int = option(12, "tokens, eos included", minimum=1)
    num_iterations: int = option(1, "optimizer steps per generation batch (PPO epochs)", minimum=1)
    gradient_accumulation_steps: int = option(
        1, "micro-batches per optimizer step (per process)", minimum=1
    )
    scoring_batch_size: int = option(
        0,
        "completions per forward pass where the trainer scores them (the loss's pass, and TRL's "
        "old- and reference-policy passes, which take the micro-batch at most); 0 scores a "
        "micro-batch in one pass. Smaller lowers the peak of the logits (rows x tokens x "
        "vocabulary) each pass holds for a moment, and the whole peak of the passes without a "
        "gradient; the loss's pass still keeps every row's activations for its backward "
        "(gradient_accumulation_steps divides those). On the CPU the log-probabilities and the "
        "loss are the one pass's bit for bit; the gradient adds the passes' shares in another "
        "order (a relative 6e-7 on the tests' model)",
        neutral=0,
        minimum=0,
    )
    learning_rate: float = option(
        5e-4,
        "AdamW's learning rate; 0 trains nothing, so the run is the base policy carried through "
        "the whole pipeline: a positive control whose effect against a trained cell is known",
        recorded="the budget's",
        minimum=0,
    )
    lr_scheduler_type: str = option(
        "constant", "transformers' learning-rate schedule", recorded="the budget's"
    )
    warmup_steps: int = option(0, "learning-rate warm-up steps", recorded="the budget's", minimum=0)
    temperature: float = option(
        1.0, "sampling temperature of the rollouts", recorded=_IN_SAMPLING, exclusive_minimum=0
    )
    sampler: str = option(
        "keyed",
        "how each token is drawn from softmax(logits / T): keyed Gumbel-max noise named by "
        "(seed, step, prompt, slot, position), so cells with one seed share their random numbers "
        "(common random numbers); stream uses the global random stream. With generation_backend "
        "vllm, keyed seeds each request by its key (colocate mode, tensor parallel size 1)",
        recorded=_IN_SAMPLER,
        choices=TRAINING_SAMPLERS,
    )
    # --- generation ---
    generation_backend: str = option(
        "transformers",
        "who samples the rollouts: transformers' generate, or vLLM in TRL's colocate mode (GPUs, "
        "the pin set envs/gpu-vllm.in), with the loss corrected by TRL's importance-sampling ratio",
        recorded=_IN_GENERATION,
        choices=GENERATION_BACKENDS,
    )
    vllm_gpu_memory_utilization: float = option(
        0.3,
        "vLLM's share of the GPU memory (colocate mode)",
        recorded=_NOT_OBJECTIVE,
        exclusive_minimum=0,
        maximum=1,
    )
    vllm_importance_sampling_mode: str = option(
        "token_truncate",
        "how TRL corrects the loss for the gap between the trainer's and vLLM's token "
        "probabilities: the importance-sampling ratio truncated or masked, per token or sequence "
        "({choices})",
        recorded=_IN_GENERATION,
        choices=IMPORTANCE_SAMPLING_MODES,
    )
    # --- bookkeeping ---
    save_steps: int = option(
        50,
        "checkpoint schedule (the final step is always saved)",
        recorded=_NOT_OBJECTIVE,
        minimum=1,
    )
    curve_points: int = option(
        0,
        "weights-only policies saved at this many geometrically spaced steps (from about "
        "max_steps/40 to max_steps) and scored by the evaluation job, for the efficiency curve of "
        "each run (the ScaleRL fit); 0 saves none and the curve is the saved checkpoints",
        recorded=_NOT_OBJECTIVE,
        minimum=0,
    )
    late_points: int = option(
        0,
        "weights-only policies saved at this many evenly spaced steps over the late window (the "
        "last quarter of training, ending at max_steps) and scored like the curve's: the late "
        "accuracy is the mean over every curve policy in the window, fixed before the run",
        recorded=_NOT_OBJECTIVE,
        neutral=0,
        minimum=0,
    )
    seed: int = option(
        0, "ignored in the config; runs take their seed from seeds", recorded=_NOT_OBJECTIVE
    )

    def __post_init__(self) -> None:
        check_choices(self)
        check_options(self, "training")
        # TRL's GRPOTrainer refuses VESPO's correction on sequence-level importance sampling at
        # construction; the project's trainer passes TRL another loss type, so it refuses here.
        if (
            self.ratio == "vespo"
            and self.generation_backend == "vllm"
            and not self.vllm_importance_sampling_mode.startswith("token_")
        ):
            raise ValueError(
                f"training.ratio=vespo with vllm_importance_sampling_mode="
                f"{self.vllm_importance_sampling_mode!r}: VESPO weighs the whole completion's "
                "ratio itself and takes TRL's correction per token only (token_truncate or "
                "token_mask), as TRL's GRPOTrainer requires"
            )

    @property
    def curve_steps(self) -> list[int]:
        """The optimizer steps of the efficiency curve: ``curve_points`` steps spaced evenly in
        log-step from ~max_steps/40 (rounded, duplicates merged) to max_steps, so that both the
        early rise and the plateau are sampled, and the ``late_points`` of the late window."""
        log = curve_steps(self.max_steps, self.curve_points)
        return sorted({*log, *late_steps(self.max_steps, self.late_points)})

    @property
    def checkpoints(self) -> int:
        """The checkpoints the run saves: every ``save_steps`` and the final step."""
        return math.ceil(self.max_steps / self.save_steps)

    @property
    def generation_batch_size(self) -> int:
        return self.prompts_per_step * self.group_size

    def per_device_batch_size(self, num_processes: int) -> int:
        split = self.gradient_accumulation_steps * num_processes
        if self.generation_batch_size % split:
            raise ValueError(
                f"generation batch of {self.generation_batch_size} completions cannot be split into "
                f"{self.gradient_accumulation_steps} accumulation steps x {num_processes} processes"
            )
        return self.generation_batch_size // split

    def nominal_budget(self) -> dict[str, Any]:
        """What a run is allowed to spend; cells within a stage must agree on every entry, apart
        from those the varied axes change by design (``Axis.rescales``)."""
        return {
            "completions": self.max_steps // self.num_iterations * self.generation_batch_size,
            "optimizer_steps": self.max_steps,
            "max_completion_length": self.max_completion_length,
            "learning_rate": self.learning_rate,
            "lr_scheduler_type": self.lr_scheduler_type,
            "warmup_steps": self.warmup_steps,
            "num_iterations": self.num_iterations,
        }

    def recorded_options(self) -> dict[str, Any]:
        """The fields the objective record copies: every field not declared ``recorded=<why not>``."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.metadata["recorded"] is True
        }

    def rerun_identity(self) -> dict[str, Any]:
        """What tells this run's training from another's for the train rule's rerun trigger:
        every field less each option at its declared ``neutral`` value (``settings.identity``), so
        an option added with the value that trains as before it existed retrains no finished run."""
        return identity(self)


def curve_steps(max_steps: int, points: int) -> list[int]:
    """``points`` steps geometrically spaced from max(1, max_steps/40) to ``max_steps``."""
    if points <= 0:
        return []
    if points == 1:
        return [max_steps]
    first = max(1.0, max_steps / 40)
    ratio = (max_steps / first) ** (1 / (points - 1))
    return sorted({min(max_steps, round(first * ratio**i)) for i in range(points)})


# The late window: the last quarter of training, where the late accuracy is measured.
LATE_WINDOW = 0.25


def in_late_window(step: int, max_steps: int) -> bool:
    """Whether ``step`` lies in the late window (max_steps · (1 − LATE_WINDOW), max_steps]."""
    return max_steps * (1 - LATE_WINDOW) < step <= max_steps


def late_steps(max_steps: int, points: int) -> list[int]:
    """``points`` steps spaced evenly over the late window, the last at ``max_steps``
    (rounded half up, duplicates merged): 100 steps, 3 points: 83, 92, 100."""
    span = max_steps * LATE_WINDOW
    steps = {math.floor(max_steps - span * k / points + 0.5) for k in range(points)}
    return sorted(s for s in steps if in_late_window(s, max_steps))


@dataclass(frozen=True)
class ComputeConfig:
    """How a job runs: device, precision, processes, checkpoint retention."""

    device: str = option(
        "auto",
        "auto takes CUDA when torch sees a GPU, else cpu; cuda on a machine without one stops "
        "the job",
        choices=DEVICES,
    )
    dtype: str = option(
        "float32",
        "compute precision, {choices}: autocast in training over float32 master "
        "weights and optimizer state (checkpoints hold float32 weights), the loading precision "
        "in evaluation",
        choices=DTYPES,
    )
    processes_per_train_job: int = option(
        1,
        "training processes of one cell (accelerate launch; gloo on CPU, NCCL on GPU, one GPU "
        "each); the job's threads are shared among them and the objective does not change",
        minimum=1,
    )
    accelerate_config: str = option(
        "ddp",
        "ddp (plain DDP), or a preset of config/accelerate/: zero2 or zero3 (DeepSpeed ZeRO-2/3), "
        "fsdp (GPUs only)",
        choices=ACCELERATE_PRESETS,
    )
    keep_optimizer_state: str = option(
        "newest",
        "newest keeps optimizer and scheduler state in the newest checkpoint only (enough to "
        "resume; every checkpoint keeps its weights for evaluation); all keeps it everywhere",
        choices=OPTIMIZER_STATE_POLICIES,
    )
    gradient_checkpointing: bool = option(
        False,
        "recompute activations in the backward pass instead of keeping them (TRL's default is "
        "true): less memory for long completions on a large model, at the cost of a second "
        "forward pass; it changes no number (tested on the CPU default), only time and memory",
    )
    tf32: bool = option(
        False,
        "float32 matrix products on a GPU in TF32 (inputs rounded to 10-bit mantissas, sums in "
        "float32; faster from Ampere on, and other numbers); false keeps them IEEE float32. The "
        "CPU has none: there it changes nothing. The objective record states which ran",
        neutral=False,
    )
    generation_cache: str = option(
        "dynamic",
        "the KV cache of transformers' generate in training: dynamic (grown a token at a time), "
        "static (allocated once at the longest prompt + max_completion_length, so the shapes "
        "stay fixed) or static_compiled (static, and the decoding step under torch.compile: CUDA "
        "graphs on a GPU, where decoding a small model is bound by kernel launches). The keyed "
        "noise is drawn outside the compiled step. On the CPU static gives dynamic's tokens and "
        "weights bit for bit (tested); on a GPU the attention may sum another way, and the GPU "
        "check counts the identical completions. vLLM keeps a cache of its own (a run with "
        "generation_backend vllm is refused anything but dynamic). The objective record states "
        "which ran",
        choices=GENERATION_CACHES,
        neutral="dynamic",
    )
    generation_weights: str = option(
        "master",
        "the weights transformers' generate reads in training: master (the float32 weights the "
        "optimizer updates, under dtype's autocast) or bfloat16 (a bfloat16 copy of them, "
        "refreshed before each generation batch from the weights of that step: 2 bytes a "
        "parameter more, 0.27 GB at 135 M parameters; no cast of the weights at every decoding "
        "step). The update keeps the float32 master weights and scores the rollouts with them, "
        "with no correction for the gap between the copy's token probabilities and theirs (as "
        "vLLM's importance-sampling correction would make). DDP and ZeRO-2 only (ZeRO-3 and FSDP "
        "shard the weights), and not with generation_backend vllm (its engine holds weights of its "
        "own). Other rollouts than master's: the objective record states which ran",
        choices=GENERATION_WEIGHTS,
        neutral="master",
    )

    def __post_init__(self) -> None:
        check_options(self, "compute")
        if self.generation_weights != "master" and self.accelerate_config in SHARDED_PRESETS:
            raise ValueError(
                f"compute.generation_weights {self.generation_weights!r} copies the whole weights "
                f"for generate; accelerate_config {self.accelerate_config!r} shards them: use ddp "
                "or zero2, or generation_weights: master"
            )

    def section_identity(self) -> dict[str, Any]:
        """The section as the jobs that read it see it (their rerun trigger): every field less
        each option at its declared ``neutral`` value, so adding one retrains and re-evaluates
        nothing (``settings.identity``)."""
        return identity(self)

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> ComputeConfig:
        """The config's ``compute`` section (any key left out takes its default)."""
        return from_dict(cls, section, "compute")


def check_generation(compute: ComputeConfig, cfg: TrainingConfig) -> None:
    """compute's generation options are transformers' generate's: a run whose rollouts vLLM
    generates (an engine with a cache and weights of its own) takes them at their neutral values,
    or a ValueError names the option."""
    if cfg.generation_backend == "transformers":
        return
    for f in fields(compute):
        if f.name in GENERATE_OPTIONS and getattr(compute, f.name) != f.metadata["neutral"]:
            raise ValueError(
                f"compute.{f.name} {getattr(compute, f.name)!r} applies to transformers' "
                f"generate; with training.generation_backend {cfg.generation_backend!r} the engine "
                f"keeps its own: set compute.{f.name}: {f.metadata['neutral']}"
            )


EVALUATION_BACKENDS = ("hf", "vllm")
SAMPLED_METRICS = ("auto", "exact", "mean_at_k")


@dataclass(frozen=True)
class EvaluationConfig:
    """The ``evaluation`` section: how every policy is evaluated with lm-eval. The jobs receive
    it completed (``checks.evaluation_config``: training's generation length, the compute
    section's device and precision, the sampled metric resolved)."""

    k: int = option(4, "samples per prompt for mean@k", minimum=1)
    sampled_metric: str = option(
        "auto",
        "the headline sampled accuracy of the test split: exact computes the expected accuracy "
        "under the sampled protocol by enumerating the completions the answer rule accepts (tasks "
        "that declare `enumerable`, with the local character tokenizer), mean_at_k estimates it "
        "from k samples; auto takes exact where it is possible. mean@k is reported either way",
        choices=SAMPLED_METRICS,
    )
    temperature: float = option(
        1.0, "sampling temperature of the sampled and exact tasks", exclusive_minimum=0
    )
    sampler: str = option("keyed", evaluation_sampler_help(), choices=SAMPLERS)
    max_gen_toks: int | None = option(
        None,
        "null takes training.max_completion_length; any other value is refused (one protocol)",
        minimum=1,
    )
    batch_size: int | str = option(
        64,
        "rows per lm-eval batch; auto with backend vllm only (every request to the engine at "
        "once, which schedules its own batches; keyed seeds make each draw independent of its "
        "batch)",
        words=("auto",),
        minimum=1,
    )
    backend: str = option(
        "hf",
        "lm-eval's model backend: hf (transformers), or vllm (on GPUs, the pin set "
        "envs/gpu-vllm.in; each checkpoint in its own process); the same prompts and answer rule",
        choices=EVALUATION_BACKENDS,
    )
    seed: int = option(
        0,
        "mixed with the unit evaluated: a run's evaluation is keyed by its run seed (a function "
        "of draw and seed), a draw's base policy by its draw, so units share no sampled-metric "
        "noise while the cells of one (draw, seed) share it (evaluation.seeding.evaluation_seed)",
    )
    limit: int | None = option(None, "rows per task evaluated (null: every row)", minimum=1)
    external_benchmarks: list[str] = option(
        [],
        "lm-eval built-in tasks (e.g. gsm8k, minerva_math) evaluated on every test checkpoint as "
        "extra columns: an external benchmark with its own protocol (prompt, few-shot, answer "
        "extraction), never the headline, which is always the task's own test split",
    )

    def __post_init__(self) -> None:
        check_options(self, "evaluation")

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> EvaluationConfig:
        """The config's ``evaluation`` section (any key left out takes its default)."""
        return from_dict(cls, section, "evaluation")
