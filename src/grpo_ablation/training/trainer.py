"""A GRPOTrainer that trains exactly the declared objective.

TRL's GRPOTrainer (1.16) computes advantages inline in ``_generate_and_score_completions`` (sample
std + 1e-4 only) and aggregates the loss in ``_compute_loss`` by ``loss_type``. This subclass keeps
TRL's sampling, reward calls, reference model, logging and checkpointing, and replaces only:

* the advantages, by ``objective.group_advantages`` on the gathered generation batch;
* the aggregation, by per-completion coefficients from ``objective.completion_coefficients``
  computed at generation time from the lengths of the *whole* generation batch (all ranks), so
  any split into accumulation steps or processes gives the same gradient;
* the draw of each token, when ``sampler`` is ``keyed``: a Gumbel-max draw keyed by the
  completion it belongs to (:mod:`grpo_ablation.keyed_sampling`), so cells with one seed share
  their random numbers; the sampling distribution is unchanged (with vLLM: each request seeded by
  its completion's key);
* the bookkeeping: a rollout log row per completion, per-step diagnostics under honest names
  (ratio clipping is never called truncation), scoring failures counted instead of crashing.

TRL's vLLM importance-sampling correction (every ``vllm_importance_sampling_mode``) is kept: the
ratio TRL computes at generation multiplies the policy term of the loss, as in TRL's own loss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from grpo_ablation.design.options import (
    TRL_ATTRIBUTES,
    ComputeConfig,
    TrainingConfig,
    check_generation,
)
from grpo_ablation.keyed_sampling import (
    KeyedGumbel,
    picking_greedily,
    seeded_requests,
    stream_seeds,
    training_keys,
)
from grpo_ablation.layout import METRICS_LOG, ROLLOUTS
from grpo_ablation.objective.conventions import GROUP_CATEGORIES, log_ratio, policy_ratio
from grpo_ablation.objective.formulas import (
    completion_coefficients,
    group_advantages,
    group_categories,
    rank_loss_scale,
    zero_variance_groups,
)
from grpo_ablation.training.generation import GenerationWeights, compile_generation
from grpo_ablation.training.rollout_log import RolloutLog
from grpo_ablation.training.step_timing import StepTimer


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite: training stops, earlier checkpoints are kept."""


class SafeReward:
    """Wraps a TRL-style reward function so that a sample it cannot score becomes data.

    A function that raises for the batch is called again sample by sample; a sample that raises
    or returns None (or a non-finite number) gets reward None (NaN in TRL) and its reason is kept
    in ``last_failures`` for the rollout log.
    """

    def __init__(self, func: Callable[..., list[float | None]]) -> None:
        self.func = func
        self.__name__ = getattr(func, "__name__", type(func).__name__)
        self.last_failures: list[str | None] = []

    def __call__(self, prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
        try:
            values = list(self.func(prompts=prompts, completions=completions, **kwargs))
            if len(values) != len(prompts):
                raise ValueError(f"returned {len(values)} rewards for {len(prompts)} completions")
        except Exception:
            values = [self._one(prompts, completions, kwargs, i) for i in range(len(prompts))]
            return self._finish(values)
        return self._finish([(v, None) for v in values])

    def _one(self, prompts, completions, kwargs, i) -> tuple[float | None, str | None]:
        sliced = {
            k: (v[i : i + 1] if isinstance(v, list) and len(v) == len(prompts) else v)
            for k, v in kwargs.items()
        }
        try:
            (value,) = self.func(
                prompts=prompts[i : i + 1], completions=completions[i : i + 1], **sliced
            )
            return value, None
        except Exception as exc:  # a verifier bug or timeout is a scoring failure, not a crash
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            return None, last

    def _finish(self, pairs: list[tuple[float | None, str | None]]) -> list[float | None]:
        out, reasons = [], []
        for value, reason in pairs:
            if reason is None and (value is None or not math.isfinite(float(value))):
                reason = f"reward function returned {value!r}"
            out.append(None if reason else float(value))
            reasons.append(reason)
        self.last_failures = reasons
        return out


def _positions_from_mask(module, args, kwargs):
    """Forward pre-hook: position ids counted over attended tokens, as ``generate`` does."""
    mask = kwargs.get("attention_mask")
    if mask is not None and kwargs.get("position_ids") is None:
        positions = mask.long().cumsum(-1) - 1
        kwargs["position_ids"] = positions.masked_fill(mask == 0, 0)
    return args, kwargs


class EpochSeededRepeatSampler(RepeatSampler):
    """TRL's RepeatSampler draws each epoch's order from one running generator, so a run resumed
    mid-training (new sampler, fresh generator) would see a different prompt order than an
    uninterrupted one. Seeding the order from (seed, epoch) makes it a function of the epoch.
    The pair is hashed (``hash_seed``), not added: with ``seed + epoch`` seed s's second epoch
    would repeat seed s + 1's first order, and runs of neighbouring seeds would share prompts."""

    def set_epoch(self, epoch: int) -> None:
        if self.shuffle:
            self.generator.manual_seed(hash_seed(self.seed or 0, epoch))


def hash_seed(*parts: int) -> int:
    """A 63-bit seed from integers, the same in every process and Python run."""
    digest = hashlib.sha256(",".join(str(int(p)) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class _Batch:
    """One generated and scored generation batch: TRL's output, what the trainer captured, the
    rewards (NaN: unscored) and the prompt ids, with its groups' mixed flags.

    Mixed here means not zero-variance (``zero_variance_groups``): the group's scored rewards
    differ, so its advantages carry signal. A group with a failed score is mixed when two of its
    scored rewards differ (its category is still ``failed_scoring``)."""

    def __init__(self, out: dict, cap: dict, rewards: torch.Tensor, ids: list[str], G: int):
        self.out, self.cap, self.rewards, self.ids = out, cap, rewards, ids
        self.mixed = ~zero_variance_groups(rewards, G)[::G]  # one flag per group
        self.n_groups = len(self.mixed)
        self.n_mixed = int(self.mixed.sum())


# TRL's per-row outputs: prompt-aligned (left-padded) and completion-aligned (right-padded).
_PROMPT_KEYS = ("prompt_ids", "prompt_mask")


def _select_mixed(
    batches: list[_Batch], G: int, pad_id: int
) -> tuple[dict, torch.Tensor, list[tuple[int, int]]]:
    """The training batch of a resampled step: the first ``n_groups`` mixed groups in generation
    order and, if they fall short, the first batch's zero-variance groups in order (the caller
    filters those out of the loss). Returns TRL's output dict for those rows, their rewards, and
    the (batch, group) chosen, in batch order."""
    n = batches[0].n_groups
    chosen = [(k, g) for k, b in enumerate(batches) for g in range(b.n_groups) if b.mixed[g]][:n]
    if len(chosen) < n:
        filler = [(0, g) for g in range(n) if not batches[0].mixed[g]]
        chosen += filler[: n - len(chosen)]
    rows = {k: [] for k in range(len(batches))}
    order = []
    for k, g in chosen:
        order.append((k, len(rows[k]) // G))
        rows[k] += list(range(g * G, (g + 1) * G))
    out: dict[str, Any] = {}
    first = batches[0].out
    for key, value in first.items():
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            out[key] = value
            continue
        parts = []
        for k, b in enumerate(batches):
            if rows[k]:
                parts.append(b.out[key][rows[k]])
        width = max(p.shape[1] for p in parts) if value.dim() > 1 else 0
        padded = []
        for p in parts:
            missing = width - p.shape[1] if value.dim() > 1 else 0
            if missing:
                fill = pad_id if key in ("prompt_ids", "completion_ids") else 0
                shape = (p.shape[0], missing, *p.shape[2:])
                pad = torch.full(shape, fill, dtype=p.dtype, device=p.device)
                p = torch.cat([pad, p] if key in _PROMPT_KEYS else [p, pad], dim=1)
            padded.append(p)
        out[key] = torch.cat(padded)
    # Rows are stacked batch by batch: put the groups back in their chosen order.
    starts = {}
    at = 0
    for k in range(len(batches)):
        starts[k] = at
        at += len(rows[k])
    index = torch.tensor(
        [starts[k] + j * G + c for k, j in order for c in range(G)], dtype=torch.long
    )
    for key, value in out.items():
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            out[key] = value[index.to(value.device)]
    rewards = torch.cat([batches[k].rewards[g * G : (g + 1) * G] for k, g in chosen])
    return out, rewards, chosen


def _logged_batches(
    batches: list[_Batch],
    chosen: list[tuple[int, int]],
    advantages: torch.Tensor,
    in_loss: torch.Tensor,
    G: int,
) -> list[tuple[_Batch, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per generated batch, its rows' advantage and in_loss in the training batch (NaN and False
    for rows that stayed out) and whether they are in it."""
    logged = []
    for k, b in enumerate(batches):
        n = len(b.rewards)
        adv = torch.full((n,), math.nan, dtype=torch.float64)
        loss = torch.zeros(n, dtype=torch.bool)
        used = torch.zeros(n, dtype=torch.bool)
        for position, (kk, g) in enumerate(chosen):
            if kk == k:
                rows = slice(g * G, (g + 1) * G)
                at = slice(position * G, (position + 1) * G)
                adv[rows] = advantages[at].double().cpu()
                loss[rows] = in_loss[at].cpu()
                used[rows] = True
        logged.append((b, adv, loss, used))
    return logged


@contextlib.contextmanager
def _replaced(obj: Any, name: str, value: Any) -> Iterator[None]:
    """``obj.<name>`` is ``value`` inside the block, and what it was (an instance attribute, or the
    class's) afterwards."""
    own = obj.__dict__.get(name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if own is None:
            delattr(obj, name)
        else:
            setattr(obj, name, own)


class AblationGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages and loss aggregation are the declared ones.

    Args beyond GRPOTrainer's: ``options``, the run's ``TrainingConfig`` (the trainer reads its
    objective: std scaling, aggregation, zero-variance groups, the sampler, the success
    threshold; GRPOConfig carries the rest), ``run_dir``, where rollouts and metrics go, and
    ``compute``, the config's compute section (its generation options; GRPOConfig carries the
    cache implementation).
    """

    def __init__(
        self,
        *args: Any,
        options: TrainingConfig,
        run_dir: Path,
        reward_funcs: Callable | list[Callable],
        compute: ComputeConfig | None = None,
        **kwargs: Any,
    ) -> None:
        funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
        self.safe_rewards = [
            SafeReward(f) if callable(f) and not isinstance(f, str) else f for f in funcs
        ]
        self._unwrap_cache: dict[int, tuple[Any, Any]] = {}
        super().__init__(*args, reward_funcs=self.safe_rewards, **kwargs)
        if self.args.steps_per_generation != self.args.gradient_accumulation_steps:
            raise ValueError(
                "steps_per_generation must equal gradient_accumulation_steps: the loss normaliser "
                "spans one generation batch, which must be one optimizer step"
            )
        self.options = options
        differ = {
            ours: (getattr(options, ours), getattr(self, theirs))
            for ours, theirs in TRL_ATTRIBUTES.items()
            if getattr(options, ours) != getattr(self, theirs)
        }
        if differ:
            raise ValueError(
                "the training options and TRL's arguments disagree (options, TRL): "
                + ", ".join(f"{k} {v}" for k, v in differ.items())
                + "; the record would state an objective the trainer does not train"
            )
        if options.zero_variance == "resample" and self.accelerator.num_processes > 1:
            raise ValueError(
                "zero_variance 'resample' selects mixed groups over the whole generation batch "
                "and runs in one process; set compute.processes_per_train_job: 1"
            )
        if options.sampler == "keyed" and self.use_vllm and not self._vllm_one_engine_per_process():
            raise ValueError(
                "sampler 'keyed' with vLLM seeds each request of a colocated engine with one "
                "process per engine (vllm_mode colocate, tensor parallel size 1); with "
                f"vllm_mode={self.vllm_mode!r}, tensor_parallel_size="
                f"{self.vllm_tensor_parallel_size} set training.sampler: stream"
            )
        self.compute = compute or ComputeConfig()
        check_generation(self.compute, options)
        if not self.use_vllm:
            compile_generation(self.generation_config, self.compute.generation_cache)
        self._generation_weights = (
            GenerationWeights() if self.compute.generation_weights == "bfloat16" else None
        )
        self._keys: list[int] | None = None
        self.run_dir = Path(run_dir)
        self.rollout_log = RolloutLog(self.run_dir / ROLLOUTS, self.accelerator.process_index)
        self.metrics_path = self.run_dir / METRICS_LOG
        self._captured: dict[str, Any] = {}

    def _vllm_one_engine_per_process(self) -> bool:
        """A colocated vLLM engine without tensor parallelism: this process seeds its requests."""
        return bool(
            self.use_vllm and self.vllm_mode == "colocate" and self.vllm_tensor_parallel_size == 1
        )

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        return EpochSeededRepeatSampler(
            data_source=sampler.data_source,
            mini_repeat_count=sampler.mini_repeat_count,
            batch_size=sampler.batch_size,
            repeat_count=sampler.repeat_count,
            shuffle=sampler.shuffle,
            seed=sampler.seed,
        )

    def _unwrapped(self, model: Any) -> Any:
        """``accelerator.unwrap_model(model)``, remembered per wrapper object: accelerate looks up
        installed packages and walks every submodule on each call, twice a step here."""
        hit = self._unwrap_cache.get(id(model))
        if hit is None or hit[0] is not model:
            hit = self._unwrap_cache[id(model)] = (model, self.accelerator.unwrap_model(model))
        return hit[1]

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, *args, **kwargs):
        # TRL scores left-padded rows without position ids, so a model with absolute positions
        # (GPT-2) sees a shorter prompt at shifted positions, unlike in `generate`, which derives
        # positions from the attention mask. Give the scoring pass the positions of sampling.
        inner = self._unwrapped(model)
        rows = self.options.scoring_batch_size
        if rows:
            # At most ``rows`` completions per forward pass (TRL's generation-time passes ask for
            # the micro-batch; the loss's pass, for every row it is given).
            kwargs["batch_size"] = min(kwargs.get("batch_size") or input_ids.size(0), rows)
        handle = inner.register_forward_pre_hook(_positions_from_mask, with_kwargs=True)
        try:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, *args, **kwargs
            )
        finally:
            handle.remove()

    # -- scoring -----------------------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        failures = [None] * len(prompts)
        for func in self.safe_rewards:
            if isinstance(func, SafeReward):
                for i, reason in enumerate(func.last_failures):
                    failures[i] = failures[i] or reason
        self._captured = {
            "inputs": inputs,
            "prompts": prompts,
            "completions": completions,
            "completion_ids": completion_ids_list,
            "rewards_per_func": rewards_per_func,
            "failures": failures,
        }
        return rewards_per_func

    # -- sampling ----------------------------------------------------------------------------
    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        keys = self._keys
        if keys is None and self._vllm_one_engine_per_process():
            # sampler "stream": seeds from the run's own stream (stream_seeds says why).
            keys = stream_seeds(len(prompt_ids), self.accelerator.process_index)
        copy = self._generation_weights
        if keys is None and copy is None:
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)
        if self.use_vllm:
            # The colocated engine generates this rank's rows (one request each, n = 1) with the
            # one SamplingParams TRL builds: hand it one seeded copy per request instead.
            target = self.vllm_generation.llm
            generate = target.generate

            def keyed(prompts, *a, sampling_params, **kw):
                seeded = seeded_requests([sampling_params] * len(prompts), keys)
                return generate(prompts, *a, sampling_params=seeded, **kw)

        else:
            # TRL calls `generate` with its own arguments only: give this call the keyed processor,
            # and the bfloat16 copy's generate where generation_weights asks for it.
            target = self._unwrapped(self.model)
            policy = target if copy is None else self._generation_copy(copy, target)
            generate = policy.generate
            processors = []
            if keys is not None:
                horizon = self.max_completion_length
                processors = [KeyedGumbel(keys, self.temperature, horizon=horizon)]

            def keyed(*a, generation_config=None, **kw):
                if generation_config is None:
                    generation_config = target.generation_config
                if processors:
                    generation_config = picking_greedily(generation_config)
                    kw["logits_processor"] = processors
                return generate(*a, generation_config=generation_config, **kw)

        with _replaced(target, "generate", keyed):
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)

    def _generation_copy(self, copy: GenerationWeights, target: Any) -> Any:
        """The bfloat16 copy holding this step's weights; when first made, a step timer among the
        callbacks times its generate as it times the policy's."""
        new = copy.model is None
        policy = copy.policy(target, self.state.global_step)
        if new:
            for callback in self.callback_handler.callbacks:
                if isinstance(callback, StepTimer):
                    callback.time_generate(policy)
        return policy

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        first = self._generate_batch(inputs, [])
        batches = [first]
        if self.options.zero_variance == "resample":
            # DAPO's dynamic sampling: fresh prompts until the step holds its mixed groups.
            while sum(b.n_mixed for b in batches) < first.n_groups and (
                len(batches) < self.options.max_generation_batches
            ):
                extra = self._fresh_prompts(len(batches), len(inputs) // self.num_generations)
                batches.append(self._generate_batch(extra, [b.ids for b in batches]))
            out, rewards, chosen = _select_mixed(batches, self.num_generations, self._pad_ids())
        else:
            out, rewards, chosen = first.out, first.rewards, None
        G = self.num_generations
        advantages = group_advantages(
            rewards.double(),
            G,
            self.options.std_scaling,
            self.options.std_eps,
            self.options.baseline,
        )

        local_n = len(rewards) // self.accelerator.num_processes
        offset = self.accelerator.process_index * local_n
        local = slice(offset, offset + local_n)
        out["advantages"] = advantages[local].to(out["advantages"].dtype)

        # The normaliser of the whole generation batch: lengths of every rank's completions.
        local_lengths = out["completion_mask"].sum(dim=1)
        lengths = self.accelerator.gather(local_lengths)
        # filter (and resample's filler groups): zero-variance groups leave the loss and its
        # normaliser (logged, marked)
        in_loss = (
            ~zero_variance_groups(rewards, G).to(lengths.device)
            if self.options.zero_variance in ("filter", "resample")
            else torch.ones_like(lengths, dtype=torch.bool)
        )
        coef = completion_coefficients(
            lengths, self.options.aggregation, G, self.max_completion_length, in_loss
        )
        out["loss_coef"] = coef[local].to(torch.float32)
        if "num_items_in_batch" in out:  # TRL's token count, of the batch as trained
            out["num_items_in_batch"] = self.accelerator.gather(local_lengths.sum()).sum()

        if chosen is None:
            self._record_generation([(first, advantages, in_loss.cpu(), None)], local)
        else:
            self._record_generation(
                _logged_batches(batches, chosen, advantages, in_loss.cpu(), G), local
            )
        return out

    def _generate_batch(self, inputs, earlier: list[list[str]]) -> _Batch:
        """Generate and score one generation batch; ``earlier``: the prompt ids of the batches
        generated before it in this step (resample), whose keys its own must not repeat."""
        if self.options.sampler == "keyed":
            # Keys over the whole generation batch (every rank's prompt ids, in rank order: rank r
            # holds rows r * n ... r * n + n - 1), so a prompt's occurrence and slot are global;
            # a further batch of the step continues the count (a prompt drawn again is its next
            # occurrence), so the first batch's keys are those of a step without resampling.
            ids = gather_object([str(x.get("prompt_id", x["prompt"])) for x in inputs])
            before = [i for batch in earlier for i in batch]
            offset = self.accelerator.process_index * len(inputs)
            # The generation's index, not the optimizer step: with mu update epochs per batch a
            # cell generates every mu steps, on the prompts its reference generates on at step k.
            generation = self.state.global_step // self.num_iterations
            keys = training_keys(self.args.seed, generation, before + ids, self.num_generations, 0)
            keys = keys[len(before) :]
            self._keys = keys[offset : offset + len(inputs)]
        else:
            ids = [str(x.get("prompt_id", x["prompt"])) for x in inputs]
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self._keys = None
        cap = self._captured
        # A completion is unscored if any reward function failed on it (the reward would be partial).
        per_func = cap["rewards_per_func"]
        weights = self.reward_weights.to(per_func.device)
        rewards = (per_func * weights).sum(dim=1)
        rewards[torch.isnan(per_func).any(dim=1)] = torch.nan
        return _Batch(out, cap, rewards, ids, self.num_generations)

    def _fresh_prompts(self, batch: int, n_prompts: int) -> list[dict[str, Any]]:
        """The prompts of a further generation batch: ``n_prompts`` distinct rows of the training
        set drawn by a generator keyed by (seed, generation, batch), each repeated G times as the
        sampler repeats them. A function of those three only, so a resumed run draws the same."""
        generation = self.state.global_step // self.num_iterations
        rng = torch.Generator().manual_seed(hash_seed(self.args.seed, generation, batch))
        order = torch.randperm(len(self.train_dataset), generator=rng)[:n_prompts].tolist()
        return [self.train_dataset[i] for i in order for _ in range(self.num_generations)]

    def _pad_ids(self) -> int:
        pad = self.processing_class.pad_token_id
        return int(pad if pad is not None else self.eos_token_ids[0])

    def _record_generation(self, logged: list[tuple[_Batch, Any, Any, Any]], local) -> None:
        """One rollout row per generated completion and the step's diagnostics. ``logged`` holds
        (batch, advantages, in_loss, in_batch) per generation batch of the step: the training
        batch's values for its rows; resample's rows that stayed out of the batch log a NaN
        advantage, in_loss and in_batch False."""
        G = self.num_generations
        eos = set(self.eos_token_ids)
        step = self.state.global_step
        rows = []
        groups_before = 0
        rank = self.accelerator.process_index
        all_categories: list[str] = []
        all_correct = []
        for k, (batch, advantages, in_loss, in_batch) in enumerate(logged):
            cap, rewards = batch.cap, batch.rewards
            ids = cap["completion_ids"]
            categories = group_categories(rewards.float().cpu(), G, self.options.success_threshold)
            correct_all = (rewards >= self.options.success_threshold).cpu()
            all_categories += categories
            all_correct.append(correct_all)
            # Python values of the whole batch at once (one copy each, not one per row).
            reward_values, correct_values = rewards.tolist(), correct_all.tolist()
            advantage_values, in_loss_values = advantages.tolist(), in_loss.tolist()
            in_batch_values = None if in_batch is None else in_batch.tolist()
            rows_local = range(local.start, local.stop) if k == 0 else range(len(ids))
            for j, i in enumerate(rows_local):
                reward = reward_values[i]
                failed = math.isnan(reward)
                x = cap["inputs"][j]
                rows.append(
                    {
                        "step": step,
                        "rank": rank,
                        "prompt_id": str(x.get("prompt_id", x["prompt"])),
                        "group_index": groups_before + i // G,
                        "completion_index": i % G,
                        "prompt": cap["prompts"][j],
                        "completion": cap["completions"][j],
                        "reward": None if failed else reward,
                        "scoring_failure": (cap["failures"][j] or "reward is NaN")
                        if failed
                        else None,
                        "correct": None if failed else correct_values[i],
                        "length": len(ids[j]),
                        "truncated": not ids[j] or ids[j][-1] not in eos,
                        "advantage": advantage_values[i],
                        "group_category": categories[i // G],
                        "in_loss": in_loss_values[i],
                        "generation_batch": k,
                        "in_batch": True if in_batch_values is None else in_batch_values[i],
                    }
                )
            groups_before += len(rewards) // G
        self.rollout_log.append(rows)

        # Over every generated completion of the step (resample: every batch).
        first = logged[0][0]
        token_lengths = [len(c) for c in first.cap["completion_ids"]]
        truncated_local = [not c or c[-1] not in eos for c in first.cap["completion_ids"]]
        rewards = torch.cat([b.rewards for b, *_ in logged])
        in_loss = torch.cat([torch.as_tensor(x) for _, _, x, _ in logged])
        extra = [len(c) for b, *_ in logged[1:] for c in b.cap["completion_ids"]]
        extra_trunc = [
            not c or c[-1] not in eos for b, *_ in logged[1:] for c in b.cap["completion_ids"]
        ]
        # the batches' groups and rows in order: their labels are those computed above
        categories, correct_all = all_categories, torch.cat(all_correct)
        if len(logged) > 1 or logged[0][3] is not None:
            self._metrics["train"]["resample/generation_batches"].append(float(len(logged)))
        # Batch-level diagnostics over all ranks (the same numbers on every rank).
        dev = self.accelerator.device
        lengths = self.accelerator.gather(torch.tensor(token_lengths, device=dev)).float().cpu()
        truncated = self.accelerator.gather(torch.tensor(truncated_local, device=dev)).cpu()
        lengths = torch.cat([lengths, torch.tensor(extra, dtype=torch.float32)])
        truncated = torch.cat([truncated, torch.tensor(extra_trunc, dtype=torch.bool)])
        finite = ~torch.isnan(rewards.cpu())
        correct = correct_all & finite
        incorrect = ~correct_all & finite
        counts = Counter(categories)
        m = self._metrics["train"]
        n_groups = len(categories)
        for cat in GROUP_CATEGORIES:
            m[f"groups/{cat}"].append(counts.get(cat, 0) / n_groups)
        # the optimizer-side budget: the share of the generated groups the loss counts
        m["groups/in_loss"].append(in_loss.float().mean().item())
        # Zero-variance groups, the ones filter drops: scored rewards all equal, or fewer than two
        # (each batch's groups not mixed, ``_Batch``).
        zero_std = sum(b.n_groups - b.n_mixed for b, *_ in logged)
        m["groups/zero_std_fraction"].append(zero_std / n_groups)
        m["truncation_rate"].append(truncated.float().mean().item())
        m["scoring_failure_rate"].append((~finite).float().mean().item())
        m["length/correct"].append(lengths[correct].mean().item() if correct.any() else math.nan)
        m["length/incorrect"].append(
            lengths[incorrect].mean().item() if incorrect.any() else math.nan
        )
        m["length/all"].append(lengths.mean().item())
        m["accuracy/train_sampled"].append(
            correct.float().sum().item() / max(1, finite.sum().item())
        )

    # -- loss --------------------------------------------------------------------------------
    def _compute_loss(self, model, inputs):
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, mask], dim=1)
        logps, entropies, _ = self._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True
        )
        old = inputs.get("old_per_token_logps")
        old = logps.detach() if old is None else old
        adv = inputs["advantages"].unsqueeze(1)
        # When vLLM generates, TRL's generation step computes the importance-sampling ratio between
        # the trainer's and vLLM's token probabilities (truncated or masked as
        # vllm_importance_sampling_mode says) and TRL's loss multiplies the policy term by it,
        # before the KL term (VESPO folds it into its weight); kept here the same way, so the
        # correction survives the project loss.
        is_ratio = inputs.get("importance_sampling_ratio")
        term = policy_ratio(self.options.ratio)
        per_token = term.loss(logps, old, adv, mask, self.options, is_ratio)
        if is_ratio is not None and not term.folds_is_ratio:
            per_token = per_token * is_ratio
        per_token = per_token.expand_as(logps)  # a term per completion counts on every token
        ratio = log_ratio(logps, old, mask, self.options.ratio_level).exp().expand_as(logps)
        if self.beta != 0.0:
            ref = inputs["ref_per_token_logps"]
            kl = torch.exp(ref - logps) - (ref - logps) - 1  # k3 estimator (Schulman)
            per_token = per_token + self.beta * kl
        # Masked slots contribute nothing, even where their terms are not finite (a resampled
        # batch pads its completions, and the KL of a padding slot can overflow).
        per_token = per_token.masked_fill(mask == 0, 0.0)
        weights = inputs["loss_coef"].unsqueeze(1) * mask
        # This rank's share of the global weighted sum; DDP averages gradients over ranks, so the
        # share is scaled by the number of processes. Accumulation steps add up (no division:
        # GRPOTrainer sets loss_is_scaled_for_ga).
        loss = (weights * per_token).sum() * rank_loss_scale(self.accelerator.num_processes)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(
                f"non-finite loss ({loss.item()}) at step {self.state.global_step}; "
                "training stopped, the checkpoints saved so far are kept"
            )

        m = self._metrics["train" if self.model.training else "eval"]
        fmask = mask.float()
        # Token means over every rank's completions: the masked sums and the token count in one
        # reduction and one copy to Python.
        logged = {
            "ratio_clip/low": ((ratio < 1 - self.epsilon_low) & (adv < 0)).float(),
            "ratio_clip/high": ((ratio > 1 + self.epsilon_high) & (adv > 0)).float(),
            "entropy": entropies.detach(),
        }
        if self.beta != 0.0:
            logged["kl"] = kl.detach()
        totals = torch.stack([(x * fmask).sum() for x in logged.values()] + [fmask.sum()])
        totals = self.accelerator.reduce(totals, reduction="sum")
        means = (totals[:-1] / totals[-1].clamp(min=1.0)).tolist()
        for name, value in zip(logged, means, strict=True):
            m[name].append(value)
        return loss

    # -- logging -----------------------------------------------------------------------------
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        super().log(logs, start_time)
        if self.accelerator.is_main_process and "loss" in logs:
            # TRL names truncation "completions/clipped_ratio"; the project reports it as
            # truncation_rate and keeps "clip" for the probability ratio alone.
            row = {"step": self.state.global_step}
            row.update((k, v) for k, v in logs.items() if "clipped_ratio" not in k)
            row = {
                k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()
            }
            with self.metrics_path.open("a") as fh:
                fh.write(json.dumps(row, sort_keys=True) + "\n")
